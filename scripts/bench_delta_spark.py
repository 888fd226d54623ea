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
  (the JVM runs with -XX:TieredStopAtLevel=1, as the harness sets it), so it is excluded
  from the warm time;
- `warm`: the median of runs 2..N, each on its own fresh copy (no cache of the table: a
  new path every run).

`report(...)` prints the times and the ratios Delta Spark / dvtool: "start-up not counted"
is warm / dvtool; "start-up counted" is (start + first) / dvtool, what a one-shot Spark job
pays. dvtool's time is its CLI process wall time, interpreter start-up included (so the
"not counted" ratio is conservative for dvtool); its in-process executionTimeMs is printed
beside when the caller has it. The goal of issue 24: Delta Spark / dvtool >= 5 with start-up
not counted.
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
    from tests.engines.jvm_engines import DELTA_SPARK, DELTA_VERSION, start

    peer = Peer(statement)
    copies = [copy(f"delta-spark-{i}") for i in range(max(2, runs))]
    began = time.perf_counter()
    session = start(DELTA_SPARK, workdir)
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


def report(peer: Peer, what: str, dvtool: list[float], inside: list[float] | None = None) -> None:
    """Print Delta Spark's times and the ratios to dvtool's (see the module docstring)."""
    warm = statistics.median(peer.warm)
    ours = statistics.median(dvtool)
    print(f"Delta Spark peer: {peer.versions}")
    print(f"  statement: {peer.statement}")
    print(
        f"  session start {peer.start:.2f} s; first statement (JIT warm-up, not in warm) "
        f"{peer.first:.2f} s; warm: median {warm:.2f} s of {len(peer.warm)} "
        f"(min {min(peer.warm):.2f}, each on a fresh copy)"
    )
    print(f"  {what}, process wall (median of {len(dvtool)}): {ours:.2f} s")
    verdict = "ok" if warm / ours >= TARGET else "MISSED"
    print(
        f"  Delta Spark / dvtool, start-up not counted (warm / dvtool process): "
        f"{warm / ours:6.2f}  (target >= {TARGET}: {verdict})"
    )
    counted = peer.start + peer.first
    print(
        f"  Delta Spark / dvtool, start-up counted ((start + first) / dvtool process): "
        f"{counted / ours:6.2f}"
    )
    if inside:
        print(
            f"  Delta Spark warm / dvtool executionTimeMs (no start-up on either side): "
            f"{warm / statistics.median(inside):6.2f}"
        )
