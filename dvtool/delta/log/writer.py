"""Commit to a table's `_delta_log`: put-if-absent commits, the optimistic retry loop, checkpoints.

`LogWriter.commit` writes one version with `Storage.put_if_absent`, so of racing writers
exactly one creates `<version>.json`. Losing is a `CommitRace`; a write whose outcome is
unknown (a timeout after the request left) is resolved by reading the log back: a commit at
that version carrying our `txnId` is ours.

`LogWriter.try_commit` is Delta's optimistic loop: attempt `read_version + 1`; on a race read
every newer commit (the winners), run the Serializable conflict check
(`dvtool.delta.protocol.conflicts`) and, without a conflict, retry the same actions at the next free
version (refreshing the in-commit timestamp), with exponential backoff and jitter. A conflict
raises `TransactionConflictError` (a `CommitConflictError`) so the command can re-plan from a
fresh snapshot.

Each put runs with SIGINT/SIGTERM deferred (`dvtool.interrupts`), so it reaches its answer;
`LogWriter.in_doubt` says whether a failed attempt may still have landed. Commands do not call
this directly: they commit through `dvtool.delta.log.transaction`, which re-plans on conflicts, runs
the post-commit hooks (checkpoint, log cleanup, symlink manifests) and decides which written
files may be deleted.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dvtool import interrupts
from dvtool.delta.log.checkpoint_writer import CheckpointInfo, write_checkpoint
from dvtool.delta.log.checkpoint_writer import checkpoint_interval as checkpoint_interval
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol import row_tracking
from dvtool.delta.protocol.commit import (
    commit_info,
    commit_info_of,
    encode_commit,
    in_commit_timestamps_enabled,
    next_in_commit_timestamp,
    with_in_commit_timestamp,
)
from dvtool.delta.protocol.conflicts import ConflictResult, ReadSet, check_winners, is_our_commit
from dvtool.delta.protocol.log_files import commit_name
from dvtool.delta.protocol.log_json import parse_commit
from dvtool.delta.protocol.replay import ActionBatch
from dvtool.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    DvtoolError,
    FileMissingError,
    StorageError,
)

Actions = Sequence[Mapping[str, Any]]
# Builds the actions for an attempt at `version`, given the winners seen so far (oldest first).
ActionsBuilder = Callable[[int, Sequence[ActionBatch]], Actions]

_PUT_ATTEMPTS = 3


class CommitRace(DvtoolError):
    """Another writer committed `version` first; `winner` holds its actions."""

    def __init__(self, version: int, winner: ActionBatch | None = None) -> None:
        super().__init__(
            f"version {version} was committed by another writer first",
            hint="Re-check conflicts against that commit and retry at the next version.",
        )
        self.version = version
        self.winner = winner


class TransactionConflictError(CommitConflictError):
    """A winning commit conflicts with this transaction; `result` says which and why."""

    def __init__(self, result: ConflictResult) -> None:
        super().__init__(
            f"concurrent commit conflicts with this transaction: {result.reason}",
            hint="Run the command again: it will plan from the new table version.",
        )
        self.result = result


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter between commit attempts (seconds)."""

    initial: float = 0.05
    factor: float = 2.0
    maximum: float = 2.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Delay after failed attempt number `attempt` (1-based)."""
        base = min(self.maximum, self.initial * self.factor ** max(0, attempt - 1))
        spread = base * self.jitter
        return max(0.0, base - spread + rng.random() * 2 * spread)


@dataclass
class CommitResult:
    """A commit that landed.

    `recovered`: the write reported a failure (or lost its response) but the log holds our
    commit. `winners`: versions other writers committed between our read and our commit.
    Filled by the transaction's post-commit hooks: `checkpoint`, the checkpoint written after
    it, if any; `checkpoint_warning`, why a due checkpoint or log cleanup was not done;
    `manifest_warning`, why the symlink manifests were not updated (the commit stands
    regardless of either).
    """

    version: int
    txn_id: str
    attempts: int = 1
    recovered: bool = False
    winners: tuple[int, ...] = ()
    checkpoint: CheckpointInfo | None = None
    checkpoint_warning: str | None = None
    manifest_warning: str | None = None
    actions: list[dict[str, Any]] = field(default_factory=list, repr=False)


class LogWriter:
    """Writes commits and checkpoints to the `_delta_log` of `log`."""

    def __init__(
        self,
        log: DeltaLog,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock_ms: Callable[[], int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.log = log
        self.storage = log.storage
        self._sleep = sleep
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._rng = rng or random.Random()
        # True from sending a put until its outcome is known: files written for a commit
        # that fails while in doubt must be kept (the log may name them).
        self.in_doubt = False

    # -- one version -----------------------------------------------------------------------

    def commit(self, version: int, actions: Actions, txn_id: str) -> CommitResult:
        """Create `<version>.json` with `actions` if no one has; CommitRace if someone has.

        The commitInfo of `actions` must carry `txnId == txn_id`: that is how a commit whose
        outcome was unknown is recognised as ours when the log is read back.
        """
        return self._commit(version, _dicts(actions), txn_id)

    def _commit(self, version: int, actions: list[dict[str, Any]], txn_id: str) -> CommitResult:
        """`commit` of actions this writer owns (copied once): the result holds them as is."""
        info = commit_info_of(actions)
        if info is None or info.get("txnId") != txn_id:
            raise ValueError(f"the commit's commitInfo must carry txnId {txn_id!r}")
        if version < 0:
            raise ValueError(f"bad commit version {version}")
        location = self._commit_location(version)
        data = encode_commit(actions, root=self.storage.root)
        for attempt in range(1, _PUT_ATTEMPTS + 1):
            self._stop_if_signalled()
            self.in_doubt = True
            try:
                with interrupts.deferred():
                    created = self.storage.put_if_absent(location, data)
            except StorageError as error:
                # The outcome is unknown (e.g. a timeout after the request was sent): the log
                # says whether the version exists and whose it is.
                winner = self._read_back(version, error)
                if winner is None:
                    if attempt == _PUT_ATTEMPTS:
                        raise  # still in doubt: an object store may apply the put later
                    self._sleep(Backoff().delay(attempt, self._rng))
                    continue
                return self._resolved(version, txn_id, actions, winner)
            except KeyboardInterrupt as stop:
                # Raised inside the put (a signal where none can be deferred): read it back.
                return self._interrupted_put(version, txn_id, actions, stop)
            if created:
                self.in_doubt = False
                return CommitResult(version, txn_id, actions=actions)
            return self._resolved(version, txn_id, actions, self.read_commit(version))
        raise AssertionError("unreachable")

    def _resolved(
        self, version: int, txn_id: str, actions: list[dict[str, Any]], winner: ActionBatch
    ) -> CommitResult:
        """The put's outcome once the log shows `winner` at `version`: ours, or a race lost."""
        self.in_doubt = False
        if is_our_commit(winner, txn_id):
            return CommitResult(version, txn_id, recovered=True, actions=actions)
        raise CommitRace(version, winner)

    def _interrupted_put(
        self, version: int, txn_id: str, actions: list[dict[str, Any]], stop: KeyboardInterrupt
    ) -> CommitResult:
        """A put stopped by an interrupt: our commit if the log holds it (the signal is then
        recorded, to be acted on once the commit is reported), else the interrupt again,
        in doubt unless another writer's commit holds the version."""
        with interrupts.deferred():
            try:
                winner = self.read_commit(version)
            except (FileMissingError, StorageError):
                raise stop from None
        if not is_our_commit(winner, txn_id):
            self.in_doubt = False
            raise stop
        interrupts.record(interrupts.signum_of(stop))
        self.in_doubt = False
        return CommitResult(version, txn_id, recovered=True, actions=actions)

    def _stop_if_signalled(self) -> None:
        """Before sending a put: a signal recorded since the transaction began stops it."""
        signum = interrupts.received()
        if signum is not None:
            interrupts.raise_for(signum)

    def read_commit(self, version: int) -> ActionBatch:
        """The parsed commit at `version`; FileMissingError if there is none."""
        name = commit_name(version)
        return parse_commit(self.storage.read(self._commit_location(version)), version, name)

    def _read_back(self, version: int, cause: StorageError) -> ActionBatch | None:
        try:
            return self.read_commit(version)
        except FileMissingError:
            return None
        except StorageError as e:
            raise CommitOutcomeUnknownError(
                f"the commit of version {version} may or may not have been written: "
                f"{cause.message}; reading it back failed too: {e.message}",
                hint="Check the table's history (dvtool inspect --history) before retrying.",
            ) from e

    def _commit_location(self, version: int) -> str:
        return self.storage.join(f"_delta_log/{commit_name(version)}")

    # -- the optimistic loop ---------------------------------------------------------------

    def try_commit(
        self,
        read_version: int,
        actions: Actions | ActionsBuilder,
        read_set: ReadSet,
        *,
        max_tries: int = 10,
        backoff: Backoff | None = None,
    ) -> CommitResult:
        """Commit `actions` at the first free version after `read_version`, Delta-style.

        `actions` is the commit (commitInfo with our `txnId` first), or a callable building
        it for an attempt version and the winners seen so far. Between attempts, winners are
        checked for conflicts with `read_set`; a conflict raises TransactionConflictError.
        When the commit carries an in-commit timestamp, each retry sets it to
        max(now, winner's ICT + 1). No post-commit work: that is the transaction's
        (`dvtool.delta.log.transaction`). `in_doubt` tells, after any error, whether a put may
        have landed.
        """
        if max_tries < 1:
            raise ValueError("max_tries must be at least 1")
        backoff = backoff or Backoff()
        winners: list[ActionBatch] = []
        version = read_version + 1
        current = self._build(actions, version, winners)
        txn_id = _txn_id(current)
        for attempt in range(1, max_tries + 1):
            try:
                result = self._commit(version, current, txn_id)
            except CommitRace as race:
                new = [race.winner] if race.winner is not None else []
                new += self._commits_from(version + 1)
                for winner in new:
                    if is_our_commit(winner, txn_id):
                        result = CommitResult(
                            winner.version, txn_id, recovered=True, actions=current
                        )
                        return self._finish(result, attempt, winners)
                conflict = check_winners(read_set, new)
                if conflict.conflict:
                    raise TransactionConflictError(conflict) from None
                winners.extend(new)
                version = (new[-1].version if new else version) + 1
                if attempt == max_tries:
                    break
                current = self._retry_actions(actions, current, version, winners)
                self._sleep(backoff.delay(attempt, self._rng))
                continue
            return self._finish(result, attempt, winners)
        raise CommitConflictError(
            f"could not commit after {max_tries} attempts: other writers committed "
            f"versions {read_version + 1} to {version - 1} first",
            hint="The table is busy; run the command again.",
        )

    def _build(
        self, actions: Actions | ActionsBuilder, version: int, winners: Sequence[ActionBatch]
    ) -> list[dict[str, Any]]:
        built = actions(version, tuple(winners)) if callable(actions) else actions
        return _dicts(built)

    def _retry_actions(
        self,
        actions: Actions | ActionsBuilder,
        current: list[dict[str, Any]],
        version: int,
        winners: Sequence[ActionBatch],
    ) -> list[dict[str, Any]]:
        rebuilt = self._build(actions, version, winners) if callable(actions) else current
        info = commit_info_of(rebuilt)
        if info is None or "inCommitTimestamp" not in info:
            return rebuilt
        previous = winners[-1].commit_info if winners else None
        prev_ict = previous.get("inCommitTimestamp") if previous else None
        prev = prev_ict if isinstance(prev_ict, int) else None
        return with_in_commit_timestamp(rebuilt, next_in_commit_timestamp(self._clock_ms(), prev))

    def _commits_from(self, start: int) -> list[ActionBatch]:
        """The commits at `start`, `start + 1`, ... up to the first missing one."""
        out: list[ActionBatch] = []
        version = start
        while True:
            try:
                out.append(self.read_commit(version))
            except FileMissingError:
                return out
            version += 1

    def _finish(
        self, result: CommitResult, attempts: int, winners: Sequence[ActionBatch]
    ) -> CommitResult:
        result.attempts = attempts
        result.winners = tuple(w.version for w in winners)
        return result

    # -- checkpoints -----------------------------------------------------------------------

    def write_checkpoint(self, version: int, snapshot: Snapshot | None = None) -> CheckpointInfo:
        """Write the checkpoint of `version` (`dvtool.delta.log.checkpoint_writer.write_checkpoint`;
        `snapshot`, if given, must be the table at `version`), without a log cleanup."""
        return write_checkpoint(self.log, version, snapshot, self._clock_ms())


def _txn_id(actions: Sequence[Mapping[str, Any]]) -> str:
    info = commit_info_of(actions)
    txn_id = info.get("txnId") if info else None
    if not isinstance(txn_id, str) or not txn_id:
        raise ValueError("a commit needs a commitInfo action with a txnId")
    return txn_id


def _dicts(actions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(a) for a in actions]


def row_tracked(snapshot: Snapshot, actions: Actions) -> Actions | ActionsBuilder:
    """`actions` as committed on a table with row tracking: a builder that gives the adds
    lacking them fresh row IDs above the high-water mark (the snapshot's or a winner's,
    whichever is higher) and the commit's version as `defaultRowCommitVersion`, recomputed
    for every attempt; `actions` unchanged on other tables (PROTOCOL.md "Row Tracking")."""
    configuration = snapshot.metadata.configuration
    if not row_tracking.assigns_row_ids(snapshot.protocol, configuration):
        return actions
    base = row_tracking.high_water_mark(snapshot.domains)

    def build(version: int, winners: Sequence[ActionBatch]) -> Actions:
        mark = max(base, row_tracking.winners_high_water_mark(w.domains for w in winners))
        return row_tracking.assign_fresh_row_ids(actions, version, mark)

    return build


def snapshot_commit_info(
    snapshot: Snapshot,
    operation: str,
    parameters: Mapping[str, Any],
    metrics: Mapping[str, Any],
    *,
    txn_id: str,
    now_ms: int,
    is_blind_append: bool = False,
    copies_rows: bool = False,
) -> dict[str, Any]:
    """The commitInfo action of a commit planned on `snapshot`.

    Carries an in-commit timestamp (max(now, previous ICT + 1)) when the table enables them,
    so every writing command gets it right in one place; retries refresh it in try_commit.
    On a table that assigns row IDs, the tag `delta.rowTracking.preserved` says whether the
    stable row IDs and commit versions of the rows the commit copies (`copies_rows`: it
    rewrites files) were preserved: true when it copies none, or row tracking is enabled
    (rewrites then write the materialized columns).
    """
    tags = None
    configuration = snapshot.metadata.configuration
    if row_tracking.assigns_row_ids(snapshot.protocol, configuration):
        preserved = not copies_rows or (
            row_tracking.materialized_columns(snapshot.protocol, configuration) is not None
        )
        tags = {row_tracking.PRESERVED_TAG: "true" if preserved else "false"}
    ict = None
    if in_commit_timestamps_enabled(snapshot.protocol, snapshot.metadata):
        previous = (snapshot.commit.commit_info or {}).get("inCommitTimestamp")
        ict = next_in_commit_timestamp(now_ms, previous if isinstance(previous, int) else None)
    return commit_info(
        operation=operation,
        parameters=parameters,
        metrics=metrics,
        read_version=snapshot.version,
        txn_id=txn_id,
        timestamp_ms=now_ms,
        is_blind_append=is_blind_append,
        in_commit_timestamp=ict,
        tags=tags,
    )
