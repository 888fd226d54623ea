"""The `stats` JSON: the C encoder's fast path writes exactly the bytes of the reference writer.

`stats_json` sends statistics of built-in values (no decimal) through `json.JSONEncoder`
(a purge writes one per file); `_dump`, the reference, writes every value itself. Random
nested statistics with every kind of JSON value, keys and strings of any characters (controls,
quotes, backslashes, non-ASCII, supplementary planes, U+2028), floats of any magnitude and
sign (-0.0, subnormals, 1e300), integers past 64 bits: the two must agree byte for byte, and
refuse NaN and infinities alike.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.delta.protocol import stats_values
from dvtool.delta.protocol.stats_values import stats_json

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['"', "\\", "\u2028", "\x00\x1f\x7f", "\U0010ffff", "é", "/"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([-0.0, 0.0, 5e-324, 1e300, 0.1, 1e16, 1.5e-7])
    | TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.dictionaries(TEXT, inner, max_size=4) | st.lists(inner, max_size=3),
    max_leaves=20,
)
STATS = st.fixed_dictionaries(
    {"numRecords": st.integers(0, 2**63 - 1)},
    optional={
        "minValues": st.dictionaries(TEXT, VALUES, max_size=5),
        "maxValues": st.dictionaries(TEXT, VALUES, max_size=5),
        "nullCount": st.dictionaries(TEXT, st.integers(0, 10**6), max_size=5),
        "tightBounds": st.booleans(),
        "other": VALUES,
    },
)


def reference(stats: dict[str, Any]) -> str:
    ordered = {k: stats[k] for k in stats_values._STATS_KEY_ORDER if k in stats}
    ordered.update({k: v for k, v in stats.items() if k not in ordered})
    return stats_values._dump(ordered)


@settings(max_examples=300, deadline=None)
@given(STATS)
def test_fast_path_writes_the_reference_bytes(stats: dict[str, Any]) -> None:
    assert stats_values._plain(stats)
    text = stats_json(stats)
    assert text == reference(stats)
    assert json.loads(text) == json.loads(reference(stats))


def test_key_order_and_decimals() -> None:
    stats = {"tightBounds": True, "nullCount": {"a": 1}, "numRecords": 3}
    assert stats_json(stats) == '{"numRecords":3,"nullCount":{"a":1},"tightBounds":true}'
    with_decimal = {"numRecords": 1, "minValues": {"d": Decimal("-1.50"), "e": Decimal("1E+3")}}
    assert not stats_values._plain(with_decimal)
    assert stats_json(with_decimal) == '{"numRecords":1,"minValues":{"d":-1.50,"e":1000}}'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), Decimal("NaN")])
def test_nan_and_infinities_are_refused_on_both_paths(bad: Any) -> None:
    with pytest.raises(ValueError):
        stats_json({"numRecords": 1, "minValues": {"x": bad}})


class _Name(str):
    """A str subclass: not a plain value (its rendering could differ)."""


@pytest.mark.parametrize(
    "value",
    [{1: 2}, {"a": Decimal(1)}, {_Name("a"): _Name("b")}, {"a": (1, Decimal(2))}],
    ids=repr,
)
def test_what_is_not_plain_takes_the_reference_path(value: Any) -> None:
    stats = {"numRecords": 0, "other": value}
    assert stats_json(stats) == reference(stats)
