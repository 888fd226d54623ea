"""`optimize --where` and `--batch-size` on Iceberg tables: purge and compaction of the data
files whose column metrics may hold a matching row (Iceberg Spark's
`rewrite_data_files(where => ...)`), committed in batches (`partial-progress`), on small path
tables pyiceberg appended to and dvtool deleted from (merge-on-read).

pyiceberg and DuckDB read the same rows before and after; the files the metrics rule out
keep their path and their delete files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import dvtool
from dvtool.iceberg.live_files import Deleted, DeletedBefore, LiveDataFile, LiveFiles, live_files
from dvtool.iceberg.tables import open_iceberg
from tests import iceberg_oracles
from tests.cli_helpers import all_output, run
from tests.iceberg.commit_tables import committed, new_path_table, rows, through_dvtool

MOR = {"write.delete.mode": "merge-on-read"}


def _table(folder: Path, files: int) -> None:
    """`files` data files of ten ids each (file n holds ids 10n..10n+9)."""
    table = through_dvtool(new_path_table(str(folder), 2, properties=MOR))
    for n in range(files):
        table.append(rows(n * 10, n * 10 + 10))
    committed(table)


def _ids(folder: Path) -> list[int]:
    location = open_iceberg(str(folder)).metadata_location
    found = {
        oracle: sorted(r["id"] for r in iceberg_oracles.oracle_rows(oracle, location))
        for oracle in ("pyiceberg", "duckdb")
    }
    assert found["pyiceberg"] == found["duckdb"], found
    return found["pyiceberg"]


def run_cli_json(*args: str | Path) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == 0, all_output(result)
    doc: dict[str, Any] = json.loads(result.output)
    return doc


def _first_ids(live: LiveFiles) -> dict[int, str]:
    """Each data file by the lowest id its metrics give."""
    return {int.from_bytes(f.record.lower_bounds[1], "little"): f.path for f in live.data}


def test_purge_where_rewrites_only_the_files_it_may_match(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    _table(folder, 6)
    dvtool.delete(folder, "id % 10 = 3")
    expected = [i for i in range(60) if i % 10 != 3]
    assert _ids(folder) == expected
    before = live_files(open_iceberg(str(folder)))
    assert len(before.deletes) == 6  # one position delete file per data file

    result = dvtool.optimize(folder, purge=True, where="id >= 30")
    assert result.metrics["rewrittenDataFiles"] == 3
    assert _ids(folder) == expected
    after = live_files(open_iceberg(str(folder)))
    kept = {low: path for low, path in _first_ids(before).items() if low < 30}
    assert {low: p for low, p in _first_ids(after).items() if low < 30} == kept
    assert len(after.deletes) == 3  # the three files below id 30 keep theirs
    assert all(
        after.index.for_data_file(f.entry).files() for f in after.data if f.path in kept.values()
    )


def test_compaction_where_packs_only_the_chosen_files(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    _table(folder, 7)
    result = dvtool.optimize(folder, where="id < 50")
    assert result.metrics["rewrittenDataFiles"] == 5  # Java's min-input-files: 5
    assert _ids(folder) == list(range(70))
    lows = sorted(_first_ids(live_files(open_iceberg(str(folder)))))
    assert lows == [0, 50, 60]  # one new file of ids 0..49, the two others untouched


def test_purge_in_batches_commits_a_snapshot_per_batch(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    _table(folder, 5)
    dvtool.delete(folder, "id % 10 = 3")
    expected = [i for i in range(50) if i % 10 != 3]
    result = run_cli_json("optimize", folder, "--purge", "--batch-size", "2")
    assert len(result["snapshot_ids"]) == 3 and result["snapshot_id"] == result["snapshot_ids"][-1]
    assert result["metrics"]["rewrittenDataFiles"] == 5
    assert result["metrics"]["removedDeleteFiles"] == 5
    table = open_iceberg(str(folder))
    parents = {s.snapshot_id: s.parent_snapshot_id for s in table.metadata.snapshots}
    first, second, third = result["snapshot_ids"]
    assert parents[second] == first and parents[third] == second  # one batch on the other
    assert _ids(folder) == expected
    assert not live_files(table).deletes


def test_compaction_in_batches_never_packs_its_own_output(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    _table(folder, 12)
    small = ("--target-size", "3KB")  # bins of four of the ~1 KB files
    planned = run_cli_json("optimize", folder, *small, "--dry-run")["bins"]
    assert len(planned) == 3
    result = run_cli_json("optimize", folder, *small, "--batch-size", "1")
    assert len(result["snapshot_ids"]) == 3
    assert result["metrics"]["rewrittenDataFiles"] == 12
    assert result["metrics"]["addedDataFiles"] == 3  # the new small files were not packed again
    assert len(live_files(open_iceberg(str(folder))).data) == 3
    assert _ids(folder) == list(range(120))


def test_purge_in_batches_reads_each_files_deletes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch reads the deletes of the files it rewrites, not of every file left: a run in
    batches reads each file's deletes once (planning each batch over every remaining
    file's deletes made it quadratic in the number of files)."""
    folder = tmp_path / "t"
    _table(folder, 5)
    dvtool.delete(folder, "id % 10 = 3")
    loaded = _spy_on_loads(monkeypatch)
    result = run_cli_json("optimize", folder, "--purge", "--batch-size", "2")
    assert len(result["snapshot_ids"]) == 3 and result["metrics"]["rewrittenDataFiles"] == 5
    assert len(loaded) == len(set(loaded)) == 5
    assert _ids(folder) == [i for i in range(50) if i % 10 != 3]


def test_compaction_in_batches_reads_each_files_deletes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "t"
    _table(folder, 12)
    dvtool.delete(folder, "id % 10 = 3")
    loaded = _spy_on_loads(monkeypatch)
    result = run_cli_json("optimize", folder, "--target-size", "3KB", "--batch-size", "1")
    assert len(result["snapshot_ids"]) == 3 and result["metrics"]["rewrittenDataFiles"] == 12
    assert len(loaded) == len(set(loaded)) == 12
    assert _ids(folder) == [i for i in range(120) if i % 10 != 3]


def _spy_on_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The data files whose deletes `DeletedBefore.load` reads from now on."""
    loaded: list[str] = []
    real = DeletedBefore.load

    def spy(self: DeletedBefore, files: Sequence[LiveDataFile]) -> list[Deleted]:
        loaded.extend(f.path for f in files)
        return real(self, files)

    monkeypatch.setattr(DeletedBefore, "load", spy)
    return loaded
