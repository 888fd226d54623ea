"""`dvtool optimize` racing other writers (the OptimizeConflict scenario).

The purge (or compaction) is paused between its rewrite and its commit: `ArrowEngine.rewrite`
is wrapped so that, once the new files are written, another writer commits first. A
concurrent delete that adds a DV to one of the inputs must make the optimize fail with
CommitConflictError (exit 1, "nothing committed, run again") or re-plan, never commit: its
new file would bring the concurrently deleted rows back. Either way the rows the delete
removed stay deleted (checked with polars, deltalake and the raw reader), the files the
abandoned attempt wrote are gone, and a rerun leaves no DVs and the same rows. A concurrent
blind append, or a delete on a file the optimize does not rewrite, does not conflict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.cli import cli
from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.enable import run_enable
from dvtool.commands.optimize.command import OptimizeRequest, OptimizeResult, run_optimize
from dvtool.data_files import WrittenFile
from dvtool.delta.log.reader import open_log
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import RewriteBin
from dvtool.errors import CommitConflictError
from tests.oracles import canon, commit_actions, commit_versions, raw_rows, replay_json

Row = dict[str, Any]
ROWS_PER_FILE = 20


# -- a table and its readers -----------------------------------------------------------------


def make_table(path: Path, files: int = 4, partitioned: bool = False) -> list[Row]:
    """`files` appends of ids `k*20 .. k*20+19`; DVs on; `id % 5 = 0` deleted (a DV per file)."""
    rows: list[Row] = []
    for k in range(files):
        ids = range(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE)
        chunk = [{"id": i, "v": f"v{i}", "part": "ab"[k % 2]} for i in ids]
        write_deltalake(
            str(path),
            pa.Table.from_pylist(chunk),
            mode="append",
            partition_by=["part"] if partitioned else None,
        )
        rows += chunk
    assert run_enable(open_log(str(path))).changed
    delete(path, "id % 5 = 0")
    return [r for r in rows if r["id"] % 5]


def delete(path: Path, where: str) -> int:
    result = run_delete(open_log(str(path)), DeleteRequest(where))
    assert result.version is not None and result.mode == "dv", where
    return result.version


def optimize(path: Path, **request: Any) -> OptimizeResult:
    return run_optimize(open_log(str(path)), OptimizeRequest(**request), lambda _: ArrowEngine())


def assert_rows(path: Path, expected: Sequence[Row]) -> None:
    want = canon(expected)
    assert canon(pl.read_delta(str(path)).to_dicts()) == want, "polars"
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t")
    assert canon(pa.table(result.read_all()).to_pylist()) == want, "deltalake"
    assert canon(raw_rows(path)) == want, "raw parquet + DVs"


def live_dvs(path: Path) -> int:
    return sum(1 for add in replay_json(path)[1].values() if add.get("deletionVector"))


def data_files_on_disk(path: Path) -> set[Path]:
    return {p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts}


def first_id(location: str) -> int:
    """The smallest id in a data file, read with pyarrow (ids are contiguous per file)."""
    return int(pq.read_table(location.removeprefix("file://"), columns=["id"])["id"][0].as_py())


# -- pausing the optimize between rewrite and commit -----------------------------------------


class Paused:
    """Wraps ArrowEngine.rewrite: after the first rewrite returns, runs `concurrent(bins)`."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, concurrent: Callable[[Sequence[RewriteBin]], None]
    ) -> None:
        self.concurrent = concurrent
        self.written: list[list[WrittenFile | None]] = []
        self.bins: list[Sequence[RewriteBin]] = []
        original = ArrowEngine.rewrite
        paused = self

        def rewrite(
            self: ArrowEngine, table: Any, configuration: Any, bins: Any, *rest: Any
        ) -> Any:
            written = original(self, table, configuration, bins, *rest)
            paused.written.append(written)
            paused.bins.append(bins)
            if len(paused.written) == 1:
                for w in written:
                    assert w is not None and Path(w.location.removeprefix("file://")).exists()
                paused.concurrent(bins)
            return written

        monkeypatch.setattr(ArrowEngine, "rewrite", rewrite)

    def first_attempt_files(self) -> list[Path]:
        return [Path(w.location.removeprefix("file://")) for w in self.written[0] if w]


def delete_in_input(path: Path, bins: Sequence[RewriteBin], index: int = 0) -> list[int]:
    """A concurrent delete of one live row of the first input of bin `index`."""
    start = first_id(bins[index].inputs[0].location)
    victim = start + 1  # `id % 5 = 0` already deleted `start`
    delete(path, f"id = {victim}")
    return [victim]


def assert_abandoned_attempt_cleaned(table: Path, paused: Paused, before: set[Path]) -> None:
    written = paused.first_attempt_files()
    assert written, "the first attempt wrote files"
    for location in written:
        assert not location.exists(), f"{location} of the abandoned attempt was left behind"
    live = {table / unquote(p) for p, _ in replay_json(table)[1]}
    orphans = data_files_on_disk(table) - before - live
    assert orphans == set(), orphans
    # No commit ever referenced them.
    names = {p.name for p in written}
    for version in commit_versions(table):
        for action in commit_actions(table, version):
            for kind in ("add", "remove"):
                if kind in action:
                    assert Path(unquote(action[kind]["path"])).name not in names


# -- the scenario ----------------------------------------------------------------------------


@pytest.mark.parametrize("purge", [True, False], ids=["purge", "compaction"])
def test_concurrent_delete_on_an_input_keeps_its_rows_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, purge: bool
) -> None:
    table = tmp_path / "t"
    expected = make_table(table)
    read_version = commit_versions(table)[-1]
    before_files = data_files_on_disk(table)
    concurrently: list[int] = []
    paused = Paused(monkeypatch, lambda bins: concurrently.extend(delete_in_input(table, bins)))

    try:
        result: OptimizeResult | None = optimize(table, purge=purge)
    except CommitConflictError as e:
        result = None
        text = str(e)
        assert "did not commit" in text and "run the command again" in text
    assert len(concurrently) == 1
    expected_after = [r for r in expected if r["id"] not in concurrently]
    assert_abandoned_attempt_cleaned(table, paused, before_files)
    if result is None:
        # Failed: only the concurrent delete committed.
        assert commit_versions(table)[-1] == read_version + 1
        assert commit_actions(table, read_version + 1)[0]["commitInfo"]["operation"] == "DELETE"
        assert_rows(table, expected_after)
        result = optimize(table, purge=purge)  # the rerun
        assert result.versions == [read_version + 2]
    else:
        # Re-planned from the new snapshot.
        assert result.read_version == read_version + 1
    assert live_dvs(table) == 0
    assert_rows(table, expected_after)


def test_cli_conflict_exits_1_and_says_nothing_was_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    expected = make_table(table)
    read_version = commit_versions(table)[-1]
    before_files = data_files_on_disk(table)
    concurrently: list[int] = []
    paused = Paused(monkeypatch, lambda bins: concurrently.extend(delete_in_input(table, bins, 2)))

    result = CliRunner().invoke(cli, ["optimize", str(table), "--purge", "--engine", "arrow"])

    expected = [r for r in expected if r["id"] not in concurrently]
    if result.exit_code == CommitConflictError.exit_code:
        assert "did not commit" in result.output
        assert "Nothing" in result.output and "run the command again" in result.output
        assert "Traceback" not in result.output
        assert commit_versions(table)[-1] == read_version + 1
        rerun = CliRunner().invoke(cli, ["optimize", str(table), "--purge", "--engine", "arrow"])
        assert rerun.exit_code == 0, rerun.output
    else:
        assert result.exit_code == 0, result.output
    assert_abandoned_attempt_cleaned(table, paused, before_files)
    assert live_dvs(table) == 0
    assert_rows(table, expected)


def test_concurrent_blind_append_does_not_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    expected = make_table(table)
    read_version = commit_versions(table)[-1]
    extra = [{"id": 1000 + i, "v": f"new{i}", "part": "c"} for i in range(3)]

    def blind_append(bins: Sequence[RewriteBin]) -> None:
        write_deltalake(str(table), pa.Table.from_pylist(extra), mode="append")

    paused = Paused(monkeypatch, blind_append)
    result = optimize(table, purge=True)

    assert len(paused.written) == 1, "no re-plan: the first rewrite was committed"
    assert result.read_version == read_version
    assert result.versions == [read_version + 2]
    info = commit_actions(table, read_version + 2)[0]["commitInfo"]
    assert info["operation"] == "REORG"
    assert info["readVersion"] == read_version
    for location in paused.first_attempt_files():
        assert location.exists()
    assert live_dvs(table) == 0
    assert_rows(table, expected + extra)


def test_concurrent_delete_on_another_file_does_not_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The purge rewrites only the files at or above the ratio; a delete adding a DV to a
    file it does not touch commits first, and both commits stand."""
    table = tmp_path / "t"
    expected = make_table(table)
    delete(table, "id IN (21, 22, 23)")  # file 2 (ids 20-39): 7/20 deleted; others 4/20
    expected = [r for r in expected if r["id"] not in (21, 22, 23)]
    read_version = commit_versions(table)[-1]

    def delete_elsewhere(bins: Sequence[RewriteBin]) -> None:
        assert [first_id(i.location) for b in bins for i in b.inputs] == [20]
        delete(table, "id = 61")

    Paused(monkeypatch, delete_elsewhere)
    result = optimize(table, purge=True, min_deleted_ratio=0.3)

    assert result.versions == [read_version + 2]
    expected = [r for r in expected if r["id"] != 61]
    assert_rows(table, expected)
    assert live_dvs(table) == 3  # files 0, 1 and 3 keep their DVs (file 3 the new one)


def test_conflict_in_a_later_batch_keeps_earlier_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --batch-size 2 the first batch commits; the delete then hits an input of the
    second batch, which must not commit; a rerun purges the rest."""
    table = tmp_path / "t"
    expected = make_table(table)
    read_version = commit_versions(table)[-1]
    before_files = data_files_on_disk(table)
    concurrently: list[int] = []
    original = ArrowEngine.rewrite
    calls: list[list[WrittenFile | None]] = []

    def rewrite(self: ArrowEngine, table_: Any, configuration: Any, bins: Any, *rest: Any) -> Any:
        written = original(self, table_, configuration, bins, *rest)
        calls.append(written)
        if len(calls) == 2:  # the first batch is committed by now
            concurrently.extend(delete_in_input(table, bins))
        return written

    monkeypatch.setattr(ArrowEngine, "rewrite", rewrite)
    try:
        result: OptimizeResult | None = optimize(table, purge=True, batch_size=2)
    except CommitConflictError as e:
        result = None
        assert "did not commit" in str(e)
    expected = [r for r in expected if r["id"] not in concurrently]
    assert commit_actions(table, read_version + 1)[0]["commitInfo"]["operation"] == "REORG"
    for w in calls[1]:
        assert w is not None
        assert not Path(w.location.removeprefix("file://")).exists()
    if result is None:
        assert commit_versions(table)[-1] == read_version + 2  # batch 1, then the delete
        assert live_dvs(table) == 2
        assert_rows(table, expected)
        optimize(table, purge=True)
    live = {table / unquote(p) for p, _ in replay_json(table)[1]}
    committed = {Path(w.location.removeprefix("file://")) for w in calls[0] if w}
    assert committed <= live
    assert data_files_on_disk(table) - before_files - live == set()
    assert live_dvs(table) == 0
    assert_rows(table, expected)


def test_delete_planned_before_a_purge_commits_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order: a delete scans, then a purge commits, then the delete commits. The
    purge removed the files the delete read, so the delete must re-plan on the new files;
    committing its DVs against the old paths would bring the purged files (and their
    deleted rows) back."""
    table = tmp_path / "t"
    expected = make_table(table)
    read_version = commit_versions(table)[-1]
    original = ArrowEngine.find_matches
    purged: list[OptimizeResult] = []

    def find_matches(self: ArrowEngine, *args: Any, **kwargs: Any) -> Any:
        matches = original(self, *args, **kwargs)
        if not purged:
            purged.append(optimize(table, purge=True))
        return matches

    monkeypatch.setattr(ArrowEngine, "find_matches", find_matches)
    result = run_delete(open_log(str(table)), DeleteRequest("id % 10 = 3"))

    assert purged[0].versions == [read_version + 1]
    assert result.version == read_version + 2
    assert result.attempts >= 2
    expected = [r for r in expected if r["id"] % 10 != 3]
    assert_rows(table, expected)
    live = replay_json(table)[1]
    removed_by_purge = {
        unquote(a["remove"]["path"])
        for a in commit_actions(table, read_version + 1)
        if "remove" in a
    }
    assert not removed_by_purge & {p for p, _ in live}, "a purged file came back"
    assert live_dvs(table) == len(live)  # the delete put DVs on the purged files
