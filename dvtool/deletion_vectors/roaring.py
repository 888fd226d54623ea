"""A pure-numpy codec for the portable Roaring serialization, dvtool's DV bitmap format.

Deletion vectors store row indexes as a portable 64-bit Roaring bitmap (PROTOCOL.md
"Deletion Vector Format"): a little-endian uint64 bucket count, then per bucket a uint32
high key followed by a 32-bit portable bitmap (RoaringFormatSpec) of the low 32 bits. The
Spark engine decodes and encodes DVs on executors that only have PySpark's dependencies,
so this codec needs numpy alone (no pyroaring, no IO).

The driver keeps pyroaring's C codec for the same bytes: it reads and writes the DVs of
thousands of files, where this codec's fixed cost (~50 us per bitmap against ~1 us, 1 ms
against 1.3 us for 14k rows) would dominate. The two must agree byte for byte in both
directions, run-optimized or not; tests/deletion_vectors/test_roaring.py holds them to it on random
sets of every container kind and on every DV of the golden tables, so the format has one
definition with two implementations that cannot drift apart unnoticed.

A 32-bit bitmap is a cookie (12346: container count follows, no run containers; or 12347
in the low 16 bits with count - 1 in the high 16 bits, then a run-flag bitset), a
(key, cardinality - 1) uint16 pair per container, a uint32 offset per container (always
with cookie 12346, else only from 4 containers on), then the containers: arrays (at most
4096 sorted uint16), bitmaps (8 KiB, bit i = value i) and runs (uint16 run count, then
(start, length - 1) pairs).

Speed comes from batching: every container's data (all uint16 words) is gathered into
one stream, and each container kind is decoded or built for all containers at once with
boolean masks, `np.unpackbits` / `np.packbits` and cumulative sums. Python loops only run
per 64-bit bucket (2**32 row indexes each, so DVs of real files have one bucket); sets
spread over thousands of buckets are far slower than pyroaring. Malformed input raises
ValueError with a short reason, which callers wrap into their own errors. Values may use
all 64 bits: Delta's limit of 2**63 - 1 is the caller's check.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt

SERIAL_COOKIE_NO_RUNCONTAINER = 12346
SERIAL_COOKIE = 12347
NO_OFFSET_THRESHOLD = 4
"""With run containers, the offset header is only written from this many containers on."""
ARRAY_MAX_CARDINALITY = 4096
"""Containers up to this cardinality are arrays (unless run-encoded), larger ones bitmaps."""
BITMAP_WORDS = 4096
"""A bitmap container is 65536 bits, i.e. 4096 uint16 words (8 KiB)."""

_ARRAY, _BITMAP, _RUN = 0, 1, 2
_U16, _U32 = np.dtype("<u2"), np.dtype("<u4")
_EMPTY64 = struct.pack("<Q", 0)

Array = npt.NDArray[Any]


def decode64(data: bytes | bytearray | memoryview, *, max_rows: int | None = None) -> Array:
    """The row indexes (sorted, unique, uint64) of a portable 64-bit Roaring serialization.

    Every byte must belong to the bitmap. `max_rows` bounds the cardinality declared in the
    headers before anything is expanded, so a few hostile bytes cannot claim 2**32 rows.
    """
    rows, end = decode64_prefix(data, max_rows=max_rows)
    size = np.frombuffer(data, dtype=np.uint8).size
    if end != size:
        raise ValueError(f"{size - end} trailing bytes after bitmap")
    return rows


def decode64_prefix(
    data: bytes | bytearray | memoryview, *, max_rows: int | None = None
) -> tuple[Array, int]:
    """Like `decode64`, but allow bytes after the bitmap; also return the bytes it used."""
    buf = np.frombuffer(data, dtype=np.uint8)
    _need(buf, 0, 8, "bucket count")
    count = _uint_at(buf, 0, 8)
    pos, last_key = 8, -1
    parts: list[_Containers] = []
    for _ in range(count):
        _need(buf, pos, 4, "bucket key")
        high = _uint_at(buf, pos, 4)
        if high <= last_key:
            raise ValueError(f"bucket keys not strictly increasing at key {high}")
        last_key = high
        part, pos = _parse32(buf, pos + 4, high)
        parts.append(part)
    return _expand(parts, max_rows), pos


def decode32(data: bytes | bytearray | memoryview, *, max_rows: int | None = None) -> Array:
    """The values (sorted, unique, uint32) of a 32-bit portable Roaring serialization."""
    buf = np.frombuffer(data, dtype=np.uint8)
    part, end = _parse32(buf, 0, 0)
    if end != len(buf):
        raise ValueError(f"{len(buf) - end} trailing bytes after bitmap")
    return _expand([part], max_rows).astype(np.uint32)


def encode64(rows: npt.ArrayLike, *, run_optimize: bool = False) -> bytes:
    """Serialize integers (any order, duplicates allowed, none negative) as portable 64-bit
    Roaring, byte for byte as `pyroaring.BitMap64(rows, optimize=False).serialize()`.

    With `run_optimize`, each container takes CRoaring's `run_optimize()` choice instead:
    run-encoded when that is strictly smaller than its array or bitmap form (note that the
    pyroaring constructor run-optimizes unless given `optimize=False`).
    """
    values = _sorted_unique(rows)
    if not values.size:
        return _EMPTY64
    buckets = _encode_buckets(values, run_optimize)
    pieces = [struct.pack("<Q", len(buckets))]
    for high, body in buckets:
        pieces += [struct.pack("<I", high), body]
    return b"".join(pieces)


def encode32(values: npt.ArrayLike, *, run_optimize: bool = False) -> bytes:
    """Serialize integers below 2**32 as a 32-bit portable Roaring bitmap (as `encode64`)."""
    v = _sorted_unique(values)
    if v.size and int(v[-1]) >= 1 << 32:
        raise ValueError(f"value {int(v[-1])} does not fit in 32 bits")
    buckets = _encode_buckets(v, run_optimize) if v.size else []
    return buckets[0][1] if buckets else struct.pack("<II", SERIAL_COOKIE_NO_RUNCONTAINER, 0)


class _Containers:
    """The containers of one 32-bit bitmap: keys (high 48 bits), kinds, cardinalities, run
    counts and sizes in uint16 words, plus the bytes holding their data."""

    def __init__(
        self, keys: Array, kinds: Array, cards: Array, runs: Array, words: Array, body: Array
    ) -> None:
        self.keys, self.kinds, self.cards, self.runs = keys, kinds, cards, runs
        self.words, self.body = words, body


def _need(buf: Array, pos: int, size: int, what: str) -> None:
    """Raise ValueError unless `size` bytes are left at `pos`."""
    if pos + size > len(buf):
        raise ValueError(f"truncated bitmap: {what} needs {size} bytes at offset {pos}")


def _uint_at(buf: Array, pos: int, size: int) -> int:
    """The little-endian unsigned integer of `size` bytes at `pos` (already bounds-checked)."""
    return int.from_bytes(buf[pos : pos + size].tobytes(), "little")


def _u16_at(buf: Array, pos: Array) -> Array:
    """Little-endian uint16 values at arbitrary (possibly odd) byte positions."""
    values: Array = buf[pos].astype(np.int64) | (buf[pos + 1].astype(np.int64) << 8)
    return values


def _parse32(buf: Array, start: int, high: int) -> tuple[_Containers, int]:
    """Read the headers of the 32-bit bitmap at `start`; return its containers and end."""
    _need(buf, start, 4, "cookie")
    cookie = _uint_at(buf, start, 4)
    pos = start + 4
    if cookie == SERIAL_COOKIE_NO_RUNCONTAINER:
        _need(buf, pos, 4, "container count")
        n = _uint_at(buf, pos, 4)
        if n > 1 << 16:
            raise ValueError(f"{n} containers in a 32-bit bitmap (at most 65536)")
        pos += 4
        is_run = np.zeros(n, dtype=bool)
        has_offsets = True
    elif cookie & 0xFFFF == SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        _need(buf, pos, (n + 7) // 8, "run flags")
        flags = buf[pos : pos + (n + 7) // 8]
        is_run = np.unpackbits(flags, bitorder="little")[:n].astype(bool)
        pos += (n + 7) // 8
        has_offsets = n >= NO_OFFSET_THRESHOLD
    else:
        raise ValueError(f"bad cookie {cookie} (expected 12346 or 12347)")
    _need(buf, pos, 4 * n, "container headers")
    header = buf[pos : pos + 4 * n].view(_U16).astype(np.int64)
    keys16, cards = header[0::2], header[1::2] + 1
    pos += 4 * n
    if n > 1 and np.any(keys16[1:] <= keys16[:-1]):
        raise ValueError("container keys not strictly increasing")
    kinds = np.where(is_run, _RUN, np.where(cards <= ARRAY_MAX_CARDINALITY, _ARRAY, _BITMAP))
    kinds = kinds.astype(np.int8)
    offsets: Array | None = None
    if has_offsets:
        _need(buf, pos, 4 * n, "offset header")
        offsets = buf[pos : pos + 4 * n].view(_U32).astype(np.int64)
        pos += 4 * n
    words = np.where(kinds == _ARRAY, cards, BITMAP_WORDS)
    runs = np.zeros(n, dtype=np.int64)
    if is_run.any():
        if offsets is None:  # at most 3 containers, each run count follows the previous
            at = pos
            for i in range(n):
                if is_run[i]:
                    _need(buf, at, 2, "run count")
                    runs[i] = _u16_at(buf, np.array([at]))[0]
                    words[i] = 1 + 2 * runs[i]
                at += 2 * int(words[i])
        else:
            run_pos = start + offsets[is_run]
            if np.any(run_pos + 2 > len(buf)):
                raise ValueError("truncated bitmap: run container outside the data")
            runs[is_run] = _u16_at(buf, run_pos)
            words[is_run] = 1 + 2 * runs[is_run]
    expected = pos - start + 2 * (np.cumsum(words) - words)
    if offsets is not None and not np.array_equal(offsets, expected):
        raise ValueError("offset header does not match the container sizes")
    end = pos + 2 * int(words.sum())
    _need(buf, pos, end - pos, "container data")
    keys = (np.uint64(high) << np.uint64(16)) | keys16.astype(np.uint64)
    return _Containers(keys, kinds, cards, runs, words, buf[pos:end]), end


def _expand(parts: list[_Containers], max_rows: int | None) -> Array:
    """Decode the containers of all buckets at once into sorted, checked uint64 values."""
    if not parts:
        return np.zeros(0, dtype=np.uint64)
    keys, kinds, cards, runs, words = (
        np.concatenate([getattr(p, a) for p in parts])
        for a in ("keys", "kinds", "cards", "runs", "words")
    )
    total = int(cards.sum())
    if max_rows is not None and total > max_rows:
        raise ValueError(f"bitmap declares {total} rows, more than the {max_rows} allowed")
    stream = parts[0].body if len(parts) == 1 else np.concatenate([p.body for p in parts])
    stream = stream.view(_U16) if stream.size else np.zeros(0, _U16)
    mixed = len(kinds) > 1 and np.any(kinds[1:] != kinds[:-1])
    word_kind = np.repeat(kinds, words) if mixed else kinds
    out: Array = np.empty(total, dtype=np.uint64)
    value_kind = np.repeat(kinds, cards) if mixed else kinds
    high = keys << np.uint64(16)
    for kind in (_ARRAY, _BITMAP, _RUN):
        sel = kinds == kind
        if not sel.any():
            continue
        data = stream if sel.all() else stream[word_kind == kind]
        values: Array
        if kind == _ARRAY:
            values = np.repeat(high[sel], cards[sel]) | data
        elif kind == _BITMAP:
            values = _expand_bitmaps(data, high[sel], cards[sel])
        else:
            values = _expand_runs(data, high[sel], cards[sel], runs[sel])
        if sel.all():
            out = values
        else:
            out[value_kind == kind] = values
    unordered = total > 1 and not (kinds == _BITMAP).all()  # bitmaps are ordered by design
    if unordered and not np.all(out[1:] > out[:-1]):
        raise ValueError("values not strictly increasing (unsorted array or overlapping runs)")
    return out


def _expand_bitmaps(data: Array, high: Array, cards: Array) -> Array:
    """The values of bitmap containers; each popcount must equal the declared cardinality.

    Compressing a tiled 0..65535 by the bits is several times faster than `np.flatnonzero`.
    """
    bits = np.unpackbits(data.view(np.uint8), bitorder="little").view(bool)
    if not np.array_equal(bits.reshape(len(cards), -1).sum(axis=1), cards):
        raise ValueError("bitmap container popcount differs from its cardinality")
    lows = np.compress(bits, np.tile(np.arange(1 << 16, dtype=np.uint16), len(cards)))
    values: Array = np.repeat(high, cards) | lows
    return values


def _expand_runs(data: Array, high: Array, cards: Array, runs: Array) -> Array:
    """The values of run containers; runs must fit in 16 bits and add up to the cardinality."""
    if np.any(runs == 0):
        raise ValueError("run container without runs")
    is_count = np.zeros(len(data), dtype=bool)
    is_count[np.cumsum(1 + 2 * runs) - (1 + 2 * runs)] = True
    pairs = data[~is_count].reshape(-1, 2).astype(np.int64)
    starts, lengths = pairs[:, 0], pairs[:, 1] + 1
    if np.any(starts + lengths > 1 << 16):
        raise ValueError("run extends past 65535")
    first_run = np.cumsum(runs) - runs
    if not np.array_equal(np.add.reduceat(lengths, first_run), cards):
        raise ValueError("run container lengths differ from its cardinality")
    begin = np.repeat(high, runs) + starts.astype(np.uint64)
    # Each value is the previous plus one, except at a run's first value: a cumulative sum
    # over steps (uint64 wraps, so a negative step needs no special case).
    steps = np.ones(int(lengths.sum()), dtype=np.uint64)
    heads = np.cumsum(lengths) - lengths
    steps[heads[0]] = begin[0]
    steps[heads[1:]] = begin[1:] - (begin[:-1] + lengths[:-1].astype(np.uint64) - np.uint64(1))
    return np.cumsum(steps, dtype=np.uint64)


def _sorted_unique(rows: npt.ArrayLike) -> Array:
    """`rows` as a sorted, duplicate-free uint64 array; ValueError for non-integers or
    negatives (sorting is skipped when the input is already strictly increasing)."""
    a = np.asarray(rows).ravel()
    if not a.size:
        return np.zeros(0, dtype=np.uint64)
    if a.dtype.kind not in "iu":
        raise ValueError(f"row indexes must be integers, got dtype {a.dtype}")
    if a.dtype.kind == "i" and a.min() < 0:
        raise ValueError(f"negative row index {int(a.min())}")
    a = a.astype(np.uint64, copy=False)
    if a.size > 1 and not np.all(a[1:] > a[:-1]):
        a = np.unique(a)
    return a


def _encode_buckets(values: Array, run_optimize: bool) -> list[tuple[int, bytes]]:
    """The (high key, 32-bit bitmap bytes) of every bucket of sorted unique `values`."""
    n = len(values)
    key_of = values >> np.uint64(16)
    starts = np.flatnonzero(np.concatenate(([True], key_of[1:] != key_of[:-1])))
    cards = np.diff(np.append(starts, n))
    keys, lows = key_of[starts], (values & np.uint64(0xFFFF)).astype(_U16)
    kinds = np.where(cards <= ARRAY_MAX_CARDINALITY, _ARRAY, _BITMAP).astype(np.int8)
    runs = np.zeros(len(cards), dtype=np.int64)
    breaks = np.ones(n if run_optimize else 0, dtype=bool)  # marks the first value of runs
    if run_optimize:
        breaks[1:] = values[1:] != values[:-1] + np.uint64(1)
        breaks[starts] = True
        runs = np.add.reduceat(breaks.astype(np.int64), starts)
        # CRoaring's rule: a run container only when strictly smaller (ties keep the kind).
        smaller = 2 + 4 * runs < np.where(kinds == _ARRAY, 2 * cards, 2 * BITMAP_WORDS)
        kinds = np.where(smaller, _RUN, kinds).astype(np.int8)
    words = np.select([kinds == _ARRAY, kinds == _BITMAP], [cards, BITMAP_WORDS], 1 + 2 * runs)
    stream = np.empty(int(words.sum()), dtype=_U16)
    mixed = len(kinds) > 1 and np.any(kinds[1:] != kinds[:-1])
    word_kind = np.repeat(kinds, words) if mixed else kinds
    value_kind = np.repeat(kinds, cards) if mixed else kinds
    for kind in (_ARRAY, _BITMAP, _RUN):
        sel = kinds == kind
        if not sel.any():
            continue
        mine: Any = slice(None) if sel.all() else value_kind == kind
        if kind == _ARRAY:
            data = lows[mine]
        elif kind == _BITMAP:
            bits = np.zeros(int(sel.sum()) << 16, dtype=bool)
            container = np.repeat(np.arange(int(sel.sum()), dtype=np.int64), cards[sel])
            bits[(container << 16) | lows[mine]] = True
            data = np.packbits(bits, bitorder="little").view(_U16)
        else:
            data = _run_words(lows, breaks, None if sel.all() else mine, runs[sel])
        stream[slice(None) if sel.all() else word_kind == kind] = data
    return _bucket_bytes(keys, kinds, cards, words, stream)


def _run_words(lows: Array, breaks: Array, mine: Array | None, runs: Array) -> Array:
    """The data of the run containers: per container its run count, then (start, length - 1)
    of each run. `breaks` marks the first value of every run, `mine` (None: all) the values
    of the run containers."""
    heads = np.flatnonzero(breaks)
    lengths = np.diff(np.append(heads, len(lows)))
    if mine is not None:
        keep = mine[heads]
        heads, lengths = heads[keep], lengths[keep]
    is_count = np.zeros(int((1 + 2 * runs).sum()), dtype=bool)
    is_count[np.cumsum(1 + 2 * runs) - (1 + 2 * runs)] = True
    data = np.empty(len(is_count), dtype=_U16)
    data[is_count] = runs
    data[~is_count] = np.column_stack((lows[heads], lengths - 1)).ravel()
    return data


def _bucket_bytes(
    keys: Array, kinds: Array, cards: Array, words: Array, stream: Array
) -> list[tuple[int, bytes]]:
    """Lay out each bucket's cookie, headers, offsets and container data as CRoaring does."""
    highs = keys >> np.uint64(16)
    firsts = np.flatnonzero(np.concatenate(([True], highs[1:] != highs[:-1])))
    bounds = np.append(firsts, len(keys))
    word_end = np.cumsum(words)
    out: list[tuple[int, bytes]] = []
    for b in range(len(firsts)):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        n, is_run = hi - lo, kinds[lo:hi] == _RUN
        if is_run.any():
            head = struct.pack("<I", SERIAL_COOKIE | (n - 1) << 16)
            head += np.packbits(is_run, bitorder="little").tobytes()
        else:
            head = struct.pack("<II", SERIAL_COOKIE_NO_RUNCONTAINER, n)
        low_keys = (keys[lo:hi] & np.uint64(0xFFFF)).astype(np.int64)
        pairs = np.column_stack((low_keys, cards[lo:hi] - 1))
        head += pairs.astype(_U16).tobytes()
        if not is_run.any() or n >= NO_OFFSET_THRESHOLD:
            sizes = 2 * words[lo:hi]
            offsets = len(head) + 4 * n + np.cumsum(sizes) - sizes
            head += offsets.astype(_U32).tobytes()
        first_word = int(word_end[lo - 1]) if lo else 0
        out.append((int(highs[lo]), head + stream[first_word : int(word_end[hi - 1])].tobytes()))
    return out
