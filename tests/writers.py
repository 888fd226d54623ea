"""Fixture builders: Delta tables written the way other writers really write them.

dvtool must work on tables it did not create. Each builder below writes a complete table
(data files and `_delta_log`) under the directory it is given and returns that path, the way
one real writer produces it: delta-rs through the `deltalake` package itself; Databricks
Runtime, Delta Spark, Iceberg conversion and Spark 4 variant files re-created here action by
action (PROTOCOL.md), with the JSON spelled as those writers spell it (compact JSON, one
action per line, commitInfo first, field order, engineInfo, Databricks `tags`) and parquet
written by pyarrow with their codecs, key-value metadata and field ids. The variant files are
written by real Spark (PySpark 4, in a child process).

- `deltalake_dv_table`: delta-rs write, append, compact, delete, update, merge.
- `row_tracking_table`: Databricks row tracking (baseRowId, materialized row id columns, DVs).
- `clustered_table`: Delta Spark liquid clustering (domain `delta.clustering`).
- `column_mapping_id_table`: a table converted from Iceberg, column mapping `id` mode.
- `variant_table`: `variant` columns from real Spark, unshredded or shredded.
- `materialized_partition_table`: writer feature `materializePartitionColumns`.
- `spark_int96_table`: INT96 timestamps from real Spark, 0001-01-01 to 9999-12-31 (the open
  ends of slowly changing dimensions), decimals of all three physical types, nested.

Nothing here imports dvtool: the tables are independent of the code under test. Expected
rows are available as plain data (`deltalake_dv_rows`, `ROW_TRACKING_*`, `VARIANT_ROWS`, ...)
for tests to compare against readers.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from tests.shared_builds import shared_build

Row = dict[str, Any]
Action = dict[str, Any]

DV_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
UTC = dt.timezone.utc

DATABRICKS_ENGINE = "Databricks-Runtime/15.4.x-scala2.12"
DATABRICKS_SPARK = "3.5.0"
DELTA_SPARK_ENGINE = "Apache-Spark/3.5.2 Delta-Lake/3.2.0"
DELTA_SPARK_SPARK = "3.5.2"
DELTA_SPARK_4_ENGINE = "Apache-Spark/4.0.0 Delta-Lake/4.0.0"
STRING_PREFIX = 32  # Delta Spark's `dataSkippingStringPrefixLength`
OPTIMIZE_TARGET_SIZE = "268435456"


# -- encodings --------------------------------------------------------------------------------


def compact_json(value: Any) -> str:
    """JSON as Jackson writes Delta actions: no spaces, non-ASCII characters as they are."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def z85_encode(data: bytes) -> str:
    """Z85 (ZeroMQ Base-85) of `data`, whose length must be a multiple of 4 (a UUID's 16
    bytes give the 20 characters of a `u` DV descriptor)."""
    if len(data) % 4:
        raise ValueError("Z85 needs a multiple of 4 bytes")
    out = []
    for i in range(0, len(data), 4):
        (value,) = struct.unpack(">I", data[i : i + 4])
        chars = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chars.append(_Z85[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def dv_bitmap_bytes(rows: Iterable[int]) -> bytes:
    """A DV's serialized bitmap (PROTOCOL.md "Deletion Vector Format"): magic number
    1681511377 little-endian, then the portable 64-bit RoaringBitmap of the row indexes."""
    return struct.pack("<I", DV_MAGIC) + BitMap64(sorted(rows)).serialize()


def write_dv_file(table: Path, row_sets: Sequence[Iterable[int]]) -> list[dict[str, Any]]:
    """One DV file `deletion_vector_<uuid>.bin` at the table root holding one DV per row set
    (format version byte 1, then per DV: big-endian size, bitmap, big-endian CRC-32 of the
    bitmap), as Delta Spark and Databricks write them; returns the `u` descriptors in the
    field order they use."""
    file_id = uuid.uuid4()
    data = b"\x01"
    descriptors = []
    for rows in row_sets:
        indexes = sorted(set(rows))
        bitmap = dv_bitmap_bytes(indexes)
        descriptors.append(
            {
                "storageType": "u",
                "pathOrInlineDv": z85_encode(file_id.bytes),
                "offset": len(data),
                "sizeInBytes": len(bitmap),
                "cardinality": len(indexes),
            }
        )
        data += struct.pack(">I", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))
    (table / f"deletion_vector_{file_id}.bin").write_bytes(data)
    return descriptors


# -- schemas and stats ------------------------------------------------------------------------


def delta_field(
    name: str, data_type: Any, *, nullable: bool = True, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A Delta schema StructField in the key order Delta Spark serializes."""
    return {"name": name, "type": data_type, "nullable": nullable, "metadata": metadata or {}}


def schema_string(fields: Sequence[dict[str, Any]]) -> str:
    """A metaData `schemaString` holding `fields`."""
    return compact_json({"type": "struct", "fields": list(fields)})


def _spark_type(arrow_type: pa.DataType) -> Any:
    """The Spark SQL type name (as in `org.apache.spark.sql.parquet.row.metadata`)."""
    simple = {
        pa.int8(): "byte",
        pa.int16(): "short",
        pa.int32(): "integer",
        pa.int64(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.string(): "string",
        pa.binary(): "binary",
        pa.date32(): "date",
    }
    if arrow_type in simple:
        return simple[arrow_type]
    if pa.types.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz else "timestamp_ntz"
    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_struct(arrow_type):
        return {
            "type": "struct",
            "fields": [_spark_field(arrow_type.field(i)) for i in range(arrow_type.num_fields)],
        }
    if pa.types.is_list(arrow_type):
        return {
            "type": "array",
            "elementType": _spark_type(arrow_type.value_type),
            "containsNull": True,
        }
    raise ValueError(f"no Spark type for {arrow_type}")


def _spark_field(arrow_field: pa.Field) -> dict[str, Any]:
    return delta_field(
        arrow_field.name, _spark_type(arrow_field.type), nullable=arrow_field.nullable
    )


def write_spark_parquet(
    path: Path, data: pa.Table, *, spark_version: str, int96: bool = False
) -> int:
    """Write `data` as Spark's parquet writer does (snappy; Spark's key-value metadata
    `org.apache.spark.version` and `org.apache.spark.sql.parquet.row.metadata`; no Arrow
    schema; timestamps as INT96 when `int96`, the default `outputTimestampType` of OSS
    Spark 3); returns the file size."""
    row_metadata = compact_json(
        {"type": "struct", "fields": [_spark_field(f) for f in data.schema]}
    )
    data = data.replace_schema_metadata(
        {
            "org.apache.spark.version": spark_version,
            "org.apache.spark.sql.parquet.row.metadata": row_metadata,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        data, path, compression="snappy", store_schema=False, use_deprecated_int96_timestamps=int96
    )
    return path.stat().st_size


def _stat_value(value: Any, delta_type: str) -> Any:
    """A min/max value as Delta Spark writes it in the JSON stats (years of 4 digits)."""
    if isinstance(value, dt.datetime):
        text = f"{value.year:04d}-" + value.strftime("%m-%dT%H:%M:%S")
        text += f".{value.microsecond // 1000:03d}"
        if delta_type == "timestamp":
            return text + "Z"
        return text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return value[:STRING_PREFIX]
    return value


_MIN_MAX_TYPES = ("byte", "short", "integer", "long", "float", "double", "string", "date")


def _column_stats(
    column: pa.ChunkedArray | pa.Array,
    delta_type: Any,
    key: str,
    mins: dict[str, Any],
    maxs: dict[str, Any],
    nulls: dict[str, Any],
    mode: str,
) -> None:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(delta_type, dict) and delta_type.get("type") == "struct":
        children = column.flatten()
        sub_mins: dict[str, Any] = {}
        sub_maxs: dict[str, Any] = {}
        sub_nulls: dict[str, Any] = {}
        names = [column.type.field(i).name for i in range(column.type.num_fields)]
        for child_field in delta_type["fields"]:
            child_key = _physical(child_field, mode)
            child = children[names.index(child_key)]
            _column_stats(
                child, child_field["type"], child_key, sub_mins, sub_maxs, sub_nulls, mode
            )
        for target, sub in ((mins, sub_mins), (maxs, sub_maxs), (nulls, sub_nulls)):
            if sub:
                target[key] = sub
        return
    nulls[key] = column.null_count
    with_bounds = isinstance(delta_type, str) and (
        delta_type in _MIN_MAX_TYPES or delta_type.startswith("timestamp")
    )
    if with_bounds and column.null_count < len(column):
        bounds = pc.min_max(column).as_py()
        mins[key] = _stat_value(bounds["min"], delta_type)
        maxs[key] = _stat_value(bounds["max"], delta_type)


def _physical(field_: dict[str, Any], mode: str) -> str:
    if mode in ("name", "id"):
        return str(field_["metadata"]["delta.columnMapping.physicalName"])
    return str(field_["name"])


def delta_stats(
    data: pa.Table,
    fields: Sequence[dict[str, Any]],
    *,
    mode: str = "none",
    tight_bounds: bool | None = True,
) -> str:
    """Per-file statistics (PROTOCOL.md "Per-file Statistics") as Delta Spark writes them:
    numRecords, then minValues / maxValues (numbers, strings cut to 32 characters, dates,
    timestamps in milliseconds; none for booleans, binaries, variants, arrays, maps) and
    nullCount for the `fields` given (by physical name), then `tightBounds` when the table
    has deletion vectors (None leaves it out). Partition columns are never in stats."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for f in fields:
        key = _physical(f, mode)
        _column_stats(data.column(key), f["type"], key, mins, maxs, nulls, mode)
    stats: dict[str, Any] = {
        "numRecords": data.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    }
    if tight_bounds is not None:
        stats["tightBounds"] = tight_bounds
    return compact_json(stats)


def loosen_stats(stats: str) -> str:
    """Stats of a file that just got a DV: Delta keeps them and sets `tightBounds` false."""
    parsed = json.loads(stats)
    parsed["tightBounds"] = False
    return compact_json(parsed)


# -- the log ----------------------------------------------------------------------------------


class DeltaLog:
    """Writes JSON commits `_delta_log/<version:020d>.json`: one compact action per line,
    each line ending in a newline, as Delta Spark and Databricks do. Commit timestamps
    strictly increase."""

    def __init__(self, table: Path) -> None:
        self.table = table
        self.version = -1
        self._last = 0
        (table / "_delta_log").mkdir(parents=True, exist_ok=True)

    def now(self) -> int:
        """Milliseconds since the epoch, greater than any given before."""
        self._last = max(int(time.time() * 1000), self._last + 1)
        return self._last

    def commit(self, actions: Sequence[Action]) -> int:
        self.version += 1
        text = "".join(compact_json(a) + "\n" for a in actions)
        (self.table / "_delta_log" / f"{self.version:020d}.json").write_text(text)
        return self.version


def mtime_ms(path: Path) -> int:
    """A data file's modification time in milliseconds, as a writer lists it."""
    return int(path.stat().st_mtime * 1000)


def protocol(reader_features: Sequence[str], writer_features: Sequence[str]) -> Action:
    """A table-features protocol: reader version 3 only when there are reader features."""
    body: dict[str, Any] = {"minReaderVersion": 3 if reader_features else 1}
    body["minWriterVersion"] = 7
    if reader_features:
        body["readerFeatures"] = list(reader_features)
    body["writerFeatures"] = list(writer_features)
    return {"protocol": body}


def metadata_action(
    fields: Sequence[dict[str, Any]],
    *,
    partition_columns: Sequence[str] = (),
    configuration: dict[str, str] | None = None,
    created_time: int,
    table_id: str | None = None,
) -> Action:
    """A `metaData` action in Delta Spark's key order (a fresh table id unless given)."""
    return {
        "metaData": {
            "id": table_id or str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string(fields),
            "partitionColumns": list(partition_columns),
            "configuration": dict(configuration or {}),
            "createdTime": created_time,
        }
    }


def domain_metadata(domain: str, configuration: dict[str, Any]) -> Action:
    """A `domainMetadata` action; `configuration` is serialized as a compact JSON string."""
    return {
        "domainMetadata": {
            "domain": domain,
            "configuration": compact_json(configuration),
            "removed": False,
        }
    }


def _partition_dir(values: dict[str, str | None]) -> str:
    """Hive-style directories; a null value is `__HIVE_DEFAULT_PARTITION__`."""
    return "".join(
        f"{k}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}/" for k, v in values.items()
    )


# -- delta-rs (the deltalake package) ---------------------------------------------------------


def _deltalake_batch(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"n{i}" for i in ids],
            "value": [i * 1.5 for i in ids],
            "part": ["a" if i % 2 else "b" for i in ids],
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


def _deltalake_plan(rows: int) -> dict[str, int]:
    """The ids the recipe of `deltalake_dv_table` touches, for `rows` initial rows."""
    if rows < 15:
        raise ValueError("deltalake_dv_table needs at least 15 rows")
    third = rows // 3
    return {
        "first": third,
        "second": 2 * third,
        "deleted": 3,
        "updated": 2 * third + 4,
        "merged": 2 * third + 5,
        "inserted": rows + 10,
    }


def deltalake_dv_rows(rows: int = 30) -> list[Row]:
    """The logical rows `deltalake_dv_table(path, rows)` leaves, computed here from the
    recipe (not read back): ids 0..rows-1 minus the deleted id, one row updated, one row
    replaced and one inserted by the merge."""
    plan = _deltalake_plan(rows)
    out = {r["id"]: r for r in _deltalake_batch(0, rows).to_pylist()}
    del out[plan["deleted"]]
    out[plan["updated"]]["value"] = 100.0
    merged = plan["merged"]
    out[merged] = {**out[merged], "name": f"m{merged}", "value": 5.5, "ts": None}
    new = plan["inserted"]
    out[new] = {"id": new, "name": f"m{new}", "value": float(new), "part": "b", "ts": None}
    return [out[k] for k in sorted(out)]


def deltalake_dv_table(
    path: Path, rows: int = 30, partition_by: Sequence[str] | None = None
) -> Path:
    """A table written and rewritten by delta-rs itself (`deltalake` 1.6), with deletion
    vectors enabled; columns id long, name string, value double, part string ("a"/"b"),
    ts timestamp (UTC); `rows` initial rows (at least 15).

    Recipe: `write_deltalake(..., configuration={"delta.enableDeletionVectors": "true"})`
    of the first third, an append of the second third, `optimize.compact()`, an append of
    the last third, `delete("id = 3")`, `update(id = 2n/3 + 4: value = 100.0)` and a
    `merge` (update id 2n/3 + 5, insert id n + 10).

    What deltalake 1.6.6 really produces (observed):
    - protocol 3/7, readerFeatures [variantType, deletionVectors], writerFeatures
      [appendOnly, deletionVectors, variantType, invariants]; no commit ever writes a DV:
      delete/update/merge rewrite whole files (copy-on-write), so the table supports DVs
      but has none until another writer adds them.
    - commits without a trailing newline; adds carry `"tags":null,"baseRowId":null,
      "defaultRowCommitVersion":null,"clusteringProvider":null`; stats keys in arbitrary
      order, a 0.0 minimum written as `-0.0`; engineInfo `delta-rs:py-1.6.6`.
    - write/append files: SNAPPY, `created_by` "delta-rs version py-1.6.6", string columns
      read back by pyarrow as `string` (Arrow schema stored in the file).
    - optimize.compact output: ZSTD, created_by delta-rs, `string`.
    - delete output: ZSTD, created_by "datafusion version 55.1.0", `string_view`, file name
      `...-c000.zstd.parquet`.
    - update / merge output: SNAPPY, created_by delta-rs, `string_view`.
    - timestamps: `timestamp[us, tz=UTC]` everywhere; no parquet field ids.
    Live files at the end, unpartitioned: the delete's ZSTD/string_view DataFusion file
    (the compacted rows minus id 3) and the merge's SNAPPY/string_view file (the last
    third, which the update had already rewritten). Partitioned by `part` (one Hive
    directory per value, partition column not in the files): per partition the delete's
    or untouched compaction output (ZSTD; `string_view` from DataFusion in `a`, `string`
    from delta-rs in `b`), the update's / merge's SNAPPY/string_view rewrite of the last
    third, and the merge's one-row insert file in `b`.
    """
    from deltalake import DeltaTable, write_deltalake

    plan = _deltalake_plan(rows)
    uri = str(path)
    parts = list(partition_by) if partition_by else None
    write_deltalake(
        uri,
        _deltalake_batch(0, plan["first"]),
        partition_by=parts,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    write_deltalake(uri, _deltalake_batch(plan["first"], plan["second"]), mode="append")
    DeltaTable(uri).optimize.compact()
    write_deltalake(uri, _deltalake_batch(plan["second"], rows), mode="append")
    table = DeltaTable(uri)
    table.delete(f"id = {plan['deleted']}")
    table.update(updates={"value": "100.0"}, predicate=f"id = {plan['updated']}")
    merged, inserted = plan["merged"], plan["inserted"]
    source = pa.table(
        {
            "id": pa.array([merged, inserted], pa.int64()),
            "name": [f"m{merged}", f"m{inserted}"],
            "value": [5.5, float(inserted)],
            "part": ["a" if merged % 2 else "b", "b"],
            "ts": pa.array([None, None], pa.timestamp("us", tz="UTC")),
        }
    )
    (
        table.merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return path


# -- Databricks row tracking ------------------------------------------------------------------

ROW_TRACKING_FIELDS = [
    delta_field("id", "long"),
    delta_field("name", "string"),
    delta_field("part", "string"),
    delta_field("value", "double"),
]
ROW_TRACKING_DELETED = (1, 3)  # DELETE ... WHERE id IN (1, 3), in the first file
ROW_TRACKING_UPDATED = 7  # UPDATE ... SET value = -7.0 WHERE id = 7, in the second file
ROW_TRACKING_COMMITS = ("CREATE TABLE AS SELECT", "WRITE", "DELETE", "OPTIMIZE", "UPDATE")


def _rt_row(i: int, part: str) -> Row:
    return {"id": i, "name": f"row-{i}", "part": part, "value": i * 1.5}


def row_tracking_rows() -> list[Row]:
    """The logical rows `row_tracking_table` leaves (any options), with the stable
    `_row_id` and `_row_commit_version` a preserving writer gives them: every row keeps
    the fresh id it got when inserted (equal to `id` by construction); inserted rows keep
    their insert version (0 for ids 0-9, 1 for ids 10-14), the updated row gets the
    UPDATE's version 4."""
    out = []
    for i in range(15):
        if i in ROW_TRACKING_DELETED:
            continue
        row = _rt_row(i, "y" if 5 <= i < 10 else "x")
        row["_row_commit_version"] = 0 if i < 10 else 1
        if i == ROW_TRACKING_UPDATED:
            row["value"] = -7.0
            row["_row_commit_version"] = 4
        row["_row_id"] = i
        out.append(row)
    return out


@dataclass
class _TrackedFile:
    """A data file of the row tracking table and what a reader would derive for its rows."""

    path: str
    rows: list[Row]
    part: str
    size: int
    base_row_id: int
    version: int
    stats: str
    tags: dict[str, str]
    stable: list[tuple[int, int]] = field(default_factory=list)  # (row id, commit version)
    dv: dict[str, Any] | None = None
    deleted: set[int] = field(default_factory=set)

    def live(self) -> list[tuple[Row, tuple[int, int]]]:
        return [
            (r, s)
            for i, (r, s) in enumerate(zip(self.rows, self.stable, strict=True))
            if i not in self.deleted
        ]


class _RowTrackingWriter:
    """What Databricks Runtime 15.4 writes for a row tracking table (see row_tracking_table)."""

    def __init__(self, table: Path, *, enabled: bool, partitioned: bool, with_dvs: bool) -> None:
        self.table = table
        self.enabled = enabled
        self.partitioned = partitioned
        self.with_dvs = with_dvs
        self.log = DeltaLog(table)
        self.id_column = f"_row-id-col-{uuid.uuid4()}"
        self.version_column = f"_row-commit-version-col-{uuid.uuid4()}"
        self.high_water_mark = -1
        self.user = {"userId": "4213370000000001", "userName": "fixtures@example.com"}
        self.cluster = "0918-120000-fixtur3s"

    # -- files

    def write_file(
        self,
        rows: list[Row],
        part: str,
        version: int,
        materialized: Sequence[tuple[int | None, int | None]] | None,
    ) -> _TrackedFile:
        """A new data file with fresh row ids above the high-water mark; `materialized`
        holds the (row id, commit version) to preserve per row (None: not preserved)."""
        name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        relative = f"part={part}/{name}" if self.partitioned else name
        columns = [
            f["name"] for f in ROW_TRACKING_FIELDS if not (self.partitioned and f["name"] == "part")
        ]
        arrays: dict[str, pa.Array] = {
            "id": pa.array([r["id"] for r in rows], pa.int64()),
            "name": pa.array([r["name"] for r in rows], pa.string()),
            "part": pa.array([r["part"] for r in rows], pa.string()),
            "value": pa.array([r["value"] for r in rows], pa.float64()),
        }
        data = pa.table({c: arrays[c] for c in columns})
        if materialized is not None and self.enabled:
            data = data.append_column(
                self.id_column, pa.array([m[0] for m in materialized], pa.int64())
            ).append_column(self.version_column, pa.array([m[1] for m in materialized], pa.int64()))
        size = write_spark_parquet(self.table / relative, data, spark_version=DATABRICKS_SPARK)
        stat_fields = [f for f in ROW_TRACKING_FIELDS if f["name"] in columns]
        stats = delta_stats(data, stat_fields, tight_bounds=True if self.with_dvs else None)
        base = self.high_water_mark + 1
        self.high_water_mark += len(rows)
        insertion = str(mtime_ms(self.table / relative) * 1000)
        tags = {
            "INSERTION_TIME": insertion,
            "MIN_INSERTION_TIME": insertion,
            "MAX_INSERTION_TIME": insertion,
            "OPTIMIZE_TARGET_SIZE": OPTIMIZE_TARGET_SIZE,
        }
        tracked = _TrackedFile(relative, rows, part, size, base, version, stats, tags)
        for i in range(len(rows)):
            fresh = (base + i, version)
            kept = materialized[i] if materialized is not None and self.enabled else (None, None)
            tracked.stable.append(
                (
                    kept[0] if kept[0] is not None else fresh[0],
                    kept[1] if kept[1] is not None else fresh[1],
                )
            )
        return tracked

    def add(self, f: _TrackedFile, *, data_change: bool = True) -> Action:
        body: dict[str, Any] = {
            "path": f.path,
            "partitionValues": {"part": f.part} if self.partitioned else {},
            "size": f.size,
            "modificationTime": mtime_ms(self.table / f.path),
            "dataChange": data_change,
            "stats": f.stats,
            "tags": f.tags,
        }
        if f.dv:
            body["deletionVector"] = f.dv
        body["baseRowId"] = f.base_row_id
        body["defaultRowCommitVersion"] = f.version
        return {"add": body}

    def remove(
        self, f: _TrackedFile, *, data_change: bool = True, tags: dict[str, str] | None = None
    ) -> Action:
        body: dict[str, Any] = {
            "path": f.path,
            "deletionTimestamp": self.log.now(),
            "dataChange": data_change,
            "extendedFileMetadata": True,
            "partitionValues": {"part": f.part} if self.partitioned else {},
            "size": f.size,
            "tags": {**f.tags, **(tags or {})},
        }
        if f.dv:
            body["deletionVector"] = f.dv
        body["baseRowId"] = f.base_row_id
        body["defaultRowCommitVersion"] = f.version
        body["stats"] = f.stats if data_change else compact_json({"numRecords": len(f.rows)})
        return {"remove": body}

    def watermark(self) -> Action:
        return domain_metadata("delta.rowTracking", {"rowIdHighWaterMark": self.high_water_mark})

    def commit_info(
        self,
        operation: str,
        parameters: dict[str, Any],
        metrics: dict[str, str],
        *,
        blind_append: bool,
        isolation: str = "WriteSerializable",
        tags: dict[str, str] | None = None,
    ) -> Action:
        body: dict[str, Any] = {"timestamp": self.log.now(), **self.user, "operation": operation}
        body["operationParameters"] = parameters
        body["clusterId"] = self.cluster
        if self.log.version >= 0:
            body["readVersion"] = self.log.version
        body["isolationLevel"] = isolation
        body["isBlindAppend"] = blind_append
        body["operationMetrics"] = metrics
        body["tags"] = tags if tags is not None else {}
        body["engineInfo"] = DATABRICKS_ENGINE
        body["txnId"] = str(uuid.uuid4())
        return {"commitInfo": body}

    def preserved(self, copied: bool) -> str:
        return "true" if self.enabled or not copied else "false"

    # -- the commits

    def build(self) -> Path:
        configuration = {}
        if self.with_dvs:
            configuration["delta.enableDeletionVectors"] = "true"
        if self.enabled:
            configuration["delta.enableRowTracking"] = "true"
        configuration["delta.rowTracking.materializedRowCommitVersionColumnName"] = (
            self.version_column
        )
        configuration["delta.rowTracking.materializedRowIdColumnName"] = self.id_column
        partition_by = ["part"] if self.partitioned else []

        # v0: CREATE TABLE AS SELECT: files A (ids 0-4, part x) and B (ids 5-9, part y)
        created = self.log.now()
        a = self.write_file([_rt_row(i, "x") for i in range(5)], "x", 0, None)
        b = self.write_file([_rt_row(i, "y") for i in range(5, 10)], "y", 0, None)
        properties = {
            k: v for k, v in configuration.items() if not k.startswith("delta.rowTracking.")
        }
        self.log.commit(
            [
                self.commit_info(
                    "CREATE TABLE AS SELECT",
                    {
                        "partitionBy": compact_json(partition_by),
                        "clusterBy": "[]",
                        "description": None,
                        "isManaged": "false",
                        "properties": compact_json(properties),
                        "statsOnLoad": False,
                    },
                    {
                        "numFiles": "2",
                        "numOutputRows": "10",
                        "numOutputBytes": str(a.size + b.size),
                    },
                    blind_append=True,
                    tags={
                        "noRowsCopied": "true",
                        "delta.rowTracking.preserved": "true",
                        "restoresDeletedRows": "false",
                    },
                ),
                metadata_action(
                    ROW_TRACKING_FIELDS,
                    partition_columns=partition_by,
                    configuration=configuration,
                    created_time=created,
                ),
                protocol(
                    ["deletionVectors"] if self.with_dvs else [],
                    [
                        *(["deletionVectors"] if self.with_dvs else []),
                        "domainMetadata",
                        "rowTracking",
                    ],
                ),
                self.watermark(),
                self.add(a),
                self.add(b),
            ]
        )

        # v1: WRITE (append): file C (ids 10-14, part x)
        c = self.write_file([_rt_row(i, "x") for i in range(10, 15)], "x", 1, None)
        self.log.commit(
            [
                self.commit_info(
                    "WRITE",
                    {
                        "mode": "Append",
                        "statsOnLoad": False,
                        "partitionBy": compact_json(partition_by),
                    },
                    {"numFiles": "1", "numOutputRows": "5", "numOutputBytes": str(c.size)},
                    blind_append=True,
                    tags={
                        "noRowsCopied": "true",
                        "delta.rowTracking.preserved": "true",
                        "restoresDeletedRows": "false",
                    },
                ),
                self.watermark(),
                self.add(c),
            ]
        )

        # v2: DELETE WHERE id IN (1, 3): a DV on A, or A rewritten without them
        indexes = [i for i, r in enumerate(a.rows) if r["id"] in ROW_TRACKING_DELETED]
        predicate = {"predicate": compact_json(["(id#4242L IN (1,3))"])}
        if self.with_dvs:
            a.stats = loosen_stats(a.stats)  # the remove carries the wide stats too
            remove_a = self.remove(a)
            (a.dv,) = write_dv_file(self.table, [indexes])
            a.deleted = set(indexes)
            metrics = _delete_metrics(dv_added=1, deleted=len(indexes))
            actions = [remove_a, self.add(a)]
        else:
            kept = [
                (r, s)
                for r, s in zip(a.rows, a.stable, strict=True)
                if r["id"] not in ROW_TRACKING_DELETED
            ]
            new_a = self.write_file([r for r, _ in kept], "x", 2, [s for _, s in kept])
            metrics = _delete_metrics(dv_added=0, deleted=len(indexes))
            metrics.update(
                numRemovedFiles="1",
                numCopiedRows=str(len(kept)),
                numAddedFiles="1",
                numRemovedBytes=str(a.size),
                numAddedBytes=str(new_a.size),
            )
            actions = [self.remove(a), self.add(new_a), self.watermark()]
            a = new_a
        self.log.commit(
            [
                self.commit_info(
                    "DELETE",
                    predicate,
                    metrics,
                    blind_append=False,
                    tags={
                        "noRowsCopied": str(self.with_dvs).lower(),
                        "delta.rowTracking.preserved": self.preserved(not self.with_dvs),
                        "restoresDeletedRows": "false",
                    },
                ),
                *actions,
            ]
        )

        # v3: OPTIMIZE: A (live rows) and C compacted into D, row ids and versions preserved
        sources = [a, c]
        copied = [pair for s in sources for pair in s.live()]
        d = self.write_file([r for r, _ in copied], "x", 3, [s for _, s in copied])
        offsets, offset = [], 0
        for s in sources:
            offsets.append(offset)
            offset += len(s.rows) - len(s.deleted)
        removes = [
            self.remove(
                s,
                data_change=False,
                tags={
                    "compactedInto": compact_json([d.path]),
                    "compactionInfo": compact_json(
                        [{"rowOffsetInTarget": o, "sourceNumPhysicalRecords": len(s.rows)}]
                    ),
                },
            )
            for s, o in zip(sources, offsets, strict=True)
        ]
        sizes = sorted([d.size])
        self.log.commit(
            [
                self.commit_info(
                    "OPTIMIZE",
                    {
                        "predicate": "[]",
                        "auto": False,
                        "clusterBy": "[]",
                        "zOrderBy": "[]",
                        "batchId": "0",
                    },
                    {
                        "numRemovedFiles": "2",
                        "numRemovedBytes": str(a.size + c.size),
                        "p25FileSize": str(sizes[0]),
                        "numDeletionVectorsRemoved": str(sum(1 for s in sources if s.dv)),
                        "minFileSize": str(sizes[0]),
                        "numAddedFiles": "1",
                        "maxFileSize": str(sizes[0]),
                        "p75FileSize": str(sizes[0]),
                        "p50FileSize": str(sizes[0]),
                        "numAddedBytes": str(d.size),
                    },
                    blind_append=False,
                    isolation="SnapshotIsolation",
                    tags={"delta.rowTracking.preserved": self.preserved(True)},
                ),
                *removes,
                self.add(d, data_change=False),
                self.watermark(),
            ]
        )

        # v4: UPDATE SET value = -7.0 WHERE id = 7 (in B): the updated row keeps its row
        # id (materialized) but gets a fresh commit version (materialized version null)
        index = next(i for i, r in enumerate(b.rows) if r["id"] == ROW_TRACKING_UPDATED)
        updated = {**b.rows[index], "value": -7.0}
        update_predicate = {"predicate": compact_json([f"(id#4243L = {ROW_TRACKING_UPDATED})"])}
        if self.with_dvs:
            b.stats = loosen_stats(b.stats)
            remove_b = self.remove(b)
            (b.dv,) = write_dv_file(self.table, [[index]])
            b.deleted = {index}
            e = self.write_file([updated], "y", 4, [(b.stable[index][0], None)])
            metrics = _update_metrics(
                dv_added=1, copied=0, added=e.size, removed=0, files_removed=0
            )
            actions = [remove_b, self.add(e), self.add(b)]
        else:
            new_rows = [updated if i == index else r for i, r in enumerate(b.rows)]
            keep = [(s[0], None) if i == index else s for i, s in enumerate(b.stable)]
            e = self.write_file(new_rows, "y", 4, keep)
            metrics = _update_metrics(
                dv_added=0, copied=len(b.rows) - 1, added=e.size, removed=b.size, files_removed=1
            )
            actions = [self.remove(b), self.add(e)]
        self.log.commit(
            [
                self.commit_info(
                    "UPDATE",
                    update_predicate,
                    metrics,
                    blind_append=False,
                    tags={
                        "noRowsCopied": str(self.with_dvs).lower(),
                        "delta.rowTracking.preserved": self.preserved(True),
                        "restoresDeletedRows": "false",
                    },
                ),
                *actions,
                self.watermark(),
            ]
        )
        return self.table


def _delete_metrics(*, dv_added: int, deleted: int) -> dict[str, str]:
    return {
        "numRemovedFiles": "0",
        "numRemovedBytes": "0",
        "numCopiedRows": "0",
        "numDeletionVectorsAdded": str(dv_added),
        "numDeletionVectorsRemoved": "0",
        "numAddedChangeFiles": "0",
        "executionTimeMs": "812",
        "numDeletionVectorsUpdated": "0",
        "numDeletedRows": str(deleted),
        "scanTimeMs": "512",
        "numAddedFiles": "0",
        "numAddedBytes": "0",
        "rewriteTimeMs": "240",
    }


def _update_metrics(
    *, dv_added: int, copied: int, added: int, removed: int, files_removed: int
) -> dict[str, str]:
    return {
        "numRemovedFiles": str(files_removed),
        "numRemovedBytes": str(removed),
        "numCopiedRows": str(copied),
        "numDeletionVectorsAdded": str(dv_added),
        "numDeletionVectorsRemoved": "0",
        "numAddedChangeFiles": "0",
        "executionTimeMs": "1062",
        "numDeletionVectorsUpdated": "0",
        "scanTimeMs": "392",
        "numAddedFiles": "1",
        "numUpdatedRows": "1",
        "numAddedBytes": str(added),
        "rewriteTimeMs": "669",
    }


def row_tracking_table(
    path: Path, *, enabled: bool = True, partitioned: bool = False, with_dvs: bool = True
) -> Path:
    """A row tracking table as Databricks Runtime 15.4 writes it (engineInfo
    `Databricks-Runtime/15.4.x-scala2.12`, file names `part-00000-<uuid>.c000.snappy.parquet`,
    add/remove `tags` INSERTION_TIME / OPTIMIZE_TARGET_SIZE, commitInfo with userId,
    clusterId, `delta.rowTracking.preserved` tags).

    Columns id long, name string, part string, value double (partitioned by `part` when
    `partitioned`); protocol 3/7 readerFeatures [deletionVectors], writerFeatures
    [deletionVectors, domainMetadata, rowTracking] (1/7 without DV features when not
    `with_dvs`); configuration delta.enableDeletionVectors, delta.enableRowTracking and the
    materialized column names `_row-id-col-<uuid>` / `_row-commit-version-col-<uuid>`.

    Commits (see ROW_TRACKING_COMMITS):
    0. CTAS: A (ids 0-4, part x, baseRowId 0) and B (ids 5-9, part y, baseRowId 5),
       defaultRowCommitVersion 0, domainMetadata delta.rowTracking {"rowIdHighWaterMark":9}.
    1. WRITE append: C (ids 10-14, part x, baseRowId 10); high-water mark 14.
    2. DELETE id IN (1, 3): a DV on A (remove + re-add with the DV, same baseRowId /
       defaultRowCommitVersion, stats with tightBounds false); without DVs, A is rewritten
       with its 3 surviving rows (copied: materialized ids and versions).
    3. OPTIMIZE: A's live rows and C's rows compacted into D (dataChange false), whose
       materialized row id / commit version columns hold the stable ids (0, 2, 4, 10-14) and
       versions (0 or 1) of the copied rows, all non-null, and whose baseRowId is above the
       old high-water mark; removes tagged compactedInto / compactionInfo.
    4. UPDATE value = -7.0 WHERE id = 7: a DV on B and a new file E holding the updated row
       with materialized row id 7 and a null materialized commit version (updated rows get
       the fresh version 4); without DVs, B is rewritten (copied rows keep id and version).

    `enabled=False`: rowTracking is supported but `delta.enableRowTracking` is absent, so
    nothing is preserved: adds still carry baseRowId / defaultRowCommitVersion and the
    domain, but no file has materialized columns (stable ids are the fresh ones).
    Expected rows: `row_tracking_rows()` (for `enabled=True`).
    """
    return _RowTrackingWriter(
        path, enabled=enabled, partitioned=partitioned, with_dvs=with_dvs
    ).build()


# -- Delta Spark (OSS) ------------------------------------------------------------------------


def _delta_spark_commit_info(
    log: DeltaLog,
    operation: str,
    parameters: dict[str, Any],
    metrics: dict[str, str],
    *,
    blind_append: bool,
    isolation: str = "Serializable",
    engine: str = DELTA_SPARK_ENGINE,
) -> Action:
    """commitInfo as OSS Delta Spark writes it (no user or cluster fields)."""
    body: dict[str, Any] = {"timestamp": log.now(), "operation": operation}
    body["operationParameters"] = parameters
    if log.version >= 0:
        body["readVersion"] = log.version
    body["isolationLevel"] = isolation
    body["isBlindAppend"] = blind_append
    body["operationMetrics"] = metrics
    body["engineInfo"] = engine
    body["txnId"] = str(uuid.uuid4())
    return {"commitInfo": body}


def _size_metrics(removed: Sequence[int], added: Sequence[int], dvs_removed: int) -> dict[str, str]:
    """OPTIMIZE's metrics; file size percentiles as Delta's FileSizeStatsWithHistogram (the
    sorted sizes at n/4, n/2, 3n/4)."""
    sizes = sorted(added)
    n = len(sizes)
    return {
        "numRemovedFiles": str(len(removed)),
        "numRemovedBytes": str(sum(removed)),
        "p25FileSize": str(sizes[n // 4]),
        "numDeletionVectorsRemoved": str(dvs_removed),
        "minFileSize": str(sizes[0]),
        "numAddedFiles": str(n),
        "maxFileSize": str(sizes[-1]),
        "p75FileSize": str(sizes[3 * n // 4]),
        "p50FileSize": str(sizes[n // 2]),
        "numAddedBytes": str(sum(sizes)),
    }


@dataclass
class _DataFile:
    path: str
    size: int
    stats: str
    rows: list[Row]
    partition_values: dict[str, str | None] = field(default_factory=dict)
    clustering_provider: str | None = None
    dv: dict[str, Any] | None = None

    def add(self, table: Path, *, data_change: bool = True) -> Action:
        """The add as OSS Delta Spark spells it (clusteringProvider last)."""
        body: dict[str, Any] = {
            "path": self.path,
            "partitionValues": self.partition_values,
            "size": self.size,
            "modificationTime": mtime_ms(table / self.path),
            "dataChange": data_change,
            "stats": self.stats,
        }
        if self.dv:
            body["deletionVector"] = self.dv
        if self.clustering_provider:
            body["clusteringProvider"] = self.clustering_provider
        return {"add": body}

    def remove(self, log: DeltaLog, *, data_change: bool = True) -> Action:
        body: dict[str, Any] = {
            "path": self.path,
            "deletionTimestamp": log.now(),
            "dataChange": data_change,
            "extendedFileMetadata": True,
            "partitionValues": self.partition_values,
            "size": self.size,
        }
        if self.dv:
            body["deletionVector"] = self.dv
        return {"remove": body}


CLUSTERED_FIELDS = [
    delta_field("id", "long"),
    delta_field("ts", "timestamp"),
    delta_field("category", "string"),
    delta_field("amount", "double"),
]
CLUSTERED_DELETED = (2, 11)


def _clustered_row(i: int) -> Row:
    return {
        "id": i,
        "ts": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(minutes=i),
        "category": ("books", "games", "tools")[i % 3],
        "amount": i * 2.5,
    }


def clustered_rows() -> list[Row]:
    """The logical rows `clustered_table` leaves: ids 0-17 minus 2 and 11."""
    return [_clustered_row(i) for i in range(18) if i not in CLUSTERED_DELETED]


def clustered_data(rows: Sequence[Row]) -> pa.Table:
    """Rows of `clustered_rows` as the arrow table a clustered file holds."""
    return pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.int64()),
            "ts": pa.array([r["ts"] for r in rows], pa.timestamp("us", tz="UTC")),
            "category": pa.array([r["category"] for r in rows], pa.string()),
            "amount": pa.array([r["amount"] for r in rows], pa.float64()),
        }
    )


def _write_clustered_file(table: Path, ids: Sequence[int], provider: str | None) -> _DataFile:
    rows = [_clustered_row(i) for i in ids]
    data = clustered_data(rows)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    size = write_spark_parquet(table / name, data, spark_version=DELTA_SPARK_SPARK, int96=True)
    stats = delta_stats(data, CLUSTERED_FIELDS, tight_bounds=True)
    return _DataFile(name, size, stats, rows, clustering_provider=provider)


def clustered_table(path: Path) -> Path:
    """A liquid-clustered table as OSS Delta Spark 3.2 writes it (engineInfo
    `Apache-Spark/3.5.2 Delta-Lake/3.2.0`), unpartitioned, clustered by `id`.

    Columns id long, ts timestamp (INT96 in the files, OSS Spark's default), category
    string, amount double; protocol 3/7 readerFeatures [deletionVectors], writerFeatures
    [deletionVectors, domainMetadata, clustering]; domainMetadata `delta.clustering` with
    configuration `{"clusteringColumns":[["id"]],"domainName":"delta.clustering"}`: Delta
    Spark's ClusteringMetadataDomain serializes a list of physical column paths (each a
    list) plus its `domainName` (Delta Kernel leaves `domainName` out; PROTOCOL.md's example
    shows flat names: readers must accept the nested form).

    Commits: 0 CREATE TABLE ... CLUSTER BY (id) (no files); 1 WRITE two unclustered files;
    2 WRITE one more; 3 OPTIMIZE: the three files clustered into two (ids 0-7 and 8-14,
    `"clusteringProvider":"liquid"`, dataChange false); 4 DELETE id IN (2, 11): one DV file
    with two DVs (offsets 1 and after the first), the re-added files keep
    `clusteringProvider`; 5 WRITE one new unclustered file (ids 15-17, no provider).
    Every add has stats for all columns, clustering column included."""
    log = DeltaLog(path)
    created = log.now()
    configuration = {"delta.enableDeletionVectors": "true"}
    log.commit(
        [
            _delta_spark_commit_info(
                log,
                "CREATE TABLE",
                {
                    "partitionBy": "[]",
                    "clusterBy": compact_json(["id"]),
                    "description": None,
                    "isManaged": "false",
                    "properties": compact_json(configuration),
                },
                {},
                blind_append=True,
            ),
            metadata_action(CLUSTERED_FIELDS, configuration=configuration, created_time=created),
            protocol(["deletionVectors"], ["deletionVectors", "domainMetadata", "clustering"]),
            domain_metadata(
                "delta.clustering",
                {"clusteringColumns": [["id"]], "domainName": "delta.clustering"},
            ),
        ]
    )
    first = [_write_clustered_file(path, ids, None) for ids in ([7, 2, 9, 0, 5], [4, 8, 1, 6, 3])]
    second = [_write_clustered_file(path, [12, 10, 14, 11, 13], None)]
    for files in (first, second):
        log.commit(
            [
                _delta_spark_commit_info(
                    log,
                    "WRITE",
                    {"mode": "Append", "partitionBy": "[]"},
                    {
                        "numFiles": str(len(files)),
                        "numOutputRows": str(sum(len(f.rows) for f in files)),
                        "numOutputBytes": str(sum(f.size for f in files)),
                    },
                    blind_append=True,
                ),
                *(f.add(path) for f in files),
            ]
        )
    old = first + second
    clustered = [_write_clustered_file(path, ids, "liquid") for ids in (range(8), range(8, 15))]
    log.commit(
        [
            _delta_spark_commit_info(
                log,
                "OPTIMIZE",
                {
                    "predicate": "[]",
                    "clusterBy": compact_json(["id"]),
                    "zOrderBy": "[]",
                    "auto": False,
                },
                _size_metrics([f.size for f in old], [f.size for f in clustered], 0),
                blind_append=False,
                isolation="SnapshotIsolation",
            ),
            *(f.remove(log, data_change=False) for f in old),
            *(f.add(path, data_change=False) for f in clustered),
        ]
    )
    row_sets = [
        [i for i, r in enumerate(f.rows) if r["id"] in CLUSTERED_DELETED] for f in clustered
    ]
    removes = [f.remove(log) for f in clustered]
    for f, dv in zip(clustered, write_dv_file(path, row_sets), strict=True):
        f.dv = dv
        f.stats = loosen_stats(f.stats)
    deleted = sum(len(s) for s in row_sets)
    log.commit(
        [
            _delta_spark_commit_info(
                log,
                "DELETE",
                {"predicate": compact_json(["id#17L IN (2,11)"])},
                {**_delete_metrics(dv_added=len(clustered), deleted=deleted)},
                blind_append=False,
            ),
            *removes,
            *(f.add(path) for f in clustered),
        ]
    )
    new = _write_clustered_file(path, [15, 16, 17], None)
    log.commit(
        [
            _delta_spark_commit_info(
                log,
                "WRITE",
                {"mode": "Append", "partitionBy": "[]"},
                {"numFiles": "1", "numOutputRows": "3", "numOutputBytes": str(new.size)},
                blind_append=True,
            ),
            new.add(path),
        ]
    )
    return path


# -- a table converted from Iceberg: column mapping `id` mode ---------------------------------


def _mapped(name: str, data_type: Any, column_id: int) -> dict[str, Any]:
    return delta_field(
        name,
        data_type,
        metadata={
            "delta.columnMapping.id": column_id,
            "delta.columnMapping.physicalName": name,
        },
    )


COLUMN_MAPPING_ID_FIELDS = [
    _mapped("id", "long", 1),
    _mapped("amount", "long", 2),
    _mapped("info", {"type": "struct", "fields": [_mapped("city", "string", 4)]}, 3),
    _mapped("note", "string", 5),
]
# Rows of the data file written before the Iceberg renames (amount_old -> amount,
# info.town -> info.city) and before `note` was added; and of the file written after.
COLUMN_MAPPING_ID_OLD_ROWS: list[Row] = [
    {"id": 1, "amount": 30, "info": {"city": "Oslo"}, "note": None},
    {"id": 2, "amount": 30, "info": {"city": "Bergen"}, "note": None},
    {"id": 3, "amount": 10, "info": None, "note": None},
]
COLUMN_MAPPING_ID_NEW_ROWS: list[Row] = [
    {"id": 4, "amount": 30, "info": {"city": "Lima"}, "note": "new"},
    {"id": 5, "amount": 50, "info": {"city": None}, "note": None},
    {"id": 6, "amount": 70, "info": None, "note": "n6"},
]


def _id_field(name: str, arrow_type: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, arrow_type, metadata={b"PARQUET:field_id": str(field_id).encode()})


def _iceberg_schema(fields: Sequence[pa.Field]) -> dict[str, Any]:
    def convert(arrow_type: pa.DataType) -> Any:
        if pa.types.is_struct(arrow_type):
            return {
                "type": "struct",
                "fields": [
                    {
                        "id": int(child.metadata[b"PARQUET:field_id"]),
                        "name": child.name,
                        "required": False,
                        "type": convert(child.type),
                    }
                    for child in arrow_type
                ],
            }
        return {pa.int64(): "long", pa.string(): "string"}[arrow_type]

    schema = convert(pa.struct(list(fields)))
    return {"type": "struct", "schema-id": 0, **{"fields": schema["fields"]}}


def _write_iceberg_file(table: Path, rows: list[Row], *, old: bool) -> tuple[str, int]:
    """A data file as Iceberg's parquet writer writes it: field ids on every field, ZSTD
    (Iceberg's default codec), the Iceberg schema in `iceberg.schema`; `old` uses the names
    the columns had before the renames and lacks `note`."""
    city = "town" if old else "city"
    info_type = pa.struct([_id_field(city, pa.string(), 4)])
    fields = [
        _id_field("id", pa.int64(), 1),
        _id_field("amount_old" if old else "amount", pa.int64(), 2),
        _id_field("info", info_type, 3),
    ]
    columns = [
        pa.array([r["id"] for r in rows], pa.int64()),
        pa.array([r["amount"] for r in rows], pa.int64()),
        pa.array(
            [None if r["info"] is None else {city: r["info"]["city"]} for r in rows], info_type
        ),
    ]
    if not old:
        fields.append(_id_field("note", pa.string(), 5))
        columns.append(pa.array([r["note"] for r in rows], pa.string()))
    schema = pa.schema(fields, metadata={"iceberg.schema": compact_json(_iceberg_schema(fields))})
    relative = f"data/00000-{0 if old else 1}-{uuid.uuid4()}-00001.parquet"
    (table / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(columns, schema=schema), table / relative, compression="zstd", store_schema=False
    )
    return relative, (table / relative).stat().st_size


def _logical_stats_table(rows: list[Row]) -> pa.Table:
    """The rows under their physical names and current types, for Delta's stats (CONVERT
    reads the files by field id, so stats describe the resolved columns)."""
    return pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.int64()),
            "amount": pa.array([r["amount"] for r in rows], pa.int64()),
            "info": pa.array([r["info"] for r in rows], pa.struct([pa.field("city", pa.string())])),
            "note": pa.array([r["note"] for r in rows], pa.string()),
        }
    )


def column_mapping_id_rows() -> list[Row]:
    """The logical rows of `column_mapping_id_table` (old file, then new file)."""
    return [*COLUMN_MAPPING_ID_OLD_ROWS, *COLUMN_MAPPING_ID_NEW_ROWS]


def column_mapping_id_table(path: Path) -> Path:
    """A table converted from Iceberg by Delta Spark 3.2 (`CONVERT TO DELTA iceberg.`...)
    and then given deletion vectors: column mapping mode `id`, physical names = the Iceberg
    column names at conversion time (`amount`, `info.city`), ids = the Iceberg field ids.

    The older data file (`data/00000-0-<uuid>-00001.parquet`) was written before Iceberg
    renamed `amount_old` -> `amount` and `info.town` -> `info.city` and added `note`, so
    its parquet columns for field ids 2 and 4 still carry the old names and field id 5 is
    missing: only a reader resolving by field id (PROTOCOL.md "Reader Requirements for
    Column Mapping") sees amount = 30 in rows 1 and 2; a reader by name reads nulls. The
    newer file uses the current names. Every parquet field has a `PARQUET:field_id`; files
    are ZSTD with `iceberg.schema` metadata, as Iceberg writes them.

    Commits: 0 CONVERT (protocol 2/5, configuration delta.columnMapping.mode id and
    maxColumnId 5, adds with stats by physical name); 1 SET TBLPROPERTIES
    delta.enableDeletionVectors (protocol 3/7 with readerFeatures [columnMapping,
    deletionVectors] and the legacy writer features implied by writer version 5)."""
    log = DeltaLog(path)
    files = [
        (
            *_write_iceberg_file(path, COLUMN_MAPPING_ID_OLD_ROWS, old=True),
            COLUMN_MAPPING_ID_OLD_ROWS,
        ),
        (
            *_write_iceberg_file(path, COLUMN_MAPPING_ID_NEW_ROWS, old=False),
            COLUMN_MAPPING_ID_NEW_ROWS,
        ),
    ]
    configuration = {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": "5"}
    table_id = str(uuid.uuid4())
    created = log.now()
    adds = [
        _DataFile(
            relative,
            size,
            delta_stats(
                _logical_stats_table(rows), COLUMN_MAPPING_ID_FIELDS, mode="id", tight_bounds=None
            ),
            rows,
        ).add(path)
        for relative, size, rows in files
    ]
    log.commit(
        [
            _delta_spark_commit_info(
                log,
                "CONVERT",
                {
                    "numFiles": 2,
                    "partitionedBy": "[]",
                    "collectStats": True,
                    "sourceFormat": "iceberg",
                },
                {"numConvertedFiles": "2"},
                blind_append=False,
            ),
            {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
            metadata_action(
                COLUMN_MAPPING_ID_FIELDS,
                configuration=configuration,
                created_time=created,
                table_id=table_id,
            ),
            *adds,
        ]
    )
    configuration["delta.enableDeletionVectors"] = "true"
    log.commit(
        [
            _delta_spark_commit_info(
                log,
                "SET TBLPROPERTIES",
                {"properties": compact_json({"delta.enableDeletionVectors": "true"})},
                {},
                blind_append=True,
            ),
            metadata_action(
                COLUMN_MAPPING_ID_FIELDS,
                configuration=configuration,
                created_time=created,
                table_id=table_id,
            ),
            protocol(
                ["columnMapping", "deletionVectors"],
                [
                    "appendOnly",
                    "invariants",
                    "checkConstraints",
                    "changeDataFeed",
                    "generatedColumns",
                    "columnMapping",
                    "deletionVectors",
                ],
            ),
        ]
    )
    return path


# -- materializePartitionColumns ---------------------------------------------------------------

MATERIALIZED_FIELDS = [
    delta_field("letter", "string"),
    delta_field("number", "long"),
    delta_field("a_float", "double"),
]
# (letter, number, a_float) per commit; a None letter is the null partition
MATERIALIZED_COMMITS: list[list[tuple[str | None, int, float]]] = [
    [("a", 1, 1.1), ("b", 2, 2.2), ("c", 3, 3.3), ("a", 7, 7.7)],
    [(None, 6, 6.6), ("a", 4, 4.4), ("e", 5, 5.5)],
]


def materialized_partition_rows() -> list[Row]:
    """The logical rows of `materialized_partition_table`."""
    return [
        {"letter": letter, "number": number, "a_float": value}
        for commit in MATERIALIZED_COMMITS
        for letter, number, value in commit
    ]


def materialized_partition_table(path: Path) -> Path:
    """A table partitioned by `letter` whose data files ALSO hold `letter` (writer feature
    `materializePartitionColumns`, as in the golden table partitioned-with-materialize-
    feature, written here by Delta Spark 4.0 with deletion vectors enabled).

    Protocol 3/7 readerFeatures [deletionVectors], writerFeatures [deletionVectors,
    materializePartitionColumns]; Hive directories `letter=a/` (the null partition in
    `letter=__HIVE_DEFAULT_PARTITION__/`, JSON null in partitionValues and null in the
    file); stats without the partition column. Commit 0 writes one file per partition (two
    rows in `a`), commit 1 appends three more files (`a` gets a second file)."""
    log = DeltaLog(path)
    created = log.now()
    configuration = {"delta.enableDeletionVectors": "true"}
    head: list[Action] = [
        metadata_action(
            MATERIALIZED_FIELDS,
            partition_columns=["letter"],
            configuration=configuration,
            created_time=created,
        ),
        protocol(["deletionVectors"], ["deletionVectors", "materializePartitionColumns"]),
    ]
    for number, commit in enumerate(MATERIALIZED_COMMITS):
        groups: dict[str | None, list[tuple[str | None, int, float]]] = {}
        for row in commit:
            groups.setdefault(row[0], []).append(row)
        files = []
        for task, (letter, rows) in enumerate(groups.items()):
            data = pa.table(
                {
                    "letter": pa.array([r[0] for r in rows], pa.string()),
                    "number": pa.array([r[1] for r in rows], pa.int64()),
                    "a_float": pa.array([r[2] for r in rows], pa.float64()),
                }
            )
            values = {"letter": letter}
            relative = (
                _partition_dir(values) + f"part-{task:05d}-{uuid.uuid4()}.c000.snappy.parquet"
            )
            size = write_spark_parquet(path / relative, data, spark_version="4.0.0")
            stats = delta_stats(data, MATERIALIZED_FIELDS[1:], tight_bounds=True)
            files.append(_DataFile(relative, size, stats, [], partition_values=values))
        info = _delta_spark_commit_info(
            log,
            "WRITE",
            {
                "mode": "ErrorIfExists" if number == 0 else "Append",
                "partitionBy": compact_json(["letter"]),
            },
            {
                "numFiles": str(len(files)),
                "numOutputRows": str(len(commit)),
                "numOutputBytes": str(sum(f.size for f in files)),
            },
            blind_append=True,
            engine=DELTA_SPARK_4_ENGINE,
        )
        log.commit([info, *(head if number == 0 else []), *(f.add(path) for f in files)])
    return path


# -- variant (real Spark) ----------------------------------------------------------------------

# The rows of `variant_table`: `json` is what Spark's parse_json turns into the variant
# (None: a SQL NULL), `file` the data file ("a": commit 0, "b": commit 1).
VARIANT_ROWS: list[Row] = [
    {"id": 1, "name": "object", "json": '{"a": 1, "b": "x"}', "file": "a"},
    {
        "id": 2,
        "name": "nested",
        "json": '{"a": 2, "b": "yy", "c": [1, 2, {"d": null}]}',
        "file": "a",
    },
    {"id": 3, "name": "sql-null", "json": None, "file": "a"},
    {"id": 4, "name": "decimal", "json": "12.5", "file": "a"},
    {"id": 5, "name": "partial", "json": '{"a": "not-an-int", "z": true}', "file": "a"},
    {"id": 6, "name": "string", "json": '"str"', "file": "b"},
    {"id": 7, "name": "array", "json": "[1, -2, 300000, 5000000000, 1.5e10]", "file": "b"},
    {"id": 8, "name": "json-null", "json": "null", "file": "b"},
    {"id": 9, "name": "long", "json": '{"long": "' + "l" * 70 + '", "neg": -12.25}', "file": "b"},
]
VARIANT_SHREDDING_SCHEMA = "a int, b string"  # Spark's forceShreddingSchemaForTest for file a
VARIANT_FIELDS = [
    delta_field("id", "long"),
    delta_field("name", "string"),
    delta_field("v", "variant"),
]

# The local session both fixture scripts start (one core, loopback only, UTC).
_SPARK_SESSION = r"""
import sys
from pyspark.sql import SparkSession

builder = (
    SparkSession.builder.master("local[1]")
    .appName("dvtool-test-fixtures")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.sql.shuffle.partitions", "1")
    .config("spark.sql.session.timeZone", "UTC")
)
"""

# Both sets of Spark-written files (the variant files, then the INT96 files), in one local
# Spark session: one JVM start for the two.
_SPARK_FILES_SCRIPT = (
    _SPARK_SESSION
    + r"""
source, out, shredding, values = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
spark = builder.getOrCreate()
try:
    rows = spark.read.schema("id bigint, name string, json string, file string").json(source)

    def frame(name):
        picked = rows.where(rows.file == name).orderBy("id")
        return picked.selectExpr("id", "name", "parse_json(json) AS v").coalesce(1)

    frame("a").write.parquet(out + "/variant/plain_a")
    frame("b").write.parquet(out + "/variant/plain_b")
    spark.conf.set("spark.sql.variant.writeShredding.enabled", "true")
    spark.conf.set("spark.sql.variant.forceShreddingSchemaForTest", shredding)
    frame("a").write.parquet(out + "/variant/shredded_a")
    spark.conf.unset("spark.sql.variant.writeShredding.enabled")
    spark.conf.unset("spark.sql.variant.forceShreddingSchemaForTest")

    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    spark.conf.set("spark.sql.parquet.int96RebaseModeInWrite", "CORRECTED")
    spark.conf.set("spark.sql.parquet.datetimeRebaseModeInWrite", "CORRECTED")
    rows = spark.sql(
        "SELECT CAST(id AS BIGINT) AS id, CAST(t AS TIMESTAMP) AS valid_to,"
        " CAST(f AS TIMESTAMP) AS valid_from, CAST(d AS DATE) AS day,"
        " CAST(s AS DECIMAL(9,2)) AS small, CAST(m AS DECIMAL(18,6)) AS mid,"
        " CAST(w AS DECIMAL(38,18)) AS wide,"
        " IF(id = 3, NULL,"
        " named_struct('start', CAST(f AS TIMESTAMP), 'end', CAST(t AS TIMESTAMP))) AS span,"
        " array(CAST(t AS TIMESTAMP), CAST(f AS TIMESTAMP)) AS stamps,"
        " map('from', CAST(f AS TIMESTAMP), 'to', CAST(t AS TIMESTAMP)) AS named"
        " FROM VALUES " + values + " AS v(id, t, f, d, s, m, w)"
    )
    rows.where("id < 4").orderBy("id").coalesce(1).write.parquet(out + "/int96/a")
    rows.where("id >= 4").orderBy("id").coalesce(1).write.parquet(out + "/int96/b")
finally:
    spark.stop()
"""
)


def spark_variant_files() -> Path:
    """Directory with Spark-written parquet files of VARIANT_ROWS: `plain_a/`, `plain_b/`
    (unshredded) and `shredded_a/` (shredded with VARIANT_SHREDDING_SCHEMA), each holding
    one `part-00000-<uuid>-c000.snappy.parquet` (`_spark_files`)."""
    return _spark_files() / "variant"


def _spark_files() -> Path:
    """The variant and INT96 files (`variant/`, `int96/`), written by a local[1] Spark in a
    child process (a classic session in the test process would clash with the Spark Connect
    clients other tests start), once per test run (`tests.shared_builds`)."""
    return shared_build("spark-written-files", _write_spark_files)


def _write_spark_files(out: Path) -> None:
    out.mkdir(parents=True)
    source = out / "variant-rows.json"
    source.write_text("".join(compact_json(r) + "\n" for r in VARIANT_ROWS))
    values = ", ".join("(" + ", ".join(_sql_literal(v) for v in row) + ")" for row in INT96_VALUES)
    args = (str(source), str(out), VARIANT_SHREDDING_SCHEMA, values)
    _run_spark(_SPARK_FILES_SCRIPT, "the variant and INT96 files", *args)


def _run_spark(script: str, what: str, *args: str) -> None:
    """Run a PySpark `script` (local[1], 127.0.0.1) in a child process with `args`: a
    classic session in the test process would clash with the Spark Connect clients other
    tests start."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
    }
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"Spark failed to write {what}:\n{result.stderr[-4000:]}")


def _spark_part_file(directory: Path) -> Path:
    (part,) = sorted(directory.glob("part-*.parquet"))
    return part


def variant_table(path: Path, *, shredded: bool = False) -> Path:
    """A table with a `variant` column whose parquet files real Spark 4 wrote (see
    `spark_variant_files`), logged as Delta Spark 4.0 would: columns id long, name string,
    v variant; protocol 3/7 with reader and writer features [deletionVectors, variantType]
    (+ variantShredding, and configuration delta.enableVariantShredding, when `shredded`).

    Observed layout (PySpark 4.x): `v` is an optional group annotated `Variant(1)` with
    required binary `metadata` then required binary `value` (pyarrow: struct<metadata:
    binary not null, value: binary not null>), a SQL NULL a null group. Shredded, the group
    is {metadata (required), value (optional), typed_value: struct<a: struct<value, typed_value:
    int32> not null, b: struct<value, typed_value: string> not null>}: object fields that match
    go to typed_value, the rest stay in `value` (a residual object, or the whole value when
    it is not an object). Spark writes SNAPPY, `org.apache.spark.version`, no field ids.

    Commits: 0 WRITE file a (ids 1-5; shredded when `shredded`), 1 WRITE file b (ids 6-9,
    always unshredded: a table that supports shredding may mix layouts). Stats: min/max and
    nullCount for id and name, only nullCount for v (PROTOCOL.md). Expected rows:
    VARIANT_ROWS (`json` parsed)."""
    files = spark_variant_files()
    log = DeltaLog(path)
    features = ["deletionVectors", "variantType", *(["variantShredding"] if shredded else [])]
    configuration = {"delta.enableDeletionVectors": "true"}
    if shredded:
        configuration["delta.enableVariantShredding"] = "true"
    sources = [files / ("shredded_a" if shredded else "plain_a"), files / "plain_b"]
    created = log.now()
    for number, source in enumerate(sources):
        spark_file = _spark_part_file(source)
        target = path / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        shutil.copyfile(spark_file, target)
        parquet = pq.ParquetFile(target)
        data = parquet.read()
        spark_version = (parquet.schema_arrow.metadata or {}).get(
            b"org.apache.spark.version", b"4.0.0"
        )
        engine = f"Apache-Spark/{spark_version.decode()} Delta-Lake/4.0.0"
        stats = delta_stats(data, VARIANT_FIELDS, tight_bounds=True)
        table = (VARIANT_FIELDS, features, configuration, created)
        _commit_spark_write(log, path, number, target, data.num_rows, stats, table, engine)
    return path


def _commit_spark_write(
    log: DeltaLog,
    path: Path,
    number: int,
    target: Path,
    rows: int,
    stats: str,
    table: tuple[list[Any], list[str], dict[str, str], int],
    engine: str,
) -> None:
    """Commit `target` as Delta Spark logs a WRITE of one file: commit 0 creates the table
    (`table`: its fields, reader/writer features, configuration and creation time)."""
    fields, features, configuration, created = table
    size = target.stat().st_size
    head: list[Action] = []
    if number == 0:
        head = [
            metadata_action(fields, configuration=configuration, created_time=created),
            protocol(features, features),
        ]
    log.commit(
        [
            _delta_spark_commit_info(
                log,
                "WRITE",
                {"mode": "ErrorIfExists" if number == 0 else "Append", "partitionBy": "[]"},
                {"numFiles": "1", "numOutputRows": str(rows), "numOutputBytes": str(size)},
                blind_append=True,
                engine=engine,
            ),
            *head,
            _DataFile(target.name, size, stats, []).add(path),
        ]
    )


# -- INT96 timestamps from real Spark -----------------------------------------------------------

INT96_FIELDS = [
    delta_field("id", "long"),
    delta_field("valid_to", "timestamp"),
    delta_field("valid_from", "timestamp"),
    delta_field("day", "date"),
    delta_field("small", "decimal(9,2)"),
    delta_field("mid", "decimal(18,6)"),
    delta_field("wide", "decimal(38,18)"),
    delta_field(
        "span",
        {
            "type": "struct",
            "fields": [delta_field("start", "timestamp"), delta_field("end", "timestamp")],
        },
    ),
    delta_field("stamps", {"type": "array", "elementType": "timestamp", "containsNull": True}),
    delta_field(
        "named",
        {
            "type": "map",
            "keyType": "string",
            "valueType": "timestamp",
            "valueContainsNull": True,
        },
    ),
]
# (id, valid_to, valid_from, day, small, mid, wide) as Spark SQL literals; file a holds ids 0-3,
# file b ids 4-7. The extremes of Delta's ranges, the nanosecond range's bounds (1677, 2262),
# the calendar switch (1582) and the epoch.
INT96_VALUES = [
    (0, "9999-12-31 23:59:59.999999", "0001-01-01 00:00:00", "9999-12-31",
     "9999999.99", "999999999999.999999", "99999999999999999999.999999999999999999"),
    (1, "9999-12-30 00:00:00", "1969-12-31 23:59:59.999999", "0001-01-01",
     "-9999999.99", "-999999999999.999999", "-99999999999999999999.999999999999999999"),
    (2, "0001-01-01 00:00:00", "9999-12-31 00:00:00", "1970-01-01",
     "0.01", "0.000001", "0.000000000000000001"),
    (3, None, None, None, None, None, None),
    (4, "9999-12-31 23:59:59.999999", "2024-02-29 12:00:00.123456", "2024-02-29",
     "0", "-0.000001", "-0.000000000000000001"),
    (5, "1582-10-04 23:59:59.999999", "1582-10-15 00:00:00", "1582-10-04",
     "1.5", "2.5", "3.5"),
    (6, "1677-09-21 00:12:43.145224", "2262-04-11 23:47:16.854775", "1677-09-21",
     "-1", "1", "-1"),
    (7, "0001-01-01 00:00:00.000001", "9999-12-31 23:59:59.999999", "9999-12-31",
     "12.34", "123456.789012", "12345678901234567890.123456789012345678"),
]  # fmt: skip

_int96_cache: Path | None = None


def _sql_literal(value: Any) -> str:
    return "NULL" if value is None else "'" + str(value) + "'"


def spark_int96_files() -> Path:
    """Directory with `a/` and `b/`, each holding one parquet file real Spark wrote from
    INT96_VALUES with `spark.sql.parquet.outputTimestampType=INT96` (OSS Spark 3's default,
    still Databricks' for some tables) and the proleptic calendar (`CORRECTED`): timestamps
    as INT96, `small` DECIMAL(9,2) as INT32, `mid` DECIMAL(18,6) as INT64, `wide`
    DECIMAL(38,18) as FIXED_LEN_BYTE_ARRAY (`_spark_files`)."""
    return _spark_files() / "int96"


def spark_int96_table(path: Path) -> Path:
    """A table of the two files of `spark_int96_files` as Delta Spark 4 logs them: commit 0
    creates it (protocol 3/7 with deletionVectors) with file a, commit 1 appends file b. Stats:
    numRecords, min/max and nullCount of id, valid_to, valid_from and day. Expected rows:
    the files read with pyarrow (`coerce_int96_timestamp_unit="us"`, as
    `tests.oracles.raw_rows` does)."""
    files = spark_int96_files()
    log = DeltaLog(path)
    features = ["deletionVectors"]
    configuration = {"delta.enableDeletionVectors": "true"}
    created = log.now()
    stats_fields = INT96_FIELDS[:4]
    for number, name in enumerate(["a", "b"]):
        target = path / f"part-0000{number}-{uuid.uuid4()}-c000.snappy.parquet"
        shutil.copyfile(_spark_part_file(files / name), target)
        data = pq.read_table(target, coerce_int96_timestamp_unit="us")
        stats = delta_stats(data, stats_fields, tight_bounds=True)
        table = (INT96_FIELDS, features, configuration, created)
        _commit_spark_write(
            log, path, number, target, data.num_rows, stats, table, DELTA_SPARK_4_ENGINE
        )
    return path
