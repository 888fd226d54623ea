"""dvtool.box_table: the plain text of a table is, byte for byte, what rich prints for its rich
Table off a terminal; what it does not cover is NotPlain, never different."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvtool.box_table import BoxTable, Column
from dvtool.plain_console import NotPlain, escape
from tests.rich_output import rich_off_terminal

WIDTH = 1_000_000  # dvtool's console off a terminal (dvtool.render._UNLIMITED_WIDTH)


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
        _table([("[red]x[/]", "x")]),
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
