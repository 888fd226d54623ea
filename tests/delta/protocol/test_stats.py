"""`numRecords` from `add.stats` texts, column-wise (fast regex path and exact JSON path) and
of one text (`num_records_of`, without pyarrow): every case checks that the two agree."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvtool.delta.protocol.stats import num_records, num_records_of


def one(text: str | None) -> int | None:
    """numRecords of `text`, after checking that both evaluations read the same."""
    result = num_records(pa.array([text], pa.string()))
    assert result.type == pa.int64()
    value = result[0].as_py()
    assert num_records_of(text) == value
    return value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"numRecords":10,"minValues":{"a":1},"maxValues":{"a":9}}', 10),
        ('{"numRecords":0}', 0),
        (' { "numRecords" : 7 , "tightBounds":true}', 7),
        ('{\n  "numRecords": 12\n}', 12),
        ('{"numRecords":9223372036854775807}', 2**63 - 1),
    ],
    ids=["leading", "zero", "spaces", "pretty-printed", "int64-max"],
)
def test_leading_num_records(text: str, expected: int) -> None:
    assert one(text) == expected


def test_num_records_not_first() -> None:
    text = json.dumps({"minValues": {"a": 1}, "numRecords": 42, "nullCount": {"a": 0}})
    assert one(text) == 42


def test_nested_field_called_num_records_is_not_confused() -> None:
    """A column called numRecords has stats inside minValues/maxValues/nullCount."""
    nested_only = json.dumps({"minValues": {"numRecords": 5}, "maxValues": {"numRecords": 9}})
    assert one(nested_only) is None
    both = json.dumps({"minValues": {"numRecords": 5}, "numRecords": 3, "nullCount": {}})
    assert one(both) == 3


@pytest.mark.parametrize(
    "text",
    [
        None,
        "not json",
        '{"numRecords":',
        "{",
        "null",
        "[1, 2]",
        '"numRecords"',
        '{"numRecords":null}',
        '{"numRecords":"12"}',
        '{"numRecords":1.5}',
        '{"numRecords":true}',
        '{"numRecords":-1}',
        '{"numRecords":99999999999999999999}',
        '{"minValues":{"a":1}}',
        "",
    ],
)
def test_absent_or_malformed_is_null(text: str | None) -> None:
    assert one(text) is None


def test_column_of_mixed_texts() -> None:
    texts = [
        '{"numRecords":1}',
        None,
        '{"minValues":{},"numRecords":2}',
        "garbage",
        '{"numRecords":3,"minValues":{}}',
        '{"minValues":{"numRecords":4}}',
    ]
    assert num_records(pa.array(texts, pa.string())).to_pylist() == [1, None, 2, None, 3, None]


def test_chunked_and_empty_inputs() -> None:
    chunked = pa.chunked_array([['{"numRecords":1}'], ['{"numRecords":2}', None]], pa.string())
    assert num_records(chunked).to_pylist() == [1, 2, None]
    assert num_records(pa.chunked_array([], pa.string())).to_pylist() == []
    assert num_records(pa.array([], pa.string())).to_pylist() == []
    assert num_records(pa.array([None, None], pa.string())).to_pylist() == [None, None]


# Whitespace RE2 and JSON agree on, and characters where Python's `\s` would differ from RE2's.
_SPACES = st.sampled_from([" ", "\t", "\n", "\r", "\f", "\v", "\u00a0", "\u2003", ""])
_DIGITS = st.sampled_from(["0", "7", "12", "٣", "1" * 18, "1" * 19, "-3", "1.0", "true"])


@given(
    st.lists(_SPACES, min_size=5, max_size=5),
    _DIGITS,
    st.sampled_from([",", "}", "]", ' "x":1}']),
)
def test_one_text_reads_as_the_column_does(spaces: list[str], number: str, tail: str) -> None:
    """Texts built around the fast pattern's edges: Unicode spaces and digits, 19 digits,
    signs and non-integers. The regex classes are spelled out so RE2 and `re` agree."""
    a, b, c, d, e = spaces
    one(f'{a}{{{b}"numRecords"{c}:{d}{number}{e}{tail}')
