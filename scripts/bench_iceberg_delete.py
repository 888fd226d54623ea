"""Benchmark: `dvtool delete --where` on Iceberg tables (merge-on-read: v2 position deletes,
v3 deletion vectors) against pyiceberg's `Table.delete` and Iceberg Spark's DELETE.

The table (scripts/bench_iceberg_table.py): --rows rows (default 1,000,000) of 20 columns in
--files data files (default 10), written once by pyiceberg into a SQL catalog on SQLite in a
temporary folder under .bench/ (removed at the end unless --keep); the v3 table holds the same
rows, written by Iceberg Spark (pyiceberg 0.12 cannot write v3). Every run works on a fresh
copy: a new catalog entry registered at the base's metadata (no run sees another's writes).

Predicates on `bucket` (uniform in 0..999, so every data file has matching rows): selective
`bucket = 7` (0.1% of the rows) and broad `bucket < 100` (10%). Per format version and
predicate, in the same run:

- dvtool, warm: one Python process imports dvtool and calls
  `dvtool.delete("db.COPY", where, mode="dv", catalog="bench")` on --runs + 1 fresh copies;
  the first call (imports of the command's modules) is excluded, the median of the others
  is dvtool's time. Also `dvtool delete db.COPY --catalog bench --where ... --mode dv
  --json`, the real CLI, as a process (interpreter start-up and imports counted);
- pyiceberg, warm (v2 only: it cannot write v3): one process calls
  `load_catalog("bench").load_table("db.COPY").delete(where)` the same way (first call
  excluded). pyiceberg has no merge-on-read delete: it warns and rewrites every file with a
  matching row (copy-on-write), which is what a Python user of pyiceberg gets. Goal:
  pyiceberg / dvtool >= 20;
- Iceberg Spark 1.12 (Spark 4.1, `local[2]`, tests/engines/jvm_engines.py with a production
  JVM: both JIT tiers, G1, 4 GiB): a new session per case, the JdbcCatalog on the same SQLite
  file, `DELETE FROM bench.db.COPY WHERE ...` (merge-on-read, the table's write.delete.mode)
  on --runs + 1 fresh copies. Session start, the first statement (JIT warm-up) and the
  median of the others are timed apart. Ratios (goal: start-up not counted >= 5): warm /
  dvtool warm (start-up not counted), and (session start + first statement) / dvtool CLI
  process (start-up counted: what a one-shot Spark job pays against one dvtool command).

Every copy every tool wrote is checked: pyiceberg reads its live rows (count and id sum
equal to the generator's, none left matching). Progress goes to stderr; stdout is the table
(or with --json one JSON document). The 1-minute load average is printed before and after:
the machine's other work skews every number.

    .venv/bin/python scripts/bench_iceberg_delete.py                 # 1,000,000 rows
    .venv/bin/python scripts/bench_iceberg_delete.py --rows 100000 --runs 2 --skip-spark
    .venv/bin/python scripts/bench_iceberg_delete.py --versions 2 --predicates broad --json
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# scripts/ is on sys.path: this script's directory
import bench_iceberg_table as bench

DVTOOL_TARGET = 20.0  # pyiceberg / dvtool
SPARK_TARGET = 5.0  # Iceberg Spark / dvtool, start-up not counted

DVTOOL_SNIPPET = """
import json, sys, time
args = json.loads(sys.argv[1])
began = time.perf_counter()
import dvtool
imported = time.perf_counter() - began
times, docs = [], []
for table in args["tables"]:
    began = time.perf_counter()
    result = dvtool.delete(table, args["where"], mode="dv", catalog="bench")
    times.append(time.perf_counter() - began)
    docs.append(result.to_dict())
print(json.dumps({"import": imported, "times": times, "metrics": docs[-1]["metrics"]}))
"""

PYICEBERG_SNIPPET = """
import json, sys, time, warnings
warnings.simplefilter("ignore")  # "Merge on read is not yet supported": copy-on-write
args = json.loads(sys.argv[1])
began = time.perf_counter()
from pyiceberg.catalog import load_catalog
imported = time.perf_counter() - began
times = []
for table in args["tables"]:
    began = time.perf_counter()
    load_catalog("bench").load_table(table).delete(args["where"])
    times.append(time.perf_counter() - began)
print(json.dumps({"import": imported, "times": times}))
"""


@dataclass
class Case:
    """One format version and predicate: every tool's times (seconds)."""

    version: int
    predicate: str
    where: str
    dvtool_first: float = 0.0
    dvtool_warm: list[float] = field(default_factory=list)
    dvtool_cli: list[float] = field(default_factory=list)
    dvtool_metrics: dict[str, Any] = field(default_factory=dict)
    pyiceberg_first: float | None = None
    pyiceberg_warm: list[float] = field(default_factory=list)
    spark: bench.SparkTimes | None = None
    problems: list[str] = field(default_factory=list)

    def name(self) -> str:
        return f"v{self.version} {self.predicate}"


class Runner:
    """Fresh copies, the measured children and their checks, for one benchmark run."""

    def __init__(self, base: bench.Base, args: argparse.Namespace, workdir: Path) -> None:
        self.base = base
        self.args = args
        self.workdir = workdir
        self.env = base.catalog.env()
        self.count = 0

    def copies(self, version: int, n: int, label: str) -> list[str]:
        names = []
        for _ in range(n):
            self.count += 1
            names.append(bench.register_copy(self.base, version, f"{label}_{self.count}"))
        return names

    def check(self, case: Case, tables: list[str], what: str) -> None:
        for table in tables:
            case.problems += bench.check(self.base, case.predicate, table, what)

    def dvtool(self, case: Case) -> None:
        tables = self.copies(case.version, self.args.runs + 1, "dvtool")
        python = bench.dvtool_python(self.args.dvtool)
        spec = json.dumps({"tables": tables, "where": case.where})
        out = bench.run_json([python, "-c", DVTOOL_SNIPPET, spec], self.env, "dvtool warm")
        case.dvtool_first, case.dvtool_warm = out["times"][0], out["times"][1:]
        case.dvtool_metrics = out["metrics"]
        self.check(case, tables, "dvtool")
        executable = bench.dvtool_bin(self.args.dvtool)
        for table in self.copies(case.version, self.args.runs, "cli"):
            cmd = [executable, "delete", table, "--catalog", bench.CATALOG]
            cmd += ["--where", case.where, "--mode", "dv", "--json"]
            case.dvtool_cli.append(bench.timed_process(cmd, self.env, "dvtool delete"))
            self.check(case, [table], "dvtool CLI")

    def pyiceberg(self, case: Case) -> None:
        tables = self.copies(case.version, self.args.runs + 1, "pyiceberg")
        spec = json.dumps({"tables": tables, "where": case.where})
        cmd = [sys.executable, "-c", PYICEBERG_SNIPPET, spec]
        out = bench.run_json(cmd, self.env, "pyiceberg delete")
        case.pyiceberg_first, case.pyiceberg_warm = out["times"][0], out["times"][1:]
        self.check(case, tables, "pyiceberg")

    def spark(self, case: Case) -> None:
        tables = self.copies(case.version, self.args.runs + 1, "spark")
        statements = [f"DELETE FROM {bench.CATALOG}.{t} WHERE {case.where}" for t in tables]
        workdir = self.workdir / f"spark-{case.version}-{case.predicate}"
        case.spark = bench.spark_measure(self.base.catalog, statements, workdir)
        self.check(case, tables, "iceberg-spark")


def build(args: argparse.Namespace, root: Path) -> tuple[bench.Base, float, float]:
    """The base tables; the seconds pyiceberg took for v2 and Iceberg Spark for v3."""
    began = time.perf_counter()
    base = bench.build_v2(root / "catalog", args.files, args.rows // args.files)
    took_v2 = time.perf_counter() - began
    took_v3 = 0.0
    if 3 in args.versions:
        began = time.perf_counter()
        session = bench.spark_session(root / "spark-build")
        try:
            bench.build_v3(session, base)
        finally:
            session.stop()
        took_v3 = time.perf_counter() - began
    return base, took_v2, took_v3


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


def summary(case: Case) -> dict[str, Any]:
    """The case's medians and ratios (the --json document's entry)."""
    med = bench.median
    ours, cli = med(case.dvtool_warm), med(case.dvtool_cli)
    doc: dict[str, Any] = {
        "version": case.version,
        "predicate": case.predicate,
        "where": case.where,
        "dvtool": {
            "warm_median": ours,
            "warm": case.dvtool_warm,
            "first": case.dvtool_first,
            "cli_median": cli,
            "cli": case.dvtool_cli,
            "metrics": case.dvtool_metrics,
        },
    }
    if case.pyiceberg_warm:
        theirs = med(case.pyiceberg_warm)
        doc["pyiceberg"] = {
            "warm_median": theirs,
            "warm": case.pyiceberg_warm,
            "first": case.pyiceberg_first,
            "ratio": ratio(theirs, ours),
            "target": DVTOOL_TARGET,
        }
    if case.spark is not None:
        s = case.spark
        doc["iceberg_spark"] = {
            "version": s.version,
            "start": s.start,
            "first": s.first,
            "warm_median": med(s.warm),
            "warm": s.warm,
            "ratio_startup_not_counted": ratio(med(s.warm), ours),
            "ratio_jvm_not_counted_dvtool_process": ratio(med(s.warm), cli),
            "ratio_startup_counted": ratio(s.start + s.first, cli),
            "target": SPARK_TARGET,
        }
    return doc


def verdict(value: float, target: float) -> str:
    return "ok" if value >= target else "MISSED"


def print_table(docs: list[dict[str, Any]], header: list[str]) -> None:
    """The results as a small table, then the Spark details and the ratios' meaning."""
    for line in header:
        print(line)
    print(
        f"{'case':14s} {'dvtool':>8s} {'dvt CLI':>8s} {'pyiceberg':>9s} {'pyi/dvt':>8s} "
        f"{'Spark':>8s} {'Spk/dvt':>8s} {'Spk cold/CLI':>12s}"
    )
    for doc in docs:
        d, p, s = doc["dvtool"], doc.get("pyiceberg"), doc.get("iceberg_spark")
        cells = [f"v{doc['version']} {doc['predicate']:10s}", f"{d['warm_median']:7.3f}s"]
        cells.append(f"{d['cli_median']:7.3f}s")
        if p:
            cells += [f"{p['warm_median']:8.2f}s", f"{p['ratio']:7.1f}x"]
        else:
            cells += [f"{'-':>9s}", f"{'-':>8s}"]
        if s:
            cells += [f"{s['warm_median']:7.2f}s", f"{s['ratio_startup_not_counted']:7.1f}x"]
            cells.append(f"{s['ratio_startup_counted']:11.1f}x")
        else:
            cells += [f"{'-':>8s}", f"{'-':>8s}", f"{'-':>12s}"]
        print(" ".join(cells))
    print(
        "dvtool: warm API call, median (first call excluded); dvt CLI: `dvtool delete` "
        "process wall; pyiceberg: warm Table.delete (copy-on-write), median"
    )
    print(
        "Spark: Iceberg Spark DELETE (merge-on-read), warm median; Spk cold/CLI: (session "
        "start + first statement) / dvtool CLI process"
    )
    for doc in docs:
        name = f"v{doc['version']} {doc['predicate']}"
        if p := doc.get("pyiceberg"):
            print(
                f"  {name}: pyiceberg / dvtool {p['ratio']:.1f}x (target >= {DVTOOL_TARGET:g}: "
                f"{verdict(p['ratio'], DVTOOL_TARGET)}); first calls: dvtool "
                f"{doc['dvtool']['first']:.2f} s, pyiceberg {p['first']:.2f} s"
            )
        if s := doc.get("iceberg_spark"):
            r = s["ratio_startup_not_counted"]
            print(
                f"  {name}: Spark start {s['start']:.1f} s, first {s['first']:.2f} s, warm "
                f"{s['warm_median']:.2f} s; / dvtool warm {r:.1f}x (target >= {SPARK_TARGET:g}:"
                f" {verdict(r, SPARK_TARGET)}), / dvtool process "
                f"{s['ratio_jvm_not_counted_dvtool_process']:.1f}x, start-up counted "
                f"{s['ratio_startup_counted']:.1f}x"
            )
        metrics = doc["dvtool"]["metrics"]
        print(f"  {name}: dvtool metrics {json.dumps(metrics, sort_keys=True)}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in all (1,000,000)")
    parser.add_argument("--files", type=int, default=10, help="data files (10)")
    parser.add_argument("--runs", type=int, default=3, help="measured runs per tool (+1 first)")
    parser.add_argument("--versions", default="2,3", help="format versions: 2,3")
    parser.add_argument("--predicates", default="selective,broad", help="selective,broad")
    parser.add_argument("--skip-spark", action="store_true", help="no Iceberg Spark peer")
    parser.add_argument("--skip-pyiceberg", action="store_true", help="no pyiceberg peer")
    parser.add_argument("--dvtool", help="dvtool executable (default: this environment's)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    args.versions = [int(v) for v in args.versions.split(",")]
    args.predicates = args.predicates.split(",")
    return args


def main() -> None:
    args = parse_args()
    load_before = bench.load_average()
    (bench.ROOT / ".bench").mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="iceberg-delete-", dir=bench.ROOT / ".bench"))
    try:
        bench.progress(f"building the tables in {root} ...")
        base, took_v2, took_v3 = build(args, root)
        runner = Runner(base, args, root)
        warm_up(runner)
        cases = []
        for version in args.versions:
            for predicate in args.predicates:
                case = Case(version, predicate, bench.PREDICATES[predicate][0])
                bench.progress(f"{case.name()}: {case.where}")
                runner.dvtool(case)
                if version == 2 and not args.skip_pyiceberg:
                    runner.pyiceberg(case)
                if not args.skip_spark:
                    runner.spark(case)
                for problem in case.problems:
                    bench.progress(f"FAILED: {problem}")
                if case.problems:
                    sys.exit(1)
                cases.append(case)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(args, cases, (took_v2, took_v3), load_before)


def warm_up(runner: Runner) -> None:
    """One unmeasured dvtool process (bytecode caches, page cache of the data files)."""
    table = runner.copies(2, 1, "warmup")[0]
    cmd = [bench.dvtool_bin(runner.args.dvtool), "delete", table, "--catalog", bench.CATALOG]
    cmd += ["--where", "bucket = 7", "--mode", "dv", "--dry-run", "--json"]
    bench.timed_process(cmd, runner.env, "warm-up")


def report(
    args: argparse.Namespace, cases: list[Case], builds: tuple[float, float], load: float
) -> None:
    import pyarrow
    import pyiceberg

    docs = [summary(case) for case in cases]
    command = ["scripts/bench_iceberg_delete.py", *sys.argv[1:]]
    env = {
        "rows": args.rows,
        "files": args.files,
        "columns": 20,
        "runs": args.runs,
        "pyarrow": pyarrow.__version__,
        "pyiceberg": pyiceberg.__version__,
        "cpus": __import__("os").cpu_count(),
        "load_before": load,
        "load_after": bench.load_average(),
        "build_seconds": {"v2_pyiceberg": builds[0], "v3_iceberg_spark": builds[1]},
        "command": shlex.join(command),
    }
    if args.json:
        print(json.dumps({"table": env, "cases": docs}, indent=1))
        return
    print_table(
        docs,
        [
            f"table: {args.rows:,} rows x 20 columns in {args.files} data files (v2 by pyiceberg "
            f"in {builds[0]:.1f} s, v3 by Iceberg Spark in {builds[1]:.1f} s); {args.runs} "
            "measured runs per tool, each on a fresh copy; every copy checked with pyiceberg",
            f"pyarrow {env['pyarrow']}  pyiceberg {env['pyiceberg']}  cpus {env['cpus']}  "
            f"load (1 min) {load:.2f} before, {env['load_after']:.2f} after",
        ],
    )
    print(f"reproduce: {env['command']}")


if __name__ == "__main__":
    main()
