"""The soak's operations (see scripts/soak.py): what a worker process runs. Choosing an
operation and its arguments (`choose_operation`, `operation_args`, `restore_args`), running
`dvtool ... --json` (`run_dvtool`), classifying its exit (`classify`: ok, conflict, refused,
failure) and the worker loop (`run_worker`, given a picklable `WorkerPlan`, returning an
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
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from soak_log import commit_times, list_log
from soak_table import REGIONS, Spec, TableShape, Target, predicate_sql, random_predicate

OPERATION_TIMEOUT_S = 600.0
# Messages of CommitConflictError (dvtool/log/writer.py, dvtool/commands/optimize.py, and
# dvtool/commands/restore_plan.py for a restore while a vacuum runs).
CONFLICT_EXIT = 4  # CommitConflictError.exit_code (README, exit codes)
RUNNING_VACUUM_MESSAGE = "has not committed VACUUM END"
CONFLICT_MESSAGES = (
    "concurrent commit conflicts with this transaction",
    "could not commit after",
    "did not commit: a concurrent commit changed",
    RUNNING_VACUUM_MESSAGE,
)
# A restore refused because files it re-adds were vacuumed (FileMissingError, "not-found";
# dvtool/commands/restore_plan.py require_files_exist): expected, counted apart.
REFUSED_EXIT = 5
VACUUMED_MESSAGE = "it needs no longer exist"
REFUSED_VERSION = re.compile(r"restore to version (\d+) refused")
# A vacuum --lite refused because commits it must read were cleaned from the log (README
# "vacuum": run a full vacuum first; dvtool/commands/vacuum_lite.py): expected once the log
# cleanup deleted the setup's commits and before a vacuum recorded _last_vacuum_info.
LITE_REFUSED_EXIT = 7  # WriteRefusedError, "refused"
LITE_REFUSED_MESSAGE = "vacuum --lite needs"
LITE_MISSING_VERSION = re.compile(r"version (\d+) is no longer in the log")
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


@dataclass
class OpRecord:
    """One dvtool process a worker ran, and what came of it."""

    worker: int
    kind: str
    args: list[str]
    started: float
    seconds: float
    exit_code: int
    outcome: str  # ok | conflict | refused (a restore: files vacuumed) | failure
    stderr_head: str
    result: dict[str, Any] = field(default_factory=dict)
    spec: Spec | None = None


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
        return ["--purge", *(ratio if rng.random() < 0.3 else [])]
    if kind == "compact":
        size = int(plan.shape.file_size * rng.choice((1.5, 2.5, 4.0)))
        args = ["--target-size", str(size)]
        if plan.shape.partitioned and rng.random() < 0.4:
            args += ["--where", f"region = '{rng.choice(REGIONS)}'"]
        return args
    if kind == "checkpoint":
        return []
    if kind == "vacuum_log":
        return ["--log", *(["--dry-run"] if rng.random() < 0.3 else [])]
    lite = ["--lite"] if rng.random() < 0.3 else []
    return ["--retain", plan.vacuum_retain, "--force", *lite]


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
    dvtool: Sequence[str], target: Target, command: str, args: Sequence[str]
) -> tuple[int, str, str]:
    """Run `dvtool COMMAND TABLE ARGS --json`: (exit code, stdout, stderr)."""
    argv = [*dvtool, command, target.uri, *target.cli_options, *args, "--json"]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=OPERATION_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return -1, "", f"timed out after {OPERATION_TIMEOUT_S:.0f} s\n{err}"
    return proc.returncode, proc.stdout, proc.stderr


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


def head(text: str, lines: int = 3) -> str:
    return "\n".join(text.strip().splitlines()[:lines])


def run_worker(plan: WorkerPlan) -> list[OpRecord]:
    """A worker process: random operations until the deadline."""
    rng = random.Random(plan.seed * 1000 + plan.index)
    records: list[OpRecord] = []
    while time.time() < plan.deadline:
        kind, args, spec = choose_operation(rng, plan)
        started = time.time()
        code, out, err = run_dvtool(plan.dvtool, plan.target, COMMANDS[kind], args)
        outcome, result = classify(kind, code, out, err)
        seconds = time.time() - started
        records.append(
            OpRecord(
                plan.index, kind, args, started, seconds, code, outcome, head(err), result, spec
            )
        )
    return records
