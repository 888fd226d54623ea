"""The one commit path of every writing command: plan, write, commit, re-plan, post-commit.

`commit_transaction(log, prepare)` runs a command's commit as Delta Spark's
`OptimisticTransaction` does, and owns the rules every command must follow alike:

- **re-planning**: `prepare(snapshot, written)` plans on a snapshot, writes what the commit
  needs (recording each file in `written`) and returns the commit's actions and read set.
  `LogWriter.try_commit` retries the same actions past commits that do not conflict; a
  conflict makes the transaction plan again from a fresh snapshot, up to `plans` times.
- **the cleanup rule**: files written for an attempt are deleted only when that attempt's
  commit provably did not land: the planning failed before anything was sent, put-if-absent
  answered "exists" with another writer's commit, or the conflict check refused it. When the
  outcome is unknown (an interrupt or an object store timeout inside the put, a failed read
  back), they stay: vacuum removes them once no commit references them.
- **signals** (`dvtool.interrupts`): planning and writing may be stopped by SIGINT/SIGTERM;
  the put is not (a signal arriving then is held until its answer is known); once the commit
  landed, a signal skips the remaining post-commit hooks and the commit is reported.
- **post-commit hooks**, in Delta's order: the checkpoint due at the version (with the log
  cleanup after it) and the symlink manifests of tables that enable them. Neither fails the
  command: a hook that fails or is stopped by a signal leaves the commit standing and a
  warning in the `CommitResult` (`checkpoint_warning`, `manifest_warning`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from dvtool import faults, interrupts
from dvtool.delta.log.checkpoint_writer import (
    checkpoint_after_commit,
    checkpoint_interval,
    committed_configuration,
)
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.symlink_manifests import (
    refresh_manifests_after_commit,
    symlink_manifests_enabled,
)
from dvtool.delta.log.writer import Actions, ActionsBuilder, CommitResult, LogWriter
from dvtool.delta.protocol.actions import Metadata
from dvtool.delta.protocol.conflicts import ReadSet
from dvtool.errors import CommitConflictError, CommitOutcomeUnknownError
from dvtool.storage.table_storage import Storage

T = TypeVar("T")

DEFAULT_PLANS = 5


class Written:
    """The files written for one attempt at a commit, to delete if it provably did not land."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.locations: list[str] = []

    def add(self, locations: Iterable[str]) -> None:
        """Record files written (locations as `Storage` takes them)."""
        self.locations.extend(locations)

    def discard(self) -> None:
        """Delete the files; best effort (vacuum removes what is left), never hiding the error
        that made the attempt fail."""
        if not self.locations:
            return
        with contextlib.suppress(Exception):
            self.storage.delete_many(self.locations)
        self.locations = []


@dataclass
class Prepared(Generic[T]):
    """What a command planned for one attempt.

    `value`: the command's own result so far (returned in `Outcome.value`); `actions`: the
    commit (commitInfo with a `txnId` first) or a builder of it per attempt version, None
    when there is nothing to commit; `read_set`: what the plan read, for the conflict check;
    `metadata`: the table's metaData as of the commit (the checkpoint interval and the
    manifest setting), when not the snapshot's and not in `actions`.
    """

    value: T
    actions: Actions | ActionsBuilder | None = None
    read_set: ReadSet | None = None
    metadata: Metadata | None = None


@dataclass
class Outcome(Generic[T]):
    """A transaction's end: the command's `value`, the `commit` (None: nothing to commit) and
    how many plans it took."""

    value: T
    commit: CommitResult | None
    plans: int = 1

    @property
    def warnings(self) -> list[str]:
        """The post-commit hooks' warnings."""
        if self.commit is None:
            return []
        found = (self.commit.checkpoint_warning, self.commit.manifest_warning)
        return [w for w in found if w]


Prepare = Callable[[Snapshot, Written], Prepared[T]]


def commit_transaction(
    log: DeltaLog,
    prepare: Prepare[T],
    *,
    snapshot: Snapshot | None = None,
    plans: int = DEFAULT_PLANS,
    post_commit: bool = True,
    on_conflict: Callable[[CommitConflictError], CommitConflictError] | None = None,
) -> Outcome[T]:
    """Plan with `prepare` and commit, re-planning after a conflict (see the module docstring).

    `snapshot` is the first plan's (else the latest is read); `plans` bounds the plans made
    (1: a conflict is final). `post_commit=False` skips the hooks (a step of a command that
    writes its own checkpoint). `on_conflict` rewords the final conflict for the command.
    """
    if plans < 1:
        raise ValueError("plans must be at least 1")
    for plan in range(1, plans + 1):
        current = snapshot if plan == 1 and snapshot is not None else log.snapshot()
        written = Written(log.storage)
        try:
            outcome = _attempt(log, prepare, current, written, post_commit)
        except CommitConflictError as conflict:
            if plan == plans:
                raise on_conflict(conflict) if on_conflict else conflict from conflict
            continue
        outcome.plans = plan
        return outcome
    raise AssertionError("unreachable")


def _attempt(
    log: DeltaLog, prepare: Prepare[T], snapshot: Snapshot, written: Written, post_commit: bool
) -> Outcome[T]:
    """One plan and its commit; CommitConflictError (files deleted) to plan again."""
    writer = LogWriter(log)
    try:
        with interrupts.interruptible():
            prepared = prepare(snapshot, written)
        if prepared.actions is None:
            written.discard()
            return Outcome(prepared.value, None)
        read_set = prepared.read_set or ReadSet(read_version=snapshot.version)
        with interrupts.deferred():
            result = writer.try_commit(snapshot.version, prepared.actions, read_set)
            interrupts.after_commit(result.version)
    except BaseException as error:
        if not (writer.in_doubt or isinstance(error, CommitOutcomeUnknownError)):
            written.discard()
        raise
    faults.reached("committed")
    if post_commit:
        _post_commit(log, result, prepared.metadata or snapshot.metadata)
    return Outcome(prepared.value, result)


# -- post-commit hooks ------------------------------------------------------------------------


def _post_commit(log: DeltaLog, result: CommitResult, metadata: Metadata) -> None:
    """The checkpoint (and log cleanup) due at the commit's version, then the manifests of
    tables that keep them; `metadata` is the table's as of the commit (unless it changes it)."""
    configuration = committed_configuration(result.actions, metadata) or {}
    interval = checkpoint_interval(configuration)
    if result.version > 0 and result.version % interval == 0:
        info, warning = _hook(
            lambda: checkpoint_after_commit(
                log, result.version, result.actions, metadata, int(time.time() * 1000)
            ),
            f"the checkpoint of version {result.version} (and the log cleanup after it)",
            "`dvtool checkpoint TABLE` writes it",
        )
        result.checkpoint, result.checkpoint_warning = info or (None, warning)
    if symlink_manifests_enabled(configuration):
        refresh, warning = _hook(
            lambda: refresh_manifests_after_commit(
                log, result.version, result.actions, metadata=metadata
            ),
            f"the symlink manifest refresh after version {result.version}",
            "`dvtool generate-manifest TABLE` regenerates them",
        )
        result.manifest_warning = refresh.warning if refresh is not None else warning


def _hook(run: Callable[[], T], what: str, repair: str) -> tuple[T | None, str | None]:
    """Run a post-commit hook that a signal may stop: its value, or None and a warning."""
    try:
        with interrupts.interruptible():
            return run(), None
    except KeyboardInterrupt as stop:
        name = interrupts.signal_name(interrupts.signum_of(stop))
        interrupts.record(interrupts.signum_of(stop))
        return None, f"{what} was skipped: {name} received after the commit; {repair}"
