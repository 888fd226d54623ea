"""dvtool.render.box_table: the plain text of a table is, byte for byte, what rich prints
for its rich Table off a terminal; what it does not cover is NotPlain, never different."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvtool.render.box_table import BoxTable, Column, listing_lines, record_lines
from dvtool.render.plain_console import NotPlain, escape
from tests.rich_output import rich_off_terminal

WIDTH = 1_000_000  # wider than every table here: rich draws each whole


def _rich(table: BoxTable) -> str:
    return rich_off_terminal(lambda console: console.print(table.to_rich()))


def _table(
    rows: list[tuple[str, ...]],
    justify: tuple[Literal["left", "right"], ...] = ("left", "right"),
    show_header: bool = False,
    title: str = "Title",
    headers: tuple[str, ...] = ("a", "b"),
) -> BoxTable:
    columns = [Column(h, j) for h, j in zip(headers, justify, strict=True)]
    return BoxTable(title, columns, show_header=show_header, rows=rows)


CASES = {
    "counts": _table([("live files", "2"), ("size", "1,003 B"), ("DV files", "1 holding 1 DVs")]),
    "header": _table([("id", "long")], show_header=True, headers=("column", "type")),
    "header, no rows": _table([], show_header=True, headers=("column", "nullable")),
    "title wider than the table": _table([("a", "b")], title="Deleted ratio per file"),
    "empty cells": _table([("", ""), ("x", "")]),
    "empty bar": _table(
        [("no DV", "0", "[cyan][/]")], ("right", "right", "left"), headers=tuple("abc")
    ),
    "spaces around cells": _table([("  lead", "trail  "), (" both ", "  ")]),
    "right-justified trailing spaces": _table([("x", "5   "), ("y", "12")], ("right", "right")),
    "markup and escapes": _table(
        [(escape("[bold]x[/]"), escape("a\\b\\")), ("[bold]b[/]", escape("[1] [/x] \\\\["))]
    ),
    "wide characters": _table([("数据表", "テーブル"), ("é", "한국어 ＡＢ")], show_header=True),
    "CJK header": _table([("1", "2")], show_header=True, headers=("列", "类型")),
    "no title": _table([("a", "b")], title=""),
    "one column": BoxTable("T", [Column("only")], rows=[("x",), ("longer",)]),
    "fold column": BoxTable(
        "T", [Column("k"), Column("v", overflow="fold")], False, [("k", "v" * 300)]
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_plain_table_is_what_rich_prints(name: str) -> None:
    table = CASES[name]
    assert table.plain(WIDTH) == _rich(table)


def test_a_table_wider_than_the_console_is_not_plain() -> None:
    table = _table([("a" * 50, "b" * 50)])
    assert table.plain(107) == _rich(table)  # 50 + 50, 2 * 2 of padding, 3 bars
    with pytest.raises(NotPlain):
        table.plain(106)


@pytest.mark.parametrize(
    "table",
    [
        _table([]),  # no header, no rows: rich draws it as wide as the console
        BoxTable("T", [], rows=[()]),  # no columns: rich prints an empty line
        _table([("a",)]),  # a row short of cells
        _table([("tab\there", "x")]),
        _table([("new\nline", "x")]),
        _table([(":smile:", "x")]),
        _table([("[magenta]x[/]", "x")]),
        _table([("e\u0301", "x")]),
    ],
)
def test_what_plain_does_not_cover_is_not_plain(table: BoxTable) -> None:
    with pytest.raises(NotPlain):
        table.plain(WIDTH)


_CELL = st.lists(
    st.sampled_from(["a", "Z", "0", " ", "  ", "[", "]", "\\", ":", "é", "数", "bold", "/", "-"]),
    max_size=8,
).map("".join)


@st.composite
def _tables(draw: st.DrawFn) -> BoxTable:
    n = draw(st.integers(1, 4))
    columns = [
        Column(draw(_CELL), draw(st.sampled_from(["left", "right"])), "ellipsis") for _ in range(n)
    ]
    cell = _CELL.map(escape) if draw(st.booleans()) else _CELL
    rows = draw(st.lists(st.tuples(*[cell] * n), max_size=5))
    return BoxTable(draw(_CELL), columns, show_header=draw(st.booleans()), rows=rows)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tables())
def test_generated_tables_are_what_rich_prints(table: BoxTable) -> None:
    try:
        text = table.plain(WIDTH)
    except NotPlain:
        return
    assert text == _rich(table)


# -- wider than the output: records ---------------------------------------------------------

MAINTENANCE = BoxTable(
    "Maintenance",
    [Column(h) for h in ("table", "status", "compaction", "log cleanup")],
    rows=[
        ("lake/a-long-directory/newcomer/work/lake2/t", "[green]ok[/]", "would: 9 files -> 3", "-")
    ],
)


def test_a_table_that_fits_is_drawn_and_one_that_does_not_is_records() -> None:
    assert MAINTENANCE.text(200) == MAINTENANCE.plain(200)
    text = MAINTENANCE.text(40)
    assert text == (
        "Maintenance\n"
        "table: lake/a-long-directory/newcomer/\n"
        "       work/lake2/t\n"
        "  status:      ok\n"
        "  compaction:  would: 9 files -> 3\n"
        "  log cleanup: -\n"
    )
    assert MAINTENANCE.width() == len(MAINTENANCE.plain(200).splitlines()[1])


def test_records_of_a_table_without_header_are_key_value_lines() -> None:
    table = _table([("delta.enableDeletionVectors", "true"), ("comment", "x " * 30)])
    lines = table.text(40).splitlines()
    assert lines[:3] == ["Title", "delta.enableDeletionVectors:", "    true"]
    assert lines[3].startswith("comment: x x") and all(len(line) <= 40 for line in lines)
    assert " ".join(line.strip() for line in lines[3:]) == "comment: " + ("x " * 30).strip()


def test_record_lines_align_values_and_never_pass_the_width() -> None:
    pairs = [("path", "a/" * 40 + "f.parquet"), ("size", "4.2 KiB"), ("records", "1,000")]
    lines = record_lines(pairs, 30)
    assert max(map(len, lines)) <= 30
    assert lines[-2:] == ["  size:    4.2 KiB", "  records: 1,000"]
    assert lines[0].startswith("path: a/a/")
    assert "".join(line.strip() for line in lines[:-2]) == "path: " + "a/" * 40 + "f.parquet"


def test_a_listing_is_aligned_where_it_fits_and_records_where_not() -> None:
    header = ("size", "records", "path")
    rows = [("4.2 KiB", "333", "p=a/part-0.parquet"), ("12 B", "1", "p=b/part-1.parquet")]
    assert list(listing_lines(header, rows, 80)) == [
        "   size  records  path",
        "4.2 KiB      333  p=a/part-0.parquet",
        "   12 B        1  p=b/part-1.parquet",
    ]
    narrow = list(listing_lines(header, rows, 24))
    assert narrow[:3] == ["path: p=a/part-0.parquet", "  size:    4.2 KiB", "  records: 333"]
    assert max(map(len, narrow)) <= 24
