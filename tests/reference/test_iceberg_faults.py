"""Fault injection into dvtool's Iceberg writes: each command killed or failing at its steps.

For each case a `python -m dvtool` process runs one command on a fresh copy of a fixture
table Iceberg Spark wrote (tests/reference/iceberg_tables.py, copied into the Spark
session's `local` catalog), with one fault injected through `DVTOOL_FAULT`
(`dvtool.faults`): SIGKILL, a failing call, a call that succeeds but reports a timeout,
SIGINT or SIGTERM; `DVTOOL_FAULT_LOG` proves the fault fired. Afterwards:

1. the table reads, in Iceberg Spark and in every oracle that reads its shape (pyiceberg,
   DuckDB, polars), as the state before the command or the state after it: the rows and
   what the command changes besides (delete files, snapshots), as a clean run on another
   copy left them; a signal's exit code and message say which;
2. `dvtool inspect --verify` finds nothing wrong;
3. the cleanup rule: after an attempt that was not killed, every file it added is one the
   table's metadata reaches (a failed attempt deleted what it wrote); a killed one may
   leave files only the metadata does not reach, which a vacuum then removes;
4. the same command run again reaches the after state (for vacuum: the clean run's files).

The steps a path table's commands reach: `write` (each whole-file write: delete files and
Puffin files, manifests, the manifest list, and after the commit `version-hint.text`),
`data-files-written` (all the new files written, nothing committed), `commit` (the
put-if-absent of `metadata/vN.metadata.json`), `committed`, and vacuum's `delete` of each
file after its commit. `write@first` is the first file written, `write@last` the last
before the commit (the manifest list), `write@hint` the version hint after it; their
numbers come from the files the clean run added.

The matrix (`CASES`, 28 cases, each kind at least once per command family) is chosen, not
the full product (a case takes 3 to 4 s, 10 s on a 2-core machine at load 10; the 46
cases of the wider matrix this was cut from passed too): every step
of `delete` on v2 (position deletes) with each kind, on v3 (deletion vectors) the Puffin
write, the commit and after it; `optimize --rewrite-deletes` (v2_part) at its program steps
and commit, `--convert-equality` (v3_flink_part: equality deletes and DVs) stopped while
writing and killed at its commit; `vacuum` (v2_part) at its commit and its first and third
deletes, and on v3_part (Puffin files among what it deletes) killed mid-deletion.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import StaticTable

from dvtool import faults
from tests import iceberg_oracles as oracles
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_state import (
    agreed_rows,
    referenced_files,
    table_tree,
    unreferenced,
)
from tests.reference.iceberg_tables import latest_metadata
from tests.reference.iceberg_writes import cli_json, copy_into_catalog

NAMESPACE = "dvfaults"
WHERE = "id % 5 = 1 OR v < 0"
SIGNAL_EXITS = {"sigint": 130, "sigterm": 143}
Row = dict[str, Any]


def _matches(row: Row) -> bool:
    return bool(row["id"] % 5 == 1 or row["v"] < 0)


# -- what a command changes besides the rows -------------------------------------------------


def _nothing_else(folder: Path) -> object:
    del folder
    return None


def _position_delete_files(folder: Path) -> object:
    return oracles.counts(latest_metadata(folder)).position_delete_files


def _equality_delete_files(folder: Path) -> object:
    return oracles.counts(latest_metadata(folder)).equality_delete_files


def _snapshots(folder: Path) -> object:
    metadata = StaticTable.from_metadata(str(latest_metadata(folder))).metadata
    return sorted(s.snapshot_id for s in metadata.snapshots)


@dataclass(frozen=True)
class Command:
    """A writing command on a copy of `fixture`: its arguments, the rows it leaves (from
    the fixture's intended rows) and what else it changes."""

    name: str
    fixture: str
    args: tuple[str, ...]
    rows_after: Callable[[list[Row]], list[Row]]
    state: Callable[[Path], object]


COMMANDS = {
    c.name: c
    for c in (
        Command(
            "delete_v2",
            "v2_part",
            ("delete", "{table}", "--where", WHERE, "--engine", "arrow"),
            lambda rows: [r for r in rows if not _matches(r)],
            _nothing_else,
        ),
        Command(
            "delete_v3",
            "v3_part",
            ("delete", "{table}", "--where", WHERE, "--engine", "arrow"),
            lambda rows: [r for r in rows if not _matches(r)],
            _nothing_else,
        ),
        Command(
            "rewrite_deletes",
            "v2_part",
            ("optimize", "{table}", "--rewrite-deletes"),
            list,
            _position_delete_files,
        ),
        Command(
            "convert_equality",
            "v3_flink_part",
            ("optimize", "{table}", "--convert-equality"),
            list,
            _equality_delete_files,
        ),
        Command(
            "vacuum_v2",
            "v2_part",
            ("vacuum", "{table}", "--retain", "0h", "--force"),
            list,
            _snapshots,
        ),
        Command(
            "vacuum_v3",
            "v3_part",
            ("vacuum", "{table}", "--retain", "0h", "--force"),
            list,
            _snapshots,
        ),
    )
}

# (command, step, kinds): see the module docstring for the choice.
CASES = (
    ("delete_v2", "write@first", ("kill", "fail")),
    ("delete_v2", "data-files-written", ("fail", "sigint")),
    ("delete_v2", "write@last", ("timeout",)),
    ("delete_v2", "commit", ("kill", "fail", "timeout", "sigterm")),
    ("delete_v2", "committed", ("kill",)),
    ("delete_v2", "write@hint", ("fail",)),
    ("delete_v3", "write@first", ("kill",)),
    ("delete_v3", "commit", ("fail", "sigint")),
    ("delete_v3", "committed", ("sigterm",)),
    ("rewrite_deletes", "data-files-written", ("kill",)),
    ("rewrite_deletes", "commit", ("fail", "timeout")),
    ("rewrite_deletes", "committed", ("sigterm",)),
    ("convert_equality", "write@first", ("sigint",)),
    ("convert_equality", "commit", ("kill",)),
    ("vacuum_v2", "commit", ("kill", "fail", "sigterm")),
    ("vacuum_v2", "delete@1", ("fail",)),
    ("vacuum_v2", "delete@3", ("kill", "timeout")),
    ("vacuum_v3", "delete@3", ("kill",)),
)


def _params() -> Iterator[Any]:
    for command, step, kinds in CASES:
        for kind in kinds:
            yield pytest.param(command, step, kind, id=f"{command}-{step}-{kind}")


# -- a table's state, and the clean run ------------------------------------------------------


@dataclass(frozen=True)
class State:
    rows: list[Row]
    other: object


def _state(session: JvmSession, command: Command, folder: Path, table: str) -> State:
    return State(agreed_rows(session, folder, table), command.state(folder))


def _copy(session: JvmSession, entry: dict[str, Any], label: str) -> tuple[Path, str]:
    return copy_into_catalog(session, entry, NAMESPACE, f"{label}_{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def fresh_copy(
    iceberg_tables: dict[str, Any],
    iceberg_spark: JvmSession,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Command], tuple[Path, str]]:
    """A fresh copy of a command's fixture: one copy per command in Spark's catalog
    (Iceberg's `rewrite_table_path`, seconds), laid anew from its pristine bytes for each
    case at the same place, so its absolute paths stay right (Spark refreshes it)."""
    copies: dict[str, tuple[Path, str, Path]] = {}

    def get(command: Command) -> tuple[Path, str]:
        if command.name not in copies:
            folder, table = _copy(iceberg_spark, iceberg_tables[command.fixture], command.name)
            pristine = tmp_path_factory.mktemp("pristine") / command.name
            shutil.copytree(folder, pristine, symlinks=True)
            copies[command.name] = (folder, table, pristine)
        folder, table, pristine = copies[command.name]
        shutil.rmtree(folder)
        shutil.copytree(pristine, folder, symlinks=True)
        return folder, table

    return get


def _args(command: Command, folder: Path) -> list[str]:
    return [a.replace("{table}", str(folder)) for a in command.args]


@dataclass(frozen=True)
class Clean:
    """A clean run's before and after states, the files it left, and how many files it
    wrote before its commit (to number the `write` steps)."""

    before: State
    after: State
    tree: set[str]
    writes_before_commit: int

    def step(self, step: str) -> str:
        """`write@first|last|hint` as the `write@N` the fault rule names."""
        names = {
            "write@first": 1,
            "write@last": self.writes_before_commit,
            "write@hint": self.writes_before_commit + 1,
        }
        return f"write@{names[step]}" if step in names else step


@pytest.fixture(scope="module")
def clean_run(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> Callable[[Command], Clean]:
    """Each command's clean run on a copy of its fixture (cached per command)."""
    cache: dict[str, Clean] = {}

    def get(command: Command) -> Clean:
        if command.name not in cache:
            entry = iceberg_tables[command.fixture]
            folder, table = _copy(iceberg_spark, entry, f"{command.name}_clean")
            before = _state(iceberg_spark, command, folder, table)
            assert before.rows == entry["expected"]
            tree = table_tree(folder)
            cli_json(*_args(command, folder))
            after = _state(iceberg_spark, command, folder, table)
            assert after.rows == command.rows_after(entry["expected"])
            assert after != before, "the command changed nothing: no step would be reached"
            added = table_tree(folder) - tree
            writes = len([p for p in added if not p.endswith(".metadata.json")])
            cache[command.name] = Clean(before, after, table_tree(folder), writes)
        return cache[command.name]

    return get


# -- the fault ----------------------------------------------------------------------------


def _run_with_fault(command: Command, folder: Path, rule: str, log: Path) -> tuple[int, str]:
    env = {**os.environ, faults.ENV: rule, faults.LOG_ENV: str(log)}
    proc = subprocess.run(
        [sys.executable, "-m", "dvtool", *_args(command, folder)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert "internal error" not in output and "Traceback" not in output, output
    return proc.returncode, proc.stderr


def _check_exit(kind: str, code: int, stderr: str, state: State, clean: Clean) -> None:
    """What the exit code and message say agrees with the state the table is in."""
    if kind == "kill":
        assert code == -signal.SIGKILL
    if code == 0:
        assert state == clean.after, stderr
    if kind in SIGNAL_EXITS:
        assert code in (0, SIGNAL_EXITS[kind]), (code, stderr)
        if "before committing" in stderr:
            assert state == clean.before, stderr
        elif code != 0:
            assert "after committing" in stderr and state == clean.after, stderr


@pytest.mark.parametrize(("name", "step", "kind"), list(_params()))
def test_fault(
    name: str,
    step: str,
    kind: str,
    clean_run: Callable[[Command], Clean],
    fresh_copy: Callable[[Command], tuple[Path, str]],
    iceberg_spark: JvmSession,
    tmp_path: Path,
) -> None:
    command = COMMANDS[name]
    clean = clean_run(command)
    folder, table = fresh_copy(command)
    before_files = table_tree(folder)
    fired = tmp_path / "fired.log"
    rule = clean.step(step)
    code, stderr = _run_with_fault(command, folder, f"{rule}:{kind}", fired)
    assert fired.read_text().split() == [rule.partition("@")[0], kind], "the fault never fired"

    state = _state(iceberg_spark, command, folder, table)
    assert state in (clean.before, clean.after)
    _check_exit(kind, code, stderr, state, clean)
    doc = cli_json("inspect", folder, "--verify")
    assert doc["verify"]["problems"] == [], doc["verify"]
    added = table_tree(folder) - before_files
    if kind != "kill":  # the cleanup rule
        assert added <= referenced_files(folder), sorted(added - referenced_files(folder))

    cli_json(*_args(command, folder))
    assert _state(iceberg_spark, command, folder, table) == clean.after
    if name.startswith("vacuum"):
        assert table_tree(folder) == clean.tree
    elif kind == "kill":  # what the killed attempt left, vacuum removes
        cli_json("vacuum", folder, "--retain", "0h", "--force")
        assert unreferenced(folder) == set()
