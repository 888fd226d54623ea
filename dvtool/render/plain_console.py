"""What rich prints off a terminal, produced without importing rich (~30 ms of start-up).

Off a terminal (CI logs, pipes, files) dvtool's rich console draws no colour and wraps nothing
(`dvtool.render.output._console`), so what it prints is plain text: console markup without its
styles, and tables of box characters (`dvtool.render.box_table`). This module gives that text for
the cases it knows, byte for byte what rich 15 prints, and raises `NotPlain` for anything else
(an unknown markup tag, a character whose width it does not know, a possible emoji code), so
that the caller hands that output to rich instead:

- `plain_stdout()`: stdout, when rich would see no terminal there and draw boxes of Unicode
  characters; None otherwise;
- `plain(markup)`: the text of console markup, as `rich.markup.render(markup).plain`;
- `cell_width(text)`: the cells `text` takes, as `rich.cells.cell_len`, for the characters
  whose width is the same in every Unicode version rich knows (Latin, Greek, Cyrillic,
  punctuation, currency, box drawing and blocks: 1; CJK ideographs, kana, Hangul syllables
  and fullwidth forms: 2).

It also holds the one width rule of human output (`log_width`) and the line breaking every
renderer uses to stay within it (`wrap`, `wrap_spans`): long values break at spaces, then
after a `/` (paths), and only then inside a word, continuation lines indented.

tests/render/test_plain_console.py holds these to rich: the widths against rich's tables of every
Unicode version, the markup and emoji rules against rich's parser and emoji names.
"""

from __future__ import annotations

import bisect
import builtins
import os
import re
import sys
from typing import TextIO


class NotPlain(ValueError):
    """Text this module cannot render as rich would: let rich render it."""


def escape(text: str) -> str:
    """`text` as console markup that shows it as is (no `[...]` taken for a style tag)."""
    return text.replace("[", r"\[")


# -- the console -------------------------------------------------------------------------------


def plain_stdout() -> TextIO | None:
    """sys.stdout if a rich console on it would find no terminal (rich's `Console.is_terminal`)
    and would draw Unicode boxes; None when rich must draw (a terminal, forced colour, Jupyter,
    IDLE, Windows, whose legacy console gets other boxes, or an encoding that is not UTF)."""
    file: TextIO | None = sys.stdout
    file = getattr(file, "rich_proxied_file", file)
    if file is None or sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return None
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    encoding = (getattr(file, "encoding", "utf-8") or "utf-8").lower()
    if not encoding.startswith("utf") or _is_terminal(file):
        return None
    return file


def _is_terminal(file: TextIO) -> bool:
    """rich's decision (`Console.is_terminal`, rich 15) from the environment and the file."""
    tty_compatible = os.environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "1"
    force_color = os.environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    isatty = getattr(file, "isatty", None)
    try:
        return False if isatty is None else bool(isatty())
    except ValueError:  # a closed file
        return False


def log_width() -> int:
    """How wide human output is off a terminal (CI logs, pipes, files): `COLUMNS` when it is
    a positive number, else `LOG_WIDTH`. A log viewer shows what fits its window; a line as
    wide as its content (a 1,461-column table) cannot be read in one. On a terminal rich
    decides the width (the terminal's, or `COLUMNS`)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return LOG_WIDTH


LOG_WIDTH = 120


# -- markup ------------------------------------------------------------------------------------

# rich.markup.RE_TAGS: a tag, with the backslashes before it.
_TAG = re.compile(r"""((\\*)\[([a-z#/@][^[]*?)])""")
# The styles dvtool's markup opens; any other tag goes to rich.
_STYLES = frozenset({"bold", "dim", "cyan", "yellow", "red", "green", "bold red"})


def plain(markup: str) -> str:
    """The text rich shows for console markup (styles dropped, as off a terminal), following
    rich.markup.render: tags removed, `\\[` shown as `[`, an even run of backslashes before a
    tag halved. Raises NotPlain for a tag not in _STYLES, a `[/]` closing nothing, a possible
    emoji code and characters `cell_width` does not know."""
    if "[" not in markup:
        return _text(markup)
    pieces: list[str] = []
    open_tags = 0
    position = 0
    for match in _TAG.finditer(markup):
        full_text, escapes, tag = match.groups()
        start, end = match.span()
        if start > position:
            pieces.append(_text(markup[position:start]))
        position = end
        if escapes:
            backslashes, escaped = divmod(len(escapes), 2)
            if backslashes:
                pieces.append("\\" * backslashes)
            if escaped:
                pieces.append(_text(full_text[len(escapes) :]))
                continue
        if tag in _STYLES:
            open_tags += 1
        elif tag.startswith("/") and "=" not in tag and not tag[1:].strip() and open_tags:
            open_tags -= 1
        else:
            raise NotPlain(f"markup tag [{tag}]")
    if position < len(markup):
        pieces.append(_text(markup[position:]))
    return "".join(pieces)


def _text(piece: str) -> str:
    """A piece of markup between tags as rich shows it: `\\[` is `[`, emoji codes (none,
    or NotPlain) replaced."""
    text = piece.replace("\\[", "[")
    _no_emoji(text)
    cell_width(text)  # NotPlain for characters of unknown width
    return text


# rich._emoji_replace: `:name:` or `:name-emoji:` / `:name-text:`, replaced when `name` (in
# lower case) is one of rich's emoji names.
_EMOJI_CODE = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
# Every character of rich's emoji names (tests/render/test_plain_console.py checks it): a name with
# any other character is no emoji.
_EMOJI_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-&().!#*+’ãåçéíô")
# The emoji names made of digits only.
_NUMERIC_EMOJI = frozenset({"100", "1234"})


def _no_emoji(text: str) -> None:
    """NotPlain if rich could replace an emoji code in `text`; times (`12:59:55`), URLs and
    paths have none."""
    for match in _EMOJI_CODE.finditer(text):
        name = match.group(2).lower()
        if may_be_emoji(name):
            raise NotPlain(f"possible emoji code {match.group(1)}")


def may_be_emoji(name: str) -> bool:
    """Whether `name` (lower case) may be one of rich's emoji names."""
    if not name or not _EMOJI_NAME_CHARACTERS.issuperset(name):
        return False
    return not name.isdigit() or name in _NUMERIC_EMOJI


# -- widths ------------------------------------------------------------------------------------

# (first, last, cells) of the code points whose width is the same in every Unicode version of
# rich's tables, sorted; any other character is NotPlain. Most 1-cell ranges are those rich
# itself takes as single cells (rich.cells._SINGLE_CELL_UNICODE_RANGES).
_WIDTHS = (
    (0x20, 0x7E, 1),  # ASCII without control characters
    (0xA0, 0xAC, 1),  # Latin-1 (not the soft hyphen, 0xAD)
    (0xAE, 0x2FF, 1),  # Latin-1, Latin extended, IPA, spacing modifiers
    (0x370, 0x482, 1),  # Greek, Cyrillic
    (0x2010, 0x2027, 1),  # dashes, quotation marks, bullets, ellipsis
    (0x2030, 0x205E, 1),  # per mille, primes, other punctuation
    (0x20A0, 0x20C0, 1),  # currency signs
    (0x2500, 0x25FC, 1),  # box drawing, block elements, geometric shapes
    (0x2800, 0x28FF, 1),  # Braille
    (0x3000, 0x3029, 2),  # CJK symbols and punctuation (0x302A-0x302F are combining)
    (0x3030, 0x303E, 2),
    (0x3041, 0x3096, 2),  # Hiragana (0x3099-0x309A are combining)
    (0x309B, 0x30FF, 2),  # kana marks, Katakana
    (0x4E00, 0x9FBB, 2),  # CJK unified ideographs of Unicode 4.1 (rich's oldest table)
    (0xAC00, 0xD7A3, 2),  # Hangul syllables
    (0xFF01, 0xFF60, 2),  # fullwidth forms
    (0xFFE0, 0xFFE6, 2),
)
_FIRSTS = tuple(first for first, _last, _cells in _WIDTHS)


def cell_width(text: str) -> int:
    """The cells `text` takes on a terminal, as rich measures it (`rich.cells.cell_len`);
    NotPlain for control characters and characters outside _WIDTHS."""
    if text.isascii():
        if not text.isprintable():
            raise NotPlain("control character")
        return len(text)
    return sum(_character_width(c) for c in text)


def _character_width(character: str) -> int:
    code = ord(character)
    index = bisect.bisect_right(_FIRSTS, code) - 1
    if index >= 0:
        _first, last, cells = _WIDTHS[index]
        if code <= last:
            return cells
    raise NotPlain(f"character U+{code:04X}")


def text_width(text: str) -> int:
    """The cells `text` takes: `cell_width`, or rich's measure for characters it does not
    know (rich is imported only then)."""
    try:
        return cell_width(text)
    except NotPlain:
        from rich.cells import cell_len

        return cell_len(text)


# -- line breaking -----------------------------------------------------------------------------

# A word (leading spaces of a paragraph belong to its first), and the pieces a word too long
# for a line breaks into: up to and with each run of slashes.
_WORD = re.compile(r"^ +[^ ]*|[^ ]+")
_PIECE = re.compile(r"/*[^/]+/*|/+")


# A space no line breaks at (between a number and its unit): shown as a space.
KEEP = "\u00a0"


def wrap(text: str, width: int, indent: str = "", first: str = "") -> list[str]:
    """`text` (no markup) in lines at most `width` cells wide: the first after `first`, the
    others after `indent`. Breaks at spaces (not at `KEEP`), then after a `/`, then inside a
    word; a line break in `text` starts a new line."""
    spans = wrap_spans(text, width - text_width(first), width - text_width(indent))
    text = text.replace(KEEP, " ")
    return [(indent if i else first) + text[start:end] for i, (start, end) in enumerate(spans)]


def wrap_spans(text: str, first_width: int, width: int) -> list[tuple[int, int]]:
    """Where each line of `text` starts and ends when its first line has `first_width` cells
    and the others `width` (at least 1 cell each: a wide character may still need 2)."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for paragraph in text.split("\n"):
        room = first_width if not spans else width
        spans += _paragraph_spans(paragraph, offset, max(room, 1), max(width, 1))
        offset += len(paragraph) + 1
    return spans


def _paragraph_spans(text: str, offset: int, first: int, rest: int) -> list[tuple[int, int]]:
    """Greedy: a word goes on the line if it fits, else on the next; a word longer than a
    line fills the line up to a `/`, then goes on, folded only where it has no `/` left."""
    spans: list[tuple[int, int]] = []
    line = _Line(first)
    for word in _WORD.finditer(text):
        gap = word.start() - line.end if line.used else 0
        cells = text_width(word.group())
        if line.used and line.used + gap + cells <= line.room:
            line.take(word.end(), gap + cells)
            continue
        if line.used and cells <= rest:
            spans.append(line.span(offset))
            line = _Line(rest, word.start())
            line.take(word.end(), cells)
            continue
        for piece in _PIECE.finditer(word.group()):
            at = word.start() + piece.start()
            part = piece.group()
            part_cells = text_width(part)
            if line.used and line.used + gap + part_cells <= line.room:
                line.take(at + len(part), gap + part_cells)
                gap = 0
                continue
            if line.used:
                spans.append(line.span(offset))
                line = _Line(rest, at)
            gap = 0
            while part_cells > line.room and len(part) > 1:  # no `/` left: fold
                cut = _fit(part, line.room)
                spans.append((offset + at, offset + at + cut))
                line = _Line(rest, at + cut)
                at, part = at + cut, part[cut:]
                part_cells = text_width(part)
            line.take(at + len(part), part_cells)
    spans.append(line.span(offset))
    return spans


class _Line:
    """The line being filled: `room` cells, text[start:end] taken, `used` cells of it."""

    def __init__(self, room: int, start: int = 0) -> None:
        self.room = room
        self.start = self.end = start
        self.used = 0

    def take(self, end: int, cells: int) -> None:
        self.end = end
        self.used += cells

    def span(self, offset: int) -> tuple[int, int]:
        return offset + self.start, offset + self.end


def _fit(piece: str, room: int) -> int:
    """How many characters of `piece` fit in `room` cells (at least one)."""
    used = 0
    for index, character in enumerate(piece):
        used += text_width(character)
        if used > room:
            return max(index, 1)
    return len(piece)
