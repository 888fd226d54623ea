"""The fault-injection matrix for `dvtool restore` (the machinery is tests/test_faults.py's).

A restore writes no data or DV file: its only steps are the commit's (put-if-absent, on local
disk its temp file and link) and the checkpoint after it (the base tables checkpoint every
commit). At each, a dvtool process is killed, or the storage call fails, fails half-way or
succeeds but reports a timeout. Afterwards the table reads as before or as restored in dvtool
(`inspect --verify`), polars and deltalake; running the restore again reaches the restored
rows; a vacuum past retention leaves only what the log references. Two restores:

- `restore-delete`: the base table (4 files, one DV delete on each) back to the version
  before the delete: the files are re-added without DVs, the files with DVs removed;
- `restore-purge`: the purged base back to the version before the purge: the files with
  DVs re-added, the purged rewrites removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.oracles import commit_actions, commit_versions, replay_json
from tests.test_faults import COMMIT_STEPS, Command, _kinds, after_rows, bases
from tests.test_faults import test_fault as _fault_case

__all__ = ["after_rows", "bases"]  # the fixtures of tests/test_faults.py, used here

# The base tables' versions (tests/test_faults.py): 0-3 appends, 4 enable, 5 the DV delete,
# and on the purged base 6 the purge.
BEFORE_DELETE = 4
BEFORE_PURGE = 5


def _last_commit_restored(table: Path, version: int) -> dict[str, Any]:
    info: dict[str, Any] = commit_actions(table, commit_versions(table)[-1])[0]["commitInfo"]
    assert info["operation"] == "RESTORE"
    assert info["operationParameters"] == {"version": version, "timestamp": None}
    return info


def _no_dvs_as_before_the_delete(table: Path) -> None:
    _last_commit_restored(table, BEFORE_DELETE)
    _, live = replay_json(table)
    assert len(live) == 4 and all(a.get("deletionVector") is None for a in live.values())


def _dvs_as_before_the_purge(table: Path) -> None:
    _last_commit_restored(table, BEFORE_PURGE)
    _, live = replay_json(table)
    assert len(live) == 4 and all(a.get("deletionVector") for a in live.values())


COMMANDS = (
    Command(
        "restore-delete",
        "dv",
        ("restore", "{table}", "--version", str(BEFORE_DELETE)),
        COMMIT_STEPS,
        _no_dvs_as_before_the_delete,
    ),
    Command(
        "restore-purge",
        "purged",
        ("restore", "{table}", "--version", str(BEFORE_PURGE)),
        COMMIT_STEPS,
        _dvs_as_before_the_purge,
    ),
)


def _cases() -> Iterator[Any]:
    for command in COMMANDS:
        for step in command.steps:
            for kind in _kinds(step):
                yield pytest.param(command, step, kind, id=f"{command.name}-{step}-{kind}")


@pytest.mark.parametrize(("command", "step", "kind"), list(_cases()))
def test_restore_fault(
    command: Command,
    step: str,
    kind: str,
    bases: dict[str, Path],
    after_rows: dict[str, Any],
    tmp_path: Path,
) -> None:
    """tests/test_faults.py's `test_fault`, for the restores above."""
    _fault_case(command, step, kind, bases, after_rows, tmp_path)
