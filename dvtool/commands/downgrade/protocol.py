"""The protocol side of dropping `deletionVectors`: which features go, the protocol after the
drop, and the table state Delta requires before the feature may be removed.

A feature is dropped only when no remaining feature requires it (`dependent_features`).
Deletion vectors may go only when no live file has one and `delta.enableDeletionVectors` is
not `true` (Delta's `validateRemoval`). The default mode keeps history, so the drop adds the
writer feature `checkpointProtection` with `delta.requireCheckpointProtectionBeforeVersion`;
truncating history drops `checkpointProtection` as well, since the history it protects is gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.actions import Protocol
from dvtool.delta.protocol.features import reader_features, writer_features
from dvtool.delta.protocol.log_cleanup import PROTECTION_FEATURE, PROTECTION_PROPERTY
from dvtool.delta.protocol.protocol_upgrade import dependent_features, without_features
from dvtool.errors import CommitConflictError, WriteRefusedError

DV_FEATURE = "deletionVectors"
ENABLE_PROPERTY = "delta.enableDeletionVectors"


def features_to_drop(protocol: Protocol, truncate: bool) -> tuple[str, ...]:
    """The features the downgrade removes from `protocol`: `deletionVectors` if the table
    supports it, plus `checkpointProtection` when truncating history. WriteRefusedError when
    another feature of the table requires one of them."""
    supported = reader_features(protocol) | writer_features(protocol)
    drop = [DV_FEATURE] if DV_FEATURE in supported else []
    if truncate and PROTECTION_FEATURE in supported:
        drop.append(PROTECTION_FEATURE)
    for feature in drop:
        dependents = [f for f in dependent_features(protocol, feature) if f not in drop]
        if dependents:
            raise WriteRefusedError(
                f"cannot drop {feature}: the table's feature(s) {', '.join(dependents)} require it",
                hint="Drop those features first.",
            )
    return tuple(drop)


def protocol_after(protocol: Protocol, drop: Sequence[str], truncate: bool) -> Protocol:
    """The normalised protocol without `drop`; keeping history adds `checkpointProtection`."""
    if not drop:
        return protocol
    add = () if truncate else (PROTECTION_FEATURE,)
    return without_features(protocol, drop, add=add)


def drop_detail(drop: Sequence[str], protect: bool) -> str:
    """What the DROP FEATURE commit does, as a step detail."""
    text = "drop " + ", ".join(drop)
    if protect:
        text += f"; add {PROTECTION_FEATURE} and {PROTECTION_PROPERTY}"
    return text


def protection_version(snapshot: Snapshot) -> int:
    """The version before which checkpoint protection applies (0 without the feature or with
    an unreadable property): history cannot start before it."""
    if PROTECTION_FEATURE not in writer_features(snapshot.protocol):
        return 0
    try:
        return max(0, int(str(snapshot.metadata.configuration.get(PROTECTION_PROPERTY, "0"))))
    except ValueError:
        return 0


def is_true(value: object) -> bool:
    """Whether a table property value means `true`, as Delta reads boolean properties."""
    return isinstance(value, str) and value.strip().lower() == "true"


def dvs_enabled(snapshot: Snapshot) -> bool:
    """Whether `delta.enableDeletionVectors` is `true`: writers may add new DVs."""
    return is_true(snapshot.metadata.configuration.get(ENABLE_PROPERTY))


def dv_file_count(snapshot: Snapshot) -> int:
    """How many live files have a deletion vector."""
    dv = snapshot.files.column("deletionVector")
    return int(len(dv) - dv.null_count)


def validate_clean(snapshot: Snapshot) -> None:
    """Delta's validateRemoval for deletion vectors, on the snapshot of the protocol commit:
    CommitConflictError when a concurrent writer enabled or added DVs again."""
    problems = []
    if dvs_enabled(snapshot):
        problems.append(f"{ENABLE_PROPERTY} was set to true again")
    count = dv_file_count(snapshot)
    if count:
        problems.append(f"{count} file(s) have deletion vectors")
    if problems:
        raise CommitConflictError(
            f"cannot drop {DV_FEATURE} at version {snapshot.version}: "
            + " and ".join(problems)
            + " (a concurrent writer); nothing was dropped",
            hint=f"Stop writers that ignore {ENABLE_PROPERTY}=false, then run the downgrade again.",
        )
