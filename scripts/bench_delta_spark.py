"""Delta Spark as a benchmark peer (issue 24): bench_delete.py and bench_purge.py use it.

`measure(statement, runs, copy, check, workdir)` starts Delta Spark 4.4.0 on Spark 4.1
(`local[2]`, UTC, the reference-engine harness of the tests: tests/engines/jvm_engines.py,
in a child process) and runs `statement` (`{table}` stands for ``delta.`COPY` ``) `runs`
times, each on a fresh copy of the same base table dvtool's runs copy (`copy(name)`), then
`check(copy)` on every copy (the same rows as dvtool's outcome; problems end the benchmark).

What is timed, by this process around each request (the JSON round trip to the child is
included, a few ms):

- `start`: `start(DELTA_SPARK, ...)`: the Python child, the JVM, the Spark session with
  Delta's jars resolved from the local Ivy cache (no download);
- `first`: the first statement: it loads Delta's classes and JIT-compiles the hot paths
  (the JVM runs as a production driver would: both JIT tiers, G1, 4 GiB; the harness's
  quick-start test settings are overridden with `PRODUCTION_JVM`), so it is excluded from
  the warm time;
- `warm`: the median of runs 2..N, each on its own fresh copy (no cache of the table: a
  new path every run).

`measure_dvtool_warm(...)` is dvtool's side of "start-up not counted", symmetric to Delta
Spark's warm statement: one Python process (the interpreter beside the dvtool executable)
imports dvtool and calls the same command through the Python API (`dvtool.delete`,
`dvtool.optimize(purge=True)`) on `runs` fresh copies; the first call (imports of the
command's modules, caches) is excluded, the median of the others is dvtool's warm time.

`report(...)` prints the times and the ratios Delta Spark / dvtool:

- start-up not counted: Delta Spark warm / dvtool warm (both in a running process, the
  issue's goal: >= 5), and Delta Spark warm / dvtool CLI process wall (interpreter start-up
  and imports counted for dvtool only: conservative for dvtool);
- start-up counted: (session start + first statement) / dvtool CLI process wall, what a
  one-shot Spark job pays against one dvtool command.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 5.0


@dataclass
class Peer:
    """Delta Spark's times (seconds) for one statement, and what its checks found."""

    statement: str
    start: float = 0.0
    first: float = 0.0
    warm: list[float] = field(default_factory=list)
    versions: str = ""
    problems: list[str] = field(default_factory=list)


def measure(
    statement: str,
    runs: int,
    copy: Callable[[str], Path],
    check: Callable[[Path], list[str]],
    workdir: Path,
) -> Peer:
    """Start Delta Spark, run `statement` on `runs` fresh copies, check each (see above)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.engines.jvm_engines import DELTA_SPARK, DELTA_VERSION, PRODUCTION_JVM, start

    peer = Peer(statement)
    copies = [copy(f"delta-spark-{i}") for i in range(max(2, runs))]
    began = time.perf_counter()
    session = start(DELTA_SPARK, workdir, PRODUCTION_JVM)
    peer.start = time.perf_counter() - began
    try:
        spark_version = session.rows("SELECT version() AS v")[0]["v"].split()[0]
        peer.versions = f"Delta Spark {DELTA_VERSION} on Spark {spark_version} (local[2])"
        for i, table in enumerate(copies):
            began = time.perf_counter()
            session.sql(statement.format(table=f"delta.`{table}`"))
            took = time.perf_counter() - began
            if i == 0:
                peer.first = took
            else:
                peer.warm.append(took)
            print(f"delta-spark run {i + 1}: {took:.2f} s", flush=True)
    finally:
        session.stop()
    for table in copies:
        peer.problems += [f"delta-spark ({table.name}): {p}" for p in check(table)]
    return peer


WARM_SNIPPET = """
import json, sys, time
args = json.loads(sys.argv[1])
import dvtool
out = []
for path in args["paths"]:
    began = time.perf_counter()
    if args["op"] == "delete":
        dvtool.delete(path, args["where"])
    else:
        dvtool.optimize(path, purge=True)
    out.append(time.perf_counter() - began)
print(json.dumps(out))
"""


def measure_dvtool_warm(
    python: str,
    op: str,
    where: str,
    runs: int,
    copy: Callable[[str], Path],
    check: Callable[[Path], list[str]],
) -> tuple[list[float], list[str]]:
    """dvtool's warm times through the Python API in one process (first call excluded), and
    the problems `check` finds on its copies (see the module docstring)."""
    import json
    import subprocess

    copies = [copy(f"dvtool-warm-{i}") for i in range(max(2, runs))]
    spec = json.dumps({"op": op, "where": where, "paths": [str(c) for c in copies]})
    done = subprocess.run(
        [python, "-c", WARM_SNIPPET, spec], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return [], [f"dvtool warm runs failed: {done.stderr.strip()[-500:]}"]
    times = json.loads(done.stdout)
    problems = [f"dvtool warm ({c.name}): {p}" for c in copies for p in check(c)]
    return times[1:], problems


def last_commit(table: Path) -> dict[str, Any]:
    """The commitInfo of the table's latest JSON commit."""
    import json

    latest = max((table / "_delta_log").glob("[0-9]*.json"))
    for line in latest.read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            info: dict[str, Any] = action["commitInfo"]
            return info
    return {}


def report(peer: Peer, what: str, dvtool: list[float], dvtool_warm: list[float]) -> None:
    """Print Delta Spark's times and the ratios to dvtool's (see the module docstring)."""
    warm = statistics.median(peer.warm)
    ours = statistics.median(dvtool)
    ours_warm = statistics.median(dvtool_warm)
    print(f"Delta Spark peer: {peer.versions}")
    print(f"  statement: {peer.statement.format(table='delta.`COPY`')}")
    print(
        f"  session start {peer.start:.2f} s; first statement (JIT warm-up, not in warm) "
        f"{peer.first:.2f} s; warm: median {warm:.2f} s of {len(peer.warm)} "
        f"(min {min(peer.warm):.2f}, each on a fresh copy)"
    )
    print(f"  {what}, process wall (median of {len(dvtool)}): {ours:.2f} s")
    print(
        f"  dvtool warm, Python API in a running process: median {ours_warm:.2f} s of "
        f"{len(dvtool_warm)} (min {min(dvtool_warm):.2f}; first call excluded)"
    )
    verdict = "ok" if warm / ours_warm >= TARGET else "MISSED"
    print(
        f"  Delta Spark / dvtool, start-up not counted (warm / dvtool warm): "
        f"{warm / ours_warm:6.2f}  (target >= {TARGET}: {verdict})"
    )
    print(
        f"  Delta Spark / dvtool, JVM start-up not counted, dvtool's counted (warm / dvtool "
        f"process): {warm / ours:6.2f}"
    )
    counted = peer.start + peer.first
    print(
        f"  Delta Spark / dvtool, start-up counted ((start + first) / dvtool process): "
        f"{counted / ours:6.2f}"
    )
