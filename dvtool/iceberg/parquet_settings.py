"""The table's Parquet write properties, resolved with Iceberg Java's names and defaults.

Standard library only: the driver resolves them (`dvtool.iceberg.parquet_output.writer_spec`)
and `dvtool.iceberg.rewrite_executor` writes with them, on Spark executors too.

- `write.parquet.compression-codec` (zstd) and `write.parquet.compression-level`;
- `write.parquet.page-size-bytes` (1 MiB), `write.parquet.page-row-limit` (20000);
- `write.parquet.dict-size-bytes`: when unset, pyarrow's 1 MiB, not Java's 2 MiB
  (`DICTIONARY_LIMIT`);
- `write.parquet.row-group-size-bytes` (128 MiB) and pyiceberg's
  `write.parquet.row-group-limit` (rows);
- `write.parquet.bloom-filter-max-bytes` (1 MiB), the size of each Bloom filter.

A malformed value is a `WriteRefusedError` naming the property, a codec pyarrow cannot
write an `UnsupportedFeatureError`: refused before any file is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dvtool.errors import UnsupportedFeatureError, WriteRefusedError

MIB = 1024 * 1024
_CODECS = {"uncompressed": "none", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd"}
_CODECS |= {"lz4": "lz4", "brotli": "brotli"}

# The dictionary page limit when the table sets none. The limit is where a writer gives up
# dictionary encoding of a column chunk; parquet-mr (Java's writer) also gives up at the
# first page when the dictionary does not make it smaller, pyarrow does not: under Java's
# 2 MiB default pyarrow dictionary-encodes high-cardinality columns (ids, prices,
# timestamps) for twice as long, for nothing. Measured on 20 to 22 columns x 300,000 rows
# (scripts/bench_iceberg_purge.py's table): the write takes 20-35% more CPU and the file is
# 8-10% larger with 2 MiB than with pyarrow's own default, 1 MiB. Values never change.
DICTIONARY_LIMIT = MIB


@dataclass(frozen=True)
class ParquetSettings:
    """The table's Parquet write properties (module docstring), resolved."""

    compression: str
    compression_level: int | None
    page_size: int
    page_rows: int
    dictionary_size: int
    row_group_bytes: int
    row_group_rows: int
    bloom_max_bytes: int

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> ParquetSettings:
        codec = properties.get("write.parquet.compression-codec", "zstd").lower()
        if codec not in _CODECS:
            raise UnsupportedFeatureError(
                f"write.parquet.compression-codec={codec} is not a codec dvtool can write",
                hint=f"Set it to one of {', '.join(sorted(_CODECS))} to rewrite this table.",
            )
        return cls(
            compression=_CODECS[codec],
            compression_level=_level(properties),
            page_size=int_property(properties, "write.parquet.page-size-bytes", MIB),
            page_rows=int_property(properties, "write.parquet.page-row-limit", 20_000),
            dictionary_size=int_property(
                properties, "write.parquet.dict-size-bytes", DICTIONARY_LIMIT
            ),
            row_group_bytes=int_property(
                properties, "write.parquet.row-group-size-bytes", 128 * MIB
            ),
            row_group_rows=int_property(properties, "write.parquet.row-group-limit", 1_048_576),
            bloom_max_bytes=int_property(properties, "write.parquet.bloom-filter-max-bytes", MIB),
        )


def _level(properties: Mapping[str, str]) -> int | None:
    key = "write.parquet.compression-level"
    return None if properties.get(key) is None else int_property(properties, key, 0)


def int_property(properties: Mapping[str, str], key: str, default: int) -> int:
    """The integer table property `key` (`default` when unset); refused when malformed."""
    value = properties.get(key)
    try:
        return default if value is None else int(value)
    except ValueError:
        raise malformed_property(key, value) from None


def malformed_property(key: str, value: str | None) -> WriteRefusedError:
    return WriteRefusedError(
        f"the table property {key}={value} is malformed",
        hint="Correct the property (Iceberg's documentation gives its values) to write.",
    )
