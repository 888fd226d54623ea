"""What `dvtool restore` commits, as pure functions (Delta Spark's `RestoreTableCommand`).

- **Files** are keyed on (canonical path, DV unique id), as log replay keys them. A file live
  at the target version but not now is re-added with its add action as it was then (stats,
  partition values, tags, DV, `baseRowId`, `defaultRowCommitVersion`), `dataChange=true`. A
  file live now but not at the target is removed with its current DV. A file whose DV
  changed since is both: removed with its current DV, re-added with the old one.
- **Protocol**: the target's merged with the current one, as Delta's `Protocol.merge` (the
  higher versions, the union of the features): a restore never downgrades the protocol.
- **Metadata**: the target's, except what must never move backwards because it describes
  the table's history rather than the state restored: identity column high-water marks
  (merged as Delta's `IdentityColumn.copySchemaWithMergedHighWaterMarks`), the in-commit
  timestamp properties (a restore neither turns them on or off nor moves their enablement
  version), row tracking's materialized column names, and column mapping's `maxColumnId`
  (the higher one: column ids are never reused).
- **Domains** stay as they are now (so the row tracking high-water mark never goes down),
  except `delta.clustering`, set to the target's clustering columns (none when the target
  was not clustered), as Delta's `handleDomainMetadataForRestoreTable`.
- **commitInfo**: operation `RESTORE`, parameters `version`/`timestamp` and the six
  operation metrics Delta records (`restore_parameters`, `restore_metrics`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.delta.protocol.actions import DomainMetadata, Metadata, Protocol
from dvtool.delta.protocol.features import writer_features
from dvtool.delta.protocol.file_actions import key_column
from dvtool.delta.protocol.file_layout import CLUSTERING_DOMAIN
from dvtool.delta.protocol.paths import CanonicalRoot
from dvtool.delta.protocol.protocol_upgrade import protocol_features
from dvtool.delta.protocol.row_tracking import COMMIT_VERSION_COLUMN_KEY, ROW_ID_COLUMN_KEY
from dvtool.delta.protocol.schema import PHYSICAL_NAME_KEY

# Properties a restore takes from the current metadata, whatever the target's say.
ICT_PROPERTIES = (
    "delta.enableInCommitTimestamps",
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
)
ROW_TRACKING_NAME_PROPERTIES = (ROW_ID_COLUMN_KEY, COMMIT_VERSION_COLUMN_KEY)
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
IDENTITY_START = "delta.identity.start"
IDENTITY_STEP = "delta.identity.step"
IDENTITY_HIGH_WATER_MARK = "delta.identity.highWaterMark"
# The clustering domain of a table that is not clustered (Delta's ClusteringMetadataDomain
# with no columns), written when the current table has one and the target had none.
NO_CLUSTERING = '{"clusteringColumns":[],"domainName":"delta.clustering"}'


@dataclass(frozen=True)
class FileDiff:
    """The files a restore re-adds (rows of the target's file table) and removes (rows of
    the current one), in the canonical add layout with `numRecords`."""

    to_add: pa.Table
    to_remove: pa.Table


def diff_files(current: pa.Table, target: pa.Table, root: str) -> FileDiff:
    """The logical files live at the target but not now, and live now but not at the target.

    Both tables are snapshots' file tables; keys are canonical against the table `root`.
    """
    canonical = CanonicalRoot.parse(root)
    now = key_column(current, canonical).combine_chunks()
    then = key_column(target, canonical).combine_chunks()
    to_add = target.filter(pc.invert(pc.is_in(then, value_set=now)))
    to_remove = current.filter(pc.invert(pc.is_in(now, value_set=then)))
    return FileDiff(to_add, to_remove)


def row_id_floor(to_add: pa.Table) -> int:
    """The highest row ID the re-added files' `baseRowId`s cover (-1 when none has one), so
    the high-water mark can be kept at least as high."""
    highest = -1
    bases = to_add.column("baseRowId").to_pylist()
    records = to_add.column("numRecords").to_pylist()
    for base, count in zip(bases, records, strict=True):
        if base is not None:
            highest = max(highest, base + max(int(count or 0), 1) - 1)
    return highest


# -- protocol -------------------------------------------------------------------------------


def merged_protocol(target: Protocol, current: Protocol) -> Protocol:
    """The protocol after restoring to `target`: Delta's `target.merge(current)`.

    The higher reader and writer versions; below writer version 7 that is all (legacy
    versions imply their features), from 7 on the union of both protocols' features, the
    legacy ones translated into names. `current` itself when nothing changes.
    """
    reader = max(target.min_reader_version, current.min_reader_version)
    writer = max(target.min_writer_version, current.min_writer_version)
    if writer < 7:
        merged = Protocol(reader, writer, raw={})
    else:
        features_then, readers_then = protocol_features(target)
        features_now, readers_now = protocol_features(current)
        readers = readers_then | readers_now
        merged = Protocol(
            reader,
            writer,
            tuple(sorted(readers)) if reader >= 3 else None,
            tuple(sorted(features_then | features_now | readers)),
            raw={},
        )
    return current if _same_protocol(merged, current) else merged


def _same_protocol(a: Protocol, b: Protocol) -> bool:
    def names(features: tuple[str, ...] | None) -> frozenset[str] | None:
        return None if features is None else frozenset(features)

    return (
        a.min_reader_version == b.min_reader_version
        and a.min_writer_version == b.min_writer_version
        and names(a.reader_features) == names(b.reader_features)
        and names(a.writer_features) == names(b.writer_features)
    )


# -- metadata -------------------------------------------------------------------------------


def restored_metadata(target: Metadata, current: Metadata) -> Metadata:
    """The target's metaData with what must not move backwards taken from `current` (see the
    module docstring): identity high-water marks, in-commit timestamp properties, row
    tracking column names, `maxColumnId`."""
    configuration = dict(target.configuration)
    now = current.configuration
    for key in ICT_PROPERTIES:
        configuration.pop(key, None)
        if key in now:
            configuration[key] = now[key]
    for key in ROW_TRACKING_NAME_PROPERTIES:
        if key in now:
            configuration[key] = now[key]
    highest = max(_int(target.configuration.get(MAX_COLUMN_ID)), _int(now.get(MAX_COLUMN_ID)))
    if MAX_COLUMN_ID in configuration and highest >= 0:
        configuration[MAX_COLUMN_ID] = str(highest)
    body = target.to_json()
    body["configuration"] = configuration
    body["schemaString"] = merged_identity_marks(target.schema_string, current.schema_string)
    return Metadata.from_json(body)


def _int(value: object) -> int:
    """A property's integer value; -1 when it is absent or not an integer."""
    try:
        return int(str(value).strip())
    except ValueError:
        return -1


def merged_identity_marks(target_schema: str, current_schema: str) -> str:
    """`target_schema` with each identity column's high-water mark merged with the current
    schema's for the same column (by physical name): the higher for a positive step, the
    lower for a negative one, so restored tables never generate an identity value twice.
    The text is returned unchanged when no mark moves (or a schema is not valid JSON)."""
    try:
        target = json.loads(target_schema)
        current = json.loads(current_schema)
        marks = {
            _physical_name(f): mark
            for f in current["fields"]
            if _is_identity(f) and _is_long(mark := f["metadata"].get(IDENTITY_HIGH_WATER_MARK))
        }
        changed = False
        for field in target["fields"]:
            name = _physical_name(field)
            if not _is_identity(field) or name not in marks:
                continue
            metadata = field["metadata"]
            old = metadata.get(IDENTITY_HIGH_WATER_MARK)
            new = marks[name]
            if _is_long(old):
                new = max(old, new) if metadata[IDENTITY_STEP] > 0 else min(old, new)
            if new != old:
                metadata[IDENTITY_HIGH_WATER_MARK] = new
                changed = True
    except (ValueError, KeyError, TypeError, AttributeError):
        return target_schema
    if not changed:
        return target_schema
    return json.dumps(target, separators=(",", ":"), ensure_ascii=False)


def _is_identity(field: Mapping[str, Any]) -> bool:
    metadata = field.get("metadata")
    return (
        isinstance(metadata, dict)
        and _is_long(metadata.get(IDENTITY_START))
        and _is_long(metadata.get(IDENTITY_STEP))
    )


def _is_long(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _physical_name(field: Mapping[str, Any]) -> str:
    metadata = field.get("metadata") or {}
    return str(metadata.get(PHYSICAL_NAME_KEY) or field.get("name"))


# -- domains --------------------------------------------------------------------------------


def restored_domains(
    target_protocol: Protocol,
    target_domains: Mapping[str, DomainMetadata],
    current_domains: Mapping[str, DomainMetadata],
) -> list[DomainMetadata]:
    """The domainMetadata actions of a restore: at most the `delta.clustering` domain, set
    to the target's clustering (or to none, when the target was not clustered and the
    current table is), and only when that differs from the current domain."""
    then = target_domains.get(CLUSTERING_DOMAIN)
    clustered = "clustering" in writer_features(target_protocol) and _has_columns(then)
    if clustered and then is not None:
        configuration = then.configuration
    elif CLUSTERING_DOMAIN in current_domains:
        configuration = NO_CLUSTERING
    else:
        return []
    now = current_domains.get(CLUSTERING_DOMAIN)
    if now is not None and now.configuration == configuration:
        return []
    return [DomainMetadata(CLUSTERING_DOMAIN, configuration)]


def _has_columns(domain: DomainMetadata | None) -> bool:
    if domain is None or domain.removed:
        return False
    try:
        return bool(json.loads(domain.configuration).get("clusteringColumns"))
    except (ValueError, AttributeError):
        return False


# -- commitInfo -----------------------------------------------------------------------------


def restore_parameters(version: int | None, timestamp_ms: int | None) -> dict[str, Any]:
    """`operationParameters` as Delta Spark writes them for RESTORE: the raw JSON of its
    `Restore(version: Option[Long], timestamp: Option[String])`, i.e. the version asked for
    as a number (or null) and the timestamp asked for as `java.sql.Timestamp` prints it,
    in UTC (`2024-05-01 12:00:00.0`), or null."""
    stamp = None if timestamp_ms is None else java_timestamp_text(timestamp_ms)
    return {"version": version, "timestamp": stamp}


def java_timestamp_text(timestamp_ms: int) -> str:
    """`java.sql.Timestamp.toString` of an epoch-milliseconds instant in UTC: seconds, then
    the fraction without trailing zeros but at least one digit (`.0`, `.5`, `.123`)."""
    moment = dt.datetime.fromtimestamp(timestamp_ms // 1000, dt.timezone.utc)
    fraction = f"{timestamp_ms % 1000:03d}".rstrip("0") or "0"
    return f"{moment:%Y-%m-%d %H:%M:%S}.{fraction}"


def restore_metrics(diff: FileDiff, target_files: pa.Table) -> dict[str, int]:
    """Delta's RESTORE `operationMetrics`: files and bytes re-added and removed, and the
    file count and size of the table after the restore (the target's)."""
    return {
        "numRestoredFiles": diff.to_add.num_rows,
        "restoredFilesSize": _total_size(diff.to_add),
        "numRemovedFiles": diff.to_remove.num_rows,
        "removedFilesSize": _total_size(diff.to_remove),
        "numOfFilesAfterRestore": target_files.num_rows,
        "tableSizeAfterRestore": _total_size(target_files),
    }


def _total_size(files: pa.Table) -> int:
    total = pc.sum(files.column("size")).as_py()
    return int(total or 0)
