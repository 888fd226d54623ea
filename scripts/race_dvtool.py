"""dvtool's side of the race: one spawned process per command kind, looping until a deadline.

`run_worker(job)` (a module-level function, so a spawn pool can pickle it by reference) runs
one kind of command through dvtool's Python API on the race table, over and over with a
random pause (and idle in the last `quiet_s` of every `cycle_s`), until `job.seconds` have
passed:

- `delete`: `dvtool.delete(table, where)` with a random predicate (race_workload);
- `purge`: `dvtool.optimize(table, purge=True)`;
- `compact`: `dvtool.optimize(table)` (the table's files are all small: every run bins them);
- `vacuum`: `dvtool.vacuum(table, retain=job.retain, force=True)`.

It counts the runs, the versions committed, the re-plans after a conflict (a delete's
`attempts - 1`: dvtool re-planned on a fresh snapshot) and the conflicts dvtool gave up on
(`CommitConflictError`: nothing committed). Any other error is kept, with its type and
message, for the report: the race fails on it.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WorkerJob:
    """One worker: its command `kind`, the table, how long, its pause range and seed."""

    kind: str
    path: str
    seconds: float
    seed: int
    pause_s: tuple[float, float] = (0.2, 1.0)
    retain: str = "60s"
    # Every `cycle_s` seconds the last `quiet_s` are idle (all workers alike): windows in
    # which Delta Spark's slower statements can land between dvtool's commits.
    cycle_s: float = 0.0
    quiet_s: float = 0.0


@dataclass
class WorkerReport:
    """What a worker did (see the module docstring)."""

    kind: str
    runs: int = 0
    versions: list[int] = field(default_factory=list)
    replans: int = 0
    conflicts: int = 0
    nothing: int = 0  # runs that had nothing to commit
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _once(job: WorkerJob, rng: random.Random, report: WorkerReport) -> None:
    """Run the job's command once and record its outcome."""
    from race_workload import draw_dvtool_delete, where_sql

    import dvtool

    versions: list[int] = []
    if job.kind == "delete":
        result = dvtool.delete(job.path, where_sql(draw_dvtool_delete(rng)))
        report.replans += result.attempts - 1
        versions = [] if result.version is None else [result.version]
    elif job.kind in ("purge", "compact"):
        versions = list(dvtool.optimize(job.path, purge=job.kind == "purge").versions)
    elif job.kind == "vacuum":
        vacuumed = dvtool.vacuum(job.path, retain=job.retain, force=True)
        versions = [v for v in (vacuumed.start_version, vacuumed.end_version) if v is not None]
    else:
        raise ValueError(f"unknown worker kind {job.kind!r}")
    report.versions.extend(versions)
    report.nothing += not versions


def run_worker(job: WorkerJob) -> WorkerReport:
    """Loop the job's command until its deadline; every outcome counted."""
    from dvtool.errors import CommitConflictError, DvtoolError

    rng = random.Random(job.seed)
    report = WorkerReport(job.kind)
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < job.seconds:
        if job.cycle_s and elapsed % job.cycle_s >= job.cycle_s - job.quiet_s:
            time.sleep(min(job.cycle_s - elapsed % job.cycle_s, job.seconds - elapsed))
            continue
        report.runs += 1
        try:
            _once(job, rng, report)
        except CommitConflictError:
            report.conflicts += 1
        except DvtoolError as e:
            report.errors.append(f"{type(e).__name__}: {e}")
        except Exception as e:  # a crash is a finding, reported with the rest
            report.errors.append(f"crash {type(e).__name__}: {e}")
        time.sleep(rng.uniform(*job.pause_s))
    report.seconds = time.monotonic() - start
    return report


def conflict_kinds(errors: list[str]) -> Counter[str]:
    """The error types of a worker's errors, for the summary."""
    return Counter(e.split(":", 1)[0] for e in errors)


def as_dict(report: WorkerReport) -> dict[str, Any]:
    """The report as JSON."""
    return {
        "kind": report.kind,
        "runs": report.runs,
        "commits": len(report.versions),
        "replans": report.replans,
        "conflicts": report.conflicts,
        "nothing": report.nothing,
        "errors": report.errors,
    }
