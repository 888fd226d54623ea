"""Shared checks of the tests of dvtool's Iceberg writes (tests/reference/test_iceberg_*).

- `copy_into_catalog`: a writable copy of a fixture table in the warehouse of the Iceberg
  Spark session's Hadoop catalog, so Spark reads and writes it by name;
- `readers_agree`: pyiceberg, DuckDB, polars and Iceberg Spark read exactly the expected
  rows (an oracle may refuse only a shape it is known to refuse, and only when the table
  has that shape), and `dvtool inspect --verify` finds nothing wrong;
- `cli_json`: a dvtool command's `--json` document, asserting its exit code.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tests import iceberg_oracles as oracles
from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import (
    ALL_SPECS,
    build_table,
    copy_table,
    latest_metadata,
    warehouse,
)

Row = dict[str, Any]


# Tables whose copies `rewrite_table_path` leaves inconsistent: Iceberg 1.12 moves their
# position delete files' rows and `file_path` bounds to the new location but not the
# `referenced_data_file` of their manifest entries (written by Flink-shaped commits through
# Iceberg's Java API), so Iceberg Java (which scopes a file by `referenced_data_file`) and
# DuckDB or pyiceberg (which read its rows) disagree on the copy. They are built afresh.
BUILT_AFRESH = {"v2_flink", "v2_flink_part", "v3_flink_part"}


def copy_into_catalog(
    session: JvmSession, entry: dict[str, Any], namespace: str, name: str
) -> tuple[Path, str]:
    """A writable copy of a fixture table: its folder and its name in Spark's catalog."""
    folder = warehouse(session) / namespace / name
    assert not folder.exists(), folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    fixture = entry["table"].rsplit(".", 1)[-1]
    if fixture in BUILT_AFRESH:
        spec = next(s for s in ALL_SPECS if s.name == fixture)
        build_table(session, dataclasses.replace(spec, name=name), db=namespace)
    else:
        copy_table(session, entry, folder)
    return folder, f"local.{namespace}.{name}"


def cli_json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def delete_file_shapes(session: JvmSession, table: str, folder: Path | str) -> dict[str, bool]:
    """What the table's live delete files are, as Iceberg Spark lists them: equality
    deletes and Parquet position delete files not limited to one data file; a
    `referenced_data_file` outside the table (a broken copy, see `BUILT_AFRESH`) fails.
    `folder`: the table's folder, or its location as a URI (`s3://...`)."""
    session.sql(f"REFRESH TABLE {table}")
    rows = session.rows(
        f"SELECT content, file_format, referenced_data_file, "
        f"lower_bounds[2147483546] AS low, upper_bounds[2147483546] AS high "
        f"FROM {table}.delete_files"
    )
    scoped = [
        r
        for r in rows
        if r["content"] == 1 and r["file_format"] != "PUFFIN" and r["referenced_data_file"] is None
    ]
    inside = (str(folder), f"file:{folder}")
    stale = [
        r["referenced_data_file"]
        for r in rows
        if r["referenced_data_file"] is not None
        and not r["referenced_data_file"].startswith(inside)
    ]
    assert not stale, f"a copy names files of another table: {stale[:3]}"
    return {
        "equality": any(r["content"] == 2 for r in rows),
        "multi_file_positions": any(r["low"] is None or r["low"] != r["high"] for r in scoped),
    }


def _allowed(refusal: oracles.OracleRefused, shapes: dict[str, bool]) -> bool:
    if oracles.EQUALITY_REFUSAL.lower() in refusal.reason.lower():
        return shapes["equality"]
    return shapes["multi_file_positions"] and "not limited to one data file" in refusal.reason


def readers_agree(session: JvmSession, folder: Path, table: str, expected: list[Row]) -> None:
    """Every oracle and Iceberg Spark read `expected`; `inspect --verify` is clean."""
    shapes = delete_file_shapes(session, table, folder)
    metadata = latest_metadata(folder)
    for oracle in oracles.ORACLES:
        try:
            rows = oracles.oracle_rows(oracle, metadata)
        except oracles.OracleRefused as refusal:
            assert _allowed(refusal, shapes), refusal
            continue
        assert rows == expected, oracle
    assert session.rows(f"SELECT * FROM {table} ORDER BY id") == expected
    doc = cli_json("inspect", folder, "--verify")
    assert doc["verify"]["problems"] == [], doc["verify"]
