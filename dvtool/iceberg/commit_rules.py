"""What every Iceberg commit does before and after its atomic swap, whatever the catalog.

- `check_requirements`: pyiceberg's `TableRequirement`s against the base metadata; one that
  fails is a `CommitConflictError` (the table moved on: refresh and plan again).
- `apply_updates`: pyiceberg's `update_table_metadata` on the base (v3 row lineage
  included: `next-row-id` advances by a new snapshot's `added-rows`), with the base's
  metadata file added to the `metadata-log`, which keeps the table's
  `write.metadata.previous-versions-max` newest entries (Java's rule).
- `refuse_lossy`: a table whose metadata holds fields pyiceberg's model drops (v3's
  `encryption-keys`, anything newer) is not written: the new metadata would lose them.
- `dropped_metadata_files`: with `write.metadata.delete-after-commit.enabled`, the old
  metadata files the commit dropped from the log, to delete once it landed (Java's
  `deleteRemovedMetadataFiles`).
- `stop_if_signalled` and `still_in_doubt`: the interrupt contract of
  `dvtool.delta.log.transaction` around the swap (`dvtool.interrupts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dvtool import interrupts
from dvtool.errors import CommitConflictError, CommitOutcomeUnknownError, WriteRefusedError
from dvtool.iceberg.metadata_json import lost_fields

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableRequirement, TableUpdate

DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"


def check_requirements(
    base: TableMetadata, requirements: Sequence[TableRequirement], what: str
) -> None:
    """CommitConflictError naming the first requirement `base` does not meet."""
    from pyiceberg.exceptions import CommitFailedException

    for requirement in requirements:
        try:
            requirement.validate(base)
        except CommitFailedException as e:
            raise conflict(what, str(e)) from None


def conflict(what: str, why: str) -> CommitConflictError:
    return CommitConflictError(
        f"the commit to {what} conflicts with a concurrent commit: {why}",
        hint="Run the command again: it plans from the table's new state.",
    )


def apply_updates(
    base: TableMetadata, base_location: str, updates: Sequence[TableUpdate]
) -> TableMetadata:
    """The metadata after `updates`, its log naming `base_location`; `base` itself when
    the updates change nothing."""
    from pyiceberg.table.update import update_table_metadata

    updated = update_table_metadata(base, tuple(updates), metadata_location=base_location)
    return base if updated == base else updated


def changes_nothing(
    base: TableMetadata, base_location: str, updates: Sequence[TableUpdate]
) -> bool:
    """Whether `updates` leave `base` as it is (the commit then has nothing to send). An
    added snapshot always changes it: the common case, answered without applying."""
    from pyiceberg.table.update import AddSnapshotUpdate

    if any(isinstance(update, AddSnapshotUpdate) for update in updates):
        return False
    return apply_updates(base, base_location, updates) is base


def refuse_lossy(raw: bytes, metadata: TableMetadata, location: str) -> None:
    """WriteRefusedError when writing `metadata` (parsed from the file `raw` at `location`)
    back would drop or change fields of the file."""
    lost = lost_fields(raw, metadata)
    if lost:
        shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
        raise WriteRefusedError(
            f"{location} holds table metadata dvtool cannot carry over to a new version ({shown})",
            hint="Write this table with an Iceberg engine that knows these fields "
            "(Iceberg Java); dvtool only reads it.",
        )


def dropped_metadata_files(base: TableMetadata, new: TableMetadata) -> list[str]:
    """The metadata files of `base`'s log that `new`'s log no longer names, when the table
    deletes them after a commit (`write.metadata.delete-after-commit.enabled`)."""
    if new.properties.get(DELETE_AFTER_COMMIT, "false").strip().lower() != "true":
        return []
    kept = {e.metadata_file for e in new.metadata_log}
    return [e.metadata_file for e in base.metadata_log if e.metadata_file not in kept]


def stop_if_signalled() -> None:
    """Before sending the swap: a signal recorded since the transaction began stops it."""
    signum = interrupts.received()
    if signum is not None:
        interrupts.raise_for(signum)


def still_in_doubt(what: str, cause: str) -> CommitOutcomeUnknownError:
    """The error of a swap whose outcome cannot be known: its files must be kept."""
    return CommitOutcomeUnknownError(
        f"the commit to {what} may or may not have landed: {cause}",
        hint="Check the table's current metadata (dvtool inspect) before running the command "
        "again; the files written for this commit are kept (vacuum removes them if unused).",
    )
