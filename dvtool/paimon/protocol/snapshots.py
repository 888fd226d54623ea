"""Paimon snapshots (`snapshot/snapshot-N`, JSON; `snapshot.md`) and which one to read,
without any IO.

A snapshot names its schema, its base and delta manifest lists (together the table's files:
the base holds the state before the commit, the delta what the commit changed), its
changelog manifest list and its index manifest (the table-index files: deletion vectors and
hash indexes), with the commit kind (APPEND, COMPACT, OVERWRITE, ANALYZE), the time and the
record counts. Snapshot ids count up from 1 with every commit; `snapshot/LATEST` and
`EARLIEST` are hints a writer updates after the commit, so the listing of `snapshot/` is
what decides (Paimon's own `SnapshotManager` falls back on it too).

Time travel is Paimon's `scan.timestamp-millis`: the newest snapshot committed at or before
the time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dvtool.errors import LogError, UsageError, VersionNotFoundError

SNAPSHOT_DIR = "snapshot"
SNAPSHOT_PREFIX = "snapshot-"
LATEST_HINT = "LATEST"
EARLIEST_HINT = "EARLIEST"

_SNAPSHOT_FILE = re.compile(r"^snapshot-(\d+)$")


def snapshot_id_of(name: str) -> int | None:
    """The id a `snapshot-N` file name carries, None for another name (hints, temp files)."""
    match = _SNAPSHOT_FILE.match(name)
    return int(match[1]) if match else None


def snapshot_name(snapshot_id: int) -> str:
    return f"{SNAPSHOT_PREFIX}{snapshot_id}"


@dataclass(frozen=True)
class Snapshot:
    """One committed snapshot: what it names and its commit's figures."""

    id: int
    version: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    changelog_manifest_list: str | None
    index_manifest: str | None
    commit_user: str | None
    commit_identifier: int | None
    commit_kind: str
    time_millis: int
    total_record_count: int | None
    delta_record_count: int | None
    changelog_record_count: int | None
    watermark: int | None
    properties: dict[str, str]
    statistics: str | None = None
    """The statistics file (under `statistics/`) an ANALYZE commit wrote, if any."""

    @classmethod
    def from_json(cls, text: str | bytes) -> Snapshot:
        """Parse a snapshot file; LogError when it is not one."""
        try:
            raw = json.loads(text)
            return cls(
                id=int(raw["id"]),
                version=int(raw.get("version", 1)),
                schema_id=int(raw["schemaId"]),
                base_manifest_list=str(raw["baseManifestList"]),
                delta_manifest_list=str(raw["deltaManifestList"]),
                changelog_manifest_list=_optional_str(raw.get("changelogManifestList")),
                index_manifest=_optional_str(raw.get("indexManifest")),
                commit_user=_optional_str(raw.get("commitUser")),
                commit_identifier=_optional_int(raw.get("commitIdentifier")),
                commit_kind=str(raw["commitKind"]),
                time_millis=int(raw["timeMillis"]),
                total_record_count=_optional_int(raw.get("totalRecordCount")),
                delta_record_count=_optional_int(raw.get("deltaRecordCount")),
                changelog_record_count=_optional_int(raw.get("changelogRecordCount")),
                watermark=_optional_int(raw.get("watermark")),
                properties={str(k): str(v) for k, v in (raw.get("properties") or {}).items()},
                statistics=_optional_str(raw.get("statistics")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise LogError(f"not a Paimon snapshot file: {e}") from None

    def manifest_lists(self) -> tuple[str, ...]:
        """The manifest lists of the table's files: base, then delta."""
        return (self.base_manifest_list, self.delta_manifest_list)


def snapshot_ids(names: Iterable[str]) -> list[int]:
    """The snapshot ids among the file names of `snapshot/`, ascending."""
    return sorted(i for n in names if (i := snapshot_id_of(n)) is not None)


def select_snapshot_id(
    ids: list[int],
    times: dict[int, int] | None = None,
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
) -> int | None:
    """The snapshot to read among `ids` (ascending): the latest (None for a table without
    snapshots), `snapshot_id`, or the newest committed at or before `timestamp_ms` (`times`
    maps ids to commit times and must hold every id for that)."""
    if snapshot_id is not None and timestamp_ms is not None:
        raise UsageError("--version and --timestamp cannot be used together")
    if snapshot_id is not None:
        if snapshot_id not in ids:
            kept = f" (it keeps {ids[0]} to {ids[-1]})" if ids else " (it has none)"
            raise VersionNotFoundError(
                f"the Paimon table has no snapshot {snapshot_id}{kept}",
                hint="`dvtool inspect TABLE --history` lists its snapshots.",
            )
        return snapshot_id
    if timestamp_ms is not None:
        return _as_of(ids, times or {}, timestamp_ms)
    return ids[-1] if ids else None


def _as_of(ids: list[int], times: dict[int, int], timestamp_ms: int) -> int:
    found = [i for i in ids if times[i] <= timestamp_ms]
    if not found:
        first = min((times[i] for i in ids), default=None)
        since = f" (its oldest kept snapshot is from {_iso(first)})" if first is not None else ""
        raise VersionNotFoundError(
            f"the Paimon table had no snapshot at {_iso(timestamp_ms)}{since}",
            hint="`dvtool inspect TABLE --history` lists its snapshots and their times.",
        )
    return max(found)


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
