"""Byte sizes as the CLI and table properties take them (`dvtool.byte_size`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvtool.byte_size import parse_byte_size

KIB = 1024


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("268435456", 268435456),
        ("0", 0),
        ("2b", 2),
        ("512k", 512 * KIB),
        ("512KB", 512 * KIB),
        ("256MB", 256 * KIB**2),
        ("256mb", 256 * KIB**2),  # Databricks' spelling of delta.targetFileSize
        ("256MiB", 256 * KIB**2),
        ("1GiB", KIB**3),
        ("1g", KIB**3),
        ("2T", 2 * KIB**4),
        ("1.5GB", 3 * KIB**3 // 2),
        (" 10 MB ", 10 * KIB**2),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_byte_size(text) == size


@pytest.mark.parametrize(
    "text", ["", "MB", "1.5", "-1", "12xb", "ib", "1iB", "1 i", "1e3", "1,000"]
)
def test_not_sizes(text: str) -> None:
    with pytest.raises(ValueError, match=r"size|whole number"):
        parse_byte_size(text)


@given(
    st.integers(0, 2**40), st.sampled_from(["k", "m", "g", "t"]), st.sampled_from(["", "b", "ib"])
)
def test_units_are_powers_of_1024_in_any_case(n: int, unit: str, suffix: str) -> None:
    power = "kmgt".index(unit) + 1
    assert parse_byte_size(f"{n}{unit}{suffix}") == n * KIB**power
    assert parse_byte_size(f"{n}{unit.upper()}{suffix.upper()}") == n * KIB**power
