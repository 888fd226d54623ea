"""Partition columns of every type, without the JVM (`dvtool.paimon.protocol.binary_row`,
`partition_text`); tests/reference/test_paimon_partitions.py holds dvtool's folders to
the ones Paimon's Java code names for the same bytes.

Type strings as Paimon's schema files write them parse to their root and parameters;
rows built per the `BinaryRow` layout (`manifest.md`) decode, the variable-length part
(wide decimals, timestamps above millisecond precision) included; values whose folder
Paimon names unrecoverably are refused naming the column, its type and why.
"""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from dvtool.errors import UnsupportedFeatureError
from dvtool.paimon.protocol.binary_row import PaimonType, Timestamp, decode_binary_row
from dvtool.paimon.protocol.partitions import partition_path
from dvtool.paimon.protocol.schema import DataField


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("INT NOT NULL", PaimonType("INT")),
        ("STRING", PaimonType("VARCHAR")),
        ("BYTES", PaimonType("VARBINARY")),
        ("DECIMAL(38, 10) NOT NULL", PaimonType("DECIMAL", 38, 10)),
        ("DECIMAL", PaimonType("DECIMAL", 10, 0)),
        ("TIMESTAMP(3)", PaimonType("TIMESTAMP", 3)),
        ("TIMESTAMP", PaimonType("TIMESTAMP", 6)),
        ("TIMESTAMP(9) WITH LOCAL TIME ZONE NOT NULL", PaimonType("TIMESTAMP_LTZ", 9)),
        ("TIMESTAMP_LTZ(3)", PaimonType("TIMESTAMP_LTZ", 3)),
        ("TIME(3)", PaimonType("TIME", 3)),
        ("VARCHAR(20)", PaimonType("VARCHAR")),
    ],
)
def test_type_strings_parse(text: str, parsed: PaimonType) -> None:
    assert PaimonType.parse(text) == parsed


def _one_field_row(slot: bytes, tail: bytes = b"") -> bytes:
    """A serialized one-field row: arity, 8 bytes of null bits, the slot, the tail."""
    return struct.pack(">i", 1) + bytes(8) + slot + tail


def test_variable_length_values_decode() -> None:
    unscaled = -15 * 10**9
    data = unscaled.to_bytes(5, "big", signed=True)
    row = _one_field_row(struct.pack("<Q", 16 << 32 | len(data)), data.ljust(16, b"\0"))
    [wide] = decode_binary_row(row, [DataField(0, "d", "DECIMAL(38, 10)")])
    assert wide == Decimal("-1.5000000000")
    row = _one_field_row(struct.pack("<Q", 16 << 32 | 456789), struct.pack("<q", 1715681730123))
    [ts] = decode_binary_row(row, [DataField(0, "t", "TIMESTAMP(9)")])
    assert ts == Timestamp(1715681730123, 456789)
    assert str(ts) == "2024-05-14T10:15:30.123456789"
    [compact] = decode_binary_row(
        _one_field_row(struct.pack("<q", -1250)), [DataField(0, "d", "DECIMAL(10, 2) NOT NULL")]
    )
    assert compact == Decimal("-12.50")


@pytest.mark.parametrize(
    ("type_text", "slot", "legacy", "kind"),
    [
        ("VARBINARY(8)", b"abc" + bytes(4) + b"\x83", True, "VARBINARY"),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", struct.pack("<q", 0), False, "TIMESTAMP_LTZ"),
    ],
)
def test_folders_paimon_cannot_name_again_are_refused(
    type_text: str, slot: bytes, legacy: bool, kind: str
) -> None:
    field = DataField(0, "col", type_text)
    [value] = decode_binary_row(_one_field_row(slot), [field])
    with pytest.raises(UnsupportedFeatureError) as raised:
        partition_path(["col"], [value], legacy_name=legacy, types=[PaimonType.parse(type_text)])
    assert f"partition column 'col' of type {kind}" in raised.value.message
    assert "partition.legacy-name" in raised.value.message and raised.value.hint
