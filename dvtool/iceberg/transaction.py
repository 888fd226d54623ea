"""The one commit path of Iceberg writes: plan, write, produce, swap, validate, retry, re-plan.

`commit_transaction(table, prepare)` runs a command's commit as Iceberg Java's
`SnapshotProducer.commit` does, and owns the rules every Iceberg-writing command follows:

- **plan and write**: `prepare(table, written)` plans on the table's current snapshot,
  writes the data and delete files the commit adds (recording each in `written`) and
  returns the `SnapshotChanges` and a `validate` function;
- **produce and swap**: the snapshot producer writes the manifests and the manifest list on
  the current metadata, and the catalog swaps the table's metadata atomically
  (`catalog_commit.commit_updates`: put-if-absent of the next metadata file, the SQL
  catalog's conditional update, the REST commit endpoint);
- **retries** (the table's `commit.retry.*` properties, Java's defaults): when the swap
  finds the table moved on, the table is refreshed, what landed since the base is read
  (`concurrent_changes`) and given to `validate`, which raises `CommitConflictError` when
  it invalidates the plan (a data file the plan read was removed, a concurrent delete file
  on a file the plan writes a DV for ...); otherwise the same changes are produced again on
  the new head and the swap retried. A conflict makes the command plan again from the new
  head, up to `plans` times;
- **the cleanup rule**: files written for an attempt are deleted only when that attempt's
  commit provably did not land (the swap refused it, or it failed before the swap was
  sent); when the outcome is unknown (`CommitOutcomeUnknownError`, a signal's effects are
  deferred over the swap) they stay: vacuum removes them once nothing references them;
- **signals** (`dvtool.interrupts`): planning, writing and producing may be stopped; the
  swap is not; once it landed a signal is recorded, and the commit reported.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from dvtool import faults, interrupts
from dvtool.errors import CommitConflictError, CommitOutcomeUnknownError
from dvtool.iceberg.catalog_commit import commit_updates, refresh, retry_policy, writable_io
from dvtool.iceberg.concurrent_changes import ConcurrentChanges, changes_since
from dvtool.iceberg.snapshot_producer import SnapshotChanges, produce_snapshot

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

    from dvtool.iceberg.tables import IcebergTable

T = TypeVar("T")

DEFAULT_PLANS = 5


class Written:
    """Files written for one attempt, to delete if it provably did not land."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.locations: list[str] = []
        self.landed = False
        """Set once the commit naming the files landed: from then on they are never deleted."""

    def add(self, locations: Iterable[str]) -> None:
        self.locations.extend(locations)

    def discard(self) -> None:
        """Delete them unless their commit landed; best effort (vacuum removes what is left)."""
        if self.landed:
            return
        for location in self.locations:
            with contextlib.suppress(Exception):
                self.io.delete(location)
        self.locations = []


Validate = Callable[[ConcurrentChanges], None]


@dataclass
class Prepared(Generic[T]):
    """A command's plan for one attempt: its `value`, the `changes` to commit (None: nothing
    to commit) and `validate`, which raises CommitConflictError when changes committed since
    the base invalidate the plan (None: any concurrent commit does)."""

    value: T
    changes: SnapshotChanges | None = None
    validate: Validate | None = None


@dataclass
class Outcome(Generic[T]):
    """The end of a transaction: the command's value, the committed table (None when there
    was nothing to commit), its new snapshot id, the plans made and swaps retried."""

    value: T
    table: IcebergTable | None
    snapshot_id: int | None = None
    plans: int = 1
    retries: int = 0


Prepare = Callable[["IcebergTable", Written], Prepared[T]]


def commit_transaction(
    table: IcebergTable,
    prepare: Prepare[T],
    *,
    plans: int = DEFAULT_PLANS,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome[T]:
    """Plan with `prepare` and commit (see the module docstring); the first plan is made on
    `table` as given, later ones on a refreshed table."""
    if plans < 1:
        raise ValueError("plans must be at least 1")
    current = table
    for plan in range(1, plans + 1):
        try:
            outcome = _attempt(current, prepare, sleep)
        except CommitConflictError:
            if plan == plans:
                raise
            current = refresh(current)
            continue
        outcome.plans = plan
        return outcome
    raise AssertionError("unreachable")


def _attempt(base: IcebergTable, prepare: Prepare[T], sleep: Callable[[float], None]) -> Outcome[T]:
    """One plan and its swaps; CommitConflictError (files deleted) to plan again."""
    io = writable_io(base)
    written = Written(io)
    try:
        with interrupts.interruptible():
            prepared = prepare(base, written)
        if prepared.changes is None:
            written.discard()
            return Outcome(prepared.value, None)
        faults.reached("data-files-written")
        return _swap(base, io, prepared, written, sleep)
    except CommitOutcomeUnknownError:
        raise
    except BaseException:
        written.discard()
        raise


def _swap(
    base: IcebergTable,
    io: FileIO,
    prepared: Prepared[T],
    written: Written,
    sleep: Callable[[float], None],
) -> Outcome[T]:
    """Produce the snapshot on the current head and swap, retrying past commits that
    `prepared.validate` accepts."""
    assert prepared.changes is not None
    base_snapshot = base.metadata.current_snapshot()
    base_id = base_snapshot.snapshot_id if base_snapshot is not None else None
    current = base
    policy = retry_policy(base.metadata)
    started = time.monotonic()
    retries = 0
    while True:
        produced_files = Written(io)
        try:
            with interrupts.interruptible():
                produced = produce_snapshot(current, io, prepared.changes)
            produced_files.add(produced.written)
            with interrupts.deferred():
                committed = commit_updates(current, produced.requirements, produced.updates)
                written.landed = produced_files.landed = True
                interrupts.after_commit(produced.snapshot.sequence_number or 0)
        except CommitOutcomeUnknownError:
            raise
        except CommitConflictError:
            produced_files.discard()
            retries += 1
            if not policy.allows(retries, (time.monotonic() - started) * 1000):
                raise
            current = refresh(current)
            _validate(current, io, base_id, base.metadata.format_version, prepared.validate)
            sleep(policy.delay_s(retries))
            continue
        except BaseException:
            produced_files.discard()
            raise
        faults.reached("committed")
        return Outcome(prepared.value, committed, produced.snapshot.snapshot_id, retries=retries)


def _validate(
    current: IcebergTable,
    io: FileIO,
    base_id: int | None,
    base_version: int,
    validate: Validate | None,
) -> None:
    """Raise CommitConflictError when what landed since the base invalidates the plan."""
    changes = changes_since(current.metadata, current.io, base_id, base_version)
    if changes.base_lost:
        raise CommitConflictError(
            "the snapshot this command planned on is no longer in the table's history "
            "(a rollback or an expiry happened meanwhile)"
        )
    if changes.format_version_changed:
        raise CommitConflictError("the table's format version changed meanwhile")
    if changes.empty:
        return
    if validate is None:
        raise CommitConflictError(f"{len(changes.snapshots)} snapshot(s) were committed meanwhile")
    validate(changes)
