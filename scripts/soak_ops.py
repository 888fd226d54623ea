"""The soak's operations (see scripts/soak.py): what a worker process runs. Choosing an
operation and its arguments (`choose_operation`, `operation_args`, `restore_args`), running
`dvtool ... --json` (`run_dvtool`, sending the signal soak_signals.py drew, if any),
classifying its exit (`classify`: ok, conflict, refused, failure; after a signal also
interrupted) and the worker loop (`run_worker`, given a picklable `WorkerPlan`, returning an
`OpRecord` per operation).

The exit codes and messages that make a conflict or a refusal live here, next to `classify`;
the checks (soak_checks.py) read the refusals' messages with the same patterns.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from soak_log import commit_times, list_log
from soak_signals import SignalChooser, SignalPlan, run_process, stop_point
from soak_table import REGIONS, Spec, TableShape, Target, predicate_sql, random_predicate

# Messages of CommitConflictError (dvtool/delta/log/writer.py, dvtool/commands/optimize/command.py,
# and
# dvtool/commands/restore/plan.py for a restore while a vacuum runs).
CONFLICT_EXIT = 4  # CommitConflictError.exit_code (README, exit codes)
RUNNING_VACUUM_MESSAGE = "has not committed VACUUM END"
CONFLICT_MESSAGES = (
    "concurrent commit conflicts with this transaction",
    "could not commit after",
    "did not commit: a concurrent commit changed",
    RUNNING_VACUUM_MESSAGE,
)
# A restore refused because files it re-adds were vacuumed (FileMissingError, "not-found";
# dvtool/commands/restore/plan.py require_files_exist): expected, counted apart.
REFUSED_EXIT = 5
VACUUMED_MESSAGE = "it needs no longer exist"
REFUSED_VERSION = re.compile(r"restore to version (\d+) refused")
# A vacuum --lite refused because commits it must read were cleaned from the log (README
# "vacuum": run a full vacuum first; dvtool/commands/vacuum/lite.py): expected once the log
# cleanup deleted the setup's commits and before a vacuum recorded _last_vacuum_info.
LITE_REFUSED_EXIT = 7  # WriteRefusedError, "refused"
LITE_REFUSED_MESSAGE = "vacuum --lite needs"
LITE_MISSING_VERSION = re.compile(r"version (\d+) is no longer in the log")
# An optimize in batches (--batch-size) whose later batch conflicted names the earlier ones
# (dvtool/commands/optimize/command.py): they are its commits.
EARLIER_BATCHES = re.compile(r"earlier batches were committed as versions \[([\d, ]*)\]")
RECENT_RESTORE_VERSIONS = 15  # half the restores pick among this many newest versions
OPERATION_WEIGHTS = {
    "delete": 40, "inspect": 20, "purge": 12, "compact": 12, "vacuum": 8, "restore": 8,
    "checkpoint": 3, "vacuum_log": 3,
}  # fmt: skip


# -- operations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerPlan:
    """Everything one worker process needs (picklable)."""

    index: int
    seed: int
    deadline: float  # time.time() at which no new operation starts
    target: Target
    shape: TableShape
    dvtool: tuple[str, ...]
    vacuum_retain: str
    predicate_kinds: tuple[str, ...]
    setup_version: int  # restores target this version or a later one
    signal_rate: float = 0.0  # the share of operations sent SIGINT or SIGTERM


@dataclass
class OpRecord:
    """One dvtool process a worker ran, and what came of it."""

    worker: int
    kind: str
    args: list[str]
    started: float
    seconds: float
    exit_code: int
    outcome: str  # ok | conflict | refused | interrupted (after a signal) | failure
    stderr_head: str
    result: dict[str, Any] = field(default_factory=dict)
    spec: Spec | None = None
    signal: str | None = None  # SIGINT | SIGTERM drawn for it
    signal_delay: float | None = None  # when it was to be sent, s after the start
    signal_sent: float | None = None  # when it was sent (None: the process had ended)
    stopped: str | None = None  # an interrupted one: starting | before commit | after commit
    # Versions it says it committed although it did not succeed: those an interrupted
    # operation names, or the earlier batches of an optimize whose later batch conflicted.
    claimed: list[int] = field(default_factory=list)
    stdout_head: str = ""  # kept for a failure after a signal


def choose_operation(rng: random.Random, plan: WorkerPlan) -> tuple[str, list[str], Spec | None]:
    """(kind, dvtool arguments after TABLE, predicate spec of a delete)."""
    while True:
        kind = rng.choices(list(OPERATION_WEIGHTS), weights=list(OPERATION_WEIGHTS.values()))[0]
        if kind == "delete":
            spec = random_predicate(rng, plan.shape, plan.predicate_kinds)
            return kind, ["--where", predicate_sql(spec)], spec
        if kind != "restore":
            return kind, operation_args(rng, plan, kind), None
        restore = restore_args(rng, plan)
        if restore is not None:  # else no version to restore yet: draw again
            return kind, restore, None


def operation_args(rng: random.Random, plan: WorkerPlan, kind: str) -> list[str]:
    """The arguments of an operation other than a delete or a restore."""
    if kind == "inspect":
        return ["--verify"] if rng.random() < 0.4 else []
    if kind == "purge":
        ratio = ["--min-deleted-ratio", str(rng.choice((0.001, 0.005, 0.01)))]
        return ["--purge", *(ratio if rng.random() < 0.3 else []), *batches(rng)]
    if kind == "compact":
        size = int(plan.shape.file_size * rng.choice((1.5, 2.5, 4.0)))
        args = ["--target-size", str(size), *batches(rng)]
        if plan.shape.partitioned and rng.random() < 0.4:
            args += ["--where", f"region = '{rng.choice(REGIONS)}'"]
        return args
    if kind == "checkpoint":
        return []
    if kind == "vacuum_log":
        return ["--log", *(["--dry-run"] if rng.random() < 0.3 else [])]
    lite = ["--lite"] if rng.random() < 0.3 else []
    return ["--retain", plan.vacuum_retain, "--force", *lite]


def batches(rng: random.Random) -> list[str]:
    """Sometimes `--batch-size` 1 or 2: an optimize of several commits, one per batch."""
    return ["--batch-size", str(rng.choice((1, 2)))] if rng.random() < 0.3 else []


def restore_args(rng: random.Random, plan: WorkerPlan) -> list[str] | None:
    """`--version V` or `--timestamp T` (commit V's time), sometimes `--dry-run`; V from the
    setup's version to just before the latest commit listed now (None when there is none).
    A timestamp names a version at least two before the latest, so that it never resolves
    to the current version ("nothing to restore") even when a commit time is ambiguous."""
    times = commit_times(list_log(plan.target))
    latest = max(times, default=-1)
    if latest - 1 < plan.setup_version:
        return None
    low = plan.setup_version
    if rng.random() < 0.5:
        low = max(low, latest - RECENT_RESTORE_VERSIONS)
    version = rng.randint(low, latest - 1)
    dry_run = ["--dry-run"] if rng.random() < 0.2 else []
    if rng.random() < 0.3 and version <= latest - 2 and version in times:
        return ["--timestamp", iso_ms(times[version]), *dry_run]
    return ["--version", str(version), *dry_run]


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC, exactly (no float rounding)."""
    moment = dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc)
    return moment.replace(microsecond=ms % 1000 * 1000).isoformat()


COMMANDS = {
    "delete": "delete",
    "inspect": "inspect",
    "purge": "optimize",
    "compact": "optimize",
    "vacuum": "vacuum",
    "restore": "restore",
    "checkpoint": "checkpoint",
    "vacuum_log": "vacuum",
}


def run_dvtool(
    dvtool: Sequence[str],
    target: Target,
    command: str,
    args: Sequence[str],
    plan: SignalPlan | None = None,
) -> tuple[int, str, str]:
    """Run `dvtool COMMAND TABLE ARGS --json`: (exit code, stdout, stderr)."""
    ran = run_process(dvtool_argv(dvtool, target, command, args), plan)
    return ran.code, ran.stdout, ran.stderr


def dvtool_argv(
    dvtool: Sequence[str], target: Target, command: str, args: Sequence[str]
) -> list[str]:
    return [*dvtool, command, target.uri, *target.cli_options, *args, "--json"]


def classify(kind: str, exit_code: int, stdout: str, stderr: str) -> tuple[str, dict[str, Any]]:
    """(outcome, parsed JSON result): conflicts are exit 4 with a CommitConflictError message,
    refusals a restore's exit 5 for files that were vacuumed and a vacuum --lite's exit 7 for
    commits that were cleaned from the log."""
    parsed: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        loaded = json.loads(stdout) if stdout.strip() else {}
        parsed = loaded if isinstance(loaded, dict) else {}
    if exit_code == 0:
        return ("ok" if parsed else "failure"), parsed
    if exit_code == CONFLICT_EXIT and any(m in stderr for m in CONFLICT_MESSAGES):
        return "conflict", parsed
    if kind == "restore" and exit_code == REFUSED_EXIT and VACUUMED_MESSAGE in stderr:
        return "refused", parsed
    if kind == "vacuum" and exit_code == LITE_REFUSED_EXIT and LITE_REFUSED_MESSAGE in stderr:
        return "refused", parsed
    return "failure", parsed


def batches_committed(record: OpRecord) -> list[int]:
    """The earlier batches an optimize names in its conflict message (none: not one)."""
    error = record.result.get("error") or {}
    m = EARLIER_BATCHES.search(str(error.get("message", "")))
    return [int(v) for v in m[1].split(",") if v.strip()] if m else []


def head(text: str, lines: int = 3) -> str:
    return "\n".join(text.strip().splitlines()[:lines])


def run_worker(plan: WorkerPlan) -> list[OpRecord]:
    """A worker process: random operations until the deadline, some of them sent a signal
    (drawn from a random stream of their own, so the operations drawn do not depend on
    `--signals`)."""
    rng = random.Random(plan.seed * 1000 + plan.index)
    signals = SignalChooser(plan.signal_rate, random.Random(plan.seed * 1000 + plan.index + 500))
    records: list[OpRecord] = []
    while time.time() < plan.deadline:
        kind, args, spec = choose_operation(rng, plan)
        stop = signals.choose(kind)
        started = time.time()
        ran = run_process(dvtool_argv(plan.dvtool, plan.target, COMMANDS[kind], args), stop)
        seconds = time.time() - started
        signals.observe(kind, seconds, stop is not None)
        outcome, result = classify(kind, ran.code, ran.stdout, ran.stderr)
        record = OpRecord(
            plan.index, kind, args, started, seconds, ran.code, outcome, head(ran.stderr),
            result, spec,
        )  # fmt: skip
        if stop is not None:
            record.signal, record.signal_delay = stop.name, stop.delay
            record.signal_sent = ran.signal_sent
        if outcome == "failure" and ran.signal_sent is not None and stop is not None:
            point = stop_point(stop.signum, ran.code, ran.stdout, ran.stderr, result)
            if point is not None:
                record.outcome = "interrupted"
                record.stopped, record.claimed = point
        if outcome == "conflict":
            record.claimed = batches_committed(record)
        if record.outcome == "failure" and ran.signal_sent is not None:
            record.stderr_head = head(ran.stderr, 40)  # the whole story of an odd stop
            record.stdout_head = head(ran.stdout, 12)
        records.append(record)
    return records
