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
   (`dvtool.delta.protocol.features.without_features`), e.g. 1/7 with writerFeatures only when no
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

This module orders the steps and records them; the steps themselves live in
`protocol` (features to drop, the protocol after, the DV-free state the drop
requires), `purge` (rewriting files with DVs), `commits` (the commits and
checkpoints written), `history` (the last DV use, the history boundary, retention)
and `truncation` (the log entries before the boundary, and their deletion).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from dvtool.commands.downgrade.commits import (
    commit_drop,
    disable_dvs,
    empty_commit,
    write_checkpoint,
)
from dvtool.commands.downgrade.history import (
    DEFAULT_RETENTION_MS,
    RETENTION_PROPERTY,
    check_history_clean,
    commit_time,
    find_boundary,
    iso_time,
    retention_ms,
    retention_text,
)
from dvtool.commands.downgrade.protocol import (
    DV_FEATURE,
    ENABLE_PROPERTY,
    drop_detail,
    dv_file_count,
    dvs_enabled,
    features_to_drop,
    protection_version,
    protocol_after,
)
from dvtool.commands.downgrade.purge import (
    EngineFactory,
    merge_purges,
    plan_purge,
    purge_detail,
    purge_rounds,
)
from dvtool.commands.downgrade.truncation import delete_history, truncation_plan
from dvtool.commands.optimize.command import OptimizeResult, Progress
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.protocol.features import require_writable
from dvtool.delta.protocol.log_cleanup import PROTECTION_FEATURE, PROTECTION_PROPERTY
from dvtool.engines.base import Engine
from dvtool.errors import UsageError, WriteRefusedError

__all__ = [
    "BARRIER_CHECKPOINTS",
    "DEFAULT_RETENTION_MS",
    "DV_FEATURE",
    "ENABLE_PROPERTY",
    "PROTECTION_FEATURE",
    "PROTECTION_PROPERTY",
    "RETENTION_PROPERTY",
    "DowngradeResult",
    "DowngradeStep",
    "EngineFactory",
    "HistoryRetentionError",
    "run_downgrade",
]

BARRIER_CHECKPOINTS = 3


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
    """One downgrade: the steps in order, each recorded as a DowngradeStep with its warnings,
    and the features to drop with the protocol after (planned again at the protocol commit)."""

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
        self.drop = features_to_drop(self.snapshot.protocol, truncate)
        self.protocol_after = protocol_after(self.snapshot.protocol, self.drop, truncate)

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

    def _step(self, action: str, detail: str, version: int | None = None) -> None:
        self.steps.append(DowngradeStep(action, detail, version))

    # -- dry run -------------------------------------------------------------------------

    def plan(self) -> DowngradeResult:
        s = self.snapshot
        if not self.drop:
            return self._result(True)
        if dvs_enabled(s):
            self._step("set-property", f"{ENABLE_PROPERTY}=false")
        if dv_file_count(s):
            self.purge = plan_purge(self.log, self.engine_for)
            self._step("purge", purge_detail(self.purge))
        if not self.truncate:
            for _ in range(BARRIER_CHECKPOINTS):
                self._step("empty-commit", "barrier before the drop")
                self._step("checkpoint", "barrier checkpoint")
            self._step("drop-feature", drop_detail(self.drop, True))
            self._step("checkpoint", "protected checkpoint of the drop")
            return self._result(True)
        return self._plan_truncation()

    def _plan_truncation(self) -> DowngradeResult:
        """The dry run of truncate_history after the purge: reuse a boundary when the table
        is already clean, else plan a new one on top of everything there is now."""
        s = self.snapshot
        clean_now = not self.steps
        boundary = find_boundary(self.log, protection_version(s)) if clean_now else None
        if boundary is None:
            self._step("empty-commit", "history boundary")
            self._step("checkpoint", "history boundary checkpoint")
            deleted = truncation_plan(self.log, s.version + 1, self.check_time)
            allowed_at = self.check_time + retention_ms(s)
            detail = (
                f"delete the {len(deleted):,} log files there are now, and the commits above, "
                "before the new history boundary"
            )
        else:
            cutoff = commit_time(self.log, boundary)
            deleted = truncation_plan(self.log, boundary, cutoff)
            allowed_at = cutoff + retention_ms(s)
            detail = f"delete {len(deleted):,} log files before version {boundary}"
        if deleted or boundary is None:
            self._step("truncate", detail)
            if allowed_at > self.check_time and not self.force:
                self.warnings.append(
                    f"history can be truncated from {iso_time(allowed_at)} on; before that the "
                    "command stops after writing the history boundary (or use --force)"
                )
        self._step("drop-feature", drop_detail(self.drop, False))
        self._step("checkpoint", "checkpoint of the drop")
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
        if dv_file_count(self.snapshot):
            # A DV that cannot be read or a file outside the table root stops the command
            # here, while the table is still untouched.
            plan_purge(self.log, self.engine_for)
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

    def _disable(self) -> None:
        """Set delta.enableDeletionVectors=false unless DVs are already off."""
        result = disable_dvs(self.log)
        if result is None:
            return
        if result.checkpoint_warning:
            self.warnings.append(result.checkpoint_warning)
        self._step("set-property", f"{ENABLE_PROPERTY}=false", result.version)

    def _purge(self) -> None:
        """Rewrite every file with a DV (a concurrent delete may need another round)."""
        for result in purge_rounds(self.log, self.engine_for, self.progress):
            self.purge = merge_purges(self.purge, result)
            self.warnings += result.checkpoint_warnings
            for version in result.versions:
                self._step("purge", purge_detail(result), version)

    def _empty_commit(self, why: str) -> int:
        version = empty_commit(self.log)
        self._step("empty-commit", why, version)
        return version

    def _checkpoint(self, version: int, why: str) -> None:
        name = write_checkpoint(self.log, version)
        self._step("checkpoint", f"{why} ({name})", version)

    def _drop(self, *, protect: bool) -> int:
        """The protocol commit; the features and protocol are planned again on its snapshot."""
        commit = commit_drop(self.log, self.drop, self.protocol_after, self.truncate, protect)
        self.drop, self.protocol_after = commit.drop, commit.protocol
        if not commit.committed:
            self.warnings.append(
                f"another writer dropped {', '.join(self.drop)} first (version "
                f"{commit.version}); nothing left to drop"
            )
        else:
            self._step("drop-feature", drop_detail(commit.drop, protect), commit.version)
        return commit.version

    # -- truncate history ----------------------------------------------------------------

    def _truncate_and_drop(self) -> DowngradeResult:
        snapshot = self.log.snapshot()
        boundary = find_boundary(self.log, protection_version(snapshot))
        if boundary is None:
            boundary = self._empty_commit("history boundary")
            self._checkpoint(boundary, "history boundary checkpoint")
        cutoff = commit_time(self.log, boundary)
        plan = truncation_plan(self.log, boundary, cutoff)
        allowed_at = cutoff + retention_ms(snapshot)
        if plan and allowed_at > self.check_time and not self.force:
            raise self._retention_error(boundary, allowed_at, retention_text(snapshot))
        deleted = delete_history(self.log, boundary, plan)
        if deleted:
            self._step("truncate", f"deleted {len(deleted):,} log files before version {boundary}")
        check_history_clean(self.log, boundary)
        version = self._drop(protect=False)
        self._checkpoint(version, "checkpoint of the drop")
        return self._result(
            False,
            version=version,
            history_boundary=boundary,
            deleted_log_files=deleted,
            truncate_allowed_at_ms=allowed_at,
        )

    def _retention_error(
        self, boundary: int, allowed_at: int, retention: str
    ) -> HistoryRetentionError:
        """The history before `boundary` is younger than the retention: stop with what was
        committed so far (the table has no DVs left, the feature is still there)."""
        partial = self._result(False, history_boundary=boundary, truncate_allowed_at_ms=allowed_at)
        done = ", ".join(
            f"{s.action} at version {s.version}" for s in self.steps if s.version is not None
        )
        return HistoryRetentionError(
            f"cannot truncate the history before version {boundary} until "
            f"{iso_time(allowed_at)}: it is younger than the history retention "
            f"({retention}, {RETENTION_PROPERTY}) and transactions still "
            "running may need it. The table has no deletion vectors left"
            + (f" (committed: {done})" if done else "")
            + f", but {', '.join(self.drop)} is not dropped yet",
            hint="Run the same command again after that time, or pass --force if no "
            "transaction that started before the purge can still be running.",
            partial=partial,
        )
