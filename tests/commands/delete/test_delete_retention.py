"""Retention deletes: `--where` with current_date(), current_timestamp() and INTERVALs.

The instant is fixed once per command (`DeleteRequest.now`, default: when it starts) and
the commit's predicate records it as literals, so the log says exactly what was deleted.
Rows are checked with polars and deltalake, the table written by deltalake.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.enable import run_enable
from dvtool.delta.log.reader import open_log
from tests.cli_helpers import run

UTC = dt.timezone.utc
SCHEMA = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("ts", pa.timestamp("us", "UTC"))])


def _table(path: Path, today: dt.date, now: dt.datetime) -> Path:
    """100 rows: one per day back from `today`, and one per hour back from `now`."""
    rows = [
        {"id": k, "d": today - dt.timedelta(days=k), "ts": now - dt.timedelta(hours=k)}
        for k in range(100)
    ]
    for part in (rows[:50], rows[50:]):
        write_deltalake(str(path), pa.Table.from_pylist(part, SCHEMA), mode="append")
    run_enable(open_log(str(path)))
    return path


def _ids(path: Path) -> list[int]:
    return sorted(pl.read_delta(str(path))["id"].to_list())


def _last_commit(path: Path) -> dict[str, Any]:
    log = sorted((path / "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    info: dict[str, Any] = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return info


def test_current_date_minus_interval_deletes_the_old_days(tmp_path: Path) -> None:
    now = dt.datetime(2026, 11, 24, 9, 30, tzinfo=UTC)
    path = _table(tmp_path / "t", now.date(), now)
    where = "d < current_date() - INTERVAL 30 DAYS"
    result = run_delete(open_log(str(path)), DeleteRequest(where, now=now))
    assert result.metrics["numDeletedRows"] == 69  # days 31..99 back
    assert _ids(path) == list(range(31))
    predicate = _last_commit(path)["operationParameters"]["predicate"]
    assert "DATE '2026-10-25'" in predicate and "current_date" not in predicate


def test_current_timestamp_is_fixed_when_the_command_starts(tmp_path: Path) -> None:
    """By default the instant is the command's start: rows older than 36 hours then."""
    now = dt.datetime.now(UTC)
    path = _table(tmp_path / "t", now.date(), now)
    run_delete(open_log(str(path)), DeleteRequest("ts < current_timestamp() - INTERVAL 36 HOURS"))
    assert _ids(path) == list(range(36))  # newer than 36 hours before the start stay
    assert "TIMESTAMP '" in _last_commit(path)["operationParameters"]["predicate"]


def test_cli_retention_delete_with_date_functions(tmp_path: Path) -> None:
    now = dt.datetime.now(UTC)
    path = _table(tmp_path / "t", now.date(), now)
    where = (
        "date_trunc('DAY', ts) < date_sub(current_date(), 2) OR datediff(current_date(), d) > 90"
    )
    result = run("delete", path, "--where", where, "--json")
    assert result.exit_code == 0, result.stderr
    kept = _ids(path)
    expected = [
        k
        for k in range(100)
        if not ((now - dt.timedelta(hours=k)).date() < now.date() - dt.timedelta(days=2) or k > 90)
    ]
    assert kept == expected
    query = QueryBuilder().register("t", DeltaTable(str(path))).execute("select id from t")
    assert sorted(pa.table(query.read_all())["id"].to_pylist()) == expected


def test_cli_refuses_date_minus_date_in_spark_words(tmp_path: Path) -> None:
    now = dt.datetime.now(UTC)
    path = _table(tmp_path / "t", now.date(), now)
    result = run("delete", path, "--where", "current_date() - d > 30")
    assert result.exit_code == 2
    assert "use datediff(end, start)" in result.stderr
    assert "Traceback" not in result.stderr
