"""`dvtool inspect PREFIX... --recursive` (and `dvtool.inspect_tables`): every table under a
prefix, its figures, its gates and the worst exit code, locally and on the moto S3 server.

The lake (built once per module, only read):

- `dv`: deltalake table of 200 rows in two files; `dvtool enable` and `dvtool delete` give
  one file a deletion vector deleting 30 rows;
- `group/many`: deltalake table of five appends (five files): fails `max-files=3`;
- `group/deeper/broken`: deltalake table whose commit 1 is cut in half (integrity, exit 6);
- `warehouse/ice`: Iceberg table written by pyiceberg (SqlCatalog on sqlite, its location
  inside the lake) in two appends;
- `_staging/t` and `.trash/t`: tables in hidden directories (never inspected), and a plain
  directory with a file.

Oracles: the single-table `dvtool inspect TABLE --json` of each table (the summary of a
table's entry must be exactly it), polars and deltalake for Delta's logical rows,
pyiceberg's scan (a `StaticTable` of the metadata file) for Iceberg's.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable

import dvtool
from dvtool.errors import exit_code_of
from tests.cli_helpers import all_output, run, run_wide
from tests.damaged_tables import truncate
from tests.s3_server import KEY_ID, REGION, SECRET, S3Server

GATES = [
    "--check",
    "max-deleted-ratio=0.2",
    "--check",
    "max-files=3",
    "--check",
    "max-log-files=100",  # Delta only
    "--check",
    "max-dangling-deletes=0",  # Iceberg only
]
FOUND = ["dv", "group/deeper/broken", "group/many", "warehouse/ice"]


@dataclass(frozen=True)
class Lake:
    root: Path
    ice_metadata: str

    def table(self, relative: str) -> Path:
        return self.root / relative


def _delta(path: Path, appends: int, rows: int = 100) -> Path:
    for i in range(appends):
        ids = pa.array(range(i * rows, (i + 1) * rows), pa.int64())
        write_deltalake(str(path), pa.table({"id": ids}), mode="append")
    return path


def _iceberg(path: Path, catalog_dir: Path, *, warehouse: str, **props: str) -> Any:
    """A path Iceberg table at `path` (a location URI) in two appends; the pyiceberg table."""
    catalog = SqlCatalog(
        "lake", uri=f"sqlite:///{catalog_dir}/catalog.db", warehouse=warehouse, **props
    )
    catalog.create_namespace("ns")
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("ns.ice", schema=schema, location=str(path))
    for lo in (0, 50):
        table.append(pa.table({"id": pa.array(range(lo, lo + 50), pa.int64())}))
    return catalog.load_table("ns.ice")


def _build(root: Path, catalog_dir: Path) -> Lake:
    dv = _delta(root / "dv", 2)
    dvtool.enable(dv)
    dvtool.delete(dv, "id < 30")
    _delta(root / "group" / "many", 5, rows=10)
    broken = _delta(root / "group" / "deeper" / "broken", 2)
    truncate(broken / "_delta_log" / "00000000000000000001.json")
    ice = _iceberg(f"file://{root}/warehouse/ice", catalog_dir, warehouse=f"file://{catalog_dir}")
    _delta(root / "_staging" / "t", 1)
    _delta(root / ".trash" / "t", 1)
    (root / "group" / "plain").mkdir()
    (root / "group" / "plain" / "notes.txt").write_text("not a table")
    return Lake(root, ice.metadata_location)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    base = tmp_path_factory.mktemp("inspect-tables")
    (base / "lake").mkdir()
    (base / "catalog").mkdir()
    return _build(base / "lake", base / "catalog")


def _json(*args: str | Path, code: int) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _by_location(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["location"]: t for t in doc["tables"]}


def _delta_rows(uri: str, options: dict[str, str] | None = None) -> int:
    """The table's logical rows; polars and deltalake must agree."""
    by_polars = pl.read_delta(uri, storage_options=options).height
    table = DeltaTable(uri, storage_options=options)
    reader = QueryBuilder().register("t", table).execute("select count(*) as n from t")
    by_deltalake = pa.table(reader.read_all()).column("n")[0].as_py()
    assert by_polars == by_deltalake
    return int(by_polars)


def _iceberg_rows(metadata_location: str, **props: str) -> int:
    return StaticTable.from_metadata(metadata_location, props).scan().to_arrow().num_rows


# -- a local prefix ----------------------------------------------------------------------------


def test_every_table_under_the_prefix(lake: Lake) -> None:
    doc = _json("inspect", lake.root, "--recursive", *GATES, code=6)

    tables = _by_location(doc)
    assert list(tables) == [str(lake.table(t)) for t in FOUND]  # no hidden table
    assert (doc["exit_code"], doc["kind"]) == (6, "integrity")  # the worst: broken
    assert (doc["num_tables"], doc["num_failed"]) == (4, 2)
    for relative in ("dv", "group/many", "warehouse/ice"):
        single = _json("inspect", lake.table(relative), code=0)
        assert tables[str(lake.table(relative))]["summary"] == single

    dv = tables[str(lake.table("dv"))]
    assert (dv["format"], dv["status"], dv["exit_code"], dv["error"]) == ("delta", "ok", 0, None)
    assert dv["summary"]["logical_rows"] == _delta_rows(str(lake.table("dv"))) == 170
    assert dv["summary"]["files_with_dvs"] == 1 and dv["summary"]["deleted_rows"] == 30
    checks = {c["name"]: c for c in dv["checks"]}
    assert checks["max-deleted-ratio"]["actual"] == pytest.approx(30 / 200)
    assert [c["status"] for c in dv["checks"]] == ["passed", "passed", "passed", "not-applicable"]
    assert checks["max-dangling-deletes"]["passed"] is None

    many = tables[str(lake.table("group/many"))]
    assert (many["status"], many["kind"], many["exit_code"]) == ("failed", "check-failed", 3)
    assert many["summary"]["logical_rows"] == _delta_rows(str(lake.table("group/many"))) == 50
    failed = [c for c in many["checks"] if c["status"] == "failed"]
    assert [(c["name"], c["actual"], c["passed"]) for c in failed] == [("max-files", 5, False)]

    broken = tables[str(lake.table("group/deeper/broken"))]
    assert (broken["format"], broken["status"], broken["exit_code"]) == ("delta", "failed", 6)
    assert broken["summary"] is None and broken["checks"] == []
    assert broken["error"]["kind"] == "integrity"
    assert "00000000000000000001.json" in broken["error"]["message"]
    single = run("inspect", lake.table("group/deeper/broken"))
    assert single.exit_code == broken["exit_code"]

    ice = tables[str(lake.table("warehouse/ice"))]
    assert (ice["format"], ice["status"], ice["exit_code"]) == ("iceberg", "ok", 0)
    assert ice["summary"]["logical_rows"] == _iceberg_rows(lake.ice_metadata) == 100
    statuses = {c["name"]: c["status"] for c in ice["checks"]}
    assert statuses["max-log-files"] == "not-applicable"
    assert statuses["max-dangling-deletes"] == "passed"


def test_exit_code_is_the_worst_of_the_tables(lake: Lake) -> None:
    many = lake.table("group/many")
    assert run("inspect", lake.root / "warehouse", "-r").exit_code == 0
    assert run("inspect", lake.root / "warehouse", many, "-r").exit_code == 0
    assert run("inspect", many, "-r", "--check", "max-files=3").exit_code == 3
    assert run("inspect", lake.root / "group", "-r", "--check", "max-files=3").exit_code == 6
    missing = run("inspect", lake.root / "nowhere", many, "-r", "--check", "max-files=3")
    assert missing.exit_code == exit_code_of("not-found")


def test_a_bug_on_one_table_is_exit_70_and_the_others_are_inspected(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dvtool.commands.inspect.tables as tables

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(tables, "run_inspect", crash)  # Delta tables only
    result = run("inspect", lake.root / "warehouse", lake.table("dv"), "-r", "--json", "-v")
    assert result.exit_code == 70, all_output(result)
    ice, dv = json.loads(result.stdout)["tables"]
    assert (dv["kind"], dv["format"]) == ("internal", "delta")
    assert "simulated bug" in dv["error"]["message"]
    assert ice["status"] == "ok" and ice["summary"]["num_files"] == 2
    assert "Traceback" in result.stderr and "RuntimeError: simulated bug" in result.stderr


def test_a_prefix_without_tables_is_its_own_error(lake: Lake) -> None:
    plain = lake.table("group/plain")
    doc = _json("inspect", plain, lake.table("dv"), "-r", code=5)
    [empty, dv] = doc["tables"]
    assert (empty["location"], empty["format"], empty["status"]) == (str(plain), None, "failed")
    assert empty["error"]["kind"] == "not-found" and empty["summary"] is None
    assert dv["location"] == str(lake.table("dv")) and dv["status"] == "ok"


def test_a_prefix_that_is_a_table_is_that_table(lake: Lake) -> None:
    doc = _json("inspect", lake.table("warehouse/ice"), "-r", code=0)
    assert [t["location"] for t in doc["tables"]] == [str(lake.table("warehouse/ice"))]


def test_verify_and_count_rows_are_passed_through(lake: Lake, tmp_path: Path) -> None:
    """A copy of `dv` whose DV file is cut: `--verify` finds it (exit 6), as on the table
    alone; the others verify clean and `--count-rows` gives the single-table figures."""
    shutil.copytree(lake.table("dv"), tmp_path / "dv")
    shutil.copytree(lake.table("group/many"), tmp_path / "many")
    [dv_file] = (tmp_path / "dv").glob("deletion_vector_*.bin")
    truncate(dv_file)

    doc = _json("inspect", tmp_path, "-r", "--verify", "--count-rows", code=6)

    tables = _by_location(doc)
    damaged = tables[str(tmp_path / "dv")]
    alone = _json("inspect", tmp_path / "dv", "--verify", "--count-rows", code=6)
    assert damaged["verify"] == alone["verify"] and not damaged["verify"]["ok"]
    assert (damaged["kind"], damaged["error"]) == ("integrity", None)
    many = tables[str(tmp_path / "many")]
    assert many["verify"]["ok"] and many["verify"]["files_checked"] == 5
    assert many["summary"] == _json("inspect", tmp_path / "many", "--count-rows", code=0)
    human = run("inspect", tmp_path, "-r", "--verify")
    assert re.search(r"^dv: dv-\S+ ", human.stdout, re.M), human.stdout


def test_unreadable_iceberg_metadata_fails_that_table_only(lake: Lake, tmp_path: Path) -> None:
    """A copy of the Iceberg table whose current metadata file is cut in half: that table
    fails as `inspect` on it alone does (its format still known), the other is inspected."""
    ice = shutil.copytree(lake.table("warehouse/ice"), tmp_path / "ice")
    shutil.copytree(lake.table("group/many"), tmp_path / "many")
    truncate(max((ice / "metadata").glob("*.metadata.json")))
    alone = run("inspect", ice, "--json")
    assert alone.exit_code not in (0, 70), all_output(alone)

    doc = _json("inspect", tmp_path, "-r", code=alone.exit_code)

    broken, many = doc["tables"]
    assert (broken["location"], broken["format"], broken["summary"]) == (str(ice), "iceberg", None)
    assert broken["error"] == json.loads(alone.stdout)["error"]
    assert many["status"] == "ok" and many["summary"]["num_files"] == 5


def test_a_gate_that_cannot_be_measured_fails_its_table_with_a_usage_error(
    tmp_path: Path,
) -> None:
    """`max-small-files` on a table whose `delta.targetFileSize` is no size: that table
    fails (exit 2, the property named), its other gates are still evaluated."""
    table = tmp_path / "odd"
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    write_deltalake(str(table), data, configuration={"delta.targetFileSize": "big"})
    doc = _json(
        "inspect", tmp_path, "-r", "--check", "max-small-files=0", "--check", "max-files=1", code=2
    )
    [odd] = doc["tables"]
    assert odd["kind"] == "usage" and "delta.targetFileSize" in odd["error"]["message"]
    assert [c["status"] for c in odd["checks"]] == ["error", "passed"]


# -- usage errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "args"),
    [
        ("--version", ["--version", "1"]),
        ("--timestamp", ["--timestamp", "2024-01-01"]),
        ("--files", ["--files"]),
        ("--history", ["--history"]),
        ("--catalog", ["--catalog", "x"]),
    ],
)
def test_single_table_options_with_recursive_are_usage_errors(
    lake: Lake, option: str, args: list[str]
) -> None:
    result = run("inspect", lake.root, "-r", *args)
    assert result.exit_code == 2, all_output(result)
    assert f"{option} cannot be used with --recursive" in result.stderr
    assert result.stdout == "" and "Traceback" not in all_output(result)


def test_more_than_one_table_needs_recursive(lake: Lake) -> None:
    result = run("inspect", lake.table("dv"), lake.table("group/many"))
    assert result.exit_code == 2 and "--recursive" in result.stderr


@pytest.mark.parametrize("gate", ["max-typos=1", "max-files=many", "max-dangling-deletes=-1"])
def test_a_gate_no_format_can_read_is_a_usage_error_before_any_table_is_read(
    lake: Lake, gate: str
) -> None:
    result = run("inspect", lake.root, "-r", "--check", gate)
    assert result.exit_code == 2, all_output(result)
    assert f"invalid --check {gate!r}" in result.stderr and result.stdout == ""


# -- human output ------------------------------------------------------------------------------


def test_human_output_at_80_columns(lake: Lake) -> None:
    result = run("inspect", lake.root, "-r", *GATES)  # COLUMNS=80
    assert result.exit_code == 6
    out = result.stdout
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert "Traceback" not in all_output(result) and "\x1b[" not in out
    for relative in FOUND:
        assert re.search(rf"^table: {re.escape(relative)}$", out, re.M), out
    assert "group/many: check max-files: FAIL (actual 5, limit 3)" in out
    assert "gated no table" not in out  # every gate applied to some table
    assert re.search(r"^error: group/deeper/broken: log file .*json is corrupt", result.stderr)
    totals = "4 tables: 2 ok, 2 failed; 9 gates checked, 1 failed; exit code 6 (integrity)"
    assert out.rstrip().endswith(totals)


def test_human_output_wide_is_one_row_per_table(lake: Lake) -> None:
    result = run_wide("inspect", lake.root, "-r", "--check", "max-log-files=100")
    lines = result.stdout.splitlines()
    assert lines[0] == f"Tables under {lake.root}"
    header = lines[2]
    for column in ("table", "format", "version", "files", "rows", "deleted", "gates", "status"):
        assert column in header
    rows = {line.split("│")[1].strip(): line for line in lines[4:8]}
    assert set(rows) == set(FOUND)
    assert "170" in rows["dv"] and "15.0%" in rows["dv"]
    assert "iceberg" in rows["warehouse/ice"] and "n/a" in rows["warehouse/ice"]
    assert "integrity" in rows["group/deeper/broken"]
    assert "--check max-log-files gated no table" not in result.stdout
    only_ice = run_wide("inspect", lake.root / "warehouse", "-r", "--check", "max-log-files=1")
    assert "note: --check max-log-files gated no table: it applies to Delta tables only" in (
        only_ice.stdout
    )
    assert only_ice.exit_code == 0


# -- the Python API ------------------------------------------------------------------------------


def test_python_api_gives_the_cli_document(lake: Lake) -> None:
    checks = {"max-deleted-ratio": 0.2, "max-files": 3, "max-dangling-deletes": 0}
    result = dvtool.inspect_tables(lake.root, checks=checks)
    cli = _json(
        "inspect", lake.root, "-r", *[f"--check={k}={v}" for k, v in checks.items()], code=6
    )
    assert result.exit_code == 6 and result.to_dict() == cli
    assert [t.format for t in result.tables] == ["delta", "delta", "delta", "iceberg"]
    named = dvtool.inspect_tables([lake.table("dv"), lake.table("group/many")], recursive=False)
    assert named.exit_code == 0 and [t.result is not None for t in named.tables] == [True, True]
    assert isinstance(named, dvtool.InspectTablesResult)


# -- S3 ----------------------------------------------------------------------------------------


def test_a_lake_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    """Delta tables uploaded, an Iceberg table written by pyiceberg straight to S3: the
    same figures as each table's own `inspect --json`, rows by deltalake and pyiceberg."""
    local = tmp_path / "lake"
    dv = _delta(local / "dv", 2)
    dvtool.enable(dv)
    dvtool.delete(dv, "id >= 150")
    _delta(local / "sub" / "many", 5, rows=10)
    uri = s3_server.upload(local, "inspect-tables/lake")
    props = {
        "s3.endpoint": s3_server.endpoint,
        "s3.access-key-id": KEY_ID,
        "s3.secret-access-key": SECRET,
        "s3.region": REGION,
    }
    (tmp_path / "catalog").mkdir()
    ice = _iceberg(f"{uri}/sub/ice", tmp_path / "catalog", warehouse=uri, **props)

    options = s3_server.cli_options()
    doc = _json("inspect", uri, "-r", "--check", "max-files=3", *options, code=3)

    tables = _by_location(doc)
    assert list(tables) == [f"{uri}/dv", f"{uri}/sub/ice", f"{uri}/sub/many"]
    for location, table in tables.items():
        assert table["summary"] == _json("inspect", location, *options, code=0)
    delta = s3_server.delta_options()
    assert tables[f"{uri}/dv"]["summary"]["logical_rows"] == _delta_rows(f"{uri}/dv", delta)
    assert tables[f"{uri}/sub/ice"]["summary"]["logical_rows"] == _iceberg_rows(
        ice.metadata_location, **props
    )
    assert [t["exit_code"] for t in tables.values()] == [0, 0, 3]
