"""Iceberg compaction planning (`iceberg_binpack`) and the `optimize` refusals on Iceberg.

Java's size arithmetic (`SizeBasedFileRewritePlanner.expectedOutputFiles`, `inputSplitSize`)
on the examples of its documentation, and a compaction of small files pyiceberg appended:
one file with the same rows as pyiceberg reads them, at the starting snapshot's sequence
number. The Spark comparisons are in tests/reference/test_iceberg_rewrites.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

from dvtool.commands.optimize.iceberg import IcebergOptimizeRequest, run_optimize_iceberg
from dvtool.commands.optimize.iceberg_binpack import Sizes
from dvtool.iceberg.live_files import live_files
from dvtool.iceberg.tables import open_iceberg
from tests.cli_helpers import all_output, run
from tests.iceberg.commit_tables import committed, new_path_table, rows, through_dvtool

GB = 1024**3


@pytest.mark.parametrize(
    ("size", "files"),
    [
        (GB // 2, 1),  # below the target
        (int(10.1 * GB), 10),  # the remainder (0.1 GB) is spread: 1.01 GB each
        (int(10.8 * GB), 11),  # a remainder above the minimum (0.75 GB) gets its own file
        (int(1.5 * GB), 2),  # 1.5 GB in one file would pass 110% of the target
    ],
)
def test_expected_output_files_as_java(size: int, files: int) -> None:
    assert Sizes(GB).expected_output_files(size) == files


def test_split_size_stays_between_target_and_write_maximum() -> None:
    sizes = Sizes(GB)
    assert sizes.split_size(GB // 2) == GB
    assert sizes.split_size(int(10.1 * GB)) == int(10.1 * GB) // 10 + 5 * 1024
    assert sizes.split_size(int(10.1 * GB)) <= sizes.write_maximum


def _small_files(folder: Path, count: int) -> str:
    table = through_dvtool(new_path_table(str(folder), 2))
    for n in range(count):
        table.append(rows(n * 10, n * 10 + 10))
    return committed(table).metadata_location


def test_compaction_of_small_files(tmp_path: Path) -> None:
    location = _small_files(tmp_path / "t", 6)
    before = StaticTable.from_metadata(location).scan().to_arrow().sort_by("id")
    table = open_iceberg(str(tmp_path / "t"))
    starting = table.metadata.current_snapshot()
    assert starting is not None
    result = run_optimize_iceberg(table, IcebergOptimizeRequest("compact"))
    assert result.snapshot_id is not None and result.metrics["rewrittenDataFiles"] == 6
    after = open_iceberg(str(tmp_path / "t"))
    data = live_files(after).data
    assert len(data) == 1 and data[0].entry.data_sequence_number == starting.sequence_number
    read = StaticTable.from_metadata(after.metadata_location).scan().to_arrow().sort_by("id")
    assert read.equals(before)
    again = run_optimize_iceberg(after, IcebergOptimizeRequest("compact"))
    assert again.snapshot_id is None


def test_the_engine_is_chosen_by_the_bytes_to_rewrite(tmp_path: Path) -> None:
    """As for a Delta table: `engine_for(bytes)` (`--engine`, `--spark-threshold`) decides,
    once, with the bytes the rewrite reads; the result names the engine."""
    from dvtool.engines.arrow import ArrowEngine

    _small_files(tmp_path / "t", 6)
    asked: list[int] = []

    def engine_for(size: int) -> ArrowEngine:
        asked.append(size)
        return ArrowEngine()

    table = open_iceberg(str(tmp_path / "t"))
    planned = sum(f.entry.file_size_in_bytes for f in live_files(table).data)
    result = run_optimize_iceberg(table, IcebergOptimizeRequest("compact"), engine_for)
    assert asked == [planned] and result.engine == "arrow"
    doc = json.loads(run("optimize", tmp_path / "t", "--engine", "arrow", "--json").stdout)
    assert doc["snapshot_id"] is None and "engine" not in doc  # nothing left: none ran


def test_too_few_small_files_are_left_alone(tmp_path: Path) -> None:
    _small_files(tmp_path / "t", 4)
    result = run_optimize_iceberg(
        open_iceberg(str(tmp_path / "t")), IcebergOptimizeRequest("compact")
    )
    assert result.snapshot_id is None and result.bins == []


@pytest.mark.parametrize(
    "args",
    [
        ("--purge", "--rewrite-deletes"),
        ("--min-deleted-ratio", "0.5"),
        ("--purge", "--target-size", "1MB"),
        ("--convert-equality", "--where", "id > 1"),
        ("--rewrite-deletes", "--where", "no_such_column > 1"),
        ("--where", "no_such_column > 1"),
        ("--batch-size", "0"),
        ("--rewrite-deletes", "--batch-size", "2"),
        ("--purge", "--min-deleted-ratio", "2"),
    ],
)
def test_optimize_usage_errors_on_iceberg(tmp_path: Path, args: tuple[str, ...]) -> None:
    _small_files(tmp_path / "t", 1)
    metadata = sorted((tmp_path / "t" / "metadata").iterdir())
    result = run("optimize", tmp_path / "t", *args)
    assert result.exit_code == 2, all_output(result)
    assert len(all_output(result).strip().splitlines()) <= 2, all_output(result)
    assert sorted((tmp_path / "t" / "metadata").iterdir()) == metadata  # nothing written
