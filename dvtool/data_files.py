"""Reading data files (parquet) of a table through the storage layer."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from dvtool.errors import FileMissingError, StorageError
from dvtool.storage import Storage


def footer_row_count(storage: Storage, location: str) -> int:
    """The row count in a parquet file's footer (reads the footer only)."""
    try:
        with storage.open_parquet(location) as source:
            return int(pq.ParquetFile(source).metadata.num_rows)
    except FileMissingError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise StorageError(f"cannot read the parquet footer of {location}: {e}") from e
