"""Fault injection into dvtool's Iceberg commits through a SQL catalog (JdbcCatalog, SQLite).

The companion of test_iceberg_faults.py (path tables; its docstring says what is checked)
for the steps only a catalog table reaches (`delete`; `optimize --purge` at its commit): a
format-version 3 table's commit writes the new `{N:05d}-<uuid>.metadata.json` itself (step
`iceberg-metadata-written`) and then moves the catalog's row (`UPDATE ... WHERE
metadata_location = <base>`, step `commit`); a v2 table's commit is pyiceberg's
`SqlCatalog.commit_table` (step `commit`). Tables written by Iceberg Spark in the
`iceberg_sql_catalog` fixture's catalog (`sqlcat`), deleted from with `python -m dvtool
delete --catalog sqlcat ...` (the catalog configured by `PYICEBERG_CATALOG__SQLCAT__*`).
Each case lays the table's files anew from a pristine copy and points the catalog's row back
at its metadata file.

After each: Iceberg Spark and every oracle (through the catalog) read the rows before or
after; `inspect --verify` is clean; after an attempt not killed, every file it added is
one the table's metadata reaches (the cleanup rule), after a killed one a vacuum leaves
none that it does not; the command run again reaches the after state.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from dvtool import faults
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_catalogs import CatalogTable, build_in_catalog
from tests.reference.iceberg_state import agreed_rows, referenced_files, table_tree, unreferenced
from tests.reference.iceberg_tables import STEPS, TableSpec, expected_rows
from tests.reference.iceberg_writes import cli_json

WHERE = "id % 5 = 1 OR v < 0"
SIGNAL_EXITS = {"sigint": 130, "sigterm": 143}
Row = dict[str, Any]

# (format version, step, kinds)
CASES = (
    (3, "data-files-written", ("fail",)),
    (3, "iceberg-metadata-written", ("kill", "fail", "sigterm")),
    (3, "commit", ("kill", "fail", "timeout", "sigint")),
    (3, "committed", ("kill",)),
    (2, "commit", ("kill", "fail", "timeout")),
)


def _params() -> Iterator[Any]:
    for version, step, kinds in CASES:
        for kind in kinds:
            yield pytest.param(version, step, kind, id=f"v{version}-{step}-{kind}")


@dataclass
class CatalogCopy:
    """A table in the SQL catalog, its pristine files and catalog row, and the rows a
    clean delete leaves."""

    catalog: CatalogTable
    identifier: str
    folder: Path
    pristine: Path
    metadata: str
    after: list[Row] | None = None

    @property
    def spark_name(self) -> str:
        return f"{self.catalog.name}.{self.identifier}"

    @property
    def args(self) -> list[str]:
        return ["delete", "--catalog", self.catalog.name, self.identifier, "--where", WHERE]

    def load(self) -> Table:
        return load_catalog(self.catalog.name, **self.catalog.properties).load_table(
            self.identifier
        )

    def restore(self) -> None:
        """The table as built: its files, and the catalog's row naming its metadata."""
        shutil.rmtree(self.folder)
        shutil.copytree(self.pristine, self.folder, symlinks=True)
        namespace, name = self.identifier.split(".")
        database = self.catalog.properties["uri"].removeprefix("sqlite:///")
        with sqlite3.connect(database) as db:
            db.execute(
                "UPDATE iceberg_tables SET metadata_location = ?, "
                "previous_metadata_location = NULL "
                "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                (self.metadata, self.catalog.name, namespace, name),
            )


def _environment(catalog: CatalogTable) -> dict[str, str]:
    return {
        f"PYICEBERG_CATALOG__{catalog.name.upper()}__{key.upper()}": value
        for key, value in catalog.properties.items()
    }


@pytest.fixture(scope="module")
def sql_tables(
    iceberg_sql_catalog: CatalogTable,
    iceberg_spark: JvmSession,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[int, CatalogCopy]:
    """A v2 and a v3 table (partitioned by `cat`) in the fixture's SQL catalog."""
    copies = {}
    for version in (2, 3):
        spec = TableSpec(f"faults_v{version}", version, "cat", STEPS)
        identifier, metadata = build_in_catalog(iceberg_spark, iceberg_sql_catalog.name, spec)
        copy = CatalogCopy(iceberg_sql_catalog, identifier, Path(), Path(), metadata)
        copy.folder = Path(copy.load().metadata.location.removeprefix("file:"))
        copy.pristine = tmp_path_factory.mktemp("pristine") / f"v{version}"
        shutil.copytree(copy.folder, copy.pristine, symlinks=True)
        assert agreed_rows(iceberg_spark, copy.load(), copy.spark_name) == expected_rows(spec)
        copies[version] = copy
    return copies


@pytest.fixture
def configured(iceberg_sql_catalog: CatalogTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog configured for in-process dvtool runs."""
    from pyiceberg.utils.config import Config

    for key, value in _environment(iceberg_sql_catalog).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("pyiceberg.catalog._ENV_CONFIG", Config())


def _after(copy: CatalogCopy, session: JvmSession) -> list[Row]:
    """The rows a clean delete leaves (run once on the restored table)."""
    if copy.after is None:
        copy.restore()
        before = agreed_rows(session, copy.load(), copy.spark_name)
        cli_json(*copy.args)
        copy.after = agreed_rows(session, copy.load(), copy.spark_name)
        assert copy.after == [r for r in before if not (r["id"] % 5 == 1 or r["v"] < 0)]
    return copy.after


def _run_with_fault(
    copy: CatalogCopy, rule: str, log: Path, args: list[str] | None = None
) -> tuple[int, str]:
    """dvtool with `args` (default: the copy's delete) and the fault `rule` armed."""
    env = {**os.environ, **_environment(copy.catalog), faults.ENV: rule, faults.LOG_ENV: str(log)}
    proc = subprocess.run(
        [sys.executable, "-m", "dvtool", *(args or copy.args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert "internal error" not in output and "Traceback" not in output, output
    return proc.returncode, proc.stderr


@pytest.mark.usefixtures("configured")
@pytest.mark.parametrize(("version", "step", "kind"), list(_params()))
def test_catalog_fault(
    version: int,
    step: str,
    kind: str,
    sql_tables: dict[int, CatalogCopy],
    iceberg_spark: JvmSession,
    tmp_path: Path,
) -> None:
    copy = sql_tables[version]
    after = _after(copy, iceberg_spark)
    copy.restore()
    before = agreed_rows(iceberg_spark, copy.load(), copy.spark_name)
    files = table_tree(copy.folder)
    fired = tmp_path / "fired.log"
    code, stderr = _run_with_fault(copy, f"{step}:{kind}", fired)
    assert fired.read_text().split() == [step, kind], "the fault never fired"

    table = copy.load()
    rows = agreed_rows(iceberg_spark, table, copy.spark_name)
    assert rows in (before, after)
    _check_exit(kind, code, stderr, rows == after)
    doc = cli_json("inspect", "--catalog", copy.catalog.name, copy.identifier, "--verify")
    assert doc["verify"]["problems"] == [], doc["verify"]
    added = table_tree(copy.folder) - files
    if kind != "kill":  # the cleanup rule
        left = added - referenced_files(copy.folder, table.metadata_location)
        assert not left, sorted(left)

    cli_json(*copy.args)
    table = copy.load()
    assert agreed_rows(iceberg_spark, table, copy.spark_name) == after
    if kind == "kill":
        vacuum = ["vacuum", "--catalog", copy.catalog.name, copy.identifier]
        cli_json(*vacuum, "--retain", "0h", "--force")
        assert unreferenced(copy.folder, copy.load().metadata_location) == set()


def _check_exit(kind: str, code: int, stderr: str, landed: bool) -> None:
    if kind == "kill":
        assert code == -signal.SIGKILL
    if code == 0:
        assert landed, stderr
    if kind in SIGNAL_EXITS:
        assert code in (0, SIGNAL_EXITS[kind]), (code, stderr)
        if "before committing" in stderr:
            assert not landed, stderr
        elif code != 0:
            assert "after committing" in stderr and landed, stderr


PURGE_CASES = (
    (3, "iceberg-metadata-written", "fail"),
    (3, "commit", "kill"),
    (3, "commit", "timeout"),
    (2, "commit", "fail"),
    (2, "commit", "timeout"),
)


@pytest.mark.usefixtures("configured")
@pytest.mark.parametrize(
    ("version", "step", "kind"),
    [pytest.param(*case, id=f"v{case[0]}-{case[1]}-{case[2]}") for case in PURGE_CASES],
)
def test_catalog_fault_in_purge(
    version: int,
    step: str,
    kind: str,
    sql_tables: dict[int, CatalogCopy],
    iceberg_spark: JvmSession,
    tmp_path: Path,
) -> None:
    """`optimize --purge` through the catalog with a fault at its commit: the rows never
    change, the table verifies, a failed attempt leaves none of its files, a lost answer is
    resolved (the commit landed: exit 0), and a run again purges every delete."""
    copy = sql_tables[version]
    copy.restore()
    purge = ["optimize", "--catalog", copy.catalog.name, copy.identifier, "--purge"]
    before = agreed_rows(iceberg_spark, copy.load(), copy.spark_name)
    files = table_tree(copy.folder)
    fired = tmp_path / "fired.log"
    code, stderr = _run_with_fault(copy, f"{step}:{kind}", fired, purge)
    assert fired.read_text().split() == [step, kind], "the fault never fired"
    table = copy.load()
    assert agreed_rows(iceberg_spark, table, copy.spark_name) == before
    if kind == "kill":
        assert code == -signal.SIGKILL
    elif kind == "timeout":
        assert code == 0, stderr  # the answer was lost; reading the table back finds it
        assert not table.inspect.delete_files().num_rows
    else:
        assert code not in (0, 70), stderr
        assert (
            referenced_files(copy.folder, table.metadata_location)
            >= table_tree(copy.folder) - files
        )
    doc = cli_json("inspect", "--catalog", copy.catalog.name, copy.identifier, "--verify")
    assert doc["verify"]["problems"] == [], doc["verify"]
    cli_json(*purge)
    table = copy.load()
    assert not table.inspect.delete_files().num_rows
    assert agreed_rows(iceberg_spark, table, copy.spark_name) == before
