"""Box tables: a title over columns of cells in box characters, drawn by rich or as plain text.

A `BoxTable` holds what a table shows (cells are console markup). `to_rich()` makes the rich
Table of it; `plain()` draws, without importing rich, the text rich prints for that table on
dvtool's console off a terminal (no width limit, no colour), byte for byte, for the tables it
covers: a left-justified title, left- or right-justified columns, rich's default box (heavy
head) with a header row or its square box without one. Anything else raises `NotPlain`, and
the caller lets rich draw (tests/render/test_box_table.py holds the two equal).

A table wider than the output (`dvtool.render.plain_console.log_width` off a terminal, the
terminal's width on one) is never squeezed, cut or drawn past the edge: it is shown as
records instead (`records`), one block per row of `key: value` lines whose long values wrap
at spaces and `/` with an indent. `text(width)` picks one of the two; every renderer draws
its tables through it (or, on a terminal, `dvtool.render.renderer.Renderer.table`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from dvtool.render.plain_console import NotPlain, cell_width, plain, text_width, wrap

if TYPE_CHECKING:
    from rich.table import Table


_markup_text = plain  # (BoxTable.plain hides the name in the class)


class TooWide(NotPlain):
    """A table wider than the output: shown as records (`BoxTable.records`)."""


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
        squeeze the table into `max_width`, or for cells `dvtool.render.plain_console` does not
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
        if sum(widths) + len(widths) + 1 > max_width or cell_width(plain(self.title)) > max_width:
            raise TooWide("a table wider than the console")
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

    def text(self, width: int) -> str:
        """The table as `plain` draws it when it fits `width`, else its `records`; NotPlain
        for cells `dvtool.render.plain_console` does not know."""
        try:
            return self.plain(width)
        except TooWide:
            return self.records(width)

    def width(self, to_text: Callable[[str], str] = _markup_text) -> int:
        """The cells the drawn table takes across (its title included), its cells' markup
        read by `to_text`; a cell of several lines is as wide as its widest."""
        if not self.columns:
            return text_width(to_text(self.title))
        grid = [[c.header for c in self.columns]] if self.show_header else []
        grid += [list(row) for row in self.rows]
        widths = [
            max((_cell_width(to_text(row[i])) for row in grid if i < len(row)), default=0) + 2
            for i in range(len(self.columns))
        ]
        return max(sum(widths) + len(widths) + 1, _cell_width(to_text(self.title)))

    def records(self, width: int, to_text: Callable[[str], str] = _markup_text) -> str:
        """The table as records within `width`: the title, then per row a block of
        `header: cell` lines (the first flush left, the others indented); a table without a
        header row is one `first cell: other cells` line per row."""
        lines = wrap(to_text(self.title), width, "  ") if self.title else []
        headers = [to_text(c.header) for c in self.columns]
        for row in self.rows:
            cells = [to_text(cell) for cell in row]
            if self.show_header:
                lines += record_lines(list(zip(headers, cells, strict=False)), width)
            elif cells:
                lines += _field(
                    cells[0], "  ".join(cells[1:]), "", _key_cells(self, to_text), width
                )
        return "".join(line.rstrip() + "\n" for line in lines)


def _cell_width(text: str) -> int:
    return max(text_width(line) for line in text.split("\n"))


def _key_cells(table: BoxTable, to_text: Callable[[str], str]) -> int:
    """How wide the first cells of a table without header are (their values align)."""
    return max((text_width(to_text(row[0])) for row in table.rows if row), default=0)


def record_lines(pairs: Sequence[tuple[str, str]], width: int) -> list[str]:
    """One row as a record within `width`: `key: value` for each pair (text, no markup),
    the first (what the row is about) flush left, the others indented by two with their
    values aligned. A long value wraps at spaces and `/`, its next lines indented."""
    if not pairs:
        return []
    (lead_key, lead_value), fields = pairs[0], pairs[1:]
    lines = _field(lead_key, lead_value, "", 0, width)
    keys = max((text_width(k) for k, _ in fields), default=0)
    for key, value in fields:
        lines += _field(key, value, "  ", keys, width)
    return lines


# A listing aligns its columns to the widths of its first rows, then streams the rest.
ALIGNED_ROWS = 1000


def listing_lines(
    header: Sequence[str], rows: Iterable[Sequence[str]], width: int, key: str | None = None
) -> Iterator[str]:
    """The lines of a listing within `width`, written as they come (a listing of 300,000
    files never becomes one table in memory). When the header and the first rows fit: aligned
    columns, every one but the last right-aligned to the widths of the first rows, the last
    (a path) as wide as it is, wrapping under itself where a later row is longer. Else one
    record per row: the last column first (as `key`, default its header), the others under
    it. The cells are text (no markup)."""
    rows = iter(rows)
    first = list(itertools.islice(rows, ALIGNED_ROWS))
    widths = [max(len(r[i]) for r in [header, *first]) for i in range(len(header) - 1)]
    lead = sum(widths) + 2 * len(widths)
    if all(lead + text_width(r[-1]) <= width for r in [header, *first]):
        hang = " " * (lead if lead <= width // 2 else 4)
        for row in itertools.chain([header], first, rows):
            cells = [cell.rjust(w) for cell, w in zip(row, widths, strict=False)]
            yield from wrap(row[-1], width, hang, "".join(c + "  " for c in cells))
        return
    keys = [key or header[-1], *header[:-1]]
    for row in itertools.chain(first, rows):
        yield from record_lines(list(zip(keys, [row[-1], *row[:-1]], strict=True)), width)


def _field(key: str, value: str, indent: str, keys: int, width: int) -> list[str]:
    """`key: value` after `indent`, the value `keys + 2` cells after the indent where that is
    in the left half (else right after the key); continuation lines under the value, or
    indented by four where the value starts in the right half (then a key too long to share
    its line goes on a line of its own)."""
    prefix = f"{indent}{key}:" if key else indent
    aligned = len(indent) + keys + 2
    if key:
        prefix += " " * (max(aligned - text_width(prefix), 1) if aligned <= width // 2 else 1)
    if text_width(prefix) > width // 2:  # a key too long to share a line with its value
        return [
            *wrap(f"{key}:", width, indent + "    ", indent),
            *wrap(value, width, " " * 4, " " * 4),
        ]
    hang = " " * (text_width(prefix) if text_width(prefix) <= width // 2 else 4)
    return wrap(value, width, hang, prefix)


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
