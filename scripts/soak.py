"""Soak test: a randomized concurrent workload of real `dvtool` processes against one table.

Builds a table (8-16 data files of a few thousand rows written by deltalake's
`write_deltalake`, partitioned by `region` in some runs, then `dvtool enable`d) and runs
`--workers` worker processes until the deadline. Each worker loops, picking at random and
running as a CLI subprocess with `--json`:

- `delete --where P`, P a random predicate over the data and partition columns, built from a
  spec that also gives its meaning in plain Python (`predicate_sql` / `predicate_matches`);
- `optimize --purge` (sometimes `--min-deleted-ratio`), `optimize` compaction (a random
  `--target-size`, sometimes a partition `--where`);
- `vacuum --retain R --force` (sometimes `--lite`), see "Vacuum retention" below;
- `inspect --json` (sometimes `--verify`), a read.

Each operation's exit code is classified: 0 is success, 4 with a commit-conflict message
(`CommitConflictError`, see dvtool/errors.py and dvtool/log/writer.py) is a conflict,
anything else an unexpected failure. Afterwards, all checked independently of
dvtool's code:

- the log: versions 0..N contiguous, no `txnId` twice, every commit after the setup reported
  by exactly one successful operation of the matching kind, and vice versa;
- the deletes, replayed in commit order over the original rows (ids are unique and rows never
  change, so a predicate evaluated on the original rows is exact): each delete's
  `numDeletedRows` must equal the rows its predicate matches among those still alive just
  before its version (Serializable isolation), and a delete that committed nothing must have
  had no live match at its read version;
- every `inspect` read: `logical_rows` equals the live rows at the version it read, and
  `--verify` found no problem;
- the final table, read by polars `read_delta`, deltalake `DeltaTable.to_pyarrow_table()` and
  (local tables) the raw reader of tests/oracles.py: exactly the expected rows, column by
  column; `dvtool inspect --verify` passes; then once more after a final
  `vacuum --retain 0h --force` run with no other writer.

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

ROOT = Path(__file__).resolve().parent.parent
BUCKET = "dvtool-soak"
REGIONS = ("eu", "us", "ap", "sa")
FIRST_DAY = dt.date(2024, 1, 1)
DAYS = 365
OPERATION_TIMEOUT_S = 600.0
COMMIT_NAME = re.compile(r"^(\d{20})\.json$")
# Messages of CommitConflictError (dvtool/log/writer.py, dvtool/commands/optimize.py).
CONFLICT_EXIT = 4  # CommitConflictError.exit_code (README, exit codes)
CONFLICT_MESSAGES = (
    "concurrent commit conflicts with this transaction",
    "could not commit after",
    "did not commit: a concurrent commit changed",
)
PREDICATE_WEIGHTS = {
    "id_between": 6, "id_in": 6, "id_mod_grp": 5, "amount_range": 5, "name_prefix": 4,
    "region_grp": 4, "day_eq": 4, "score_null": 3, "score_not_lt": 4, "concat": 3,
    "sum_mod": 3, "tails": 1, "file_range": 1,
}  # fmt: skip
OPERATION_WEIGHTS = {"delete": 40, "inspect": 20, "purge": 12, "compact": 12, "vacuum": 8}
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


@dataclass
class OpRecord:
    """One dvtool process a worker ran, and what came of it."""

    worker: int
    kind: str
    args: list[str]
    started: float
    seconds: float
    exit_code: int
    outcome: str  # ok | conflict | failure
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
    kind = rng.choices(list(OPERATION_WEIGHTS), weights=list(OPERATION_WEIGHTS.values()))[0]
    if kind == "delete":
        spec = random_predicate(rng, plan.shape, plan.predicate_kinds)
        return kind, ["--where", predicate_sql(spec)], spec
    if kind == "inspect":
        return kind, ["--verify"] if rng.random() < 0.4 else [], None
    if kind == "purge":
        ratio = ["--min-deleted-ratio", str(rng.choice((0.001, 0.005, 0.01)))]
        return kind, ["--purge", *(ratio if rng.random() < 0.3 else [])], None
    if kind == "compact":
        size = int(plan.shape.file_size * rng.choice((1.5, 2.5, 4.0)))
        args = ["--target-size", str(size)]
        if plan.shape.partitioned and rng.random() < 0.4:
            args += ["--where", f"region = '{rng.choice(REGIONS)}'"]
        return kind, args, None
    lite = ["--lite"] if rng.random() < 0.3 else []
    return kind, ["--retain", plan.vacuum_retain, "--force", *lite], None


COMMANDS = {
    "delete": "delete",
    "inspect": "inspect",
    "purge": "optimize",
    "compact": "optimize",
    "vacuum": "vacuum",
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


def classify(exit_code: int, stdout: str, stderr: str) -> tuple[str, dict[str, Any]]:
    """(outcome, parsed JSON result): conflicts are exit 4 with a CommitConflictError message."""
    parsed: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        loaded = json.loads(stdout) if stdout.strip() else {}
        parsed = loaded if isinstance(loaded, dict) else {}
    if exit_code == 0:
        return ("ok" if parsed else "failure"), parsed
    if exit_code == CONFLICT_EXIT and any(m in stderr for m in CONFLICT_MESSAGES):
        return "conflict", parsed
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
        outcome, result = classify(code, out, err)
        seconds = time.time() - started
        records.append(
            OpRecord(
                plan.index, kind, args, started, seconds, code, outcome, head(err), result, spec
            )
        )
    return records


# -- the log, read without dvtool ---------------------------------------------------------


def read_commit_infos(target: Target) -> dict[int, dict[str, Any]]:
    """version -> commitInfo (empty when a commit has none), from the JSON commits."""
    fs = target.filesystem()
    infos: dict[int, dict[str, Any]] = {}
    for name in fs.ls(target.fs_path("_delta_log"), detail=False):
        match = COMMIT_NAME.match(str(name).rsplit("/", 1)[-1])
        if not match:
            continue
        info: dict[str, Any] = {}
        for line in fs.cat_file(str(name)).decode().splitlines():
            action = json.loads(line) if line.strip() else {}
            info = action.get("commitInfo", info)
        infos[int(match[1])] = info
    return infos


# -- checking -------------------------------------------------------------------------------


@dataclass
class Findings:
    """Mismatches (wrong results) by check: `log`, `deletes`, `reads`, `final`.

    One wrong delete makes every later read and the final table differ too; the summary
    prints the count per check and the first few of each, the first one being the cause.
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


EXPECTED_OPERATIONS = {
    "delete": ("DELETE",),
    "purge": ("REORG",),
    "compact": ("OPTIMIZE",),
    "vacuum": ("VACUUM START", "VACUUM END"),
}


def reported_versions(record: OpRecord) -> list[int]:
    """The versions a successful operation says it committed."""
    r = record.result
    if record.kind == "delete":
        return [r["version"]] if r.get("version") is not None else []
    if record.kind in ("purge", "compact"):
        return list(r.get("versions") or [])
    if record.kind == "vacuum":
        return [v for v in (r.get("start_version"), r.get("end_version")) if v is not None]
    return []


def check_log(
    infos: Mapping[int, dict[str, Any]],
    setup_version: int,
    records: Sequence[OpRecord],
    f: Findings,
) -> None:
    """Contiguous versions, unique txnIds, and commits == what the operations reported."""
    versions = sorted(infos)
    contiguous = versions == list(range(len(versions)))
    f.expect(contiguous, "log", f"log versions not contiguous: {versions}")
    txns = Counter(i.get("txnId") for i in infos.values() if i.get("txnId"))
    dup = [t for t, n in txns.items() if n > 1]
    f.expect(not dup, "log", f"duplicate txnId in the log: {dup[:3]}")
    claimed: dict[int, OpRecord] = {}
    for record in records:
        if record.outcome != "ok":
            continue
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
            v <= setup_version or v in claimed,
            "log",
            f"commit {v} ({infos[v].get('operation')}) reported by no successful operation",
        )


class Expected:
    """The live rows per version, replaying the committed deletes over the original rows."""

    def __init__(self, rows: Sequence[Row], last_version: int) -> None:
        self.rows = rows
        self.alive = set(range(len(rows)))
        self.count_at = [len(rows)] * (last_version + 1)

    def matching(self, spec: Spec) -> set[int]:
        return {r["id"] for r in self.rows if predicate_matches(spec, r)}

    def replay(
        self, records: Sequence[OpRecord], infos: Mapping[int, dict[str, Any]], f: Findings
    ) -> None:
        """Apply the deletes in version order, checking each one's deleted row count."""
        deletes = {
            r.result["version"]: r
            for r in records
            if r.kind == "delete" and r.outcome == "ok" and r.result.get("version") is not None
        }
        noops = defaultdict(list)
        for r in records:
            if r.kind == "delete" and r.outcome == "ok" and r.result.get("version") is None:
                noops[r.result["read_version"]].append(r)
        for v in range(len(self.count_at)):
            if v in deletes:
                self._apply(v, deletes[v], infos.get(v, {}), f)
            for r in noops.get(v, []):
                left = self.matching(r.spec or {}) & self.alive
                f.expect(
                    not left,
                    "deletes",
                    f"delete at read version {v} committed nothing, but {len(left)} live rows "
                    f"match {predicate_sql(r.spec or {})!r}",
                )
            self.count_at[v] = len(self.alive)

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
        self.alive -= hit


def check_reads(records: Sequence[OpRecord], expected: Expected, f: Findings) -> int:
    """Each successful inspect: logical rows of the version it read, verify clean."""
    checked = 0
    for r in records:
        if r.kind != "inspect" or r.outcome != "ok":
            continue
        v, res = r.result["version"], r.result
        if res.get("row_counts_exact") and v < len(expected.count_at):
            f.expect(
                res["logical_rows"] == expected.count_at[v],
                "reads",
                f"inspect of v{v}: logical_rows {res['logical_rows']}, "
                f"expected {expected.count_at[v]}",
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
        # The raw reader shares no code with dvtool: JSON log + pyarrow + pyroaring.
        sys.path.insert(0, str(ROOT))
        oracles = importlib.import_module("tests.oracles")
        out["raw (tests/oracles.py)"] = oracles.raw_rows(target.local_path)
    return out


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
    outcome, res = classify(code, out, err)
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


def setup_table(
    rng: random.Random, target: Target, build: Path, dvtool: Sequence[str]
) -> tuple[list[Row], TableShape, int]:
    """Write the table (locally, then uploaded for S3) and enable DVs: rows, shape, version."""
    rows, shape = build_table(rng, build)
    if target.local_path is None:
        target.filesystem().put(str(build), target.fs_path(""), recursive=True)
    enabled = run_checked(dvtool, target, "enable")
    return rows, shape, int(enabled["version"])


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
        s.replans[r.kind] += int(r.result.get("attempts", 1)) - 1
        for v in reported_versions(r):
            read = infos.get(v, {}).get("readVersion")
            if isinstance(read, int) and v - read > 1:
                s.after_winners[r.kind] += 1
                s.winners_skipped[r.kind] += v - read - 1
        s.warnings += [w for w in operation_warnings(r) if w]
    return s


def operation_warnings(r: OpRecord) -> list[str]:
    res = r.result
    found = [res.get("checkpoint_warning"), *(res.get("checkpoint_warnings") or [])]
    found += list(res.get("warnings") or []) if r.kind == "vacuum" else []
    return [f"{r.kind}: {w}" for w in found if w]


def print_summary(s: Summary) -> None:
    print(
        f"{'operation':<9} {'runs':>5} {'ok':>5} {'conflict':>8} {'failure':>7} "
        f"{'re-plans':>8} {'retried':>7} {'winners':>7} {'mean s':>6} {'max s':>6}"
    )
    for kind in OPERATION_WEIGHTS:
        secs = s.seconds.get(kind) or [0.0]
        print(
            f"{kind:<9} {s.runs[kind]:>5} {s.outcomes[(kind, 'ok')]:>5} "
            f"{s.outcomes[(kind, 'conflict')]:>8} {s.outcomes[(kind, 'failure')]:>7} "
            f"{s.replans[kind]:>8} {s.after_winners[kind]:>7} {s.winners_skipped[kind]:>7} "
            f"{sum(secs) / len(secs):>6.1f} {max(secs):>6.1f}"
        )
    total = sum(s.runs.values())
    by = Counter(o for (_, o), n in s.outcomes.items() for _ in range(n))
    print(f"{'total':<9} {total:>5} {by['ok']:>5} {by['conflict']:>8} {by['failure']:>7}")
    print(
        "  re-plans: delete re-planned after a conflict (--json attempts - 1); retried: "
        "commits that landed after other writers' commits (version > readVersion + 1); "
        "winners: those other commits"
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
        rows, shape, setup_version = setup_table(rng, target, build, dvtool)
        print(
            f"soak: seed {seed}, {args.backend} table {target.uri}, "
            f"{'partitioned by region' if shape.partitioned else 'unpartitioned'}, "
            f"{shape.num_files} files x {shape.rows_per_file:,} rows ({shape.num_rows:,} rows), "
            f"{args.workers} workers, {args.minutes:g} min, vacuum --retain {args.vacuum_retain}",
            flush=True,
        )
        deadline = time.time() + args.minutes * 60
        kinds = tuple(k for k in PREDICATE_WEIGHTS if k not in args.exclude_predicate)
        plans = [
            WorkerPlan(i, seed, deadline, target, shape, dvtool, args.vacuum_retain, kinds)
            for i in range(args.workers)
        ]
        records = run_workers(plans)
        save_records(records, workdir / "records.json")
        status = analyse(
            records, rows, setup_version, target, dvtool, retention_seconds(args.vacuum_retain)
        )
        if args.keep and args.backend == "s3":
            kept = args.table or workdir / "table"
            target.filesystem().get(target.fs_path(""), str(kept), recursive=True)
            print(f"table kept in {kept}")
    return status


def analyse(
    records: Sequence[OpRecord],
    rows: Sequence[Row],
    setup_version: int,
    target: Target,
    dvtool: Sequence[str],
    retain_s: float,
) -> int:
    """Check everything, print the summary; 0 when clean."""
    infos = read_commit_infos(target)
    f = Findings()
    check_log(infos, setup_version, records, f)
    expected = Expected(rows, max(infos))
    expected.replay(records, infos, f)
    reads = check_reads(records, expected, f)
    check_final(target, expected, dvtool, f, "after the workload")
    vacuumed = run_checked(dvtool, target, "vacuum", ["--retain", "0h", "--force"])
    check_final(target, expected, dvtool, f, "after a final vacuum --retain 0h")
    summary = summarize(records, infos)
    print_summary(summary)
    deletes = [r for r in records if r.kind == "delete" and r.outcome == "ok"]
    committed = [r for r in deletes if r.result.get("version") is not None]
    print(
        f"log: versions 0..{max(infos)} (setup up to v{setup_version}); "
        f"deletes committed {len(committed)}, matched nothing {len(deletes) - len(committed)}; "
        f"live rows {len(expected.alive):,} of {len(rows):,}"
    )
    print(f"reads checked against the expected row count of their version: {reads}")
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
