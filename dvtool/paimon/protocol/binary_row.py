"""Paimon's `BinaryRow`: the bytes manifests key partitions by, decoded for every type a
partition column may have, without any IO.

A manifest's `_PARTITION` is a big-endian int32 field count followed by the row
(`manifest.md` "BinaryRow"): a null bitset after one header byte, padded to 8-byte words
(`((arity + 63 + 8) // 64) * 8` bytes; field i's null bit is bit i + 8), then one 8-byte
little-endian slot per field, then the variable-length part. By type (Paimon's
`BinaryRowWriter` and `MemorySegmentUtils`):

- BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DATE (days since 1970-01-01),
  TIME (milliseconds of the day): the value in the slot's low bytes;
- CHAR, VARCHAR, STRING, BINARY, VARBINARY, BYTES: at most 7 bytes sit in the slot (its top
  byte is 0x80 | length); longer ones in the variable part (the slot holds their offset
  from the row's start in its high 32 bits, the length in the low 32);
- DECIMAL(p, s): compact (p <= 18) the unscaled value as a long in the slot; otherwise the
  unscaled value's big-endian two's complement bytes in the variable part (offset and
  length in the slot, as for strings);
- TIMESTAMP(p) and TIMESTAMP(p) WITH LOCAL TIME ZONE: compact (p <= 3) epoch milliseconds
  in the slot; otherwise the milliseconds as a long in the variable part, the slot holding
  its offset (high 32 bits) and the nanoseconds within the millisecond (low 32).

Nested types cannot be partition keys (Paimon's `SchemaValidation` refuses them).
"""

from __future__ import annotations

import datetime as dt
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from dvtool.errors import LogError, UnsupportedFeatureError
from dvtool.paimon.protocol.schema import DataField

_EPOCH = dt.date(1970, 1, 1)
MAX_COMPACT_DECIMAL_PRECISION = 18
MAX_COMPACT_TIMESTAMP_PRECISION = 3
_FIXED = {
    "TINYINT": "<b",
    "SMALLINT": "<h",
    "INT": "<i",
    "BIGINT": "<q",
    "FLOAT": "<f",
    "DOUBLE": "<d",
}
STRINGS = frozenset({"CHAR", "VARCHAR"})
BINARIES = frozenset({"BINARY", "VARBINARY"})
TIMESTAMPS = frozenset({"TIMESTAMP", "TIMESTAMP_LTZ"})
# Type names Paimon serializes, to the root dvtool calls them by, and default parameters.
_ALIASES = {
    "INTEGER": "INT",
    "STRING": "VARCHAR",
    "BYTES": "VARBINARY",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "TIMESTAMP_LTZ": "TIMESTAMP_LTZ",
}
_DEFAULT_PRECISION = {"DECIMAL": 10, "TIMESTAMP": 6, "TIMESTAMP_LTZ": 6, "TIME": 0}
_TYPE = re.compile(
    r"^\s*(?P<name>[A-Z_]+(?:\s+[A-Z_]+)*?)\s*(?:\((?P<params>[^)]*)\))?"
    r"(?P<ltz>\s+WITH\s+LOCAL\s+TIME\s+ZONE)?\s*(?:NOT\s+NULL)?\s*$"
)


@dataclass(frozen=True)
class PaimonType:
    """A primitive Paimon type: its root (`INT`, `VARCHAR`, `DECIMAL`, `TIMESTAMP_LTZ`...),
    precision (decimals, timestamps, times) and scale (decimals)."""

    root: str
    precision: int | None = None
    scale: int = 0

    @classmethod
    def parse(cls, text: str) -> PaimonType:
        """The type a schema's type string names (`DECIMAL(20, 4) NOT NULL`,
        `TIMESTAMP(3) WITH LOCAL TIME ZONE`); the root is the upper-cased name when it is no
        type dvtool knows (nested types)."""
        upper = text.upper()
        match = _TYPE.match(upper)
        if match is None:
            return cls(upper.split("(", 1)[0].strip())
        name = re.sub(r"\s+", " ", match["name"])
        root = "TIMESTAMP_LTZ" if match["ltz"] else _ALIASES.get(name, name)
        if root == "TIMESTAMP WITH LOCAL TIME ZONE":
            root = "TIMESTAMP_LTZ"
        params = [p.strip() for p in (match["params"] or "").split(",") if p.strip()]
        numbers = [int(p) for p in params if p.isdigit()]
        precision = numbers[0] if numbers else _DEFAULT_PRECISION.get(root)
        scale = numbers[1] if len(numbers) > 1 else 0
        if root not in _DEFAULT_PRECISION:
            precision = None
        return cls(root, precision, scale)


@dataclass(frozen=True, order=True)
class Timestamp:
    """A TIMESTAMP value as Paimon holds it: epoch milliseconds and the nanoseconds within
    the millisecond (0..999999); read without a time zone (UTC wall-clock)."""

    millis: int
    nanos_of_millisecond: int = 0

    @property
    def epoch_day(self) -> int:
        return self.millis // 86_400_000

    @property
    def nano_of_day(self) -> int:
        return (self.millis % 86_400_000) * 1_000_000 + self.nanos_of_millisecond

    def __str__(self) -> str:
        """ISO 8601 to the nanosecond, without a zone: `2024-05-14T10:15:30.123456789`."""
        date = _EPOCH + dt.timedelta(days=self.epoch_day)
        seconds, nanos = divmod(self.nano_of_day, 1_000_000_000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return f"{date.isoformat()}T{hour:02d}:{minute:02d}:{second:02d}.{nanos:09d}"


def decode_binary_row(data: bytes, fields: Sequence[DataField]) -> tuple[Any, ...]:
    """The values of a serialized partition row, one per field (None for nulls); LogError
    when the bytes do not hold a row of these fields, UnsupportedFeatureError for a type no
    partition column can have."""
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
    kind = PaimonType.parse(field.type)
    root = kind.root
    if root == "BOOLEAN":
        return row[slot] != 0
    if root in _FIXED:
        return struct.unpack_from(_FIXED[root], row, slot)[0]
    if root == "DATE":
        days = struct.unpack_from("<i", row, slot)[0]
        return _EPOCH + dt.timedelta(days=days) if -719162 <= days <= 2932896 else days
    if root == "TIME":
        millis = struct.unpack_from("<i", row, slot)[0] % 86_400_000
        seconds, ms = divmod(millis, 1000)
        return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, ms * 1000)
    if root in STRINGS:
        return _variable(row, slot, inline=True).decode("utf-8", errors="replace")
    if root in BINARIES:
        return _variable(row, slot, inline=True)
    if root == "DECIMAL":
        return _decimal(row, slot, kind)
    if root in TIMESTAMPS:
        return _timestamp(row, slot, kind)
    raise UnsupportedFeatureError(
        f"dvtool cannot read Paimon partition values of type {field.type} "
        f"(partition column {field.name!r})"
    )


def _variable(row: bytes, slot: int, inline: bool) -> bytes:
    """The bytes a slot points to in the variable part (or holds, when short)."""
    (word,) = struct.unpack_from("<Q", row, slot)
    mark = word >> 56
    if inline and mark & 0x80:
        return row[slot : slot + (mark & 0x7F)]
    offset, length = word >> 32, word & 0xFFFFFFFF
    if offset + length > len(row):
        raise LogError("a partition value lies outside its row")
    return row[offset : offset + length]


def _decimal(row: bytes, slot: int, kind: PaimonType) -> Decimal:
    precision = kind.precision or 10
    if precision <= MAX_COMPACT_DECIMAL_PRECISION:
        unscaled = struct.unpack_from("<q", row, slot)[0]
    else:
        unscaled = int.from_bytes(_variable(row, slot, inline=False), "big", signed=True)
    sign, digits, _ = Decimal(unscaled).as_tuple()
    return Decimal((sign, digits, -kind.scale))


def _timestamp(row: bytes, slot: int, kind: PaimonType) -> Timestamp:
    precision = 6 if kind.precision is None else kind.precision
    (word,) = struct.unpack_from("<q", row, slot)
    if precision <= MAX_COMPACT_TIMESTAMP_PRECISION:
        return Timestamp(word)
    offset, nanos = (word >> 32) & 0xFFFFFFFF, word & 0xFFFFFFFF
    if offset + 8 > len(row) or nanos > 999_999:
        raise LogError("a partition timestamp lies outside its row")
    return Timestamp(struct.unpack_from("<q", row, offset)[0], nanos)
