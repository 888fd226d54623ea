"""Rewriting Iceberg data files: the rows they keep, in order, into one new Parquet file.

The one write under MERGE (a data file without the rows its deletes remove: DV, position
deletes, equality-deleted rows), copy-on-write delete (without the rows a delete removes)
and compaction (several files of one partition, of any specs and schemas, into one; a
source may be a range of a file's rows, when a large file is split over several new files).
`rewrite_data_files` streams each source's Parquet file a record batch at a time, leaves out
its `drop` positions, reads the rest onto the table's current schema by field id
(`dvtool.iceberg.file_projection`: exact, never a changed value) and writes them into one
new file (`dvtool.iceberg.parquet_output`: as Iceberg writers write it, with the metrics
readers prune with). Memory stays bounded: one input row group and one output row group.

The work is split where Spark splits it (`dvtool.iceberg.rewrite_job`): `FilePlanner`, on the
driver, reads each source's footer and resolves with pyiceberg everything the write needs
into a plain `FilePlan` (the projection by field id, the writer settings, the positions to
drop, row lineage); `dvtool.iceberg.rewrite_executor.write_file`, which needs pyarrow and
numpy only, writes the file from it - here, on the arrow engine's threads or on Spark
executors; `FilePlanner.data_file` turns its footer into the `DataFile` and its metrics.
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StructType, UnknownType
from pyroaring import BitMap64

from dvtool.data_files.reading import parquet_file
from dvtool.errors import DataFileError, UnsupportedFeatureError
from dvtool.iceberg.column_plan import ColumnPlan
from dvtool.iceberg.data_file_io import read_errors
from dvtool.iceberg.deleted_rows import count_below
from dvtool.iceberg.file_projection import ColumnPlanner, unsupported_types
from dvtool.iceberg.parquet_output import data_file_of, writer_spec
from dvtool.iceberg.partition_check import PartitionCheck
from dvtool.iceberg.rewrite_executor import (
    ROW_ID_NAME,
    SEQUENCE_NAME,
    FilePlan,
    NewFile,
    SourcePlan,
    check_row_count,
    write_file,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import Record

ROW_ID = NestedField(
    2147483540,
    ROW_ID_NAME,
    LongType(),
    required=False,
    doc="Implicit row ID that is automatically assigned",
)
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(
    2147483539,
    SEQUENCE_NAME,
    LongType(),
    required=False,
    doc="Sequence number when the row was last updated",
)


@dataclass(frozen=True)
class RewriteSource:
    """One data file to rewrite and the positions to leave out of it.

    `data_file` is its manifest record (file_path, partition, spec_id, record_count, ...);
    `drop` the positions of the rows that go (its DV, position deletes, equality-deleted
    rows, the rows a delete removes); `data_sequence_number` its (inherited) data sequence
    number; `first_row_id` its (inherited) first row id in v3, None when unknown; `start`
    and `stop` the positions the new file takes rows from (exclusive; None: the file's
    end): a compaction splits a large file over several new files.
    """

    data_file: DataFile
    drop: BitMap64
    data_sequence_number: int
    first_row_id: int | None = None
    start: int = 0
    stop: int | None = None

    @property
    def end(self) -> int:
        """The position after the last row the new file takes."""
        return int(self.data_file.record_count) if self.stop is None else self.stop

    @property
    def remaining_rows(self) -> int:
        """The rows the new file gets from this source."""
        start, end = self.start, self.end
        return end - start - (count_below(self.drop, end) - count_below(self.drop, start))


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
    metrics); None, writing nothing, when no row remains. The file is planned here and
    written by `dvtool.iceberg.rewrite_executor`, as on Spark executors."""
    if sum(source.remaining_rows for source in sources) == 0:
        return None
    planner = FilePlanner(io, metadata)
    planned = planner.plan(sources, location, spec_id=spec_id, partition=partition)
    new = write_file(io, planner.spec, planned.plan)
    try:
        return planner.data_file(planned, new)
    except BaseException:
        with contextlib.suppress(Exception):
            io.delete(location)
        raise


@dataclass(frozen=True)
class PlannedFile:
    """A new file's plan (`FilePlan`, plain data), its spec and partition, and the check of
    the rows of its sources of other partitions (`PartitionCheck`, on the driver)."""

    plan: FilePlan
    spec_id: int
    partition: Record
    check: PartitionCheck


class FilePlanner:
    """The driver's side of a table's data file rewrites: every file's plan
    (`dvtool.iceberg.rewrite_executor`), then the `DataFile` of what was written."""

    def __init__(self, io: FileIO, metadata: TableMetadata) -> None:
        self.io = io
        self.metadata = metadata
        self.schema = write_schema(metadata)
        self.spec = writer_spec(
            self.schema, metadata.properties, lineage=metadata.format_version >= 3
        )
        self._footers: dict[str, tuple[Any, pa.Schema]] = {}

    def plan(
        self, sources: Sequence[RewriteSource], location: str, *, spec_id: int, partition: Record
    ) -> PlannedFile:
        """The plan of one new file at `location` of the rows `sources` keep (each source's
        footer read here); refuses what dvtool cannot write back as it is."""
        _check_writable(self.metadata, self.schema, sources)
        check = PartitionCheck(self.metadata, self.schema, spec_id, partition)
        plans = tuple(self._source(source, check) for source in sources if source.remaining_rows)
        return PlannedFile(FilePlan(location, plans), spec_id, partition, check)

    def _source(self, source: RewriteSource, check: PartitionCheck) -> SourcePlan:
        record = source.data_file
        path = record.file_path
        footer, arrow = self._footer(path)
        check_row_count(path, footer.num_rows, int(record.record_count))
        checked = check.applies_to(record.spec_id, record.partition)
        return SourcePlan(
            path=path,
            record_count=int(record.record_count),
            drop=source.drop.serialize() if source.drop else b"",
            columns=self._columns(source, arrow, path),
            data_sequence_number=source.data_sequence_number,
            first_row_id=source.first_row_id,
            probes=check.probes() if checked else (),
            start=source.start,
            stop=source.stop,
            footer=footer,
        )

    def _footer(self, path: str) -> tuple[Any, pa.Schema]:
        """The file's Parquet footer and arrow schema, read once per file (a file split over
        several new files is planned once for each)."""
        known = self._footers.get(path)
        if known is None:
            with read_errors(path), self.io.new_input(path).open(seekable=True) as stream:
                parquet = parquet_file(stream)
                known = self._footers[path] = (parquet.metadata, parquet.schema_arrow)
        return known

    def _columns(self, source: RewriteSource, arrow: pa.Schema, path: str) -> ColumnPlan:
        """How the file's columns become the write schema's (`file_projection`)."""
        metadata = self.metadata
        file_schema = _file_schema(arrow, metadata, path)
        constants = _identity_partition_values(source.data_file, metadata, self.schema, file_schema)
        planner = ColumnPlanner(file_schema, self.schema, path, metadata.format_version, constants)
        return planner.plan(self.spec.schema)

    def data_file(self, planned: PlannedFile, new: NewFile) -> DataFile:
        """The `DataFile` of a file written by `planned`: its metrics from its footer; a
        `WriteRefusedError` when a row of a source of another partition does not belong in
        the file's (the caller deletes it)."""
        for source, probed in zip(planned.plan.sources, new.probed, strict=True):
            if source.probes:
                planned.check.check_values(probed, source.path)
        return data_file_of(
            new,
            self.schema,
            self.metadata.properties,
            spec_id=planned.spec_id,
            partition=planned.partition,
        )


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


__all__ = [
    "LAST_UPDATED_SEQUENCE_NUMBER",
    "ROW_ID",
    "FilePlanner",
    "PlannedFile",
    "RewriteSource",
    "new_data_location",
    "rewrite_data_files",
    "write_schema",
]
