"""`dvtool restore`: bring a table back to an earlier version, as Delta's `RESTORE TABLE`.

1. Plan (`plan`, `dvtool.delta.protocol.restore_diff`): the version to restore (`--version`, or
   as of `--timestamp`); the files live then but not now, re-added with the add actions they
   had (DVs, stats, row tracking fields), and the files live now but not then, removed; the
   target's metaData and the merged protocol. With deletion vectors an undone delete is
   cheap: the old files are still there, only their DVs changed.
2. Checks: the table's features must allow the restore (`restore` in the feature table), a
   file live twice is refused, every data and DV file to re-add must still exist (a
   vacuumed one refuses the restore, listing them), and no vacuum may be running.
3. Commit: one RESTORE commit (Delta's operation parameters and metrics), put-if-absent.
   A restore makes the table what it was, so it depends on every file: any concurrent
   commit that adds or removes files, changes metadata, protocol or a domain it sets, or
   starts a vacuum fails it with a conflict (nothing committed; running it again restores
   from the new state). Commits that change nothing of that (a VACUUM END, a txn) are let
   through, as Delta's conflict checker does. On a table that assigns row IDs, re-added
   files keep theirs and the high-water mark is never lowered.

`--dry-run` stops after step 2 and writes nothing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.commands.restore import plan
from dvtool.commands.result import CommandResult
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.transaction import Prepared, Written, commit_transaction
from dvtool.delta.log.writer import (
    Actions,
    ActionsBuilder,
    TransactionConflictError,
    snapshot_commit_info,
)
from dvtool.delta.protocol import row_tracking
from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.commit import add_actions_from_table, remove_actions_for_adds
from dvtool.delta.protocol.conflicts import (
    CONCURRENT_APPEND,
    CONCURRENT_DELETE_READ,
    CONCURRENT_TRANSACTION,
    ConflictResult,
    ReadSet,
)
from dvtool.delta.protocol.features import require_writable
from dvtool.delta.protocol.file_layout import CLUSTERING_DOMAIN
from dvtool.delta.protocol.replay import ActionBatch
from dvtool.delta.protocol.restore_diff import (
    FileDiff,
    diff_files,
    merged_protocol,
    restore_metrics,
    restore_parameters,
    restored_domains,
    restored_metadata,
    row_id_floor,
)
from dvtool.errors import CommitConflictError, WriteRefusedError

OPERATION = "RESTORE"
VACUUM_START = "VACUUM START"


@dataclass(frozen=True)
class RestoreRequest:
    """What `dvtool restore` was asked: exactly one of `version` and `timestamp_ms`."""

    version: int | None = None
    timestamp_ms: int | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class RestoredFile:
    """A file the restore re-adds (`action` "add", as it was at the target) or removes."""

    action: str
    path: str
    size: int
    num_records: int | None
    deleted_rows: int
    partition_values: dict[str, str | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "path": self.path,
            "size": self.size,
            "num_records": self.num_records,
            "deleted_rows": self.deleted_rows,
            "partition_values": dict(self.partition_values),
        }


@dataclass(frozen=True)
class RestoreResult(CommandResult):
    """The outcome: `version` committed (None for a dry run), `restored_version` the version
    the table was restored to, `metrics` Delta's RESTORE metrics, `files` the plan."""

    version: int | None
    read_version: int
    restored_version: int
    dry_run: bool
    parameters: dict[str, Any]
    metrics: dict[str, int]
    protocol: dict[str, Any]
    protocol_changed: bool
    files: list[RestoredFile]
    attempts: int = 1
    checkpoint_warning: str | None = None
    manifest_warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "read_version": self.read_version,
            "restored_version": self.restored_version,
            "dry_run": self.dry_run,
            "operation_parameters": dict(self.parameters),
            "metrics": dict(self.metrics),
            "protocol": dict(self.protocol),
            "protocol_changed": self.protocol_changed,
            "attempts": self.attempts,
            "checkpoint_warning": self.checkpoint_warning,
            "manifest_warning": self.manifest_warning,
            "files": [f.to_json() for f in self.files],
        }


@dataclass(frozen=True)
class _Plan:
    """Everything a restore commits, decided on the current snapshot."""

    current: Snapshot
    target: Snapshot
    diff: FileDiff
    protocol: Protocol
    metadata: Metadata
    parameters: dict[str, Any]
    metrics: dict[str, int]


def run_restore(log: DeltaLog, request: RestoreRequest) -> RestoreResult:
    """Plan the restore, check it, and commit it unless `request.dry_run`."""
    current = log.snapshot()
    require_writable(current.protocol, current.metadata, "restore", current.schema)
    version = plan.target_version(log, current, request.version, request.timestamp_ms)
    target = plan.load_target(log, version)
    planned = _plan(current, target, request)
    require_writable(planned.protocol, planned.metadata, "restore", target.schema)
    _require_row_counts(planned)
    plan.require_files_exist(log.storage, planned.diff.to_add, version)
    files = _files(planned.diff)
    if request.dry_run:
        return _result(planned, None, files, dry_run=True)
    if planned.diff.to_add.num_rows:
        plan.require_no_running_vacuum(log, current.version)
    return _commit(log, planned, files)


def _plan(current: Snapshot, target: Snapshot, request: RestoreRequest) -> _Plan:
    current.require_paths_live_once(OPERATION)
    target.require_paths_live_once(OPERATION)
    diff = diff_files(current.files, target.files, current.root)
    return _Plan(
        current,
        target,
        diff,
        merged_protocol(target.protocol, current.protocol),
        restored_metadata(target.metadata, current.metadata),
        restore_parameters(request.version, request.timestamp_ms),
        restore_metrics(diff, target.files),
    )


def _require_row_counts(planned: _Plan) -> None:
    """WriteRefusedError when a re-added file needs fresh row IDs (the table assigns them,
    the file has none) but its stats lack `numRecords`, which fresh IDs are counted from."""
    if not row_tracking.assigns_row_ids(planned.protocol, planned.metadata.configuration):
        return
    files = planned.diff.to_add
    uncounted = pc.and_(
        pc.is_null(files.column("baseRowId")), pc.is_null(files.column("numRecords"))
    )
    if not pc.any(uncounted).as_py():
        return
    path = files.filter(uncounted).column("path")[0].as_py()
    raise WriteRefusedError(
        f"restore refused: file {path!r} gets fresh row IDs (row tracking), but its stats "
        "have no numRecords to count them from",
        hint="Restore a version whose files carry baseRowId or numRecords.",
    )


def _files(diff: FileDiff) -> list[RestoredFile]:
    """The plan's files for the result: the re-added ones, then the removed ones."""
    return [*_entries("add", diff.to_add), *_entries("remove", diff.to_remove)]


def _entries(action: str, files: pa.Table) -> list[RestoredFile]:
    columns = files.select(["path", "size", "numRecords", "partitionValues", "deletionVector"])
    out = []
    for row in columns.to_pylist():
        dv = row["deletionVector"]
        out.append(
            RestoredFile(
                action,
                row["path"],
                int(row["size"] or 0),
                row["numRecords"],
                int(dv.get("cardinality") or 0) if dv else 0,
                dict(row["partitionValues"] or []),
            )
        )
    return out


def _result(
    planned: _Plan,
    version: int | None,
    files: list[RestoredFile],
    *,
    dry_run: bool = False,
    **extra: Any,
) -> RestoreResult:
    return RestoreResult(
        version=version,
        read_version=planned.current.version,
        restored_version=planned.target.version,
        dry_run=dry_run,
        parameters=planned.parameters,
        metrics=planned.metrics,
        protocol=planned.protocol.to_json(),
        protocol_changed=planned.protocol is not planned.current.protocol,
        files=files,
        **extra,
    )


# -- the commit ------------------------------------------------------------------------------


def _commit(log: DeltaLog, planned: _Plan, files: list[RestoredFile]) -> RestoreResult:
    """Commit the restore planned on `planned.current`; a conflict is final (running it
    again would restore from the new state, undoing that commit too)."""
    current = planned.current

    def prepare(snapshot: Snapshot, _: Written) -> Prepared[None]:
        actions = _actions(planned, int(time.time() * 1000))
        read_set = ReadSet.for_actions(
            current.version, actions, read_whole_table=True, root=current.root
        )
        # The clustering domain is restored from the target: a concurrent change to it
        # would survive the restore even when this commit does not write it.
        read_set = replace(read_set, domains=read_set.domains | {CLUSTERING_DOMAIN})
        return Prepared(None, _builder(planned, actions), read_set, planned.metadata)

    def reworded(e: CommitConflictError) -> CommitConflictError:
        return CommitConflictError(
            f"restore to version {planned.target.version} did not commit: {e.message}",
            hint="Nothing was committed. Running it again restores the version from the new "
            "state, which undoes that commit too: check it first (dvtool inspect TABLE "
            "--history).",
        )

    outcome = commit_transaction(log, prepare, snapshot=current, plans=1, on_conflict=reworded)
    result = outcome.commit
    assert result is not None
    return _result(
        planned,
        result.version,
        files,
        attempts=result.attempts,
        checkpoint_warning=result.checkpoint_warning,
        manifest_warning=result.manifest_warning,
    )


def _actions(planned: _Plan, now: int) -> list[dict[str, Any]]:
    """commitInfo, the protocol (when it changes), metaData, the re-added files, the removed
    files and the clustering domain (when it changes), as Delta orders a RESTORE commit."""
    current = planned.current
    info = snapshot_commit_info(
        current, OPERATION, {}, planned.metrics, txn_id=str(uuid.uuid4()), now_ms=now
    )
    # Delta writes the parameters' raw JSON (a number, null), not strings: set them as is.
    info["commitInfo"]["operationParameters"] = dict(planned.parameters)
    actions: list[dict[str, Any]] = [info]
    if planned.protocol is not current.protocol:
        actions.append({"protocol": planned.protocol.to_json()})
    actions.append({"metaData": planned.metadata.to_json()})
    actions += add_actions_from_table(planned.diff.to_add, data_change=True)
    actions += remove_actions_for_adds(planned.diff.to_remove, now, data_change=True)
    domains = restored_domains(planned.target.protocol, planned.target.domains, current.domains)
    actions += [{"domainMetadata": d.to_json()} for d in domains]
    return actions


def _builder(planned: _Plan, actions: Actions) -> ActionsBuilder:
    """The commit for an attempt at `version` after `winners`: refused (a conflict) when a
    winner changed files or started a vacuum; on a table that assigns row IDs, fresh ones for
    re-added files that have none, above the high-water mark, which is never lowered."""
    configuration = planned.metadata.configuration
    assigns = row_tracking.assigns_row_ids(planned.protocol, configuration)
    current_mark = row_tracking.high_water_mark(planned.current.domains)
    floor = row_id_floor(planned.diff.to_add) if assigns else -1
    re_adds = planned.diff.to_add.num_rows > 0

    def build(version: int, winners: Sequence[ActionBatch]) -> Actions:
        for winner in winners:
            _check_winner(winner, re_adds)
        if not assigns:
            return actions
        mark = max(current_mark, row_tracking.winners_high_water_mark(w.domains for w in winners))
        needed = max(mark, floor)
        out = row_tracking.assign_fresh_row_ids(actions, version, needed)
        if needed > mark and not any(_is_row_tracking_domain(a) for a in out):
            out.append(row_tracking.domain_action(needed))
        return out

    return build


def _check_winner(winner: ActionBatch, re_adds: bool) -> None:
    """TransactionConflictError when a concurrent commit leaves the plan stale: it added or
    removed files (even with dataChange=false, which the Serializable check lets through),
    or it started a vacuum that may delete files this restore re-adds."""
    info = winner.commit_info or {}
    operation = info.get("operation")
    if winner.adds:
        exception, what = CONCURRENT_APPEND, "added files"
    elif winner.removes:
        exception, what = CONCURRENT_DELETE_READ, "removed files"
    elif re_adds and operation == VACUUM_START:
        exception, what = CONCURRENT_TRANSACTION, "started a vacuum, which may delete files "
        what += "this restore re-adds"
    else:
        return
    reason = f"{exception}: version {winner.version} ({operation}) {what}"
    raise TransactionConflictError(ConflictResult(True, exception, reason, winner.version))


def _is_row_tracking_domain(action: Mapping[str, Any]) -> bool:
    body = action.get("domainMetadata")
    return isinstance(body, Mapping) and body.get("domain") == row_tracking.DOMAIN
