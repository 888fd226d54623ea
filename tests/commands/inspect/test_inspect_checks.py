"""The health gates of `inspect --check`: `max-small-files`, `max-log-files`, `min-avg-file-size`.

Tables are written by deltalake (appends, property changes, its own checkpoints); the
expected values come from deltalake (`get_add_actions` sizes) and from the names in
`_delta_log`, never from dvtool. Each gate is run through the CLI at its boundary: it holds
at the limit (exit 0) and fails one step beyond it (exit 3, its line says FAIL); the JSON
document lists every check asked for, in order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from dvtool.commands.inspect.command import load_snapshot
from dvtool.commands.inspect.summary import count_small_files, summed_as_json
from dvtool.delta.log.reader import open_log
from dvtool.delta.protocol.target_file_size import DEFAULT_TARGET_SIZE
from tests.cli_helpers import all_output, run
from tests.oracles import GOLDEN

ROWS_PER_APPEND = (10, 100, 1000, 5000)
COMMIT = re.compile(r"^(\d{20})\.json$")
CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]*)?\.parquet$")


def _appends(path: Path, rows: tuple[int, ...] = ROWS_PER_APPEND) -> Path:
    """One deltalake append per entry of `rows`: files of very different sizes."""
    for n in rows:
        data = pa.table(
            {"id": pa.array(range(n), pa.int64()), "s": pa.array([f"x{i}" for i in range(n)])}
        )
        write_deltalake(str(path), data, mode="append")
    return path


def _sizes(path: Path) -> list[int]:
    """The live files' sizes, as deltalake reads them from the log."""
    sizes = DeltaTable(str(path)).get_add_actions(flatten=True).column("size_bytes")
    return [int(s) for s in sizes.to_pylist()]


def _commits_since_checkpoint(path: Path, version: int | None = None) -> int:
    """Commits after the newest checkpoint at or below `version`, from the file names."""
    names = [p.name for p in (path / "_delta_log").iterdir()]
    commits = sorted(int(m[1]) for n in names if (m := COMMIT.match(n)))
    latest = commits[-1] if version is None else version
    checkpoints = [int(m[1]) for n in names if (m := CHECKPOINT.match(n)) and int(m[1]) <= latest]
    start = max(checkpoints) + 1 if checkpoints else 0
    return sum(1 for v in commits if start <= v <= latest)


def _check(table: Path, gate: str, limit: Any, *args: str) -> tuple[int, str]:
    """`inspect TABLE --check gate=limit`: the exit code and output."""
    result = run("inspect", table, "--check", f"{gate}={limit}", *args)
    return result.exit_code, all_output(result)


def _assert_boundary(table: Path, gate: str, holds: Any, fails: Any, *args: str) -> None:
    """The gate holds at `holds` (exit 0) and fails at `fails` (exit 3, saying so)."""
    code, output = _check(table, gate, holds, *args)
    assert code == 0, output
    assert f"check {gate}: pass" in output
    code, output = _check(table, gate, fails, *args)
    assert code == 3, output
    assert f"check {gate}: FAIL" in output


# -- max-small-files ---------------------------------------------------------------------------


def test_max_small_files_counts_files_below_the_default_target(tmp_path: Path) -> None:
    table = _appends(tmp_path / "t")
    small = sum(1 for size in _sizes(table) if size < DEFAULT_TARGET_SIZE)
    assert small == len(ROWS_PER_APPEND)
    _assert_boundary(table, "max-small-files", small, small - 1)


def test_max_small_files_follows_delta_target_file_size(tmp_path: Path) -> None:
    table = _appends(tmp_path / "t")
    sizes = sorted(_sizes(table))
    target = sizes[2]  # two files are smaller, the file of exactly this size is not
    DeltaTable(str(table)).alter.set_table_properties({"delta.targetFileSize": str(target)})
    small = sum(1 for size in _sizes(table) if size < target)
    assert small == 2
    _assert_boundary(table, "max-small-files", small, small - 1)
    doc = json.loads(run("inspect", table, "--json").stdout)
    assert (doc["small_file_size"], doc["small_files"]) == (target, small)


def test_max_small_files_with_a_malformed_target_size_names_the_property(tmp_path: Path) -> None:
    table = _appends(tmp_path / "t", (10,))
    DeltaTable(str(table)).alter.set_table_properties({"delta.targetFileSize": "abc"})
    assert run("inspect", table).exit_code == 0  # the summary still shows
    code, output = _check(table, "max-small-files", 1)
    assert code == 2, output
    assert "delta.targetFileSize" in output


@pytest.mark.parametrize("name", ["table-with-dv-small", "basic-dv-with-checkpoint"])
def test_small_files_alike_from_json_actions_and_columns(name: str) -> None:
    """The two evaluations of the count agree with each other and with deltalake."""
    snapshot = load_snapshot(open_log(str(GOLDEN / name)))
    sizes = _sizes(GOLDEN / name)
    for threshold in (0, min(sizes), max(sizes), max(sizes) + 1):
        expected = sum(1 for size in sizes if size < threshold)
        assert count_small_files(snapshot, threshold, as_json=False) == expected
        if summed_as_json(snapshot):
            assert count_small_files(snapshot, threshold, as_json=True) == expected


# -- max-log-files -------------------------------------------------------------------------------


def test_max_log_files_counts_commits_since_the_last_checkpoint(tmp_path: Path) -> None:
    table = _appends(tmp_path / "t", (1, 1, 1, 1, 1))
    since = _commits_since_checkpoint(table)
    assert since == 5  # no checkpoint: every commit is replayed
    _assert_boundary(table, "max-log-files", since, since - 1)

    DeltaTable(str(table)).create_checkpoint()  # deltalake's own checkpoint, at version 4
    _appends(table, (1, 1))
    since = _commits_since_checkpoint(table)
    assert since == 2
    _assert_boundary(table, "max-log-files", since, since - 1)
    # Time travel: the position of that version, before the checkpoint.
    before = _commits_since_checkpoint(table, 3)
    assert before == 4
    _assert_boundary(table, "max-log-files", before, before - 1, "--version", "3")


def test_a_checkpoint_resets_max_log_files(tmp_path: Path) -> None:
    table = _appends(tmp_path / "t", (1, 1, 1))
    DeltaTable(str(table)).create_checkpoint()
    assert _commits_since_checkpoint(table) == 0
    code, output = _check(table, "max-log-files", 0)
    assert code == 0, output
    doc = json.loads(run("inspect", table, "--json").stdout)
    assert (doc["checkpoint_version"], doc["commits_since_checkpoint"]) == (2, 0)


def test_max_log_files_counts_from_the_checkpoint_a_reader_can_use(tmp_path: Path) -> None:
    """A newest checkpoint no reader can open does not count: the commits after the older,
    readable one are what a reader replays."""
    table = _appends(tmp_path / "t", (1, 1, 1))
    DeltaTable(str(table)).create_checkpoint()  # version 2
    _appends(table, (1, 1, 1))
    DeltaTable(str(table)).create_checkpoint()  # version 5, then made unreadable
    _appends(table, (1,))
    (newest,) = (table / "_delta_log").glob(f"{5:020d}.checkpoint*.parquet")
    newest.write_bytes(b"not parquet")
    doc = json.loads(run("inspect", table, "--json").stdout)
    assert (doc["version"], doc["checkpoint_version"], doc["commits_since_checkpoint"]) == (
        6,
        2,
        4,  # versions 3-6
    )


# -- min-avg-file-size ---------------------------------------------------------------------------


def test_min_avg_file_size_boundary_in_bytes_and_units(tmp_path: Path) -> None:
    table = _appends(tmp_path / "t")
    sizes = _sizes(table)
    average = sum(sizes) // len(sizes)
    _assert_boundary(table, "min-avg-file-size", average, average + 1)
    assert average > 1024
    _assert_boundary(table, "min-avg-file-size", "1KiB", "1GB")
    code, output = _check(table, "min-avg-file-size", "1.5gib")
    assert code == 3 and f"actual {average:,} B = " in output


def test_min_avg_file_size_holds_on_a_table_without_files(tmp_path: Path) -> None:
    DeltaTable.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]))
    doc = json.loads(
        run("inspect", tmp_path / "t", "--check", "min-avg-file-size=1GiB", "--json").stdout
    )
    assert doc["num_files"] == 0
    assert doc["checks"] == [
        {"name": "min-avg-file-size", "limit": 1024.0**3, "actual": 0.0, "passed": True}
    ]


@pytest.mark.parametrize(
    "text",
    [
        "min-avg-file-size=abc",
        "min-avg-file-size=-5",
        "min-avg-file-size=",
        "max-log-files=-1",
        "max-small-files=many",
    ],
)
def test_invalid_gate_limits_are_usage_errors(text: str) -> None:
    result = run("inspect", GOLDEN / "table-with-dv-small", "--check", text)
    assert result.exit_code == 2, all_output(result)
    assert text in result.stderr


# -- the JSON document ---------------------------------------------------------------------------


def test_json_lists_every_check_in_order(tmp_path: Path) -> None:
    table = _appends(tmp_path / "t")
    sizes = _sizes(table)
    average = sum(sizes) // len(sizes)
    since = _commits_since_checkpoint(table)
    result = run(
        "inspect",
        table,
        "--check",
        "max-small-files=3",
        "--check",
        f"max-log-files={since}",
        "--check",
        "min-avg-file-size=2KiB",
        "--check",
        "max-files=10",
        "--json",
    )
    assert result.exit_code == 3, all_output(result)
    doc = json.loads(result.stdout)
    assert doc["checks"] == [
        {"name": "max-small-files", "limit": 3.0, "actual": float(len(sizes)), "passed": False},
        {"name": "max-log-files", "limit": float(since), "actual": float(since), "passed": True},
        {
            "name": "min-avg-file-size",
            "limit": 2048.0,
            "actual": float(average),
            "passed": average >= 2048,
        },
        {"name": "max-files", "limit": 10.0, "actual": float(len(sizes)), "passed": True},
    ]
    assert (doc["avg_file_size"], doc["commits_since_checkpoint"]) == (average, since)
