"""How dvtool writes Iceberg Parquet data files as Iceberg writers write them, and their metrics.

What needs pyiceberg is here, on the driver: `writer_spec` resolves the table's schema and
properties into the plain `WriterSpec` that `dvtool.iceberg.rewrite_executor` writes a file
with (pyarrow only, in this process or on Spark executors), and `data_file_of` turns the
footer that comes back into the file's `DataFile` and metrics:

- the file's schema: the write schema with `PARQUET:field_id` on every field, nested too,
  names made Avro-compatible as Iceberg Java's Parquet writer makes them
  (`sanitize_column_names`), and the `iceberg.schema` footer key Java writes;
- the table's Parquet properties (`dvtool.iceberg.parquet_settings`: Java's names and
  defaults) and the Bloom filters of `write.parquet.bloom-filter-enabled.column.*`
  (`...-fpp.column.*`, 0.01; at most `write.parquet.bloom-filter-max-bytes` per column and
  row group). pyarrow writes one row group per call, so batches are buffered until a row
  group is full: the buffer is bounded by the row group size, counted in Arrow's in-memory
  bytes (at least the encoded size, so row groups never exceed the target on disk);
- the bytes go through the `OutputStream` of `io.new_output(location).create(overwrite=False)`
  and are counted there: `file_size_in_bytes` without a second request;
- the metrics Iceberg readers prune with, from the footer by pyiceberg's own functions
  (`compute_statistics_plan` honours `write.metadata.metrics.default` and
  `write.metadata.metrics.column.*`; `data_file_statistics_from_parquet_metadata`), and NaN
  counts of the top-level float and double columns, counted from the rows written (pyiceberg
  writes none: absent means unknown).
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import (
    MetricModeTypes,
    MetricsMode,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema, sanitize_column_names
from pyiceberg.typedef import Record
from pyiceberg.types import (
    DateType,
    DoubleType,
    FloatType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
)

from dvtool.errors import WriteRefusedError
from dvtool.iceberg.file_projection import arrow_schema
from dvtool.iceberg.parquet_settings import ParquetSettings, malformed_property
from dvtool.iceberg.rewrite_executor import NewFile, WriterSpec

# The rows are not sorted by the table's sort order: the file claims the unsorted order (id 0,
# what Iceberg Java writes for an unsorted table; spec: 0 is reserved for "unsorted").
UNSORTED_ORDER_ID = 0

_BLOOM = "write.parquet.bloom-filter-enabled.column."
_BLOOM_FPP = "write.parquet.bloom-filter-fpp.column."


def bloom_filters(
    properties: Mapping[str, str], schema: Schema, file_schema: Schema, settings: ParquetSettings
) -> dict[str, dict[str, float]]:
    """The Bloom filters the table's properties ask for, by Parquet column path: each sized
    for its false-positive probability within the maximum bytes (as Iceberg Java sizes them,
    by the bytes: the distinct values a filter of that size holds at that probability)."""
    filters: dict[str, dict[str, float]] = {}
    for key, value in properties.items():
        if not key.startswith(_BLOOM) or value.strip().lower() != "true":
            continue
        column = key.removeprefix(_BLOOM)
        path = _column_path(schema, file_schema, column)
        if path is None:
            continue
        fpp_text = properties.get(_BLOOM_FPP + column, "0.01")
        try:
            fpp = float(fpp_text)
        except ValueError:
            raise malformed_property(_BLOOM_FPP + column, fpp_text) from None
        ndv = settings.bloom_max_bytes * -math.log(1 - fpp ** (1 / 8)) / 8
        filters[path] = {"ndv": max(1, min(int(ndv), settings.row_group_rows)), "fpp": fpp}
    return filters


def _column_path(schema: Schema, file_schema: Schema, column: str) -> str | None:
    """The Parquet path of a primitive column outside lists and maps, None for others."""
    try:
        field = schema.find_field(column)
        schema.accessor_for_field(field.field_id)  # none inside a list or a map
    except ValueError:
        return None
    return file_schema.find_column_name(field.field_id) if field.field_type.is_primitive else None


def statistics_plan(schema: Schema, properties: Mapping[str, str]) -> dict[int, Any]:
    """pyiceberg's metrics plan of `schema` (the metrics mode of each column), or a
    `WriteRefusedError` naming a malformed `write.metadata.metrics.*` property."""
    try:
        return compute_statistics_plan(schema, dict(properties))
    except ValueError as e:
        keys = [k for k in properties if k.startswith("write.metadata.metrics.")]
        raise WriteRefusedError(
            f"a metrics property of the table is malformed ({', '.join(sorted(keys))}): {e}",
            hint="Correct it (none, counts, truncate(N) or full) to write this table.",
        ) from None


# Dates and timestamps: their bounds are the footer's raw integers (days, microseconds or
# nanoseconds, as Iceberg serializes them). pyiceberg converts them through Python's
# datetime, which drops nanoseconds (a `timestamp_ns` upper bound below the file's largest
# value) and fails beyond the year 9999.
_RAW_BOUNDS: dict[type, str] = {DateType: "<i"}
_RAW_BOUNDS |= dict.fromkeys(
    (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType), "<q"
)
_BOUNDED = (MetricModeTypes.FULL, MetricModeTypes.TRUNCATE)


def raw_bound_columns(plan: Mapping[int, Any]) -> dict[int, str]:
    """The columns whose bounds come from the footer's raw integers: field id -> the
    `struct` format of their Iceberg single-value serialization."""
    return {
        field_id: _RAW_BOUNDS[type(collector.iceberg_type)]
        for field_id, collector in plan.items()
        if type(collector.iceberg_type) in _RAW_BOUNDS and collector.mode.type in _BOUNDED
    }


def _counts_only(collector: Any) -> Any:
    return dataclasses.replace(collector, mode=MetricsMode(MetricModeTypes.COUNTS))


def raw_bounds(
    footer: pq.FileMetaData, mapping: Mapping[str, int], columns: Mapping[int, str]
) -> tuple[dict[int, bytes], dict[int, bytes]]:
    """Lower and upper bounds of `columns` from the row groups' raw statistics; none for a
    column with a row group whose values have no statistics."""
    lows: dict[int, int] = {}
    highs: dict[int, int] = {}
    unknown: set[int] = set()
    for group in range(footer.num_row_groups):
        row_group = footer.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            field_id = mapping[chunk.path_in_schema]
            if field_id not in columns:
                continue
            stats = chunk.statistics if chunk.is_stats_set else None
            if stats is None or not stats.has_min_max:
                if stats is None or stats.null_count != chunk.num_values:
                    unknown.add(field_id)
                continue
            lows[field_id] = min(lows.get(field_id, stats.min_raw), stats.min_raw)
            highs[field_id] = max(highs.get(field_id, stats.max_raw), stats.max_raw)
    pack = {i: (struct.Struct(f).pack) for i, f in columns.items()}
    return (
        {i: pack[i](v) for i, v in lows.items() if i not in unknown},
        {i: pack[i](v) for i, v in highs.items() if i not in unknown},
    )


def writer_spec(schema: Schema, properties: Mapping[str, str], *, lineage: bool) -> WriterSpec:
    """How files of `schema` are written under the table's `properties` (module docstring),
    as plain data for `dvtool.iceberg.rewrite_executor`; a malformed property is refused
    here, before any file. `lineage`: the schema ends with the row lineage columns (v3)."""
    settings = ParquetSettings.of(properties)
    plan = statistics_plan(schema, properties)
    file_schema = sanitize_column_names(schema)
    nan_columns = tuple(
        (index, field.field_id)
        for index, field in enumerate(schema.fields)
        if isinstance(field.field_type, (FloatType, DoubleType))
        and plan[field.field_id].mode.type != MetricModeTypes.NONE
    )
    return WriterSpec(
        schema=arrow_schema(file_schema),
        parquet=settings,
        bloom_filters=bloom_filters(properties, schema, file_schema, settings),
        iceberg_schema=schema.model_dump_json(),
        nan_columns=nan_columns,
        lineage=lineage,
    )


def data_file_of(
    new: NewFile,
    schema: Schema,
    properties: Mapping[str, str],
    *,
    spec_id: int,
    partition: Record,
) -> DataFile:
    """The `DataFile` of a new file of `schema` (content DATA, `spec_id`, `partition`) with
    the metrics Iceberg readers prune with, computed from its footer by pyiceberg (module
    docstring), as for a file written in this process."""
    footer = pq.read_metadata(pa.BufferReader(new.footer))
    plan = statistics_plan(schema, properties)
    mapping = parquet_path_to_id_mapping(sanitize_column_names(schema))
    raw = raw_bound_columns(plan)
    stats = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns={i: _counts_only(c) if i in raw else c for i, c in plan.items()},
        parquet_column_mapping=mapping,
    )
    fields = stats.to_serialized_dict()
    fields["nan_value_counts"] = dict(new.nan_counts)
    lower, upper = raw_bounds(footer, mapping, raw)
    fields["lower_bounds"] = {**(fields.get("lower_bounds") or {}), **lower}
    fields["upper_bounds"] = {**(fields.get("upper_bounds") or {}), **upper}
    data_file = DataFile.from_args(
        _table_format_version=3,
        content=DataFileContent.DATA,
        file_path=new.location,
        file_format=FileFormat.PARQUET,
        partition=partition,
        file_size_in_bytes=new.file_size,
        sort_order_id=UNSORTED_ORDER_ID,
        spec_id=spec_id,
        equality_ids=None,
        key_metadata=None,
        first_row_id=None,
        **fields,
    )
    data_file.spec_id = spec_id
    return data_file
