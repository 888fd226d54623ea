"""Fixtures for the Spark engine tests: Spark servers on 127.0.0.1, stopped by process id.

The helpers live in spark_cluster.py; pyspark is imported only when a fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.engines.spark_cluster import Server


@pytest.fixture
def spark_standalone(tmp_path: Path) -> Iterator[Server]:
    """A standalone master and one ALIVE worker; killed (process groups) afterwards."""
    from tests.engines.spark_cluster import start_standalone

    server = start_standalone(tmp_path / "standalone")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def spark_connect(tmp_path: Path) -> Iterator[Server]:
    """A Spark Connect server; killed (process group) afterwards."""
    from tests.engines.spark_cluster import start_connect

    server = start_connect(tmp_path / "connect")
    try:
        yield server
    finally:
        server.stop()
