"""`_delta_log/_last_vacuum_info`: how far vacuum has dealt with the files commits removed.

The file (Delta's name and key) holds `{"latestCommitVersionOutsideOfRetentionWindow": v}`:
the newest commit whose removed files have been dealt with; the next `--lite` run reads the
commits after it. Unlike Delta Spark, whose full VACUUM records no version, a full run
records the newest commit older than the cutoff too, so `--lite` works after a full run on
a table whose first commits were cleaned up.
"""

from __future__ import annotations

import json

from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.protocol.log_files import LogFileKind
from dvtool.delta.protocol.log_json import first_commit_info
from dvtool.errors import FileMissingError, LogError

LAST_VACUUM_INFO = "_delta_log/_last_vacuum_info"
LAST_VACUUM_KEY = "latestCommitVersionOutsideOfRetentionWindow"


def read_last_vacuum_info(log: DeltaLog) -> int | None:
    """`latestCommitVersionOutsideOfRetentionWindow` of `_delta_log/_last_vacuum_info`, or
    None when the file is missing, unreadable, or holds no version (as Delta reads it)."""
    try:
        doc = json.loads(log.storage.read(log.storage.join(LAST_VACUUM_INFO)))
    except (FileMissingError, ValueError):
        return None
    value = doc.get(LAST_VACUUM_KEY) if isinstance(doc, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def last_vacuum_info_json(version: int) -> bytes:
    """The bytes of `_delta_log/_last_vacuum_info` as Delta Spark writes them."""
    return (json.dumps({LAST_VACUUM_KEY: version}, separators=(",", ":")) + "\n").encode()


def latest_commit_outside_retention(log: DeltaLog, cutoff: int, latest: int) -> int | None:
    """The newest commit committed before `cutoff` (Delta's commit times), at most `latest`;
    None when every commit is newer."""
    try:
        version = log.version_at(cutoff - 1)
    except LogError:
        commits = sorted(
            (f for f in log.list_files() if f.kind == LogFileKind.COMMIT), key=lambda f: f.version
        )
        if not commits:
            return None
        first = commits[0]
        info = first_commit_info(log.storage.read(log.storage.join(f"_delta_log/{first.name}")))
        ict = (info or {}).get("inCommitTimestamp")
        first_time = ict if isinstance(ict, int) else (first.modification_time_ms or 0)
        if first_time >= cutoff:
            return None
        version = commits[-1].version
    return min(version, latest)
