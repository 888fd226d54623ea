"""Durability of new data files: every file and directory entry a commit names is fsynced
before that commit is written, whether the writer syncs at once or through a
`BackgroundSync` (the arrow engine's rewrites).

fsyncs are observed by wrapping `os.fsync` (the path of each descriptor read from
/proc/self/fd, so these tests need Linux) and `publish.sync_entry`; the commit is observed
at the `commit-temp-written` fault step, reached when the commit's temp file is written and
not yet linked to its final name.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

import dvtool
from dvtool import faults
from dvtool.data_files import BackgroundSync, publish, write_data_file
from dvtool.delta.protocol.stats_collect import StatsCollector
from dvtool.errors import StorageError
from dvtool.storage.table_storage import Storage
from tests.oracles import commit_versions, replay_json

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="fsync paths are read from /proc/self/fd"
)

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def batch(first: int, count: int) -> pa.RecordBatch:
    ids = list(range(first, first + count))
    return pa.record_batch(
        [pa.array(ids, pa.int64()), pa.array([f"n{i}" for i in ids], pa.string())],
        schema=SCHEMA,
    )


def write(storage: Storage, partition_dir: str, sync: BackgroundSync | None = None) -> str:
    written = write_data_file(
        storage,
        partition_dir=partition_dir,
        batches=[batch(0, 10)],
        schema=SCHEMA,
        stats=StatsCollector(SCHEMA),
        sync=sync,
    )
    return written.location


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths `os.fsync` is called on, in order (from any thread)."""
    paths: list[str] = []
    lock = threading.Lock()
    real = os.fsync

    def spy(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        real(fd)
        with lock:
            paths.append(path)

    monkeypatch.setattr(os, "fsync", spy)
    yield paths


# -- writes that sync at once ---------------------------------------------------------------


def test_inline_write_fsyncs_the_file_then_the_new_directories(
    tmp_path: Path, fsynced: list[str]
) -> None:
    root = tmp_path / "t"
    root.mkdir()
    location = write(Storage.for_table(str(root)), "a=1/b=2")
    temp, *directories = fsynced
    assert Path(temp).parent == root / "a=1" / "b=2"  # the temp file, before its rename
    assert Path(temp).name.startswith(".tmp-") and not Path(temp).exists()
    # The file's directory, then the parent of each directory created for it.
    assert directories == [str(root / "a=1" / "b=2"), str(root / "a=1"), str(root)]
    assert pq.read_table(location).num_rows == 10


def test_inline_write_into_an_existing_directory_fsyncs_only_it(
    tmp_path: Path, fsynced: list[str]
) -> None:
    (tmp_path / "t" / "p=1").mkdir(parents=True)
    write(Storage.for_table(str(tmp_path / "t")), "p=1")
    assert fsynced[1:] == [str(tmp_path / "t" / "p=1")]


def test_failed_directory_fsync_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: str) -> None:
        raise OSError(errno.EIO, "injected", path)

    monkeypatch.setattr(publish, "fsync_directory", broken)
    root = tmp_path / "t"
    with pytest.raises(StorageError, match="cannot write the data file"):
        write(Storage.for_table(str(root)), "p=1")
    assert [p for p in root.rglob("*") if p.is_file()] == []


def test_make_directories_reports_the_parents_whose_listing_changed(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c"
    assert publish.make_directories(str(target)) == [
        str(tmp_path / "a" / "b"),
        str(tmp_path / "a"),
        str(tmp_path),
    ]
    assert target.is_dir()
    assert publish.make_directories(str(target)) == []


# -- BackgroundSync -------------------------------------------------------------------------


def test_background_sync_runs_off_the_writer_and_wait_covers_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    synced: list[tuple[str, tuple[str, ...]]] = []
    real = publish.sync_entry

    def held(path: str, directories: Sequence[str]) -> None:
        gate.wait(timeout=30)
        real(path, directories)
        synced.append((path, tuple(directories)))

    monkeypatch.setattr(publish, "sync_entry", held)
    root = tmp_path / "t"
    (root / "old").mkdir(parents=True)
    storage = Storage.for_table(str(root))
    with BackgroundSync() as sync:
        first = write(storage, "old", sync)  # returns while its fsyncs wait on the gate
        second = write(storage, "new/p=2", sync)
        assert synced == []
        waiter = threading.Thread(target=sync.wait)
        waiter.start()
        waiter.join(timeout=0.2)
        assert waiter.is_alive(), "wait() returned before the files were synced"
        gate.set()
        waiter.join(timeout=30)
        assert not waiter.is_alive()
    assert sorted(synced) == sorted(
        [
            (first, (str(root / "old"),)),
            (second, (str(root / "new" / "p=2"), str(root / "new"), str(root))),
        ]
    )


def test_wait_reports_a_failed_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(path: str, directories: Sequence[str]) -> None:
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(publish, "sync_entry", broken)
    storage = Storage.for_table(str(tmp_path / "t"))
    with BackgroundSync() as sync:
        location = write(storage, "", sync)
        with pytest.raises(StorageError, match=r"cannot make the data file .* durable"):
            sync.wait()
        assert Path(location).exists()  # the caller deletes what it will not commit
        with pytest.raises(StorageError, match="durable"):
            sync.wait()  # still: none of the files may be committed


def test_closed_background_sync_takes_no_more_files(tmp_path: Path) -> None:
    sync = BackgroundSync()
    sync.close()
    with pytest.raises(RuntimeError):
        sync.add(str(tmp_path / "x"), [str(tmp_path)])


def test_object_store_writes_need_no_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    storage = Storage.for_table(f"memory://dvtool-test-{uuid.uuid4().hex}")
    with BackgroundSync() as sync:
        monkeypatch.setattr(sync, "add", lambda *args: pytest.fail("synced a PUT"))
        write(storage, "p=1", sync)
        sync.wait()


# -- rewrites: synced before the commit -----------------------------------------------------


def _table(path: Path) -> Path:
    """Four partitions of 20 rows, DVs enabled, a DV on every file."""
    ids = list(range(80))
    data = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % 4}" for i in ids], pa.string()),
        }
    )
    write_deltalake(
        str(path),
        data,
        partition_by=["part"],
        configuration={"delta.enableDeletionVectors": "true"},
    )
    assert dvtool.delete(path, "id % 5 = 0").mode == "dv"
    return path


def _parquet_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


def _table_files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts}


@pytest.mark.parametrize("command", ["purge", "copy-on-write delete"])
def test_rewritten_files_are_durable_before_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    root = _table(tmp_path / "t")
    before = _parquet_files(root)
    synced: list[tuple[str, tuple[str, ...]]] = []
    checked: list[set[str]] = []
    real_entry, real_reached = publish.sync_entry, faults.reached

    def recording(path: str, directories: Sequence[str]) -> None:
        time.sleep(0.05)  # slow disk: queued syncs outlive the writes
        real_entry(path, directories)
        synced.append((path, tuple(directories)))

    def at_commit(step: str) -> None:
        if step == "commit-temp-written":
            new = _parquet_files(root) - before
            assert new, "the commit names new files"
            assert {path for path, _ in synced} == new
            assert all(dirs == (os.path.dirname(path),) for path, dirs in synced)
            checked.append(new)
        real_reached(step)

    monkeypatch.setattr(publish, "sync_entry", recording)
    monkeypatch.setattr(faults, "reached", at_commit)
    if command == "purge":
        dvtool.optimize(root, purge=True)
    else:
        assert dvtool.delete(root, "id % 5 = 1", mode="cow").mode == "cow"
    assert len(checked) == 1
    _, live = replay_json(root)
    assert {str(root / unquote(a["path"])) for a in live.values()} - before == checked[0]


def test_failed_fsync_commits_nothing_and_leaves_no_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _table(tmp_path / "t")
    before = _table_files(root)
    versions = commit_versions(root)
    calls = 0
    lock = threading.Lock()

    def second_fails(path: str, directories: Sequence[str]) -> None:
        nonlocal calls
        with lock:
            calls += 1
            fail = calls == 2
        if fail:
            raise OSError(errno.EIO, "injected")
        publish.fsync_directory(directories[0])

    monkeypatch.setattr(publish, "sync_entry", second_fails)
    with pytest.raises(StorageError, match="durable"):
        dvtool.optimize(root, purge=True)
    assert commit_versions(root) == versions
    assert _table_files(root) == before  # no new data file, no temp file
