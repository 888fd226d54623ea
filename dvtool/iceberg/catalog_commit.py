"""The atomic commit of new Iceberg table metadata, per catalog kind.

Entry points for the Iceberg transaction (which plans, writes and loops):

- `writable_io(table)`: the FileIO to write a commit's new files with (manifests, manifest
  lists, delete and Puffin files): dvtool's storage layer for path tables, the catalog's
  FileIO otherwise.
- `refresh(table)`: the table's current state, to plan again after a conflict.
- `commit_updates(table, requirements, updates)`: one attempt at committing pyiceberg
  `TableUpdate`s on `table` (its metadata is the base) if the `TableRequirement`s hold,
  through the table's own atomic swap: a path table's next `vN.metadata.json` by
  put-if-absent (`path_commit`), a SQL catalog's conditional row update, a REST catalog's
  commit endpoint, another pyiceberg catalog's `commit_table` (`catalog_swap`).
- `retry_policy(metadata)`: how often and how long to retry, from the table's
  `commit.retry.*` properties with Iceberg Java's defaults.

Errors of `commit_updates`, which tell the caller what to do with the files it wrote:

- `CommitConflictError`: the base is no longer current or a requirement failed; the commit
  did not land (delete the attempt's files, refresh, plan again, within `retry_policy`);
- `CommitOutcomeUnknownError`: it may have landed; keep every file;
- `WriteRefusedError`: this table cannot be written safely (the reason is named);
- any other error: the commit did not land.

Signals: the swap runs with SIGINT/SIGTERM deferred (`dvtool.interrupts.deferred`), as Delta's
put does; a signal recorded before the swap stops it unsent. Call `commit_updates` inside
the transaction's own `interrupts.deferred()` block and mark the landed commit there
(`interrupts.after_commit`), as `dvtool.delta.log.transaction` does.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dvtool.iceberg.tables import IcebergTable

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableRequirement, TableUpdate


def writable_io(table: IcebergTable) -> FileIO:
    """A FileIO that can write the table's new files (the one it reads with: dvtool's
    `StorageFileIO` for path tables is writable, a catalog's FileIO is pyiceberg's)."""
    return table.io


def refresh(table: IcebergTable) -> IcebergTable:
    """The table's current state: its catalog's current metadata, or a path table's current
    `vN.metadata.json` (a table opened by one metadata file stays that file)."""
    if table.catalog is not None:
        from dvtool.iceberg.catalog_swap import refresh_catalog_table

        return refresh_catalog_table(table)
    from dvtool.iceberg.path_commit import refresh_path_table

    return refresh_path_table(table)


def commit_updates(
    table: IcebergTable,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
) -> IcebergTable:
    """Atomically apply `updates` on `table` if `requirements` hold; the committed table
    (`table` itself when the updates change nothing). One attempt: see the module
    docstring for the errors and what each means for the caller's files."""
    if table.catalog is not None:
        from dvtool.iceberg.catalog_swap import commit_catalog_table

        return commit_catalog_table(table, requirements, updates)
    from dvtool.iceberg.path_commit import commit_path_table

    return commit_path_table(table, requirements, updates)


# -- commit.retry.* ----------------------------------------------------------------------------

NUM_RETRIES = "commit.retry.num-retries"
MIN_WAIT_MS = "commit.retry.min-wait-ms"
MAX_WAIT_MS = "commit.retry.max-wait-ms"
TOTAL_TIMEOUT_MS = "commit.retry.total-timeout-ms"
_DEFAULTS = {NUM_RETRIES: 4, MIN_WAIT_MS: 100, MAX_WAIT_MS: 60_000, TOTAL_TIMEOUT_MS: 1_800_000}


@dataclass(frozen=True)
class RetryPolicy:
    """Iceberg Java's commit retries (`Tasks.exponentialBackoff`): after a conflict, wait
    `delay_s(retry)` and try again, while `allows(retry, elapsed_ms)`."""

    num_retries: int = _DEFAULTS[NUM_RETRIES]
    min_wait_ms: int = _DEFAULTS[MIN_WAIT_MS]
    max_wait_ms: int = _DEFAULTS[MAX_WAIT_MS]
    total_timeout_ms: int = _DEFAULTS[TOTAL_TIMEOUT_MS]

    @property
    def attempts(self) -> int:
        """Commit attempts in all: the first and the retries."""
        return self.num_retries + 1

    def allows(self, retry: int, elapsed_ms: float) -> bool:
        """Whether retry number `retry` (1 for the first retry) may run, `elapsed_ms` after
        the first attempt began."""
        return retry <= self.num_retries and elapsed_ms < self.total_timeout_ms

    def base_delay_ms(self, retry: int) -> float:
        """The wait before retry `retry`, without jitter: min-wait doubled each retry,
        capped at max-wait."""
        return float(min(self.min_wait_ms * 2.0 ** (retry - 1), self.max_wait_ms))

    def delay_s(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry `retry`, in seconds, with Java's jitter (up to 10%)."""
        base = self.base_delay_ms(retry)
        jitter = (rng or random).uniform(0, max(1.0, base * 0.1))
        return (base + jitter) / 1000.0


def retry_policy(metadata: TableMetadata) -> RetryPolicy:
    """The table's `commit.retry.*` properties (Java's defaults for those unset or not
    numbers; negative values as zero)."""
    properties: Mapping[str, str] = metadata.properties
    values = {
        key: _non_negative(properties.get(key), default) for key, default in _DEFAULTS.items()
    }
    return RetryPolicy(
        num_retries=values[NUM_RETRIES],
        min_wait_ms=values[MIN_WAIT_MS],
        max_wait_ms=max(values[MAX_WAIT_MS], values[MIN_WAIT_MS]),
        total_timeout_ms=values[TOTAL_TIMEOUT_MS],
    )


def _non_negative(value: str | None, default: int) -> int:
    try:
        return max(0, int(str(value).strip())) if value is not None else default
    except ValueError:
        return default
