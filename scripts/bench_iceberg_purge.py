"""Benchmark: purging Iceberg deletes (rewriting data files without their deleted rows) with
dvtool, against a bare pyarrow floor and Iceberg Spark's `rewrite_data_files`.

The table (scripts/bench_iceberg_table.py): --rows rows (default 1,000,000) of 20 columns in
--files data files (default 10), v2 written by pyiceberg, v3 (the same rows) by Iceberg
Spark, in a SQL catalog on SQLite in a temporary folder under .bench/ (removed unless
--keep); then `dvtool delete --where "bucket < 100" --mode dv` (10% of the rows of every
file: v2 position deletes, v3 deletion vectors) makes the base every run starts from (a fresh
catalog entry registered at its metadata, as in bench_iceberg_delete.py). Per format
version, in the same run:

- the floor: one Python process per repeat that, given each data file's deleted positions
  (decoded beforehand, not timed), reads the file with `pyarrow.parquet.read_table`, drops
  the positions with a boolean mask and writes the rest with `pyarrow.parquet.write_table`
  in the table's codec (zstd, pyarrow's default level): files one after another, and on a
  thread pool of dvtool's size (max(2, cpus)); timed inside the process (imports not
  counted, pyarrow.dataset's included: read_table imports it on first use). The fair floor
  is the faster of the two;
- the rewrite core: one process per repeat opens the table through the catalog, reads its
  live files and their deletes (`dvtool.iceberg.live_files`: timed apart, "plan") and calls
  `dvtool.iceberg.data_file_rewrite.rewrite_data_files` once per data file (one output file
  per input, uncommitted, removed afterwards), sequentially and on the same pool as the
  floor. This is the part that must stay within 1.25x of the floor (goal);
- `dvtool.optimize("db.COPY", purge=True, catalog="bench")` (warm: one process, first call
  excluded) and `dvtool optimize db.COPY --catalog bench --purge --json` (process wall),
  when this dvtool's optimize purges Iceberg tables (probed with a dry run; otherwise the
  output says it was not measured). Goal: within 1.25x of the floor (it also plans, reads the
  deletes and commits);
- Iceberg Spark 1.12 (`local[2]`, a new session per version, a production JVM):
  `CALL bench.system.rewrite_data_files(table => 'db.COPY', options =>
  map('delete-file-threshold', '1'))` on --runs + 1 fresh copies (first excluded); reported,
  with what it did (it also bin-packs: files below its minimum size are combined).

Every purged copy is checked: pyiceberg reads the expected live rows (count, id sum, none
with bucket < 100) and plans no delete file. The rewrite core's files are checked too: the
rows they hold (count, id sum). With --profile the rewrite core runs once more under
cProfile (sequential) and the top functions are printed. Progress goes to stderr; stdout is
the table (or with --json one JSON document).

    .venv/bin/python scripts/bench_iceberg_purge.py                    # 1,000,000 rows
    .venv/bin/python scripts/bench_iceberg_purge.py --rows 200000 --skip-spark --profile
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# scripts/ is on sys.path: this script's directory
import bench_iceberg_table as bench
from bench_process import print_profile

FLOOR_TARGET = 1.25
WHERE = "bucket < 100"
THREADS = max(2, os.cpu_count() or 2)

PLAN_SNIPPET = """
import json, sys
import numpy as np
from dvtool.iceberg.live_files import DeletedBefore, live_files
from dvtool.iceberg.tables import open_from_catalog
table_name, out = sys.argv[1], sys.argv[2]
table = open_from_catalog("bench", table_name, {})
live = live_files(table)
plan = []
deleted = DeletedBefore(table.io, live.index).load(live.data)
for index, (data, rows) in enumerate(zip(live.data, deleted)):
    positions = out + f"/positions-{index}.npy"
    drop = (rows.positional | rows.by_equality).to_array()
    np.save(positions, np.array(drop, dtype=np.int64))
    plan.append({"path": data.path.removeprefix("file://"), "positions": positions,
                 "rows": int(data.record.record_count)})
print(json.dumps(plan))
"""

FLOOR_SNIPPET = """
import json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pyarrow as pa
import pyarrow.dataset  # read_table imports it (and pandas, when installed): not timed
import pyarrow.parquet as pq
plan, threads, out = json.loads(open(sys.argv[1]).read()), int(sys.argv[2]), sys.argv[3]
os.makedirs(out, exist_ok=True)

def rewrite(index):
    item = plan[index]
    table = pq.read_table(item["path"])
    keep = np.ones(table.num_rows, dtype=bool)
    keep[np.load(item["positions"])] = False
    kept = table.filter(pa.array(keep))
    pq.write_table(kept, os.path.join(out, f"floor-{index}.parquet"), compression="zstd")
    return kept.num_rows

began = time.perf_counter()
if threads > 1:
    with ThreadPoolExecutor(threads) as pool:
        rows = sum(pool.map(rewrite, range(len(plan))))
else:
    rows = sum(map(rewrite, range(len(plan))))
print(json.dumps({"seconds": time.perf_counter() - began, "rows": rows}))
"""

CORE_SNIPPET = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
import pyarrow.parquet as pq
from dvtool.iceberg.data_file_rewrite import RewriteSource, new_data_location, rewrite_data_files
from dvtool.iceberg.live_files import DeletedBefore, live_files
from dvtool.iceberg.snapshot_files import first_row_id
from dvtool.iceberg.tables import open_from_catalog
table_name, threads = sys.argv[1], int(sys.argv[2])
began = time.perf_counter()
table = open_from_catalog("bench", table_name, {})
live = live_files(table)
deleted = DeletedBefore(table.io, live.index).load(live.data)
sources = [
    RewriteSource(f.record, d.positional | d.by_equality, f.entry.data_sequence_number,
                  first_row_id(f.record))
    for f, d in zip(live.data, deleted)
]
planned = time.perf_counter()

def rewrite(source):
    record = source.data_file
    location = new_data_location(table.metadata, spec_id=record.spec_id, partition=record.partition)
    written = rewrite_data_files(table.io, table.metadata, [source], location,
                                 spec_id=record.spec_id, partition=record.partition)
    return location, written.record_count

if threads > 1:
    with ThreadPoolExecutor(threads) as pool:
        outputs = list(pool.map(rewrite, sources))
else:
    outputs = list(map(rewrite, sources))
done = time.perf_counter()
rows = sum(count for _, count in outputs)
id_sum = sum(
    pq.read_table(loc.removeprefix("file://"), columns=["id"]).column("id").to_numpy().sum()
    for loc, _ in outputs
)
for location, _ in outputs:
    table.io.delete(location)
print(json.dumps({"plan": planned - began, "seconds": done - planned, "rows": rows,
                  "id_sum": int(id_sum)}))
"""

PURGE_SNIPPET = """
import json, sys, time
args = json.loads(sys.argv[1])
import dvtool
times, docs = [], []
for table in args["tables"]:
    began = time.perf_counter()
    result = dvtool.optimize(table, purge=True, catalog="bench", dry_run=args["dry_run"])
    times.append(time.perf_counter() - began)
    docs.append(result.to_dict())
print(json.dumps({"times": times, "metrics": docs[-1].get("metrics")}))
"""


@dataclass
class Version:
    """One format version's measurements (seconds)."""

    version: int
    files: int = 0
    floor: dict[str, list[float]] = field(default_factory=dict)  # "seq", "threads"
    core: dict[str, list[float]] = field(default_factory=dict)
    core_plan: list[float] = field(default_factory=list)
    purge_warm: list[float] = field(default_factory=list)
    purge_first: float | None = None
    purge_cli: list[float] = field(default_factory=list)
    purge_metrics: Any = None
    purge_missing: str = ""
    spark: bench.SparkTimes | None = None
    deletes_left: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def make_base(base: bench.Base, version: int, env: dict[str, str], dvtool: str | None) -> None:
    """The base with deletes: a copy of the v`version` table after dvtool's delete of WHERE."""
    table = bench.register_copy(base, version, f"deleted_v{version}")
    cmd = [bench.dvtool_bin(dvtool), "delete", table, "--catalog", bench.CATALOG]
    bench.run_json([*cmd, "--where", WHERE, "--mode", "dv", "--json"], env, "dvtool delete")
    problems = bench.check(base, "broad", table, "base with deletes")
    if problems:
        sys.exit("\n".join(problems))
    base.metadata[version] = str(base.catalog.load().load_table(table).metadata_location)


class Runner:
    """The measured children of one format version, and their checks."""

    def __init__(self, base: bench.Base, args: argparse.Namespace, workdir: Path) -> None:
        self.base, self.args, self.workdir = base, args, workdir
        self.env = base.catalog.env()
        self.count = 0

    def copies(self, version: int, n: int, label: str) -> list[str]:
        self.count += n
        return [
            bench.register_copy(self.base, version, f"{label}_{self.count - i}") for i in range(n)
        ]

    def check_purged(self, result: Version, tables: list[str], what: str) -> None:
        """The rows are right (a failure otherwise); the delete files pyiceberg still plans
        with the data files are counted (reported: none means the deletes were purged)."""
        for table in tables:
            result.problems += bench.check(self.base, "broad", table, what)
            loaded = self.base.catalog.load().load_table(table)
            left = {d.file_path for task in loaded.scan().plan_files() for d in task.delete_files}
            result.deletes_left[what] = len(left)

    def plan(self, version: int) -> Path:
        """Each live data file's deleted positions (.npy), for the floor; the plan file."""
        out = self.workdir / f"plan-v{version}"
        out.mkdir(parents=True, exist_ok=True)
        table = self.copies(version, 1, "plan")[0]
        python = bench.dvtool_python(self.args.dvtool)
        plan = bench.run_json([python, "-c", PLAN_SNIPPET, table, str(out)], self.env, "plan")
        path = out / "plan.json"
        path.write_text(json.dumps(plan))
        return path

    def floor(self, result: Version, plan: Path) -> None:
        expected = self.base.expected["broad"][0]
        for label, threads in (("seq", 1), ("threads", THREADS)):
            out = self.workdir / "floor-out"
            cmd = [sys.executable, "-c", FLOOR_SNIPPET, str(plan), str(threads), str(out)]
            doc = bench.run_json(cmd, self.env, "floor")
            shutil.rmtree(out, ignore_errors=True)
            result.floor.setdefault(label, []).append(doc["seconds"])
            if doc["rows"] != expected:
                result.problems.append(f"floor wrote {doc['rows']:,} rows, not {expected:,}")

    def core(self, result: Version) -> None:
        python = bench.dvtool_python(self.args.dvtool)
        table = self.copies(result.version, 1, "core")[0]
        for label, threads in (("seq", 1), ("threads", THREADS)):
            cmd = [python, "-c", CORE_SNIPPET, table, str(threads)]
            doc = bench.run_json(cmd, self.env, "rewrite core")
            result.core.setdefault(label, []).append(doc["seconds"])
            result.core_plan.append(doc["plan"])
            if (doc["rows"], doc["id_sum"]) != self.base.expected["broad"]:
                result.problems.append(
                    f"rewrite core wrote {doc['rows']:,} rows (id sum {doc['id_sum']}), "
                    f"expected {self.base.expected['broad']}"
                )

    def purge_available(self, version: int) -> str:
        """Empty when this dvtool purges Iceberg tables, else why not (its error)."""
        table = self.copies(version, 1, "probe")[0]
        spec = json.dumps({"tables": [table], "dry_run": True})
        python = bench.dvtool_python(self.args.dvtool)
        done = subprocess.run(
            [python, "-c", PURGE_SNIPPET, spec],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        lines = done.stderr.strip().splitlines()
        return "" if done.returncode == 0 else (lines[-1] if lines else f"exit {done.returncode}")

    def purge(self, result: Version) -> None:
        result.purge_missing = self.purge_available(result.version)
        if result.purge_missing:
            return
        tables = self.copies(result.version, self.args.runs + 1, "purge")
        spec = json.dumps({"tables": tables, "dry_run": False})
        python = bench.dvtool_python(self.args.dvtool)
        doc = bench.run_json([python, "-c", PURGE_SNIPPET, spec], self.env, "dvtool purge")
        result.purge_first, result.purge_warm = doc["times"][0], doc["times"][1:]
        result.purge_metrics = doc["metrics"]
        self.check_purged(result, tables, "dvtool purge")
        executable = bench.dvtool_bin(self.args.dvtool)
        for table in self.copies(result.version, self.args.runs, "purge_cli"):
            cmd = [executable, "optimize", table, "--catalog", bench.CATALOG, "--purge", "--json"]
            result.purge_cli.append(bench.timed_process(cmd, self.env, "dvtool optimize --purge"))
            self.check_purged(result, [table], "dvtool optimize --purge (CLI)")

    def spark(self, result: Version) -> None:
        tables = self.copies(result.version, self.args.runs + 1, "spark")
        statements = [
            f"CALL {bench.CATALOG}.system.rewrite_data_files(table => '{t}', "
            "options => map('delete-file-threshold', '1'))"
            for t in tables
        ]
        workdir = self.workdir / f"spark-v{result.version}"
        result.spark = bench.spark_measure(self.base.catalog, statements, workdir, rows=True)
        self.check_purged(result, tables, "iceberg-spark rewrite_data_files")

    def profile(self, version: int) -> None:
        table = self.copies(version, 1, "profile")[0]
        out = bench.ROOT / ".bench" / "profiles" / f"iceberg-rewrite-core-v{version}.prof"
        out.parent.mkdir(parents=True, exist_ok=True)
        python = bench.dvtool_python(self.args.dvtool)
        script = self.workdir / "rewrite_core.py"
        script.write_text(CORE_SNIPPET)
        cmd = [python, "-m", "cProfile", "-o", str(out), str(script), table, "1"]
        bench.run_json(cmd, self.env, "rewrite core under cProfile")
        print(f"profile: rewrite core v{version}, sequential (not timed): {out}")
        print_profile(out)


def measure(runner: Runner, version: int) -> Version:
    result = Version(version, files=runner.base.files)
    plan = runner.plan(version)
    for repeat in range(runner.args.runs):
        runner.floor(result, plan)
        runner.core(result)
        bench.progress(
            f"v{version} repeat {repeat + 1}: floor seq {result.floor['seq'][-1]:.2f} s, "
            f"threads {result.floor['threads'][-1]:.2f} s; core seq "
            f"{result.core['seq'][-1]:.2f} s, threads {result.core['threads'][-1]:.2f} s"
        )
    runner.purge(result)
    if not runner.args.skip_spark:
        runner.spark(result)
    return result


def summary(result: Version) -> dict[str, Any]:
    med = bench.median
    floors = {k: med(v) for k, v in result.floor.items()}
    fair = min(floors, key=lambda k: floors[k])
    cores = {k: med(v) for k, v in result.core.items()}
    doc: dict[str, Any] = {
        "version": result.version,
        "floor": {"median": floors, "runs": result.floor, "fair": fair},
        "rewrite_core": {
            "median": cores,
            "runs": result.core,
            "plan_median": med(result.core_plan),
            "ratio_to_fair_floor": {k: v / floors[fair] for k, v in cores.items()},
            "ratio_same_mode": {k: v / floors[k] for k, v in cores.items()},
            "paired_same_mode": {
                k: statistics.median(
                    c / f for c, f in zip(result.core[k], result.floor[k], strict=True)
                )
                for k in cores
            },
            "target": FLOOR_TARGET,
        },
        "delete_files_left": result.deletes_left,
    }
    if result.purge_missing:
        doc["purge"] = {"measured": False, "why": result.purge_missing}
    else:
        warm = med(result.purge_warm)
        doc["purge"] = {
            "measured": True,
            "warm_median": warm,
            "warm": result.purge_warm,
            "first": result.purge_first,
            "cli_median": med(result.purge_cli),
            "cli": result.purge_cli,
            "ratio_to_fair_floor": warm / floors[fair],
            "metrics": result.purge_metrics,
            "target": FLOOR_TARGET,
        }
    if result.spark is not None:
        s = result.spark
        doc["iceberg_spark"] = {
            "version": s.version,
            "start": s.start,
            "first": s.first,
            "warm_median": med(s.warm),
            "warm": s.warm,
            "ratio_to_fair_floor": med(s.warm) / floors[fair],
            "output": s.outputs[-1] if s.outputs else None,
        }
        if not result.purge_missing:
            purge = doc["purge"]
            doc["iceberg_spark"]["ratio_to_dvtool_warm"] = med(s.warm) / purge["warm_median"]
            counted = (s.start + s.first) / purge["cli_median"]
            doc["iceberg_spark"]["ratio_startup_counted"] = counted
    return doc


def print_table(docs: list[dict[str, Any]], header: list[str]) -> None:
    for line in header:
        print(line)
    print(f"{'v':2s} {'what':44s} {'median':>8s} {'/ floor':>8s}")
    for doc in docs:
        v = f"v{doc['version']}"
        floor = doc["floor"]
        for mode, label in (("seq", "one after another"), ("threads", f"{THREADS}-thread pool")):
            print(f"{v:2s} {'floor, ' + label:44s} {floor['median'][mode]:7.2f}s")
        core = doc["rewrite_core"]
        for mode, label in (("seq", "one after another"), ("threads", f"{THREADS}-thread pool")):
            print(
                f"{v:2s} {'rewrite core, ' + label:44s} {core['median'][mode]:7.2f}s "
                f"{core['ratio_to_fair_floor'][mode]:7.2f}x  (same mode: "
                f"{core['ratio_same_mode'][mode]:.2f}x, paired "
                f"{core['paired_same_mode'][mode]:.2f}x)"
            )
        print(f"{v:2s} {'  plan (live files, deletes read)':44s} {core['plan_median']:7.2f}s")
        purge = doc["purge"]
        if purge["measured"]:
            print(
                f"{v:2s} {'dvtool.optimize(purge=True), warm':44s} {purge['warm_median']:7.2f}s "
                f"{purge['ratio_to_fair_floor']:7.2f}x"
            )
            print(f"{v:2s} {'dvtool optimize --purge, process':44s} {purge['cli_median']:7.2f}s")
            print(f"{v:2s}   dvtool metrics: {json.dumps(purge['metrics'], sort_keys=True)}")
        else:
            print(f"{v:2s} dvtool optimize --purge: NOT MEASURED ({purge['why']})")
        if s := doc.get("iceberg_spark"):
            print(
                f"{v:2s} {'Iceberg Spark rewrite_data_files, warm':44s} {s['warm_median']:7.2f}s "
                f"{s['ratio_to_fair_floor']:7.2f}x  (start {s['start']:.1f} s, first "
                f"{s['first']:.2f} s)"
            )
            if "ratio_to_dvtool_warm" in s:
                print(
                    f"{v:2s}   Iceberg Spark / dvtool: warm {s['ratio_to_dvtool_warm']:.1f}x; "
                    f"start-up counted ((start + first) / dvtool process) "
                    f"{s['ratio_startup_counted']:.1f}x"
                )
            print(f"{v:2s}   Iceberg Spark did: {json.dumps(s['output'])}")
        for what, left in doc["delete_files_left"].items():
            print(f"{v:2s}   after {what}: pyiceberg plans {left} delete files with the data")
    print(
        f"floor: read_table + mask + write_table(zstd) per file, deleted positions given; fair "
        f"floor = the faster mode; target: rewrite core and purge <= {FLOOR_TARGET}x the floor"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in all (1,000,000)")
    parser.add_argument("--files", type=int, default=10, help="data files (10)")
    parser.add_argument("--runs", type=int, default=3, help="repeats (+1 first for peers)")
    parser.add_argument("--versions", default="2,3", help="format versions: 2,3")
    parser.add_argument("--skip-spark", action="store_true", help="no Iceberg Spark peer")
    parser.add_argument("--profile", action="store_true", help="profile the rewrite core")
    parser.add_argument("--dvtool", help="dvtool executable (default: this environment's)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    args.versions = [int(v) for v in args.versions.split(",")]
    return args


def main() -> None:
    args = parse_args()
    load_before = bench.load_average()
    (bench.ROOT / ".bench").mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="iceberg-purge-", dir=bench.ROOT / ".bench"))
    results = []
    try:
        bench.progress(f"building the tables in {root} ...")
        began = time.perf_counter()
        base = bench.build_v2(root / "catalog", args.files, args.rows // args.files)
        if 3 in args.versions:
            session = bench.spark_session(root / "spark-build")
            try:
                bench.build_v3(session, base)
            finally:
                session.stop()
        runner = Runner(base, args, root)
        for version in args.versions:
            make_base(base, version, runner.env, args.dvtool)
        bench.progress(f"built in {time.perf_counter() - began:.1f} s")
        for version in args.versions:
            result = measure(runner, version)
            for problem in result.problems:
                bench.progress(f"FAILED: {problem}")
            if result.problems:
                sys.exit(1)
            results.append(result)
        if args.profile:
            for version in args.versions:
                runner.profile(version)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(args, results, load_before)


def report(args: argparse.Namespace, results: list[Version], load: float) -> None:
    import pyarrow
    import pyiceberg

    docs = [summary(r) for r in results]
    env = {
        "rows": args.rows,
        "files": args.files,
        "columns": 20,
        "where": WHERE,
        "runs": args.runs,
        "threads": THREADS,
        "pyarrow": pyarrow.__version__,
        "pyiceberg": pyiceberg.__version__,
        "cpus": os.cpu_count(),
        "load_before": load,
        "load_after": bench.load_average(),
        "command": shlex.join(["scripts/bench_iceberg_purge.py", *sys.argv[1:]]),
    }
    if args.json:
        print(json.dumps({"table": env, "versions": docs}, indent=1))
        return
    print_table(
        docs,
        [
            f"table: {args.rows:,} rows x 20 columns in {args.files} data files; deletes: "
            f"dvtool delete --where '{WHERE}' (v2 position deletes, v3 DVs); {args.runs} repeats",
            f"pyarrow {env['pyarrow']}  pyiceberg {env['pyiceberg']}  cpus {env['cpus']}  "
            f"load (1 min) {load:.2f} before, {env['load_after']:.2f} after",
        ],
    )
    print(f"reproduce: {env['command']}")


if __name__ == "__main__":
    main()
