"""History truncation for `dvtool downgrade --truncate-history`: the log entries before the
history boundary, and their deletion (PROTOCOL.md, "Metadata Cleanup").

Everything before the boundary goes: commits, checkpoints, checksums and their hidden Hadoop
`.crc` files, and log compactions starting at or before it. Sidecars go when no remaining
checkpoint references them and they were written before a cutoff, so that a checkpoint being
written concurrently keeps its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pyarrow.parquet as pq

from dvtool.core.log_files import LogFile, LogFileKind, parse_log_name
from dvtool.log.reader import DeltaLog

_CRC = re.compile(r"^(\d{20})\.crc$")
_HIDDEN_CRC = re.compile(r"^\.(.+)\.crc$")


def truncation_plan(log: DeltaLog, boundary: int, sidecar_cutoff_ms: int) -> list[tuple[str, int]]:
    """(name under _delta_log, version) of every log entry a truncation before `boundary`
    deletes: commits, checkpoints, checksums and their hidden Hadoop .crc files before it, log
    compactions starting at or before it, and sidecars no remaining checkpoint references
    (written before `sidecar_cutoff_ms`, so an in-progress checkpoint keeps its own)."""
    if boundary <= 0:
        return []
    entries, kept_checkpoints = _log_entries_before(log, boundary)
    return sorted(
        entries + _unreferenced_sidecars(log, kept_checkpoints, sidecar_cutoff_ms),
        key=lambda item: (item[1], item[0]),
    )


def _log_entries_before(
    log: DeltaLog, boundary: int
) -> tuple[list[tuple[str, int]], list[LogFile]]:
    """The entries of _delta_log itself that go (with their hidden .crc files), and the
    checkpoints that stay."""
    infos = log.storage.list_dir(log.log_dir)
    out: list[tuple[str, int]] = []
    kept_checkpoints: list[LogFile] = []
    names = {i.name for i in infos}
    for info in infos:
        parsed = parse_log_name(info.name, info.size, info.modification_time_ms)
        version: int | None = None
        if parsed is not None:
            if parsed.kind == LogFileKind.COMPACTION:
                version = parsed.start_version if parsed.start_version <= boundary else None
            elif parsed.version < boundary:
                version = parsed.version
            elif parsed.is_checkpoint:
                kept_checkpoints.append(parsed)
        elif m := _CRC.match(info.name):
            version = int(m[1]) if int(m[1]) < boundary else None
        if version is not None:
            out.append((info.name, version))
            hidden = f".{info.name}.crc"
            if hidden in names:
                out.append((hidden, version))
    return out, kept_checkpoints


def _unreferenced_sidecars(
    log: DeltaLog, kept_checkpoints: Sequence[LogFile], cutoff_ms: int
) -> list[tuple[str, int]]:
    """Sidecars (and their hidden .crc files) no kept checkpoint references, written at or
    before `cutoff_ms`; version -1, as they belong to no single version."""
    storage = log.storage
    sidecars = storage.list_dir(storage.join("_delta_log/_sidecars"))
    if not sidecars:
        return []
    referenced = referenced_sidecars(log, kept_checkpoints)
    out: list[tuple[str, int]] = []
    for info in sidecars:
        crc = _HIDDEN_CRC.match(info.name)
        target = crc[1] if crc else info.name
        old = info.modification_time_ms is None or info.modification_time_ms <= cutoff_ms
        if target not in referenced and old:
            out.append((f"_sidecars/{info.name}", -1))
    return out


def referenced_sidecars(log: DeltaLog, checkpoints: Sequence[LogFile]) -> set[str]:
    """File names of the sidecars the given checkpoints reference."""
    storage = log.storage
    out: set[str] = set()
    for f in checkpoints:
        location = storage.join(f"_delta_log/{f.name}")
        if f.name.endswith(".json"):
            for line in storage.read(location).splitlines():
                if b'"sidecar"' in line:
                    body = json.loads(line).get("sidecar") or {}
                    out.add(str(body.get("path", "")).rsplit("/", 1)[-1])
            continue
        with storage.open_parquet(location) as source:
            parquet = pq.ParquetFile(source)
            if "sidecar" not in parquet.schema_arrow.names:
                continue
            column = parquet.read(columns=["sidecar"]).column("sidecar")
        for row in column.to_pylist():
            if row and row.get("path"):
                out.add(str(row["path"]).rsplit("/", 1)[-1])
    return out


def delete_history(log: DeltaLog, boundary: int, plan: Sequence[tuple[str, int]]) -> list[str]:
    """Delete the planned log entries before `boundary`; returns their names. A
    `_last_checkpoint` hint older than the boundary goes too: it would point to a deleted
    checkpoint, and the drop's checkpoint writes a new one."""
    storage = log.storage
    hint = log.last_checkpoint_hint()
    if hint is not None and hint < boundary:
        storage.delete(storage.join("_delta_log/_last_checkpoint"))
        storage.delete(storage.join("_delta_log/._last_checkpoint.crc"))
    storage.delete_many(storage.join(f"_delta_log/{name}") for name, _ in plan)
    return [name for name, _ in plan]
