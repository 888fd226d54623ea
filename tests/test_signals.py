"""SIGINT and SIGTERM sent to real dvtool processes around their commits.

Each writing command runs as its own process on a copy of a base table (tests/test_faults.py's:
deltalake appends, DVs on, a DV delete, a checkpoint after every commit so the post-commit
hooks always run). A signal is sent the moment the command's first commit file appears, or
after a delay drawn (with a fixed seed) from the time a clean run takes. Afterwards:

- the exit code is 0, or 130 for SIGINT and 143 for SIGTERM (or death by the signal while
  Python is still starting, before dvtool runs), never another;
- exit 0 exactly when the command finished; when stopped, the message says "before
  committing" exactly when no commit landed, and otherwise names the versions that did:
  dvtool never says "interrupted" about a commit without saying it landed;
- the table verifies (`inspect --verify`), polars and deltalake read the same rows, which are
  those before or after a clean run; running the command again finishes it.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deltalake import write_deltalake

import dvtool
from dvtool import faults
from tests.oracles import commit_versions
from tests.test_faults import _ok, _rows, bases, stopped_versions

__all__ = ["bases"]  # tests/test_faults.py's fixture

SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


@dataclass(frozen=True)
class Case:
    name: str
    base: str
    args: tuple[str, ...]


CASES = (
    Case("delete", "dv", ("delete", "{table}", "--where", "id % 5 = 1", "--engine", "arrow")),
    Case("purge", "dv", ("optimize", "{table}", "--purge", "--engine", "arrow")),
    Case("compaction", "dv", ("optimize", "{table}", "--engine", "arrow")),
    Case("restore", "dv", ("restore", "{table}", "--version", "4")),
    Case("checkpoint", "plain", ("checkpoint", "{table}")),
    Case("vacuum", "purged", ("vacuum", "{table}", "--retain", "0h", "--force")),
    Case("maintain", "dv", ("maintain", "{table}", "--purge-ratio", "0.01", "--engine", "arrow")),
)
# When the signal is sent: as the first commit file appears, or after a drawn delay.
TIMINGS = ("at-commit", "delay-1", "delay-2")


@pytest.fixture(scope="module")
def tables(bases: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """tests/test_faults.py's bases, and `plain`: deltalake appends without a checkpoint."""
    plain = tmp_path_factory.mktemp("signal-bases") / "plain"
    for i in range(3):
        write_deltalake(str(plain), _table(i), mode="append")
    return {**bases, "plain": plain}


def _table(i: int) -> Any:
    import pyarrow as pa

    ids = list(range(i * 100, (i + 1) * 100))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "key": pa.array([x * 7 % 13 for x in ids], pa.int64()),
            "name": pa.array([f"name-{x:05d}" for x in ids], pa.string()),
        }
    )


@pytest.fixture(scope="module")
def clean_runs(tables: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Per case (cached): the rows before and after a clean run, and how long it took."""
    cache: dict[str, tuple[list[Any], list[Any], float]] = {}
    root = tmp_path_factory.mktemp("signal-clean")

    def get(case: Case) -> tuple[list[Any], list[Any], float]:
        if case.name not in cache:
            clean = shutil.copytree(tables[case.base], root / case.name, symlinks=True)
            before = _rows(clean)
            duration = _clean_run(case, clean)
            cache[case.name] = (before, _rows(clean), duration)
        return cache[case.name]

    return get


def _args(case: Case, table: Path) -> list[str]:
    return [a.replace("{table}", str(table)) for a in case.args]


def _start(case: Case, table: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in (faults.ENV, faults.LOG_ENV)}
    return subprocess.Popen(
        [sys.executable, "-m", "dvtool", *_args(case, table)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _clean_run(case: Case, table: Path) -> float:
    started = time.monotonic()
    proc = _start(case, table)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return time.monotonic() - started


def _wait_for_commit(proc: subprocess.Popen[str], log: Path, version: int) -> None:
    """Spin until the commit file of `version` exists (or the process ends)."""
    target = log / f"{version:020d}.json"
    deadline = time.monotonic() + 120
    while not target.exists() and proc.poll() is None and time.monotonic() < deadline:
        pass


def _interrupted(case: Case, table: Path, signum: int, delay: float | None) -> tuple[int, str]:
    proc = _start(case, table)
    if delay is None:
        _wait_for_commit(proc, table / "_delta_log", commit_versions(table)[-1] + 1)
    else:
        time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _before_dvtool_ran(code: int, err: str, signum: int) -> bool:
    """The signal came while the Python interpreter itself was starting, before any of
    dvtool's code (its first lines set quiet handlers): the default action killed it, or
    Python reported the KeyboardInterrupt of its own start-up."""
    ours = str(Path(dvtool.__file__).parent)
    return code == -signum or (code != 0 and ours not in err and "KeyboardInterrupt" in err)


def _check_exit(code: int, err: str, signum: int, new: set[int]) -> None:
    """Exit 0 with the command done, or 128 + signum saying truly which commits landed."""
    assert "Traceback" not in err and "internal error" not in err, err
    assert code in (0, 128 + signum), (code, err)
    if code != 0:
        assert f"interrupted ({signal.Signals(signum).name})" in err, err
        assert stopped_versions(err) == new, (err, sorted(new))


def _cases() -> list[Any]:
    return [
        pytest.param(case, name, timing, id=f"{case.name}-{name}-{timing}")
        for case in CASES
        for name in SIGNALS
        for timing in TIMINGS
    ]


@pytest.mark.parametrize(("case", "signame", "timing"), _cases())
def test_signal_around_the_commit(
    case: Case,
    signame: str,
    timing: str,
    tables: dict[str, Path],
    clean_runs: Any,
    tmp_path: Path,
) -> None:
    signum = SIGNALS[signame]
    before, after, duration = clean_runs(case)
    table = shutil.copytree(tables[case.base], tmp_path / "t", symlinks=True)
    versions_before = set(commit_versions(table))
    rng = random.Random(f"{case.name}-{signame}-{timing}")
    delay = None if timing == "at-commit" else rng.uniform(0.0, duration)
    code, err = _interrupted(case, table, signum, delay)
    new = set(commit_versions(table)) - versions_before
    if _before_dvtool_ran(code, err, signum):
        assert not new, (code, err)
    else:
        _check_exit(code, err, signum, new)
    rows = _rows(table)
    assert rows in (before, after)
    if code == 0:
        assert rows == after
    _ok(*_args(case, table))
    assert _rows(table) == after
