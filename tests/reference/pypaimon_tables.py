"""Paimon tables as pypaimon users write them, for the tests (pypaimon runs in its own
environment: tests/engines/pypaimon_env.py).

Schema `(id INT NOT NULL, part STRING NOT NULL, v STRING)`, in a filesystem catalog at
OUT/pypaimon, database `fixtures`:

- `py_append_dv`: append table with `deletion-vectors.enabled`, `row-tracking.enabled` and
  `data-evolution.enabled` (what pypaimon's DELETE needs), unpartitioned: two commits of 30
  rows (ids 0-59), then `delete_by_predicate` of the ids that are multiples of 7, then of
  11. pypaimon writes the deletes as 32-bit deletion vectors in deletion files under
  `index/`; the second delete rewrites the bucket's deletion file (the first is deleted from
  the index manifest, still reached by the older snapshots).
- `py_append_dv_part`: the same, `PARTITIONED BY part` (`p0`, `p1`).
- `py_pk_level0`: primary key `(id, part)`, partitioned, `bucket` 2,
  `deletion-vectors.enabled`, two commits (ids 0-19, then upserts of 0-9). pypaimon does
  not compact, so every file stays at level 0, which readers in deletion-vectors mode do not
  read until a compaction: pypaimon and Paimon's Java reader return no rows, and dvtool
  counts every file as pending.

pypaimon 2.1 cannot delete from primary-key tables (its DELETE wants `_ROW_ID`, a
data-evolution column) and writes no 64-bit DVs. Each table's entry in
`pypaimon-manifest.json` has its path and expected rows. By hand: `python -m
tests.reference.pypaimon_tables OUT_DIR`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.engines import pypaimon_env

DB = "fixtures"
APPEND_DV = {
    "deletion-vectors.enabled": "true",
    "row-tracking.enabled": "true",
    "data-evolution.enabled": "true",
}
Row = dict[str, Any]


def rows(ids: range, prefix: str) -> list[Row]:
    return [{"id": i, "part": f"p{i % 2}", "v": f"{prefix}{i}"} for i in ids]


@dataclass(frozen=True)
class PyTableSpec:
    """A table pypaimon writes: keys, options, commits of rows, then deletes of ids."""

    name: str
    primary_keys: tuple[str, ...]
    partition_keys: tuple[str, ...]
    options: dict[str, str]
    writes: tuple[list[Row], ...]
    deletes: tuple[list[int], ...] = ()


DELETES = ([i for i in range(60) if i % 7 == 0], [i for i in range(60) if i % 11 == 0])
SPECS = (
    PyTableSpec(
        "py_append_dv", (), (), APPEND_DV, (rows(range(30), "a"), rows(range(30, 60), "a")), DELETES
    ),
    PyTableSpec(
        "py_append_dv_part",
        (),
        ("part",),
        APPEND_DV,
        (rows(range(30), "a"), rows(range(30, 60), "a")),
        DELETES,
    ),
    PyTableSpec(
        "py_pk_level0",
        ("id", "part"),
        ("part",),
        {"deletion-vectors.enabled": "true", "bucket": "2"},
        (rows(range(20), "a"), rows(range(10), "b")),
    ),
)


def expected_rows(spec: PyTableSpec) -> list[Row]:
    """The rows a reader in deletion-vectors mode returns, sorted by id: none for the
    primary-key table (all level 0), else every row written but the deleted ids."""
    if spec.primary_keys:
        return []
    deleted = {i for ids in spec.deletes for i in ids}
    return sorted((r for w in spec.writes for r in w if r["id"] not in deleted), key=_by_id)


def _by_id(row: Row) -> int:
    return int(row["id"])


def requests(spec: PyTableSpec, warehouse: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The table's path and the worker requests that build it."""
    path = warehouse / f"{DB}.db" / spec.name
    create = {
        "op": "create",
        "warehouse": str(warehouse),
        "db": DB,
        "name": spec.name,
        "primary_keys": list(spec.primary_keys),
        "partition_keys": list(spec.partition_keys),
        "options": spec.options,
    }
    writes = [{"op": "write", "path": str(path), "rows": w} for w in spec.writes]
    deletes = [{"op": "delete", "path": str(path), "ids": ids} for ids in spec.deletes]
    return path, [create, *writes, *deletes]


def build_all(out: Path) -> Path:
    """Build every table of SPECS under OUT/pypaimon (one pypaimon process); write and
    return the manifest's path."""
    warehouse = out / "pypaimon"
    manifest, work = {}, []
    for spec in SPECS:
        path, steps = requests(spec, warehouse)
        work += steps
        manifest[spec.name] = {
            "path": str(path),
            "options": spec.options,
            "expected": expected_rows(spec),
            "deleted_ids": sorted({i for ids in spec.deletes for i in ids}),
        }
    pypaimon_env.run(work)
    target = out / "pypaimon-manifest.json"
    target.write_text(json.dumps(manifest, indent=1))
    return target


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.reference.pypaimon_tables OUT_DIR")
    print(build_all(Path(sys.argv[1]).resolve()))
