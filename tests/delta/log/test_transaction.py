"""The one commit path (dvtool.delta.log.transaction): which written files it deletes, when it plans
again, and what a signal does before, inside and after the put.

Tables are written by deltalake; after each case deltalake and polars read the table, and a
commit that the transaction reports is the one the log holds.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path
from typing import Any

import deltalake
import polars as pl
import pytest

from dvtool import interrupts
from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.transaction import Prepared, Written, commit_transaction
from dvtool.delta.protocol.conflicts import ReadSet
from dvtool.errors import CommitConflictError, StorageError
from dvtool.storage.table_storage import Storage
from tests.delta.log.test_writer import make_table, readd_actions


def _orphan(log: DeltaLog, written: Written, name: str) -> str:
    """Write a file as a command writes one for its commit, and record it."""
    location = log.storage.join(f"{name}-{uuid.uuid4().hex}.bin")
    log.storage.write(location, b"written for the commit")
    written.add([location])
    return location


def _readd(written_files: list[str], log: DeltaLog) -> Any:
    def prepare(snapshot: Snapshot, written: Written) -> Prepared[None]:
        written_files.append(_orphan(log, written, "w"))
        actions = readd_actions(snapshot, str(uuid.uuid4()))
        return Prepared(None, actions, ReadSet.for_actions(snapshot.version, actions))

    return prepare


def _exists(location: str) -> bool:
    return os.path.exists(location)


def _versions(root: Path) -> int:
    return int(deltalake.DeltaTable(str(root)).version())


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return make_table(tmp_path / "t", writes=2)


@pytest.fixture
def scope() -> Any:
    with interrupts.command_scope():
        yield


def test_files_of_a_landed_commit_stay(table: Path) -> None:
    files: list[str] = []
    outcome = commit_transaction(open_log(str(table)), _readd(files, open_log(str(table))))
    assert outcome.commit is not None and outcome.commit.version == 2 == _versions(table)
    assert all(_exists(f) for f in files)


def test_a_failing_plan_deletes_what_it_wrote(table: Path) -> None:
    log = open_log(str(table))
    files: list[str] = []

    def prepare(snapshot: Snapshot, written: Written) -> Prepared[None]:
        files.append(_orphan(log, written, "w"))
        raise StorageError("the scan failed")

    with pytest.raises(StorageError):
        commit_transaction(log, prepare)
    assert files and not any(_exists(f) for f in files)
    assert _versions(table) == 1


def test_a_conflict_deletes_the_attempts_files_and_plans_again(table: Path) -> None:
    log = open_log(str(table))
    files: list[str] = []
    plans: list[int] = []

    def prepare(snapshot: Snapshot, written: Written) -> Prepared[None]:
        plans.append(snapshot.version)
        files.append(_orphan(log, written, "w"))
        actions = readd_actions(snapshot, str(uuid.uuid4()))
        read_set = ReadSet.for_actions(snapshot.version, actions, read_whole_table=True)
        if len(plans) == 1:  # another writer appends before our first put
            deltalake.write_deltalake(
                str(table), pl.read_delta(str(table)).to_arrow(), mode="append"
            )
        return Prepared(None, actions, read_set)

    outcome = commit_transaction(log, prepare)
    assert plans == [1, 2] and outcome.plans == 2
    assert not _exists(files[0]) and _exists(files[1])
    assert outcome.commit is not None and outcome.commit.version == 3 == _versions(table)


def test_the_last_conflict_is_final(table: Path) -> None:
    log = open_log(str(table))

    def prepare(snapshot: Snapshot, written: Written) -> Prepared[None]:
        actions = readd_actions(snapshot, str(uuid.uuid4()))
        read_set = ReadSet.for_actions(snapshot.version, actions, read_whole_table=True)
        deltalake.write_deltalake(str(table), pl.read_delta(str(table)).to_arrow(), mode="append")
        return Prepared(None, actions, read_set)

    with pytest.raises(CommitConflictError, match="again"):
        commit_transaction(
            log,
            prepare,
            plans=2,
            on_conflict=lambda e: CommitConflictError(f"{e.message}; run it again"),
        )


def _interrupt_in_put(monkeypatch: pytest.MonkeyPatch, *, after_create: bool) -> None:
    """The put raises KeyboardInterrupt, before or after creating the commit file (as a
    signal would where none can be held: another thread than the main one)."""
    real = Storage.put_if_absent

    def put(self: Storage, location: str, data: bytes) -> bool:
        if after_create:
            real(self, location, data)
        raise KeyboardInterrupt()

    monkeypatch.setattr(Storage, "put_if_absent", put)


@pytest.mark.usefixtures("scope")
def test_an_interrupt_inside_a_put_that_landed_reports_the_commit(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupt_in_put(monkeypatch, after_create=True)
    files: list[str] = []
    outcome = commit_transaction(open_log(str(table)), _readd(files, open_log(str(table))))
    assert outcome.commit is not None and outcome.commit.recovered
    assert outcome.commit.version == 2 == _versions(table)
    assert all(_exists(f) for f in files)
    assert interrupts.received() == signal.SIGINT  # held: the command ends, exit 0


@pytest.mark.usefixtures("scope")
def test_an_interrupt_inside_a_put_that_did_not_land_keeps_the_files(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing proves the put will not land later (an object store may still apply it), so
    the files it names stay for vacuum."""
    _interrupt_in_put(monkeypatch, after_create=False)
    files: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        commit_transaction(open_log(str(table)), _readd(files, open_log(str(table))))
    assert _versions(table) == 1
    assert files and all(_exists(f) for f in files)


@pytest.mark.usefixtures("scope")
def test_a_signal_during_the_put_skips_the_checkpoint_and_reports_it(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", config={"delta.checkpointInterval": "1"})
    log = open_log(str(root))
    real = log.storage.put_if_absent

    def put(location: str, data: bytes) -> bool:
        created = real(location, data)
        os.kill(os.getpid(), signal.SIGTERM)  # handled, and held, at the next instruction
        return created

    log.storage.put_if_absent = put  # type: ignore[method-assign]
    outcome = commit_transaction(log, _readd([], log))
    assert outcome.commit is not None and outcome.commit.version == 1 == _versions(root)
    assert outcome.commit.checkpoint is None
    warning = outcome.commit.checkpoint_warning or ""
    assert "checkpoint of version 1" in warning and "SIGTERM" in warning
    assert "dvtool checkpoint TABLE" in warning
    assert not list((root / "_delta_log").glob("*.checkpoint.parquet"))
    assert pl.read_delta(str(root)).height == 12
    # The next transaction of the command does not start: the signal stops it.
    with pytest.raises(interrupts.Terminated):
        commit_transaction(log, _readd([], log))
    assert _versions(root) == 1


@pytest.mark.usefixtures("scope")
def test_a_signal_inside_the_checkpoint_hook_leaves_a_readable_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_table(tmp_path / "t", config={"delta.checkpointInterval": "1"})
    log = open_log(str(root))
    real = log.storage.write

    def write(location: str, data: bytes) -> None:
        real(location, data)
        if location.endswith(".checkpoint.parquet"):
            os.kill(os.getpid(), signal.SIGINT)  # raised at the next instruction
            for _ in range(1000):
                pass

    log.storage.write = write  # type: ignore[method-assign]
    outcome = commit_transaction(log, _readd([], log))
    assert outcome.commit is not None and outcome.commit.version == 1
    assert "SIGINT" in (outcome.commit.checkpoint_warning or "")
    assert pl.read_delta(str(root)).height == 12
    assert deltalake.DeltaTable(str(root)).to_pyarrow_table().num_rows == 12
