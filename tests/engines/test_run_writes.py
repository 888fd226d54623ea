"""`Engine.run_writes`, a format's own writes, without Spark: the arrow engine's thread pool,
and the Spark engine's task and driver functions (tasks.py) called as Spark calls them.

The Spark side is checked end to end on Iceberg tables in
tests/reference/test_iceberg_spark_engine.py; here: results come back in order, one per
item, and a task's failure - dvtool's own error, a module the executors' Python lacks -
becomes the driver's one-line `SparkEngineError` once every task has finished.
"""

from __future__ import annotations

import pickle

import pytest

from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.spark.failures import SparkEngineError
from dvtool.engines.spark.tasks import (
    items_table,
    run_writes_batches,
    run_writes_task,
    write_results,
)
from dvtool.errors import StorageError


def _square(item: int) -> dict[str, int]:
    return {"item": item, "square": item * item}


def _fails_on_three(item: int) -> int:
    if item == 3:
        raise StorageError("cannot write s3://bucket/x.parquet: denied")
    return item


def _needs_a_missing_module(item: int) -> int:
    import dvtool_not_installed_anywhere  # type: ignore[import-not-found]  # noqa: F401

    return item


def test_arrow_runs_every_item_in_order_with_progress() -> None:
    seen: list[int] = []
    results = ArrowEngine(threads=4).run_writes(_square, list(range(20)), seen.append)
    assert results == [_square(i) for i in range(20)]
    assert sum(seen) == 20


def _on_spark_tasks(write: object, items: list[int], per_task: int) -> list[tuple[object, ...]]:
    """The rows Spark collects: the pickled items split into tasks of `per_task`."""
    function = pickle.dumps(write)
    numbered = [(i, pickle.dumps(item)) for i, item in enumerate(items)]
    rows: list[tuple[object, ...]] = []
    for start in range(0, len(numbered), per_task):
        rows += run_writes_task(function, numbered[start : start + per_task])
    return rows


def test_spark_tasks_return_one_result_per_item_in_order() -> None:
    items = list(range(7))
    assert write_results(7, _on_spark_tasks(_square, items, 3)) == [_square(i) for i in items]
    batches = items_table([pickle.dumps(i) for i in items]).to_batches(max_chunksize=2)
    rows = [
        tuple(r.values())
        for out in run_writes_batches(pickle.dumps(_square), batches)
        for r in out.to_pylist()
    ]
    assert write_results(7, rows) == [_square(i) for i in items]


def test_a_task_error_is_raised_once_on_the_driver() -> None:
    rows = _on_spark_tasks(_fails_on_three, list(range(6)), 3)
    assert len(rows) == 4  # the task of items 3, 4 and 5 stopped at 3
    with pytest.raises(SparkEngineError, match=r"cannot write s3://bucket/x\.parquet: denied"):
        write_results(6, rows)


def test_a_module_the_executors_lack_is_named() -> None:
    rows = _on_spark_tasks(_needs_a_missing_module, [1], 1)
    with pytest.raises(SparkEngineError) as caught:
        write_results(1, rows)
    message = str(caught.value)
    assert "executors' Python cannot import dvtool_not_installed_anywhere" in message
    assert "\n" not in message


def test_a_missing_result_fails() -> None:
    rows = _on_spark_tasks(_square, [1, 2], 1)
    with pytest.raises(SparkEngineError, match="1 of 2"):
        write_results(2, rows[:1])
