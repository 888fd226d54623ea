"""Soak test: a randomized concurrent workload of real `dvtool` processes against one table.

Builds a table (8-16 data files of a few thousand rows written by deltalake's
`write_deltalake`, partitioned by `region` in some runs, then `dvtool enable`d), writes a
checkpoint of it (`dvtool checkpoint`) and, on a local table, ages the setup's log (see "Log
cleanup" below). Then `--workers` worker processes run until the deadline. Each worker loops,
picking at random and running as a CLI subprocess with `--json`:

- `delete --where P`, P a random predicate over the data and partition columns, built from a
  spec that also gives its meaning in plain Python (`predicate_sql` / `predicate_matches`);
- `optimize --purge` (sometimes `--min-deleted-ratio`), `optimize` compaction (a random
  `--target-size`, sometimes a partition `--where`), both sometimes with `--batch-size` 1
  or 2 (a commit per batch);
- `vacuum --retain R --force` (sometimes `--lite`), see "Vacuum retention" below;
- `restore --version V` (sometimes `--timestamp T`, T the modification time of commit V's
  file, Delta's commit time on a table without in-commit timestamps; sometimes `--dry-run`),
  V a random version from the end of the setup to just before the latest one the worker
  lists in `_delta_log`, half the time among the 15 newest;
- `checkpoint`, and `vacuum --log` (sometimes `--dry-run`), the log cleanup;
- `inspect --json` (sometimes `--verify`), a read.

Each operation's exit code is classified: 0 is success; 4 with a commit-conflict message
(`CommitConflictError`, see dvtool/errors.py, dvtool/delta/log/writer.py and, for a restore while a
vacuum runs, dvtool/commands/restore/plan.py) is a conflict; 5 from a restore whose message
says files it needs no longer exist (vacuumed) is a refusal, expected and counted apart, as
is 7 from a `vacuum --lite` that needs commits the log cleanup deleted (before any vacuum
recorded `_last_vacuum_info`, it reads the log from version 0; README: run a full vacuum
first); an optimize whose later batch conflicted names its earlier batches' versions;
anything else is an unexpected failure.

Signals (`--signals RATE`, default 0.15; 0: none): each operation, with probability RATE, is
sent SIGINT or SIGTERM (even odds) at a random moment, drawn from the median duration m of
its kind so far in its worker: uniform in 0..1.25 m, or half the time in 0.6..1.1 m, the end
of a run where the commits are (soak_signals.py). A signal that finds the process ended is
not sent. What a process sent signal S may then do is what dvtool documents (README
"Failures, retries and crashes"): exit 0 (the signal came during or after its commit's put:
a result like any other, checked as such; a post-commit checkpoint it skipped is counted,
not warned about); exit 128 + S (130, 143) with the `--json` error of kind `interrupted` or
`terminated` saying "interrupted (S) before committing", nothing of it in the log, or "after
committing version(s) A, B" (vacuum's START and END, optimize's batches), those versions
its commits; or, stopped while the interpreter was still starting, killed by the signal,
Python's own KeyboardInterrupt traceback through no dvtool module but `dvtool/__init__.py`
and `dvtool/__main__.py`, or exit 128 + S with at most one "before committing" line on
stderr. Those are the outcome "interrupted" (counted apart: stopped while starting, before
committing, after committing); any other answer to a signal (exit 70, exit 1, a traceback
through dvtool, a message naming another signal, output besides the error) is an unexpected
failure. Afterwards, all checked independently of dvtool's code:

- the log: versions contiguous from the oldest commit left to the last, no `txnId` twice,
  every commit after the setup claimed by exactly one operation of the matching kind
  (reported by a successful one, named by an interrupted one or in an optimize's conflict;
  a RESTORE by a restore; `checkpoint`, `vacuum --log` and dry runs commit nothing), and
  every claimed version is a commit of the claimer's kind, in order (a vacuum's START
  before its END). So a commit a stopped operation does not name, or a named one that is
  not there, is a mismatch; so is a delete or restore (one commit) that exits 130/143 after
  committing, and an interrupted vacuum that committed START without END (status FAILED);
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
    .venv/bin/python scripts/soak.py --minutes 10 --workers 4 --seed 7 --signals 0.15
    .venv/bin/python scripts/soak.py --minutes 2 --backend s3      # moto on 127.0.0.1

Exit status: 0 when there was no mismatch and no unexpected failure, 1 otherwise. With
`--keep` the work directory stays, with `records.json` (every operation: arguments, exit
code, stderr, JSON result); `--exclude-predicate KIND` keeps a predicate kind that a known
bug gets wrong from masking other problems.

Where the parts live (sibling modules in scripts/, imported from here): this file has the
argument parsing, the setup (moto S3, building, enabling and ageing the table), the run and
the analysis (`soak`, `analyse`); soak_table.py the table's location, shape and building and
the predicates (`predicate_sql` / `predicate_matches`); soak_ops.py the operations, running
dvtool and classifying its exits, and the worker loop; soak_signals.py the signals (when to
send one, running a process that gets it, what a stopped dvtool may answer); soak_log.py the
log read without
dvtool; soak_checks.py `Findings` and the checks of the log, the log cleanup and the
restores; soak_expected.py the replay model of the live rows (`Expected`) and the checks of
reads, time travel and the final table against it; soak_report.py the summary printed at the
end (with what the signals did, per kind of operation).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from soak_checks import Findings, check_log, check_restores
from soak_expected import Expected, check_final, check_reads, check_time_travel
from soak_log import VERSIONED_NAME, list_log, read_log
from soak_ops import OpRecord, WorkerPlan, head, run_dvtool, run_worker
from soak_report import (
    print_failures,
    print_log_cleanup,
    print_restores,
    print_signals,
    print_summary,
    summarize,
)
from soak_table import PREDICATE_WEIGHTS, Setup, Target, build_table

BUCKET = "dvtool-soak"
LOG_AGE_DAYS = 40  # the setup's log entries are aged this far (> delta.logRetentionDuration)
DAY_MS = 86_400_000


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
    p.add_argument(
        "--signals",
        type=float,
        default=0.15,
        metavar="RATE",
        help="the share of operations sent SIGINT or SIGTERM at a random moment "
        "(default 0.15; 0: none)",
    )
    p.add_argument("--dvtool", help="dvtool executable (default: this Python's `-m dvtool`)")
    args = p.parse_args(argv)
    if args.minutes <= 0 or args.workers < 1:
        p.error("--minutes must be positive and --workers at least 1")
    if not 0 <= args.signals <= 1:
        p.error("--signals must be between 0 and 1")
    if set(args.exclude_predicate) >= set(PREDICATE_WEIGHTS):
        p.error("--exclude-predicate: every predicate kind is excluded")
    if args.table is not None and args.table.exists() and any(args.table.iterdir()):
        p.error(f"--table {args.table}: the directory is not empty")
    return args


def save_records(records: Sequence[OpRecord], path: Path) -> None:
    """Every operation as JSON, for a post-mortem of a run kept with --keep."""
    path.write_text(json.dumps([asdict(r) for r in records], indent=1, default=str))


def retention_seconds(text: str) -> float:
    from dvtool.commands.vacuum.command import parse_duration

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
            f"{args.workers} workers, {args.minutes:g} min, vacuum --retain {args.vacuum_retain}, "
            f"signals to {args.signals:.0%} of the operations",
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
                i,
                seed,
                deadline,
                target,
                shape,
                dvtool,
                args.vacuum_retain,
                kinds,
                setup.version,
                args.signals,
            )
            for i in range(args.workers)
        ]
        records = run_workers(plans)
        save_records(records, workdir / "records.json")
        status = analyse(
            records,
            setup,
            target,
            dvtool,
            retention_seconds(args.vacuum_retain),
            seed,
            args.signals,
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
    signal_rate: float = 0.0,
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
    print_signals(records, signal_rate, summary)
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
