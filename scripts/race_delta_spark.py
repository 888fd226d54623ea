"""Race dvtool against the reference writer, Delta Spark, on one table (issue 24).

Delta Spark 4.4.0 (tests/engines/jvm_engines.py, local[2]) creates a table with deletion
vectors (`--row-tracking`: and row tracking) of `--rows` rows in `--files` files: `key`
0..rows-1 spread over every file, `n` = 0 (how many updates a row received), `v` = 'r' (the
list of them). Then, for `--seconds`, at the same time:

- Delta Spark runs DELETE, UPDATE and MERGE statements in a loop inside its own process
  (race_spark_loop.py), each tagged with its spec as the commit's userMetadata;
- spawned processes run dvtool's Python API in loops: `delete` (random `key % m = r AND n >=
  k` predicates), `optimize --purge`, `optimize` compaction and `vacuum --retain
  --vacuum-retain --force` (race_dvtool.py), each with a random pause between runs, all idle
  in the last 10 s of every 30 s: Delta Spark's statements take seconds and conflict with
  nearly every dvtool commit, so the quiet windows let some of them land;
- this process reads the latest version with deltalake every `--sample-every` seconds (time
  travel to that version number), keeping the rows for the ledger check; after the race,
  `--travel` more versions (evenly spread) are read by time travel (those whose files a
  vacuum already deleted cannot be: counted, not a finding).

Afterwards the ledger (race_ledger.py) replays every landed commit from `_delta_log` (what
each DELETE/UPDATE/MERGE targeted, race_workload.py) and each sampled version and the final
table are checked against it: 0 duplicated keys, 0 lost deletes, 0 resurrected or phantom
rows, 0 vanished rows, 0 lost or doubled updates (the per-row update count `n` and the list
of updates `v` must be the ledger's). The final table is read by Delta Spark, deltalake and
polars, which must agree. With row tracking, every key live at setup and at the end keeps
its `_metadata.row_id`, and row ids are unique. The summary gives the commits landed per
writer and operation, the conflicts on each side (Delta Spark: Concurrent*Exception per
class, the statement dropped; dvtool: re-plans after a conflict and CommitConflictErrors,
nothing committed; both: commits retried past non-conflicting winners, from `readVersion`),
the ledger's row counts and the findings. Exit 1 on any finding or unexpected error.

    .venv/bin/python scripts/race_delta_spark.py --seconds 180
    .venv/bin/python scripts/race_delta_spark.py --seconds 180 --row-tracking --seed 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
for _p in (str(SCRIPTS), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from race_dvtool import WorkerJob, WorkerReport, as_dict, run_worker  # noqa: E402
from race_ledger import FINDINGS, Ledger, commit_versions  # noqa: E402
from race_workload import Rows  # noqa: E402

Read = list[tuple[int, int, str]]
SPARK_WEIGHTS = {"delete": 1.0, "update": 2.0, "merge": 1.0}
PAUSES = {"delete": (1.0, 4.0), "purge": (3.0, 8.0), "compact": (5.0, 12.0), "vacuum": (5.0, 12.0)}


@dataclass
class RaceConfig:
    """The race's knobs (see `--help`)."""

    path: Path
    seconds: float = 180.0
    rows: int = 20_000
    files: int = 8
    row_tracking: bool = False
    seed: int = 1
    vacuum_retain: str = "60s"
    sample_every: float = 3.0
    travel: int = 10  # versions read by time travel after the race
    workers: tuple[str, ...] = ("delete", "purge", "compact", "vacuum")
    # The pause between two runs of each dvtool command (uniform in the range, seconds):
    # often enough to race every Delta Spark statement, rarely enough to let some land.
    pauses: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(PAUSES))
    cycle_s: float = 30.0  # dvtool's workers are idle in the last quiet_s of every cycle_s
    quiet_s: float = 10.0
    spark_pause_s: float = 0.0


@dataclass
class RaceResult:
    """What happened and what the checks found."""

    spark: dict[str, Any]
    workers: list[WorkerReport]
    ledger: Ledger
    findings: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    travelled: int = 0
    sample_failures: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # errors, disagreements, unknown commits

    @property
    def ok(self) -> bool:
        return not self.problems and not any(self.findings[f] for f in FINDINGS)

    @property
    def conflicts(self) -> int:
        """Every conflict either side detected."""
        spark = sum(self.spark.get("conflicts", {}).values())
        dvtool = sum(w.replans + w.conflicts for w in self.workers)
        return spark + dvtool + sum(self.ledger.winners.values())


# -- the table ---------------------------------------------------------------------------------


def create_table(session: Any, cfg: RaceConfig) -> int:
    """Create and fill the race table with Delta Spark; its setup version."""
    props = {"delta.enableDeletionVectors": "true"}
    if cfg.row_tracking:
        props["delta.enableRowTracking"] = "true"
    tbl = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    table = f"delta.`{cfg.path}`"
    session.sql(
        f"CREATE TABLE {table} (key BIGINT, n INT, v STRING) USING delta TBLPROPERTIES ({tbl})"
    )
    session.sql(
        f"INSERT INTO {table} SELECT /*+ REPARTITION({cfg.files}) */ id AS key, 0 AS n, "
        f"'r' AS v FROM range({cfg.rows})"
    )
    return max(commit_versions(cfg.path))


def read_deltalake(path: Path, version: int | None = None) -> Read:
    """(key, n, v) rows as deltalake reads them (at `version`), sorted."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(path), version=version)
    reader = QueryBuilder().register("t", table).execute("select key, n, v from t")
    return _rows(pa.table(reader.read_all()))


def read_polars(path: Path) -> Read:
    import polars as pl

    return _rows(pl.read_delta(str(path)).select("key", "n", "v").to_arrow())


def read_spark(session: Any, path: Path) -> Read:
    return _rows(session.arrow(f"SELECT key, n, v FROM delta.`{path}`"))


def _rows(table: Any) -> Read:
    cols = [table.column(c).to_pylist() for c in ("key", "n", "v")]
    return sorted(zip(*cols, strict=True))


def row_ids(session: Any, path: Path) -> dict[int, list[int]]:
    """key -> the `_metadata.row_id`s Delta Spark reads for it."""
    out: dict[int, list[int]] = {}
    query = f"SELECT key, _metadata.row_id AS rid FROM delta.`{path}`"
    for row in session.rows(query):
        out.setdefault(row["key"], []).append(row["rid"])
    return out


# -- the race ----------------------------------------------------------------------------------


class Sampler(threading.Thread):
    """Reads the latest version with deltalake every `every` seconds until stopped."""

    def __init__(self, path: Path, every: float) -> None:
        super().__init__(daemon=True)
        self.path, self.every = path, every
        self.reads: dict[int, Read] = {}
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            version = max(commit_versions(self.path))
            if version in self.reads:
                continue
            try:
                self.reads[version] = read_deltalake(self.path, version)
            except Exception as e:  # reported, a failed read is no finding
                self.failures.append(f"v{version}: {type(e).__name__}: {str(e)[:200]}")


def spark_request(cfg: RaceConfig) -> str:
    """The `JvmSession.python` code of Delta Spark's loop."""
    return (SCRIPTS / "race_spark_loop.py").read_text() + "\nresult = spark_loop(spark, args)\n"


def run_race(cfg: RaceConfig, session: Any) -> RaceResult:
    """Create the table, race both sides for `cfg.seconds`, check everything."""
    setup_version = create_table(session, cfg)
    initial = {k: (n, v) for k, n, v in read_deltalake(cfg.path, setup_version)}
    ids_before = row_ids(session, cfg.path) if cfg.row_tracking else {}
    jobs = [
        WorkerJob(
            kind,
            str(cfg.path),
            cfg.seconds,
            cfg.seed * 100 + i,
            cfg.pauses[kind],
            cfg.vacuum_retain,
            cfg.cycle_s,
            cfg.quiet_s,
        )
        for i, kind in enumerate(cfg.workers)
    ]
    args = {
        "path": str(cfg.path),
        "seconds": cfg.seconds,
        "seed": cfg.seed,
        "weights": SPARK_WEIGHTS,
        "key_end": cfg.rows,
        "scripts": str(SCRIPTS),
        "pause_s": cfg.spark_pause_s,
    }
    print(f"setup done (v{setup_version})", flush=True)
    sampler = Sampler(cfg.path, cfg.sample_every)
    with ProcessPoolExecutor(len(jobs), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_worker, job) for job in jobs]
        sampler.start()
        spark = session.python(spark_request(cfg), **args)
        workers = [f.result() for f in futures]
    sampler.stop.set()
    sampler.join()
    print("race done, checking", flush=True)
    return check(cfg, session, setup_version, initial, ids_before, spark, workers, sampler)


def check(
    cfg: RaceConfig,
    session: Any,
    setup_version: int,
    initial: Rows,
    ids_before: dict[int, list[int]],
    spark: dict[str, Any],
    workers: list[WorkerReport],
    sampler: Sampler,
) -> RaceResult:
    """Build the ledger and check the samples, the final reads and the row ids against it."""
    ledger = Ledger.build(cfg.path, setup_version, initial, cfg.rows)
    result = RaceResult(spark, workers, ledger, samples=len(sampler.reads))
    result.sample_failures = sampler.failures
    result.problems += ledger.unknown
    result.problems += [f"delta-spark: {e}" for e in spark.get("errors", [])]
    result.problems += [f"dvtool {w.kind}: {e}" for w in workers for e in w.errors]
    unread = [v for v in ledger.states if v not in sampler.reads and v != ledger.last_version]
    travel, failed = time_travel(cfg.path, unread, cfg.travel)
    result.travelled = len(travel)
    result.sample_failures += failed
    reads = {**sampler.reads, **travel}
    seen_absent: set[int] = set()
    for version in sorted(reads):
        if version in ledger.states:
            result.findings += ledger.check(version, reads[version], seen_absent)
    final = read_spark(session, cfg.path)
    for name, rows in (("deltalake", read_deltalake(cfg.path)), ("polars", read_polars(cfg.path))):
        if rows != final:
            result.problems.append(f"{name} reads {len(rows)} rows, Delta Spark {len(final)}")
    result.findings += ledger.check(ledger.last_version, final, seen_absent)
    if cfg.row_tracking:
        result.problems += check_row_ids(ids_before, row_ids(session, cfg.path))
    return result


def time_travel(path: Path, versions: list[int], count: int) -> tuple[dict[int, Read], list[str]]:
    """Up to `count` of `versions` (evenly spread) read by deltalake's time travel after the
    race; a version whose files a vacuum deleted cannot be read (reported, no finding)."""
    picked = sorted(versions)[:: max(1, len(versions) // max(1, count))][:count]
    reads: dict[int, Read] = {}
    failed = []
    for version in picked:
        try:
            reads[version] = read_deltalake(path, version)
        except Exception as e:  # a vacuumed version: reported
            failed.append(f"v{version} (time travel): {type(e).__name__}: {str(e)[:120]}")
    return reads, failed


def check_row_ids(before: dict[int, list[int]], after: dict[int, list[int]]) -> list[str]:
    """Row ids are unique, and every key live before and after kept its row id."""
    problems = []
    all_ids = [rid for rids in after.values() for rid in rids]
    if len(set(all_ids)) != len(all_ids):
        problems.append(f"row ids: {len(all_ids) - len(set(all_ids))} duplicated")
    changed = [k for k in before.keys() & after.keys() if sorted(before[k]) != sorted(after[k])]
    if changed:
        problems.append(f"row ids: {len(changed)} keys changed row id, e.g. {changed[:5]}")
    return problems


# -- the report --------------------------------------------------------------------------------


def summary(result: RaceResult) -> str:
    """The race in a few lines (see the module docstring)."""
    led, spark = result.ledger, result.spark
    lines = [
        f"commits landed: {dict(sorted(led.landed.items()))}",
        f"delta-spark: tried {spark.get('tried')}, succeeded {spark.get('landed')}, "
        f"conflicts {spark.get('conflicts')}",
    ]
    for w in result.workers:
        lines.append(
            f"dvtool {w.kind:<8} runs {w.runs:>4} commits {len(w.versions):>4} "
            f"re-plans {w.replans:>3} conflicts (gave up) {w.conflicts:>3} nothing {w.nothing:>3}"
        )
    lines.append(f"commits retried past non-conflicting winners: {dict(led.winners)}")
    lines.append(
        f"ledger: {len(led.states) - 1} commits replayed, rows deleted "
        f"{led.effects['deleted']}, updated {led.effects['updated']}, inserted "
        f"{led.effects['inserted']}; final rows {len(led.states[led.last_version])}"
    )
    lines.append(
        f"checked: {result.samples} versions sampled during the race, {result.travelled} read "
        "by time travel after it, the final table (Delta Spark, deltalake, polars agree)"
    )
    if result.sample_failures:
        lines.append(
            f"reads that failed (not findings: files vacuumed): {len(result.sample_failures)}, "
            f"e.g. {result.sample_failures[:2]}"
        )
    lines.append("findings: " + ", ".join(f"{f} {result.findings[f]}" for f in FINDINGS))
    lines += [f"PROBLEM: {p}" for p in result.problems[:20]]
    lines.append(
        f"conflicts detected in all: {result.conflicts}; " + ("OK" if result.ok else "FAILED")
    )
    return "\n".join(lines)


def parse_args(argv: list[str]) -> tuple[RaceConfig, bool]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--row-tracking", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--vacuum-retain", default="60s")
    parser.add_argument("--sample-every", type=float, default=3.0)
    parser.add_argument("--travel", type=int, default=10, help="versions time-travelled after")
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="also print the counts as JSON")
    a = parser.parse_args(argv)
    work = a.dir or Path(tempfile.mkdtemp(prefix="dvtool-race-"))
    cfg = RaceConfig(
        work / "table",
        a.seconds,
        a.rows,
        a.files,
        a.row_tracking,
        a.seed,
        a.vacuum_retain,
        a.sample_every,
        a.travel,
    )
    return cfg, a.json


def main(argv: list[str]) -> int:
    from tests.engines.jvm_engines import DELTA_SPARK, start

    cfg, as_json = parse_args(argv)
    shutil.rmtree(cfg.path, ignore_errors=True)
    began = time.monotonic()
    session = start(DELTA_SPARK, cfg.path.parent / "jvm")
    try:
        result = run_race(cfg, session)
    finally:
        session.stop()
    print(summary(result))
    if as_json:
        doc = {"spark": result.spark, "dvtool": [as_dict(w) for w in result.workers]}
        doc["findings"] = dict(result.findings)
        print(json.dumps(doc))
    print(f"table: {cfg.path}; {time.monotonic() - began:.0f}s in all")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
