"""`dvtool enable`: turn deletion vectors on for a table, as Delta's
`ALTER TABLE ... SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)` does.

The protocol is upgraded to reader 3 / writer 7 with `deletionVectors` in both feature lists
(legacy versions translated into explicit features) and the property is set, in one commit.
Running it again on an enabled table commits nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from dvtool.commands.result import CommandResult
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.transaction import Prepared, Written, commit_transaction
from dvtool.delta.log.writer import snapshot_commit_info
from dvtool.delta.protocol.conflicts import ReadSet
from dvtool.delta.protocol.features import require_writable
from dvtool.delta.protocol.protocol_upgrade import with_feature

ENABLE_PROPERTY = "delta.enableDeletionVectors"


@dataclass(frozen=True)
class EnableResult(CommandResult):
    """What `enable` did: the committed version, or None when DVs were already on."""

    version: int | None
    read_version: int
    protocol: dict[str, Any]

    @property
    def changed(self) -> bool:
        return self.version is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "changed": self.changed,
            "read_version": self.read_version,
            "protocol": self.protocol,
        }


def run_enable(log: DeltaLog) -> EnableResult:
    """Enable deletion vectors; planned again from a fresh snapshot if a concurrent commit
    conflicts (`dvtool.delta.log.transaction`)."""
    outcome = commit_transaction(log, _enable)
    result = outcome.value
    if outcome.commit is None:
        return result
    return EnableResult(outcome.commit.version, result.read_version, result.protocol)


def _enable(snapshot: Snapshot, _: Written) -> Prepared[EnableResult]:
    require_writable(snapshot.protocol, snapshot.metadata, "ENABLE")
    protocol = snapshot.protocol
    if not {"deletionVectors"} <= snapshot.reader_features & snapshot.writer_features:
        protocol = with_feature(protocol, "deletionVectors", reader=True)
    configuration = dict(snapshot.metadata.configuration)
    enabled = configuration.get(ENABLE_PROPERTY, "").lower() == "true"
    unchanged = EnableResult(None, snapshot.version, protocol.to_json())
    if protocol is snapshot.protocol and enabled:
        return Prepared(unchanged)
    configuration[ENABLE_PROPERTY] = "true"
    metadata = snapshot.metadata.to_json()
    metadata["configuration"] = configuration
    actions = [
        snapshot_commit_info(
            snapshot,
            "SET TBLPROPERTIES",
            {"properties": json.dumps({ENABLE_PROPERTY: "true"})},
            {},
            txn_id=str(uuid.uuid4()),
            now_ms=int(time.time() * 1000),
        ),
        {"protocol": protocol.to_json()},
        {"metaData": metadata},
    ]
    read_set = ReadSet.for_actions(snapshot.version, actions, read_whole_table=True)
    return Prepared(unchanged, actions, read_set)
