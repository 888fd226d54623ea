"""Shared steps of the tests of tables other writers made: run dvtool in-process, read the
live adds with the independent JSON replay, read rows with deltalake, and check a new file's
statistics against the file itself (read with pyarrow, never through dvtool)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner
from deltalake import DeltaTable, QueryBuilder

from dvtool.cli import cli
from tests.oracles import canon, commit_versions, replay_json

Row = dict[str, Any]


def dvtool(path: Path, command: str, *args: str) -> str:
    """Run `dvtool COMMAND PATH ARGS...` in-process; it must succeed."""
    result = CliRunner().invoke(cli, [command, str(path), *args])
    assert result.exit_code == 0, result.output
    return result.output


def committing(path: Path, command: str, *args: str) -> str:
    """`dvtool` that must commit exactly one new version (no step of a test is a no-op)."""
    last = max(commit_versions(path))
    output = dvtool(path, command, *args)
    assert max(commit_versions(path)) == last + 1, output
    return output


def live_adds(path: Path) -> list[dict[str, Any]]:
    return list(replay_json(path)[1].values())


def schema_fields(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(replay_json(path)[0]["schemaString"])["fields"])


def by_id(rows: Sequence[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: r["id"])


def deltalake_rows(path: Path) -> list[tuple[Any, ...]]:
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t")
    return canon(pa.table(result.read_all()).to_pylist())


def flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested stats or rows as one level, keys joined with dots (`a.b`)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _stat_value(value: Any) -> Any:
    """A value read from parquet as Delta's JSON stats hold it (numbers parsed as Decimal)."""
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + ("Z" if value.tzinfo else "")
    if isinstance(value, bool | str | bytes):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def check_stats(path: Path, add: dict[str, Any], partition_columns: Sequence[str] = ()) -> None:
    """The add's stats describe its file exactly: numRecords, and min/max of every leaf (by
    physical name, partition columns excluded), from the file read directly with pyarrow."""
    stats = json.loads(add["stats"], parse_float=Decimal, parse_int=Decimal)
    rows = [flatten(r) for r in pq.read_table(path / add["path"]).to_pylist()]
    assert stats["numRecords"] == len(rows)
    mins, maxs = flatten(stats["minValues"]), flatten(stats["maxValues"])
    leaves = {k for r in rows for k, v in r.items() if v is not None} - set(partition_columns)
    assert set(mins) == set(maxs) == leaves
    for leaf in leaves:
        values = [_stat_value(r[leaf]) for r in rows if r.get(leaf) is not None]
        assert (mins[leaf], maxs[leaf]) == (min(values), max(values)), leaf


def new_adds(path: Path, before: set[str]) -> list[dict[str, Any]]:
    """The live adds of files written since `before` (paths) was taken."""
    return [add for add in live_adds(path) if add["path"] not in before]
