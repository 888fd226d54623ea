"""`map_io`: results in input order, one pool for the process, nested fan-outs that cannot
deadlock, errors raised only once the calls in flight have finished, and a forked child
with a pool of its own."""

from __future__ import annotations

import os
import threading
import time

import pytest

from dvtool.io_pool import IO_THREADS, map_io


def test_results_in_input_order_on_the_shared_pool_threads() -> None:
    def slow_first(i: int) -> tuple[int, str]:
        time.sleep(0.02 if i == 0 else 0)
        return i * i, threading.current_thread().name

    first = map_io(slow_first, range(20))
    second = map_io(slow_first, range(20))
    assert [r for r, _ in first] == [i * i for i in range(20)]
    names = {n for _, n in first} | {n for _, n in second}
    assert all(n.startswith("dvtool-io") for n in names)
    assert len(names) <= IO_THREADS  # the same threads serve both calls


def test_at_most_threads_calls_run_at_once() -> None:
    running = peak = 0
    lock = threading.Lock()

    def call(_: int) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.01)
        with lock:
            running -= 1

    map_io(call, range(12), threads=3)
    assert peak == 3


def test_a_nested_fan_out_does_not_wait_on_its_own_pool() -> None:
    def outer(i: int) -> int:
        return sum(map_io(lambda j: i + j, range(IO_THREADS)))

    assert map_io(outer, range(IO_THREADS * 2)) == [
        sum(i + j for j in range(IO_THREADS)) for i in range(IO_THREADS * 2)
    ]


def test_an_error_waits_for_the_running_calls_and_starts_no_more() -> None:
    started: list[int] = []
    finished: list[int] = []

    def call(i: int) -> int:
        started.append(i)
        if i in (1, 2):
            time.sleep(0.05 if i == 1 else 0)
            raise ValueError(f"item {i}")
        time.sleep(0.1)
        finished.append(i)
        return i

    with pytest.raises(ValueError, match="item 1"):  # the first failed item in input order
        map_io(call, range(40), threads=4)
    assert sorted(finished) == sorted(i for i in started if i not in (1, 2))
    assert len(started) < 40


def test_a_forked_child_gets_a_pool_of_its_own() -> None:
    map_io(lambda i: i, range(4))  # the parent's pool exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ok = map_io(lambda i: i + 1, range(16)) == list(range(1, 17))
            os.write(write, b"ok" if ok else b"bad")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 8) == b"ok" and status == 0


def test_calls_queued_behind_another_caller_do_not_start_after_an_error() -> None:
    """With the pool busy (another thread's long calls), a failing call cancels this
    caller's calls still queued: none of them starts once the error is known."""
    release = threading.Event()
    holding: list[int] = []

    def hold(i: int) -> None:
        holding.append(i)
        release.wait(30)

    blockers = threading.Thread(target=map_io, args=(hold, range(IO_THREADS - 1)))
    blockers.start()
    while len(holding) < IO_THREADS - 1:  # the other caller holds all pool threads but one
        time.sleep(0.005)
    started: list[int] = []

    def call(i: int) -> None:
        started.append(i)
        if i == 0:
            raise ValueError("first")
        time.sleep(0.05)

    try:
        with pytest.raises(ValueError, match="first"):
            map_io(call, range(8), threads=4)
    finally:
        release.set()
        blockers.join()
    # 0 fails; the freed thread may take 1 before the cancel; 2 and 3 never start
    assert started[0] == 0 and len(started) <= 2
