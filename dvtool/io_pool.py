"""One bounded thread pool size for IO-bound fan-out (object stores reward parallel requests)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

IO_THREADS = 8


def map_io(fn: Callable[[_T], _R], items: Iterable[_T], threads: int = IO_THREADS) -> list[_R]:
    """`[fn(i) for i in items]`, run on up to `threads` threads, results in input order."""
    work = list(items)
    if len(work) <= 1 or threads <= 1:
        return [fn(i) for i in work]
    with ThreadPoolExecutor(max_workers=min(threads, len(work))) as pool:
        return list(pool.map(fn, work))
