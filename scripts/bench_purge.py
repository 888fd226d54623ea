"""Benchmark: `dvtool optimize --purge` (arrow and Spark engines) against a bare pyarrow floor.

Builds once, in .bench/purge-base/, a table of --files data files of --rows-per-file rows (id
int64 sequential, key int64 random with a fixed seed, payload a 20-character string), written
by deltalake.write_deltalake (one append per file), then `dvtool enable` and
`dvtool delete --where "key % 10 = 3"`, which leaves a DV deleting ~10% of the rows on every
file (checked with `dvtool inspect --json`). Each measured run works on a fresh copy of it.
Per repeat, in the same run, each in its own process:

- the floor: a Python process that decodes the DVs (dvtool.dvstore.DVStore, as dvtool
  must too: DV decoding is INCLUDED in the floor), then per file `pyarrow.parquet.read_table`
  (all columns), drops the DV's rows with a boolean mask and `pyarrow.parquet.write_table`
  (snappy). Twice: files one after another, and on a thread pool of the size dvtool's arrow
  engine uses (max(2, os.cpu_count())). The fair floor is the faster of the two;
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

    .venv/bin/python scripts/bench_purge.py [--repeat 3] [--files 20] [--rows-per-file 1000000]
    .venv/bin/python scripts/bench_purge.py --files 4 --rows-per-file 200000   # smoke run
    .venv/bin/python scripts/bench_purge.py --skip-spark
    .venv/bin/python scripts/bench_purge.py --stock-cluster   # also on a stock-worker cluster
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
from dvtool.core.deletion_vector import DeletionVectorDescriptor
from dvtool.dvstore import DVStore
from dvtool.storage import Storage

root, threads, plan = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
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
out_dir = os.path.join(root, "_floor")
os.makedirs(out_dir, exist_ok=True)

def rewrite(index):
    table = pq.read_table(storage.resolve(plan[index]["path"]))
    keep = np.ones(table.num_rows, dtype=bool)
    keep[np.frombuffer(drops[index].to_array(), dtype=np.uint64)] = False
    kept = table.filter(pa.array(keep))
    target = os.path.join(out_dir, f"part-{index:05d}.snappy.parquet")
    pq.write_table(kept, target, compression="snappy")
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
from dvtool.engines.spark import SparkEngine
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


def _children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _tree_rss(pid: int) -> int:
    """The summed RSS (bytes) of `pid` and all its descendants, from /proc."""
    children = _children_map()
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
    return total


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
            proc = subprocess.Popen(wrapped, stdout=stdout, stderr=stderr, env=env)
            while proc.poll() is None:
                if linux:
                    tree = max(tree, _tree_rss(proc.pid))
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


def base_table(files: int, rows: int) -> tuple[Path, dict[str, Any]]:
    """The cached base table with a DV on every file (built once; a marker says it is done)."""
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
    info = dvtool_json("inspect", str(table))
    if info["files_with_dvs"] != files or info["deleted_rows"] != deleted:
        sys.exit(
            f"base table {table}: {info['files_with_dvs']} files with DVs and "
            f"{info['deleted_rows']} deleted rows; expected {files} and {deleted}"
        )
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


def verify_purge(table: Path, state: dict[str, Any], what: str) -> list[str]:
    """Problems with a purged copy: row counts as polars reads them, DVs left, file count."""
    import polars as pl

    problems = []
    try:
        height = pl.read_delta(str(table)).height
        left = pl.scan_delta(str(table)).filter(pl.col("key") % 10 == 3).select(pl.len())
        still = int(left.collect().item())
    except Exception as e:  # reported, not raised
        return [f"{what}: polars cannot read the purged table: {type(e).__name__}: {e}"]
    if height != state["expected_rows"] or still:
        problems.append(
            f"{what}: polars reads {height:,} rows ({still:,} with {WHERE}); "
            f"expected {state['expected_rows']:,} (0)"
        )
    info = dvtool_json("inspect", str(table))
    if info["files_with_dvs"] != 0 or info["num_files"] != state["files"]:
        problems.append(
            f"{what}: inspect shows {info['files_with_dvs']} files with DVs and "
            f"{info['num_files']} files (expected 0 and {state['files']})"
        )
    if info["logical_rows"] != state["expected_rows"]:
        problems.append(f"{what}: inspect shows {info['logical_rows']:,} logical rows")
    return problems


def spark_env() -> dict[str, str]:
    """The environment for Spark children: the venv's Python for the workers too."""
    env = dict(os.environ)
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


def mib(n: float | None) -> str:
    return "       n/a" if n is None else f"{n / 2**20:6.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows-per-file", type=int, default=1_000_000)
    parser.add_argument("--skip-spark", action="store_true", help="measure arrow and floor only")
    parser.add_argument("--dvtool", help="dvtool executable (default: this environment's)")
    parser.add_argument(
        "--stock-cluster",
        action="store_true",
        help="also purge on a standalone cluster whose executors have only pyarrow/pandas/numpy",
    )
    args = parser.parse_args()
    global DVTOOL_BIN
    DVTOOL_BIN = args.dvtool
    command = [".venv/bin/python", "scripts/bench_purge.py", "--files", str(args.files)]
    command += ["--rows-per-file", str(args.rows_per_file), "--repeat", str(args.repeat)]
    command += ["--skip-spark"] if args.skip_spark else []
    command += ["--dvtool", args.dvtool] if args.dvtool else []
    command += ["--stock-cluster"] if args.stock_cluster else []
    total = args.files * args.rows_per_file
    threads = max(2, os.cpu_count() or 2)  # dvtool's ArrowEngine pool size

    import pyarrow

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    base, state = base_table(args.files, args.rows_per_file)
    plan = purge_plan(base)
    if len(plan) != args.files:
        sys.exit(f"expected {args.files} files with DVs in {base}, found {len(plan)}")
    plan_json = json.dumps(plan)

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

    cluster = start_stock_cluster() if args.stock_cluster and not args.skip_spark else None
    for repeat in range(args.repeat):
        line = [f"repeat {repeat + 1}:"]
        for label, pool in (("floor-seq", 1), ("floor-threads", threads)):
            copy = fresh_copy(base, label)
            child = checked(
                run_child([sys.executable, "-c", FLOOR_SNIPPET, str(copy), str(pool), plan_json]),
                f"floor ({label})",
            )
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
    shutil.rmtree(RUNS, ignore_errors=True)

    med = {name: statistics.median(values) for name, values in walls.items()}
    size = sum(p.stat().st_size for p in data_files(base))
    print()
    print(
        f"table: {args.files} files x {args.rows_per_file:,} rows = {total:,} rows, "
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
        "(dvtool.dvstore) INCLUDED"
    )
    print(
        f"  {'wall time per process (with interpreter start-up)':50s} {'median':>8s} "
        f"{'min':>7s}  {'main RSS':>10s} {'tree RSS':>10s}"
    )
    labels = {
        "floor-seq": "floor, files one after another",
        "floor-threads": f"floor, {threads}-thread pool",
        "arrow": "dvtool optimize --purge --engine arrow",
        "spark-startup": "Spark start-up (import + session + stop)",
        "spark": "dvtool optimize --purge --engine spark",
        "spark-cluster": "the same on the stock-worker standalone cluster",
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
    if "spark-cluster" in walls:
        ratio_row("stock cluster / floor (with start-up)", walls["spark-cluster"], floor_walls)
        ratio_row("stock cluster / local spark", walls["spark-cluster"], walls["spark"])
    if args.skip_spark:
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
    print(
        "main RSS: peak of the process itself and the children it waited for (GNU time "
        "ru_maxrss); tree RSS: peak of the summed RSS of the whole process tree (JVM, Python "
        "workers), sampled every 0.1 s"
    )
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    print(f"reproduce: {shlex.join(command)}")


if __name__ == "__main__":
    main()
