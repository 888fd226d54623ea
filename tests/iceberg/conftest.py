"""The Iceberg fixture tables for the tests of this folder that read tables Iceberg's Spark
runtime wrote: `iceberg_spark` and `iceberg_tables` of tests/reference/conftest.py, which
builds them (see tests/reference/iceberg_tables.py). The tests that use them are marked
and grouped as that conftest marks its own (`reference_engines`, the xdist group of the
Iceberg and Paimon engines), so `pytest -n 2 --dist loadgroup` keeps them on one worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reference.conftest import iceberg_spark, iceberg_tables

__all__ = ["iceberg_spark", "iceberg_tables"]

HERE = Path(__file__).resolve().parent
ENGINE_FIXTURES = {"iceberg_spark", "iceberg_tables"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses_engine = ENGINE_FIXTURES & set(getattr(item, "fixturenames", ()))
        if uses_engine and Path(str(item.path)).resolve().parent == HERE:
            item.add_marker(pytest.mark.reference_engines)
            item.add_marker(pytest.mark.xdist_group("reference-iceberg-paimon"))
