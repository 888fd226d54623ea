"""Per-file statistics (`add.stats`): `numRecords`, column-wise or of one stats text.

`numRecords` is what every DV computation needs (logical rows = numRecords - DV cardinality),
so it is extracted for all files at once: writers put it first in the JSON text, where an
anchored regex finds it (in C++, for a column); texts that do not match are decoded exactly
with `json`. `num_records_of` is the same rule for one text, without pyarrow: the pattern
spells its character classes out so that RE2 (pyarrow) and Python's `re` read it alike.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

# At most 18 digits always fits int64; longer numbers take the exact path (and its range check).
_SPACE = r"[\t\n\f\r ]*"
_LEADING_NUM_RECORDS = (
    rf'^{_SPACE}\{{{_SPACE}"numRecords"{_SPACE}:{_SPACE}(?P<n>[0-9]{{1,18}}){_SPACE}[,}}]'
)
_LEADING_NUM_RECORDS_RE = re.compile(_LEADING_NUM_RECORDS)
_INT64_MAX = 2**63 - 1


def num_records(stats: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`numRecords` of every stats text as int64; null where stats or the field is absent."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dvtool.arrays import arrow_values

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


def num_records_of(stats: str | None) -> int | None:
    """`numRecords` of one stats text, as `num_records` reads it; None if absent."""
    if stats is None:
        return None
    match = _LEADING_NUM_RECORDS_RE.match(stats)
    return int(match.group("n")) if match else _num_records_exact(stats)


def _num_records_exact(text: str) -> int | None:
    try:
        value = json.loads(text).get("numRecords")
    except (ValueError, AttributeError):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
        return None
    return value
