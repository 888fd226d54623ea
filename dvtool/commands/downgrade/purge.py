"""The purge step of `dvtool downgrade`: rewrite every live file that has a deletion vector
without its deleted rows (the REORG of `dvtool optimize --purge`), so that no DV is left
before the feature is dropped.

A concurrent delete can add DVs while the purge runs, so it is repeated a few times; if DVs
keep coming back the downgrade stops rather than race the writer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from dvtool.commands.downgrade.protocol import ENABLE_PROPERTY, dv_file_count
from dvtool.commands.optimize.command import OptimizeRequest, OptimizeResult, Progress, run_optimize
from dvtool.delta.log.reader import DeltaLog
from dvtool.engines.base import Engine
from dvtool.errors import CommitConflictError

EngineFactory = Callable[[int], Engine]

_PURGE_ATTEMPTS = 3


def plan_purge(log: DeltaLog, engine_for: EngineFactory) -> OptimizeResult:
    """The purge as a dry run: the files it rewrites. Also the check before the first commit:
    a DV that cannot be read or a file outside the table root stops the command here."""
    return run_optimize(log, OptimizeRequest(purge=True, dry_run=True), engine_for)


def purge_rounds(
    log: DeltaLog, engine_for: EngineFactory, progress: Progress | None
) -> Iterator[OptimizeResult]:
    """Purge until no live file has a DV, yielding each purge that committed. A conflicting
    purge is retried; CommitConflictError when DVs remain after the last attempt."""
    for attempt in range(1, _PURGE_ATTEMPTS + 1):
        if not dv_file_count(log.snapshot()):
            return
        try:
            result = run_optimize(log, OptimizeRequest(purge=True), engine_for, progress)
        except CommitConflictError:
            if attempt == _PURGE_ATTEMPTS:
                raise
            continue
        yield result
    remaining = dv_file_count(log.snapshot())
    if remaining:
        raise CommitConflictError(
            f"{remaining} file(s) still have deletion vectors after "
            f"{_PURGE_ATTEMPTS} purges: another writer keeps adding them",
            hint=f"Stop writers that ignore {ENABLE_PROPERTY}=false, then run the downgrade again.",
        )


def purge_detail(result: OptimizeResult) -> str:
    """What a purge rewrites, as a step detail."""
    files = sum(len(b.inputs) for b in result.bins)
    rows = sum(b.rows_dropped for b in result.bins)
    return (
        f"rewrite {files:,} file{'' if files == 1 else 's'} with deletion vectors, "
        f"dropping {rows:,} deleted row{'' if rows == 1 else 's'}"
    )


def merge_purges(first: OptimizeResult | None, second: OptimizeResult) -> OptimizeResult:
    """One result for several purge rounds: versions, bins, metrics and warnings summed."""
    if first is None:
        return second
    metrics = {k: first.metrics.get(k, 0) + v for k, v in second.metrics.items()}
    return replace(
        first,
        versions=first.versions + second.versions,
        bins=first.bins + second.bins,
        metrics=metrics,
        checkpoint_warnings=first.checkpoint_warnings + second.checkpoint_warnings,
    )
