"""Benchmark: snapshot loading of `dvtool inspect --json` against deltalake (delta-rs).

Unpacks ../shared/golden/300k-add-files-100-col-partitioned.tar.zst (300,000 add actions in
JSON commits) into .bench/, then measures in the same run, alternating the tools:

- end to end, as a user runs them: `dvtool inspect TABLE --json` versus a Python process that
  runs `deltalake.DeltaTable(TABLE).get_add_actions()` (both include interpreter start-up);
- in process: `run_inspect` versus `DeltaTable(TABLE)` plus `get_add_actions()`.

Prints the median of --repeat runs of each and the ratio dvtool / deltalake (target: <= 1.5).

    .venv/bin/python scripts/bench_inspect.py [--repeat 5] [--table PATH] [--dvtool BIN]

For the numbers in the release notes, dvtool runs from an environment with runtime
dependencies only (`python3 -m venv .bench/rt && .bench/rt/bin/pip install -e .`, then
`--dvtool .bench/rt/bin/dvtool`), as users install it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHIVE = ROOT.parent / "shared/golden/300k-add-files-100-col-partitioned.tar.zst"
DELTALAKE_SNIPPET = (
    "import sys, deltalake; "
    "dt = deltalake.DeltaTable(sys.argv[1]); "
    "print(dt.version(), dt.get_add_actions(flatten=True).num_rows)"
)


def unpack(target: Path) -> Path:
    table = target / "300k-add-files-100-col-partitioned"
    if not (table / "_delta_log").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        if shutil.which("zstd") is None and shutil.which("tar") is None:
            sys.exit("need tar with zstd support to unpack the benchmark table")
        subprocess.run(["tar", "--zstd", "-xf", str(ARCHIVE), "-C", str(target)], check=True)
    return table


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--table", type=Path, help="table to load (default: the 300k table)")
    parser.add_argument(
        "--dvtool",
        help="dvtool executable for the process runs (default: this environment's). Use one "
        "installed with runtime dependencies only, as users install it: with pandas present "
        "(the test extras bring it for Spark Connect) pyarrow imports it on first use, ~0.45 s.",
    )
    args = parser.parse_args()
    table = str(args.table or unpack(ROOT / ".bench"))

    import deltalake

    from dvtool.commands.inspect.command import InspectRequest, run_inspect
    from dvtool.delta.log.reader import open_log

    dvtool_bin = args.dvtool or str(Path(sys.executable).parent / "dvtool")
    cases: dict[str, Callable[[], object]] = {
        "dvtool inspect --json (process)": lambda: run([dvtool_bin, "inspect", table, "--json"]),
        "deltalake get_add_actions (process)": lambda: run(
            [sys.executable, "-c", DELTALAKE_SNIPPET, table]
        ),
        "dvtool run_inspect (in process)": lambda: run_inspect(open_log(table), InspectRequest()),
        "deltalake get_add_actions (in process)": lambda: deltalake.DeltaTable(
            table
        ).get_add_actions(flatten=True),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, fn in cases.items():
            times[name].append(timed(fn))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"table: {table}  repeats: {args.repeat}  deltalake {deltalake.__version__}")
    for name, value in medians.items():
        print(f"  {name:42s} median {value:6.3f} s  (min {min(times[name]):.3f})")
    for scope in ("process", "in process"):
        ours = medians[
            f"dvtool {'inspect --json' if scope == 'process' else 'run_inspect'} ({scope})"
        ]
        theirs = medians[f"deltalake get_add_actions ({scope})"]
        print(f"ratio dvtool/deltalake ({scope}): {ours / theirs:.2f}  (target <= 1.5)")


if __name__ == "__main__":
    main()
