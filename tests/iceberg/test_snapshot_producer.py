"""dvtool/iceberg/snapshot_producer.py on small path tables made here (pyiceberg's table
metadata, Parquet and Puffin files written in the test), each snapshot committed with
`tests/iceberg/snapshot_commits.commit_locally`.

After each commit pyiceberg, DuckDB and polars (tests/iceberg_oracles.py) read exactly the
expected rows; the summary agrees with the live files pyiceberg's `inspect.files()` lists
and the entries DuckDB's `iceberg_metadata` lists (status, snapshot, sequence numbers).
Iceberg Java (Spark) reading and writing after these commits is
tests/reference/test_iceberg_snapshot_producer.py.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record

from dvtool.errors import CommitConflictError, WriteRefusedError
from dvtool.iceberg.manifest_writers import v3_field
from dvtool.iceberg.snapshot_producer import (
    AddedFile,
    RemovedFileNotLiveError,
    SnapshotChanges,
    produce_snapshot,
)
from dvtool.iceberg.tables import IcebergTable
from tests.iceberg.snapshot_commits import (
    commit_locally,
    new_table,
    parquet_data_file,
    position_delete_file,
    puffin_dvs,
    summary_of,
)
from tests.iceberg_oracles import ORACLES, counts, duckdb_connection, oracle_rows

Row = dict[str, Any]


def rows(lo: int, hi: int, cat: str = "x") -> list[Row]:
    return [{"id": i, "cat": cat} for i in range(lo, hi)]


def assert_rows(table: IcebergTable, expected: list[Row]) -> None:
    """Every oracle reads exactly `expected` (sorted by id)."""
    for oracle in ORACLES:
        assert oracle_rows(oracle, table.metadata_location) == expected, oracle


def assert_totals(table: IcebergTable) -> None:
    """The summary's totals are what the live files add up to (pyiceberg's inspect)."""
    summary, live = summary_of(table), counts(table.metadata_location)
    assert int(summary["total-data-files"]) == live.data_files
    assert int(summary["total-records"]) == live.physical_rows
    deletes = live.position_delete_files + live.deletion_vectors + live.equality_delete_files
    assert int(summary["total-delete-files"]) == deletes
    assert int(summary["total-position-deletes"]) == live.position_deletes


@functools.cache
def _duckdb() -> Any:
    return duckdb_connection()


def avro_rows(path: str) -> list[Row]:
    """An Avro file's records as DuckDB's `read_avro` reads them."""
    result = _duckdb().execute(f"SELECT * FROM read_avro('{path}')")
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def entries(table: IcebergTable) -> list[Row]:
    """The current snapshot's manifest entries read by DuckDB's Avro reader (status 0
    EXISTING, 1 ADDED, 2 DELETED), null sequence numbers inherited from the manifest as
    the spec says (only ADDED entries may have them)."""
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    listed = []
    for manifest in avro_rows(snapshot.manifest_list):
        for entry in avro_rows(manifest["manifest_path"]):
            if entry["sequence_number"] is None or entry["file_sequence_number"] is None:
                assert entry["status"] == 1
            listed.append(
                {
                    "status": entry["status"],
                    "snapshot_id": entry["snapshot_id"] or manifest["added_snapshot_id"],
                    "file_path": entry["data_file"]["file_path"],
                    "sequence_number": entry["sequence_number"] or manifest["sequence_number"],
                    "file_sequence_number": entry["file_sequence_number"]
                    or manifest["sequence_number"],
                }
            )
    return listed


def commit(table: IcebergTable, changes: SnapshotChanges, **options: Any) -> IcebergTable:
    return commit_locally(table, produce_snapshot(table, table.io, changes, **options))


def appended(tmp_path: Path, version: int) -> tuple[IcebergTable, Any, Any]:
    """A table with two data files, ids 0-4 (a.parquet) and 5-8 (b.parquet)."""
    table = new_table(tmp_path / "t", version)
    a = parquet_data_file(table, "a.parquet", rows(0, 5))
    b = parquet_data_file(table, "b.parquet", rows(5, 9))
    table = commit(table, SnapshotChanges("append", added=(AddedFile(a), AddedFile(b))))
    return table, a, b


@pytest.mark.parametrize("version", [2, 3])
def test_append_delete_and_remove(tmp_path: Path, version: int) -> None:
    table, a, b = appended(tmp_path, version)
    assert_rows(table, rows(0, 9))
    first = summary_of(table)
    assert (first["added-data-files"], first["added-records"], first["total-records"]) == (
        "2",
        "9",
        "9",
    )
    assert first["changed-partition-count"] == "1"
    if version == 2:
        deletes = position_delete_file(table, "pos.parquet", [(a.file_path, 1), (a.file_path, 3)])
        kind = "added-position-delete-files"
    else:
        (deletes,) = puffin_dvs(table, "dv.puffin", {a.file_path: [1, 3]})
        kind = "added-dvs"
    table = commit(table, SnapshotChanges("delete", added=(AddedFile(deletes),)))
    assert_rows(table, [r for r in rows(0, 9) if r["id"] not in (1, 3)])
    summary = summary_of(table)
    assert (summary[kind], summary["added-delete-files"], summary["added-position-deletes"]) == (
        "1",
        "1",
        "2",
    )
    assert_totals(table)
    table = commit(table, SnapshotChanges("delete", removed=frozenset({(b.file_path, None)})))
    assert_rows(table, [{"id": 0, "cat": "x"}, {"id": 2, "cat": "x"}, {"id": 4, "cat": "x"}])
    summary = summary_of(table)
    assert (summary["deleted-data-files"], summary["deleted-records"]) == ("1", "4")
    assert summary["manifests-replaced"] == "1"
    assert_totals(table)
    listed = entries(table)
    gone = [e for e in listed if e["file_path"] == b.file_path]
    last = table.metadata.current_snapshot()
    assert last is not None
    assert [(e["status"], e["snapshot_id"], e["sequence_number"]) for e in gone] == [
        (2, last.snapshot_id, 1)
    ]


def test_v3_row_lineage(tmp_path: Path) -> None:
    """first-row-id is the table's next-row-id; added-rows covers the data manifests the
    list assigned ids to (a rewritten one too), and next-row-id advances by it."""
    table = new_table(tmp_path / "t", 3)
    a = parquet_data_file(table, "a.parquet", rows(0, 5))
    table = commit(table, SnapshotChanges("append", added=(AddedFile(a),)))
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    assert (snapshot.first_row_id, snapshot.added_rows, table.metadata.next_row_id) == (0, 5, 5)
    (dv,) = puffin_dvs(table, "dv.puffin", {a.file_path: [0]})
    table = commit(table, SnapshotChanges("delete", added=(AddedFile(dv),)))
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    assert (snapshot.first_row_id, snapshot.added_rows, table.metadata.next_row_id) == (5, 0, 5)
    b = parquet_data_file(table, "b.parquet", rows(5, 8))
    changes = SnapshotChanges(
        "overwrite", added=(AddedFile(b),), removed=frozenset({(a.file_path, None)})
    )
    table = commit(table, changes)
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    assert (snapshot.first_row_id, snapshot.added_rows, table.metadata.next_row_id) == (5, 3, 8)
    summary = summary_of(table)
    # a's deletion vector went with it (Java's removeDanglingDeletesFor)
    assert (summary["removed-dvs"], summary["deleted-data-files"]) == ("1", "1")
    assert_rows(table, rows(5, 8))


def test_v3_replace_a_deletion_vector(tmp_path: Path) -> None:
    """One blob of a Puffin file replaced by a new DV: the other blob stays live."""
    table, a, b = appended(tmp_path, 3)
    dv_a, dv_b = puffin_dvs(table, "dv1.puffin", {a.file_path: [0], b.file_path: [0]})
    table = commit(table, SnapshotChanges("delete", added=(AddedFile(dv_a), AddedFile(dv_b))))
    (merged,) = puffin_dvs(table, "dv2.puffin", {a.file_path: [0, 4]})
    removed = frozenset({(dv_a.file_path, v3_field(dv_a, "content_offset"))})
    table = commit(table, SnapshotChanges("delete", added=(AddedFile(merged),), removed=removed))
    assert_rows(table, [r for r in rows(0, 9) if r["id"] not in (0, 4, 5)])
    summary = summary_of(table)
    assert (summary["added-dvs"], summary["removed-dvs"], summary["total-delete-files"]) == (
        "1",
        "1",
        "2",
    )
    assert summary["removed-files-size"] == str(
        v3_field(dv_a, "content_size_in_bytes")
    )  # the blob, not the Puffin file
    assert_totals(table)


def test_a_rewrite_keeps_its_data_sequence_number(tmp_path: Path) -> None:
    table, a, b = appended(tmp_path, 2)
    rewritten = parquet_data_file(table, "a2.parquet", rows(0, 5))
    changes = SnapshotChanges(
        "replace",
        added=(AddedFile(rewritten, data_sequence_number=1),),
        removed=frozenset({(a.file_path, None)}),
    )
    table = commit(table, changes)
    assert table.metadata.last_sequence_number == 2
    live = {e["file_path"]: e for e in entries(table) if e["status"] != 2}
    assert live[rewritten.file_path]["sequence_number"] == 1
    assert live[rewritten.file_path]["file_sequence_number"] == 2
    assert live[b.file_path]["sequence_number"] == live[b.file_path]["file_sequence_number"] == 1
    assert_rows(table, rows(0, 9))


def written_files(table: IcebergTable) -> set[str]:
    return {p.name for p in (Path(table.location) / "metadata").iterdir()}


def test_removing_a_file_that_is_not_live(tmp_path: Path) -> None:
    table, a, _ = appended(tmp_path, 2)
    before = written_files(table)
    missing = frozenset({("/elsewhere/x.parquet", None), (a.file_path, None)})
    with pytest.raises(RemovedFileNotLiveError, match=r"cannot remove /elsewhere/x\.parquet"):
        produce_snapshot(table, table.io, SnapshotChanges("delete", removed=missing))
    table = commit(table, SnapshotChanges("delete", removed=frozenset({(a.file_path, None)})))
    with pytest.raises(RemovedFileNotLiveError, match=r"a\.parquet"):
        produce_snapshot(
            table, table.io, SnapshotChanges("delete", removed=frozenset({(a.file_path, None)}))
        )
    assert written_files(table) - before == {
        Path(table.metadata_location).name,
        *(Path(p).name for p in written_by_last(table)),
    }


def written_by_last(table: IcebergTable) -> list[str]:
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    listed = {m.manifest_path for m in snapshot.manifests(table.io)}
    return [snapshot.manifest_list, *(p for p in listed if snapshot.manifest_list[-41:-5] in p)]


def test_a_failed_attempt_deletes_what_it_wrote(tmp_path: Path) -> None:
    table, a, _ = appended(tmp_path, 2)
    before = written_files(table)
    data = parquet_data_file(table, "c.parquet", rows(9, 10))
    deletes = position_delete_file(table, "p.parquet", [(a.file_path, 0)])
    deletes.spec_id = 42  # no such spec: fails after the data manifest is written
    changes = SnapshotChanges("overwrite", added=(AddedFile(data), AddedFile(deletes)))
    with pytest.raises(KeyError):
        produce_snapshot(table, table.io, changes)
    assert written_files(table) == before


def test_names_codec_and_metadata_path(tmp_path: Path) -> None:
    table, a, _ = appended(tmp_path, 2)
    elsewhere = tmp_path / "meta-elsewhere"
    elsewhere.mkdir()
    properties = {"write.metadata.path": f"{elsewhere}/", "write.avro.compression-codec": "zstd"}
    metadata = table.metadata.model_copy(update={"properties": properties})
    table = replace(table, metadata=metadata)
    produced = produce_snapshot(
        table, table.io, SnapshotChanges("delete", removed=frozenset({(a.file_path, None)}))
    )
    snapshot_id = produced.snapshot.snapshot_id
    assert 0 < snapshot_id < 1 << 63
    names = [Path(p).name for p in produced.written]
    assert all(Path(p).parent == elsewhere for p in produced.written)
    uid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.fullmatch(rf"({uid})-m0\.avro", names[0])
    assert names[-1] == f"snap-{snapshot_id}-1-{names[0][:36]}.avro"
    assert_codec(produced.written[0], "zstandard")


def assert_codec(path: str, codec: str) -> None:
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.io.pyarrow import PyArrowFileIO

    with AvroFile[Any](PyArrowFileIO().new_input(path)) as reader:
        assert reader.header.meta["avro.codec"] == codec


def test_a_stale_base_fails_the_ref_requirement(tmp_path: Path) -> None:
    table, a, b = appended(tmp_path, 2)
    first = produce_snapshot(
        table, table.io, SnapshotChanges("delete", removed=frozenset({(a.file_path, None)}))
    )
    second = produce_snapshot(
        table, table.io, SnapshotChanges("delete", removed=frozenset({(b.file_path, None)}))
    )
    assert first.snapshot.snapshot_id != second.snapshot.snapshot_id
    committed = commit_locally(table, first)
    with pytest.raises(CommitConflictError, match="branch main has changed"):
        commit_locally(committed, second)


def test_a_new_branch_starts_at_the_current_snapshot(tmp_path: Path) -> None:
    table, a, _ = appended(tmp_path, 2)
    main = table.metadata.current_snapshot()
    assert main is not None
    produced = produce_snapshot(
        table,
        table.io,
        SnapshotChanges("delete", removed=frozenset({(a.file_path, None)})),
        branch="audit",
    )
    assert produced.snapshot.parent_snapshot_id == main.snapshot_id
    table = commit_locally(table, produced)
    assert table.metadata.refs["audit"].snapshot_id == produced.snapshot.snapshot_id
    assert table.metadata.current_snapshot() == main  # main did not move
    assert_rows(table, rows(0, 9))


def test_partition_summaries(tmp_path: Path) -> None:
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
    table = new_table(tmp_path / "t", 2, spec)
    metadata = table.metadata.model_copy(
        update={"properties": {**table.metadata.properties, "write.summary.partition-limit": "5"}}
    )
    table = replace(table, metadata=metadata)
    x = parquet_data_file(table, "x.parquet", rows(0, 3, "x"))
    y = parquet_data_file(table, "y.parquet", rows(3, 5, "y"))
    table = commit(table, SnapshotChanges("append", added=(AddedFile(x), AddedFile(y))))
    deletes = position_delete_file(table, "p.parquet", [(y.file_path, 0)], Record("y"))
    table = commit(table, SnapshotChanges("delete", added=(AddedFile(deletes),)))
    summary = summary_of(table)
    assert summary["changed-partition-count"] == "1"
    assert summary["partition-summaries-included"] == "true"
    assert summary["partitions.cat=y"] == (
        "added-position-delete-files=1,added-delete-files=1,"
        "added-files-size=" + str(deletes.file_size_in_bytes) + ",added-position-deletes=1"
    )
    assert_rows(table, [r for r in rows(0, 3, "x") + rows(3, 5, "y") if r["id"] != 3])


def test_a_codec_dvtool_cannot_write_is_refused_before_any_write(tmp_path: Path) -> None:
    table, a, _ = appended(tmp_path, 2)
    before = written_files(table)
    properties = {"write.avro.compression-codec": "lz4"}
    metadata = table.metadata.model_copy(update={"properties": properties})
    odd = replace(table, metadata=metadata)
    changes = SnapshotChanges("delete", removed=frozenset({(a.file_path, None)}))
    with pytest.raises(WriteRefusedError, match="unknown Avro compression codec 'lz4'"):
        produce_snapshot(odd, table.io, changes)
    assert written_files(table) == before
