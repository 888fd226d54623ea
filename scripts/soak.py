"""Soak test: a randomized concurrent workload of real `dvtool` processes against one table.

Builds a table (8-16 data files of a few thousand rows written by deltalake's
`write_deltalake`, partitioned by `region` in some runs, then `dvtool enable`d), writes a
checkpoint of it (`dvtool checkpoint`) and, on a local table, ages the setup's log (see "Log
cleanup" below). Then `--workers` worker processes run until the deadline. Each worker loops,
picking at random and running as a CLI subprocess with `--json`:

- `delete --where P`, P a random predicate over the data and partition columns, built from a
  spec that also gives its meaning in plain Python (`predicate_sql` / `predicate_matches`);
- `optimize --purge` (sometimes `--min-deleted-ratio`), `optimize` compaction (a random
  `--target-size`, sometimes a partition `--where`);
- `vacuum --retain R --force` (sometimes `--lite`), see "Vacuum retention" below;
- `restore --version V` (sometimes `--timestamp T`, T the modification time of commit V's
  file, Delta's commit time on a table without in-commit timestamps; sometimes `--dry-run`),
  V a random version from the end of the setup to just before the latest one the worker
  lists in `_delta_log`, half the time among the 15 newest;
- `checkpoint`, and `vacuum --log` (sometimes `--dry-run`), the log cleanup;
- `inspect --json` (sometimes `--verify`), a read.

Each operation's exit code is classified: 0 is success; 4 with a commit-conflict message
(`CommitConflictError`, see dvtool/errors.py, dvtool/log/writer.py and, for a restore while a
vacuum runs, dvtool/commands/restore_plan.py) is a conflict; 5 from a restore whose message
says files it needs no longer exist (vacuumed) is a refusal, expected and counted apart, as
is 7 from a `vacuum --lite` that needs commits the log cleanup deleted (before any vacuum
recorded `_last_vacuum_info`, it reads the log from version 0; README: run a full vacuum
first); anything else is an unexpected failure. Afterwards, all checked independently of
dvtool's code:

- the log: versions contiguous from the oldest commit left to the last, no `txnId` twice,
  every commit after the setup reported by exactly one successful operation of the matching
  kind (a RESTORE by a restore; `checkpoint`, `vacuum --log` and dry runs commit nothing),
  and vice versa;
- the live rows per version (a pyroaring bitmap of ids per version that changed them),
  replayed in commit order over the original rows (ids are unique and rows never change, so
  a predicate evaluated on the original rows is exact). A delete's `numDeletedRows` must
  equal the rows its predicate matches among those live just before its version
  (Serializable isolation; after a restore that is the restored set), and a delete that
  committed nothing must have had no live match at its read version. A RESTORE commit
  (operationParameters `version`, or for `--timestamp` the `restored_version` its operation
  reported) makes the live rows those of its target version;
- restores: `--version` V restored V (result and commit); `--timestamp` T restored the newest
  version up to its read version whose commit time (file modification times made strictly
  increasing, as Delta does; within 1 ms) is not after T; a refusal for vacuumed files needs
  a vacuum that started before it ended and could have deleted files of the target version;
- every `inspect` read: `logical_rows` equals the live rows at the version it read, and
  `--verify` found no problem;
- the final table, read by polars `read_delta`, deltalake's query engine and (local tables)
  the raw reader of tests/oracles.py, over the JSON log while commit 0 exists and from the
  newest checkpoint (read with pyarrow) plus the JSON commits after it: exactly the expected
  rows, column by column; `dvtool inspect --verify` passes; then once more after a final
  `vacuum --retain 0h --force` run with no other writer;
- time travel: before that final vacuum, deltalake `DeltaTable(uri, version=v)` reads
  exactly the live ids of v, for the 3 newest versions, 5 random ones whose files no vacuum
  can have deleted and 4 random ones, all from the oldest version the log can still rebuild
  (at or after the setup). A read that fails for a missing file counts as "vacuumed", not a
  mismatch, unless no concurrent vacuum can have deleted files of v (every removal after v
  happened later than the last vacuum's start minus the retention).

Log cleanup: commits and checkpoints expire after `delta.logRetentionDuration` (30 days), so
nothing would in a short run. On local tables the soak therefore sets the modification time
(os.utime) of the setup's `_delta_log` entries (commits, the checkpoint, checksums) to
40 days ago, one second apart in version order, before the workers start; their commits stay
recent. The cleanup (`vacuum --log`, `checkpoint`, and the one after every checkpoint dvtool
writes) may then delete exactly the setup's entries before its checkpoint: the log check
requires every deleted entry (from listings before and after the workers, and in what each
cleanup reported) to be of a version before the setup checkpoint, that checkpoint and every
later commit to be still there, each reported cutoff checkpoint to be no newer, and a
`vacuum --lite` refused for a missing commit to name one that was cleaned up so. S3 has no
way to set a modification time, so there the ageing is skipped (the summary says so) and
nothing may be deleted at all.

Vacuum retention: Delta only guarantees that VACUUM is safe when the retention exceeds the
longest running transaction: a writer writes its data or DV files before it commits, and a
reader or writer may still open files of the version it read after a concurrent commit
removed them. A vacuum with zero retention while other writers run can therefore delete the
uncommitted files of an in-flight delete or optimize (which then commits dangling
references) or files an in-flight operation still reads. So concurrent vacuums use
`--vacuum-retain` (default 60s), far longer than any single operation here; the summary shows
the longest operation, and a run in which an operation outlived the retention is flagged.

    .venv/bin/python scripts/soak.py --minutes 1
    .venv/bin/python scripts/soak.py --minutes 10 --workers 4 --seed 7
    .venv/bin/python scripts/soak.py --minutes 2 --backend s3      # moto on 127.0.0.1

Exit status: 0 when there was no mismatch and no unexpected failure, 1 otherwise. With
`--keep` the work directory stays, with `records.json` (every operation: arguments, exit
code, stderr, JSON result); `--exclude-predicate KIND` keeps a predicate kind that a known
bug gets wrong from masking other problems.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from pyroaring import BitMap, FrozenBitMap

ROOT = Path(__file__).resolve().parent.parent
BUCKET = "dvtool-soak"
REGIONS = ("eu", "us", "ap", "sa")
FIRST_DAY = dt.date(2024, 1, 1)
DAYS = 365
OPERATION_TIMEOUT_S = 600.0
COMMIT_NAME = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_NAME = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
# Any versioned _delta_log entry: commit, checkpoint, checksum, hidden Hadoop .X.crc file.
VERSIONED_NAME = re.compile(r"^\.?(\d{20})\.")
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
MISSING_FILE_ERROR = re.compile(r"not found|no such file", re.IGNORECASE)  # deltalake's words
LOG_AGE_DAYS = 40  # the setup's log entries are aged this far (> delta.logRetentionDuration)
DAY_MS = 86_400_000
RECENT_RESTORE_VERSIONS = 15  # half the restores pick among this many newest versions
# Time travel reads: the newest versions, random ones no vacuum can have touched, any random.
TIME_TRAVEL_NEWEST, TIME_TRAVEL_SAFE, TIME_TRAVEL_RANDOM = 3, 5, 4
PREDICATE_WEIGHTS = {
    "id_between": 6, "id_in": 6, "id_mod_grp": 5, "amount_range": 5, "name_prefix": 4,
    "region_grp": 4, "day_eq": 4, "score_null": 3, "score_not_lt": 4, "concat": 3,
    "sum_mod": 3, "tails": 1, "file_range": 1,
}  # fmt: skip
OPERATION_WEIGHTS = {
    "delete": 40, "inspect": 20, "purge": 12, "compact": 12, "vacuum": 8, "restore": 8,
    "checkpoint": 3, "vacuum_log": 3,
}  # fmt: skip
Row = dict[str, Any]
Spec = dict[str, Any]


# -- settings and the table's location ------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where the table lives and how each reader reaches it."""

    uri: str
    cli_options: tuple[str, ...] = ()  # dvtool --storage-option arguments
    reader_options: tuple[tuple[str, str], ...] = ()  # deltalake / polars storage_options
    endpoint: str | None = None  # S3 endpoint (moto)

    @property
    def local_path(self) -> Path | None:
        return None if self.endpoint else Path(self.uri)

    def filesystem(self) -> Any:
        """An fsspec filesystem for the raw log checks (not dvtool's storage layer)."""
        import fsspec

        if self.endpoint is None:
            return fsspec.filesystem("file")
        return fsspec.filesystem(
            "s3", key="test", secret="test", client_kwargs={"endpoint_url": self.endpoint}
        )

    def fs_path(self, relative: str) -> str:
        root = self.uri.removeprefix("s3://")
        return f"{root}/{relative}" if relative else root


@dataclass(frozen=True)
class TableShape:
    """What workers need to draw predicates and options: no rows, only the shape."""

    num_rows: int
    rows_per_file: int
    rows_per_append: int  # one write_deltalake call: one file, or one per region
    num_files: int
    partitioned: bool
    file_size: int  # average initial data file size in bytes


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


# -- building the table ---------------------------------------------------------------------


def make_rows(rng: random.Random, num_rows: int) -> list[Row]:
    """The original rows: unique sequential `id`, random other columns, some NULL scores."""
    rows = []
    for i in range(num_rows):
        rows.append(
            {
                "id": i,
                "grp": rng.randrange(100),
                "amount": round(rng.uniform(0, 1000), 2),
                "name": f"n{i:07d}",
                "day": FIRST_DAY + dt.timedelta(days=rng.randrange(DAYS)),
                "score": None if rng.random() < 0.1 else rng.randrange(1000),
                "region": rng.choice(REGIONS),
            }
        )
    return rows


def arrow_rows(rows: Sequence[Row]) -> Any:
    import pyarrow as pa

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("grp", pa.int32()),
            ("amount", pa.float64()),
            ("name", pa.string()),
            ("day", pa.date32()),
            ("score", pa.int64()),
            ("region", pa.string()),
        ]
    )
    return pa.Table.from_pylist(list(rows), schema=schema)


def write_table(path: Path, rows: Sequence[Row], appends: int, partitioned: bool) -> None:
    """One `write_deltalake` append per chunk of ids (one file, or one per region)."""
    from deltalake import write_deltalake

    size = len(rows) // appends
    for k in range(appends):
        chunk = arrow_rows(rows[k * size : (k + 1) * size])
        write_deltalake(
            str(path), chunk, mode="append", partition_by=["region"] if partitioned else None
        )


def data_file_sizes(path: Path) -> list[int]:
    return [p.stat().st_size for p in path.rglob("*.parquet") if "_delta_log" not in p.parts]


def build_table(rng: random.Random, local: Path) -> tuple[list[Row], TableShape]:
    """Write the table at `local` (a new directory); its rows and shape."""
    partitioned = rng.random() < 0.5
    if partitioned:
        appends = rng.choice((2, 3, 4))
        num_files = appends * len(REGIONS)
    else:
        appends = num_files = rng.randint(8, 16)
    per_append = rng.randint(2000, 5000) * (len(REGIONS) if partitioned else 1)
    rows = make_rows(rng, appends * per_append)
    write_table(local, rows, appends, partitioned)
    sizes = data_file_sizes(local)
    if len(sizes) != num_files:
        raise SystemExit(f"expected {num_files} data files in {local}, found {len(sizes)}")
    shape = TableShape(
        num_rows=len(rows),
        rows_per_file=len(rows) // num_files,
        rows_per_append=per_append,
        num_files=num_files,
        partitioned=partitioned,
        file_size=sum(sizes) // num_files,
    )
    return rows, shape


# -- predicates: SQL for dvtool, plain Python for the expected rows ---------------------------


def random_predicate(rng: random.Random, shape: TableShape, kinds: Sequence[str]) -> Spec:
    """A predicate spec of one of `kinds`, deleting well under 1% of the rows (whole files
    rarely)."""
    n = shape.num_rows
    kind = rng.choices(kinds, weights=[PREDICATE_WEIGHTS[k] for k in kinds])[0]
    a = rng.randrange(n)
    if kind == "id_between":
        return {"kind": kind, "lo": a, "hi": a + rng.randint(0, max(1, n // 300))}
    if kind == "id_in":
        return {"kind": kind, "ids": sorted(rng.sample(range(n), rng.randint(1, 20)))}
    if kind == "id_mod_grp":
        k = rng.randint(50, 200)
        return {"kind": kind, "k": k, "r": rng.randrange(k), "g": rng.randint(10, 100)}
    if kind == "amount_range":
        lo = rng.randint(0, 9990) / 10
        return {"kind": kind, "lo": lo, "hi": round(lo + rng.randint(5, 50) / 10, 1)}
    if kind == "name_prefix":
        return {"kind": kind, "prefix": f"n{a // 100:05d}"}
    if kind in ("region_grp", "concat"):
        return {"kind": kind, "region": rng.choice(REGIONS), "g": rng.randrange(100)}
    if kind == "day_eq":
        return {
            "kind": kind,
            "day": (FIRST_DAY + dt.timedelta(days=rng.randrange(DAYS))).isoformat(),
        }
    if kind == "score_null":
        return {"kind": kind, "lo": a, "hi": a + n // 50}
    if kind == "score_not_lt":
        return {"kind": kind, "s": rng.randint(900, 999), "g": rng.randrange(100)}
    if kind == "sum_mod":
        m = rng.randint(500, 2000)
        return {"kind": kind, "m": m, "r": rng.randrange(m)}
    if kind == "tails":
        return {"kind": kind, "lo": rng.randint(1, n // 400), "hi": n - rng.randint(1, n // 400)}
    # One data file as written: all its rows match, so dvtool removes it without reading it.
    start = rng.randrange(shape.num_rows // shape.rows_per_append) * shape.rows_per_append
    region = rng.choice(REGIONS) if shape.partitioned else None
    return {"kind": kind, "lo": start, "hi": start + shape.rows_per_append, "region": region}


def predicate_sql(spec: Spec) -> str:
    """The `--where` text of a spec (Spark SQL)."""
    kind = spec["kind"]
    sql: dict[str, Callable[[Spec], str]] = {
        "id_between": lambda s: f"id BETWEEN {s['lo']} AND {s['hi']}",
        "id_in": lambda s: f"id IN ({', '.join(map(str, s['ids']))})",
        "id_mod_grp": lambda s: f"id % {s['k']} = {s['r']} AND grp < {s['g']}",
        "amount_range": lambda s: f"amount >= {s['lo']} AND amount < {s['hi']}",
        "name_prefix": lambda s: f"name LIKE '{s['prefix']}%'",
        "region_grp": lambda s: f"region = '{s['region']}' AND grp = {s['g']}",
        "day_eq": lambda s: f"day = DATE '{s['day']}'",
        "score_null": lambda s: f"score IS NULL AND id BETWEEN {s['lo']} AND {s['hi']}",
        "score_not_lt": lambda s: f"NOT (score < {s['s']}) AND grp = {s['g']}",
        "concat": lambda s: f"concat(region, '-', CAST(grp AS STRING)) = '{s['region']}-{s['g']}'",
        "sum_mod": lambda s: f"(id + grp) % {s['m']} = {s['r']}",
        "tails": lambda s: f"id < {s['lo']} OR id >= {s['hi']}",
        "file_range": lambda s: (
            f"id >= {s['lo']} AND id < {s['hi']}"
            + (f" AND region = '{s['region']}'" if s["region"] else "")
        ),
    }
    return sql[kind](spec)


def predicate_matches(spec: Spec, row: Row) -> bool:
    """Whether Spark SQL's predicate is TRUE for `row` (NULL is not TRUE: not deleted)."""
    kind, s = spec["kind"], spec
    i, score = row["id"], row["score"]
    checks: dict[str, Callable[[], bool]] = {
        "id_between": lambda: s["lo"] <= i <= s["hi"],
        "id_in": lambda: i in s["ids"],
        "id_mod_grp": lambda: i % s["k"] == s["r"] and row["grp"] < s["g"],
        "amount_range": lambda: s["lo"] <= row["amount"] < s["hi"],
        "name_prefix": lambda: bool(row["name"].startswith(s["prefix"])),
        "region_grp": lambda: row["region"] == s["region"] and row["grp"] == s["g"],
        "day_eq": lambda: row["day"].isoformat() == s["day"],
        "score_null": lambda: score is None and s["lo"] <= i <= s["hi"],
        "score_not_lt": lambda: score is not None and score >= s["s"] and row["grp"] == s["g"],
        "concat": lambda: f"{row['region']}-{row['grp']}" == f"{s['region']}-{s['g']}",
        "sum_mod": lambda: (i + row["grp"]) % s["m"] == s["r"],
        "tails": lambda: i < s["lo"] or i >= s["hi"],
        "file_range": lambda: s["lo"] <= i < s["hi"] and s["region"] in (None, row["region"]),
    }
    return checks[kind]()


# -- operations -----------------------------------------------------------------------------


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


# -- the log, read without dvtool ---------------------------------------------------------


def list_log(target: Target) -> dict[str, tuple[int, int]]:
    """The files directly in `_delta_log`: name -> (size, modification time in ms). Local
    times are truncated to ms from nanoseconds (as Hadoop's FileStatus has them), S3's are
    the object's LastModified. Never a cached listing."""
    out: dict[str, tuple[int, int]] = {}
    if target.local_path is not None:
        with os.scandir(target.local_path / "_delta_log") as entries:
            for entry in entries:
                if entry.is_file():
                    st = entry.stat()
                    out[entry.name] = (st.st_size, st.st_mtime_ns // 1_000_000)
        return out
    fs = target.filesystem()
    for info in fs.ls(target.fs_path("_delta_log"), detail=True, refresh=True):
        if info.get("type") != "file":
            continue
        modified = info.get("LastModified")
        ms = int(modified.timestamp() * 1000) if isinstance(modified, dt.datetime) else 0
        out[str(info["name"]).rsplit("/", 1)[-1]] = (int(info.get("size") or 0), ms)
    return out


def commit_times(listing: Mapping[str, tuple[int, int]]) -> dict[int, int]:
    """version -> the modification time of its commit file (ms), from a `list_log` listing."""
    return {
        int(m[1]): entry[1] for name, entry in listing.items() if (m := COMMIT_NAME.match(name))
    }


@dataclass
class LogState:
    """The log as the workers left it, read without dvtool."""

    listing: dict[str, tuple[int, int]]
    infos: dict[int, dict[str, Any]]  # version -> commitInfo (empty when a commit has none)
    removed_at: dict[int, int]  # version -> the oldest deletionTimestamp of its removes

    @property
    def checkpoints(self) -> list[int]:
        """The versions of the classic single-file checkpoints, ascending."""
        return sorted(int(m[1]) for n in self.listing if (m := CHECKPOINT_NAME.match(n)))

    def rebuildable_from(self) -> int | None:
        """The oldest version a reader can rebuild: 0 while commit 0 is there, else the
        oldest checkpoint with every commit after it (None when there is none)."""
        versions = sorted(self.infos)
        if not versions:
            return None
        if versions[0] == 0:
            return 0
        return next((c for c in self.checkpoints if c >= versions[0] - 1), None)

    def operation_times(self, operation: str) -> list[int]:
        """The commitInfo timestamps of the commits of `operation`."""
        return [
            int(i["timestamp"])
            for i in self.infos.values()
            if i.get("operation") == operation and isinstance(i.get("timestamp"), int)
        ]


def read_log(target: Target) -> LogState:
    fs = target.filesystem()
    listing = list_log(target)
    infos: dict[int, dict[str, Any]] = {}
    removed_at: dict[int, int] = {}
    for name in listing:
        match = COMMIT_NAME.match(name)
        if not match:
            continue
        version = int(match[1])
        info: dict[str, Any] = {}
        for line in fs.cat_file(target.fs_path(f"_delta_log/{name}")).decode().splitlines():
            action = json.loads(line) if line.strip() else {}
            info = action.get("commitInfo", info)
            stamp = (action.get("remove") or {}).get("deletionTimestamp")
            if isinstance(stamp, int):
                removed_at[version] = min(stamp, removed_at.get(version, stamp))
        infos[version] = info
    return LogState(listing, infos, removed_at)


def vacuum_safe(
    version: int, state: LogState, retain_ms: float, before_ms: float = float("inf")
) -> bool:
    """Whether no vacuum that started before `before_ms` can have deleted a file live at
    `version`: such a file (data or DV) is unreferenced only after a commit after `version`
    removed it, and a vacuum deletes a removed file only when its removal is older than the
    vacuum's start minus the retention. 5 s of slack keep this on the safe side."""
    starts = [t for t in state.operation_times("VACUUM START") if t < before_ms]
    if not starts:
        return True
    removals = [t for v, t in state.removed_at.items() if v > version]
    return not removals or min(removals) >= max(starts) - retain_ms + 5000


# -- checking -------------------------------------------------------------------------------


@dataclass
class Findings:
    """Mismatches (wrong results) by check: `log`, `log cleanup`, `deletes`, `restores`,
    `reads`, `final`, `time travel`.

    One wrong delete or restore makes every later read and the final table differ too; the
    summary prints the count per check and the first few of each, the first one being the
    cause.
    """

    mismatches: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def expect(self, ok: bool, check: str, message: str) -> None:
        if not ok:
            self.mismatches[check].append(message)

    @property
    def count(self) -> int:
        return sum(len(m) for m in self.mismatches.values())

    def print(self) -> None:
        counts = ", ".join(f"{check} {len(m)}" for check, m in self.mismatches.items())
        print(f"mismatches: {self.count}" + (f" ({counts})" if counts else ""))
        for check, messages in self.mismatches.items():
            for m in messages[:8]:
                print(f"  [{check}] {m}")
            if len(messages) > 8:
                print(f"  [{check}] ... {len(messages) - 8} more")


EXPECTED_OPERATIONS: dict[str, tuple[str, ...]] = {
    "delete": ("DELETE",),
    "purge": ("REORG",),
    "compact": ("OPTIMIZE",),
    "vacuum": ("VACUUM START", "VACUUM END"),
    "restore": ("RESTORE",),
    # These commit nothing: a checkpoint's `version` is the version it checkpoints, the log
    # cleanup only deletes, and a restore --dry-run reports no version.
    "checkpoint": (),
    "vacuum_log": (),
    "inspect": (),
}
CLEANUP_KINDS = ("checkpoint", "vacuum_log")


def reported_versions(record: OpRecord) -> list[int]:
    """The versions a successful operation says it committed."""
    r = record.result
    if record.kind in ("delete", "restore"):
        return [r["version"]] if r.get("version") is not None else []
    if record.kind in ("purge", "compact"):
        return list(r.get("versions") or [])
    if record.kind == "vacuum":
        return [v for v in (r.get("start_version"), r.get("end_version")) if v is not None]
    return []


def option_value(args: Sequence[str], option: str) -> str | None:
    return args[args.index(option) + 1] if option in args else None


def check_log(state: LogState, setup: Setup, records: Sequence[OpRecord], f: Findings) -> None:
    """Contiguous versions from the oldest commit left, unique txnIds, commits == what the
    operations reported, and only expired log entries cleaned up."""
    infos = state.infos
    versions = sorted(infos)
    if not versions:
        f.expect(False, "log", "no commit left in _delta_log")
        return
    contiguous = versions == list(range(versions[0], versions[-1] + 1))
    f.expect(contiguous, "log", f"log versions not contiguous: {versions}")
    txns = Counter(i.get("txnId") for i in infos.values() if i.get("txnId"))
    dup = [t for t, n in txns.items() if n > 1]
    f.expect(not dup, "log", f"duplicate txnId in the log: {dup[:3]}")
    claimed: dict[int, OpRecord] = {}
    for record in records:
        if record.outcome != "ok":
            continue
        if record.kind == "restore":
            dry = "--dry-run" in record.args
            f.expect(
                record.result.get("dry_run") is dry
                and (record.result.get("version") is None) is dry,
                "log",
                f"restore {' '.join(record.args)}: dry_run {record.result.get('dry_run')}, "
                f"version {record.result.get('version')}",
            )
        for v in reported_versions(record):
            f.expect(v not in claimed, "log", f"version {v} reported by two operations")
            claimed[v] = record
            operation = infos.get(v, {}).get("operation")
            f.expect(
                operation in EXPECTED_OPERATIONS[record.kind],
                "log",
                f"{record.kind} reported version {v}, whose commit is {operation!r}",
            )
    for v in versions:
        f.expect(
            v <= setup.version or v in claimed,
            "log",
            f"commit {v} ({infos[v].get('operation')}) reported by no successful operation",
        )
    check_log_cleanup(state, setup, records, f)


def check_log_cleanup(
    state: LogState, setup: Setup, records: Sequence[OpRecord], f: Findings
) -> None:
    """Only expired entries went: of versions before the setup checkpoint (the newest
    checkpoint older than the log retention), and only where the setup's log was aged. The
    setup checkpoint, its commit and every later commit stay; each cleanup's cutoff
    checkpoint is no newer; every checkpoint a checkpoint operation reported is still there."""
    ckpt = setup.checkpoint
    oldest = min(state.infos)
    f.expect(
        oldest <= ckpt,
        "log cleanup",
        f"the oldest commit left is v{oldest}: v{ckpt}..v{oldest - 1} are gone, but only "
        f"versions before the setup checkpoint v{ckpt} had expired",
    )
    for name in setup.checkpoint_files:
        f.expect(name in state.listing, "log cleanup", f"the setup checkpoint {name} is gone")
    why = "before the setup checkpoint" if setup.aged else "(nothing was aged on S3)"
    for name in sorted(setup.log_names - set(state.listing)):
        m = VERSIONED_NAME.match(name)
        f.expect(
            setup.aged > 0 and m is not None and int(m[1]) < ckpt,
            "log cleanup",
            f"{name} was deleted, but only entries {why} v{ckpt} had expired",
        )
    for r in records:
        if r.kind == "vacuum" and r.outcome == "refused":
            m = LITE_MISSING_VERSION.search(r.stderr_head)
            gone = int(m[1]) if m else None
            f.expect(
                gone is not None and gone not in state.infos and gone < ckpt,
                "log cleanup",
                f"vacuum {' '.join(r.args)} refused because v{gone} is no longer in the log, "
                f"but only versions before the setup checkpoint v{ckpt} may be cleaned up",
            )
        if r.outcome != "ok" or r.kind not in CLEANUP_KINDS:
            continue
        if r.kind == "checkpoint":
            for name in r.result.get("files") or []:
                f.expect(
                    name in state.listing,
                    "log cleanup",
                    f"checkpoint file {name} (a checkpoint operation wrote or found it) is gone",
                )
        cleanup = r.result.get("log_cleanup") if r.kind == "checkpoint" else r.result
        if not cleanup:
            continue
        cut = cleanup.get("cutoff_checkpoint")
        f.expect(
            cut is None or (setup.aged > 0 and cut <= ckpt),
            "log cleanup",
            f"{r.kind}: cutoff checkpoint v{cut}, but only the setup checkpoint v{ckpt} and "
            "older ones were old enough",
        )
        verb = "planned to delete" if cleanup.get("dry_run") else "deleted"
        for entry in cleanup.get("files") or []:
            v = entry.get("version")
            f.expect(
                setup.aged > 0 and isinstance(v, int) and v < ckpt,
                "log cleanup",
                f"{r.kind} {verb} {entry.get('name')} (version {v}), but only entries {why} "
                f"v{ckpt} had expired",
            )
            f.expect(
                bool(cleanup.get("dry_run")) or entry.get("name") not in state.listing,
                "log cleanup",
                f"{r.kind} reported {entry.get('name')} deleted, but it is still there",
            )


class Expected:
    """The live row ids per version from the setup's on: the committed deletes and restores
    replayed in version order over the original rows. A version that changes nothing shares
    its predecessor's bitmap, so a few hundred versions take little memory."""

    def __init__(self, rows: Sequence[Row], setup_version: int) -> None:
        self.rows = rows
        self.setup_version = setup_version
        self.alive = FrozenBitMap(range(len(rows)))
        self.live_at: dict[int, FrozenBitMap] = {setup_version: self.alive}

    def count_at(self, version: int) -> int | None:
        live = self.live_at.get(version)
        return None if live is None else len(live)

    def matching(self, spec: Spec) -> BitMap:
        return BitMap(r["id"] for r in self.rows if predicate_matches(spec, r))

    def replay(
        self, records: Sequence[OpRecord], infos: Mapping[int, dict[str, Any]], f: Findings
    ) -> None:
        """Apply the deletes and restores in version order, checking each delete's deleted
        row count and each restore's target."""
        committed = [
            r for r in records if r.outcome == "ok" and r.result.get("version") is not None
        ]
        deletes = {r.result["version"]: r for r in committed if r.kind == "delete"}
        restores = {r.result["version"]: r for r in committed if r.kind == "restore"}
        noops = defaultdict(list)
        for r in records:
            if r.kind == "delete" and r.outcome == "ok" and r.result.get("version") is None:
                noops[r.result["read_version"]].append(r)
        for v in range(self.setup_version, max(infos, default=0) + 1):
            info = infos.get(v, {})
            if v in deletes:
                self._apply(v, deletes[v], info, f)
            elif v in restores or (v > self.setup_version and info.get("operation") == "RESTORE"):
                self._restore(v, restores.get(v), info, f)
            self.live_at[v] = self.alive
            for r in noops.get(v, []):
                left = self.matching(r.spec or {}) & self.alive
                f.expect(
                    not left,
                    "deletes",
                    f"delete at read version {v} committed nothing, but {len(left)} live rows "
                    f"match {predicate_sql(r.spec or {})!r}",
                )

    def _apply(self, v: int, record: OpRecord, info: dict[str, Any], f: Findings) -> None:
        spec = record.spec or {}
        hit = self.matching(spec) & self.alive
        reported = record.result.get("metrics", {}).get("numDeletedRows")
        logged = info.get("operationMetrics", {}).get("numDeletedRows")
        f.expect(
            reported == len(hit) and str(logged) == str(len(hit)),
            "deletes",
            f"delete v{v} {predicate_sql(spec)!r} (read v{record.result.get('read_version')}): "
            f"expected {len(hit)} rows deleted, reported {reported}, logged {logged}",
        )
        self.alive = FrozenBitMap(self.alive - hit)

    def _restore(self, v: int, record: OpRecord | None, info: dict[str, Any], f: Findings) -> None:
        """The live rows become those of the target version: the version the operation
        reported (checked against what it asked and the commit's parameters), else the
        commit's operationParameters `version`."""
        params = info.get("operationParameters") or {}
        target = params.get("version") if record is None else record.result.get("restored_version")
        if record is not None:
            res = record.result
            asked = option_value(record.args, "--version")
            if asked is not None:
                f.expect(
                    target == int(asked) == params.get("version"),
                    "restores",
                    f"restore --version {asked} committed v{v}: restored_version {target}, "
                    f"commit's operationParameters {params}",
                )
            else:
                f.expect(
                    params.get("version") is None and bool(params.get("timestamp")),
                    "restores",
                    f"restore --timestamp committed v{v} with operationParameters {params}",
                )
            logged = {k: str(n) for k, n in (info.get("operationMetrics") or {}).items()}
            reported = {k: str(n) for k, n in (res.get("metrics") or {}).items()}
            f.expect(
                logged == reported,
                "restores",
                f"restore v{v}: reported metrics {reported}, logged {logged}",
            )
            f.expect(
                isinstance(target, int) and target <= res.get("read_version", -1),
                "restores",
                f"restore v{v} restored v{target}, newer than its read version "
                f"{res.get('read_version')}",
            )
        if not isinstance(target, int) or target not in self.live_at:
            f.expect(
                False,
                "restores",
                f"RESTORE v{v} restored version {target!r}, not one from the setup's "
                f"(v{self.setup_version}) to v{v - 1}: its rows are unknown",
            )
            return
        self.alive = self.live_at[target]


def check_reads(records: Sequence[OpRecord], expected: Expected, f: Findings) -> int:
    """Each successful inspect: logical rows of the version it read, verify clean."""
    checked = 0
    for r in records:
        if r.kind != "inspect" or r.outcome != "ok":
            continue
        v, res = r.result["version"], r.result
        want = expected.count_at(v)
        if res.get("row_counts_exact") and want is not None:
            f.expect(
                res["logical_rows"] == want,
                "reads",
                f"inspect of v{v}: logical_rows {res['logical_rows']}, expected {want}",
            )
            checked += 1
        verify = res.get("verify")
        if verify is not None:
            f.expect(
                bool(verify.get("ok")),
                "reads",
                f"inspect --verify of v{v}: {verify.get('problems', [])[:2]}",
            )
    return checked


def strictly_increasing(times: Sequence[int]) -> list[int]:
    """Commit times as Delta orders them: a time not after its predecessor's counts as the
    predecessor's + 1 ms."""
    out: list[int] = []
    for t in times:
        out.append(max(t, out[-1] + 1) if out else t)
    return out


def epoch_ms(text: str) -> int:
    moment = dt.datetime.fromisoformat(text)
    return (moment - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(
        milliseconds=1
    )


def check_restores(
    records: Sequence[OpRecord], state: LogState, retain_ms: float, f: Findings
) -> Counter[str]:
    """`--timestamp` resolved to the newest version up to the read version whose commit time
    is not after it (1 ms either way: times are truncated to ms); a refusal for vacuumed files
    came after a vacuum that could have deleted files of the target version."""
    times = commit_times(state.listing)
    versions = sorted(times)
    adjusted = dict(zip(versions, strictly_increasing([times[v] for v in versions]), strict=True))
    stats: Counter[str] = Counter()
    for r in records:
        if r.kind != "restore":
            continue
        if r.outcome == "conflict" and RUNNING_VACUUM_MESSAGE in r.stderr_head:
            stats["vacuum running"] += 1
        if r.outcome == "refused":
            m = REFUSED_VERSION.search(r.stderr_head)
            target = int(m[1]) if m else None
            f.expect(
                target is not None
                and not vacuum_safe(target, state, retain_ms, (r.started + r.seconds) * 1000),
                "restores",
                f"restore {' '.join(r.args)} refused for vacuumed files of v{target}, but no "
                "vacuum that started before it ended could have deleted them",
            )
        if r.outcome != "ok" or "--timestamp" not in r.args:
            continue
        stamp = epoch_ms(option_value(r.args, "--timestamp") or "")
        read, got = r.result.get("read_version", -1), r.result.get("restored_version")
        window = set()
        for moment in (stamp - 1, stamp, stamp + 1):
            before = [v for v in versions if v <= read and adjusted[v] <= moment]
            window.add(before[-1] if before else None)
        f.expect(
            got in window,
            "restores",
            f"restore --timestamp {stamp} (read v{read}) restored v{got}; the newest commit "
            f"at or before it is v{sorted(window, key=str)}",
        )
        stats["timestamps checked"] += 1
    return stats


def check_time_travel(
    target: Target,
    state: LogState,
    expected: Expected,
    rng: random.Random,
    retain_ms: float,
    f: Findings,
) -> Counter[str]:
    """deltalake `DeltaTable(uri, version=v)` reads exactly the live ids of v, for the newest
    versions, random ones whose files no vacuum can have deleted and random ones of all the
    log can still rebuild; a missing file is "vacuumed" when a concurrent vacuum can have
    deleted it."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    stats: Counter[str] = Counter()
    latest = max(state.infos)
    start = state.rebuildable_from()
    candidates = list(
        range(max(expected.setup_version, latest if start is None else start), latest + 1)
    )
    chosen = set(candidates[-TIME_TRAVEL_NEWEST:])
    safe = [v for v in candidates if v not in chosen and vacuum_safe(v, state, retain_ms)]
    chosen |= set(rng.sample(safe, min(TIME_TRAVEL_SAFE, len(safe))))
    chosen |= set(rng.sample(candidates, min(TIME_TRAVEL_RANDOM, len(candidates))))
    options = dict(target.reader_options) or None
    for v in sorted(chosen):
        want = expected.live_at.get(v)
        if want is None:
            continue
        safe_v = vacuum_safe(v, state, retain_ms)
        try:
            table = DeltaTable(target.uri, version=v, storage_options=options)
            query = QueryBuilder().register("t", table).execute("SELECT id FROM t")
            ids = pa.table(query).column("id").to_pylist()
        except Exception as e:  # deltalake's errors have no common useful base
            message = " ".join(str(e).split())
            if MISSING_FILE_ERROR.search(message) and not safe_v:
                stats["vacuumed"] += 1
                continue
            f.expect(
                False,
                "time travel",
                f"deltalake version={v}"
                + (" (no vacuum can have deleted its files)" if safe_v else "")
                + f": {type(e).__name__}: {message[:400]}",
            )
            continue
        got = BitMap(ids)
        f.expect(
            len(ids) == len(got) and got == want,
            "time travel",
            f"deltalake version={v}: read {len(ids)} rows ({len(ids) - len(got)} duplicates), "
            f"expected {len(want)}: {len(want - got)} missing (e.g. {list(want - got)[:3]}), "
            f"{len(got - want)} unexpected (e.g. {list(got - want)[:3]})",
        )
        stats["checked"] += 1
        stats["safe"] += safe_v
    return stats


def canonical(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A row as a comparable tuple, whatever reader produced it."""
    day = row["day"]
    return (
        row["id"],
        row["grp"],
        row["amount"],
        row["name"],
        day.isoformat() if day else None,
        row["score"],
        row["region"],
    )


def reader_rows(target: Target) -> dict[str, list[dict[str, Any]]]:
    """The table's rows as each independent reader sees them."""
    import importlib

    import polars as pl
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    options = dict(target.reader_options) or None
    out: dict[str, list[dict[str, Any]]] = {
        "polars": pl.read_delta(target.uri, storage_options=options).to_dicts(),
        # to_pyarrow_table() refuses tables with the deletionVectors reader feature; the
        # DataFusion query engine of deltalake applies DVs.
        "deltalake": pa.table(
            QueryBuilder()
            .register("t", DeltaTable(target.uri, storage_options=options))
            .execute("SELECT * FROM t")
        ).to_pylist(),
    }
    if target.local_path is not None:
        # The raw reader shares no code with dvtool: JSON log + pyarrow + pyroaring. It
        # replays the JSON commits from 0, which the log cleanup may have deleted; from the
        # newest checkpoint on, it reads what that checkpoint's adds and later commits say.
        sys.path.insert(0, str(ROOT))
        oracles = importlib.import_module("tests.oracles")
        path = target.local_path
        versions = oracles.commit_versions(path)
        if versions and versions == list(range(versions[-1] + 1)):
            out["raw (tests/oracles.py, JSON log)"] = oracles.raw_rows(path)
        from_checkpoint = raw_rows_from_checkpoint(path, oracles)
        if from_checkpoint is not None:
            version, rows = from_checkpoint
            out[f"raw (tests/oracles.py, checkpoint v{version} + JSON)"] = rows
    return out


def raw_rows_from_checkpoint(path: Path, oracles: Any) -> tuple[int, list[Row]] | None:
    """(checkpoint version, rows): the live adds of the newest classic checkpoint followed by
    every commit after it (read with pyarrow; replayed by (path, DV id) as
    `oracles.replay_json` does), each file read by `oracles.file_rows`. None without one."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    log = path / "_delta_log"
    versions = set(oracles.commit_versions(path))
    latest = max(versions, default=-1)
    found = sorted(int(m[1]) for n in os.listdir(log) if (m := CHECKPOINT_NAME.match(n)))
    usable = [c for c in found if all(v in versions for v in range(c + 1, latest + 1))]
    if not usable:
        return None
    version = usable[-1]
    table = pq.read_table(log / f"{version:020d}.checkpoint.parquet", columns=["add", "metaData"])
    metadata = next(m for m in table.column("metaData").to_pylist() if m)
    metadata["configuration"] = dict(metadata.get("configuration") or [])
    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for add in table.column("add").to_pylist():
        if not add:
            continue
        add["partitionValues"] = dict(add.get("partitionValues") or [])
        dv = add.get("deletionVector")
        add["deletionVector"] = {k: x for k, x in dv.items() if x is not None} if dv else None
        live[(unquote(add["path"]), oracles.dv_key(add["deletionVector"]))] = add
    for v in range(version + 1, latest + 1):
        for action in oracles.commit_actions(path, v):
            if "metaData" in action:
                metadata = action["metaData"]
            elif "add" in action:
                add = action["add"]
                live[(unquote(add["path"]), oracles.dv_key(add.get("deletionVector")))] = add
            elif "remove" in action:
                rm = action["remove"]
                live.pop((unquote(rm["path"]), oracles.dv_key(rm.get("deletionVector"))), None)
    return version, [row for add in live.values() for row in oracles.file_rows(path, metadata, add)]


def row_difference(want: Sequence[tuple[Any, ...]], got: Sequence[tuple[Any, ...]]) -> str:
    """How the rows a reader read differ from the expected ones, with a few examples."""
    wanted, seen = Counter(want), Counter(got)
    missing = sorted((wanted - seen).elements())
    extra = sorted((seen - wanted).elements())
    return (
        f"read {len(got)} rows, expected {len(want)}: {len(missing)} missing "
        f"(e.g. {missing[:3]}), {len(extra)} unexpected (e.g. {extra[:3]})"
    )


def check_final(
    target: Target, expected: Expected, dvtool: Sequence[str], f: Findings, when: str
) -> None:
    """Every reader sees exactly the expected rows; `inspect --verify` passes."""
    want = sorted(canonical(expected.rows[i]) for i in expected.alive)
    for name, rows in reader_rows(target).items():
        got = sorted(canonical(r) for r in rows)
        f.expect(got == want, "final", f"{when}: {name} {row_difference(want, got)}")
    code, out, err = run_dvtool(dvtool, target, "inspect", ["--verify"])
    outcome, res = classify("inspect", code, out, err)
    f.expect(
        outcome == "ok",
        "final",
        f"{when}: dvtool inspect --verify exit {code}: {head(err)} {res.get('verify')}",
    )
    if outcome == "ok":
        f.expect(
            res["logical_rows"] == len(want),
            "final",
            f"{when}: inspect logical_rows {res['logical_rows']}, expected {len(want)}",
        )


# -- the run --------------------------------------------------------------------------------


@contextlib.contextmanager
def moto_s3() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 with the soak bucket; stopped on exit."""
    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.stop()


def s3_target(endpoint: str) -> Target:
    reader = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    cli = ("endpoint_url=" + endpoint, "key=test", "secret=test")
    return Target(
        f"s3://{BUCKET}/table",
        tuple(a for o in cli for a in ("--storage-option", o)),
        tuple(reader.items()),
        endpoint,
    )


def run_checked(
    dvtool: Sequence[str], target: Target, command: str, args: Sequence[str] = ()
) -> dict[str, Any]:
    code, out, err = run_dvtool(dvtool, target, command, args)
    if code != 0:
        raise SystemExit(f"dvtool {command} failed (exit {code}): {head(err)}")
    loaded: dict[str, Any] = json.loads(out)
    return loaded


@dataclass(frozen=True)
class Setup:
    """The table as the workers found it."""

    rows: list[Row]
    shape: TableShape
    version: int  # the last setup commit (dvtool enable)
    checkpoint: int  # the version of the checkpoint written after it
    checkpoint_files: tuple[str, ...]
    aged: int  # how many of the setup's log entries were aged LOG_AGE_DAYS (0 on S3)
    log_names: frozenset[str]  # the _delta_log entries when the workers started


def setup_table(rng: random.Random, target: Target, build: Path, dvtool: Sequence[str]) -> Setup:
    """Write the table (locally, then uploaded for S3), enable DVs, write a checkpoint and,
    on a local table, age the setup's log entries so that the log cleanup can delete them."""
    rows, shape = build_table(rng, build)
    if target.local_path is None:
        target.filesystem().put(str(build), target.fs_path(""), recursive=True)
    enabled = run_checked(dvtool, target, "enable")
    checkpoint = run_checked(dvtool, target, "checkpoint")
    version = int(checkpoint["version"])
    aged = age_log(target.local_path, version) if target.local_path is not None else 0
    return Setup(
        rows,
        shape,
        int(enabled["version"]),
        version,
        tuple(checkpoint["files"]),
        aged,
        frozenset(list_log(target)),
    )


def age_log(path: Path, up_to: int) -> int:
    """Set the modification time of every versioned `_delta_log` entry up to version `up_to`
    (commits, checkpoints, checksums) to LOG_AGE_DAYS ago, whole seconds, one second apart in
    version order: older than delta.logRetentionDuration, in the order they were written.
    How many entries were aged."""
    base = int(time.time()) - LOG_AGE_DAYS * DAY_MS // 1000
    log = path / "_delta_log"
    aged = 0
    for name in os.listdir(log):
        m = VERSIONED_NAME.match(name)
        if m and int(m[1]) <= up_to:
            moment = base + int(m[1])
            os.utime(log / name, (moment, moment))
            aged += 1
    return aged


def run_workers(plans: Sequence[WorkerPlan]) -> list[OpRecord]:
    """Run the worker processes to their deadline; all their records, in start order."""
    with ProcessPoolExecutor(len(plans), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_worker, p) for p in plans]
        records = [r for fut in futures for r in fut.result()]
    return sorted(records, key=lambda r: r.started)


@dataclass
class Summary:
    """What the run did, per kind of operation."""

    runs: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    variants: Counter[str] = field(default_factory=Counter)
    replans: Counter[str] = field(default_factory=Counter)
    after_winners: Counter[str] = field(default_factory=Counter)
    winners_skipped: Counter[str] = field(default_factory=Counter)
    seconds: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    warnings: list[str] = field(default_factory=list)


def summarize(records: Sequence[OpRecord], infos: Mapping[int, dict[str, Any]]) -> Summary:
    s = Summary()
    for r in records:
        s.runs[r.kind] += 1
        s.outcomes[(r.kind, r.outcome)] += 1
        s.seconds[r.kind].append(r.seconds)
        if r.outcome != "ok":
            continue
        s.variants.update(operation_variants(r))
        s.replans[r.kind] += int(r.result.get("attempts", 1)) - 1
        for v in reported_versions(r):
            read = infos.get(v, {}).get("readVersion")
            if isinstance(read, int) and v - read > 1:
                s.after_winners[r.kind] += 1
                s.winners_skipped[r.kind] += v - read - 1
        s.warnings += [w for w in operation_warnings(r) if w]
    return s


def operation_variants(r: OpRecord) -> list[str]:
    """What kind of successful restore, checkpoint or log cleanup `r` was, for the summary."""
    res = r.result
    if r.kind == "restore":
        how = "--timestamp" if "--timestamp" in r.args else "--version"
        return [f"restore {how} " + ("dry run" if res.get("dry_run") else "committed")]
    if r.kind == "checkpoint":
        cleanup = res.get("log_cleanup") or {}
        return [
            "checkpoint " + ("written" if res.get("written") else "already there"),
            *(["checkpoint cleanup deleted"] * int(cleanup.get("deleted_files") or 0)),
        ]
    if r.kind == "vacuum_log":
        verb = "planned" if res.get("dry_run") else "deleted"
        return [f"vacuum --log {verb}"] * int(res.get("deleted_files") or 0)
    return []


def operation_warnings(r: OpRecord) -> list[str]:
    res = r.result
    found = [res.get("checkpoint_warning"), *(res.get("checkpoint_warnings") or [])]
    found += list(res.get("warnings") or []) if r.kind in ("vacuum", "checkpoint") else []
    found += [res.get("manifest_warning"), res.get("error") if r.kind == "vacuum_log" else None]
    return [f"{r.kind}: {w}" for w in found if w]


def print_summary(s: Summary) -> None:
    print(
        f"{'operation':<10} {'runs':>5} {'ok':>5} {'conflict':>8} {'refused':>7} {'failure':>7} "
        f"{'re-plans':>8} {'retried':>7} {'winners':>7} {'mean s':>6} {'max s':>6}"
    )
    for kind in OPERATION_WEIGHTS:
        secs = s.seconds.get(kind) or [0.0]
        print(
            f"{kind:<10} {s.runs[kind]:>5} {s.outcomes[(kind, 'ok')]:>5} "
            f"{s.outcomes[(kind, 'conflict')]:>8} {s.outcomes[(kind, 'refused')]:>7} "
            f"{s.outcomes[(kind, 'failure')]:>7} "
            f"{s.replans[kind]:>8} {s.after_winners[kind]:>7} {s.winners_skipped[kind]:>7} "
            f"{sum(secs) / len(secs):>6.1f} {max(secs):>6.1f}"
        )
    total = sum(s.runs.values())
    by = Counter(o for (_, o), n in s.outcomes.items() for _ in range(n))
    print(
        f"{'total':<10} {total:>5} {by['ok']:>5} {by['conflict']:>8} {by['refused']:>7} "
        f"{by['failure']:>7}"
    )
    print(
        "  re-plans: delete re-planned after a conflict (--json attempts - 1); retried: "
        "commits that landed after other writers' commits (version > readVersion + 1); "
        "winners: those other commits; refused: restores refused because files they need "
        "were vacuumed (exit 5), vacuum --lite refused because commits it needs were cleaned "
        "from the log (exit 7; a full vacuum records where the next --lite starts)"
    )


def print_failures(records: Sequence[OpRecord]) -> list[OpRecord]:
    failures = [r for r in records if r.outcome == "failure"]
    print(f"unexpected failures: {len(failures)}")
    for r in failures[:20]:
        print(f"  worker {r.worker} {r.kind} {' '.join(r.args)}: exit {r.exit_code}")
        for line in (r.stderr_head or "(no stderr)").splitlines():
            print(f"      {line}")
    return failures


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument(
        "--minutes", type=float, required=True, help="how long workers start new operations"
    )
    p.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    p.add_argument("--seed", type=int, help="random seed (default: random, printed)")
    p.add_argument(
        "--table",
        type=Path,
        help="local directory for the table (default: a new temp dir); "
        "for s3, where --keep downloads it",
    )
    p.add_argument(
        "--backend", choices=("local", "s3"), default="local", help="s3: a moto server on 127.0.0.1"
    )
    p.add_argument("--keep", action="store_true", help="keep the table afterwards")
    p.add_argument(
        "--vacuum-retain",
        default="60s",
        help="--retain of concurrent vacuums (default 60s; see the docstring)",
    )
    p.add_argument(
        "--exclude-predicate",
        action="append",
        default=[],
        choices=list(PREDICATE_WEIGHTS),
        metavar="KIND",
        help="never draw this kind of delete predicate (e.g. one a known bug gets wrong, so it "
        "does not mask others); repeatable",
    )
    p.add_argument("--dvtool", help="dvtool executable (default: this Python's `-m dvtool`)")
    args = p.parse_args(argv)
    if args.minutes <= 0 or args.workers < 1:
        p.error("--minutes must be positive and --workers at least 1")
    if set(args.exclude_predicate) >= set(PREDICATE_WEIGHTS):
        p.error("--exclude-predicate: every predicate kind is excluded")
    if args.table is not None and args.table.exists() and any(args.table.iterdir()):
        p.error(f"--table {args.table}: the directory is not empty")
    return args


def save_records(records: Sequence[OpRecord], path: Path) -> None:
    """Every operation as JSON, for a post-mortem of a run kept with --keep."""
    path.write_text(json.dumps([asdict(r) for r in records], indent=1, default=str))


def retention_seconds(text: str) -> float:
    from dvtool.commands.vacuum import parse_duration

    return parse_duration(text) / 1000


def soak(args: argparse.Namespace, seed: int, workdir: Path) -> int:
    """The whole run inside `workdir`; the process exit status."""
    rng = random.Random(seed)
    dvtool = (args.dvtool,) if args.dvtool else (sys.executable, "-m", "dvtool")
    local = args.table if args.table is not None and args.backend == "local" else workdir / "table"
    with contextlib.ExitStack() as stack:
        target = (
            s3_target(stack.enter_context(moto_s3()))
            if args.backend == "s3"
            else Target(str(local))
        )
        build = local if args.backend == "local" else workdir / "build"
        setup = setup_table(rng, target, build, dvtool)
        shape = setup.shape
        print(
            f"soak: seed {seed}, {args.backend} table {target.uri}, "
            f"{'partitioned by region' if shape.partitioned else 'unpartitioned'}, "
            f"{shape.num_files} files x {shape.rows_per_file:,} rows ({shape.num_rows:,} rows), "
            f"{args.workers} workers, {args.minutes:g} min, vacuum --retain {args.vacuum_retain}",
            flush=True,
        )
        print(
            f"setup: versions 0..{setup.version}, checkpoint v{setup.checkpoint}; "
            + (
                f"its {setup.aged} log entries aged {LOG_AGE_DAYS} days (os.utime)"
                if setup.aged
                else "log not aged (S3 has no settable modification time): "
                "the log cleanup has nothing to delete"
            ),
            flush=True,
        )
        deadline = time.time() + args.minutes * 60
        kinds = tuple(k for k in PREDICATE_WEIGHTS if k not in args.exclude_predicate)
        plans = [
            WorkerPlan(
                i, seed, deadline, target, shape, dvtool, args.vacuum_retain, kinds, setup.version
            )
            for i in range(args.workers)
        ]
        records = run_workers(plans)
        save_records(records, workdir / "records.json")
        status = analyse(
            records, setup, target, dvtool, retention_seconds(args.vacuum_retain), seed
        )
        if args.keep and args.backend == "s3":
            kept = args.table or workdir / "table"
            target.filesystem().get(target.fs_path(""), str(kept), recursive=True)
            print(f"table kept in {kept}")
    return status


def analyse(
    records: Sequence[OpRecord],
    setup: Setup,
    target: Target,
    dvtool: Sequence[str],
    retain_s: float,
    seed: int,
) -> int:
    """Check everything, print the summary; 0 when clean."""
    state = read_log(target)
    infos = state.infos
    f = Findings()
    check_log(state, setup, records, f)
    expected = Expected(setup.rows, setup.version)
    expected.replay(records, infos, f)
    reads = check_reads(records, expected, f)
    restores = check_restores(records, state, retain_s * 1000, f)
    check_final(target, expected, dvtool, f, "after the workload")
    travel = check_time_travel(target, state, expected, random.Random(seed + 1), retain_s * 1000, f)
    vacuumed = run_checked(dvtool, target, "vacuum", ["--retain", "0h", "--force"])
    check_final(target, expected, dvtool, f, "after a final vacuum --retain 0h")
    summary = summarize(records, infos)
    print_summary(summary)
    deletes = [r for r in records if r.kind == "delete" and r.outcome == "ok"]
    committed = [r for r in deletes if r.result.get("version") is not None]
    print(
        f"log: versions {min(infos)}..{max(infos)} (setup up to v{setup.version}); "
        f"deletes committed {len(committed)}, matched nothing {len(deletes) - len(committed)}; "
        f"live rows {len(expected.alive):,} of {len(setup.rows):,}"
    )
    print_restores(summary, restores)
    print_log_cleanup(summary, state, setup)
    print(f"reads checked against the expected row count of their version: {reads}")
    print(
        f"time travel (deltalake version=v): {travel['checked']} versions read exactly as "
        f"expected (of them {travel['safe']} that no vacuum can have touched), "
        f"{travel['vacuumed']} not readable because a concurrent vacuum deleted their files"
    )
    reasons = Counter(str(f.get("reason")) for f in vacuumed.get("files") or [])
    print(
        f"final vacuum --retain 0h deleted {vacuumed.get('deleted_files')} files: "
        + (", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) or "none")
    )
    longest = max((r.seconds for r in records), default=0.0)
    print(f"longest operation {longest:.1f} s, concurrent vacuum retention {retain_s:g} s")
    if longest >= retain_s:
        print(
            "  NOTE: an operation outlived the vacuum retention; "
            "Delta does not guarantee vacuum safety then"
        )
    print(f"warnings: {len(summary.warnings)}")
    for w in summary.warnings[:10]:
        print(f"  {w}")
    failures = print_failures(records)
    f.print()
    return 1 if failures or f.count else 0


def print_restores(summary: Summary, restores: Counter[str]) -> None:
    v = summary.variants
    print(
        f"restores: committed {v['restore --version committed']} by --version and "
        f"{v['restore --timestamp committed']} by --timestamp, dry runs "
        f"{v['restore --version dry run'] + v['restore --timestamp dry run']}; "
        f"refused (files vacuumed) {summary.outcomes[('restore', 'refused')]}; conflicts "
        f"{summary.outcomes[('restore', 'conflict')]} (of which a vacuum running "
        f"{restores['vacuum running']}); --timestamp resolutions checked "
        f"{restores['timestamps checked']}"
    )


def print_log_cleanup(summary: Summary, state: LogState, setup: Setup) -> None:
    v = summary.variants
    gone = sorted(setup.log_names - set(state.listing))
    versions = sorted(int(m[1]) for n in gone if (m := VERSIONED_NAME.match(n)))
    span = f" (versions {versions[0]}..{versions[-1]})" if versions else ""
    reported = v["checkpoint cleanup deleted"] + v["vacuum --log deleted"]
    rest = len(gone) - reported
    print(
        f"checkpoints: {v['checkpoint written']} written, {v['checkpoint already there']} "
        f"already there; log cleanup: {len(gone)} of the setup's "
        f"{len(setup.log_names)} _delta_log entries deleted{span} (its checkpoint: "
        f"v{setup.checkpoint}); reported deleted by checkpoint {v['checkpoint cleanup deleted']}, "
        f"by vacuum --log {v['vacuum --log deleted']} (dry runs listed "
        f"{v['vacuum --log planned']})"
        + (f"; {rest} by the cleanup after a checkpoint a commit wrote" if rest > 0 else "")
    )
    if not setup.aged:
        print(
            "  log not aged: S3 has no settable modification time, so nothing expired and "
            "the cleanup was only checked to delete nothing"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    workdir = Path(tempfile.mkdtemp(prefix="dvtool-soak-"))
    try:
        return soak(args, seed, workdir)
    finally:
        if args.keep:
            print(f"kept {workdir} (records.json; the table, unless --table was given)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        if args.table is not None and args.backend == "local":
            print(f"table: {args.table}")


if __name__ == "__main__":
    sys.exit(main())
