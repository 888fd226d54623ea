"""Shared test helpers: where the golden tables are, and copying one before a test writes.

The golden tables (`$DVTOOL_GOLDEN`, else `../shared/golden` beside the repository) are
read-only; CI always has them. Without them the run stops before collecting anything, with
one line saying where it looked, rather than failing every test that reads one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import shared_builds
from tests.oracles import GOLDEN, GOLDEN_ENV, copy_golden
from tests.s3_server import S3Server, moto_s3_server

__all__ = ["GOLDEN", "golden_copy", "s3_server"]
# The reference engines' sessions and fixture tables (Delta Spark, Iceberg, Paimon).
pytest_plugins = ["tests.reference.engine_fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    if not (GOLDEN / "INDEX.md").is_file():
        raise pytest.UsageError(
            f"golden tables not found at {GOLDEN} (no INDEX.md): set {GOLDEN_ENV} to the "
            "directory that holds them, or put shared/golden beside the repository"
        )


@pytest.fixture
def golden_copy(tmp_path: Path) -> Callable[[str], Path]:
    """`golden_copy(name)` copies golden table `name` (e.g. `dv-with-columnmapping/delta`)
    into `tmp_path` and returns the copy's root, so the test may modify it."""

    def copy(name: str) -> Path:
        return copy_golden(name, tmp_path / "golden")

    return copy


@pytest.fixture(scope="session", autouse=True)
def _shared_builds_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where `tests.shared_builds` puts what the run's processes share: the run's temp root
    (an xdist worker's base temp folder is one of its children)."""
    base = tmp_path_factory.getbasetemp()
    shared_builds.SHARED_ROOT = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto S3 server on 127.0.0.1 for the session (see tests/s3_server.py); tests use
    their own key prefixes in its bucket. Stopped when the session ends."""
    with moto_s3_server() as server:
        yield server


def _hypothesis_profiles() -> None:
    """Property tests draw the same examples on every run (`derandomize`: seeded by the
    test), so CI gates on a fixed set; `DVTOOL_HYPOTHESIS=explore` draws new ones, to hunt
    for differences deliberately (README, Development)."""
    import os

    from hypothesis import settings

    # No deadline: speed is measured in benchmarks, never in tests; a loaded CI machine made
    # a 200 ms per-example deadline fail a correct property (tests/delta/protocol/test_stats.py).
    settings.register_profile("ci", derandomize=True, database=None, deadline=None)
    settings.register_profile("explore", deadline=None)
    settings.load_profile("explore" if os.environ.get("DVTOOL_HYPOTHESIS") == "explore" else "ci")


_hypothesis_profiles()
