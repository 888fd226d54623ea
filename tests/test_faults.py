"""The fault-injection matrix: every writing command, killed or failing at every step.

For each command and each step it reaches (see `dvtool.faults`), a dvtool process runs on a
fresh copy of a table with one fault injected through `DVTOOL_FAULT`: SIGKILL, a failing
storage call, a write that fails half-way, or a call that succeeds but reports a timeout.
`DVTOOL_FAULT_LOG` proves the fault fired. Afterwards:

1. the table opens in dvtool (`inspect --verify`), polars and deltalake (DataFusion
   `QueryBuilder`, which applies DVs), and all three read the rows of the state before the
   command or of the state after it (computed by a clean run on another copy);
2. the same command run again succeeds and reaches the after state, with the command's own
   post-condition (no DVs after a purge, a manifest listing exactly the live files, ...);
3. a vacuum past retention then leaves only what the log references: no temp files, no
   unreferenced data or DV files.

The base tables use `delta.checkpointInterval = 1`, so every commit is followed by a
checkpoint and `_last_checkpoint`, and the checkpoint steps are reached too.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool import faults
from dvtool.cli import cli
from dvtool.errors import StorageError
from dvtool.storage.table_storage import Storage
from tests.oracles import commit_actions, commit_versions, dv_file, replay_json

ROWS_PER_FILE = 300
FILES = 4
Row = tuple[Any, ...]


def _cli(*args: str | Path) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(cli, [str(a) for a in args])


def _ok(*args: str | Path) -> Result:
    result = _cli(*args)
    assert result.exit_code == 0, (args, result.output)
    return result


# -- tables ---------------------------------------------------------------------------------


def _write_base(path: Path) -> None:
    """FILES appends of ROWS_PER_FILE rows, DVs enabled, one DV delete on every file."""
    for i in range(FILES):
        ids = list(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "key": pa.array([x * 7 % 13 for x in ids], pa.int64()),
                "name": pa.array([f"name-{x:05d}" for x in ids], pa.string()),
            }
        )
        write_deltalake(
            str(path), data, mode="append", configuration={"delta.checkpointInterval": "1"}
        )
    _ok("enable", path)
    _ok("delete", path, "--where", "key = 3", "--engine", "arrow")


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`dv`: the base table; `purged`: the same after a purge (tombstones for vacuum)."""
    root = tmp_path_factory.mktemp("fault-bases")
    dv = root / "dv"
    _write_base(dv)
    purged = root / "purged"
    shutil.copytree(dv, purged, symlinks=True)
    _ok("optimize", purged, "--purge", "--engine", "arrow")
    return {"dv": dv, "purged": purged}


def _copy(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest, symlinks=True)
    return dest


# -- reading a table three ways -------------------------------------------------------------


def _polars_rows(table: Path) -> list[Row]:
    return sorted(pl.read_delta(str(table)).select("id", "key", "name").rows())


def _deltalake_rows(table: Path) -> list[Row]:
    query = QueryBuilder().register("t", DeltaTable(str(table)))
    batches = query.execute("select id, key, name from t").read_all()
    data = pa.Table.from_batches(batches) if isinstance(batches, list) else batches
    return sorted(zip(*(data.column(c).to_pylist() for c in ("id", "key", "name")), strict=True))


def _rows(table: Path) -> list[Row]:
    """The table's rows as polars and deltalake read them (they must agree), after dvtool
    has opened it and verified every DV."""
    _ok("inspect", table, "--verify")
    rows = _polars_rows(table)
    assert _deltalake_rows(table) == rows
    return rows


# -- commands and their steps ---------------------------------------------------------------

COMMIT_STEPS = (
    "commit",
    "commit-temp-written",
    "commit-linked",
    "committed",
    "checkpoint",
    "last-checkpoint",
)
WRITE_STEPS = frozenset({"dv-file", "commit", "checkpoint", "last-checkpoint", "manifest", "write"})


@dataclass(frozen=True)
class Command:
    """A writing command, the base table it starts from and the steps it reaches."""

    name: str
    base: str
    args: tuple[str, ...]
    steps: tuple[str, ...]
    check: Callable[[Path], None]


def _no_dvs(table: Path) -> None:
    _, live = replay_json(table)
    assert live and all(add.get("deletionVector") is None for add in live.values())


def _no_dv_feature(table: Path) -> None:
    _no_dvs(table)
    versions = commit_versions(table)
    actions = (a for v in reversed(versions) for a in reversed(commit_actions(table, v)))
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert "deletionVectors" not in protocol.get("writerFeatures", [])
    assert "deletionVectors" not in protocol.get("readerFeatures", [])


def _manifest_lists_live_files(table: Path) -> None:
    lines = (table / "_symlink_format_manifest" / "manifest").read_text().splitlines()
    uris = DeltaTable(str(table)).file_uris()
    assert sorted(lines) == sorted(u if u.startswith("file:") else f"file:{u}" for u in uris)


def _nothing(table: Path) -> None:
    del table


COMMANDS = (
    Command(
        "delete-dv",
        "dv",
        ("delete", "{table}", "--where", "id % 5 = 1", "--mode", "dv", "--engine", "arrow"),
        ("dv-file", *COMMIT_STEPS),
        _nothing,
    ),
    Command(
        "delete-cow",
        "dv",
        ("delete", "{table}", "--where", "id % 5 = 1", "--mode", "cow", "--engine", "arrow"),
        ("data-files-written", *COMMIT_STEPS),
        _nothing,
    ),
    Command(
        "purge",
        "dv",
        ("optimize", "{table}", "--purge", "--engine", "arrow"),
        ("data-files-written", *COMMIT_STEPS),
        _no_dvs,
    ),
    Command(
        "compaction",
        "dv",
        ("optimize", "{table}", "--engine", "arrow"),
        ("data-files-written", *COMMIT_STEPS),
        _nothing,
    ),
    Command(
        "maintain",
        "dv",
        ("maintain", "{table}", "--purge-ratio", "0.01", "--engine", "arrow"),
        ("data-files-written", "commit", "committed", "checkpoint"),
        _no_dvs,
    ),
    Command(
        "vacuum",
        "purged",
        ("vacuum", "{table}", "--retain", "0h", "--force"),
        ("delete@1", "delete@3", "write", "commit@2", *COMMIT_STEPS),
        _nothing,
    ),
    Command(
        "manifest",
        "dv",
        ("generate-manifest", "{table}", "--purge-first", "--engine", "arrow"),
        ("data-files-written", "manifest", *COMMIT_STEPS),
        _manifest_lists_live_files,
    ),
    Command(
        "downgrade",
        "dv",
        ("downgrade", "{table}", "--engine", "arrow"),
        ("data-files-written", "commit@2", "checkpoint@2", *COMMIT_STEPS),
        _no_dv_feature,
    ),
)


# Steps where both signals are sent; at the others SIGTERM only (handled alike).
BOTH_SIGNALS = frozenset(
    {"commit", "committed", "checkpoint", "data-files-written", "dv-file", "manifest", "delete@1"}
)


def _kinds(step: str) -> tuple[str, ...]:
    name = step.partition("@")[0]
    signals = ("sigint", "sigterm") if step in BOTH_SIGNALS else ("sigterm",)
    if name == "committed":  # after the commit landed: nothing there can fail
        return ("kill", *signals)
    if name in faults.PROGRAM_STEPS:
        return ("kill", "fail", *signals)
    if name in WRITE_STEPS:
        return ("kill", "fail", "half", "timeout", *signals)
    return ("kill", "fail", "timeout", *signals)


def _cases() -> Iterator[Any]:
    for command in COMMANDS:
        for step in command.steps:
            for kind in _kinds(step):
                yield pytest.param(command, step, kind, id=f"{command.name}-{step}-{kind}")


@pytest.fixture(scope="module")
def after_rows(bases: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each command's rows before and after a clean run (cached per command)."""
    cache: dict[str, Any] = {}
    root = tmp_path_factory.mktemp("fault-after")

    def get(command: Command) -> tuple[list[Row], list[Row]]:
        if command.name not in cache:
            table = _copy(bases[command.base], root / command.name)
            before = _rows(table)
            _ok(*_args(command, table))
            cache[command.name] = (before, _rows(table))
        return cache[command.name]  # type: ignore[no-any-return]

    return {"get": get}


def _args(command: Command, table: Path) -> list[str]:
    return [a.replace("{table}", str(table)) for a in command.args]


def _run_with_fault(command: Command, table: Path, rule: str, log: Path) -> tuple[int, str]:
    env = {**os.environ, faults.ENV: rule, faults.LOG_ENV: str(log)}
    proc = subprocess.run(
        [sys.executable, "-m", "dvtool", *_args(command, table)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "internal error" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr


def _leftovers(table: Path) -> list[str]:
    """Files under the table that the log does not reference (besides the log itself), the
    live files taken from the JSON commits by the independent replay in tests/oracles.py."""
    _, live = replay_json(table)
    referenced = {table / unquote(add["path"]) for add in live.values()}
    referenced |= {
        dv_file(table, add["deletionVector"])
        for add in live.values()
        if add.get("deletionVector") and add["deletionVector"]["storageType"] == "u"
    }
    out = []
    for path in table.rglob("*"):
        relative = path.relative_to(table).as_posix()
        if path.is_dir() or relative.startswith("_symlink_format_manifest/"):
            continue
        if relative.startswith("_delta_log/") and ".tmp-" not in relative:
            continue
        if path.name.endswith(".crc") or path in referenced:
            continue
        out.append(relative)
    return out


@pytest.mark.parametrize(("command", "step", "kind"), list(_cases()))
def test_fault(
    command: Command,
    step: str,
    kind: str,
    bases: dict[str, Path],
    after_rows: dict[str, Any],
    tmp_path: Path,
) -> None:
    before, after = after_rows["get"](command)
    table = _copy(bases[command.base], tmp_path / "t")
    fired = tmp_path / "fired.log"
    versions = set(commit_versions(table))
    code, stderr = _run_with_fault(command, table, f"{step}:{kind}", fired)
    assert fired.read_text().split() == [step.partition("@")[0], kind], "the fault never fired"
    if kind == "kill":
        assert code == -signal.SIGKILL
    rows = _rows(table)
    assert rows in (before, after)
    if kind in SIGNAL_EXITS:
        _check_stopped(code, stderr, SIGNAL_EXITS[kind], set(commit_versions(table)) - versions)
        assert code != 0 or rows == after
    _ok(*_args(command, table))
    assert _rows(table) == after
    command.check(table)
    _ok("vacuum", table, "--retain", "0h", "--force")
    assert _leftovers(table) == []
    assert _rows(table) == after


SIGNAL_EXITS = {"sigint": 130, "sigterm": 143}


def stopped_versions(message: str) -> set[int] | None:
    """The versions a stop message says were committed before the signal; None if it does
    not say."""
    if "before committing" in message:
        return set()
    found = re.search(r"after committing versions? ([\d, ]+);", message)
    return {int(v) for v in found.group(1).split(",")} if found else None


def _check_stopped(code: int, stderr: str, exit_code: int, new: set[int]) -> None:
    """A command sent a signal finished (0) or stopped with the signal's exit code, saying
    truly which commits landed: never "interrupted" about a commit it does not name."""
    assert code in (0, exit_code), (code, stderr)
    if code == 0:
        assert new, "exit 0 without a commit"
    else:
        assert stopped_versions(stderr) == new, (stderr, sorted(new))


# -- the hook itself and the storage layer's retries ----------------------------------------


def test_parse_rules() -> None:
    rules = faults.parse("commit@2:kill, dv-file:half")
    assert [(r.step, r.nth, r.kind) for r in rules] == [
        ("commit", 2, "kill"),
        ("dv-file", 1, "half"),
    ]
    for bad in ("commit", "nowhere:kill", "commit:explode", "commit@x:kill"):
        with pytest.raises(ValueError, match="DVTOOL_FAULT"):
            faults.parse(bad)


def test_timeout_after_a_commit_is_retried_and_recognised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit lands but its caller hears a timeout: the retry finds our own bytes."""
    monkeypatch.setenv(faults.ENV, "commit:timeout")
    storage = Storage.for_table(str(tmp_path))
    location = storage.join("_delta_log/00000000000000000000.json")
    assert storage.put_if_absent(location, b"ours\n")
    assert storage.retries == 1
    assert storage.read(location) == b"ours\n"
    assert not storage.put_if_absent(location, b"theirs\n")


def test_half_write_leaves_only_a_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(faults.ENV, "dv-file:half")
    storage = Storage.for_table(str(tmp_path))
    location = storage.join("deletion_vector_x.bin")
    with pytest.raises(StorageError, match="half-way"):
        storage.write(location, b"0123456789")
    assert not storage.exists(location)
    [temp] = list(tmp_path.glob(".tmp-*.dvtool"))
    assert temp.read_bytes() == b"01234"
    assert storage.retries == 0  # an I/O error like a full disk is not retried


def test_failed_call_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, "write:fail")
    storage = Storage.for_table(str(tmp_path))
    with pytest.raises(StorageError, match="injected fault"):
        storage.write(storage.join("_delta_log/_last_vacuum_info"), b"{}")
    assert storage.retries == 0 and not (tmp_path / "_delta_log" / "_last_vacuum_info").exists()


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (OSError(errno.EBUSY, "409 ConditionalRequestConflict"), True),
        (OSError(errno.EREMOTEIO, "500 InternalError"), True),
        (TimeoutError("read timed out"), True),
        (ConnectionResetError("reset by peer"), True),
        (PermissionError(errno.EACCES, "403 AccessDenied"), False),
    ],
)
def test_retryable_backend_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, retried: bool
) -> None:
    storage = Storage.for_table(str(tmp_path))
    (tmp_path / "f").write_bytes(b"data")
    real = storage._fs.cat_file
    calls = []

    def flaky(path: str, **kwargs: Any) -> bytes:
        calls.append(path)
        if len(calls) == 1:
            raise error
        return bytes(real(path, **kwargs))

    monkeypatch.setattr(storage._fs, "cat_file", flaky)
    if retried:
        assert storage.read(storage.join("f")) == b"data"
        assert storage.retries == 1
    else:
        with pytest.raises(StorageError, match="AccessDenied"):
            storage.read(storage.join("f"))
        assert len(calls) == 1


def test_persistent_timeouts_give_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = Storage.for_table(str(tmp_path))

    def always(path: str, **kwargs: Any) -> bytes:
        raise TimeoutError("read timed out")

    monkeypatch.setattr(storage._fs, "cat_file", always)
    with pytest.raises(StorageError, match="timed out"):
        storage.read(storage.join("f"))
    assert storage.retries == 3
