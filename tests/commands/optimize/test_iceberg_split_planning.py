"""Iceberg compaction of files above the maximum size (`iceberg_binpack.split_group`): split
over several new files, as Iceberg Java's bin-pack splits them.

The planner on its own: every row of every file once, in order; a file of at most the split
size never cut; new files of at most the split size of input, as many as Java's
`expectedOutputFiles` for real target sizes, and as Spark's splits (the group's bytes over
the split size) where its 5 KiB split overhead counts. Then a compaction of a path table through
the arrow engine: the dry run's planned outputs are the files committed, the rows those
pyiceberg read before, at the starting sequence number. The comparison with Iceberg Spark's
`rewrite_data_files` is in tests/reference/test_iceberg_split_compaction.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

from dvtool.commands.optimize.iceberg_binpack import Sizes, split_group
from dvtool.commands.optimize.iceberg_rewrites import Slice, row_bytes
from dvtool.iceberg.live_files import live_files
from dvtool.iceberg.tables import open_iceberg
from tests.cli_helpers import run
from tests.iceberg.commit_tables import committed, new_path_table, rows, through_dvtool

GB = 1024**3


def _check_cover(files: Sequence[tuple[int, int]], outputs: list[tuple[Slice, ...]]) -> None:
    """Every row of every file in exactly one output, in order."""
    flat = [s for output in outputs for s in output]
    position = dict.fromkeys(range(len(files)), 0)
    order = []
    for s in flat:
        assert s.start == position[s.index] and s.stop > s.start
        position[s.index] = s.stop
        order.append(s.index)
    assert position == {n: records for n, (_, records) in enumerate(files)}
    assert order == sorted(order)


def _bytes(files: Sequence[tuple[int, int]], output: tuple[Slice, ...]) -> int:
    return sum(row_bytes(*files[s.index], s.start, s.stop) for s in output)


@pytest.mark.parametrize("size", [int(2.5 * GB), int(10.1 * GB), int(10.8 * GB), 37 * GB])
def test_a_large_file_becomes_javas_expected_output_files(size: int) -> None:
    sizes = Sizes(GB)
    files = [(size, 10_000_000)]
    split = sizes.split_size(size)
    outputs = split_group(files, split)
    _check_cover(files, outputs)
    assert len(outputs) == sizes.expected_output_files(size)
    assert all(_bytes(files, o) <= split for o in outputs)
    assert all(_bytes(files, o) > split - size // 10_000_000 for o in outputs[:-1])


@pytest.mark.parametrize(("target", "size"), [(10_000, 100_000), (32_768, 400_000)])
def test_with_a_small_target_the_split_overhead_counts_as_in_spark(target: int, size: int) -> None:
    """Spark reads a group in splits of the split size (the expected files' share plus
    5 KiB): with a target of a few KB, fewer, fuller files than `expectedOutputFiles`."""
    sizes = Sizes(target)
    split = sizes.split_size(size)
    outputs = split_group([(size, 5_000)], split)
    assert len(outputs) == math.ceil(size / split) < sizes.expected_output_files(size)


def test_small_files_go_whole_and_large_ones_are_cut() -> None:
    split = 1000
    files = [(300, 3), (5000, 50), (400, 4), (700, 7), (2500, 1), (100, 10)]
    outputs = split_group(files, split)
    _check_cover(files, outputs)
    cut = {s.index for o in outputs for s in o if (s.start, s.stop) != (0, files[s.index][1])}
    assert cut == {1}  # a single row above the split stays whole, in a file of its own
    assert [o for o in outputs if any(s.index == 4 for s in o)] == [(Slice(4, 0, 1),)]
    assert all(_bytes(files, o) <= split for o in outputs if o != (Slice(4, 0, 1),))
    assert outputs[0] == (Slice(0, 0, 3), Slice(1, 0, 7))  # the cut file fills the first


def _table(folder: Path) -> tuple[str, int]:
    """One large file (4000 rows) and five small ones; the large file's size."""
    table = through_dvtool(new_path_table(str(folder), 2))
    table.append(rows(0, 4000))
    for n in range(5):
        table.append(rows(4000 + n * 10, 4010 + n * 10))
    big = max(f.entry.file_size_in_bytes for f in live_files(committed(table)).data)
    return committed(table).metadata_location, big


def test_a_compaction_splits_a_large_file_as_planned(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    location, big = _table(folder)
    before = StaticTable.from_metadata(location).scan().to_arrow().sort_by("id")
    starting = open_iceberg(str(folder)).metadata.current_snapshot()
    assert starting is not None
    target = str(big // 4)
    dry = json.loads(run("optimize", folder, "--dry-run", "--target-size", target, "--json").stdout)
    outputs = [o for b in dry["bins"] for o in b["outputs"]]
    assert sum(len(b["files"]) for b in dry["bins"]) == 6 and len(outputs) >= 4
    assert sum(o["rows"] for o in outputs) == before.num_rows
    # The large file's rows run over several new files, all in one bin.
    (split,) = [b for b in dry["bins"] if len(b["outputs"]) > 1]
    assert len(split["outputs"]) >= 3
    doc = json.loads(run("optimize", folder, "--target-size", target, "--json").stdout)
    assert doc["metrics"]["addedDataFiles"] == len(outputs)
    after = open_iceberg(str(folder))
    data = live_files(after).data
    assert sorted(f.entry.record_count for f in data) == sorted(o["rows"] for o in outputs)
    assert {f.entry.data_sequence_number for f in data} == {starting.sequence_number}
    read = StaticTable.from_metadata(after.metadata_location).scan().to_arrow().sort_by("id")
    assert read.equals(before)
