"""What new data files of a table must hold, beyond its data columns, and how they are written.

Derived once per command from the protocol, the table properties and domains:

- partition columns inside the files (after the data columns) when a feature or property
  asks for it: the `materializePartitionColumns` writer feature, the property
  `delta.writePartitionColumnsToParquet`, or an enabled Iceberg compatibility (V1, V2 and V3
  require partition values materialized in every data file);
- the hidden row tracking columns (`dvtool.delta.protocol.row_tracking.materialized_columns`);
- the parquet codec named by `delta.parquet.compression.codec` (as pyarrow spells it), if any;
- the clustering columns (`delta.clustering` domain), which must always have statistics;
- the top-level variant columns (nullCount statistics only; copied as the files hold them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dvtool.delta.protocol.actions import DomainMetadata, Metadata, Protocol
from dvtool.delta.protocol.features import configuration_flag
from dvtool.delta.protocol.row_tracking import materialized_columns
from dvtool.delta.protocol.schema import StructType
from dvtool.delta.protocol.stats_collect import parse_column_list, physical_column_paths

CODEC_KEY = "delta.parquet.compression.codec"
CLUSTERING_DOMAIN = "delta.clustering"
# Spark's codec names (spark.sql.parquet.compression.codec) as pyarrow writes them; Spark's
# `lz4` is Hadoop's framing, which readers also accept as pyarrow's LZ4_RAW; `lzo` has no
# pyarrow writer, so such a table keeps its input files' codec.
_CODECS = {
    "none": "none",
    "uncompressed": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "brotli": "brotli",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "zstd": "zstd",
}
# Parquet column chunk codecs (pyarrow's `compression` of a footer) as pyarrow writes them.
FOOTER_CODECS = {
    "UNCOMPRESSED": "none",
    "SNAPPY": "snappy",
    "GZIP": "gzip",
    "BROTLI": "brotli",
    "LZ4": "lz4",
    "LZ4_RAW": "lz4",
    "ZSTD": "zstd",
}
_MATERIALIZING_PROPERTIES = (
    "delta.writePartitionColumnsToParquet",
    "delta.enableIcebergCompatV1",
    "delta.enableIcebergCompatV2",
    "delta.enableIcebergCompatV3",
)


def materializes_partitions(protocol: Protocol, configuration: Mapping[str, str]) -> bool:
    """Whether new data files must hold the partition columns too."""
    if "materializePartitionColumns" in (protocol.writer_features or ()):
        return True
    return any(configuration_flag(configuration, key) for key in _MATERIALIZING_PROPERTIES)


def table_codec(configuration: Mapping[str, str]) -> str | None:
    """The codec `delta.parquet.compression.codec` names, as pyarrow spells it; None when the
    property is absent or names a codec pyarrow cannot write (`lzo`)."""
    value = configuration.get(CODEC_KEY)
    return _CODECS.get(value.strip().lower()) if value else None


def clustering_columns(
    domains: Mapping[str, DomainMetadata], schema: StructType, mode: str
) -> tuple[tuple[str, ...], ...]:
    """Physical paths of the clustering columns of the `delta.clustering` domain.

    Delta writes `{"clusteringColumns": [["a"], ["s", "b"]]}` (physical name paths); a
    plain list of names (dotted or not) is read too. Names the schema does not know are kept
    as they are: they are physical already.
    """
    domain = domains.get(CLUSTERING_DOMAIN)
    if domain is None or domain.removed:
        return ()
    try:
        raw = json.loads(domain.configuration).get("clusteringColumns") or []
    except (ValueError, AttributeError):
        return ()
    paths: list[tuple[str, ...]] = []
    for column in raw:
        if isinstance(column, list):
            paths.append(tuple(str(part) for part in column))
        elif isinstance(column, str):
            paths.extend(parse_column_list(column))
    return tuple(_physical(path, schema, mode) for path in paths)


def _physical(path: tuple[str, ...], schema: StructType, mode: str) -> tuple[str, ...]:
    mapped = physical_column_paths(schema, [path], mode)
    return mapped[0] if mapped and mode == "none" else path


def variant_columns(schema: StructType, mode: str) -> frozenset[str]:
    """Physical names of the top-level columns of type `variant`."""
    return frozenset(
        f.physical_name(mode)
        for f in schema.fields
        if isinstance(f.type, str) and f.type.strip().lower() == "variant"
    )


def layout_options(
    protocol: Protocol,
    metadata: Metadata,
    schema: StructType,
    mode: str,
    domains: Mapping[str, DomainMetadata],
) -> dict[str, Any]:
    """The keyword arguments of `TableLayout` beyond the schema (see the module docstring)."""
    configuration = metadata.configuration
    return {
        "materialize_partitions": materializes_partitions(protocol, configuration),
        "row_tracking": materialized_columns(protocol, configuration),
        "codec": table_codec(configuration),
        "clustering_columns": clustering_columns(domains, schema, mode),
        "variant_columns": variant_columns(schema, mode),
    }
