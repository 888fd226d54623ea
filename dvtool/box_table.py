"""Box tables: a title over columns of cells in box characters, drawn by rich or as plain text.

A `BoxTable` holds what a table shows (cells are console markup). `to_rich()` makes the rich
Table of it; `plain()` draws, without importing rich, the text rich prints for that table on
dvtool's console off a terminal (no width limit, no colour), byte for byte, for the tables it
covers: a left-justified title, left- or right-justified columns, rich's default box (heavy
head) with a header row or its square box without one. Anything else raises `NotPlain`, and
the caller lets rich draw (tests/test_box_table.py holds the two equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from dvtool.plain_console import NotPlain, cell_width, plain

if TYPE_CHECKING:
    from rich.table import Table


class Column(NamedTuple):
    """A column: its header (markup), how its cells align, how a cell too wide breaks."""

    header: str
    justify: Literal["left", "right"] = "left"
    overflow: Literal["fold", "ellipsis"] = "ellipsis"


class BoxTable:
    """A table with a left-justified title; rows of markup cells, one per column. (A plain
    class, as Column is a NamedTuple: a dataclass costs start-up, ~0.3 ms each.)"""

    def __init__(
        self,
        title: str,
        columns: Sequence[Column],
        show_header: bool = True,
        rows: list[tuple[str, ...]] | None = None,
    ) -> None:
        self.title = title
        self.columns = columns
        self.show_header = show_header
        self.rows: list[tuple[str, ...]] = [] if rows is None else rows

    def __repr__(self) -> str:
        return f"BoxTable({self.title!r}, {self.columns!r}, {self.show_header!r}, {self.rows!r})"

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def to_rich(self) -> Table:
        from rich.table import Table

        table = Table(title=self.title, show_header=self.show_header, title_justify="left")
        for c in self.columns:
            table.add_column(c.header, justify=c.justify, overflow=c.overflow)
        for row in self.rows:
            table.add_row(*row)
        return table

    def plain(self, max_width: int) -> str:
        """The lines rich prints for `to_rich()` on a console `max_width` wide that does not
        wrap (soft wrap), each ending with a newline. NotPlain when rich would have to
        squeeze the table into `max_width`, or for cells `dvtool.plain_console` does not
        know."""
        if not self.columns or (not self.rows and not self.show_header):
            raise NotPlain("a table without columns, or without rows and header")
        if any(len(row) != len(self.columns) for row in self.rows):
            raise NotPlain("a row without one cell per column")
        grid = [tuple(plain(cell) for cell in row) for row in self.rows]
        if self.show_header:
            grid.insert(0, tuple(plain(c.header) for c in self.columns))
        # Each column as wide as its widest cell, plus one space of padding either side.
        widths = [max(cell_width(row[i]) for row in grid) + 2 for i in range(len(self.columns))]
        if sum(widths) + len(widths) + 1 > max_width:
            raise NotPlain("a table wider than the console")
        box = _HEAVY_HEAD if self.show_header else _SQUARE
        lines = [plain(self.title)] if self.title else []
        lines.append(_rule(box.top, widths))
        for index, row in enumerate(grid):
            header = self.show_header and index == 0
            bar = box.head_vertical if header else box.vertical
            cells = (
                _justify(text, width - 2, c.justify)
                for text, width, c in zip(row, widths, self.columns, strict=True)
            )
            lines.append(bar + bar.join(f" {cell} " for cell in cells) + bar)
            if header:
                lines.append(_rule(box.head_row, widths))
        lines.append(_rule(box.bottom, widths))
        return "".join(line + "\n" for line in lines)


def _justify(text: str, width: int, justify: Literal["left", "right"]) -> str:
    """`text` in `width` cells, as rich justifies a line that fits (rich.containers.Lines)."""
    if justify == "left":
        return text + " " * (width - cell_width(text))
    text = text.rstrip()
    return " " * (width - cell_width(text)) + text


class _Rule(NamedTuple):
    """A horizontal line of a box: left corner, line, column divider, right corner."""

    left: str
    line: str
    divider: str
    right: str


class _Box(NamedTuple):
    """The parts of one of rich's boxes (rich.box) that a plain table uses."""

    top: _Rule
    head_vertical: str  # the edges and dividers of the header row
    head_row: _Rule  # under the header
    vertical: str  # the edges and dividers of the other rows
    bottom: _Rule


def _rule(rule: _Rule, widths: Sequence[int]) -> str:
    return rule.left + rule.divider.join(rule.line * w for w in widths) + rule.right


# rich.box.HEAVY_HEAD (a Table's default box) and rich.box.SQUARE (what a table without a
# header row draws instead: Box.get_plain_headed_box).
_HEAVY_HEAD = _Box(
    top=_Rule("┏", "━", "┳", "┓"),
    head_vertical="┃",
    head_row=_Rule("┡", "━", "╇", "┩"),
    vertical="│",
    bottom=_Rule("└", "─", "┴", "┘"),
)
_SQUARE = _Box(
    top=_Rule("┌", "─", "┬", "┐"),
    head_vertical="│",
    head_row=_Rule("├", "─", "┼", "┤"),
    vertical="│",
    bottom=_Rule("└", "─", "┴", "┘"),
)
