"""`dvtool vacuum` on small Iceberg tables pyiceberg writes (commits through dvtool's
`commit_updates`, tests/iceberg/commit_tables.py): the retention safety, the refusals, a
SQL catalog table (deleting through its FileIO), files outside the table location, the CLI
and JSON. The comparison with Iceberg Spark's procedures is tests/reference/
test_iceberg_vacuum.py; the expiry rules are tests/iceberg/test_snapshot_expiry.py.

Every expected file set here is computed from pyiceberg's own view of the table (its
`inspect` tables and snapshots), not written out by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import StaticTable, Table

from dvtool.commands.vacuum.iceberg import IcebergVacuumRequest, run_vacuum_iceberg
from dvtool.errors import WriteRefusedError
from dvtool.iceberg.tables import IcebergTable, open_iceberg
from tests.cli_helpers import all_output, run
from tests.iceberg.commit_tables import (
    committed,
    new_path_table,
    new_sql_table,
    rows,
    through_dvtool,
)

DAY_MS = 86_400_000
LATER = int(time.time() * 1000) + 30 * DAY_MS  # every snapshot is old by then


def _history(table: IcebergTable) -> tuple[IcebergTable, Table]:
    """An append, an overwrite (pyiceberg: a delete snapshot, then an append; the first
    data file goes), an append."""
    writer = through_dvtool(table)
    writer.append(rows(0, 10))
    writer.overwrite(rows(10, 20))
    writer.append(rows(20, 30))
    return committed(writer), writer


def _data_files(meta_location: str, snapshot_id: int | None = None) -> set[str]:
    static = StaticTable.from_metadata(meta_location)
    return {r["file_path"] for r in static.inspect.data_files(snapshot_id).to_pylist()}


def _files(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".crc")}


def _plain(location: str) -> str:
    return location.removeprefix("file:")


def test_expiry_deletes_what_only_expired_snapshots_reached(tmp_path: Path) -> None:
    table, _ = _history(new_path_table(str(tmp_path / "t"), 2))
    snapshots = table.metadata.snapshots
    first_data = _data_files(table.metadata_location, snapshots[0].snapshot_id)
    before = _files(tmp_path / "t")
    result = run_vacuum_iceberg(table, IcebergVacuumRequest(retain_last=1), now_ms=LATER)
    assert result.expired_snapshots == [s.snapshot_id for s in snapshots[:-1]]
    after = open_iceberg(str(tmp_path / "t"))
    assert [s.snapshot_id for s in after.metadata.snapshots] == [snapshots[-1].snapshot_id]
    gone = before - _files(tmp_path / "t")
    lists = {_plain(s.manifest_list) for s in snapshots[:-1]}
    assert {_plain(p) for p in first_data} | lists <= gone
    # the live data files and the current snapshot's manifests stay
    assert {_plain(p) for p in _data_files(after.metadata_location)} <= _files(tmp_path / "t")
    assert {f.reason for f in result.files} >= {"expired data file", "expired manifest list"}
    assert StaticTable.from_metadata(after.metadata_location).scan().to_arrow().num_rows == 20


def test_a_dry_run_lists_and_keeps_everything(tmp_path: Path) -> None:
    table, _ = _history(new_path_table(str(tmp_path / "t"), 2))
    orphan = tmp_path / "t" / "data" / "orphan.parquet"
    orphan.write_bytes(b"x")
    os.utime(orphan, (time.time() - 10 * 86400,) * 2)
    before = _files(tmp_path / "t")
    dry = run_vacuum_iceberg(table, IcebergVacuumRequest(dry_run=True), now_ms=LATER)
    assert _files(tmp_path / "t") == before
    assert "data/orphan.parquet" in {f.path for f in dry.files}
    real = run_vacuum_iceberg(table, IcebergVacuumRequest(), now_ms=LATER)
    assert {f.path for f in real.files} == {f.path for f in dry.files}
    assert before - _files(tmp_path / "t") == {f.location.removeprefix("file:") for f in dry.files}


def test_stale_dvtool_temp_files_go_other_hidden_files_stay(tmp_path: Path) -> None:
    """A dvtool killed mid-write leaves `.tmp-<uuid>.dvtool` beside the file it wrote: a
    hidden name, which Java's orphan listing (and so no other cleaner) never takes."""
    table, _ = _history(new_path_table(str(tmp_path / "t"), 2))
    data = tmp_path / "t" / "data"
    old = time.time() - 10 * 86400
    stale, fresh, other = (
        data / f".tmp-{'a' * 32}.dvtool",
        data / f".tmp-{'b' * 32}.dvtool",
        data / ".other.parquet",
    )
    for path in (stale, fresh, other):
        path.write_bytes(b"half")
    for path in (stale, other):
        os.utime(path, (old, old))
    result = run_vacuum_iceberg(table, IcebergVacuumRequest(), now_ms=int(time.time() * 1000))
    assert [(f.path, f.reason) for f in result.files if "tmp" in f.path] == [
        (f"data/{stale.name}", "stale temp file")
    ]
    assert not stale.exists() and fresh.exists() and other.exists()


def test_a_catalog_table_deletes_through_its_file_io(tmp_path: Path) -> None:
    table, _ = _history(new_sql_table(tmp_path / "cat", 2))
    table = IcebergTable(
        table.metadata, table.metadata_location, table.io, table.name, catalog=table.catalog
    )
    first = table.metadata.snapshots[0].snapshot_id
    first_data = {_plain(p) for p in _data_files(table.metadata_location, first)}
    result = run_vacuum_iceberg(table, IcebergVacuumRequest(retain_last=1), now_ms=LATER)
    assert result.deleted_files == len(result.files) > 0 and not result.failed
    assert not any(Path(p).exists() for p in first_data)
    reloaded = table.catalog.load_table(table.name)
    assert len(reloaded.metadata.snapshots) == 1
    assert reloaded.scan().to_arrow().num_rows == 20


def test_unreachable_files_outside_the_location_are_never_deleted(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    table = new_path_table(str(tmp_path / "t"), 2, properties={"write.data.path": str(elsewhere)})
    table, _ = _history(table)
    outside_before = _files(elsewhere)
    result = run_vacuum_iceberg(table, IcebergVacuumRequest(retain_last=1), now_ms=LATER)
    assert result.expired_snapshots and result.outside_location
    assert {_plain(p) for p in result.outside_location} <= outside_before
    assert _files(elsewhere) == outside_before
    assert result.not_listed == [str(elsewhere)]


def test_retention_safety() -> None:
    with pytest.raises(WriteRefusedError, match=r"history\.expire\.max-snapshot-age-ms"):
        _refused({}, 4 * DAY_MS)
    # the table keeps snapshots 1 day, but orphans need 3 days
    with pytest.raises(WriteRefusedError, match="orphan"):
        _refused({"history.expire.max-snapshot-age-ms": str(DAY_MS)}, 2 * DAY_MS)
    with pytest.raises(WriteRefusedError, match=r"gc\.enabled"):
        _refused({"gc.enabled": "false"}, None)


def _refused(properties: dict[str, str], retain_ms: int | None) -> None:
    from dvtool.commands.vacuum.iceberg import retention_window
    from dvtool.iceberg.snapshot_expiry import require_gc_enabled
    from tests.iceberg.commit_tables import new_metadata

    metadata = new_metadata("/t", 2, properties)
    require_gc_enabled(metadata)
    retention_window(metadata, retain_ms, False, LATER)


def test_a_byte_copy_of_a_table_is_refused(tmp_path: Path) -> None:
    table, _ = _history(new_path_table(str(tmp_path / "t"), 2))
    shutil.copytree(tmp_path / "t", tmp_path / "copy")
    result = run("vacuum", tmp_path / "copy", "--dry-run")
    assert result.exit_code == 7 and "rewrite_table_path" in all_output(result)
    assert table.metadata.snapshots


def test_cli_json_and_options(tmp_path: Path) -> None:
    table, _ = _history(new_path_table(str(tmp_path / "t"), 2))
    folder = tmp_path / "t"
    result = run("vacuum", folder, "--dry-run", "--json")
    assert result.exit_code == 0, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["format"] == "iceberg" and doc["dry_run"] is True
    assert doc["expired_snapshots"] == []  # the snapshots are minutes old
    assert doc["retention_ms"] == 5 * DAY_MS and doc["orphan_retention_ms"] == 3 * DAY_MS
    text = run("vacuum", folder, "--dry-run")
    assert text.exit_code == 0 and "Iceberg vacuum" in text.stdout
    for flag in ("--lite", "--log"):
        refused = run("vacuum", folder, flag)
        assert refused.exit_code == 2 and "Delta tables only" in all_output(refused)
    forced = run("vacuum", folder, "--retain", "0h", "--force", "--retain-last", "1", "--json")
    assert forced.exit_code == 0, all_output(forced)
    assert len(json.loads(forced.stdout)["expired_snapshots"]) == len(table.metadata.snapshots) - 1


def test_retain_last_is_refused_on_delta(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "d"), rows(0, 3))
    result = run("vacuum", tmp_path / "d", "--retain-last", "2")
    assert result.exit_code == 2 and "Iceberg tables only" in all_output(result)


def test_a_conflict_plans_again_on_the_refreshed_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent append lands between the plan and the commit: the commit conflicts,
    the vacuum refreshes, plans again (the new snapshot is kept) and commits."""
    import dvtool.commands.vacuum.iceberg as module

    table, writer = _history(new_path_table(str(tmp_path / "t"), 2))
    real_commit = module._commit
    calls: list[int] = []

    def racing(base: IcebergTable, expiry: Any) -> IcebergTable:
        if not calls:
            writer.append(rows(30, 40))  # another writer commits first
        calls.append(1)
        return real_commit(base, expiry)

    monkeypatch.setattr(module, "_commit", racing)
    result = run_vacuum_iceberg(table, IcebergVacuumRequest(retain_last=1), now_ms=LATER)
    assert len(calls) == 2
    after = open_iceberg(str(tmp_path / "t"))
    current = committed(writer).metadata.current_snapshot_id
    assert [s.snapshot_id for s in after.metadata.snapshots] == [current]
    assert current not in result.expired_snapshots
    assert StaticTable.from_metadata(after.metadata_location).scan().to_arrow().num_rows == 30


def test_nothing_is_deleted_when_the_commit_outcome_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dvtool.commands.vacuum.iceberg as module
    from dvtool.errors import CommitOutcomeUnknownError

    table, _ = _history(new_path_table(str(tmp_path / "t"), 2))
    before = _files(tmp_path / "t")

    def unknown(base: IcebergTable, expiry: Any) -> IcebergTable:
        raise CommitOutcomeUnknownError("the put timed out")

    monkeypatch.setattr(module, "_commit", unknown)
    with pytest.raises(CommitOutcomeUnknownError):
        run_vacuum_iceberg(table, IcebergVacuumRequest(retain_last=1), now_ms=LATER)
    assert _files(tmp_path / "t") == before


def test_the_python_api_vacuums_iceberg_tables(tmp_path: Path) -> None:
    import dvtool
    from dvtool.commands.vacuum.iceberg import IcebergVacuumResult

    _history(new_path_table(str(tmp_path / "t"), 2))
    result = dvtool.vacuum(tmp_path / "t", retain="0h", force=True, retain_last=1)
    assert isinstance(result, IcebergVacuumResult)
    assert result.expired_snapshots and result.deleted_files == result.num_files
    assert len(open_iceberg(str(tmp_path / "t")).metadata.snapshots) == 1
