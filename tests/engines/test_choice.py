"""`choose_engine`: what `--engine auto|arrow|spark` resolves to, with and without the
optional `spark` extra installed (simulated by hiding its packages from the import system)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from dvtool.engines import SparkSettings, choose_engine
from dvtool.engines.arrow import ArrowEngine
from dvtool.errors import UsageError


@pytest.fixture
def without_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "pandas" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_auto_stays_on_arrow_below_the_threshold() -> None:
    assert isinstance(choose_engine("auto", SparkSettings(), 10, threshold=100), ArrowEngine)


def test_auto_uses_spark_above_the_threshold() -> None:
    chosen = choose_engine("auto", SparkSettings(), 1000, threshold=100)
    assert chosen.name == "spark"


@pytest.fixture
def without_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "pyspark" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.usefixtures("without_pyspark")
def test_spark_without_the_extra_says_what_to_install() -> None:
    with pytest.raises(UsageError, match=r"needs pyspark") as caught:
        choose_engine("spark", SparkSettings())
    assert "dvtool[spark]" in (caught.value.hint or "")
    with pytest.raises(UsageError, match="needs pyspark"):
        choose_engine("auto", SparkSettings(master="local[1]"))


@pytest.mark.usefixtures("without_pyspark")
def test_auto_over_the_threshold_without_the_extra_stays_on_arrow() -> None:
    assert isinstance(choose_engine("auto", SparkSettings(), 1000, threshold=100), ArrowEngine)


@pytest.mark.usefixtures("without_pandas")
def test_pandas_is_needed_for_connect_and_for_scans_only() -> None:
    with pytest.raises(UsageError, match="needs pandas"):
        choose_engine("spark", SparkSettings(remote="sc://127.0.0.1:1"))
    local = choose_engine("spark", SparkSettings(master="local[1]"))
    assert local.name == "spark"  # rewrites on a local session need no pandas
    with pytest.raises(UsageError, match="scan on Spark needs pandas"):
        local.find_matches(None, [object()], None)  # type: ignore[arg-type]


def test_unknown_engine_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--engine must be one of"):
        choose_engine("duckdb", SparkSettings())
