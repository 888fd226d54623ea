"""The engine interface: what a command asks of the engine that reads and writes data files.

A scan answers, for each live file, which of its rows satisfy a predicate. Rows already
deleted by the file's current DV never count as matches, so callers can merge the result
into the DV (`old | new`) and count the newly deleted rows directly.

A rewrite turns bins of input files into one new data file per bin, without the rows each
input drops (its DV): purge uses bins of one file, compaction bins of small files of one
partition. Engines only read and write data files; the caller alone commits.

`run_writes` runs a format's own writes where the engine runs its tasks: a picklable
function of plain-data items (Iceberg's data file rewrites, `dvtool.iceberg.rewrite_job`,
which need the table's metadata rather than a `TableLayout`); the arrow engine calls it on
its thread pool, the Spark engine in one task per item on the executors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from dvtool.data_files import WrittenFile
from dvtool.delta.protocol import file_layout
from dvtool.delta.protocol.row_tracking import MaterializedColumns
from dvtool.delta.protocol.schema import StructType

if TYPE_CHECKING:  # only scans need it; its sqlglot costs ~0.05 s at start-up
    from pyroaring import BitMap64  # the driver's row sets; executors never import it

    from dvtool.delta.log.snapshot import Snapshot
    from dvtool.predicate import Predicate
    from dvtool.storage.data_file_storage import DataFileStorage

Progress = Callable[[int], None]
Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class ScanFile:
    """One live file to scan.

    `stats_checked`: the add's statistics held min, max and null count of every column the
    predicate reads, and planning found they could not decide the file; a file of one row
    group has the same bounds in its footer, so the scan does not check them again.
    """

    path: str
    location: str
    partition_values: Mapping[str, str | None]
    num_records: int | None
    deleted: BitMap64 | None
    stats_checked: bool = False


@dataclass(frozen=True)
class TableLayout:
    """What an engine needs to know about the table to read and write its files.

    `materialize_partitions`: new files hold the partition columns too, after the data
    columns (`materializePartitionColumns`, `delta.writePartitionColumnsToParquet`, Iceberg
    compatibility). `row_tracking`: the hidden columns rewrites write to preserve stable row
    IDs, when row tracking is enabled. `codec`: `delta.parquet.compression.codec` if set (else
    a rewrite keeps its input's codec). `clustering_columns`: physical paths that must have
    statistics. `variant_columns`: physical names of top-level variant columns.
    """

    storage: DataFileStorage
    schema: StructType
    partition_columns: tuple[str, ...]
    column_mapping_mode: str
    materialize_partitions: bool = False
    row_tracking: MaterializedColumns | None = None
    codec: str | None = None
    clustering_columns: tuple[tuple[str, ...], ...] = ()
    variant_columns: frozenset[str] = frozenset()

    @classmethod
    def of(cls, storage: DataFileStorage, snapshot: Snapshot) -> TableLayout:
        """The layout of the table at `snapshot` (see `dvtool.delta.protocol.file_layout`)."""
        mode = snapshot.column_mapping_mode
        options = file_layout.layout_options(
            snapshot.protocol, snapshot.metadata, snapshot.schema, mode, snapshot.domains
        )
        return cls(storage, snapshot.schema, snapshot.metadata.partition_columns, mode, **options)


@dataclass(frozen=True)
class RewriteInput:
    """One input file of a rewrite and the rows to leave out (its DV), if any.

    `drop` holds the row indexes as a sorted, duplicate-free uint64 numpy array
    (`dvtool.delta.protocol.deletion_vector.bitmap_rows` turns a driver's bitmap into one): rewrites
    also run on Spark executors, which have numpy but no pyroaring.

    `base_row_id`/`default_row_commit_version`: the file's row tracking fields, from which a
    rewrite computes the stable row IDs and commit versions of rows without materialized ones.
    """

    path: str
    location: str
    drop: np.ndarray | None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None


@dataclass(frozen=True)
class RewriteBin:
    """Inputs of one partition rewritten into one new file in `directory` (decoded, relative)."""

    inputs: tuple[RewriteInput, ...]
    directory: str
    partition_values: Mapping[str, str | None]


class Engine(Protocol):
    """Scans and rewrites data files."""

    name: str

    def find_matches(
        self,
        table: TableLayout,
        files: Sequence[ScanFile],
        predicate: Predicate,
        progress: Progress | None = None,
    ) -> list[BitMap64]:
        """Per file (in order), the row indexes that match and are not deleted yet."""
        ...

    def rewrite(
        self,
        table: TableLayout,
        configuration: Mapping[str, str],
        bins: Sequence[RewriteBin],
        progress: Progress | None = None,
    ) -> list[WrittenFile | None]:
        """Per bin (in order), the new file written, or None when no row remained.

        Every file returned is durable (on local disk: the file and its directory entry
        fsynced): commands commit right after, and a commit must never name a file a crash
        could lose.
        """
        ...

    def run_writes(
        self,
        write: Callable[[Item], Result],
        items: Sequence[Item],
        progress: Progress | None = None,
    ) -> list[Result]:
        """Per item (in order), `write(item)`: writes of new files a format describes itself.

        `write` (a module-level function or an object whose pickle is plain data) and the
        items and results must be picklable, as the Spark engine runs one task per item on
        its executors. When an item fails, this raises once every other item has finished,
        never while a write still runs: the caller records the files it plans before
        calling and deletes them (every file returned is durable, as for `rewrite`).
        """
        ...
