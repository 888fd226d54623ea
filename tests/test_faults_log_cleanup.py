"""The fault-injection matrix of the log cleanup, with the machinery of tests/test_faults.py.

The base table (deltalake appends, its checkpoints at versions 4 and 8) has versions 0..8
committed long ago and version 9 now, so a cleanup deletes commits 0..7 and checkpoint 4
(the cutoff checkpoint is 8). Three ways to get there run killed or failing at every step
they reach (`DVTOOL_FAULT`): `vacuum --log`, `checkpoint` (a checkpoint of version 9, then the
cleanup), and `enable`, whose commit of version 10 is checkpointed and followed by the
cleanup. Afterwards:

1. the table opens in dvtool (`inspect --verify`), polars and deltalake, with its rows;
2. every version from the cutoffCommit (8) on reads as before in polars and deltalake (time
   travel), and no log file of those versions was touched;
3. running the command again (then `checkpoint`) leaves the log a clean run leaves.

Then races: a writer committing while the cleanup deletes, the cutoff checkpoint deleted
between planning and deleting, and two cleanups at once.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import dvtool.delta.log.cleanup as log_cleanup_module
from dvtool.commands.log_cleanup import LogCleanupRequest, run_log_cleanup
from dvtool.delta.log.reader import open_log
from dvtool.storage.table_storage import Storage
from tests.racers import Racers
from tests.test_faults import (
    SIGNAL_EXITS,
    Command,
    _args,
    _kinds,
    _nothing,
    _ok,
    _rows,
    _run_with_fault,
)

OLD_S = time.time() - 60 * 86_400
CUTOFF_COMMIT = 8
DELETED = 9  # commits 0..7 and checkpoint 4
Row = tuple[Any, ...]


def _write_base(path: Path) -> None:
    for v in range(10):
        ids = list(range(v * 10, v * 10 + 10))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "key": pa.array([x % 7 for x in ids], pa.int64()),
                "name": pa.array([f"name-{x:03d}" for x in ids], pa.string()),
            }
        )
        write_deltalake(str(path), data, mode="append")
        if v in (4, 8):
            DeltaTable(str(path)).create_checkpoint()
    for file in (path / "_delta_log").iterdir():
        if file.name[:20].isdigit() and int(file.name[:20]) <= CUTOFF_COMMIT:
            os.utime(file, (OLD_S, OLD_S))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cleanup-base") / "t"
    _write_base(path)
    return path


def _copy(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest)  # copy2: the files keep their modification times
    return dest


def _version_rows(table: Path, version: int) -> list[Row]:
    """The rows at `version` as polars and deltalake read them (they must agree)."""
    rows = sorted(pl.read_delta(str(table), version=version).select("id", "key", "name").rows())
    query = QueryBuilder().register("t", DeltaTable(str(table), version=version))
    batches = query.execute("select id, key, name from t").read_all()
    data = pa.Table.from_batches(batches) if isinstance(batches, list) else batches
    theirs = sorted(zip(*(data.column(c).to_pylist() for c in ("id", "key", "name")), strict=True))
    assert theirs == rows, version
    return rows


def _log_files(table: Path) -> dict[str, bytes]:
    """The log's files (no temp files a write failing half-way leaves), with their bytes."""
    log = table / "_delta_log"
    return {p.name: p.read_bytes() for p in log.iterdir() if p.is_file() and ".tmp-" not in p.name}


def _retained(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files of versions from the cutoffCommit on, which no cleanup may touch."""
    return {n: b for n, b in files.items() if n[:20].isdigit() and int(n[:20]) >= CUTOFF_COMMIT}


# -- the matrix ----------------------------------------------------------------------------

FINISH = ("checkpoint", "{table}")
COMMANDS = (
    Command(
        "vacuum-log",
        "base",
        ("vacuum", "{table}", "--log"),
        tuple(f"delete@{n}" for n in range(1, DELETED + 1)),
        _nothing,
    ),
    Command(
        "checkpoint",
        "base",
        ("checkpoint", "{table}"),
        ("checkpoint", "last-checkpoint", "delete@1", f"delete@{DELETED}"),
        _nothing,
    ),
    Command(
        "enable-hook",
        "base",
        ("enable", "{table}"),
        ("commit", "checkpoint", "last-checkpoint", "delete@1", f"delete@{DELETED}"),
        _nothing,
    ),
)


def _cases() -> Iterator[Any]:
    for command in COMMANDS:
        for step in command.steps:
            for kind in _kinds(step):
                yield pytest.param(command, step, kind, id=f"{command.name}-{step}-{kind}")


@pytest.fixture(scope="module")
def clean(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[Command], Any]:
    """Per command: the rows, each retained version's rows and the log after a clean run."""
    cache: dict[str, Any] = {}
    root = tmp_path_factory.mktemp("cleanup-clean")

    def get(command: Command) -> Any:
        if command.name not in cache:
            table = _copy(base, root / command.name)
            versions = {v: _version_rows(table, v) for v in range(CUTOFF_COMMIT, 10)}
            before = _log_files(table)
            _ok(*_args(command, table))
            _ok(*[a.replace("{table}", str(table)) for a in FINISH])
            versioned = [n for n in before if n[:20].isdigit()]
            assert len(versioned) - len(_retained(before)) == DELETED
            cache[command.name] = (_rows(table), versions, _retained(before), _log_files(table))
        return cache[command.name]

    return get


@pytest.mark.parametrize(("command", "step", "kind"), list(_cases()))
def test_fault(
    command: Command,
    step: str,
    kind: str,
    base: Path,
    clean: Callable[[Command], Any],
    tmp_path: Path,
) -> None:
    rows, versions, retained, after = clean(command)
    table = _copy(base, tmp_path / "t")
    fired = tmp_path / "fired.log"
    code, stderr = _run_with_fault(command, table, f"{step}:{kind}", fired)
    assert fired.read_text().split() == [step.partition("@")[0], kind], "the fault never fired"
    if kind == "kill":
        assert code == -signal.SIGKILL
    if kind in SIGNAL_EXITS:  # a signal in a post-commit hook never fails the command
        assert code == (0 if command.name == "enable-hook" else SIGNAL_EXITS[kind]) or (
            step == "commit" and code == 0
        ), (code, stderr)
    assert _rows(table) == rows
    for version, expected in versions.items():
        assert _version_rows(table, version) == expected
    assert _retained(_log_files(table)).items() >= retained.items(), "a retained file changed"
    _ok(*_args(command, table))
    _ok(*[a.replace("{table}", str(table)) for a in FINISH])
    assert set(_log_files(table)) == set(after)
    assert _rows(table) == rows


# -- races ---------------------------------------------------------------------------------


def test_a_writer_commits_while_the_cleanup_deletes(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _copy(base, tmp_path / "t")
    versions = {v: _version_rows(table, v) for v in range(CUTOFF_COMMIT, 10)}
    real = Storage.delete
    calls: list[str] = []

    def delete(self: Storage, location: str) -> None:
        calls.append(location)
        if len(calls) == 3:  # another writer appends (and checkpoints) mid-cleanup
            data = pa.table(
                {"id": [999], "key": [0], "name": ["racer"]},
                schema=pa.schema([("id", pa.int64()), ("key", pa.int64()), ("name", pa.string())]),
            )
            write_deltalake(str(table), data, mode="append")
            DeltaTable(str(table)).create_checkpoint()
        real(self, location)

    monkeypatch.setattr(Storage, "delete", delete)
    result = run_log_cleanup(open_log(str(table)), LogCleanupRequest())
    monkeypatch.undo()
    assert result.error is None and result.deleted_files == DELETED
    for version, expected in versions.items():
        assert _version_rows(table, version) == expected
    latest = _version_rows(table, 10)
    assert latest == sorted([*versions[9], (999, 0, "racer")])
    assert _rows(table) == latest


def test_cutoff_checkpoint_gone_before_deleting(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another cleaner deletes the cutoff checkpoint between our plan and our deletion: the
    re-check stops us before anything is deleted."""
    table = _copy(base, tmp_path / "t")
    real = log_cleanup_module._unreadable

    def then_gone(*args: Any) -> str | None:
        problem = real(*args)
        (table / "_delta_log" / "00000000000000000008.checkpoint.parquet").unlink()
        return problem

    monkeypatch.setattr(log_cleanup_module, "_unreadable", then_gone)
    names = set(_log_files(table))
    result = run_log_cleanup(open_log(str(table)), LogCleanupRequest())
    assert result.deleted_files == 0 and "disappeared" in str(result.reason)
    assert set(_log_files(table)) == names - {"00000000000000000008.checkpoint.parquet"}


def _prepare_cleanup(table: str) -> Callable[[], int]:
    """A racer's job: open the log, then (released) run the cleanup."""
    from dvtool.commands.log_cleanup import LogCleanupRequest, run_log_cleanup
    from dvtool.delta.log.reader import open_log

    log = open_log(table)
    return lambda: run_log_cleanup(log, LogCleanupRequest()).deleted_files


def test_two_cleanups_at_once(base: Path, tmp_path: Path) -> None:
    table = _copy(base, tmp_path / "t")
    rows = _rows(table)
    with Racers(2, _prepare_cleanup) as racers:
        deleted = racers.race([str(table), str(table)])
    assert max(deleted) <= DELETED
    assert len(_log_files(table)) == len(_log_files(base)) - DELETED
    assert _rows(table) == rows
    assert _version_rows(table, CUTOFF_COMMIT) == _version_rows(base, CUTOFF_COMMIT)
