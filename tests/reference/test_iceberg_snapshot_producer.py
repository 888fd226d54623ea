"""Snapshots dvtool's snapshot producer (dvtool/iceberg/snapshot_producer.py) commits on
copies of Iceberg Spark's fixture tables (tests/reference/iceberg_tables.py), read back by
Iceberg Java itself.

Each copy sits in the warehouse of the `iceberg_spark` session's Hadoop catalog `local`
(`local.snapprod.NAME`). A step produces a snapshot and commits it as a Hadoop table does
(`tests/iceberg/snapshot_commits.commit_locally`: dvtool's commit layer, a new
metadata/vN.metadata.json put if absent). After each step:

- pyiceberg, DuckDB and polars (tests/iceberg_oracles.py) and Iceberg Spark
  (`spark.read.format("iceberg").load(folder)`) read exactly the expected rows: the
  fixture's expected rows (computed from what its steps intend) minus what the step removes,
  the rows of a file taken from Spark's own `_file` / `_pos` metadata columns;
- Iceberg Spark's metadata tables agree with the new snapshot: `snapshots` (id, parent,
  operation, summary), `entries` (status, snapshot id, data and file sequence numbers of
  the entries this snapshot wrote, DV fields), and `files`/`delete_files` add up to the
  summary's totals;
- finally Iceberg Spark writes the table itself (a merge-on-read DELETE) and reads it right.

Cases: v2 (`v2_part`): remove a data file; add a Parquet position delete file. v3
(`v3_part`): replace a deletion vector (one blob of a shared Puffin file removed, a new
Puffin DV added), remove a data file with a DV (its DV goes too), rewrite a data file
keeping its data sequence number.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO, parquet_file_to_data_file
from pyiceberg.typedef import Record

from dvtool.iceberg.manifest_writers import v3_field
from dvtool.iceberg.snapshot_files import live_files
from dvtool.iceberg.snapshot_producer import AddedFile, SnapshotChanges, produce_snapshot
from dvtool.iceberg.tables import IcebergTable, open_iceberg
from tests.engines.jvm_engines import JvmSession
from tests.iceberg.snapshot_commits import commit_locally, position_delete_file, puffin_dvs
from tests.iceberg_oracles import ORACLES, oracle_rows
from tests.reference.iceberg_tables import copy_table, warehouse

Row = dict[str, Any]
NAMESPACE = "snapprod"
# Runs in the engine's process: the table's rows through a path load (HadoopTables).
READ_BY_PATH = """
frame = spark.read.format("iceberg").load(args["path"])
result = [[r.id, r.cat, str(r.d), r.v] for r in frame.collect()]
"""


class Copy:
    """A writable copy of a fixture table in the `local` catalog, and its expected rows."""

    def __init__(self, session: JvmSession, entry: dict[str, Any], name: str) -> None:
        self.session = session
        self.root = warehouse(session) / NAMESPACE / name
        copy_table(session, entry, self.root)
        self.name = f"local.{NAMESPACE}.{name}"
        self.expected: list[Row] = [dict(r) for r in entry["expected"]]
        self.table = self.opened()

    def opened(self) -> IcebergTable:
        return open_iceberg(str(self.root))

    def commit(self, changes: SnapshotChanges) -> Any:
        produced = produce_snapshot(self.table, self.table.io, changes)
        self.table = commit_locally(self.table, produced)
        self.session.sql(f"REFRESH TABLE {self.name}")
        return produced

    def spark(self, query: str) -> list[Row]:
        return self.session.rows(query.format(t=self.name))

    def drop(self, ids: set[int]) -> None:
        self.expected = [r for r in self.expected if r["id"] not in ids]

    def live_positions(self, path: str) -> dict[int, int]:
        """id -> position of the live rows of a data file (Spark's `_file`, `_pos`)."""
        rows = self.spark(f"SELECT id, _pos FROM {{t}} WHERE _file = '{path}'")
        return {r["id"]: r["_pos"] for r in rows}


@pytest.fixture(scope="module")
def copies(iceberg_spark: JvmSession, iceberg_tables: dict[str, Any]) -> Callable[[str], Copy]:
    def make(name: str) -> Copy:
        return Copy(iceberg_spark, iceberg_tables[name], name)

    return make


def assert_reads(copy: Copy) -> None:
    """Every reader sees exactly the expected rows."""
    location = copy.table.metadata_location
    for oracle in ORACLES:
        assert oracle_rows(oracle, location) == copy.expected, oracle
    spark = copy.session.python(READ_BY_PATH, path=str(copy.root))
    by_path = sorted(
        ({"id": i, "cat": c, "d": dt.date.fromisoformat(d), "v": v} for i, c, d, v in spark),
        key=lambda r: r["id"],
    )
    assert by_path == copy.expected


def assert_metadata_tables(copy: Copy, produced: Any) -> list[Row]:
    """Spark's `snapshots`, `files` and `entries` agree with the snapshot; the entries
    it wrote (ADDED and DELETED by it)."""
    snapshot = produced.snapshot
    (row,) = copy.spark(
        f"SELECT parent_id, operation, summary FROM {{t}}.snapshots"
        f" WHERE snapshot_id = {snapshot.snapshot_id}"
    )
    summary = dict(row["summary"])
    assert row["parent_id"] == snapshot.parent_snapshot_id
    assert row["operation"] == summary.pop("operation", row["operation"]) == "delete"
    ours = dict(snapshot.summary.additional_properties)
    assert summary == ours
    totals = copy.spark(
        "SELECT content, count(*) AS n, sum(record_count) AS records FROM {t}.files"
        " GROUP BY content"
    )
    by_content = {r["content"]: r for r in totals}
    assert int(ours["total-data-files"]) == by_content[0]["n"]
    assert int(ours["total-records"]) == by_content[0]["records"]
    assert int(ours["total-delete-files"]) == sum(r["n"] for c, r in by_content.items() if c)
    assert int(ours["total-position-deletes"]) == by_content.get(1, {"records": 0})["records"]
    mine: list[Row] = copy.spark(
        "SELECT status, snapshot_id, sequence_number, file_sequence_number, data_file"
        f" FROM {{t}}.entries WHERE snapshot_id = {snapshot.snapshot_id}"
    )
    for entry in mine:
        if entry["status"] == 1:  # ADDED by this snapshot: its sequence number, inherited
            assert entry["file_sequence_number"] == snapshot.sequence_number
    return mine


def spark_deletes(copy: Copy, row_id: int) -> None:
    """Iceberg Spark writes the table (merge-on-read DELETE) and everyone reads it right."""
    copy.session.sql(f"DELETE FROM {copy.name} WHERE id = {row_id}")
    copy.table = copy.opened()
    copy.drop({row_id})
    assert_reads(copy)


def data_file_with_live_rows(copy: Copy, least: int, without_dv: bool = False) -> Any:
    """A live data file of the copy with at least `least` live rows."""
    data, deletes = live_files(
        copy.table.metadata, copy.table.metadata.current_snapshot(), copy.table.io
    )  # type: ignore[arg-type]
    referenced = {d.referenced_data_file for d in deletes}
    for entry in data:
        if without_dv and entry.path in referenced:
            continue
        if len(copy.live_positions(entry.path)) >= least:
            return entry
    raise AssertionError("no such data file")


def test_v2_remove_a_data_file_and_add_position_deletes(copies: Callable[[str], Copy]) -> None:
    copy = copies("v2_part")
    assert_reads(copy)
    gone = data_file_with_live_rows(copy, 1)
    ids = set(copy.live_positions(gone.path))
    produced = copy.commit(SnapshotChanges("delete", removed=frozenset({(gone.path, None)})))
    copy.drop(ids)
    assert_reads(copy)
    written = assert_metadata_tables(copy, produced)
    (removed,) = written
    assert (removed["status"], removed["data_file"]["file_path"]) == (2, gone.path)
    assert removed["sequence_number"] == gone.data_sequence_number

    target = data_file_with_live_rows(copy, 2)
    positions = copy.live_positions(target.path)
    doomed = sorted(positions)[:2]
    deletes = position_delete_file(
        copy.table,
        "dvtool-pos-deletes.parquet",
        [(target.path, positions[i]) for i in doomed],
        Record(*target.partition),
    )
    deletes.spec_id = target.spec_id
    produced = copy.commit(SnapshotChanges("delete", added=(AddedFile(deletes),)))
    copy.drop(set(doomed))
    assert_reads(copy)
    (added,) = assert_metadata_tables(copy, produced)
    assert (added["status"], added["data_file"]["content"]) == (1, 1)
    assert added["sequence_number"] == produced.snapshot.sequence_number
    spark_deletes(copy, copy.expected[0]["id"])


def test_v3_replace_remove_and_rewrite(copies: Callable[[str], Copy]) -> None:
    copy = copies("v3_part")
    assert_reads(copy)
    metadata, io = copy.table.metadata, copy.table.io
    data, deletes = live_files(metadata, metadata.current_snapshot(), io)  # type: ignore[arg-type]
    by_path = {d.path: d for d in data}
    shared = [d for d in deletes if sum(e.path == d.path for e in deletes) > 1]
    old = next(
        d
        for d in shared
        if d.referenced_data_file and len(copy.live_positions(d.referenced_data_file)) > 0
    )
    target = by_path[str(old.referenced_data_file)]
    live = copy.live_positions(target.path)
    deleted = set(range(target.record_count)) - set(live.values())
    victim = min(live)
    (dv,) = puffin_dvs(
        copy.table,
        "dvtool-dv.puffin",
        {target.path: sorted(deleted | {live[victim]})},
        Record(*target.partition),
    )
    dv.spec_id = target.spec_id
    produced = copy.commit(
        SnapshotChanges(
            "delete", added=(AddedFile(dv),), removed=frozenset({(old.path, old.content_offset)})
        )
    )
    copy.drop({victim})
    assert_reads(copy)
    written = assert_metadata_tables(copy, produced)
    statuses = sorted((e["status"], e["data_file"]["file_path"]) for e in written)
    assert statuses == [(1, dv.file_path), (2, old.path)]
    dv_rows = copy.spark(
        "SELECT referenced_data_file, content_offset, content_size_in_bytes FROM {t}.delete_files"
        f" WHERE file_path = '{dv.file_path}'"
    )
    assert dv_rows == [
        {
            "referenced_data_file": target.path,
            "content_offset": v3_field(dv, "content_offset"),
            "content_size_in_bytes": v3_field(dv, "content_size_in_bytes"),
        }
    ]
    snapshot = produced.snapshot
    assert snapshot.first_row_id == metadata.next_row_id

    # remove the data file: its DV goes with it
    ids = set(copy.live_positions(target.path))
    produced = copy.commit(SnapshotChanges("overwrite", removed=frozenset({(target.path, None)})))
    copy.drop(ids)
    assert_reads(copy)
    left = copy.spark(
        f"SELECT count(*) AS n FROM {{t}}.delete_files WHERE referenced_data_file = '{target.path}'"
    )
    assert left == [{"n": 0}]

    # rewrite a data file without DV, keeping its data sequence number
    source = data_file_with_live_rows(copy, 1, without_dv=True)
    rewritten_path = str(Path(source.path).with_name("dvtool-rewritten.parquet"))
    # the table's columns only: a file Spark's MERGE wrote also holds the row-lineage
    # columns (_row_id, ...), which pyiceberg's statistics cannot map
    pq.write_table(pq.read_table(source.path, columns=["id", "cat", "d", "v"]), rewritten_path)
    rewritten = parquet_file_to_data_file(PyArrowFileIO(), copy.table.metadata, rewritten_path)
    rewritten[3] = Record(*source.partition)
    rewritten.spec_id = source.spec_id
    produced = copy.commit(
        SnapshotChanges(
            "replace",
            added=(AddedFile(rewritten, data_sequence_number=source.data_sequence_number),),
            removed=frozenset({(source.path, None)}),
        )
    )
    assert_reads(copy)
    (entry,) = copy.spark(
        "SELECT sequence_number, file_sequence_number FROM {t}.entries"
        f" WHERE data_file.file_path = '{rewritten_path}'"
    )
    assert entry == {
        "sequence_number": source.data_sequence_number,
        "file_sequence_number": produced.snapshot.sequence_number,
    }
    spark_deletes(copy, copy.expected[-1]["id"])


ENGINE_KEYS = ("spark.", "engine-", "app-", "iceberg-version")


def java_shape(summary: dict[str, str], *counted: str) -> dict[str, str]:
    """A summary without the engine's own keys; of the figures that differ between two
    like changes (sizes, totals, manifests kept, and the `counted` ones) only the keys."""
    varying = ("-size", "total-", "manifests-kept", *counted)
    return {
        k: ("*" if any(v in k for v in varying) else value)
        for k, value in summary.items()
        if not k.startswith(ENGINE_KEYS)
    }


def append_rows(copy: Copy, name: str, ids: range) -> Any:
    """Write rows `ids` to a new data file of the (unpartitioned) copy; its DataFile."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    rows = [{"id": i, "cat": "z", "d": dt.date(2024, 2, 1), "v": i} for i in ids]
    schema = schema_to_pyarrow(copy.table.metadata.schema())
    path = copy.root / "data" / name
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    copy.expected = sorted([*copy.expected, *rows], key=lambda r: r["id"])
    return parquet_file_to_data_file(PyArrowFileIO(), copy.table.metadata, str(path))


@pytest.mark.parametrize("name", ["v2_flat", "v3_flat"])
def test_summaries_have_the_shape_of_icebergs(name: str, copies: Callable[[str], Copy]) -> None:
    """dvtool appends two files (compared with the fixture's Spark INSERT), deletes one row
    of one (a position delete file on v2, a DV on v3), then Iceberg Spark deletes one row
    of the other: the summaries have the same keys and counts (Java's SnapshotSummary;
    changed-partition-count of an unpartitioned table included)."""
    copy = copies(name)
    inserted = copy.table.metadata.snapshots[0].summary
    assert inserted is not None
    ours, theirs = (append_rows(copy, f"dvtool-{n}.parquet", range(n, n + 4)) for n in (1000, 2000))
    produced = copy.commit(SnapshotChanges("append", added=(AddedFile(ours), AddedFile(theirs))))
    assert_reads(copy)
    appended = dict(produced.snapshot.summary.additional_properties)
    assert java_shape(appended, "added-") == java_shape(
        dict(inserted.additional_properties), "added-"
    )
    if copy.table.metadata.format_version == 2:
        delete = position_delete_file(copy.table, "dvtool-one.parquet", [(ours.file_path, 0)])
    else:
        (delete,) = puffin_dvs(copy.table, "dvtool-one.puffin", {ours.file_path: [0]})
    produced = copy.commit(SnapshotChanges("delete", added=(AddedFile(delete),)))
    copy.drop({1000})
    assert_reads(copy)
    spark_deletes(copy, 2000)
    spark_summary = copy.table.metadata.current_snapshot().summary  # type: ignore[union-attr]
    mine = dict(produced.snapshot.summary.additional_properties)
    assert java_shape(mine) == java_shape(dict(spark_summary.additional_properties))
