"""Peak memory of a measured process tree, shared by the bench_* scripts.

Spark runs a JVM and Python workers beside the driver, which the driver's own ru_maxrss does
not see; the scripts sample the summed RSS of the whole tree from /proc (Linux) instead.
"""

from __future__ import annotations

import os
from pathlib import Path


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


def tree_rss(pid: int) -> int:
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
