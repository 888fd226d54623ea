"""Commits through catalogs (`dvtool.iceberg.catalog_swap`) and around the swap: faults,
signals, lost answers.

SQL catalog tables are pyiceberg `SqlCatalog`s on SQLite (tests/iceberg/commit_tables.py):
v1/v2 commit through pyiceberg's `commit_table`, v3 through dvtool's own metadata file and
conditional row update. The REST catalog, which needs Iceberg's Java server, is in
tests/reference/test_iceberg_catalog_commit.py; here its error mapping is checked with the
exceptions pyiceberg raises.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ServerError
from pyiceberg.table.update import SetPropertiesUpdate

from dvtool import faults, interrupts
from dvtool.errors import CommitConflictError, CommitOutcomeUnknownError, StorageError
from dvtool.iceberg import catalog_swap
from dvtool.iceberg.catalog_commit import commit_updates, refresh
from dvtool.iceberg.tables import IcebergTable, open_iceberg
from tests import iceberg_oracles
from tests.iceberg.commit_tables import (
    committed,
    new_path_table,
    new_sql_table,
    rows,
    through_dvtool,
)


def set_properties(table: IcebergTable, **values: str) -> IcebergTable:
    return commit_updates(table, (), (SetPropertiesUpdate(updates=values),))


def metadata_names(table: IcebergTable) -> list[str]:
    folder = Path(table.metadata_location).parent
    return sorted(p.name for p in folder.glob("*.metadata.json"))


@pytest.fixture
def fault(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`fault("STEP:KIND")` arms dvtool's fault injection for this test only."""

    def arm(rule: str) -> None:
        monkeypatch.setattr(faults, "_parsed", ("", []))
        monkeypatch.setenv(faults.ENV, rule)

    yield arm
    interrupts.begin_library_call()  # forget a signal a test recorded


@pytest.mark.parametrize("version", [1, 2, 3])
def test_sql_catalog_commit(tmp_path: Path, version: int) -> None:
    table = new_sql_table(tmp_path, version)
    done = set_properties(table, owner="dvtool")
    loaded = table.catalog.load_table(table.name)  # type: ignore[union-attr]
    assert loaded.metadata_location == done.metadata_location
    assert loaded.metadata.properties["owner"] == "dvtool"
    assert loaded.metadata.format_version == version
    assert catalog_swap.catalog_version(done.metadata_location) == 1
    assert [e.metadata_file for e in loaded.metadata.metadata_log] == [table.metadata_location]
    assert refresh(table).metadata_location == done.metadata_location


@pytest.mark.parametrize("version", [1, 2])
def test_sql_catalog_appends(tmp_path: Path, version: int) -> None:
    table = through_dvtool(new_sql_table(tmp_path, version))
    table.append(rows(0, 6))
    table.append(rows(6, 9))
    done = committed(table)
    loaded = done.catalog.load_table(done.name)  # type: ignore[union-attr]
    for oracle in ("pyiceberg", "duckdb"):
        source = loaded if oracle == "pyiceberg" else loaded.metadata_location
        assert [r["id"] for r in iceberg_oracles.oracle_rows(oracle, source)] == list(range(9))


def race(*commits: Any) -> list[Any]:
    """Run the callables at once (a barrier), each in a thread: their results or
    CommitConflictErrors, in order."""
    start = threading.Barrier(len(commits))
    outcomes: list[Any] = [None] * len(commits)

    def run(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = commits[i]()
        except CommitConflictError as e:
            outcomes[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(commits))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_sql_v3_concurrent_committers_exactly_one_lands(tmp_path: Path) -> None:
    base = new_sql_table(tmp_path, 3)
    outcomes = race(
        lambda: set_properties(base, writer="a"), lambda: set_properties(base, writer="b")
    )
    landed = [o for o in outcomes if isinstance(o, IcebergTable)]
    assert len(landed) == 1 and sum(isinstance(o, CommitConflictError) for o in outcomes) == 1
    loaded = base.catalog.load_table(base.name)  # type: ignore[union-attr]
    assert loaded.metadata_location == landed[0].metadata_location
    assert loaded.metadata.properties["writer"] == landed[0].metadata.properties["writer"]
    assert len(metadata_names(base)) == 2  # the loser's file was deleted: it never landed


@pytest.mark.parametrize("kind", ["sql", "path"])
def test_concurrent_appends_exactly_one_lands(tmp_path: Path, kind: str) -> None:
    """Two pyiceberg appends on the same base (each requires main unchanged)."""
    base = new_sql_table(tmp_path, 2) if kind == "sql" else new_path_table(str(tmp_path / "t"), 2)
    writers = [through_dvtool(base), through_dvtool(base)]
    outcomes = race(lambda: writers[0].append(rows(0, 5)), lambda: writers[1].append(rows(5, 9)))
    conflicts = [isinstance(o, CommitConflictError) for o in outcomes]
    assert sorted(conflicts) == [False, True]
    winner = committed(writers[conflicts.index(False)])
    expected = list(range(0, 5)) if conflicts == [False, True] else list(range(5, 9))
    current = refresh(base)
    assert current.metadata_location == winner.metadata_location
    found = iceberg_oracles.duckdb_rows(current.metadata_location)
    assert [r["id"] for r in found] == expected


def test_sql_v3_stale_base_conflicts(tmp_path: Path) -> None:
    base = new_sql_table(tmp_path, 3)
    set_properties(base, a="1")
    with pytest.raises(CommitConflictError):
        set_properties(base, b="2")
    assert len(metadata_names(base)) == 2
    assert set_properties(refresh(base), b="2").metadata.properties["a"] == "1"


# -- faults and signals ------------------------------------------------------------------------


def test_path_put_failure_does_not_land(tmp_path: Path, fault: Any) -> None:
    table = new_path_table(str(tmp_path / "t"), 2)
    fault("commit:fail")
    with pytest.raises(StorageError) as failed:
        set_properties(table, a="1")
    assert not isinstance(failed.value, CommitOutcomeUnknownError)
    assert open_iceberg(str(tmp_path / "t")).metadata_location == table.metadata_location


def test_path_put_lost_answer_is_recovered(tmp_path: Path, fault: Any) -> None:
    table = new_path_table(str(tmp_path / "t"), 2)
    fault("commit:timeout")
    done = set_properties(table, a="1")
    assert open_iceberg(str(tmp_path / "t")).metadata_location == done.metadata_location


def test_path_hint_failure_leaves_the_commit(tmp_path: Path, fault: Any) -> None:
    table = new_path_table(str(tmp_path / "t"), 2)
    fault("write:fail")
    done = set_properties(table, a="1")
    assert (tmp_path / "t/metadata/version-hint.text").read_text() == "1"
    assert open_iceberg(str(tmp_path / "t")).metadata_location == done.metadata_location


@pytest.mark.parametrize("kind", ["sigint", "sigterm"])
def test_signal_during_the_put_is_held(tmp_path: Path, fault: Any, kind: str) -> None:
    table = new_path_table(str(tmp_path / "t"), 2)
    interrupts.begin_library_call()
    fault(f"commit:{kind}")
    done = set_properties(table, a="1")
    assert interrupts.received() == (signal.SIGINT if kind == "sigint" else signal.SIGTERM)
    assert open_iceberg(str(tmp_path / "t")).metadata_location == done.metadata_location


def test_signal_recorded_before_the_put_stops_it(tmp_path: Path) -> None:
    table = new_path_table(str(tmp_path / "t"), 2)
    interrupts.begin_library_call()
    interrupts.record(signal.SIGINT)
    try:
        with pytest.raises(KeyboardInterrupt):
            set_properties(table, a="1")
    finally:
        interrupts.begin_library_call()
    assert open_iceberg(str(tmp_path / "t")).metadata_location == table.metadata_location


def test_sql_swap_failure_deletes_our_file(tmp_path: Path, fault: Any) -> None:
    table = new_sql_table(tmp_path, 3)
    fault("commit:fail")
    with pytest.raises(StorageError) as failed:
        set_properties(table, a="1")
    assert not isinstance(failed.value, CommitOutcomeUnknownError)
    assert len(metadata_names(table)) == 1
    assert refresh(table).metadata_location == table.metadata_location


def test_sql_swap_lost_answer_is_recovered(tmp_path: Path, fault: Any) -> None:
    table = new_sql_table(tmp_path, 3)
    fault("commit:timeout")
    done = set_properties(table, a="1")
    assert refresh(table).metadata_location == done.metadata_location


def test_sql_metadata_written_then_failure(tmp_path: Path, fault: Any) -> None:
    table = new_sql_table(tmp_path, 3)
    fault("iceberg-metadata-written:fail")
    with pytest.raises(StorageError):
        set_properties(table, a="1")
    assert refresh(table).metadata_location == table.metadata_location
    assert len(metadata_names(table)) == 1  # the commit did not land: its file is deleted


def test_sql_v2_lost_answer_is_unknown(tmp_path: Path, fault: Any) -> None:
    """pyiceberg's commit_table names its file itself: a lost answer of a commit that adds
    no snapshot stays unknown (nothing identifies it in the table read back)."""
    table = new_sql_table(tmp_path, 2)
    fault("commit:timeout")
    with pytest.raises(CommitOutcomeUnknownError):
        set_properties(table, a="1")


def test_lost_answer_of_a_landed_snapshot_is_recovered(tmp_path: Path, fault: Any) -> None:
    """The table read back holds the snapshot the commit added: it landed."""
    table = new_sql_table(tmp_path, 2)
    fault("commit:timeout")
    writer = through_dvtool(table)
    writer.append(rows(0, 3))
    current = refresh(table)
    snapshot = current.metadata.current_snapshot()
    assert snapshot is not None and committed(writer).metadata_location == current.metadata_location
    assert [r["id"] for r in iceberg_oracles.duckdb_rows(current.metadata_location)] == [0, 1, 2]


def test_lost_answer_of_a_snapshot_not_in_the_table_stays_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot missing from the table read back does not prove the commit failed (the
    catalog may still apply it): unknown, and the commit's files are kept."""
    table = new_sql_table(tmp_path, 2)

    def lost(*args: Any) -> Any:
        raise ConnectionError("connection reset while reading the answer")

    monkeypatch.setattr(table.catalog, "commit_table", lost)
    before = set(tmp_path.rglob("*"))
    with pytest.raises(CommitOutcomeUnknownError):
        through_dvtool(table).append(rows(0, 3))
    assert refresh(table).metadata_location == table.metadata_location
    kept = set(tmp_path.rglob("*")) - before
    assert any(p.suffix == ".parquet" for p in kept), kept
    assert any(p.name.startswith("snap-") for p in kept), kept


# -- REST error mapping ------------------------------------------------------------------------


def rest_error(error: BaseException) -> Any:
    table = IcebergTable(None, "m", None, "db.t")  # type: ignore[arg-type]
    return catalog_swap._rest_outcome(table, error)


def test_rest_errors() -> None:
    assert isinstance(rest_error(CommitFailedException("409: ref changed")), CommitConflictError)
    unknown = (CommitStateUnknownException("500"), ServerError("502"), TimeoutError("read"))
    for error in unknown:
        assert isinstance(rest_error(error), CommitOutcomeUnknownError), error
    refused = requests.ConnectionError(
        requests.packages.urllib3.exceptions.NewConnectionError(None, "refused")  # type: ignore[attr-defined]
    )
    mapped = rest_error(refused)
    assert isinstance(mapped, StorageError) and not isinstance(mapped, CommitOutcomeUnknownError)
    reset = requests.ConnectionError("Connection aborted: reset by peer")
    assert isinstance(rest_error(reset), CommitOutcomeUnknownError)
    assert rest_error(ValueError("a bug")) is None


# -- a process killed at the put; a catalog that cannot take v3 --------------------------------

KILLED_COMMIT = """
import sys
from pyiceberg.table.update import SetPropertiesUpdate
from dvtool.iceberg.catalog_commit import commit_updates
from dvtool.iceberg.tables import open_iceberg
commit_updates(open_iceberg(sys.argv[1]), (), (SetPropertiesUpdate(updates={"a": "1"}),))
"""


def test_killed_right_after_the_put(tmp_path: Path) -> None:
    """SIGKILL after v2 was created, before the hint: v2 is the table (the hint lags and
    readers walk forward), and the next commit makes v3."""
    import os
    import subprocess
    import sys

    table = new_path_table(str(tmp_path / "t"), 2)
    env = {**os.environ, faults.ENV: "commit:kill"}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_COMMIT, str(tmp_path / "t")], env=env, check=False
    )
    assert done.returncode == -signal.SIGKILL
    assert (tmp_path / "t/metadata/version-hint.text").read_text() == "1"
    current = open_iceberg(str(tmp_path / "t"))
    assert current.metadata_location.endswith("v2.metadata.json")
    assert current.metadata.properties["a"] == "1"
    assert [r["id"] for r in iceberg_oracles.duckdb_rows(current.metadata_location)] == []
    assert set_properties(current, b="2").metadata_location.endswith("v3.metadata.json")
    assert table.metadata_location.endswith("v1.metadata.json")


def test_v3_in_another_catalog_is_refused(tmp_path: Path) -> None:
    from pyiceberg.catalog.noop import NoopCatalog

    from dvtool.errors import WriteRefusedError

    sql = new_sql_table(tmp_path, 3)
    other = IcebergTable(sql.metadata, sql.metadata_location, sql.io, sql.name, NoopCatalog("glue"))
    with pytest.raises(WriteRefusedError, match="format version 3"):
        set_properties(other, a="1")


# -- the atomic step itself, with the pre-checks passed as in a race ----------------------------


def test_put_if_absent_refuses_the_second_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both writers passed the "base is current" check: the put decides, and never
    overwrites the first writer's file."""
    from dvtool.iceberg import path_commit

    base = new_path_table(str(tmp_path / "t"), 2)
    monkeypatch.setattr(path_commit, "_require_current", lambda table, storage: None)
    monkeypatch.setattr(path_commit, "_require_free", lambda storage, folder, version: None)
    first = set_properties(base, writer="a")
    landed = (tmp_path / "t/metadata/v2.metadata.json").read_bytes()
    with pytest.raises(CommitConflictError, match="committed by another writer"):
        set_properties(base, writer="b")
    assert (tmp_path / "t/metadata/v2.metadata.json").read_bytes() == landed
    assert open_iceberg(str(tmp_path / "t")).metadata_location == first.metadata_location


def test_row_update_refuses_the_second_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both writers passed the "base is current" check: the conditional UPDATE decides; the
    loser's metadata file is deleted, the winner's row stays."""
    base = new_sql_table(tmp_path, 3)
    first = set_properties(base, writer="a")
    stale = type("Loaded", (), {"metadata_location": base.metadata_location})()
    real_load = catalog_swap._load
    calls = iter([stale])
    monkeypatch.setattr(catalog_swap, "_load", lambda t: next(calls, None) or real_load(t))
    with pytest.raises(CommitConflictError):
        set_properties(base, writer="b")
    assert refresh(base).metadata_location == first.metadata_location
    assert metadata_names(base) == sorted(
        Path(p).name for p in (base.metadata_location, first.metadata_location)
    )
