"""The soak's reading of `_delta_log` without dvtool (see scripts/soak.py): listings with
modification times (`list_log`, `commit_times`), every commit's commitInfo and removal times
(`read_log`, `LogState`), and whether a vacuum can have deleted the files of a version
(`vacuum_safe`).

Independent of dvtool's code on purpose: the workers (soak_ops.py) pick restore targets from
it and the checks (soak_checks.py, soak_expected.py, soak_report.py) compare dvtool's results
with it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from soak_table import Target

COMMIT_NAME = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_NAME = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
# Any versioned _delta_log entry: commit, checkpoint, checksum, hidden Hadoop .X.crc file.
VERSIONED_NAME = re.compile(r"^\.?(\d{20})\.")


# -- the log, read without dvtool ---------------------------------------------------------


def list_log(target: Target) -> dict[str, tuple[int, int]]:
    """The files directly in `_delta_log`: name -> (size, modification time in ms). Local
    times are truncated to ms from nanoseconds (as Hadoop's FileStatus has them), S3's are
    the object's LastModified. Never a cached listing; an entry deleted or renamed while
    it is listed is left out."""
    out: dict[str, tuple[int, int]] = {}
    if target.local_path is not None:
        with os.scandir(target.local_path / "_delta_log") as entries:
            for entry in entries:
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:  # gone since the listing (a temp file renamed, a
                    continue  # log entry a concurrent cleanup deleted)
                out[entry.name] = (st.st_size, st.st_mtime_ns // 1_000_000)
        return out
    fs = target.filesystem()
    for info in fs.ls(target.fs_path("_delta_log"), detail=True, refresh=True):
        if info.get("type") != "file":
            continue
        modified = info.get("LastModified")
        ms = int(modified.timestamp() * 1000) if isinstance(modified, dt.datetime) else 0
        out[str(info["name"]).rsplit("/", 1)[-1]] = (int(info.get("size") or 0), ms)
    return out


def commit_times(listing: Mapping[str, tuple[int, int]]) -> dict[int, int]:
    """version -> the modification time of its commit file (ms), from a `list_log` listing."""
    return {
        int(m[1]): entry[1] for name, entry in listing.items() if (m := COMMIT_NAME.match(name))
    }


@dataclass
class LogState:
    """The log as the workers left it, read without dvtool."""

    listing: dict[str, tuple[int, int]]
    infos: dict[int, dict[str, Any]]  # version -> commitInfo (empty when a commit has none)
    removed_at: dict[int, int]  # version -> the oldest deletionTimestamp of its removes

    @property
    def checkpoints(self) -> list[int]:
        """The versions of the classic single-file checkpoints, ascending."""
        return sorted(int(m[1]) for n in self.listing if (m := CHECKPOINT_NAME.match(n)))

    def rebuildable_from(self) -> int | None:
        """The oldest version a reader can rebuild: 0 while commit 0 is there, else the
        oldest checkpoint with every commit after it (None when there is none)."""
        versions = sorted(self.infos)
        if not versions:
            return None
        if versions[0] == 0:
            return 0
        return next((c for c in self.checkpoints if c >= versions[0] - 1), None)

    def operation_times(self, operation: str) -> list[int]:
        """The commitInfo timestamps of the commits of `operation`."""
        return [
            int(i["timestamp"])
            for i in self.infos.values()
            if i.get("operation") == operation and isinstance(i.get("timestamp"), int)
        ]


def read_log(target: Target) -> LogState:
    fs = target.filesystem()
    listing = list_log(target)
    infos: dict[int, dict[str, Any]] = {}
    removed_at: dict[int, int] = {}
    for name in listing:
        match = COMMIT_NAME.match(name)
        if not match:
            continue
        version = int(match[1])
        info: dict[str, Any] = {}
        for line in fs.cat_file(target.fs_path(f"_delta_log/{name}")).decode().splitlines():
            action = json.loads(line) if line.strip() else {}
            info = action.get("commitInfo", info)
            stamp = (action.get("remove") or {}).get("deletionTimestamp")
            if isinstance(stamp, int):
                removed_at[version] = min(stamp, removed_at.get(version, stamp))
        infos[version] = info
    return LogState(listing, infos, removed_at)


def vacuum_safe(
    version: int, state: LogState, retain_ms: float, before_ms: float = float("inf")
) -> bool:
    """Whether no vacuum that started before `before_ms` can have deleted a file live at
    `version`: such a file (data or DV) is unreferenced only after a commit after `version`
    removed it, and a vacuum deletes a removed file only when its removal is older than the
    vacuum's start minus the retention. 5 s of slack keep this on the safe side."""
    starts = [t for t in state.operation_times("VACUUM START") if t < before_ms]
    if not starts:
        return True
    removals = [t for v, t in state.removed_at.items() if v > version]
    return not removals or min(removals) >= max(starts) - retain_ms + 5000
