"""Rewriting Iceberg data files: the rows they keep, in order, into one new Parquet file.

The one write under MERGE (a data file without the rows its deletes remove: DV, position
deletes, equality-deleted rows), copy-on-write delete (without the rows a delete removes)
and small-file compaction (several files of one partition, of any specs and schemas, into
one). `rewrite_data_files` streams each source's Parquet file a record batch at a time,
leaves out its `drop` positions, reads the rest onto the table's current schema by field id
(`dvtool.iceberg.file_projection`: exact, never a changed value) and writes them into one
new file (`dvtool.iceberg.parquet_output`: as Iceberg writers write it, with the metrics
readers prune with). Memory stays bounded: one input row group and one output row group.
The rows keep their order (no sort by the table's sort order: the file claims none, id 0).
In v3, columns of type `unknown` are not stored (spec). `new_data_location` names a new
file where the table's location provider puts its partition's files.

Row lineage (v3, spec "Row Lineage"): a moved row keeps its identity, so the new file holds
`_row_id` and `_last_updated_sequence_number` (after the data columns, as Iceberg Spark's
`rewrite_data_files` writes them) for every row: the source file's non-null value where it
has one, else the value the row inherits there - `first_row_id + position` and the source's
data sequence number. A source whose `first_row_id` is unknown (a table upgraded to v3 whose
snapshot assigned none) has no row ids to keep: its rows get null in both, as Iceberg reads
them, and new row ids when the new file is committed.

Nothing is committed here: the caller commits the returned `DataFile` (keeping the data
sequence number under MERGE) or, when the commit provably did not land, deletes the file.
A file this function fails to finish is deleted before the error is raised.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema, index_by_id, prune_columns
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    ListType,
    LongType,
    MapType,
    NestedField,
    StructType,
    UnknownType,
)
from pyroaring import BitMap64

from dvtool.arrays import arrow_values
from dvtool.data_files.reading import parquet_file
from dvtool.deletion_vectors.codec import bitmap_rows
from dvtool.errors import DataFileError, UnsupportedFeatureError
from dvtool.iceberg.deleted_rows import count_below, read_errors
from dvtool.iceberg.file_projection import ExactProjection, project_batch, unsupported_types
from dvtool.iceberg.parquet_output import (
    CountingStream,
    DataFileWriter,
    ParquetSettings,
    statistics_plan,
)
from dvtool.iceberg.partition_check import PartitionCheck
from dvtool.storage.failures import backend_errors

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import Record

ROW_ID = NestedField(
    2147483540,
    "_row_id",
    LongType(),
    required=False,
    doc="Implicit row ID that is automatically assigned",
)
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(
    2147483539,
    "_last_updated_sequence_number",
    LongType(),
    required=False,
    doc="Sequence number when the row was last updated",
)
_BATCH_ROWS = 64 * 1024


@dataclass(frozen=True)
class RewriteSource:
    """One data file to rewrite and the positions to leave out of it.

    `data_file` is its manifest record (file_path, partition, spec_id, record_count, ...);
    `drop` the positions of the rows that go (its DV, position deletes, equality-deleted
    rows, the rows a delete removes); `data_sequence_number` its (inherited) data sequence
    number; `first_row_id` its (inherited) first row id in v3, None when unknown.
    """

    data_file: DataFile
    drop: BitMap64
    data_sequence_number: int
    first_row_id: int | None = None

    @property
    def remaining_rows(self) -> int:
        """The rows the new file gets from this source."""
        count = int(self.data_file.record_count)
        return count - count_below(self.drop, count)


@dataclass(frozen=True)
class _PartitionPath:
    """A partition's path, where pyiceberg's location providers take a `PartitionKey`."""

    path: str

    def to_path(self) -> str:
        return self.path


def new_data_location(metadata: TableMetadata, *, spec_id: int, partition: Record) -> str:
    """A new, unique location for a data file of `partition` of spec `spec_id`: where the
    table's location provider puts it (`write.data.path`, `write.object-storage.*`, the
    partition's path; pyiceberg's `load_location_provider`), named as Iceberg Java names
    data files (`{partition id}-{task id}-{operation id}-{file count}.parquet`)."""
    from pyiceberg.table.locations import load_location_provider

    provider = load_location_provider(metadata.location, metadata.properties)
    name = f"00000-0-{uuid.uuid4()}-00001.parquet"
    spec = metadata.specs()[spec_id]
    key = None
    if spec.fields:
        with contextlib.suppress(ValueError):  # a source column dropped: no partition path
            key = _PartitionPath(spec.partition_to_path(partition, metadata.schema()))
    return provider.new_data_location(name, key)  # type: ignore[arg-type]


def write_schema(metadata: TableMetadata) -> Schema:
    """The schema of the files a rewrite writes: the table's current schema, and in v3 the
    row lineage fields after it."""
    schema = metadata.schema()
    if metadata.format_version < 3:
        return schema
    fields = [f for f in (_stored(field) for field in schema.fields) if f is not None]
    return Schema(
        *fields,
        ROW_ID,
        LAST_UPDATED_SEQUENCE_NUMBER,
        schema_id=schema.schema_id,
        identifier_field_ids=schema.identifier_field_ids,
    )


def _stored(field: NestedField) -> NestedField | None:
    """`field` as data files store it: without its `unknown` fields, which are "not stored
    in data files" (spec, v3); None for an `unknown` field."""
    typ = field.field_type
    if isinstance(typ, UnknownType):
        return None
    if isinstance(typ, StructType):
        kept = [f for f in (_stored(child) for child in typ.fields) if f is not None]
        if not kept:
            raise UnsupportedFeatureError(
                f"the struct {field.name} holds only fields of type unknown: dvtool cannot "
                "write it to a data file"
            )
        return field.model_copy(update={"field_type": StructType(*kept)})
    if not typ.is_primitive and any(
        isinstance(f.field_type, UnknownType) for f in index_by_id(Schema(field)).values()
    ):
        raise UnsupportedFeatureError(f"{field.name} is a list or map of type unknown")
    return field


def rewrite_data_files(
    io: FileIO,
    metadata: TableMetadata,
    sources: Sequence[RewriteSource],
    location: str,
    *,
    spec_id: int,
    partition: Record,
) -> DataFile | None:
    """Write the rows `sources` keep, in order, as one new Parquet data file at `location`
    (which must not exist) and return its `DataFile` (content DATA, `spec_id`, `partition`,
    metrics); None, writing nothing, when no row remains."""
    if sum(source.remaining_rows for source in sources) == 0:
        return None
    schema = write_schema(metadata)
    _check_writable(metadata, schema, sources)
    settings = ParquetSettings.of(metadata.properties)
    statistics_plan(schema, metadata.properties)  # a malformed property: before any file
    check = PartitionCheck(metadata, schema, spec_id, partition)
    with backend_errors(location, "create", missing=False):
        stream = CountingStream(io.new_output(location).create(overwrite=False))
    writer: DataFileWriter | None = None
    try:
        with backend_errors(location, "write", missing=False):
            writer = DataFileWriter(stream, schema, metadata.properties, settings)
            for source in (s for s in sources if s.remaining_rows):
                batches = source_batches(io, metadata, source, schema, writer.arrow_schema)
                checked = check.applies_to(source.data_file.spec_id, source.data_file.partition)
                for batch in batches:
                    if checked:
                        check.check(batch, source.data_file.file_path)
                    writer.write(batch)
            return writer.finish(location, spec_id=spec_id, partition=partition)
    except BaseException:
        if writer is not None:
            writer.abort()
        else:
            with contextlib.suppress(Exception):
                stream.close()
        with contextlib.suppress(Exception):
            io.delete(location)
        raise


def _check_writable(
    metadata: TableMetadata, schema: Schema, sources: Sequence[RewriteSource]
) -> None:
    """Refuse what dvtool cannot read or write back as it is: columns of types pyarrow
    would write as plain binary, data files that are not Parquet or are encrypted, a table
    whose writers write another format."""
    if bad := unsupported_types(schema):
        raise UnsupportedFeatureError(
            f"dvtool cannot rewrite data files of columns of these Iceberg types: {', '.join(bad)}"
        )
    file_format = metadata.properties.get("write.format.default", "parquet")
    if file_format.lower() != "parquet":
        raise UnsupportedFeatureError(
            f"the table writes {file_format} data files (write.format.default); "
            "dvtool writes Parquet only"
        )
    for source in sources:
        record = source.data_file
        file_format = str(getattr(record.file_format, "value", record.file_format))
        if file_format.upper() != "PARQUET":
            raise UnsupportedFeatureError(
                f"{record.file_path} is a {file_format} data file; dvtool reads Parquet only"
            )
        if record.key_metadata is not None:
            raise UnsupportedFeatureError(f"{record.file_path} is encrypted (key_metadata)")


def source_batches(
    io: FileIO, metadata: TableMetadata, source: RewriteSource, target: Schema, out: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of `source` not in its `drop`, in order, as record batches of `out` (the
    arrow schema of `target`), with their row lineage filled in (module docstring)."""
    path = source.data_file.file_path
    drop = bitmap_rows(source.drop)
    with read_errors(path), io.new_input(path).open(seekable=True) as stream:
        parquet = parquet_file(stream)
        _check_row_count(parquet.metadata.num_rows, source)
        file_schema = _file_schema(parquet.schema_arrow, metadata, path)
        wanted = {
            i for i in target.field_ids if not isinstance(target.find_type(i), (ListType, MapType))
        }
        columns = [
            c.name for c in prune_columns(file_schema, wanted, select_full_types=False).columns
        ]
        constants = _identity_partition_values(source.data_file, metadata, target, file_schema)
        projection = ExactProjection(file_schema, target, path, metadata.format_version, constants)
        start = 0
        for raw in _batches(parquet, columns):
            keep = _keep_mask(drop, start, raw.num_rows)
            first, start = start, start + raw.num_rows
            selected = raw if keep is None else raw.filter(arrow_values.from_numpy(keep))
            if selected.num_rows == 0:
                continue
            batch = project_batch(selected, projection, target, out)
            if metadata.format_version >= 3:
                positions = np.arange(raw.num_rows) if keep is None else np.flatnonzero(keep)
                batch = _with_lineage(batch, source, positions + first)
            yield batch


def _check_row_count(rows: int, source: RewriteSource) -> None:
    """A file whose footer and manifest entry disagree on its rows has positions no delete
    can be trusted for: never rewritten."""
    if rows != source.data_file.record_count:
        raise DataFileError(
            f"{source.data_file.file_path} holds {rows} rows, its manifest entry says "
            f"{source.data_file.record_count}",
            hint="The table is damaged: `dvtool inspect TABLE --verify` lists such files.",
        )


def _file_schema(arrow_schema: pa.Schema, metadata: TableMetadata, path: str) -> Schema:
    """The Iceberg schema of a data file: its Parquet field ids, else the table's name
    mapping (v1/v2 nanosecond timestamps typed as microseconds: the casts check them)."""
    try:
        return pyarrow_to_schema(
            arrow_schema,
            metadata.name_mapping(),
            downcast_ns_timestamp_to_us=metadata.format_version < 3,
            format_version=metadata.format_version,
        )
    except (ValueError, TypeError) as e:
        raise DataFileError(f"{path}: its columns cannot be matched to the table's: {e}") from None


def _identity_partition_values(
    data_file: DataFile, metadata: TableMetadata, target: Schema, file_schema: Schema
) -> dict[int, Any]:
    """The values of the columns the file lacks that its partition holds: the source
    columns of identity partition fields of its spec (spec "Column Projection")."""
    missing = set(target.field_ids) - set(file_schema.field_ids)
    spec = metadata.specs().get(data_file.spec_id)
    if not missing or spec is None:
        return {}
    values: dict[int, Any] = {}
    for index, field in enumerate(spec.fields):
        if field.source_id in missing and isinstance(field.transform, IdentityTransform):
            value = data_file.partition[index]
            if value is not None:
                values[field.source_id] = value
    return values


def _batches(parquet: Any, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The file's record batches of `columns`, read one row group at a time (pyarrow's
    reader over a whole file holds all of it); a file with none of the columns gives
    batches of no columns with its row counts."""
    for index in range(parquet.metadata.num_row_groups):
        if not columns:
            rows = parquet.metadata.row_group(index).num_rows
            yield pa.RecordBatch.from_struct_array(pa.nulls(rows, pa.struct([])))
            continue
        yield from parquet.iter_batches(
            batch_size=_BATCH_ROWS, row_groups=[index], columns=columns, use_threads=True
        )


def _keep_mask(drop: np.ndarray, start: int, count: int) -> np.ndarray | None:
    """Which rows of a batch of the file's rows start..start+count-1 `drop` (sorted
    positions) keeps, as a boolean mask; None when it keeps them all."""
    lo, hi = np.searchsorted(drop, [start, start + count])
    if lo == hi:
        return None
    mask = np.ones(count, dtype=np.bool_)
    mask[(drop[lo:hi] - np.uint64(start)).astype(np.int64)] = False
    return mask


def _with_lineage(
    batch: pa.RecordBatch, source: RewriteSource, positions: np.ndarray
) -> pa.RecordBatch:
    """`batch` with each row's `_row_id` and `_last_updated_sequence_number`: the file's
    value, else the inherited one (`first_row_id + position`, the data sequence number)."""
    if source.first_row_id is None:
        return batch
    names = batch.schema.names
    arrays = list(batch.columns)
    row_id = names.index(ROW_ID.name)
    sequence = names.index(LAST_UPDATED_SEQUENCE_NUMBER.name)
    inherited = arrow_values.from_numpy(positions.astype(np.int64) + source.first_row_id)
    arrays[row_id] = pc.coalesce(arrays[row_id], inherited)
    arrays[sequence] = pc.coalesce(
        arrays[sequence], arrow_values.scalar(source.data_sequence_number, pa.int64())
    )
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)


__all__ = [
    "LAST_UPDATED_SEQUENCE_NUMBER",
    "ROW_ID",
    "RewriteSource",
    "new_data_location",
    "rewrite_data_files",
    "source_batches",
    "write_schema",
]
