"""Decimal-to-decimal casts in `--where` (`dvtool.predicate.casts`) against Python's Decimal.

Spark rounds a decimal cast to a smaller scale HALF_UP (half away from zero) and gives NULL
for a value that does not fit the target's integer digits (outside ANSI's error paths, which
`dvtool.predicate.ansi` handles). pyarrow's own rescaling is wrong for values near 2**63 and
2**64 when it drops many digits at once, so the values drawn here cluster around them.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvtool.predicate import casts
from dvtool.predicate.sqltypes import decimal

SRC = decimal(38, 18)
_EDGES = [2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**19 - 1, 10**20 - 1, 0, 1]


def _expected(value: Decimal, precision: int, scale: int) -> Decimal | None:
    with localcontext() as exact:
        exact.prec = 100
        rounded = value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        fits = abs(rounded) < Decimal(10) ** (precision - scale)
    return rounded if fits else None


def _cast(values: list[Decimal], precision: int, scale: int) -> list[Decimal | None]:
    table = pa.table({"x": pa.array(values, pa.decimal128(38, 18))})
    expression = casts._decimal_to_decimal(pc.field("x"), SRC, decimal(precision, scale))
    out = ds.dataset(table).to_table(columns={"y": expression}).column("y")
    return out.to_pylist()  # type: ignore[no-any-return]


_integer = st.one_of(
    st.sampled_from(_EDGES),
    st.integers(0, 10**20 - 1),
    st.sampled_from(_EDGES).flatmap(lambda e: st.integers(max(0, e - 1000), e + 1000)),
).filter(lambda i: i < 10**20)
_value = st.builds(
    lambda i, f, neg: (-1 if neg else 1) * (Decimal(i) + Decimal(f).scaleb(-18)),
    _integer,
    st.one_of(st.integers(0, 10**18 - 1), st.sampled_from([5 * 10**17, 5 * 10**17 - 1, 0])),
    st.booleans(),
)


@given(
    values=st.lists(_value, min_size=1, max_size=40),
    target=st.integers(0, 17).flatmap(lambda s: st.tuples(st.integers(max(s, 1), 38), st.just(s))),
)
def test_lowering_the_scale_rounds_half_up_exactly(
    values: list[Decimal], target: tuple[int, int]
) -> None:
    precision, scale = target
    assert _cast(values, precision, scale) == [_expected(v, precision, scale) for v in values]


@pytest.mark.parametrize(
    ("value", "scale", "expected"),
    [
        ("9223372036854775807", 1, "9223372036854775807.0"),  # pc.round gave ...5787.4
        ("18446744073709551615.5", 0, "18446744073709551616"),  # a rescale gave ...1458
        ("-0.05", 1, "-0.1"),
        ("99999999999999999999.96", 1, "100000000000000000000.0"),
    ],
)
def test_values_pyarrow_got_wrong(value: str, scale: int, expected: str) -> None:
    assert _cast([Decimal(value)], 38, scale) == [Decimal(expected)]
