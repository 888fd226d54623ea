"""Z85, the Base85 variant Delta uses for DV paths and inline DVs (ZeroMQ RFC 32).

Z85 maps every 4 bytes, read as a big-endian uint32, to 5 characters of an 85-letter
alphabet that is safe inside JSON strings. Delta uses it for the 16-byte UUID that names
a deletion vector file (always 20 characters) and for inline deletion vectors.

Strict RFC 32 needs inputs aligned to 4 bytes (encode) or 5 characters (decode). Delta
Spark pads unaligned inline DVs with zero bytes and truncates after decoding, which plain
`decode` supports. The Rust `z85` crate (used by delta-kernel-rs) writes a different tail
instead: a last group of `k` '#' characters followed by `5 - k` characters encoding the
`4 - k` remaining bytes. No strict group can start with '#' (84 * 85**4 > 2**32 - 1), so
`decode_padded` reads both forms without ambiguity.

Decoding works on whole columns of digits (`bytes.translate` plus strided slices) and packs
the words with one `struct.pack` call, so it needs no per-character Python loop.
"""

from __future__ import annotations

import struct
import uuid

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
"""The 85 characters of Z85, in digit order."""

ENCODED_UUID_LENGTH = 20
"""A 16-byte UUID always encodes to 20 characters."""

PAD_CHAR = "#"
"""The character the Rust `z85` crate repeats to mark missing bytes in the last group."""

_INVALID = 0xFF
_DECODE_TABLE = bytes(
    ALPHABET.index(chr(code)) if chr(code) in ALPHABET else _INVALID for code in range(256)
)
_ENCODE_TABLE = ALPHABET.encode("ascii").ljust(256, b"\0")
_MAX_WORD = 0xFFFFFFFF


def encode(data: bytes) -> str:
    """Encode `data` (a multiple of 4 bytes long) as Z85 text, 5 characters per 4 bytes."""
    if len(data) % 4:
        raise ValueError(f"Z85 input must be a multiple of 4 bytes long, got {len(data)} bytes")
    words = struct.unpack(f">{len(data) // 4}I", data)
    digits = bytearray()
    for word in words:
        digits += _word_digits(word)
    return bytes(digits).translate(_ENCODE_TABLE).decode("ascii")


def _word_digits(word: int) -> bytes:
    """The five base-85 digits of one 32-bit word, most significant first."""
    word, d4 = divmod(word, 85)
    word, d3 = divmod(word, 85)
    word, d2 = divmod(word, 85)
    d0, d1 = divmod(word, 85)
    return bytes((d0, d1, d2, d3, d4))


def decode(text: str) -> bytes:
    """Decode strict Z85 `text` (a multiple of 5 characters long) to bytes.

    Raises ValueError naming the problem for a bad length, a character outside the
    alphabet, or a 5-character group whose value exceeds 32 bits.
    """
    if len(text) % 5:
        raise ValueError(
            f"Z85 text must be a multiple of 5 characters long, got {len(text)} characters"
        )
    words = _decode_words(_digits(text), text)
    return struct.pack(f">{len(words)}I", *words)


def _digits(text: str) -> bytes:
    """Map each character of `text` to its digit value, rejecting foreign characters."""
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError as exc:
        raise ValueError(f"invalid Z85 character {text[exc.start]!r} at {exc.start}") from exc
    digits = raw.translate(_DECODE_TABLE)
    bad = digits.find(_INVALID)
    if bad >= 0:
        raise ValueError(f"invalid Z85 character {text[bad]!r} at {bad}")
    return digits


def _decode_words(digits: bytes, text: str) -> list[int]:
    """Combine every 5 digits into one 32-bit word; `text` is only used in messages."""
    columns = (digits[0::5], digits[1::5], digits[2::5], digits[3::5], digits[4::5])
    words = [
        (((a * 85 + b) * 85 + c) * 85 + d) * 85 + e for a, b, c, d, e in zip(*columns, strict=True)
    ]
    if words and max(words) > _MAX_WORD:
        group = next(i for i, word in enumerate(words) if word > _MAX_WORD)
        chunk = text[group * 5 : group * 5 + 5]
        raise ValueError(f"Z85 group {chunk!r} at {group * 5} exceeds 32 bits")
    return words


def decode_padded(text: str) -> bytes:
    """Decode Z85 `text` whose last group may use the Rust `z85` crate's '#' tail padding.

    Without padding this equals `decode`. With it, the last group holds `k` '#' characters
    and then the remaining `4 - k` bytes as a big-endian number in `5 - k` characters.
    """
    if len(text) % 5:
        raise ValueError(
            f"Z85 text must be a multiple of 5 characters long, got {len(text)} characters"
        )
    if not text.endswith(PAD_CHAR, len(text) - 5, len(text) - 4):
        return decode(text)
    head, tail = text[:-5], text[-5:]
    return decode(head) + _decode_tail(tail, len(head))


def _decode_tail(tail: str, position: int) -> bytes:
    """Decode one '#'-padded final group that starts at character `position`."""
    missing = len(tail) - len(tail.lstrip(PAD_CHAR))
    if missing > 3:
        raise ValueError(f"Z85 padding group {tail!r} at {position} has no data")
    value = 0
    for digit in _digits(tail[missing:]):
        value = value * 85 + digit
    size = 4 - missing
    if value >= 256**size:
        raise ValueError(f"Z85 padding group {tail!r} at {position} exceeds {size} bytes")
    return value.to_bytes(size, "big")


def uuid_to_z85(value: uuid.UUID) -> str:
    """Encode a UUID's 16 big-endian bytes as the 20 characters Delta puts in DV paths."""
    return encode(value.bytes)


def uuid_from_z85(text: str) -> uuid.UUID:
    """Decode the 20-character Z85 form of a UUID used in DV paths."""
    if len(text) != ENCODED_UUID_LENGTH:
        raise ValueError(
            f"a Z85-encoded UUID has {ENCODED_UUID_LENGTH} characters, got {len(text)}: {text!r}"
        )
    return uuid.UUID(bytes=decode(text))
