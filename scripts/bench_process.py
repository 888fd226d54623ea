"""What the bench_* scripts share about measured processes: the peak memory of a process
tree, and the profile summary of `--profile`.

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


def print_profile(path: Path, top: int = 15) -> None:
    """The `top` functions by cumulative time among dvtool's own, then overall by own time."""
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    rows = [
        (ct, tt, nc, f"{Path(file).as_posix()}:{line}({func})")
        for (file, line, func), (_, nc, tt, ct, _) in stats.items()
    ]
    total = max(ct for ct, *_ in rows)
    root = Path(__file__).resolve().parent.parent.as_posix() + "/"  # the repository
    views = (
        ("dvtool's functions by cumulative time", 0, lambda r: f"{root}dvtool/" in r[3]),
        ("all functions by own time (tottime)", 1, lambda r: True),
    )
    for title, key, keep in views:
        print(f"  {title} (of {total:.2f} s profiled):")
        print(f"    {'cumtime':>8s} {'tottime':>8s} {'calls':>9s}  function")
        for ct, tt, nc, where in sorted(filter(keep, rows), key=lambda r: -r[key])[:top]:
            print(f"    {ct:8.3f} {tt:8.3f} {nc:9d}  {where.replace(root, '')}")
