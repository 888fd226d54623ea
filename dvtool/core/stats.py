"""Per-file statistics (`add.stats`), read column-wise.

`numRecords` is what every DV computation needs (logical rows = numRecords - DV cardinality),
so it is extracted for all files at once: writers put it first in the JSON text, where an
anchored regex finds it in C++; texts that do not match are decoded exactly with `json`.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.core import arrow_values

# At most 18 digits always fits int64; longer numbers take the exact path (and its range check).
_LEADING_NUM_RECORDS = r'^\s*\{\s*"numRecords"\s*:\s*(?P<n>\d{1,18})\s*[,}]'
_INT64_MAX = 2**63 - 1


def num_records(stats: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`numRecords` of every stats text as int64; null where stats or the field is absent."""
    stats = arrow_values.combined(stats)
    matched = pc.struct_field(pc.extract_regex(stats, _LEADING_NUM_RECORDS), "n")
    fast = pc.cast(matched, pa.int64())
    missed = pc.and_(pc.is_valid(stats), pc.is_null(fast))
    if not pc.any(missed).as_py():
        return fast
    values = fast.to_pylist()
    texts = stats.to_pylist()
    for i in pc.indices_nonzero(missed).to_pylist():
        values[i] = _num_records_exact(texts[i])
    return arrow_values.array(values, pa.int64())


def _num_records_exact(text: str) -> int | None:
    try:
        value = json.loads(text).get("numRecords")
    except (ValueError, AttributeError):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
        return None
    return value
