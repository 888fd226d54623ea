"""The commits and checkpoints `dvtool downgrade` writes: the SET TBLPROPERTIES that turns
deletion vectors off, empty commits (barriers, the history boundary), the DROP FEATURE
protocol commit, and the checkpoints after them.

Each commit is planned on the latest snapshot and retried on a conflict. The protocol commit
conflicts with every concurrent write that adds or removes files or changes the metadata or
protocol (Delta: every DROP FEATURE does); its snapshot is validated again before each attempt,
so DVs a concurrent writer brought back stop the drop instead of being dropped unseen.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dvtool.commands.downgrade.protocol import (
    ENABLE_PROPERTY,
    dvs_enabled,
    features_to_drop,
    protocol_after,
    validate_clean,
)
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.transaction import Prepared, Written, commit_transaction
from dvtool.delta.log.writer import CommitResult, LogWriter, snapshot_commit_info
from dvtool.delta.protocol.actions import Protocol
from dvtool.delta.protocol.conflicts import ReadSet
from dvtool.delta.protocol.log_cleanup import PROTECTION_PROPERTY
from dvtool.delta.protocol.replay import ActionBatch
from dvtool.errors import CommitConflictError

_COMMIT_ATTEMPTS = 5

ActionBuilder = Callable[[int, Sequence[ActionBatch]], list[dict[str, Any]]]


@dataclass(frozen=True)
class DropCommit:
    """The outcome of the protocol commit: the features it `drop`ped and the `protocol` it
    wrote at `version`. When another writer had already dropped them all, `committed` is
    False, `version` is the latest one and `drop` and `protocol` are what was last planned."""

    version: int
    drop: tuple[str, ...]
    protocol: Protocol
    committed: bool = True


def commit_info(
    snapshot: Snapshot,
    operation: str,
    parameters: Mapping[str, Any],
    txn_id: str | None = None,
) -> dict[str, Any]:
    """The commitInfo action of a downgrade commit planned on `snapshot`."""
    return snapshot_commit_info(
        snapshot,
        operation,
        parameters,
        {},
        txn_id=txn_id or str(uuid.uuid4()),
        now_ms=int(time.time() * 1000),
    )


def disable_dvs(log: DeltaLog) -> CommitResult | None:
    """Commit delta.enableDeletionVectors=false, so writers respecting it add no new DVs;
    None when DVs are already off."""

    def prepare(snapshot: Snapshot, _: Written) -> Prepared[None]:
        if not dvs_enabled(snapshot):
            return Prepared(None)
        metadata = snapshot.metadata.to_json()
        metadata["configuration"] = {
            **snapshot.metadata.configuration,
            ENABLE_PROPERTY: "false",
        }
        actions = [
            commit_info(snapshot, "SET TBLPROPERTIES", {"properties": {ENABLE_PROPERTY: "false"}}),
            {"metaData": metadata},
        ]
        return Prepared(
            None, actions, ReadSet.for_actions(snapshot.version, actions, read_whole_table=True)
        )

    return commit_transaction(log, prepare, plans=_COMMIT_ATTEMPTS).commit


def empty_commit(log: DeltaLog) -> int:
    """Commit nothing but a commitInfo (a version to put a checkpoint on); its version."""

    def prepare(snapshot: Snapshot, _: Written) -> Prepared[None]:
        actions = [commit_info(snapshot, "Empty Commit", {})]
        return Prepared(None, actions, ReadSet(read_version=snapshot.version))

    outcome = commit_transaction(log, prepare, plans=_COMMIT_ATTEMPTS, post_commit=False)
    assert outcome.commit is not None
    return outcome.commit.version


def write_checkpoint(log: DeltaLog, version: int) -> str:
    """Write a checkpoint at `version`; the name of its file."""
    return LogWriter(log).write_checkpoint(version).name


def commit_drop(
    log: DeltaLog, drop: tuple[str, ...], protocol: Protocol, truncate: bool, protect: bool
) -> DropCommit:
    """The protocol commit, validated on the snapshot it is planned on; on a conflict the
    validation is repeated on the new snapshot. `drop` and `protocol` are the plan so far,
    planned again on each attempt's snapshot; `protect` adds checkpoint protection at the
    version the commit lands at."""

    def prepare(snapshot: Snapshot, _: Written) -> Prepared[DropCommit]:
        nonlocal drop, protocol
        validate_clean(snapshot)
        features = features_to_drop(snapshot.protocol, truncate)
        if not features:
            return Prepared(DropCommit(snapshot.version, drop, protocol, committed=False))
        drop = features
        protocol = protocol_after(snapshot.protocol, drop, truncate)
        build = _drop_actions(snapshot, drop, protocol, truncate, protect, str(uuid.uuid4()))
        read_set = ReadSet.for_actions(
            snapshot.version, build(snapshot.version + 1, ()), read_whole_table=True
        )
        return Prepared(DropCommit(snapshot.version, drop, protocol), build, read_set)

    def reworded(e: CommitConflictError) -> CommitConflictError:
        return CommitConflictError(
            "the protocol commit kept conflicting with concurrent commits "
            f"({e.message}); nothing was dropped",
            hint="The table is busy; run the downgrade again.",
        )

    outcome = commit_transaction(
        log, prepare, plans=_COMMIT_ATTEMPTS, post_commit=False, on_conflict=reworded
    )
    if outcome.commit is None:
        return outcome.value
    return replace(outcome.value, version=outcome.commit.version)


def _drop_actions(
    snapshot: Snapshot,
    drop: Sequence[str],
    protocol: Protocol,
    truncate: bool,
    protect: bool,
    txn_id: str,
) -> ActionBuilder:
    """The DROP FEATURE commit's actions for the version it lands at: commitInfo, the new
    protocol and the metadata with the protected version set (or unset)."""
    parameters: dict[str, Any] = {"featureName": drop[0], "truncateHistory": truncate}
    if len(drop) > 1:
        parameters["droppedFeatures"] = list(drop)
    base = dict(snapshot.metadata.configuration)
    base.pop(PROTECTION_PROPERTY, None)

    def build(version: int, winners: Sequence[ActionBatch]) -> list[dict[str, Any]]:
        configuration = dict(base)
        if protect:
            # Set to the version this commit lands at, as Delta's conflict checker does.
            configuration[PROTECTION_PROPERTY] = str(version)
        metadata = snapshot.metadata.to_json()
        metadata["configuration"] = configuration
        info = commit_info(snapshot, "DROP FEATURE", parameters, txn_id=txn_id)
        return [info, {"protocol": protocol.to_json()}, {"metaData": metadata}]

    return build
