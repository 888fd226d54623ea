"""`dvtool inspect` on Iceberg tables pyiceberg writes (no JVM): v1 and v2 tables in a SQL
catalog (sqlite), opened by folder, by metadata file and through the catalog.

pyiceberg writes no merge-on-read deletes (its deletes rewrite files), so these tables test
opening, format detection, snapshots, history, time travel and the row and file figures
without deletes, each against pyiceberg's own reading of the table (scan, `inspect.files`,
snapshot log); the delete figures are tested on Iceberg Spark's tables in
tests/reference/test_iceberg_inspect.py. Also the errors: neither format (5), a missing
catalog or table, options with no meaning for Iceberg (2), pyiceberg missing (2, naming
the `iceberg` extra).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from dvtool.table import detect_format
from tests.cli_helpers import all_output, error_object, run, run_wide
from tests.oracles import GOLDEN

REPO = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("cat", pa.string())])


def _rows(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table({"id": ids, "cat": ["abc"[i % 3] for i in ids]}, schema=SCHEMA)


def _catalog(folder: Path) -> SqlCatalog:
    return SqlCatalog(
        "fx", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}/warehouse"
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A v1 and a v2 table: three appends, then a (copy-on-write) delete of cat = 'b'."""
    folder = tmp_path_factory.mktemp("pyiceberg")
    catalog = _catalog(folder)
    catalog.create_namespace("db")
    tables = {}
    for version in (1, 2):
        table = catalog.create_table(
            f"db.v{version}", SCHEMA, properties={"format-version": str(version)}
        )
        for lo in (0, 10, 20):
            table.append(_rows(lo, lo + 10))
        table.delete("cat = 'b'")
        tables[f"v{version}"] = catalog.load_table(f"db.v{version}")
    return {"folder": folder, "tables": tables}


def _json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _location(table: Table) -> str:
    return table.location().removeprefix("file://")


def _figures_of(table: Table, snapshot_id: int | None = None) -> dict[str, Any]:
    """What pyiceberg reads of a snapshot: data files, rows, sizes."""
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    physical = sum(t.file.record_count for t in tasks)
    return {
        "num_files": len(tasks),
        "physical_rows": physical,
        "logical_rows": table.scan(snapshot_id=snapshot_id).to_arrow().num_rows,
        "size_bytes": sum(t.file.file_size_in_bytes for t in tasks),
    }


@pytest.mark.parametrize("version", [1, 2])
def test_summary_equals_pyiceberg(written: dict[str, Any], version: int) -> None:
    table = written["tables"][f"v{version}"]
    doc = _json("inspect", _location(table))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert doc["format"] == "iceberg" and doc["format_version"] == version
    assert (doc["snapshot_id"], doc["commit_timestamp"]) == (
        snapshot.snapshot_id,
        snapshot.timestamp_ms,
    )
    assert doc["metadata_location"] == table.metadata_location.removeprefix("file://")
    assert doc["table_uuid"] == str(table.metadata.table_uuid)
    expected = _figures_of(table)
    assert {k: doc[k] for k in expected} == expected
    assert doc["deleted_rows"] == 0 and doc["row_counts_exact"] is True
    assert doc["delete_files"] == {"position": 0, "equality": 0, "deletion_vectors": 0}
    assert doc["files_with_dvs"] == 0 and doc["dangling_deletes"] == 0
    assert doc["small_files"] == expected["num_files"]  # all below 512 MiB
    no_deletes = {"bucket": "no deletes", "files": expected["num_files"]}
    assert doc["deleted_ratio_histogram"][0] == no_deletes
    assert [c["name"] for c in doc["schema"]] == ["id", "cat"]


def test_metadata_file_and_catalog_open_the_same_table(
    written: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    table = written["tables"]["v2"]
    by_folder = _json("inspect", _location(table))
    by_file = _json("inspect", table.metadata_location.removeprefix("file://"))
    assert by_file == by_folder
    _configure_catalog(monkeypatch, written["folder"])
    by_catalog = _json("inspect", "--catalog", "fx", "db.v2")
    assert by_catalog["name"] == "db.v2"
    assert by_catalog["metadata_location"] == table.metadata_location  # the catalog's URI
    same = {"name": None, "metadata_location": by_folder["metadata_location"]}
    assert {**by_catalog, **same} == by_folder


def _configure_catalog(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Catalog `fx` as PYICEBERG_CATALOG__FX__* variables; pyiceberg reads them when
    pyiceberg.catalog is first imported, so its config is read again here."""
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    monkeypatch.setenv("PYICEBERG_CATALOG__FX__URI", f"sqlite:///{folder}/catalog.db")
    monkeypatch.setenv("PYICEBERG_CATALOG__FX__WAREHOUSE", f"file://{folder}/warehouse")
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())


def test_catalog_from_environment_in_a_fresh_process(written: dict[str, Any]) -> None:
    """The variables as a user sets them, read by pyiceberg at start-up."""
    folder = written["folder"]
    env = {
        **os.environ,
        "PYICEBERG_CATALOG__FX__URI": f"sqlite:///{folder}/catalog.db",
        "PYICEBERG_CATALOG__FX__WAREHOUSE": f"file://{folder}/warehouse",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "dvtool", "inspect", "--catalog", "fx", "db.v1", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["name"], doc["format_version"]) == ("db.v1", 1)
    assert doc["logical_rows"] == _figures_of(written["tables"]["v1"])["logical_rows"]


def test_history_is_the_snapshots_newest_first(written: dict[str, Any]) -> None:
    table = written["tables"]["v2"]
    doc = _json("inspect", _location(table), "--history")
    assert list(doc) == ["history"]
    snapshots = sorted(table.snapshots(), key=lambda s: s.sequence_number or 0, reverse=True)
    assert [h["snapshot_id"] for h in doc["history"]] == [s.snapshot_id for s in snapshots]
    newest = doc["history"][0]
    assert newest["current"] and newest["operation"] == "overwrite"
    assert newest["summary"]["total-records"] == _figures_of(table)["physical_rows"]
    assert [h["summary"]["added-records"] for h in doc["history"][-3:]] == [10, 10, 10]
    human = run_wide("inspect", _location(table), "--history", "2")
    assert human.exit_code == 0 and "History" in human.stdout
    assert f"snapshot {snapshots[0].snapshot_id}" in human.stdout.replace("\u00a0", " ")


@pytest.mark.parametrize("version", [1, 2])
def test_time_travel_by_snapshot_id_and_timestamp(written: dict[str, Any], version: int) -> None:
    table = written["tables"][f"v{version}"]
    for snapshot in table.snapshots():
        doc = _json("inspect", _location(table), "--version", str(snapshot.snapshot_id))
        expected = _figures_of(table, snapshot.snapshot_id)
        assert {k: doc[k] for k in expected} == expected
        when = dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, dt.timezone.utc)
        at = _json("inspect", _location(table), "--timestamp", when.isoformat())
        oracle = table.snapshot_as_of_timestamp(snapshot.timestamp_ms)
        assert oracle is not None and at["snapshot_id"] == oracle.snapshot_id


def test_time_travel_outside_the_table_is_not_found(written: dict[str, Any]) -> None:
    location = _location(written["tables"]["v2"])
    result = run("inspect", location, "--version", "12345")
    assert result.exit_code == 5 and "no snapshot 12345" in result.stderr
    result = run("inspect", location, "--timestamp", "2001-01-01")
    assert result.exit_code == 5 and "no current snapshot at 2001-01-01" in result.stderr


def test_files_lists_the_data_files(written: dict[str, Any]) -> None:
    table = written["tables"]["v1"]
    doc = _json("inspect", _location(table), "--files")
    tasks = {t.file.file_path: t.file for t in table.scan().plan_files()}
    assert {f["path"]: f["num_records"] for f in doc["files"]} == {
        p: f.record_count for p, f in tasks.items()
    }
    assert all(f["deletes"] == [] and f["deleted_rows"] == 0 for f in doc["files"])
    human = run_wide("inspect", _location(table), "--files", "--limit", "1")
    assert human.exit_code == 0 and f"... {len(tasks) - 1} more files" in human.stdout


def test_human_summary_reads_in_a_plain_log(written: dict[str, Any]) -> None:
    table = written["tables"]["v2"]
    result = run("inspect", _location(table))
    assert result.exit_code == 0, all_output(result)
    assert "Iceberg format v2" in result.stdout and "\x1b[" not in result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    for label in ("live data files", "logical rows", "position delete files", "dangling"):
        assert label in result.stdout


def test_checks_on_iceberg(written: dict[str, Any]) -> None:
    table = written["tables"]["v2"]
    location = _location(table)
    passing = run("inspect", location, "--check", "max-dangling-deletes=0")
    assert passing.exit_code == 0 and "pass" in passing.stdout
    failing = _json("inspect", location, "--check", "max-small-files=1", code=3)
    files = float(_figures_of(table)["num_files"])
    assert failing["checks"] == [
        {"name": "max-small-files", "limit": 1.0, "actual": files, "passed": False}
    ]
    for gate in ("max-log-files=1", "max-inline-dvs=0", "max-files-without-stats=0"):
        refused = run("inspect", location, "--check", gate)
        assert refused.exit_code == 2 and "no meaning for an Iceberg table" in refused.stderr


def test_format_detection(written: dict[str, Any], tmp_path: Path) -> None:
    table = written["tables"]["v1"]
    assert detect_format(_location(table)) == "iceberg"
    assert detect_format(table.metadata_location) == "iceberg"
    assert detect_format(str(GOLDEN / "table-with-dv-small")) == "delta"
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "notes.txt").write_text("not a table")
    result = run("inspect", tmp_path, "--json")
    assert result.exit_code == 5
    error = error_object(result)
    assert error["message"] == (
        f"no Delta, Iceberg or Paimon table at {tmp_path}: it holds neither _delta_log/, nor "
        "metadata/ with a *.metadata.json, nor schema/ with a schema-N file"
    )
    assert "metadata/" in error["hint"] and "--catalog" in error["hint"]


def test_catalog_errors(written: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    _configure_catalog(monkeypatch, written["folder"])
    missing = run("inspect", "--catalog", "fx", "db.nope")
    assert missing.exit_code == 5 and "no table db.nope in catalog fx" in missing.stderr
    bare = run("inspect", "--catalog", "fx", "nodot")
    assert bare.exit_code == 2 and "namespace.table" in bare.stderr
    unknown = run("inspect", "--catalog", "nosuchcatalog", "db.v1")
    assert unknown.exit_code == 2 and "cannot load Iceberg catalog" in unknown.stderr
    option = run("inspect", "--catalog", "fx", "db.v1", "--storage-option", "nonsense=1")
    assert option.exit_code == 2 and "nonsense" in option.stderr
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    monkeypatch.setenv("PYICEBERG_CATALOG__BROKEN__URI", "sqlite:////no/such/folder/c.db")
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    broken = run("inspect", "--catalog", "broken", "db.v1")
    assert broken.exit_code == 8 and "Iceberg catalog 'broken' failed" in broken.stderr


def test_without_pyiceberg_the_error_names_the_extra(
    written: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyiceberg", None)
    result = run("inspect", _location(written["tables"]["v1"]))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "error: reading Iceberg tables needs pyiceberg, which is not installed",
        "Install dvtool's iceberg extra: pip install 'dvtool[iceberg]'",
    ]


def test_a_gzipped_metadata_file_anywhere(written: dict[str, Any], tmp_path: Path) -> None:
    """`NNNNN-uuid.gz.metadata.json` (write.metadata.compression-codec=gzip) opened by path,
    from another folder (the files it names are absolute)."""
    table = written["tables"]["v2"]
    source = Path(table.metadata_location.removeprefix("file://"))
    copy = tmp_path / source.name.replace(".metadata.json", ".gz.metadata.json")
    copy.write_bytes(gzip.compress(source.read_bytes()))
    doc = _json("inspect", copy)
    assert doc["metadata_location"] == str(copy)
    assert doc["logical_rows"] == _figures_of(table)["logical_rows"]
    damaged = tmp_path / "00009-x.metadata.json"
    damaged.write_text('{"format-version": 2}')
    result = run("inspect", damaged)
    assert result.exit_code == 6 and "is not Iceberg table metadata" in result.stderr


def test_time_travel_follows_the_snapshot_log_across_a_rollback(written: dict[str, Any]) -> None:
    """After a rollback the snapshot current at a time is not the newest one made before it:
    time travel reads the snapshot log (pyiceberg's `snapshot_as_of_timestamp` is the
    oracle), and the history marks the rolled-back snapshot as out of the lineage."""
    catalog = _catalog(written["folder"])
    table = catalog.create_table("db.rolled", SCHEMA)
    table.append(_rows(0, 5))
    table.append(_rows(5, 10))
    first, second = table.snapshots()
    table.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
    table = catalog.load_table("db.rolled")
    log = table.metadata.snapshot_log
    assert [e.snapshot_id for e in log][-1] == first.snapshot_id
    when = dt.datetime.fromtimestamp(log[-1].timestamp_ms / 1000, dt.timezone.utc)
    doc = _json("inspect", _location(table), "--timestamp", when.isoformat())
    oracle = table.snapshot_as_of_timestamp(log[-1].timestamp_ms)
    assert oracle is not None and doc["snapshot_id"] == oracle.snapshot_id == first.snapshot_id
    history = _json("inspect", _location(table), "--history")["history"]
    lineage = {h["snapshot_id"]: h["in_current_lineage"] for h in history}
    assert lineage == {first.snapshot_id: True, second.snapshot_id: False}
    assert doc["logical_rows"] == table.scan().to_arrow().num_rows
