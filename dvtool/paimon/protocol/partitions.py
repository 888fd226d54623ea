"""Paimon partitions: the folder a partition's files live in, from the `BinaryRow` bytes
manifests key files by, without any IO.

The row is decoded by `binary_row.decode_binary_row` (every type a partition column may
have), each value turned into text as Paimon's Java writer does (`partition_text`:
`partition.legacy-name` chooses Java's `toString` or a cast to STRING). A partition's
folder is `key=value/...` (Hive's style, `datafile.md`), keys and values escaped as
Paimon's `PartitionPathUtils` escapes them; a null or blank value is
`partition.default-name` (`__DEFAULT_PARTITION__`). Types whose folder Paimon names in a way
no file records raise UnsupportedFeatureError naming the column and why.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from dvtool.paimon.protocol.binary_row import PaimonType, decode_binary_row
from dvtool.paimon.protocol.partition_text import is_blank, value_text

__all__ = [
    "DEFAULT_PARTITION",
    "bucket_dir",
    "decode_binary_row",
    "escape_path_name",
    "partition_path",
    "partition_value_text",
]

DEFAULT_PARTITION = "__DEFAULT_PARTITION__"
# Characters Paimon's PartitionPathUtils.escapePathName writes as %XX (Hive's, and `}`).
_ESCAPED = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{}[]^"))


def partition_value_text(
    value: Any, legacy_name: bool = True, kind: PaimonType | None = None, column: str = "?"
) -> str | None:
    """A partition value as its folder name shows it (before escaping); None for null.
    Without `kind`, the type is the value's: a string, integer, boolean or date."""
    return value_text(value, kind or _type_of(value), legacy_name, column)


def _type_of(value: Any) -> PaimonType:
    if isinstance(value, bool):
        return PaimonType("BOOLEAN")
    if isinstance(value, dt.date):
        return PaimonType("DATE")
    if isinstance(value, int):
        return PaimonType("BIGINT")
    return PaimonType("VARCHAR")


def partition_path(
    keys: Sequence[str],
    values: Sequence[Any],
    default_name: str = DEFAULT_PARTITION,
    legacy_name: bool = True,
    types: Sequence[PaimonType] | None = None,
) -> str:
    """The folder of a partition relative to the table (`""` when unpartitioned), no
    trailing slash: `dt=2024-05-14/region=eu`; `types` are the columns' (default: each
    value's own)."""
    parts = []
    kinds = types if types is not None else [None] * len(keys)
    for key, value, kind in zip(keys, values, kinds, strict=True):
        text = partition_value_text(value, legacy_name, kind, key)
        if text is None or is_blank(text):
            text = default_name
        parts.append(f"{escape_path_name(key)}={escape_path_name(text)}")
    return "/".join(parts)


def escape_path_name(name: str) -> str:
    """`name` with the characters a path cannot hold written as `%XX`."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in name)


def bucket_dir(bucket: int) -> str:
    """The folder of a bucket: `bucket-N`, or `bucket-postpone` for postponed writes (-2)."""
    return "bucket-postpone" if bucket == -2 else f"bucket-{bucket}"
