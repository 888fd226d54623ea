"""The pure-numpy Roaring codec (dvtool.deletion_vectors.roaring), checked against pyroaring.

pyroaring is the oracle: decoding its bytes must give the same rows, and encoding must give
its bytes exactly, both as built (`optimize=False`: arrays and bitmaps) and run-optimized.
Every DV of the golden tables must decode like pyroaring decodes it, and malformed bitmaps
must raise ValueError.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from dvtool.deletion_vectors.roaring import decode32, decode64, decode64_prefix, encode32, encode64
from tests.oracles import DV_MAGIC, GOLDEN, dv_file, z85_decode

MAX_ROW = 2**63 - 1
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def expected(rows: Any) -> np.ndarray:
    """The sorted distinct rows as uint64, computed without dvtool."""
    return np.unique(np.asarray(rows, dtype=np.uint64))


def pyroaring_bytes(rows: np.ndarray, optimize: bool) -> bytes:
    """pyroaring's portable 64-bit serialization (its constructor run-optimizes by default)."""
    return BitMap64(rows, optimize=optimize).serialize()


def container_kinds(data: bytes) -> list[str]:
    """The container kinds of a portable 64-bit bitmap, read with struct (independent)."""
    kinds: list[str] = []
    (buckets,) = struct.unpack_from("<Q", data)
    pos = 8
    for _ in range(buckets):
        start = pos + 4
        (cookie,) = struct.unpack_from("<I", data, start)
        if cookie == 12346:
            (n,) = struct.unpack_from("<I", data, start + 4)
            flags, pos = [False] * n, start + 8
        else:
            n = (cookie >> 16) + 1
            raw = data[start + 4 : start + 4 + (n + 7) // 8]
            flags = [bool(raw[i // 8] >> (i % 8) & 1) for i in range(n)]
            pos = start + 4 + (n + 7) // 8
        cards = [struct.unpack_from("<H", data, pos + 4 * i + 2)[0] + 1 for i in range(n)]
        pos += 4 * n
        if cookie == 12346 or n >= 4:
            pos += 4 * n
        for run, card in zip(flags, cards, strict=True):
            if run:
                (runs,) = struct.unpack_from("<H", data, pos)
                kinds.append("run")
                pos += 2 + 4 * runs
            else:
                kinds.append("array" if card <= 4096 else "bitmap")
                pos += 2 * card if card <= 4096 else 8192
    assert pos == len(data)
    return kinds


def check_against_pyroaring(rows: np.ndarray) -> None:
    """decode64, encode64 (both modes) and the roundtrip agree with pyroaring on `rows`."""
    want = expected(rows)
    for optimize in (False, True):
        reference = pyroaring_bytes(want, optimize)
        assert np.array_equal(decode64(reference), want)
        assert decode64(reference).dtype == np.uint64
        assert encode64(rows, run_optimize=optimize) == reference
    tweaked = BitMap64(want, optimize=False)
    tweaked.run_optimize()
    assert encode64(rows, run_optimize=True) == tweaked.serialize()
    shuffled = np.random.default_rng(0).permutation(np.concatenate([want, want[: len(want) // 3]]))
    assert np.array_equal(decode64(encode64(shuffled)), want)


# --- property tests -----------------------------------------------------------------------

BASES = [
    0,
    1,
    4095,
    65536 - 40,
    65536,
    3 * 65536 - 7,
    2**31,
    2**32 - 70_000,
    2**32,
    2**32 + 65536,
    5 * 2**32 + 12345,
    2**62,
    MAX_ROW - 200_000,
]


@st.composite
def clusters(draw: st.DrawFn) -> np.ndarray:
    """A cluster of rows: sparse, dense (around the 4096 array limit and above), runs of
    varied lengths and gaps (around the run/array/bitmap size ties), or one long range."""
    base = draw(st.one_of(st.sampled_from(BASES), st.integers(0, MAX_ROW)))
    shape = draw(st.sampled_from(["sparse", "dense", "runs", "range"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if shape == "sparse":
        span = draw(st.sampled_from([2**8, 2**16, 2**20, 2**36]))
        offsets = rng.integers(0, span, draw(st.integers(1, 300)))
    elif shape == "dense":
        offsets = rng.choice(65536, draw(st.integers(3000, 65536)), replace=False)
    elif shape == "runs":
        count = draw(st.integers(1, 2500))
        lengths = rng.integers(1, draw(st.integers(2, 40)), count)
        gaps = rng.integers(1, draw(st.integers(2, 40)), count)
        begins = np.cumsum(lengths + gaps) - lengths
        offsets = np.repeat(begins - np.cumsum(lengths) + lengths, lengths) + np.arange(
            lengths.sum()
        )
    else:
        offsets = np.arange(draw(st.integers(1, 200_000)))
    offsets = offsets.astype(np.uint64)
    offsets = offsets[offsets <= np.uint64(MAX_ROW - base)]
    return np.uint64(base) + offsets


row_sets = st.lists(clusters(), max_size=4).map(
    lambda parts: np.concatenate([np.zeros(0, np.uint64), *parts])
)


@FAST
@given(row_sets)
def test_matches_pyroaring(rows: np.ndarray) -> None:
    check_against_pyroaring(rows)


@FAST
@given(st.lists(st.integers(0, 2**32 - 1), max_size=300), st.integers(0, 2**32 - 70_000))
def test_32_bit_matches_pyroaring(values: list[int], start: int) -> None:
    rows = np.array([*values, *range(start, start + 5000, 2)], dtype=np.uint32)
    want = np.unique(rows)
    for optimize in (False, True):
        reference = BitMap(want, optimize=optimize).serialize()
        assert encode32(rows, run_optimize=optimize) == reference
        got = decode32(reference)
        assert got.dtype == np.uint32
        assert np.array_equal(got, want)


# --- explicit container kinds and boundaries ----------------------------------------------


def _runs(count: int, length: int, gap: int = 1, start: int = 0) -> np.ndarray:
    """`count` runs of `length` values separated by `gap` missing values."""
    begins = start + np.arange(count) * (length + gap)
    return (begins[:, None] + np.arange(length)).ravel()


BOUNDARIES: dict[str, tuple[np.ndarray, list[str], list[str]]] = {
    # name: (rows, container kinds as built, container kinds run-optimized)
    "empty": (np.zeros(0, np.uint64), [], []),
    "array of 4096": (np.arange(0, 8192, 2), ["array"], ["array"]),
    "bitmap of 4097": (np.arange(0, 8194, 2), ["bitmap"], ["bitmap"]),
    "3 values in 1 run (tie)": (np.arange(3), ["array"], ["array"]),
    "4 values in 1 run": (np.arange(4), ["array"], ["run"]),
    "7 values in 3 runs (tie)": (np.array([0, 1, 3, 4, 6, 7, 8]), ["array"], ["array"]),
    "8 values in 3 runs": (np.array([0, 1, 3, 4, 6, 7, 8, 9]), ["array"], ["run"]),
    "4095 values in 2047 runs (tie)": (
        np.concatenate([_runs(2046, 2), [7000, 7001, 7002]]),
        ["array"],
        ["array"],
    ),
    "4096 values in 2047 runs": (
        np.concatenate([_runs(2046, 2), [7000, 7001, 7002, 7003]]),
        ["array"],
        ["run"],
    ),
    "bitmap in 2047 runs": (_runs(2047, 3), ["bitmap"], ["run"]),
    "bitmap in 2048 runs (tie)": (_runs(2048, 3), ["bitmap"], ["bitmap"]),
    "full container": (np.arange(65536, 2 * 65536), ["bitmap"], ["run"]),
    "run across 65535/65536": (np.arange(65500, 65600), ["array"] * 2, ["run"] * 2),
    "3 run containers, no offsets": (
        np.arange(65000, 65000 + 65536 + 1000),
        ["array", "bitmap", "array"],
        ["run"] * 3,
    ),
    "4 run containers, offsets": (
        np.arange(65000, 65000 + 2 * 65536 + 1000),
        ["array", "bitmap", "bitmap", "array"],
        ["run"] * 4,
    ),
    "mixed kinds": (
        np.concatenate(
            [
                np.arange(10, 20, 3),
                np.arange(65536, 65536 + 9000, 2),
                np.arange(2 * 65536, 2 * 65536 + 50000),
            ]
        ),
        ["array", "bitmap", "bitmap"],
        ["array", "bitmap", "run"],
    ),
    "bucket edges": (
        np.array([0, 2**32 - 1, 2**32, 2**33, MAX_ROW], dtype=np.uint64),
        ["array"] * 5,
        ["array"] * 5,
    ),
    "largest uint64": (np.array([2**64 - 1, 2**64 - 2], dtype=np.uint64), ["array"], ["array"]),
}


@pytest.mark.parametrize("name", list(BOUNDARIES))
def test_boundaries(name: str) -> None:
    rows, built, optimized = BOUNDARIES[name]
    check_against_pyroaring(rows)
    assert container_kinds(encode64(rows)) == built
    assert container_kinds(encode64(rows, run_optimize=True)) == optimized


def test_input_normalization() -> None:
    assert encode64([5, 3, 3, 9]) == pyroaring_bytes(np.array([3, 5, 9]), False)
    assert encode64(np.array([[3], [1]], dtype=np.int8)) == pyroaring_bytes(np.array([1, 3]), False)
    assert encode64([]) == encode64(np.zeros(0, np.int64)) == BitMap64().serialize()
    assert encode32([]) == BitMap().serialize()
    for bad in ([-1, 3], np.array([0.5]), np.array([True])):
        with pytest.raises(ValueError):
            encode64(bad)
    with pytest.raises(ValueError, match="32 bits"):
        encode32([2**32])


def test_empty_bucket_and_prefix() -> None:
    """Delta's RoaringBitmapArray writes an empty bitmap for each unused high key below the
    largest; such buckets decode to nothing, as in pyroaring."""
    empty = struct.pack("<II", 12346, 0)
    one = BitMap([7]).serialize()
    data = struct.pack("<Q", 2) + struct.pack("<I", 0) + empty + struct.pack("<I", 1) + one
    assert np.array_equal(decode64(data), [2**32 + 7])
    assert list(BitMap64.deserialize(data)) == [2**32 + 7]
    rows, used = decode64_prefix(data + b"tail")
    assert used == len(data) and np.array_equal(rows, [2**32 + 7])


# --- golden DVs ---------------------------------------------------------------------------


def _golden_dvs() -> list[tuple[str, Path, dict[str, Any]]]:
    """(id, table root, descriptor) of every DV on an add action of the good golden tables
    (`bad/` tables lack their DV files; `.tar.zst` archives are not tables)."""
    found: dict[str, tuple[str, Path, dict[str, Any]]] = {}
    for log in sorted(GOLDEN.glob("**/_delta_log")):
        table = log.parent
        if "bad" in table.relative_to(GOLDEN).parts:
            continue
        for commit in sorted(log.glob("*.json")):
            for line in filter(str.strip, commit.read_text().splitlines()):
                descriptor = (json.loads(line).get("add") or {}).get("deletionVector")
                if descriptor:
                    key = f"{table.relative_to(GOLDEN)}:{descriptor['storageType']}"
                    key += f"{descriptor['pathOrInlineDv']}@{descriptor.get('offset')}"
                    found[key] = (key, table, descriptor)
    return list(found.values())


GOLDEN_DVS = _golden_dvs()
# Without golden tables the parametrized test must fail, not become an empty-set skip.
GOLDEN_CASES = GOLDEN_DVS or [("golden tables missing", GOLDEN, {"storageType": "u"})]


def _dv_bytes(table: Path, descriptor: dict[str, Any]) -> bytes:
    """The magic-prefixed bitmap bytes of a DV, read as PROTOCOL.md says (no dvtool code)."""
    kind = descriptor["storageType"]
    if kind == "i":
        return z85_decode(descriptor["pathOrInlineDv"])[: descriptor["sizeInBytes"]]
    path = (
        dv_file(table, descriptor) if kind == "u" else Path(unquote(descriptor["pathOrInlineDv"]))
    )
    data = path.read_bytes()
    offset = descriptor.get("offset") or 0
    (size,) = struct.unpack_from(">I", data, offset)
    return data[offset + 4 : offset + 4 + size]


def test_golden_tables_have_dvs() -> None:
    """CI always has the golden tables: an empty list would silently test nothing."""
    assert len(GOLDEN_DVS) >= 50, f"golden DVs not found under {GOLDEN}"
    assert {d["storageType"] for _, _, d in GOLDEN_DVS} >= {"u", "i"}


@pytest.mark.parametrize(
    ("table", "descriptor"), [d[1:] for d in GOLDEN_CASES], ids=[d[0] for d in GOLDEN_CASES]
)
def test_golden_dv(table: Path, descriptor: dict[str, Any]) -> None:
    raw = _dv_bytes(table, descriptor)
    assert struct.unpack_from("<I", raw)[0] == DV_MAGIC
    body = raw[4:]
    rows = decode64(body)
    assert np.array_equal(rows, np.asarray(BitMap64.deserialize(body).to_array(), np.uint64))
    assert len(rows) == descriptor["cardinality"]
    reproduced = []
    for optimize in (False, True):
        reference = pyroaring_bytes(rows, optimize)
        assert encode64(rows, run_optimize=optimize) == reference
        reproduced.append(reference == body)
    assert any(reproduced), "neither pyroaring nor dvtool reproduce this DV's bytes"


# --- malformed input ----------------------------------------------------------------------


def bitmap32(
    containers: list[tuple[int, int, bool, bytes]],
    *,
    run_cookie: bool | None = None,
    offsets: list[int] | None = None,
) -> bytes:
    """A 32-bit portable bitmap from (key, cardinality, is_run, data) containers, with the
    cookie, offset header and offsets chosen by the spec unless overridden."""
    n = len(containers)
    runs = any(c[2] for c in containers) if run_cookie is None else run_cookie
    if runs:
        head = struct.pack("<I", 12347 | (n - 1) << 16)
        head += bytes(
            sum(1 << j for j in range(8) if i + j < n and containers[i + j][2])
            for i in range(0, n, 8)
        )
    else:
        head = struct.pack("<II", 12346, n)
    head += b"".join(struct.pack("<HH", key, card - 1) for key, card, _, _ in containers)
    if not runs or n >= 4:
        if offsets is None:
            at, offsets = len(head) + 4 * n, []
            for c in containers:
                offsets.append(at)
                at += len(c[3])
        head += b"".join(struct.pack("<I", o) for o in offsets)
    return head + b"".join(c[3] for c in containers)


def bitmap64(*buckets: tuple[int, bytes]) -> bytes:
    """A portable 64-bit bitmap from (high key, 32-bit bitmap) buckets."""
    out = struct.pack("<Q", len(buckets))
    return out + b"".join(struct.pack("<I", key) + body for key, body in buckets)


def array(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}H", *values)


def run(*pairs: tuple[int, int]) -> bytes:
    return struct.pack("<H", len(pairs)) + b"".join(struct.pack("<HH", s, n) for s, n in pairs)


def bits(count: int) -> bytes:
    return np.packbits(np.arange(65536) < count, bitorder="little").tobytes()


VALID = bitmap64((0, bitmap32([(1, 2, False, array(3, 9)), (4, 5, True, run((10, 4)))])))

MALFORMED: dict[str, bytes] = {
    "bad cookie": bitmap64((0, struct.pack("<II", 12345, 0))),
    "too many containers": bitmap64((0, struct.pack("<II", 12346, 65537))),
    "unsorted container keys": bitmap64(
        (0, bitmap32([(2, 1, False, array(1)), (1, 1, False, array(1))]))
    ),
    "duplicate container keys": bitmap64(
        (0, bitmap32([(1, 1, False, array(1)), (1, 1, False, array(2))]))
    ),
    "unsorted bucket keys": bitmap64(
        (5, bitmap32([(0, 1, False, array(1))])), (3, bitmap32([(0, 1, False, array(1))]))
    ),
    "duplicate bucket keys": bitmap64(
        (3, bitmap32([(0, 1, False, array(1))])), (3, bitmap32([(0, 1, False, array(2))]))
    ),
    "trailing garbage": VALID + b"\x00",
    "unsorted array": bitmap64((0, bitmap32([(0, 2, False, array(5, 3))]))),
    "duplicate array value": bitmap64((0, bitmap32([(0, 2, False, array(3, 3))]))),
    "bitmap popcount too low": bitmap64((0, bitmap32([(0, 5000, False, bits(4999))]))),
    "bitmap popcount too high": bitmap64((0, bitmap32([(0, 5000, False, bits(5001))]))),
    "run past 65535": bitmap64((0, bitmap32([(0, 2, True, run((65535, 1)))]))),
    "run cardinality mismatch": bitmap64((0, bitmap32([(0, 10, True, run((0, 4)))]))),
    "run container without runs": bitmap64((0, bitmap32([(0, 1, True, run())]))),
    "overlapping runs": bitmap64((0, bitmap32([(0, 20, True, run((0, 9), (5, 9)))]))),
    "wrong offset": bitmap64(
        (0, bitmap32([(0, 1, False, array(1)), (1, 1, False, array(1))], offsets=[24, 28]))
    ),
    "wrong run offset": bitmap64(
        (0, bitmap32([(i, 10, True, run((i, 9))) for i in range(4)], offsets=[37, 43, 49, 56]))
    ),
}


REASONS = {
    "bad cookie": "bad cookie",
    "too many containers": "65537 containers",
    "unsorted container keys": "container keys not strictly increasing",
    "duplicate container keys": "container keys not strictly increasing",
    "unsorted bucket keys": "bucket keys not strictly increasing",
    "duplicate bucket keys": "bucket keys not strictly increasing",
    "trailing garbage": "1 trailing bytes",
    "unsorted array": "not strictly increasing",
    "duplicate array value": "not strictly increasing",
    "bitmap popcount too low": "popcount",
    "bitmap popcount too high": "popcount",
    "run past 65535": "past 65535",
    "run cardinality mismatch": "cardinality",
    "run container without runs": "without runs",
    "overlapping runs": "overlapping runs",
    "wrong offset": "offset header",
    "wrong run offset": "offset header",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed(name: str) -> None:
    """Each defect is caught and named (pyroaring accepts trailing bytes, wrong offsets and a
    run container whose runs disagree with its cardinality)."""
    with pytest.raises(ValueError, match=REASONS[name]):
        decode64(MALFORMED[name])


def test_malformed_helpers_build_valid_bitmaps() -> None:
    """The builder above is right: its valid bitmaps are what pyroaring reads and writes."""
    rows = [65536 + 3, 65536 + 9, *range(4 * 65536 + 10, 4 * 65536 + 15)]
    assert BitMap64(rows).serialize() == VALID
    assert np.array_equal(decode64(VALID), list(BitMap64.deserialize(VALID)))
    four_runs = bitmap64((0, bitmap32([(i, 10, True, run((i, 9))) for i in range(4)])))
    rows = [i * 65536 + i + j for i in range(4) for j in range(10)]
    assert BitMap64(rows).serialize() == four_runs
    assert np.array_equal(decode64(four_runs), rows)


SMALL: dict[str, Callable[[], bytes]] = {
    "arrays": lambda: encode64([1, 5, 70000, 2**32 + 3]),
    "runs without offsets": lambda: encode64(np.arange(60000, 70000), run_optimize=True),
    "runs with offsets": lambda: encode64(
        np.arange(60000, 60000 + 3 * 65536 + 10), run_optimize=True
    ),
    "bitmap and array": lambda: encode64(np.concatenate([np.arange(5000) * 3, [2**33]])),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_truncated_at_every_byte(name: str) -> None:
    data = SMALL[name]()
    decode64(data)
    for size in range(len(data)):
        with pytest.raises(ValueError):
            decode64(data[:size])
        with pytest.raises(ValueError):
            decode64(memoryview(data)[:size])


def test_max_rows() -> None:
    data = encode64(np.arange(100_000), run_optimize=True)
    assert len(decode64(data, max_rows=100_000)) == 100_000
    with pytest.raises(ValueError, match="more than"):
        decode64(data, max_rows=99_999)
