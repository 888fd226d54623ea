"""Checkpoints of the versions dvtool commits, and the log cleanup that follows each one.

After a commit at version v with `v % delta.checkpointInterval == 0` (default 10), a classic
checkpoint for v is written (V2 spec on v2Checkpoint tables), then `_last_checkpoint`. Then,
as Delta does after every checkpoint, the expired log entries are deleted (PROTOCOL.md
"Metadata Cleanup", `dvtool.delta.log.cleanup`) unless `delta.enableExpiredLogCleanup` is
false; the cleanup's code is imported only then, so commits without a checkpoint do not pay
for it. Neither a failed checkpoint nor a failed cleanup fails the command: the commit stands
and the problem is returned as a warning (`CommitResult.checkpoint_warning`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.actions import Metadata
from dvtool.delta.protocol.features import writer_features
from dvtool.delta.protocol.log_files import LogFileKind, parse_log_name

DEFAULT_CHECKPOINT_INTERVAL = 10
_CODECS = {
    "uncompressed": "none",
    "none": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "lz4_raw": "lz4",
    "zstd": "zstd",
}


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint this writer wrote."""

    version: int
    name: str
    size: int
    size_in_bytes: int
    num_add_files: int
    v2: bool


def checkpoint_after_commit(
    log: DeltaLog,
    version: int,
    actions: Sequence[Mapping[str, Any]],
    metadata: Metadata | None,
    now_ms: int,
) -> tuple[CheckpointInfo | None, str | None]:
    """The checkpoint due after committing `actions` at `version` (None when none is due),
    followed by the log cleanup, and a warning when either failed. `metadata` (the table's
    as of the commit; read from the log when omitted and the commit changes none) gives
    `delta.checkpointInterval`."""
    try:
        snapshot = None
        configuration = committed_configuration(actions, metadata)
        if configuration is None:
            snapshot = log.snapshot(version)
            configuration = snapshot.metadata.configuration
        if version == 0 or version % checkpoint_interval(configuration):
            return None, None
        snapshot = snapshot or log.snapshot(version)
        info = write_checkpoint(log, version, snapshot, now_ms)
    except Exception as e:  # the commit stands whatever happens here
        return None, (
            f"committed version {version}, but its checkpoint could not be written: {one_line(e)}"
        )
    return info, clean_up_after_checkpoint(log, snapshot, now_ms)


def clean_up_after_checkpoint(log: DeltaLog, snapshot: Snapshot, now_ms: int) -> str | None:
    """Delete the expired log entries after the checkpoint of `snapshot`'s version; a warning
    when that failed (the checkpoint and the commit stand), else None."""
    try:
        from dvtool.delta.log.cleanup import cleanup_after_checkpoint

        result = cleanup_after_checkpoint(log, snapshot, now_ms)
        problem = result.error if result is not None else None
    except Exception as e:
        problem = one_line(e)
    if problem is None:
        return None
    return (
        f"wrote the checkpoint of version {snapshot.version}, but the log cleanup after it "
        f"failed: {problem}"
    )


def write_checkpoint(
    log: DeltaLog,
    version: int,
    snapshot: Snapshot | None,
    now_ms: int,
    *,
    name: str | None = None,
) -> CheckpointInfo:
    """Write the checkpoint of `version` and point `_last_checkpoint` at it.

    A classic checkpoint, unless `name` gives the UUID-named one to replace (a damaged one:
    `dvtool checkpoint`), written in its format (parquet or JSON) on v2Checkpoint tables.
    V2 spec (with checkpointMetadata, no sidecars) on v2Checkpoint tables. The file is
    written whole and replaces an existing one atomically (a reader sees the old bytes or
    the new, never half of a file, never no file); so is `_last_checkpoint`, which is never
    moved back to an older version unless it names no checkpoint that exists (garbage, a
    version beyond the log, a deleted checkpoint). `snapshot`, if given, must be the table
    at `version`; `now_ms` decides which tombstones have expired.
    """
    # Local: one commit in `delta.checkpointInterval` (10) writes a checkpoint; the others
    # should not pay for importing its code and pyarrow.parquet (start-up time).
    from dvtool.delta.protocol.checkpoint_build import (
        checkpoint_json,
        checkpoint_table,
        last_checkpoint_json,
    )

    storage = log.storage
    if snapshot is None:
        snapshot = log.snapshot(version)
    if snapshot.version != version:
        raise ValueError(f"snapshot of version {snapshot.version} given for {version}")
    v2 = "v2Checkpoint" in writer_features(snapshot.protocol)
    table = checkpoint_table(snapshot.state, v2=v2, now_ms=now_ms)
    if name is None or not v2 or not _is_uuid_name(name, version):
        name = f"{version:020d}.checkpoint.parquet"
    if name.endswith(".json"):
        data = checkpoint_json(table)
    else:
        data = _parquet_bytes(table, snapshot.metadata.configuration)
    storage.write(storage.join(f"_delta_log/{name}"), data)
    num_adds = snapshot.state.adds.num_rows
    info = CheckpointInfo(version, name, table.num_rows, len(data), num_adds, v2)
    current = log.last_checkpoint_hint()
    if current is None or current <= version or log.last_checkpoint_problem() is not None:
        storage.write_atomic_replace(
            storage.join("_delta_log/_last_checkpoint"),
            last_checkpoint_json(version, table.num_rows, len(data), num_adds),
        )
    return info


def _is_uuid_name(name: str, version: int) -> bool:
    """Whether `name` is a UUID-named checkpoint of `version` (PROTOCOL.md, "UUID-named
    checkpoint"), the only name besides the classic one this writer writes."""
    found = parse_log_name(name)
    return (
        found is not None
        and found.kind == LogFileKind.UUID_CHECKPOINT
        and (found.version == version)
    )


def checkpoint_interval(configuration: Mapping[str, str]) -> int:
    """`delta.checkpointInterval` (default 10; invalid values fall back to the default)."""
    try:
        interval = int(str(configuration.get("delta.checkpointInterval", "")).strip())
    except ValueError:
        return DEFAULT_CHECKPOINT_INTERVAL
    return interval if interval > 0 else DEFAULT_CHECKPOINT_INTERVAL


def committed_configuration(
    actions: Sequence[Mapping[str, Any]], metadata: Metadata | None
) -> Mapping[str, str] | None:
    for action in actions:
        body = action.get("metaData")
        if isinstance(body, Mapping):
            return dict(body.get("configuration") or {})
    return metadata.configuration if metadata is not None else None


def _parquet_bytes(table: pa.Table, configuration: Mapping[str, str]) -> bytes:
    """The checkpoint as parquet, with the table's codec and data page version properties."""
    import pyarrow.parquet as pq  # local: see write_checkpoint

    codec_name = str(configuration.get("delta.parquet.compression.codec", "zstd")).lower()
    codec = _CODECS.get(codec_name, "zstd")
    page_version = str(configuration.get("delta.parquet.format.version", "1.0.0"))
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression=codec,
        data_page_version="2.0" if page_version.startswith("2.") else "1.0",
    )
    return bytes(sink.getvalue().to_pybytes())


def one_line(exc: BaseException) -> str:
    """An exception's message on one line of at most 300 characters, for warnings."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
