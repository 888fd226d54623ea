"""Benchmark: `dvtool delete --where` (deletion vectors) against deltalake's copy-on-write delete.

Builds once, in .bench/delete-base/, a table of --files data files of --rows-per-file rows (id
int64 sequential, key int64 random with a fixed seed, payload a 20-character string), written by
deltalake.write_deltalake (one append per file) and then `dvtool enable`d. Each repeat copies it
twice and measures, in the same run, each in its own process:

- `dvtool delete COPY1 --where "key % 1000 = 7" --json`, the real CLI;
- `DeltaTable(COPY2).delete("key % 1000 = 7")` (deltalake rewrites every touched file; it
  accepts the DV-enabled table and writes no DVs; should it refuse, a second base without
  `dvtool enable`, with identical data, is built for it and the output says so);
- the floor: pyarrow.parquet reads column `key` of each data file and evaluates
  `key % 1000 == 7`, files on a thread pool (timed inside the process: read + evaluate only).

Wall times include interpreter start-up; peak memory is each child's ru_maxrss, taken by GNU
time (else a bare Python wrapper) so that this process's own RSS is not inherited.
Prints the medians, the speedup deltalake/dvtool (target >= 20), dvtool/floor, peak RSS
(target: dvtool lower), and checks that dvtool wrote one DV file and one commit, that every tool
found the same rows, and that polars reads the same rows from both copies.

    .venv/bin/python scripts/bench_delete.py [--repeat 1] [--files 20] [--rows-per-file 1000000]
    .venv/bin/python scripts/bench_delete.py --files 4 --rows-per-file 200000   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
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
WHERE = "key % 1000 = 7"
SEED = 20240501
DELTALAKE_SNIPPET = """
import json, sys
from deltalake import DeltaTable
print(json.dumps(DeltaTable(sys.argv[1]).delete(sys.argv[2])))
"""
FLOOR_SNIPPET = """
import json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
import pyarrow.compute as pc
import pyarrow.parquet as pq

def matches(path):
    key = pq.read_table(path, columns=["key"], use_threads=False).column("key")
    if hasattr(pc, "remainder"):
        rem = pc.remainder(key, 1000)
    else:  # older pyarrow: integer divide truncates, as Spark's % does
        rem = pc.subtract(key, pc.multiply(pc.divide(key, 1000), 1000))
    return pc.sum(pc.equal(rem, 7)).as_py() or 0

start = time.perf_counter()
with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    matched = sum(pool.map(matches, sys.argv[1:]))
print(json.dumps({"seconds": time.perf_counter() - start, "matched": matched}))
"""


GNU_TIME = Path("/usr/bin/time")
RSS_WRAPPER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
kib = usage.ru_maxrss // (1024 if sys.platform == "darwin" else 1)
open(sys.argv[1], "w").write(f"{kib}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass
class Child:
    """One measured child process."""

    seconds: float
    peak_rss: int  # bytes
    stdout: str
    stderr: str
    returncode: int


def run_child(cmd: list[str]) -> Child:
    """Run `cmd`; its wall time and peak RSS.

    The peak is measured by a small parent (GNU time, else a bare Python wrapper) rather than
    by this process: a child's ru_maxrss includes the RSS of the process it was forked from,
    and this one has pyarrow, polars and deltalake loaded.
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rss"
        if sys.platform.startswith("linux") and GNU_TIME.exists():
            wrapped = [str(GNU_TIME), "-f", "%M", "-o", str(report), *cmd]
        else:
            wrapped = [sys.executable, "-c", RSS_WRAPPER, str(report), *cmd]
        start = time.perf_counter()
        proc = subprocess.run(wrapped, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        kib = int(report.read_text().split()[-1])
    return Child(seconds, kib * 1024, proc.stdout, proc.stderr, proc.returncode)


def checked(child: Child, what: str) -> Child:
    if child.returncode != 0:
        sys.exit(f"{what} failed (exit {child.returncode}):\n{child.stderr}{child.stdout}")
    return child


DVTOOL_BIN: str | None = None


def dvtool_bin() -> str:
    """--dvtool, or this environment's (see bench_inspect.py on runtime-only installs)."""
    return DVTOOL_BIN or str(Path(sys.executable).parent / "dvtool")


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


def base_table(files: int, rows: int, enable_dvs: bool) -> Path:
    """The cached base table (built once; a marker file says it is complete)."""
    name = f"{files}x{rows}" + ("" if enable_dvs else "-nodv")
    table = BENCH / "delete-base" / name
    marker = BENCH / "delete-base" / f"{name}.ready"
    if marker.exists() and table.is_dir():
        return table
    from deltalake import write_deltalake

    shutil.rmtree(table, ignore_errors=True)
    table.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for index in range(files):
        write_deltalake(str(table), generate(index, rows), mode="append")
    written = len(data_files(table))
    if written != files:
        sys.exit(f"expected {files} data files in {table}, deltalake wrote {written}")
    if enable_dvs:
        checked(run_child([dvtool_bin(), "enable", str(table), "--json"]), "dvtool enable")
    marker.write_text(json.dumps({"files": files, "rows_per_file": rows, "seed": SEED}))
    took = time.perf_counter() - started
    print(f"built {table} ({files} files x {rows:,} rows) in {took:.1f} s", flush=True)
    return table


def fresh_copy(base: Path, name: str) -> Path:
    target = BENCH / "delete-runs" / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    os.sync()  # no write-back of the copy during the measurements
    return target


def dv_files(table: Path) -> set[Path]:
    return set(table.rglob("deletion_vector_*.bin"))


def commits(table: Path) -> set[Path]:
    return set((table / "_delta_log").glob("[0-9]*.json"))


def polars_check(table: Path) -> tuple[int, int, int]:
    """(rows, sum of id, rows still matching the predicate) as polars reads the table."""
    import polars as pl

    out = (
        pl.scan_delta(str(table))
        .select(
            pl.len().alias("rows"),
            pl.col("id").sum().alias("ids"),
            (pl.col("key") % 1000 == 7).sum().alias("left"),
        )
        .collect()
    )
    return int(out["rows"][0]), int(out["ids"][0]), int(out["left"][0])


def mib(n: float) -> str:
    return f"{n / 2**20:8.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows-per-file", type=int, default=1_000_000)
    parser.add_argument("--dvtool", help="dvtool executable (default: this environment's)")
    args = parser.parse_args()
    global DVTOOL_BIN
    DVTOOL_BIN = args.dvtool
    total = args.files * args.rows_per_file

    import deltalake
    import polars
    import pyarrow

    base = base_table(args.files, args.rows_per_file, enable_dvs=True)
    deltalake_base = base
    base_files = [str(p) for p in data_files(base)]
    times: dict[str, list[float]] = {"dvtool": [], "deltalake": [], "floor": [], "floor-proc": []}
    rss: dict[str, list[int]] = {"dvtool": [], "deltalake": [], "floor-proc": []}
    in_process: list[float] = []
    notes: list[str] = []
    for repeat in range(args.repeat):
        ours = fresh_copy(base, "dvtool")
        before_dvs, before_commits = dv_files(ours), commits(ours)

        floor = checked(run_child([sys.executable, "-c", FLOOR_SNIPPET, *base_files]), "floor")
        floor_out = json.loads(floor.stdout)
        times["floor"].append(floor_out["seconds"])
        times["floor-proc"].append(floor.seconds)
        rss["floor-proc"].append(floor.peak_rss)
        expected = floor_out["matched"]

        dv = checked(
            run_child([dvtool_bin(), "delete", str(ours), "--where", WHERE, "--json"]),
            "dvtool delete",
        )
        dv_out = json.loads(dv.stdout)
        times["dvtool"].append(dv.seconds)
        rss["dvtool"].append(dv.peak_rss)
        in_process.append(dv_out["metrics"]["executionTimeMs"] / 1000)
        new_dvs = len(dv_files(ours) - before_dvs)
        new_commits = len(commits(ours) - before_commits)

        theirs = fresh_copy(deltalake_base, "deltalake")
        dl = run_child([sys.executable, "-c", DELTALAKE_SNIPPET, str(theirs), WHERE])
        refused = "deletionVectors" in dl.stderr or "feature" in dl.stderr.lower()
        if dl.returncode != 0 and refused and deltalake_base == base:
            reason = (dl.stderr.strip().splitlines() or ["?"])[-1]
            notes.append(
                "deltalake refused the DV-enabled table; it ran on a second base table with "
                f"identical data and no `dvtool enable` ({reason})"
            )
            deltalake_base = base_table(args.files, args.rows_per_file, enable_dvs=False)
            theirs = fresh_copy(deltalake_base, "deltalake")
            dl = run_child([sys.executable, "-c", DELTALAKE_SNIPPET, str(theirs), WHERE])
        dl_out = json.loads(checked(dl, "deltalake delete").stdout)
        times["deltalake"].append(dl.seconds)
        rss["deltalake"].append(dl.peak_rss)

        deleted = dv_out["metrics"]["numDeletedRows"]
        ours_rows, theirs_rows = polars_check(ours), polars_check(theirs)
        problems = []
        if not deleted == dl_out["num_deleted_rows"] == expected:
            problems.append(
                f"deleted rows differ: dvtool {deleted}, deltalake "
                f"{dl_out['num_deleted_rows']}, floor {expected}"
            )
        if ours_rows != theirs_rows or ours_rows[0] != total - expected or ours_rows[2]:
            problems.append(
                f"polars (rows, sum id, left): dvtool {ours_rows}, deltalake {theirs_rows}"
            )
        if new_dvs != 1 or new_commits != 1:
            problems.append(f"dvtool wrote {new_dvs} DV files and {new_commits} commits")
        for problem in problems:
            print(f"FAILED (repeat {repeat + 1}): {problem}", flush=True)
        if problems:
            sys.exit(1)
        print(
            f"repeat {repeat + 1}: dvtool {dv.seconds:.2f} s, deltalake {dl.seconds:.2f} s, "
            f"floor {floor_out['seconds']:.2f} s; {deleted:,} rows deleted by each",
            flush=True,
        )
    shutil.rmtree(BENCH / "delete-runs", ignore_errors=True)

    med = {name: statistics.median(values) for name, values in times.items()}
    peak = {name: statistics.median(values) for name, values in rss.items()}
    size = sum(os.path.getsize(p) for p in base_files)
    print()
    print(
        f"table: {args.files} files x {args.rows_per_file:,} rows = {total:,} rows, "
        f"{size / 2**20:.0f} MiB  where: {WHERE}  repeats: {args.repeat}"
    )
    print(
        f"deltalake {deltalake.__version__}  pyarrow {pyarrow.__version__}  "
        f"polars {polars.__version__}  cpus: {os.cpu_count()}"
    )
    for note in notes or ["both tools ran on copies of the same DV-enabled base table"]:
        print(f"note: {note}")
    rows = [
        ("dvtool delete --json (process)", "dvtool", "dvtool"),
        ("deltalake DeltaTable.delete (process)", "deltalake", "deltalake"),
        ("floor: pyarrow read key + evaluate (process)", "floor-proc", "floor-proc"),
    ]
    for label, t_key, r_key in rows:
        print(
            f"  {label:46s} median {med[t_key]:7.3f} s (min {min(times[t_key]):.3f})  "
            f"peak RSS {mib(peak[r_key])}"
        )
    print(f"  {'floor: read + evaluate only (timed inside)':46s} median {med['floor']:7.3f} s")
    inside = statistics.median(in_process)
    print(f"  {'dvtool executionTimeMs (in process)':46s} median {inside:7.3f} s")
    print(f"rows deleted: {deleted:,} (dvtool = deltalake = floor; polars agrees on both copies)")
    print(
        f"dvtool wrote {new_dvs} DV file(s) and {new_commits} commit(s); deltalake removed "
        f"{dl_out['num_removed_files']} and added {dl_out['num_added_files']} data files, "
        f"copied {dl_out['num_copied_rows']:,} rows"
    )
    speedup = med["deltalake"] / med["dvtool"]
    print(f"speedup deltalake/dvtool: {speedup:.1f}x  (target >= 20)")
    ratio = peak["dvtool"] / peak["deltalake"]
    print(f"peak RSS dvtool/deltalake: {ratio:.2f}  (target < 1)")
    print(f"dvtool / floor (read + evaluate only): {med['dvtool'] / med['floor']:.2f}")
    print(f"dvtool / floor process (both with start-up): {med['dvtool'] / med['floor-proc']:.2f}")


if __name__ == "__main__":
    main()
