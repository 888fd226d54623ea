"""Benchmark: start-up of `dvtool --help` and `dvtool inspect` against a deltalake one-liner.

Builds once, in .bench/startup/T, a table of 8 rows (id int64 0..7, name string) written by
deltalake.write_deltalake in one file, then `dvtool enable` and `dvtool delete --where
"id % 3 = 0"`, which leaves one DV deleting 3 rows (checked with `dvtool inspect --json`).
Then, in the same run, each command as its own process from .bench/startup (so the table is
`T`), stdout discarded, --repeat times round-robin (one of each per round, after one
unmeasured warm-up round, so that load from other work hits all of them alike):

- `dvtool --help`;
- `dvtool inspect T --json`;
- `dvtool inspect T` (human output; off a terminal, as here, drawn without importing rich);
- the reference: `python -c "from deltalake import DeltaTable; print(DeltaTable('T').version())"`
  (the same Python as dvtool's), which opens the table and prints its version.

Wall times include interpreter start-up for every process, as a user sees them. The children
run with bytecode caches, as an installed package does (pip compiles them at install):
PYTHONDONTWRITEBYTECODE unset and PYTHONPYCACHEPREFIX=.bench/pycache, so that the warm-up
round writes them there and the source tree stays clean (without them every run compiles
dvtool's modules again, ~40 ms no user pays).

Prints the median and the minimum of each, the ratios to the reference (median/median is the
verdict, min/min beside it; target <= 1.5x), the pyarrow, deltalake and dvtool versions,
whether pandas and pyspark are installed beside dvtool (pyarrow imports pandas, when
installed, the first time it converts Python objects; dvtool must not make it do so), the
1-minute load average before and after, and the command to reproduce. With --importtime,
also runs `python -X importtime -m dvtool inspect T --json` --repeat times and prints the 15
imports with the largest median cumulative time (self included), which is where start-up
goes, and whether pandas, pyspark, rich, pyarrow.parquet, pyarrow.dataset and fsspec were
imported.

    .venv/bin/python scripts/bench_startup.py [--repeat 10] [--importtime]
    .venv/bin/python scripts/bench_startup.py --dvtool .bench/rt/bin/dvtool   # runtime-only
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / ".bench" / "startup"
TABLE = "T"
WHERE = "id % 3 = 0"
DELETED = 3  # ids 0, 3 and 6
TARGET = 1.5
REFERENCE_SNIPPET = "from deltalake import DeltaTable; print(DeltaTable('T').version())"
TOP_IMPORTS = 15


def child_env() -> dict[str, str]:
    """The environment of the measured processes: bytecode caches on, under .bench/pycache."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(ROOT / ".bench" / "pycache")
    return env


def dvtool_bin(option: str | None) -> str:
    """--dvtool, or this environment's."""
    return option or str(Path(sys.executable).parent / "dvtool")


def dvtool_python(dvtool: str) -> str:
    """The Python beside the dvtool executable (it runs the reference and -X importtime)."""
    python = Path(dvtool).parent / "python"
    return str(python) if python.exists() else sys.executable


def run(cmd: list[str], what: str) -> str:
    out = subprocess.run(cmd, cwd=BENCH, capture_output=True, text=True, env=child_env())
    if out.returncode != 0:
        sys.exit(f"{what} failed (exit {out.returncode}):\n{out.stderr}{out.stdout}")
    return out.stdout


def build_table(dvtool: str) -> None:
    """The 8-row table with one DV, built once (a marker says it is done)."""
    marker = BENCH / f"{TABLE}.ready"
    if marker.exists() and (BENCH / TABLE / "_delta_log").is_dir():
        return
    import pyarrow as pa
    from deltalake import write_deltalake

    shutil.rmtree(BENCH / TABLE, ignore_errors=True)
    BENCH.mkdir(parents=True, exist_ok=True)
    ids = pa.array(range(8), pa.int64())
    names = pa.array([f"row-{i}" for i in range(8)], pa.string())
    write_deltalake(str(BENCH / TABLE), pa.table({"id": ids, "name": names}))
    run([dvtool, "enable", TABLE, "--json"], "dvtool enable")
    run([dvtool, "delete", TABLE, "--where", WHERE, "--json"], "dvtool delete")
    info = json.loads(run([dvtool, "inspect", TABLE, "--json"], "dvtool inspect"))
    if info["files_with_dvs"] != 1 or info["deleted_rows"] != DELETED:
        sys.exit(
            f"{BENCH / TABLE}: {info['files_with_dvs']} files with DVs and "
            f"{info['deleted_rows']} deleted rows; expected 1 and {DELETED}"
        )
    marker.write_text(json.dumps({"rows": 8, "where": WHERE, "deleted_rows": DELETED}))


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        cmd, cwd=BENCH, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    return time.perf_counter() - start


def importable(python: str, module: str) -> str:
    probe = (
        "import importlib.metadata as m, importlib.util as u, sys; "
        f"print(m.version({module!r}) if u.find_spec({module!r}) else 'not installed')"
    )
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def import_profile(python: str, repeat: int) -> list[tuple[str, float, float]]:
    """(module, median cumulative ms, median self ms) of `dvtool inspect T --json`, largest
    cumulative first, from `-X importtime` run `repeat` times."""
    cumulative: dict[str, list[float]] = {}
    own: dict[str, list[float]] = {}
    for _ in range(repeat):
        cmd = [python, "-X", "importtime", "-m", "dvtool", "inspect", TABLE, "--json"]
        out = subprocess.run(cmd, cwd=BENCH, capture_output=True, text=True, env=child_env())
        for line in out.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, cumulative_us, name = line[len("import time:") :].split("|")
            module = name.strip()
            cumulative.setdefault(module, []).append(int(cumulative_us) / 1000)
            own.setdefault(module, []).append(int(self_us) / 1000)
    rows = [
        (module, statistics.median(values), statistics.median(own[module]))
        for module, values in cumulative.items()
    ]
    return sorted(rows, key=lambda row: row[1], reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--dvtool", help="dvtool executable (default: this environment's)")
    parser.add_argument(
        "--importtime",
        action="store_true",
        help="also print the top imports of `dvtool inspect T --json` (-X importtime)",
    )
    args = parser.parse_args()
    command = [".venv/bin/python", "scripts/bench_startup.py", "--repeat", str(args.repeat)]
    command += ["--dvtool", args.dvtool] if args.dvtool else []
    command += ["--importtime"] if args.importtime else []
    dvtool = dvtool_bin(args.dvtool)
    python = dvtool_python(dvtool)

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    build_table(dvtool)
    version = json.loads(run([dvtool, "inspect", TABLE, "--json"], "dvtool inspect"))["version"]
    reference_version = run([python, "-c", REFERENCE_SNIPPET], "the deltalake reference")
    if reference_version.strip() != str(version):
        sys.exit(f"deltalake reads version {reference_version.strip()}, dvtool {version}")

    cases = {
        "dvtool --help": [dvtool, "--help"],
        "dvtool inspect T --json": [dvtool, "inspect", TABLE, "--json"],
        "dvtool inspect T (human output)": [dvtool, "inspect", TABLE],
        "deltalake open + version (reference)": [python, "-c", REFERENCE_SNIPPET],
    }
    for cmd in cases.values():  # warm-up: page cache, .pyc files
        timed(cmd)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, cmd in cases.items():
            times[name].append(timed(cmd))
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    versions = subprocess.run(
        [
            python,
            "-c",
            "import importlib.metadata as m; "
            "print(*(m.version(p) for p in ('pyarrow', 'deltalake', 'dvtool')))",
        ],
        capture_output=True,
        text=True,
    ).stdout.split()
    print(f"table: {BENCH / TABLE} (8 rows, one file, one DV deleting {DELETED} rows)")
    print(
        f"pyarrow {versions[0]}  deltalake {versions[1]}  dvtool {versions[2]}  "
        f"python {sys.version.split()[0]}  cpus: {os.cpu_count()}  repeats: {args.repeat}"
    )
    print(
        f"beside dvtool: pandas {importable(python, 'pandas')}, "
        f"pyspark {importable(python, 'pyspark')}  ({dvtool})"
    )
    reference = "deltalake open + version (reference)"
    ref = times[reference]
    print(f"  {'wall time per process (with interpreter start-up)':52s} {'median':>8s} {'min':>8s}")
    for name, values in times.items():
        print(f"  {name:52s} {statistics.median(values):6.3f} s {min(values):6.3f} s")
    print(f"ratios to the reference  {'med/med':>9s} {'min/min':>8s}")
    for name, values in times.items():
        if name == reference:
            continue
        ratio = statistics.median(values) / statistics.median(ref)
        best = min(values) / min(ref)
        verdict = ""
        if "human" not in name:
            verdict = f"  (target <= {TARGET}: {'ok' if ratio <= TARGET else 'MISSED'})"
        print(f"  {name:32s} {ratio:6.2f}   {best:6.2f}{verdict}")
    if args.importtime:
        print(
            f"top {TOP_IMPORTS} imports of `dvtool inspect T --json` by median cumulative time "
            f"(-X importtime, {args.repeat} runs):"
        )
        print(f"  {'cumulative':>10s} {'self':>8s}  module")
        profile = import_profile(python, args.repeat)
        for module, total, own in profile[:TOP_IMPORTS]:
            print(f"  {total:7.1f} ms {own:5.1f} ms  {module}")
        imported = {module for module, _, _ in profile}
        watched = ("pandas", "pyspark", "rich", "pyarrow.parquet", "pyarrow.dataset", "fsspec")
        flags = (f"{m} {'yes' if m in imported else 'no'}" for m in watched)
        print("  imported: " + ", ".join(flags))
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    print(f"reproduce: {shlex.join(command)}")


if __name__ == "__main__":
    main()
