"""Benchmark dvtool's pure-numpy Roaring codec against pyroaring (CRoaring).

Run with `.venv/bin/python scripts/bench_roaring.py` (about 30 s). For each row set it times
encoding (numpy rows to portable 64-bit bytes, plain and run-optimized) and decoding
(bytes to rows), best of a few repeats, and checks both codecs produce the same bytes and
rows. pyroaring's decode is timed twice: `deserialize` alone (it only copies containers
into a compressed set) and followed by `to_array()` (the same job as `decode64`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from pyroaring import BitMap64

from dvtool.deletion_vectors.roaring import decode64, encode64


def best_of(fn: Callable[[], Any], repeats: int = 5) -> float:
    """The fastest of `repeats` runs of `fn`, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def spread(rng: np.random.Generator, count: int, span: int) -> np.ndarray:
    """`count` sorted distinct rows spread randomly over about `span`."""
    return np.cumsum(rng.geometric(count / span, count)).astype(np.uint64)


def clustered(rng: np.random.Generator, count: int) -> np.ndarray:
    """About `count` rows in runs of 1-2000 separated by gaps of 1-500 (run containers)."""
    runs = count // 1000
    lengths = rng.integers(1, 2000, runs)
    begins = np.cumsum(lengths + rng.integers(1, 500, runs)) - lengths
    return np.repeat(begins - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())


def cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(42)
    return {
        "sparse 1M (15k arrays)": spread(rng, 1_000_000, 1_000_000_000),
        "dense 1M (bitmaps)": spread(rng, 1_000_000, 1_300_000),
        "runs 1M": clustered(rng, 1_000_000),
        "sparse 10M (100k arrays)": spread(rng, 10_000_000, 100_000 * 65536),
        "dense 10M (bitmaps)": spread(rng, 10_000_000, 13_000_000),
        "runs 10M": clustered(rng, 10_000_000),
    }


def measure(name: str, rows: np.ndarray) -> list[tuple[str, str, float, float]]:
    """(case, op, pyroaring seconds, numpy seconds) of every operation on one row set."""
    out = []
    for optimize in (False, True):
        reference = BitMap64(rows, optimize=optimize).serialize()
        assert encode64(rows, run_optimize=optimize) == reference, name
        theirs = best_of(lambda o=optimize: BitMap64(rows, optimize=o).serialize())
        ours = best_of(lambda o=optimize: encode64(rows, run_optimize=o))
        out.append((name, "encode run-opt" if optimize else "encode", theirs, ours))
    data = BitMap64(rows).serialize()
    assert np.array_equal(decode64(data), rows), name
    ours = best_of(lambda: decode64(data))
    out.append((name, "decode vs deserialize", best_of(lambda: BitMap64.deserialize(data)), ours))
    theirs = best_of(lambda: BitMap64.deserialize(data).to_array())
    out.append((name, "decode vs deser+to_array", theirs, ours))
    return out


def main() -> None:
    print(f"{'case':<26} {'op':<26} {'pyroaring ms':>12} {'numpy ms':>10} {'ratio':>8}")
    for name, rows in cases().items():
        for case, op, theirs, ours in measure(name, rows.astype(np.uint64)):
            ratio = ours / theirs if theirs else float("inf")
            print(f"{case:<26} {op:<26} {theirs * 1e3:>12.2f} {ours * 1e3:>10.2f} {ratio:>8.2f}")


if __name__ == "__main__":
    main()
