"""Benchmark: `dvtool optimize --purge` (arrow and Spark engines) against a bare pyarrow floor.

Two shapes (--shape). narrow (the default) builds once, in .bench/purge-base/, a table of
--files data files of --rows-per-file rows (id int64 sequential, key int64 random with a fixed
seed, payload a 20-character string), written by deltalake.write_deltalake (one append per
file), then `dvtool enable` and `dvtool delete --where "key % 10 = 3"`, which leaves a DV
deleting ~10% of the rows on every file (checked with `dvtool inspect --json`). Each measured
run works on a fresh copy of it. Per repeat, in the same run, each in its own process:

- the floor: a Python process that decodes the DVs (dvtool.delta.dvstore.DVStore, as dvtool
  must too: DV decoding is INCLUDED in the floor), then per file `pyarrow.parquet.read_table`
  (all columns), drops the DV's rows with a boolean mask and `pyarrow.parquet.write_table`
  (snappy). Twice: files one after another, and on a thread pool of the size dvtool's arrow
  engine uses (max(2, os.cpu_count())). The fair floor is the faster of the two. A third
  run, the durable floor, writes each file beside its input (in its partition directory)
  and fsyncs it and its directory on the same pool: what any local writer pays before a
  commit may name the file, and what dvtool does (in the background);
- `dvtool optimize COPY --purge --engine arrow --json`, the real CLI;
- Spark start-up alone: a process that imports dvtool's Spark engine and pyspark, starts the
  session exactly as dvtool does (`SparkEngine().session()`, local[*]) and stops it;
- `dvtool optimize COPY --purge --engine spark --json`; "without start-up" subtracts the
  start-up (import + session start + stop) measured above;
- with `--stock-cluster`: the same on a loopback standalone cluster (one worker) whose
  executors' Python has only pyarrow, pandas and numpy (tests/engines/stock_python.py; no
  dvtool: dvtool ships itself), started once before the repeats. Its "tree RSS" is the
  driver's (dvtool's Python and its JVM): the executors run under the worker.

Wall times include interpreter start-up for every process (the floor's time measured inside
its process is printed too). Peak RSS: the main process's ru_maxrss (taken by GNU time, else a
bare Python wrapper, so this process's own RSS is not inherited) and, on Linux, the peak of the
summed RSS of the whole process tree sampled every 0.1 s (Spark runs a JVM and Python workers
beside the driver, which ru_maxrss does not see). The 1-minute load average is printed: other
work on the machine skews every number. After each purge the script checks that
polars reads the expected rows (none with key % 10 = 3) and that `dvtool inspect --json`
reports no file with a DV. Prints medians and ratios to the floor (targets: arrow <= 1.25x,
Spark without start-up <= 3x; the verdict uses median/median, the median of the per-repeat
ratios and best/best are printed beside it because load from other work varies between
repeats) and the command to reproduce.

--shape small-files: the streaming-ingest table of bench_delete.py --shape small-files (5,000
files x 2,000 rows, batch int64 partition column with one file per partition; id, key,
payload as above), built by that script's code and copied to .bench/purge-base/, then `dvtool
delete --where "key % 10 = 3"` (a DV on every file, checked). Spark is not run for it. Per
repeat, besides the two floors and `dvtool optimize --purge --engine arrow`:

- `dvtool optimize COPY --engine arrow --json`: compaction at the default target size (bins
  are per partition, so with one file per partition it rewrites each file that has a DV);
- `DeltaTable(COPY).optimize.compact()` (deltalake, on an identical copy of the table with its
  DVs); the output reports what it did (with one file per partition it has nothing to
  bin-pack and leaves the DVs in place) and checks that polars reads the same rows after it;
- `dvtool inspect BASE --json`: start-up + log replay of the 5,000 adds with DVs, the fixed
  and per-file part of the purge that is not reading DVs, rewriting or committing.

It prints, besides the table above, purge / deltalake compact and compaction / deltalake
compact (target: <= 1, at least as fast) and the cost per file (wall time / file count).

Every child runs with bytecode caches, as an installed package does and as bench_startup.py
measures (PYTHONDONTWRITEBYTECODE unset, PYTHONPYCACHEPREFIX=.bench/pycache), after one
unmeasured warm-up process of each kind. With --profile, after the repeats each dvtool command
of the shape runs once more on a fresh copy under `python -m cProfile -o
.bench/profiles/purge-SHAPE-WHAT.prof` (not timed) and the top 15 functions are printed
(dvtool's by cumulative time, all by own time): where the per-file time goes.

    .venv/bin/python scripts/bench_purge.py [--repeat 3] [--files 20] [--rows-per-file 1000000]
    .venv/bin/python scripts/bench_purge.py --files 4 --rows-per-file 200000   # smoke run
    .venv/bin/python scripts/bench_purge.py --skip-spark
    .venv/bin/python scripts/bench_purge.py --stock-cluster   # also on a stock-worker cluster
    .venv/bin/python scripts/bench_purge.py --shape small-files [--repeat 3] [--profile]
    .venv/bin/python scripts/bench_purge.py --shape small-files --files 200   # smoke run

Delta Spark peer (issue 24; --skip-delta-spark to leave it out): after the repeats, Delta
Spark 4.4.0 (local[2], tests/engines/jvm_engines.py) runs
`REORG TABLE delta.`COPY` APPLY (PURGE)` on
--delta-spark-runs fresh copies of the same base table, and dvtool runs the same command
through its Python API in one process on as many copies; every copy is checked like
dvtool's. Session start, the first (JIT warm-up) statement and the warm median are timed
apart; bench_delta_spark.py says exactly what each ratio divides.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# scripts/ is on sys.path: this script's directory
import bench_delta_spark
from bench_process import print_profile, tree_rss

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / ".bench"
RUNS = BENCH / "purge-runs"
WHERE = "key % 10 = 3"
SEED = 20240601
ARROW_TARGET = 1.25
SPARK_TARGET = 3.0

FLOOR_SNIPPET = """
import json, os, sys, time
started = time.perf_counter()
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.delta.dvstore import DVStore
from dvtool.storage.table_storage import Storage

root, threads, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[4]
with open(sys.argv[3]) as f:
    plan = json.load(f)
imported = time.perf_counter()
storage = Storage.for_table(root)
store = DVStore(storage)
drops = [
    store.load(
        DeletionVectorDescriptor.from_json(item["deletion_vector"]),
        data_file=item["path"],
        num_records=item["num_records"],
    )
    for item in plan
]
decoded = time.perf_counter()
if out_dir != "durable":
    os.makedirs(out_dir, exist_ok=True)

durable = out_dir == "durable"  # beside each input, file and directory fsynced

def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

def rewrite(index):
    source = storage.resolve(plan[index]["path"])
    table = pq.read_table(source)
    keep = np.ones(table.num_rows, dtype=bool)
    keep[np.frombuffer(drops[index].to_array(), dtype=np.uint64)] = False
    kept = table.filter(pa.array(keep))
    directory = os.path.dirname(source) if durable else out_dir
    target = os.path.join(directory, f"part-{index:05d}-floor.snappy.parquet")
    pq.write_table(kept, target, compression="snappy")
    if durable:
        fsync_path(target)
        fsync_path(directory)
    return kept.num_rows

if threads > 1:
    with ThreadPoolExecutor(threads) as pool:
        rows = sum(pool.map(rewrite, range(len(plan))))
else:
    rows = sum(map(rewrite, range(len(plan))))
done = time.perf_counter()
print(json.dumps({
    "import": imported - started, "decode": decoded - imported,
    "rewrite": done - decoded, "seconds": done - imported, "rows": rows,
}))
"""

SPARK_STARTUP_SNIPPET = """
import json, time
started = time.perf_counter()
from dvtool.engines import SparkSettings
from dvtool.engines.spark.engine import SparkEngine
import pyspark.sql
imported = time.perf_counter()
engine = SparkEngine(SparkSettings())
spark = engine.session()
session = time.perf_counter()
version = spark.version
engine.stop()
stopped = time.perf_counter()
print(json.dumps({
    "import": imported - started, "session": session - imported,
    "stop": stopped - session, "seconds": stopped - started, "version": version,
}))
"""

DELTALAKE_COMPACT_SNIPPET = """
import json, sys
from deltalake import DeltaTable
print(json.dumps(DeltaTable(sys.argv[1]).optimize.compact()))
"""
WARM_DELTALAKE = """
import sys
from deltalake import DeltaTable
DeltaTable(sys.argv[1]).file_uris()
"""

GNU_TIME = Path("/usr/bin/time")
RSS_WRAPPER = """
import os, subprocess, sys
start = os.times().elapsed
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
kib = usage.ru_maxrss // (1024 if sys.platform == "darwin" else 1)
open(sys.argv[1], "w").write(f"{os.times().elapsed - start:.2f} {kib}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass
class Child:
    """One measured child process."""

    seconds: float
    peak_rss: int  # bytes, largest single process (ru_maxrss)
    tree_rss: int | None  # bytes, sampled peak of the sum over the process tree (Linux)
    stdout: str
    stderr: str
    returncode: int

    def error(self) -> str:
        lines = (self.stderr or self.stdout).strip().splitlines()
        return f"exit {self.returncode}: " + (lines[-1] if lines else "(no output)")


def with_caches(env: dict[str, str]) -> dict[str, str]:
    """`env` with bytecode caches on, under .bench/pycache (see bench_startup.py): as an
    installed package; with PYTHONDONTWRITEBYTECODE set every run compiles dvtool again."""
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(BENCH / "pycache")
    return env


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> Child:
    """Run `cmd`; its wall time, peak RSS (largest process, and sampled tree sum on Linux).

    The per-process peak is measured by a small parent (GNU time, else a bare Python wrapper)
    rather than by this process, whose ru_maxrss a forked child would inherit.
    """
    linux = sys.platform.startswith("linux") and Path("/proc/self/stat").exists()
    with tempfile.TemporaryDirectory() as tmp:
        report, out, err = Path(tmp) / "rss", Path(tmp) / "out", Path(tmp) / "err"
        if linux and GNU_TIME.exists():
            wrapped = [str(GNU_TIME), "-f", "%e %M", "-o", str(report), *cmd]
        else:
            wrapped = [sys.executable, "-c", RSS_WRAPPER, str(report), *cmd]
        tree = 0
        with out.open("w") as stdout, err.open("w") as stderr:
            start = time.perf_counter()
            child_env = with_caches(dict(os.environ) if env is None else env)
            proc = subprocess.Popen(wrapped, stdout=stdout, stderr=stderr, env=child_env)
            while proc.poll() is None:
                if linux:
                    tree = max(tree, tree_rss(proc.pid))
                time.sleep(0.1)
            seconds = time.perf_counter() - start
        kib = int(report.read_text().split()[-1]) if report.exists() else 0
        return Child(
            seconds,
            kib * 1024,
            tree if linux else None,
            out.read_text(),
            err.read_text(),
            proc.returncode,
        )


def checked(child: Child, what: str) -> Child:
    if child.returncode != 0:
        sys.exit(f"{what} failed ({child.error()}):\n{child.stderr}{child.stdout}")
    return child


DVTOOL_BIN: str | None = None


def dvtool_bin() -> str:
    """--dvtool, or this environment's (see bench_inspect.py on runtime-only installs)."""
    return DVTOOL_BIN or str(Path(sys.executable).parent / "dvtool")


def dvtool_has_pandas() -> bool | None:
    """Whether pandas is importable beside the dvtool executable (None: unknown).

    pyarrow imports pandas, when installed, at the first `pa.array` of Python objects: in
    dvtool that is reading the log, ~0.2 s of start-up the floor process does not pay (it
    does not build such arrays), so the arrow ratio is only fair from a runtime-only install.
    """
    python = Path(dvtool_bin()).parent / "python"
    if not python.exists():
        return None
    probe = "import importlib.util; print(importlib.util.find_spec('pandas') is not None)"
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    return out.stdout.strip() == "True" if out.returncode == 0 else None


def dvtool_json(*args: str) -> Any:
    child = checked(run_child([dvtool_bin(), *args, "--json"]), f"dvtool {args[0]}")
    return json.loads(child.stdout)


def generate(index: int, rows: int) -> Any:
    """File `index`: ids continue across files, keys are random in [0, 1e15)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first = index * rows
    ids = pa.array(range(first, first + rows), pa.int64())
    keys = pc.cast(pc.floor(pc.multiply(pc.random(rows, initializer=SEED + index), 1e15)), "int64")
    payload = pc.binary_join_element_wise(
        "payload-", pc.utf8_lpad(pc.cast(ids, pa.string()), 12, padding="0"), ""
    )
    return pa.table({"id": ids, "key": keys, "payload": payload})


def data_files(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts)


def base_table(shape: str, files: int, rows: int) -> tuple[Path, dict[str, Any]]:
    """The cached base table with a DV on every file (built once; a marker says it is done)."""
    if shape == "small-files":
        return small_files_base(files, rows)
    name = f"{files}x{rows}"
    table = BENCH / "purge-base" / name
    marker = BENCH / "purge-base" / f"{name}.ready"
    if marker.exists() and table.is_dir():
        return table, json.loads(marker.read_text())
    import pyarrow.compute as pc
    from deltalake import write_deltalake

    shutil.rmtree(table, ignore_errors=True)
    table.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    deleted = 0
    for index in range(files):
        data = generate(index, rows)
        deleted += pc.sum(pc.equal(_mod10(data), 3)).as_py()
        write_deltalake(str(table), data, mode="append")
    written = len(data_files(table))
    if written != files:
        sys.exit(f"expected {files} data files in {table}, deltalake wrote {written}")
    dvtool_json("enable", str(table))
    dvtool_json("delete", str(table), "--where", WHERE)
    check_base(table, files, deleted)
    state = {
        "files": files,
        "rows_per_file": rows,
        "seed": SEED,
        "where": WHERE,
        "deleted_rows": deleted,
        "expected_rows": files * rows - deleted,
    }
    marker.write_text(json.dumps(state))
    took = time.perf_counter() - started
    print(f"built {table} ({files} files x {rows:,} rows, DVs on all) in {took:.1f} s", flush=True)
    return table, state


def check_base(table: Path, files: int, deleted: int) -> None:
    """Exit unless `dvtool inspect` sees a DV on every file and `deleted` deleted rows."""
    info = dvtool_json("inspect", str(table))
    if info["files_with_dvs"] != files or info["deleted_rows"] != deleted:
        sys.exit(
            f"base table {table}: {info['files_with_dvs']} files with DVs and "
            f"{info['deleted_rows']} deleted rows; expected {files} and {deleted}"
        )


def small_files_base(files: int, rows: int) -> tuple[Path, dict[str, Any]]:
    """bench_delete.py's small-files table (its code and its cached base), copied, with a DV
    deleting `WHERE` on every file (made by dvtool delete)."""
    import bench_delete  # scripts/ is on sys.path: this script's directory
    import pyarrow.compute as pc

    name = f"small-files-{files}x{rows}"
    table = BENCH / "purge-base" / name
    marker = BENCH / "purge-base" / f"{name}.ready"
    if marker.exists() and table.is_dir():
        return table, json.loads(marker.read_text())
    started = time.perf_counter()
    bench_delete.DVTOOL_BIN = DVTOOL_BIN
    source = bench_delete.base_table("small-files", files, rows, enable_dvs=True)
    deleted = pc.sum(pc.equal(_mod10(bench_delete.generate_small_files(files, rows)), 3)).as_py()
    shutil.rmtree(table, ignore_errors=True)
    shutil.copytree(source, table)
    dvtool_json("delete", str(table), "--where", WHERE)
    check_base(table, files, deleted)
    state = {
        "shape": "small-files",
        "files": files,
        "rows_per_file": rows,
        "seed": bench_delete.SEED,
        "where": WHERE,
        "deleted_rows": deleted,
        "expected_rows": files * rows - deleted,
    }
    marker.write_text(json.dumps(state))
    took = time.perf_counter() - started
    print(f"built {table} ({files} files x {rows:,} rows, DVs on all) in {took:.1f} s", flush=True)
    return table, state


def _mod10(data: Any) -> Any:
    import pyarrow.compute as pc

    key = data["key"]  # non-negative, so truncating division gives Spark's %
    return pc.subtract(key, pc.multiply(pc.divide(key, 10), 10))


def fresh_copy(base: Path, name: str) -> Path:
    target = RUNS / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    os.sync()  # no write-back of the copy during the measurement
    return target


def purge_plan(table: Path) -> list[dict[str, Any]]:
    """Path, numRecords and DV descriptor of every live file with a DV (read before timing)."""
    info = dvtool_json("inspect", str(table), "--files")
    return [
        {
            "path": f["path"],
            "num_records": f["num_records"],
            "deletion_vector": f["deletion_vector"],
        }
        for f in info["files"]
        if f["deletion_vector"] is not None
    ]


def verify_rows(table: Path, state: dict[str, Any], what: str) -> list[str]:
    """Problems with the rows polars reads from `table`: the expected count, none matching.

    Past bench_delete.POLARS_MAX_DVS DVs (deltalake, which polars uses to load them, can hang
    with more than 512) the rows are read by bench_delete.own_check (pyarrow + pyroaring)."""
    import bench_delete
    import polars as pl

    if bench_delete.dv_count(table) > bench_delete.POLARS_MAX_DVS:
        height, _, still = bench_delete.own_check(table, "id", "key", lambda k: k % 10 == 3)
        if height != state["expected_rows"] or still:
            return [
                f"{what}: pyarrow + pyroaring read {height:,} rows ({still:,} with {WHERE}); "
                f"expected {state['expected_rows']:,} (0)"
            ]
        return []
    try:
        height = pl.read_delta(str(table)).height
        left = pl.scan_delta(str(table)).filter(pl.col("key") % 10 == 3).select(pl.len())
        still = int(left.collect().item())
    except Exception as e:  # reported, not raised
        return [f"{what}: polars cannot read the table: {type(e).__name__}: {e}"]
    if height != state["expected_rows"] or still:
        return [
            f"{what}: polars reads {height:,} rows ({still:,} with {WHERE}); "
            f"expected {state['expected_rows']:,} (0)"
        ]
    return []


def verify_purge(table: Path, state: dict[str, Any], what: str, files: bool = True) -> list[str]:
    """Problems with a purged (or compacted) copy: row counts as polars reads them, DVs left,
    file count (unchanged, when `files`)."""
    problems = verify_rows(table, state, what)
    if problems and "cannot read" in problems[0]:
        return problems
    info = dvtool_json("inspect", str(table))
    if info["files_with_dvs"] != 0 or (files and info["num_files"] != state["files"]):
        problems.append(
            f"{what}: inspect shows {info['files_with_dvs']} files with DVs and "
            f"{info['num_files']} files (expected 0 and {state['files']})"
        )
    if info["logical_rows"] != state["expected_rows"]:
        problems.append(f"{what}: inspect shows {info['logical_rows']:,} logical rows")
    return problems


def spark_env() -> dict[str, str]:
    """The environment for Spark children: the venv's Python for the workers too."""
    env = with_caches(dict(os.environ))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def start_stock_cluster() -> Any:
    """A loopback standalone cluster whose executors run the stock Python; stopped at exit."""
    import atexit

    sys.path.insert(0, str(ROOT))
    from tests.engines.spark_cluster import start_standalone
    from tests.engines.stock_python import stock_python

    work = Path(tempfile.mkdtemp(prefix="dvtool-bench-cluster-"))
    server = start_standalone(work, worker_python=stock_python())
    atexit.register(shutil.rmtree, work, True)
    atexit.register(server.stop)
    return server


def cluster_args(server: Any) -> list[str]:
    """`--engine spark` on the cluster, with the test suite's loopback driver settings."""
    from tests.engines.spark_cluster import DRIVER_CONF

    conf = [a for k, v in DRIVER_CONF.items() for a in ("--spark-conf", f"{k}={v}")]
    return ["--engine", "spark", "--spark-master", server.url, "--json", *conf]


def ratio_row(
    label: str, ours: list[float], floor: list[float], target: float | None = None
) -> None:
    """One ratio line: median/median (the verdict), median of the per-repeat ratios (robust
    to load that changes between repeats), best/best."""
    ratio = statistics.median(ours) / statistics.median(floor)
    paired = statistics.median(o / f for o, f in zip(ours, floor[: len(ours)], strict=True))
    best = min(ours) / min(floor)
    verdict = ""
    if target is not None:
        verdict = f"  (target <= {target}: {'ok' if ratio <= target else 'MISSED'})"
    print(f"  {label:34s} {ratio:6.2f} {paired:6.2f} {best:6.2f}{verdict}")


def dvtool_python() -> str:
    """The Python beside the dvtool executable (for --profile), else this one."""
    python = Path(dvtool_bin()).parent / "python"
    return str(python) if python.exists() else sys.executable


def profile(base: Path, shape: str, what: str, args: list[str]) -> None:
    """Run `dvtool optimize COPY *args` once more under cProfile on a fresh copy; print the top."""
    copy = fresh_copy(base, "profile")
    out = BENCH / "profiles" / f"purge-{shape}-{what}.prof"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [dvtool_python(), "-m", "cProfile", "-o", str(out), "-m", "dvtool"]
    child = checked(run_child([*cmd, "optimize", str(copy), *args]), f"{what} under cProfile")
    print()
    print(
        f"profile: dvtool optimize {' '.join(args)} under cProfile (not in the timings): "
        f"{child.seconds:.2f} s wall; {out.relative_to(ROOT)} (e.g. python -m pstats, snakeviz)"
    )
    print_profile(out)


def warm_up(base: Path, plan: list[dict[str, Any]], spark: bool) -> None:
    """One unmeasured process of each kind (nothing written to `base`): fills the bytecode
    caches under .bench/pycache and the page cache, so that repeat 1 is like the others."""
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "plan.json"
        one.write_text(json.dumps(plan[:1]))
        floor = [sys.executable, "-c", FLOOR_SNIPPET, str(base), "1", str(one), f"{tmp}/out"]
        dry = [dvtool_bin(), "optimize", str(base), "--purge", "--dry-run", "--json"]
        for cmd, what in (
            ([dvtool_bin(), "inspect", str(base), "--json"], "dvtool inspect"),
            ([*dry, "--engine", "arrow"], "dvtool optimize --dry-run"),
            (floor, "floor"),
            ([sys.executable, "-c", WARM_DELTALAKE, str(base)], "deltalake"),
        ):
            checked(run_child(cmd), f"warm-up: {what}")
        if spark:  # its failures are reported by the measured runs
            run_child([sys.executable, "-c", SPARK_STARTUP_SNIPPET], env=spark_env())


def mib(n: float | None) -> str:
    return "       n/a" if n is None else f"{n / 2**20:6.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["narrow", "small-files"], default="narrow")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files", type=int, help="default: 20 (narrow), 5000 (small-files)")
    parser.add_argument(
        "--rows-per-file", type=int, help="default: 1,000,000 (narrow), 2,000 (small-files)"
    )
    parser.add_argument("--skip-spark", action="store_true", help="measure arrow and floor only")
    parser.add_argument("--dvtool", help="dvtool executable (default: this environment's)")
    parser.add_argument(
        "--stock-cluster",
        action="store_true",
        help="also purge on a standalone cluster whose executors have only pyarrow/pandas/numpy",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run each dvtool command once under cProfile and print the top 15 functions",
    )
    parser.add_argument(
        "--skip-delta-spark", action="store_true", help="no Delta Spark REORG ... PURGE peer"
    )
    parser.add_argument(
        "--delta-spark-runs", type=int, default=4, help="Delta Spark runs, the first is warm-up"
    )
    args = parser.parse_args()
    global DVTOOL_BIN
    DVTOOL_BIN = args.dvtool
    small = args.shape == "small-files"
    if small and args.stock_cluster:
        parser.error("--stock-cluster is for --shape narrow")
    args.files = args.files or (5_000 if small else 20)
    args.rows_per_file = args.rows_per_file or (2_000 if small else 1_000_000)
    command = [".venv/bin/python", "scripts/bench_purge.py", "--shape", args.shape]
    command += ["--files", str(args.files)]
    command += ["--rows-per-file", str(args.rows_per_file), "--repeat", str(args.repeat)]
    command += ["--skip-spark"] if args.skip_spark else []
    command += ["--dvtool", args.dvtool] if args.dvtool else []
    command += ["--stock-cluster"] if args.stock_cluster else []
    command += ["--profile"] if args.profile else []
    command += ["--skip-delta-spark"] if args.skip_delta_spark else []
    command += ["--delta-spark-runs", str(args.delta_spark_runs)]
    args.skip_spark = args.skip_spark or small
    total = args.files * args.rows_per_file
    threads = max(2, os.cpu_count() or 2)  # dvtool's ArrowEngine pool size

    import bench_delete
    import pyarrow

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    base, state = base_table(args.shape, args.files, args.rows_per_file)
    plan = purge_plan(base)
    if len(plan) != args.files:
        sys.exit(f"expected {args.files} files with DVs in {base}, found {len(plan)}")
    RUNS.mkdir(parents=True, exist_ok=True)
    plan_file = RUNS / "floor-plan.json"
    plan_file.write_text(json.dumps(plan))

    spark_error: str | None = None
    if not args.skip_spark:
        probe = run_child([sys.executable, "-c", "import dvtool.engines.spark"])
        if probe.returncode != 0:
            spark_error = f"import dvtool.engines.spark failed ({probe.error()})"

    walls: dict[str, list[float]] = {}
    rss: dict[str, list[int]] = {}
    trees: dict[str, list[int]] = {}
    inside: dict[str, list[float]] = {}
    floor_parts: dict[str, dict[str, list[float]]] = {}
    spark_parts: dict[str, list[float]] = {"import": [], "session": [], "stop": []}
    spark_version = "?"
    problems: list[str] = []

    def record(name: str, child: Child) -> None:
        walls.setdefault(name, []).append(child.seconds)
        rss.setdefault(name, []).append(child.peak_rss)
        if child.tree_rss is not None:
            trees.setdefault(name, []).append(child.tree_rss)

    warm_up(base, plan, spark=not args.skip_spark and spark_error is None)
    dl_compact: dict[str, Any] = {}
    dl_dvs_left = 0
    dl_reader = "polars"
    compact_out: dict[str, Any] = {}
    cluster = start_stock_cluster() if args.stock_cluster and not args.skip_spark else None
    for repeat in range(args.repeat):
        line = [f"repeat {repeat + 1}:"]
        floors = (("floor-seq", 1), ("floor-threads", threads), ("floor-durable", threads))
        for label, pool in floors:
            copy = fresh_copy(base, label)
            floor_cmd = [sys.executable, "-c", FLOOR_SNIPPET, str(copy), str(pool)]
            out_dir = "durable" if label == "floor-durable" else str(copy / "_floor")
            floor_cmd += [str(plan_file), out_dir]
            child = checked(run_child(floor_cmd), f"floor ({label})")
            out = json.loads(child.stdout)
            if out["rows"] != state["expected_rows"]:
                problems.append(f"{label} wrote {out['rows']:,} rows")
            record(label, child)
            inside.setdefault(label, []).append(out["seconds"])
            for part in ("import", "decode", "rewrite"):
                floor_parts.setdefault(label, {}).setdefault(part, []).append(out[part])
            line.append(f"{label} {child.seconds:.2f} s")

        copy = fresh_copy(base, "arrow")
        child = checked(
            run_child(
                [dvtool_bin(), "optimize", str(copy), "--purge", "--engine", "arrow", "--json"]
            ),
            "dvtool optimize --engine arrow",
        )
        arrow_out = json.loads(child.stdout)
        record("arrow", child)
        problems += verify_purge(copy, state, "arrow")
        line.append(f"arrow {child.seconds:.2f} s")

        if small:
            child = checked(run_child([dvtool_bin(), "inspect", str(base), "--json"]), "inspect")
            record("inspect", child)
            line.append(f"inspect {child.seconds:.2f} s")

            copy = fresh_copy(base, "compact")
            cmd = [dvtool_bin(), "optimize", str(copy), "--engine", "arrow", "--json"]
            child = checked(run_child(cmd), "dvtool optimize (compaction)")
            compact_out = json.loads(child.stdout)
            record("compact", child)
            problems += verify_purge(copy, state, "compaction", files=False)
            line.append(f"compaction {child.seconds:.2f} s")

            copy = fresh_copy(base, "deltalake")
            cmd = [sys.executable, "-c", DELTALAKE_COMPACT_SNIPPET, str(copy)]
            child = checked(run_child(cmd), "deltalake optimize.compact()")
            dl_compact = json.loads(child.stdout)
            record("dl-compact", child)
            problems += verify_rows(copy, state, "deltalake compact")
            dl_dvs_left = dvtool_json("inspect", str(copy))["files_with_dvs"]
            dl_reader = "polars"
            if dl_dvs_left > bench_delete.POLARS_MAX_DVS:
                dl_reader = (
                    "pyarrow + pyroaring (not polars: deltalake, which polars uses to load DVs, "
                    "can hang with more than 512)"
                )
            line.append(f"deltalake compact {child.seconds:.2f} s")

        if not args.skip_spark and spark_error is None:
            startup = run_child([sys.executable, "-c", SPARK_STARTUP_SNIPPET], env=spark_env())
            copy = fresh_copy(base, "spark")
            cmd = [dvtool_bin(), "optimize", str(copy), "--purge", "--engine", "spark", "--json"]
            child = run_child(cmd, env=spark_env())
            if startup.returncode != 0:
                spark_error = f"Spark start-up failed ({startup.error()})"
            elif child.returncode != 0:
                spark_error = f"dvtool optimize --engine spark failed ({child.error()})"
            else:
                out = json.loads(startup.stdout)
                spark_version = out["version"]
                record("spark-startup", startup)
                for part in spark_parts:
                    spark_parts[part].append(out[part])
                record("spark", child)
                problems += verify_purge(copy, state, "spark")
                line.append(f"spark {child.seconds:.2f} s (start-up {out['seconds']:.2f} s)")
        if cluster is not None:
            copy = fresh_copy(base, "cluster")
            cmd = [dvtool_bin(), "optimize", str(copy), "--purge", *cluster_args(cluster)]
            child = checked(run_child(cmd, env=cluster.driver_env()), "optimize on the cluster")
            record("spark-cluster", child)
            problems += verify_purge(copy, state, "spark-cluster")
            line.append(f"stock cluster {child.seconds:.2f} s")
        print("  ".join(line), flush=True)
        for problem in problems:
            print(f"FAILED: {problem}", flush=True)
        if problems:
            sys.exit(1)
    if args.profile:
        profile(base, args.shape, "purge", ["--purge", "--engine", "arrow", "--json"])
        if small:
            profile(base, args.shape, "compaction", ["--engine", "arrow", "--json"])
    peer = None
    if not args.skip_delta_spark:
        peer = bench_delta_spark.measure(
            "REORG TABLE {table} APPLY (PURGE)",
            args.delta_spark_runs,
            lambda name: fresh_copy(base, name),
            lambda copy: verify_purge(copy, state, "delta-spark", files=False),
            RUNS / "jvm",
        )
        dvtool_warm, problems = bench_delta_spark.measure_dvtool_warm(
            dvtool_python(),
            "purge",
            "",
            args.delta_spark_runs,
            lambda name: fresh_copy(base, name),
            lambda copy: verify_purge(copy, state, "dvtool warm"),
        )
        for problem in peer.problems + problems:
            print(f"FAILED: {problem}", flush=True)
        if peer.problems or problems:
            sys.exit(1)
    shutil.rmtree(RUNS, ignore_errors=True)

    med = {name: statistics.median(values) for name, values in walls.items()}
    size = sum(p.stat().st_size for p in data_files(base))
    print()
    partitioned = ", one partition per file (batch)" if small else ""
    print(
        f"shape: {args.shape}  table: {args.files:,} files x {args.rows_per_file:,} rows = "
        f"{total:,} rows{partitioned}, "
        f"{size / 2**20:.0f} MiB; {state['deleted_rows']:,} rows ({WHERE}) deleted by DVs on "
        f"all {args.files} files; {state['expected_rows']:,} rows after purge"
    )
    print(
        f"pyarrow {pyarrow.__version__}  pyspark {spark_version}  cpus: {os.cpu_count()}  "
        f"threads (arrow engine, threaded floor): {threads}  repeats: {args.repeat}"
    )
    if dvtool_has_pandas():
        print(
            f"WARNING: pandas is installed beside {dvtool_bin()}: pyarrow imports it while "
            "dvtool reads the log (~0.2 s the floor does not pay); measure a runtime-only "
            "install (--dvtool)"
        )
    print(
        "floor: pyarrow read_table + mask filter + write_table(snappy) per file; DV decoding "
        "(dvtool.delta.dvstore) INCLUDED"
    )
    print(
        f"  {'wall time per process (with interpreter start-up)':50s} {'median':>8s} "
        f"{'min':>7s}  {'main RSS':>10s} {'tree RSS':>10s}"
    )
    labels = {
        "floor-seq": "floor, files one after another",
        "floor-threads": f"floor, {threads}-thread pool",
        "floor-durable": "  the same, durable (beside its input, fsynced)",
        "arrow": "dvtool optimize --purge --engine arrow",
        "spark-startup": "Spark start-up (import + session + stop)",
        "spark": "dvtool optimize --purge --engine spark",
        "spark-cluster": "the same on the stock-worker standalone cluster",
        "compact": "dvtool optimize --engine arrow (compaction)",
        "dl-compact": "deltalake DeltaTable.optimize.compact()",
        "inspect": "dvtool inspect --json (start-up + log replay)",
    }
    for name, label in labels.items():
        if name not in walls:
            continue
        tree = statistics.median(trees[name]) if name in trees else None
        print(
            f"  {label:50s} {med[name]:6.2f} s {min(walls[name]):5.2f} s  "
            f"{mib(statistics.median(rss[name]))} {mib(tree)}"
        )
    fair = "floor-seq" if med["floor-seq"] <= med["floor-threads"] else "floor-threads"
    floor = med[fair]
    floor_inside = statistics.median(inside[fair])
    parts = {k: statistics.median(v) for k, v in floor_parts[fair].items()}
    print(
        f"  fair floor = {labels[fair]}; timed inside its process (median): imports "
        f"{parts['import']:.2f} s (not counted), DV decoding {parts['decode']:.3f} s + "
        f"read-filter-write {parts['rewrite']:.2f} s = {floor_inside:.2f} s"
    )
    print(
        f"ratios to the fair floor (process wall {floor:.2f} s)  "
        f"{'med/med':>9s} {'paired':>6s} {'best':>6s}"
    )
    floor_walls = walls[fair]
    ratio_row("arrow / floor", walls["arrow"], floor_walls, ARROW_TARGET)
    ratio_row("arrow / floor timed inside", walls["arrow"], inside[fair])
    # dvtool must make every file durable before its commit (an fsync of the file and of
    # its directory, on local disk) and writes into the file's own partition directory; the
    # floor above does neither. This floor does both, as any local writer that commits must.
    ratio_row("arrow / durable floor", walls["arrow"], walls["floor-durable"])
    if "spark" in walls:
        startups = [sum(p) for p in zip(*spark_parts.values(), strict=True)]
        without = [t - s for t, s in zip(walls["spark"], startups, strict=True)]
        parts_s = {k: statistics.median(v) for k, v in spark_parts.items()}
        ratio_row("spark / floor (with start-up)", walls["spark"], floor_walls)
        ratio_row("spark / floor (without start-up)", without, floor_walls, SPARK_TARGET)
        print(
            f"  Spark start-up (median): import {parts_s['import']:.2f} s + session "
            f"{parts_s['session']:.2f} s + stop {parts_s['stop']:.2f} s = "
            f"{statistics.median(startups):.2f} s; spark purge without start-up: median "
            f"{statistics.median(without):.2f} s (min {min(without):.2f})"
        )
    if small:
        ratio_row("compaction / floor", walls["compact"], floor_walls)
        ratio_row("purge / deltalake compact", walls["arrow"], walls["dl-compact"], 1.0)
        ratio_row("compaction / deltalake compact", walls["compact"], walls["dl-compact"], 1.0)
    if "spark-cluster" in walls:
        ratio_row("stock cluster / floor (with start-up)", walls["spark-cluster"], floor_walls)
        ratio_row("stock cluster / local spark", walls["spark-cluster"], walls["spark"])
    if small:
        print("  spark: not run for --shape small-files")
    elif args.skip_spark:
        print("  spark: skipped (--skip-spark)")
    elif spark_error and "spark" in walls:
        print(
            f"  spark: failed in a later repeat (medians above use the earlier ones): {spark_error}"
        )
    elif spark_error:
        print(f"  spark: NOT MEASURED - {spark_error}")
    metrics = arrow_out["metrics"]
    print(
        f"checked: polars reads {state['expected_rows']:,} rows and inspect shows 0 files with "
        f"DVs after each purge; arrow removed {metrics['numDeletionVectorRowsRemoved']:,} rows, "
        f"wrote {metrics['numAddedFiles']} files ({metrics['numAddedBytes'] / 2**20:.0f} MiB)"
    )
    if small:
        cm = compact_out["metrics"]
        print(
            f"dvtool compaction (default target size): {cm['numPlannedBins']:,} bins, removed "
            f"{cm['numRemovedFiles']:,} files, wrote {cm['numAddedFiles']:,} "
            f"({cm['numAddedBytes'] / 2**20:.0f} MiB), dropped "
            f"{cm['numDeletionVectorRowsRemoved']:,} DV-deleted rows; polars and inspect checked"
        )
        print(
            f"deltalake optimize.compact(): considered {dl_compact.get('totalConsideredFiles')}"
            f" files, skipped {dl_compact.get('totalFilesSkipped')}, removed "
            f"{dl_compact.get('numFilesRemoved')}, added {dl_compact.get('numFilesAdded')}, "
            f"partitions optimized {dl_compact.get('partitionsOptimized')}; files with DVs "
            f"after it: {dl_dvs_left:,} of {args.files:,}; {dl_reader} read "
            f"{state['expected_rows']:,} rows from it"
        )
        per = 1000 / args.files
        fair_parts = floor_parts[fair]
        rest = [w - i for w, i in zip(walls["arrow"], walls["inspect"], strict=True)]
        print(f"per file ({args.files:,} files; medians, ms per file):")
        for label, value in (
            ("dvtool optimize --purge, process wall", med["arrow"]),
            ("  of which start-up + log replay (dvtool inspect process)", med["inspect"]),
            ("  the rest: plan, DV reads, read-filter-write, commit", statistics.median(rest)),
            ("dvtool optimize (compaction), process wall", med["compact"]),
            ("deltalake optimize.compact(), process wall", med["dl-compact"]),
            ("fair floor, process wall", floor),
            (
                "  DV decoding (dvtool.delta.dvstore, timed inside)",
                statistics.median(fair_parts["decode"]),
            ),
            ("  read-filter-write (timed inside)", statistics.median(fair_parts["rewrite"])),
        ):
            print(f"  {label:62s} {value * per:8.3f}")
    print(
        "main RSS: peak of the process itself and the children it waited for (GNU time "
        "ru_maxrss); tree RSS: peak of the summed RSS of the whole process tree (JVM, Python "
        "workers), sampled every 0.1 s"
    )
    if peer is not None:
        what = "dvtool optimize --purge --engine arrow"
        bench_delta_spark.report(peer, what, walls["arrow"], dvtool_warm)
        print(
            f"  checked: polars reads {state['expected_rows']:,} rows and inspect shows 0 files "
            "with DVs on every Delta Spark copy"
        )
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    print(f"reproduce: {shlex.join(command)}")


if __name__ == "__main__":
    main()
