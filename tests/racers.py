"""Processes that race: spawned workers released together by a Barrier.

`Racers(n, prepare)` starts `n` processes with the spawn method. For each `race(jobs)` every
process gets one job, calls `prepare(job)` (imports, opening the log: everything that should
not count as part of the race) to get a `run` callable, waits on a shared Barrier, then calls
`run()` and sends its result back. `prepare` must be a module-level function (spawn pickles
it by reference) and its jobs and results picklable. An exception in a worker is not a
result: `race` fails the test with the worker's traceback.

`Racers(n, prepare, also_here=True)` makes the test process a party of the Barrier too: a
thread of the test calls `release()` (it returns when the processes are released) and then
races them with work of its own, such as a JVM engine's commit.

Heavy libraries belong inside `prepare`, not at the top of the test module, so the spawned
children start quickly.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TIMEOUT_S", "Prepare", "Racers"]

TIMEOUT_S = 90

Prepare = Callable[[Any], Callable[[], Any]]


def _racer(prepare: Prepare, inbox: Any, barrier: Any, out: Any) -> None:
    """A spawned process: for each job, prepare it, wait for the others, run it."""
    while (job := inbox.get()) is not None:
        try:
            run = prepare(job)
        except BaseException:
            out.put((False, f"preparing {job!r}:\n{traceback.format_exc()}"))
            barrier.abort()
            continue
        try:
            barrier.wait()
            out.put((True, run()))
        except BaseException:
            out.put((False, f"running {job!r}:\n{traceback.format_exc()}"))


class Racers:
    """`n` spawned processes that run one job each per `race`, released by a Barrier."""

    def __init__(self, n: int, prepare: Prepare, also_here: bool = False) -> None:
        ctx = mp.get_context("spawn")
        self.barrier = ctx.Barrier(n + 1 if also_here else n)
        self.out = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(n)]
        self.procs = [
            ctx.Process(target=_racer, args=(prepare, inbox, self.barrier, self.out), daemon=True)
            for inbox in self.inboxes
        ]
        for p in self.procs:
            p.start()

    def race(self, jobs: Sequence[Any]) -> list[Any]:
        """Run one job per process at the same moment; their results, in finishing order."""
        assert len(jobs) == len(self.procs)
        if self.barrier.broken:
            self.barrier.reset()
        for inbox, job in zip(self.inboxes, jobs, strict=True):
            inbox.put(job)
        replies = [self.out.get(timeout=TIMEOUT_S) for _ in jobs]
        errors = [str(reply) for ok, reply in replies if not ok]
        assert not errors, "\n".join(errors)
        return [reply for _, reply in replies]

    def release(self) -> None:
        """With `also_here`: wait (in a thread of the test) until the processes of a `race`
        are ready, and release them with this thread."""
        self.barrier.wait(timeout=TIMEOUT_S)

    def __enter__(self) -> Racers:
        return self

    def __exit__(self, *exc: object) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for p in self.procs:
            p.join(timeout=TIMEOUT_S)
            if p.is_alive():
                p.kill()
