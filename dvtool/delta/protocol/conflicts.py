"""Optimistic concurrency: does a commit that won the race invalidate our transaction?

When our commit for version v loses (another writer created `v.json` first), the winners'
actions are checked against what our transaction read and wrote, with Delta's rules for the
Serializable isolation level (delta-io/delta `ConflictChecker`). Without a conflict the same
actions are retried at the next version; with one, the command must re-plan from a fresh
snapshot. Checks run in Delta's order, and the first failing one names the exception Delta
would raise:

1. `ProtocolChangedException`: the winner changed the protocol (dvtool is conservative here:
   Delta lets a non-protocol-changing transaction through, but the new protocol may need a
   feature dvtool does not write, so re-planning re-runs the writer gate).
2. `MetadataChangedException`: the winner changed metaData (schema, partitioning, properties).
3. `ConcurrentAppendException`: the winner added files with `dataChange=true` that our read
   could have matched (`might_match`, usually a partition filter; every file when we read
   the whole table or change metadata/protocol). Blind appends count under Serializable.
   Files added with `dataChange=false` (compaction) only rearrange rows we have seen.
4. `ConcurrentDeleteReadException`: the winner removed a file we read (by path; any remove,
   `dataChange=false` included, as a compaction also invalidates positions in the file),
   or removed anything while we read the whole table.
5. `ConcurrentDeleteDeleteException`: the winner removed a file we remove too.
6. `ConcurrentTransactionException`: the winner wrote a `txn` for an appId we read or write,
   or a `domainMetadata` for a domain we write. Row tracking's `delta.rowTracking` domain is
   the exception, as in Delta: a retried commit recomputes its fresh row IDs above the
   winner's high-water mark (`dvtool.delta.protocol.row_tracking`), so it never conflicts.

Paths are compared by their canonical keys (`dvtool.delta.protocol.paths`) when the read set knows
the table root, as Delta Spark compares them: a winner that removes `file:/t/x%20y` removed
the file we read as `x y`.

A winner whose commitInfo `txnId` is ours is our own commit whose response was lost; see
`is_our_commit`. Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dvtool.delta.protocol import row_tracking
from dvtool.delta.protocol.actions import file_action_key
from dvtool.delta.protocol.paths import CanonicalRoot
from dvtool.delta.protocol.replay import ActionBatch

FileKey = tuple[str, str | None]
MightMatch = Callable[[Mapping[str, Any]], bool]

PROTOCOL_CHANGED = "ProtocolChangedException"
METADATA_CHANGED = "MetadataChangedException"
CONCURRENT_APPEND = "ConcurrentAppendException"
CONCURRENT_DELETE_READ = "ConcurrentDeleteReadException"
CONCURRENT_DELETE_DELETE = "ConcurrentDeleteDeleteException"
CONCURRENT_TRANSACTION = "ConcurrentTransactionException"


@dataclass(frozen=True)
class ReadSet:
    """What our transaction depended on and changed.

    - `read_version`: the snapshot version the transaction was planned on.
    - `read_keys`: (path, DV uniqueId) keys of the files we read, rewrite or remove.
    - `removed_keys`: keys of the files our commit removes.
    - `might_match`: whether an added file (its add action body) could hold rows our read
      predicate selects; None when the transaction read no rows beyond `read_keys`.
    - `read_whole_table`: the transaction depended on every file (e.g. no predicate).
    - `changes_metadata` / `changes_protocol`: our commit has a metaData / protocol action;
      such a transaction depends on the whole table.
    - `app_ids`: txn appIds we read or write; `domains`: domainMetadata domains we write.

    `root` is the canonical table root: with it, the path of every key is its canonical key
    (`dvtool.delta.protocol.paths`) and winners' paths are keyed the same way; without it, paths are
    compared as logged. `might_match` receives the winner's add action body (partitionValues
    as a dict).
    """

    read_version: int
    read_keys: frozenset[FileKey] = frozenset()
    removed_keys: frozenset[FileKey] = frozenset()
    might_match: MightMatch | None = None
    read_whole_table: bool = False
    changes_metadata: bool = False
    changes_protocol: bool = False
    app_ids: frozenset[str] = frozenset()
    domains: frozenset[str] = frozenset()
    root: CanonicalRoot | None = None

    @classmethod
    def for_actions(
        cls,
        read_version: int,
        actions: Sequence[Mapping[str, Any]],
        *,
        read_keys: Iterable[FileKey] = (),
        might_match: MightMatch | None = None,
        read_whole_table: bool = False,
        app_ids: Iterable[str] = (),
        root: str | None = None,
    ) -> ReadSet:
        """A read set whose written parts (removes, metaData, protocol, txn, domains) are
        taken from our commit's `actions`; the files we removed count as read too.

        `read_keys` are keys of paths as logged; with `root` (the table root as
        `Storage.root` spells it) they and the removes are keyed canonically.
        """
        canonical = None if root is None else CanonicalRoot.parse(root)
        removed: set[FileKey] = set()
        apps = set(app_ids)
        domains: set[str] = set()
        metadata = protocol = False
        for action in actions:
            for kind, body in action.items():
                if kind == "remove":
                    removed.add(file_action_key(body["path"], body.get("deletionVector")))
                elif kind == "metaData":
                    metadata = True
                elif kind == "protocol":
                    protocol = True
                elif kind == "txn":
                    apps.add(str(body["appId"]))
                elif kind == "domainMetadata":
                    domains.add(str(body["domain"]))
        read = {_canonical_key(key, canonical) for key in read_keys}
        removed = {_canonical_key(key, canonical) for key in removed}
        return cls(
            read_version=read_version,
            read_keys=frozenset(read | removed),
            removed_keys=frozenset(removed),
            might_match=might_match,
            read_whole_table=read_whole_table,
            changes_metadata=metadata,
            changes_protocol=protocol,
            app_ids=frozenset(apps),
            domains=frozenset(domains),
            root=canonical,
        )

    def path_key(self, path: str) -> str:
        """A winner's logged path keyed as this read set keys its own paths."""
        return path if self.root is None else self.root.key(path)

    @property
    def depends_on_whole_table(self) -> bool:
        return self.read_whole_table or self.changes_metadata or self.changes_protocol


@dataclass(frozen=True)
class ConflictResult:
    """The outcome of checking one or more winning commits."""

    conflict: bool
    exception: str | None = None
    reason: str = ""
    winner_version: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:  # `if check_conflicts(...):` reads as "if there is a conflict"
        return self.conflict


NO_CONFLICT = ConflictResult(False)


def is_our_commit(batch: ActionBatch, txn_id: str) -> bool:
    """Whether `batch` is the commit of the transaction `txn_id` (a write whose reply was lost)."""
    info = batch.commit_info
    return bool(info) and info is not None and info.get("txnId") == txn_id


def check_conflicts(read_set: ReadSet, winner: ActionBatch) -> ConflictResult:
    """Check one winning commit against our transaction (Serializable isolation)."""
    version = winner.version
    op = _operation(winner)

    def conflict(exception: str, message: str, **details: Any) -> ConflictResult:
        reason = f"{exception}: version {version}{op} {message}"
        return ConflictResult(True, exception, reason, version, details)

    if winner.protocol is not None:
        return conflict(PROTOCOL_CHANGED, "changed the table protocol")
    if winner.metadata is not None:
        return conflict(METADATA_CHANGED, "changed the table metadata")

    appended = _appended_conflict(read_set, winner)
    if appended is not None:
        path, partition = appended
        where = f" in partition {_partition_text(partition)}" if partition else ""
        return conflict(CONCURRENT_APPEND, f"added file {path}{where}", path=path)

    read_paths = {path for path, _ in read_set.read_keys}
    removed_paths = {path for path, _ in read_set.removed_keys}
    for remove in winner.removes:
        path = str(remove.get("path"))
        if read_set.path_key(path) in read_paths or read_set.depends_on_whole_table:
            message = f"removed file {path}, which this transaction read"
            return conflict(CONCURRENT_DELETE_READ, message, path=path)
    for remove in winner.removes:
        path = str(remove.get("path"))
        if read_set.path_key(path) in removed_paths:
            return conflict(
                CONCURRENT_DELETE_DELETE,
                f"removed file {path}, which this transaction removes too",
                path=path,
            )

    for txn in winner.txns:
        if txn.app_id in read_set.app_ids:
            return conflict(
                CONCURRENT_TRANSACTION,
                f"committed a txn for application {txn.app_id}",
                app_id=txn.app_id,
            )
    for dm in winner.domains:
        if dm.domain in read_set.domains and dm.domain != row_tracking.DOMAIN:
            return conflict(
                CONCURRENT_TRANSACTION,
                f"changed metadata domain {dm.domain}, which this transaction changes too",
                domain=dm.domain,
            )
    return NO_CONFLICT


def check_winners(read_set: ReadSet, winners: Iterable[ActionBatch]) -> ConflictResult:
    """The first conflict among the winning commits (oldest first), or no conflict."""
    for winner in winners:
        result = check_conflicts(read_set, winner)
        if result.conflict:
            return result
    return NO_CONFLICT


def _appended_conflict(read_set: ReadSet, winner: ActionBatch) -> tuple[str, Any] | None:
    """The first added file our read should have seen: (path, partitionValues) or None."""
    whole = read_set.depends_on_whole_table
    for add in winner.adds:
        data_change = add.get("dataChange", True) is not False
        if not data_change and not read_set.changes_protocol:
            continue
        if whole or (read_set.might_match is not None and read_set.might_match(add)):
            return str(add.get("path")), add.get("partitionValues")
    return None


def _canonical_key(key: FileKey, root: CanonicalRoot | None) -> FileKey:
    """`key` with its path replaced by the canonical key against `root` (if any)."""
    return key if root is None else (root.key(key[0]), key[1])


def _partition_text(partition: Any) -> str:
    if isinstance(partition, Mapping):
        return ", ".join(f"{k}={v}" for k, v in partition.items()) or "(unpartitioned)"
    return str(partition)


def _operation(batch: ActionBatch) -> str:
    info = batch.commit_info
    operation = info.get("operation") if info else None
    return f" ({operation})" if operation else ""
