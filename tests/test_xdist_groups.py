"""The xdist groups the suite relies on reach the scheduler (`--dist loadgroup`).

The reference engines' fixtures (tests/reference/engine_fixtures.py) put every test that uses
an engine in a group, so that each JVM starts, and each fixture table set is built, once on
one worker. Two things have silently broken that before: pytest 9.2's node ids, which
xdist 3.8 no longer suffixes with the group (pytest-xdist#1386; the test extra pins
pytest<9.2), and the order of the hooks (the grouping hook must run before xdist's). This
runs the real plugin in a small project, with stand-ins for the engines' fixtures, and
checks that the grouped tests all ran on one worker with their group in the node id, and
that a self-contained Delta test is handed out before the plain tests collected before it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CONFTEST = """
import pytest

pytest_plugins = ["tests.reference.engine_fixtures"]


@pytest.fixture(scope="session")
def iceberg_tables():  # stands in for the engine-built tables
    return {}


@pytest.fixture(scope="session")
def delta_spark():  # stands in for the Delta Spark session of a self-contained story
    return None
"""

TESTS = """
import time

import pytest


@pytest.mark.parametrize("i", range(6))
def test_engine(i, iceberg_tables):
    time.sleep(0.2)


@pytest.mark.parametrize("i", range(6))
def test_plain(i):
    time.sleep(0.2)


def test_story(delta_spark):
    time.sleep(0.2)
"""


def test_engine_tests_share_one_worker(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST)
    (tmp_path / "tests" / "test_groups.py").write_text(TESTS)
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v"]
    done = subprocess.run(
        [*command, "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, test in re.findall(r"\[(gw\d)\] \[[ \d]+%\] PASSED (\S+)", done.stdout):
        workers[test.split("[")[0]].add(worker)
        if "test_engine" in test:
            assert test.endswith("@reference-iceberg-paimon"), test
    assert len(workers["tests/test_groups.py::test_engine"]) == 1, done.stdout
    assert len(workers["tests/test_groups.py::test_plain"]) >= 1
    # A self-contained Delta story, though collected last, is handed out before the plain
    # one-test units (so that a long one is never left for the end of a run).
    passed = re.findall(r"PASSED tests/test_groups\.py::test_(story|plain)", done.stdout)
    assert passed[0] == "story", done.stdout
