"""Write a small sample Delta table (three commits, partitioned) for the demo.

Usage: python scripts/make_sample_table.py PATH   (PATH is replaced if it exists)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake


def main(path: str) -> None:
    target = Path(path)
    if target.exists():
        shutil.rmtree(target)
    for batch in range(3):
        ids = list(range(batch * 1000, (batch + 1) * 1000))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "region": pa.array([("eu", "us", "apac")[i % 3] for i in ids]),
                "amount": pa.array([i * 0.5 for i in ids], pa.float64()),
            }
        )
        write_deltalake(str(target), data, mode="append", partition_by=["region"])
    print(f"wrote sample table to {target} (3 commits, 3000 rows)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sample-table")
