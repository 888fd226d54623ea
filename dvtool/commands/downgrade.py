"""`dvtool downgrade`: drop the `deletionVectors` table feature, as Delta's
`ALTER TABLE ... DROP FEATURE deletionVectors [TRUNCATE HISTORY]` does.

Both modes first bring the table to a state without deletion vectors:

1. `delta.enableDeletionVectors` is set to `false` (a SET TBLPROPERTIES commit), so that
   writers respecting it add no new DVs;
2. every live file with a DV is rewritten without its deleted rows (the purge of
   `dvtool optimize --purge`, a REORG commit).

Default mode, Delta 4's protocol-correct drop with checkpoint protection (the "fast drop
feature", delta-io/delta `executeDropFeatureWithCheckpointProtection` and the
checkpointProtection RFC): history stays, and checkpoints act as barriers so that readers
without DV support never replay a commit that uses DVs:

3. three empty commits, each followed by a checkpoint (Delta creates
   DELTA_SNAPSHOT_LOADING_MAX_RETRIES + 1 = 3 barrier checkpoints, because a reader that
   cannot read a checkpoint falls back to up to two older ones);
4. one commit that removes `deletionVectors` from the protocol, adds the writer feature
   `checkpointProtection` and sets `delta.requireCheckpointProtectionBeforeVersion` to its own
   version V (checkpointProtection: metadata before V may only be cleaned up all at once, and
   checkpoints before V may only be created by writers that support every protocol before V);
   the protocol is normalised to the lowest versions that describe the remaining features
   (`dvtool.core.features.without_features`), e.g. 1/7 with writerFeatures only when no
   reader feature remains;
5. a checkpoint at V (the protected checkpoint readers start from).

Right before the protocol commit the latest snapshot is checked again (no live DV, the
property not `true`), and a concurrent commit that adds or removes files, or changes the
metadata or protocol, conflicts with it (Delta: every DROP FEATURE conflicts with concurrent
writes); the check is then repeated on the new snapshot: if DVs came back, the downgrade
stops with an error instead of racing the writer.

`truncate_history` mode (Delta's DROP FEATURE ... TRUNCATE HISTORY, in one command): after
steps 1-2 a checkpoint is taken on an empty commit B after the last commit that used DVs (or
an existing such checkpoint is reused), every log entry before B is deleted (commits,
checkpoints, checksums, log compactions starting at or before B, and sidecars no remaining
checkpoint references), so no version left in the log references a DV; then one commit drops
`deletionVectors` and also `checkpointProtection` (history before its protected version is
gone) with the property unset, normalised (e.g. back to 1/2), and a checkpoint follows. Such a
table can be written by writers without DV support. Deleting history under running
transactions is unsafe, so B must be older than `delta.dropFeatureTruncateHistory.retentionDuration`
(default 24 hours) unless `force=True`; otherwise the command stops after writing B with a
`HistoryRetentionError` saying when to run it again.

`dry_run` plans all of this (files to rewrite, commits, checkpoints, log files to delete, the
resulting protocol) and writes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow.parquet as pq

from dvtool.commands.optimize import OptimizeRequest, OptimizeResult, Progress, run_optimize
from dvtool.core.actions import Protocol
from dvtool.core.checkpoint import parse_interval_ms
from dvtool.core.conflicts import ReadSet
from dvtool.core.features import reader_features, require_writable, writer_features
from dvtool.core.log_files import (
    LogFile,
    LogFileKind,
    commit_name,
    complete_checkpoints,
    parse_log_name,
)
from dvtool.core.log_json import first_commit_info
from dvtool.core.protocol_upgrade import dependent_features, without_features
from dvtool.core.replay import ActionBatch
from dvtool.engines.base import Engine
from dvtool.errors import CommitConflictError, LogError, UsageError, WriteRefusedError
from dvtool.io_pool import map_io
from dvtool.log.reader import DeltaLog
from dvtool.log.snapshot import Snapshot
from dvtool.log.writer import LogWriter, snapshot_commit_info

DV_FEATURE = "deletionVectors"
PROTECTION_FEATURE = "checkpointProtection"
ENABLE_PROPERTY = "delta.enableDeletionVectors"
PROTECTION_PROPERTY = "delta.requireCheckpointProtectionBeforeVersion"
RETENTION_PROPERTY = "delta.dropFeatureTruncateHistory.retentionDuration"
DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000
BARRIER_CHECKPOINTS = 3
EngineFactory = Callable[[int], Engine]

_PURGE_ATTEMPTS = 3
_COMMIT_ATTEMPTS = 5
_CRC = re.compile(r"^(\d{20})\.crc$")
_HIDDEN_CRC = re.compile(r"^\.(.+)\.crc$")


@dataclass(frozen=True)
class DowngradeStep:
    """One thing the downgrade does: a commit, a checkpoint, the purge or the truncation.

    `version` is the committed or checkpointed version (None in a dry run, or when the step
    is no single version); `detail` says what it holds.
    """

    action: str
    detail: str
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DowngradeResult:
    """What `downgrade` did (or, in a dry run, would do)."""

    read_version: int
    dry_run: bool
    truncate_history: bool
    protocol_before: dict[str, Any]
    protocol_after: dict[str, Any]
    dropped_features: list[str]
    steps: list[DowngradeStep]
    version: int | None = None
    purge: OptimizeResult | None = None
    history_boundary: int | None = None
    deleted_log_files: list[str] = field(default_factory=list)
    truncate_allowed_at_ms: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return not self.dry_run and bool(self.steps)

    @property
    def files_to_rewrite(self) -> list[str]:
        if self.purge is None:
            return []
        return [path for b in self.purge.bins for path in b.inputs]

    def to_json(self) -> dict[str, Any]:
        return {
            "read_version": self.read_version,
            "version": self.version,
            "dry_run": self.dry_run,
            "changed": self.changed,
            "truncate_history": self.truncate_history,
            "protocol_before": self.protocol_before,
            "protocol_after": self.protocol_after,
            "dropped_features": list(self.dropped_features),
            "steps": [s.to_json() for s in self.steps],
            "files_to_rewrite": self.files_to_rewrite,
            "purge": self.purge.to_json() if self.purge is not None else None,
            "history_boundary": self.history_boundary,
            "deleted_log_files": list(self.deleted_log_files),
            "truncate_allowed_at_ms": self.truncate_allowed_at_ms,
            "warnings": list(self.warnings),
        }


class HistoryRetentionError(WriteRefusedError):
    """History cannot be truncated yet; `partial` is what was done before stopping."""

    def __init__(self, message: str, hint: str, partial: DowngradeResult) -> None:
        super().__init__(message, hint=hint)
        self.partial = partial


def _arrow_engine(_: int) -> Engine:
    from dvtool.engines.arrow import ArrowEngine

    return ArrowEngine()


def _now() -> int:
    return int(time.time() * 1000)


def run_downgrade(
    log: DeltaLog,
    truncate_history: bool = False,
    dry_run: bool = False,
    force: bool = False,
    engine_for: EngineFactory | None = None,
    now_ms: int | None = None,
    progress: Progress | None = None,
) -> DowngradeResult:
    """Drop deletion vectors from the table; see the module docstring.

    `now_ms` is the current time for the history retention check (default: the clock);
    `engine_for(bytes)` picks the engine that rewrites files (default: arrow).
    """
    if force and not truncate_history:
        raise UsageError("--force applies to --truncate-history only")
    run = _Downgrade(log, truncate_history, force, engine_for or _arrow_engine, now_ms, progress)
    return run.plan() if dry_run else run.execute()


class _Downgrade:
    def __init__(
        self,
        log: DeltaLog,
        truncate: bool,
        force: bool,
        engine_for: EngineFactory,
        now_ms: int | None,
        progress: Progress | None,
    ) -> None:
        self.log = log
        self.truncate = truncate
        self.force = force
        self.engine_for = engine_for
        self.now_ms = now_ms
        self.progress = progress
        self.snapshot = log.snapshot()
        self.steps: list[DowngradeStep] = []
        self.warnings: list[str] = []
        self.purge: OptimizeResult | None = None
        require_writable(self.snapshot.protocol, self.snapshot.metadata, "DOWNGRADE")
        self.drop = _features_to_drop(self.snapshot.protocol, truncate)
        self.protocol_after = _protocol_after(self.snapshot.protocol, self.drop, truncate)

    @property
    def check_time(self) -> int:
        return self.now_ms if self.now_ms is not None else _now()

    def _result(self, dry_run: bool, **kwargs: Any) -> DowngradeResult:
        return DowngradeResult(
            read_version=self.snapshot.version,
            dry_run=dry_run,
            truncate_history=self.truncate,
            protocol_before=self.snapshot.protocol.to_json(),
            protocol_after=self.protocol_after.to_json(),
            dropped_features=list(self.drop),
            steps=list(self.steps),
            purge=self.purge,
            warnings=list(self.warnings),
            **kwargs,
        )

    # -- dry run -------------------------------------------------------------------------

    def plan(self) -> DowngradeResult:
        s = self.snapshot
        if not self.drop:
            return self._result(True)
        if _enabled(s):
            self.steps.append(DowngradeStep("set-property", f"{ENABLE_PROPERTY}=false"))
        if _dv_files(s):
            request = OptimizeRequest(purge=True, dry_run=True)
            self.purge = run_optimize(self.log, request, self.engine_for)
            self.steps.append(DowngradeStep("purge", _purge_detail(self.purge)))
        if not self.truncate:
            for _ in range(BARRIER_CHECKPOINTS):
                self.steps.append(DowngradeStep("empty-commit", "barrier before the drop"))
                self.steps.append(DowngradeStep("checkpoint", "barrier checkpoint"))
            self.steps.append(DowngradeStep("drop-feature", _drop_detail(self.drop, True)))
            self.steps.append(DowngradeStep("checkpoint", "protected checkpoint of the drop"))
            return self._result(True)
        clean_now = not self.steps
        boundary = _find_boundary(self.log, _protection_version(s)) if clean_now else None
        if boundary is None:
            self.steps.append(DowngradeStep("empty-commit", "history boundary"))
            self.steps.append(DowngradeStep("checkpoint", "history boundary checkpoint"))
            deleted = _truncation_plan(self.log, s.version + 1, self.check_time)
            allowed_at = self.check_time + _retention_ms(s)
            detail = (
                f"delete the {len(deleted)} log files there are now, and the commits above, "
                "before the new history boundary"
            )
        else:
            cutoff = _commit_time(self.log, boundary)
            deleted = _truncation_plan(self.log, boundary, cutoff)
            allowed_at = cutoff + _retention_ms(s)
            detail = f"delete {len(deleted)} log files before version {boundary}"
        if deleted or boundary is None:
            self.steps.append(DowngradeStep("truncate", detail))
            if allowed_at > self.check_time and not self.force:
                self.warnings.append(
                    f"history can be truncated from {_iso(allowed_at)} on; before that the "
                    "command stops after writing the history boundary (or use --force)"
                )
        self.steps.append(DowngradeStep("drop-feature", _drop_detail(self.drop, False)))
        self.steps.append(DowngradeStep("checkpoint", "checkpoint of the drop"))
        return self._result(
            True,
            history_boundary=boundary,
            deleted_log_files=[name for name, _ in deleted],
            truncate_allowed_at_ms=allowed_at,
        )

    # -- execution -----------------------------------------------------------------------

    def execute(self) -> DowngradeResult:
        if not self.drop:
            return self._result(False)
        self._check_purge()
        self._disable()
        self._purge()
        if not self.truncate:
            for _ in range(BARRIER_CHECKPOINTS):
                version = self._empty_commit("barrier before the drop")
                self._checkpoint(version, "barrier checkpoint")
            version = self._drop(protect=True)
            self._checkpoint(version, "protected checkpoint of the drop")
            return self._result(False, version=version)
        return self._truncate_and_drop()

    def _check_purge(self) -> None:
        """Plan the purge before the first commit: a DV that cannot be read or a file
        outside the table root then stops the command while the table is still untouched."""
        if _dv_files(self.snapshot):
            run_optimize(self.log, OptimizeRequest(purge=True, dry_run=True), self.engine_for)

    def _disable(self) -> None:
        """Set delta.enableDeletionVectors=false unless DVs are already off."""
        for attempt in range(1, _COMMIT_ATTEMPTS + 1):
            snapshot = self.log.snapshot()
            if not _enabled(snapshot):
                return
            metadata = snapshot.metadata.to_json()
            metadata["configuration"] = {
                **snapshot.metadata.configuration,
                ENABLE_PROPERTY: "false",
            }
            actions = [
                self._info(
                    snapshot, "SET TBLPROPERTIES", {"properties": {ENABLE_PROPERTY: "false"}}
                ),
                {"metaData": metadata},
            ]
            read_set = ReadSet.for_actions(snapshot.version, actions, read_whole_table=True)
            try:
                result = LogWriter(self.log).try_commit(snapshot.version, actions, read_set)
            except CommitConflictError:
                if attempt == _COMMIT_ATTEMPTS:
                    raise
                continue
            self._commit_warning(result.checkpoint_warning)
            self.steps.append(
                DowngradeStep("set-property", f"{ENABLE_PROPERTY}=false", result.version)
            )
            return

    def _purge(self) -> None:
        """Rewrite every file with a DV (a concurrent delete may need another round)."""
        for attempt in range(1, _PURGE_ATTEMPTS + 1):
            if not _dv_files(self.log.snapshot()):
                return
            try:
                result = run_optimize(
                    self.log, OptimizeRequest(purge=True), self.engine_for, self.progress
                )
            except CommitConflictError:
                if attempt == _PURGE_ATTEMPTS:
                    raise
                continue
            self.purge = _merge_purges(self.purge, result)
            self.warnings += result.checkpoint_warnings
            for version in result.versions:
                self.steps.append(DowngradeStep("purge", _purge_detail(result), version))
        remaining = _dv_files(self.log.snapshot())
        if remaining:
            raise CommitConflictError(
                f"{remaining} file(s) still have deletion vectors after "
                f"{_PURGE_ATTEMPTS} purges: another writer keeps adding them",
                hint=f"Stop writers that ignore {ENABLE_PROPERTY}=false, then run the "
                "downgrade again.",
            )

    def _empty_commit(self, why: str) -> int:
        for attempt in range(1, _COMMIT_ATTEMPTS + 1):
            snapshot = self.log.snapshot()
            actions = [self._info(snapshot, "Empty Commit", {})]
            read_set = ReadSet(read_version=snapshot.version)
            try:
                result = LogWriter(self.log).try_commit(
                    snapshot.version, actions, read_set, checkpoint=False
                )
            except CommitConflictError:
                if attempt == _COMMIT_ATTEMPTS:
                    raise
                continue
            self.steps.append(DowngradeStep("empty-commit", why, result.version))
            return result.version
        raise AssertionError("unreachable")

    def _checkpoint(self, version: int, why: str) -> None:
        info = LogWriter(self.log).write_checkpoint(version)
        self.steps.append(DowngradeStep("checkpoint", f"{why} ({info.name})", version))

    def _drop(self, *, protect: bool) -> int:
        """The protocol commit, validated on the snapshot it is planned on; on a conflict
        the validation is repeated on the new snapshot."""
        for attempt in range(1, _COMMIT_ATTEMPTS + 1):
            snapshot = self.log.snapshot()
            _validate_clean(snapshot)
            drop = _features_to_drop(snapshot.protocol, self.truncate)
            if not drop:
                self.warnings.append(
                    f"another writer dropped {', '.join(self.drop)} first (version "
                    f"{snapshot.version}); nothing left to drop"
                )
                return snapshot.version
            self.drop = drop
            self.protocol_after = _protocol_after(snapshot.protocol, drop, self.truncate)
            build = self._drop_builder(snapshot, self.protocol_after, str(uuid.uuid4()), protect)
            read_set = ReadSet.for_actions(
                snapshot.version, build(snapshot.version + 1, ()), read_whole_table=True
            )
            try:
                result = LogWriter(self.log).try_commit(
                    snapshot.version, build, read_set, checkpoint=False
                )
            except CommitConflictError as e:
                if attempt == _COMMIT_ATTEMPTS:
                    raise CommitConflictError(
                        "the protocol commit kept conflicting with concurrent commits "
                        f"({e.message}); nothing was dropped",
                        hint="The table is busy; run the downgrade again.",
                    ) from e
                continue
            self.steps.append(
                DowngradeStep("drop-feature", _drop_detail(drop, protect), result.version)
            )
            return result.version
        raise AssertionError("unreachable")

    def _drop_builder(
        self, snapshot: Snapshot, protocol: Protocol, txn_id: str, protect: bool
    ) -> Callable[[int, Sequence[ActionBatch]], list[dict[str, Any]]]:
        parameters: dict[str, Any] = {
            "featureName": self.drop[0],
            "truncateHistory": self.truncate,
        }
        if len(self.drop) > 1:
            parameters["droppedFeatures"] = list(self.drop)
        base = dict(snapshot.metadata.configuration)
        base.pop(PROTECTION_PROPERTY, None)

        def build(version: int, winners: Sequence[ActionBatch]) -> list[dict[str, Any]]:
            configuration = dict(base)
            if protect:
                # Set to the version this commit lands at, as Delta's conflict checker does.
                configuration[PROTECTION_PROPERTY] = str(version)
            metadata = snapshot.metadata.to_json()
            metadata["configuration"] = configuration
            info = self._info(snapshot, "DROP FEATURE", parameters, txn_id=txn_id)
            return [info, {"protocol": protocol.to_json()}, {"metaData": metadata}]

        return build

    def _info(
        self,
        snapshot: Snapshot,
        operation: str,
        parameters: Mapping[str, Any],
        txn_id: str | None = None,
    ) -> dict[str, Any]:
        return snapshot_commit_info(
            snapshot,
            operation,
            parameters,
            {},
            txn_id=txn_id or str(uuid.uuid4()),
            now_ms=_now(),
        )

    def _commit_warning(self, warning: str | None) -> None:
        if warning:
            self.warnings.append(warning)

    # -- truncate history ----------------------------------------------------------------

    def _truncate_and_drop(self) -> DowngradeResult:
        snapshot = self.log.snapshot()
        boundary = _find_boundary(self.log, _protection_version(snapshot))
        if boundary is None:
            boundary = self._empty_commit("history boundary")
            self._checkpoint(boundary, "history boundary checkpoint")
        cutoff = _commit_time(self.log, boundary)
        plan = _truncation_plan(self.log, boundary, cutoff)
        allowed_at = cutoff + _retention_ms(snapshot)
        if plan and allowed_at > self.check_time and not self.force:
            partial = self._result(
                False, history_boundary=boundary, truncate_allowed_at_ms=allowed_at
            )
            done = ", ".join(
                f"{s.action} at version {s.version}" for s in self.steps if s.version is not None
            )
            raise HistoryRetentionError(
                f"cannot truncate the history before version {boundary} until "
                f"{_iso(allowed_at)}: it is younger than the history retention "
                f"({_retention_text(snapshot)}, {RETENTION_PROPERTY}) and transactions still "
                "running may need it. The table has no deletion vectors left"
                + (f" (committed: {done})" if done else "")
                + f", but {', '.join(self.drop)} is not dropped yet",
                hint="Run the same command again after that time, or pass --force if no "
                "transaction that started before the purge can still be running.",
                partial=partial,
            )
        deleted = self._truncate(boundary, plan)
        self._check_history(boundary)
        version = self._drop(protect=False)
        self._checkpoint(version, "checkpoint of the drop")
        return self._result(
            False,
            version=version,
            history_boundary=boundary,
            deleted_log_files=deleted,
            truncate_allowed_at_ms=allowed_at,
        )

    def _truncate(self, boundary: int, plan: Sequence[tuple[str, int]]) -> list[str]:
        """Delete every log entry before `boundary` (PROTOCOL.md, "Metadata Cleanup")."""
        storage = self.log.storage
        hint = self.log.last_checkpoint_hint()
        if hint is not None and hint < boundary:
            # It would point to a deleted checkpoint; the drop's checkpoint writes a new one.
            storage.delete(storage.join("_delta_log/_last_checkpoint"))
            storage.delete(storage.join("_delta_log/._last_checkpoint.crc"))
        storage.delete_many(storage.join(f"_delta_log/{name}") for name, _ in plan)
        names = [name for name, _ in plan]
        if names:
            detail = f"deleted {len(names)} log files before version {boundary}"
            self.steps.append(DowngradeStep("truncate", detail))
        return names

    def _check_history(self, boundary: int) -> None:
        """No version left in the log may use deletion vectors."""
        files = [f for f in self.log.list_files() if f.kind == LogFileKind.COMMIT]
        if not files or min(f.version for f in files) < boundary:
            raise LogError(
                f"after truncating the history, the log should start at version {boundary}",
                hint="Another process changed _delta_log concurrently; run the downgrade again.",
            )
        used = _last_dv_use(self.log, files)
        if used is not None:
            raise CommitConflictError(
                f"version {used} uses deletion vectors although it was committed after the "
                "purge: another writer added them concurrently; the feature is not dropped",
                hint=f"Stop writers that ignore {ENABLE_PROPERTY}=false, then run the "
                "downgrade again.",
            )


# -- protocol --------------------------------------------------------------------------------


def _features_to_drop(protocol: Protocol, truncate: bool) -> tuple[str, ...]:
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


def _protocol_after(protocol: Protocol, drop: Sequence[str], truncate: bool) -> Protocol:
    if not drop:
        return protocol
    add = () if truncate else (PROTECTION_FEATURE,)
    return without_features(protocol, drop, add=add)


def _drop_detail(drop: Sequence[str], protect: bool) -> str:
    text = "drop " + ", ".join(drop)
    if protect:
        text += f"; add {PROTECTION_FEATURE} and {PROTECTION_PROPERTY}"
    return text


def _protection_version(snapshot: Snapshot) -> int:
    if PROTECTION_FEATURE not in writer_features(snapshot.protocol):
        return 0
    try:
        return max(0, int(str(snapshot.metadata.configuration.get(PROTECTION_PROPERTY, "0"))))
    except ValueError:
        return 0


# -- table state -----------------------------------------------------------------------------


def _is_true(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() == "true"


def _enabled(snapshot: Snapshot) -> bool:
    return _is_true(snapshot.metadata.configuration.get(ENABLE_PROPERTY))


def _dv_files(snapshot: Snapshot) -> int:
    dv = snapshot.files.column("deletionVector")
    return int(len(dv) - dv.null_count)


def _validate_clean(snapshot: Snapshot) -> None:
    """Delta's validateRemoval for deletion vectors, on the snapshot of the protocol commit."""
    problems = []
    if _enabled(snapshot):
        problems.append(f"{ENABLE_PROPERTY} was set to true again")
    count = _dv_files(snapshot)
    if count:
        problems.append(f"{count} file(s) have deletion vectors")
    if problems:
        raise CommitConflictError(
            f"cannot drop {DV_FEATURE} at version {snapshot.version}: "
            + " and ".join(problems)
            + " (a concurrent writer); nothing was dropped",
            hint=f"Stop writers that ignore {ENABLE_PROPERTY}=false, then run the downgrade again.",
        )


def _purge_detail(result: OptimizeResult) -> str:
    files = sum(len(b.inputs) for b in result.bins)
    rows = sum(b.rows_dropped for b in result.bins)
    return f"rewrite {files} file(s) with deletion vectors, dropping {rows} deleted row(s)"


def _merge_purges(first: OptimizeResult | None, second: OptimizeResult) -> OptimizeResult:
    if first is None:
        return second
    metrics = {k: first.metrics.get(k, 0) + v for k, v in second.metrics.items()}
    return replace(
        first,
        versions=first.versions + second.versions,
        bins=first.bins + second.bins,
        metrics=metrics,
        checkpoint_warnings=first.checkpoint_warnings + second.checkpoint_warnings,
    )


# -- history ---------------------------------------------------------------------------------


def _uses_dvs(data: bytes) -> bool:
    """Whether a commit adds or removes a file with a DV or enables DVs (Delta's
    `actionUsesFeature` for deletion vectors)."""
    if b"deletionVector" not in data and ENABLE_PROPERTY.encode() not in data:
        return False
    for line in data.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if not isinstance(action, dict):
            continue
        for kind, body in action.items():
            if not isinstance(body, dict):
                continue
            if kind in ("add", "remove", "cdc") and body.get("deletionVector"):
                return True
            if kind == "metaData" and _is_true(
                (body.get("configuration") or {}).get(ENABLE_PROPERTY)
            ):
                return True
    return False


def _last_dv_use(log: DeltaLog, commits: Sequence[LogFile]) -> int | None:
    """The newest of `commits` that uses deletion vectors, or None."""
    storage = log.storage
    flags = map_io(lambda f: _uses_dvs(storage.read(storage.join(f"_delta_log/{f.name}"))), commits)
    used = [f.version for f, flag in zip(commits, flags, strict=True) if flag]
    return max(used) if used else None


def _find_boundary(log: DeltaLog, protected_before: int) -> int | None:
    """The oldest version history can start at so that no version left uses deletion
    vectors: a checkpoint (or version 0 while the log still starts there) after the last
    commit that uses DVs, at or after the protected version, with its commit file present and
    a state without DVs. None when there is none yet."""
    files = log.list_files()
    commits = sorted((f for f in files if f.kind == LogFileKind.COMMIT), key=lambda f: f.version)
    last_use = _last_dv_use(log, commits)
    have_commit = {f.version for f in commits}
    candidates = set(complete_checkpoints(files)) | ({0} if 0 in have_commit else set())
    for version in sorted(candidates):
        if last_use is not None and version <= last_use:
            continue
        if version < protected_before or version not in have_commit:
            continue
        snapshot = log.snapshot(version)
        if not _enabled(snapshot) and not _dv_files(snapshot):
            return version
    return None


def _commit_time(log: DeltaLog, version: int) -> int:
    """The commit's time as Delta's metadata cleanup sees it: its in-commit timestamp, else
    the commit file's modification time."""
    location = log.storage.join(f"_delta_log/{commit_name(version)}")
    info = first_commit_info(log.storage.read(location)) or {}
    ict = info.get("inCommitTimestamp")
    if isinstance(ict, int):
        return ict
    found = log.storage.info(location)
    if found is None or found.modification_time_ms is None:
        raise LogError(f"cannot tell when version {version} was committed")
    return found.modification_time_ms


def _retention_ms(snapshot: Snapshot) -> int:
    text = snapshot.metadata.configuration.get(RETENTION_PROPERTY)
    if not text:
        return DEFAULT_RETENTION_MS
    try:
        return parse_interval_ms(str(text))
    except ValueError:
        return DEFAULT_RETENTION_MS


def _retention_text(snapshot: Snapshot) -> str:
    text = snapshot.metadata.configuration.get(RETENTION_PROPERTY)
    return str(text) if text else "24 hours"


def _truncation_plan(log: DeltaLog, boundary: int, sidecar_cutoff_ms: int) -> list[tuple[str, int]]:
    """(name under _delta_log, version) of every log entry a truncation before `boundary`
    deletes: commits, checkpoints, checksums and their hidden Hadoop .crc files before it, log
    compactions starting at or before it, and sidecars no remaining checkpoint references
    (written before `sidecar_cutoff_ms`, so an in-progress checkpoint keeps its own)."""
    if boundary <= 0:
        return []
    storage = log.storage
    infos = storage.list_dir(log.log_dir)
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
    sidecars = storage.list_dir(storage.join("_delta_log/_sidecars"))
    if sidecars:
        referenced = _referenced_sidecars(log, kept_checkpoints)
        for info in sidecars:
            crc = _HIDDEN_CRC.match(info.name)
            target = crc[1] if crc else info.name
            old = (
                info.modification_time_ms is None or info.modification_time_ms <= sidecar_cutoff_ms
            )
            if target not in referenced and old:
                out.append((f"_sidecars/{info.name}", -1))
    return sorted(out, key=lambda item: (item[1], item[0]))


def _referenced_sidecars(log: DeltaLog, checkpoints: Sequence[LogFile]) -> set[str]:
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


def _iso(ms: int) -> str:
    moment = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
