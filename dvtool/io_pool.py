"""One bounded thread pool for IO-bound fan-out (object stores reward parallel requests).

The pool lives as long as the process: starting threads for every fan-out cost a command
on a small table more than the work they did (a delete on a 10-file table fans out four
times; each pool start waited on its threads' scheduling). A fan-out from inside a pool
thread (a task that fans out again) gets a pool of its own, as before: queueing behind its
own caller on the shared pool could deadlock. A forked child starts without the parent's
pool (its threads do not exist there).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

IO_THREADS = 8

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_in_pool = threading.local()


def map_io(fn: Callable[[_T], _R], items: Iterable[_T], threads: int = IO_THREADS) -> list[_R]:
    """`[fn(i) for i in items]`, run on up to `threads` threads, results in input order.

    When a call fails, no further item starts; the calls already running finish before the
    error of the first failed item (in input order) is raised, so a caller cleaning up
    after the error never races a write still in flight."""
    work = list(items)
    if len(work) <= 1 or threads <= 1:
        return [fn(i) for i in work]
    if getattr(_in_pool, "active", False) or threads > IO_THREADS:
        with ThreadPoolExecutor(max_workers=min(threads, len(work))) as pool:
            return list(pool.map(fn, work))
    return _run_window(_shared_pool(), fn, work, min(threads, len(work)))


def _run_window(
    pool: ThreadPoolExecutor, fn: Callable[[_T], _R], work: Sequence[_T], window: int
) -> list[_R]:
    """Run `fn` over `work` on `pool` with at most `window` calls in flight."""
    results: dict[int, _R] = {}
    failed: dict[int, BaseException] = {}
    pending: dict[Future[_R], int] = {}
    started = 0
    try:
        while (started < len(work) and not failed) or pending:
            while started < len(work) and len(pending) < window and not failed:
                pending[pool.submit(fn, work[started])] = started
                started += 1
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                if future.cancelled():
                    continue
                error = future.exception()
                if error is None:
                    results[index] = future.result()
                else:
                    failed[index] = error
                    _cancel_queued(pending)
    except BaseException:
        _cancel_queued(pending)
        wait(pending)  # an interrupt: the running calls finish before it propagates
        raise
    if failed:
        raise failed[min(failed)]
    return [results[i] for i in range(len(work))]


def _cancel_queued(pending: Iterable[Future[Any]]) -> None:
    """Cancel the calls still queued behind other callers' work (running ones go on)."""
    for future in pending:
        future.cancel()


def _shared_pool() -> ThreadPoolExecutor:
    """The process's IO pool, started on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                IO_THREADS, thread_name_prefix="dvtool-io", initializer=_mark_pool_thread
            )
        return _pool


def _mark_pool_thread() -> None:
    _in_pool.active = True


def _forget_pool_in_child() -> None:
    """After fork: the parent's pool threads do not exist in the child."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only; no fork elsewhere
    os.register_at_fork(after_in_child=_forget_pool_in_child)
