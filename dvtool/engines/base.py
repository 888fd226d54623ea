"""The engine interface: what a command asks of the engine that reads and writes data files.

A scan answers, for each live file, which of its rows satisfy a predicate. Rows already
deleted by the file's current DV never count as matches, so callers can merge the result
into the DV (`old | new`) and count the newly deleted rows directly.

A rewrite turns bins of input files into one new data file per bin, without the rows each
input drops (its DV): purge uses bins of one file, compaction bins of small files of one
partition. Engines only read and write data files; the caller alone commits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pyroaring import BitMap64

from dvtool.core.schema import StructType
from dvtool.data_files import WrittenFile
from dvtool.storage import Storage

if TYPE_CHECKING:  # only scans need it; sqlglot and acero cost ~0.1 s at start-up
    from dvtool.predicate import Predicate

Progress = Callable[[int], None]


@dataclass(frozen=True)
class ScanFile:
    """One live file to scan."""

    path: str
    location: str
    partition_values: Mapping[str, str | None]
    num_records: int | None
    deleted: BitMap64 | None


@dataclass(frozen=True)
class TableLayout:
    """What an engine needs to know about the table to read its files."""

    storage: Storage
    schema: StructType
    partition_columns: tuple[str, ...]
    column_mapping_mode: str


@dataclass(frozen=True)
class RewriteInput:
    """One input file of a rewrite and the rows to leave out (its DV), if any."""

    path: str
    location: str
    drop: BitMap64 | None


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
        """Per bin (in order), the new file written, or None when no row remained."""
        ...
