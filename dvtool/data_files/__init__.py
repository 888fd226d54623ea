"""Parquet data files of a table, through the storage layer: reading them and writing them.

- `reading`: opening a file (footer read once; INT96 timestamps as microseconds, never
  through nanoseconds), footers alone (row count, column types), and record batches row
  group by row group with the file index of their first row;
- `footer_stats`: the column statistics in footers, per row group for scans that skip row
  groups, and as min/max of a file just written for its Delta statistics;
- `writing`: `write_data_file` streams batches into a new uniquely named file, collecting
  its statistics, and returns the `WrittenFile` an `add` action is built from;
- `publish`: putting a written file in place whole or not at all, and durably before a
  commit names it (at once, or batched through a `BackgroundSync` the engine waits for).

The names callers use are re-exported here. Importing this package imports pyarrow.parquet:
commands that may not need data files (`dvtool inspect` of a small table) import it in the
functions that read them.
"""

from __future__ import annotations

from dvtool.data_files.footer_stats import RowGroupStats, row_group_stats
from dvtool.data_files.publish import BackgroundSync
from dvtool.data_files.reading import (
    footer_column_types,
    footer_row_count,
    iter_file_batches,
    open_parquet_file,
    parquet_file,
    parquet_read_error,
)
from dvtool.data_files.writing import WrittenFile, data_file_name, write_data_file

__all__ = [
    "BackgroundSync",
    "RowGroupStats",
    "WrittenFile",
    "data_file_name",
    "footer_column_types",
    "footer_row_count",
    "iter_file_batches",
    "open_parquet_file",
    "parquet_file",
    "parquet_read_error",
    "row_group_stats",
    "write_data_file",
]
