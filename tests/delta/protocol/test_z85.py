"""Z85 codec: RFC 32 vector, Delta's UUID example, round trips, padding, bad input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvtool.delta.protocol import z85

RFC_BYTES = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])


def test_rfc32_vector_encodes() -> None:
    assert z85.encode(RFC_BYTES) == "HelloWorld"


def test_rfc32_vector_decodes() -> None:
    assert z85.decode("HelloWorld") == RFC_BYTES


def test_empty_input() -> None:
    assert z85.encode(b"") == ""
    assert z85.decode("") == b""
    assert z85.decode_padded("") == b""


def test_extreme_words() -> None:
    assert z85.encode(b"\0\0\0\0") == "00000"
    assert z85.encode(b"\xff\xff\xff\xff") == "%nSc0"
    assert z85.decode("%nSc0") == b"\xff\xff\xff\xff"


def test_protocol_uuid_example() -> None:
    # PROTOCOL.md "JSON Example 1": the last 20 characters after the prefix "ab".
    assert z85.uuid_from_z85("^-aqEH.-t@S}K{vb[*k^") == uuid.UUID(
        "d2c639aa-8816-431a-aaf6-d3fe2512ff61"
    )


def test_uuid_to_z85_inverts_example() -> None:
    value = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert z85.uuid_to_z85(value) == "^-aqEH.-t@S}K{vb[*k^"


@given(st.binary().map(lambda b: b[: len(b) - len(b) % 4]))
def test_round_trip_bytes(data: bytes) -> None:
    text = z85.encode(data)
    assert len(text) == len(data) // 4 * 5
    assert z85.decode(text) == data
    assert z85.decode_padded(text) == data


@given(st.uuids())
def test_round_trip_uuid(value: uuid.UUID) -> None:
    text = z85.uuid_to_z85(value)
    assert len(text) == z85.ENCODED_UUID_LENGTH
    assert z85.uuid_from_z85(text) == value


@given(st.text(alphabet=z85.ALPHABET).filter(lambda t: len(t) % 5 == 0))
def test_decode_accepts_or_rejects_overflow_only(text: str) -> None:
    try:
        data = z85.decode(text)
    except ValueError as exc:
        assert "exceeds 32 bits" in str(exc)
    else:
        assert z85.encode(data) == text


@pytest.mark.parametrize("length", [1, 2, 3, 5, 7])
def test_encode_rejects_unaligned(length: int) -> None:
    with pytest.raises(ValueError, match="multiple of 4 bytes"):
        z85.encode(bytes(length))


@pytest.mark.parametrize("text", ["H", "Hell", "HelloW", "HelloWorl"])
def test_decode_rejects_unaligned(text: str) -> None:
    with pytest.raises(ValueError, match="multiple of 5 characters"):
        z85.decode(text)
    with pytest.raises(ValueError, match="multiple of 5 characters"):
        z85.decode_padded(text)


@pytest.mark.parametrize(
    ("text", "bad"), [("Hello Worl", "' ' at 5"), ('"ello', "'\"' at 0"), ("Hellé", "'é' at 4")]
)
def test_decode_rejects_foreign_characters(text: str, bad: str) -> None:
    with pytest.raises(ValueError, match=f"invalid Z85 character {bad}"):
        z85.decode(text)


def test_decode_rejects_group_over_32_bits() -> None:
    with pytest.raises(ValueError, match="'#####' at 5 exceeds 32 bits"):
        z85.decode("00000#####")


def test_uuid_from_z85_rejects_wrong_length() -> None:
    with pytest.raises(ValueError, match="20 characters, got 19"):
        z85.uuid_from_z85("^-aqEH.-t@S}K{vb[*k")


def test_decode_padded_reads_rust_crate_tail() -> None:
    # delta-kernel-rs' golden cdf-table-with-dv: 2 bytes 0x03 0x00 as "##" + "093".
    assert z85.decode_padded("HelloWorld##093") == RFC_BYTES + b"\x03\x00"
    assert z85.decode_padded("#0000") == b"\0\0\0"
    assert z85.decode_padded("###0a") == b"\x0a"


@given(st.binary(max_size=3, min_size=1))
def test_decode_padded_tail_lengths(tail: bytes) -> None:
    missing = 4 - len(tail)
    digits = _base85_digits(int.from_bytes(tail, "big"), 5 - missing)
    assert z85.decode_padded("#" * missing + digits) == tail


def _base85_digits(value: int, count: int) -> str:
    """`value` as `count` Z85 digits, most significant first (test-side reference)."""
    out = []
    for _ in range(count):
        value, digit = divmod(value, 85)
        out.append(z85.ALPHABET[digit])
    return "".join(reversed(out))


@pytest.mark.parametrize(
    ("text", "message"),
    [("####0", "has no data"), ("#####", "has no data"), ("##%%%", "exceeds 2 bytes")],
)
def test_decode_padded_rejects_bad_tail(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        z85.decode_padded(text)


def test_decode_padded_only_at_the_end() -> None:
    with pytest.raises(ValueError, match="exceeds 32 bits"):
        z85.decode_padded("##093HelloWorld")
