"""Predicate evaluation on arrow: where the work runs."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvtool.predicate import arrow

_SEEN: set[int] = set()


def _record_thread(ctx: Any, values: pa.Array) -> pa.Array:
    _SEEN.add(threading.get_ident())
    return pc.greater(values, 5)


def _register() -> str:
    name = "dvtool_test_record_thread"
    if name not in pc.list_functions():
        pc.register_scalar_function(
            _record_thread,
            name,
            {"summary": "records its thread", "description": ""},
            {"values": pa.int64()},
            pa.bool_(),
        )
    return name


def test_filter_table_runs_on_the_calling_thread() -> None:
    """No batch of the plan outlives `filter_table` on an arrow thread: a numpy-backed
    column released there after the command returned aborts the interpreter's exit
    (apache/arrow#36389). Checked by a UDF that records the threads evaluating it, over a
    table of many batches (acero would spread them over its pool)."""
    name = _register()
    _SEEN.clear()
    batches = [
        pa.record_batch([pa.array(np.arange(i * 1000, (i + 1) * 1000))], names=["x"])
        for i in range(64)
    ]
    table = pa.Table.from_batches(batches)
    kept = arrow.filter_table(table, pc.Expression._call(name, [pc.field("x")]))
    assert kept.num_rows == 64_000 - 6
    assert {threading.get_ident()} == _SEEN
