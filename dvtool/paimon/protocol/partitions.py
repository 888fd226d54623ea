"""Paimon partitions: the `BinaryRow` bytes manifests key files by, and the folder a
partition's files live in, without any IO.

A manifest's `_PARTITION` is a big-endian int32 field count followed by a `BinaryRow`
(`manifest.md` "BinaryRow"): a null bitset after one header byte, padded to 8-byte words
(`((arity + 63 + 8) // 64) * 8` bytes; field i's null bit is bit i + 8), then one 8-byte
little-endian slot per field. A fixed-size value sits in its slot; a string of at most 7
bytes too (the slot's top byte is 0x80 | length), a longer one elsewhere in the row (the
slot holds its offset from the row's start in the high 32 bits and its length in the low).

A partition's folder is `key=value/...` (Hive's style, `datafile.md`), values escaped as
Paimon's `PartitionPathUtils` escapes them; a null or blank value is
`partition.default-name` (`__DEFAULT_PARTITION__`). With `partition.legacy-name` (the
default), a DATE value is written as its day number, as Paimon does for compatibility.
Types dvtool does not decode (floating point, decimals, timestamps, binary, nested)
raise UnsupportedFeatureError naming the column.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from typing import Any

from dvtool.errors import LogError, UnsupportedFeatureError
from dvtool.paimon.protocol.schema import DataField

DEFAULT_PARTITION = "__DEFAULT_PARTITION__"
_INTEGERS = {"TINYINT": "<b", "SMALLINT": "<h", "INT": "<i", "INTEGER": "<i", "BIGINT": "<q"}
_STRINGS = {"STRING", "VARCHAR", "CHAR"}
_EPOCH = dt.date(1970, 1, 1)
# Characters Paimon's PartitionPathUtils.escapePathName writes as %XX (Hive's, and `}`).
_ESCAPED = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{}[]^"))


def decode_binary_row(data: bytes, fields: Sequence[DataField]) -> tuple[Any, ...]:
    """The values of a serialized partition row, one per field (None for nulls); LogError
    when the bytes do not hold a row of these fields."""
    if len(data) < 4:
        raise LogError(f"a partition row of {len(data)} bytes has no field count")
    (arity,) = struct.unpack_from(">i", data)
    if arity != len(fields):
        raise LogError(f"a partition row holds {arity} fields, the schema has {len(fields)}")
    row = data[4:]
    null_bytes = ((arity + 63 + 8) // 64) * 8
    if len(row) < null_bytes + 8 * arity:
        raise LogError(f"a partition row of {len(row)} bytes is too short for {arity} fields")
    return tuple(_value(row, null_bytes, i, f) for i, f in enumerate(fields))


def _value(row: bytes, null_bytes: int, i: int, field: DataField) -> Any:
    bit = i + 8
    if row[bit // 8] & (1 << (bit % 8)):
        return None
    slot = null_bytes + 8 * i
    kind = field.base_type
    if kind == "BOOLEAN":
        return row[slot] != 0
    if kind in _INTEGERS:
        return struct.unpack_from(_INTEGERS[kind], row, slot)[0]
    if kind == "DATE":
        return _EPOCH + dt.timedelta(days=struct.unpack_from("<i", row, slot)[0])
    if kind in _STRINGS:
        return _string(row, slot).decode("utf-8", errors="replace")
    raise UnsupportedFeatureError(
        f"dvtool cannot read Paimon partition values of type {field.type} "
        f"(partition column {field.name!r})"
    )


def _string(row: bytes, slot: int) -> bytes:
    (word,) = struct.unpack_from("<Q", row, slot)
    mark = word >> 56
    if mark & 0x80:
        return row[slot : slot + (mark & 0x7F)]
    offset, length = word >> 32, word & 0xFFFFFFFF
    if offset + length > len(row):
        raise LogError("a partition string lies outside its row")
    return row[offset : offset + length]


def partition_value_text(value: Any, legacy_name: bool = True) -> str | None:
    """A partition value as its folder name shows it (before escaping); None for null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date):
        return str((value - _EPOCH).days) if legacy_name else value.isoformat()
    return str(value)


def partition_path(
    keys: Sequence[str],
    values: Sequence[Any],
    default_name: str = DEFAULT_PARTITION,
    legacy_name: bool = True,
) -> str:
    """The folder of a partition relative to the table (`""` when unpartitioned), no
    trailing slash: `dt=2024-05-14/region=eu`."""
    parts = []
    for key, value in zip(keys, values, strict=True):
        text = partition_value_text(value, legacy_name)
        if text is None or not text.strip():
            text = default_name
        parts.append(f"{escape_path_name(key)}={escape_path_name(text)}")
    return "/".join(parts)


def escape_path_name(name: str) -> str:
    """`name` with the characters a path cannot hold written as `%XX`."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in name)


def bucket_dir(bucket: int) -> str:
    """The folder of a bucket: `bucket-N`, or `bucket-postpone` for postponed writes (-2)."""
    return "bucket-postpone" if bucket == -2 else f"bucket-{bucket}"
