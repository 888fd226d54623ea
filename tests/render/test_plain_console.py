"""dvtool.render.plain_console against rich itself: the widths it knows are rich's in every Unicode
version rich has tables for, its markup is rich's markup, its emoji rule misses no emoji name,
and it sees a terminal where rich does."""

from __future__ import annotations

import io
import itertools
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich._emoji_codes import EMOJI
from rich._unicode_data import load
from rich._unicode_data._versions import VERSIONS
from rich.cells import cell_len, get_character_cell_size
from rich.console import Console
from rich.markup import render

from dvtool.render.plain_console import (
    _EMOJI_NAME_CHARACTERS,
    _WIDTHS,
    NotPlain,
    cell_width,
    escape,
    log_width,
    may_be_emoji,
    plain,
    plain_stdout,
    wrap,
)


@pytest.mark.parametrize("version", VERSIONS)
def test_known_widths_are_rich_widths_in_every_unicode_version(version: str) -> None:
    assert load(version)  # the table exists
    measure = get_character_cell_size.__wrapped__  # type: ignore[attr-defined]
    wrong = [
        (hex(code), cells)
        for first, last, cells in _WIDTHS
        for code in range(first, last + 1)
        if measure(chr(code), version) != cells
    ]
    assert wrong == []


def test_widths_are_sorted_and_disjoint() -> None:
    assert all(a[1] < b[0] for a, b in itertools.pairwise(_WIDTHS))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain ascii",
        "café",
        "ßƒ",
        "Ωμέγα",
        "Привет",
        "数据表",
        "テーブル",
        "한국어",
        "ＡＢＣ",
        "█▌│┃",
        "– … € ’ •",
    ],
)
def test_cell_width_is_rich_cell_len(text: str) -> None:
    assert cell_width(text) == cell_len(text)


@pytest.mark.parametrize(
    "text",
    ["tab\there", "new\nline", "\x1b[31m", "e\u0301", "a\u200db", "🙂", "\u00ad", "\ud800", "\x85"],
)
def test_unknown_or_zero_widths_are_not_plain(text: str) -> None:
    with pytest.raises(NotPlain):
        cell_width(text)


def test_every_emoji_name_may_be_an_emoji() -> None:
    assert all(may_be_emoji(name) for name in EMOJI)
    assert set("".join(EMOJI)) == _EMOJI_NAME_CHARACTERS
    # Times, ports and paths are no emoji codes.
    assert not any(may_be_emoji(n) for n in ("59", "00", "//host", "c\\x", "", "a b"))


MARKUP = [
    "plain",
    "[bold]testId[/]  [dim]/tmp/t[/]",
    "version [bold]3[/]  committed 2024-05-01T12:59:55Z  (DELETE)",
    "[cyan]████[/]",
    "[cyan][/]",
    escape("[bold]not a tag[/]"),
    escape("a[b]c [1] [A] [#x] [@y] ["),
    escape("back\\slash \\ and \\[bold] and [/x]"),
    escape("ends with a backslash\\"),
    escape("two \\\\[dim] three \\\\\\[dim]"),
    escape("12:59:55 http://host:9000/p c:\\x:y"),
    "[bold]unclosed",
    escape("é 数据 ]]] [[["),
]


@pytest.mark.parametrize("markup", MARKUP)
def test_plain_is_rich_markup_without_styles(markup: str) -> None:
    assert plain(markup) == render(markup).plain


@pytest.mark.parametrize(
    "markup",
    [
        "[magenta]other style[/]",
        "[/]",
        "[bold]x[/bold]",
        "[link=http://x]x[/link]",
        escape("x\\[b]"),  # a backslash before `[` escapes the escape: [b] is a tag
        ":smile: and :thumbs_up-emoji:",
        "[bold]:a:[/]",
        "tab\t",
    ],
)
def test_other_markup_is_not_plain(markup: str) -> None:
    with pytest.raises(NotPlain):
        plain(markup)


_PIECES = st.sampled_from(
    ["[", "]", "\\", "/", ":", " ", "a", "bold", "dim", "cyan", "smile", "59", "é", "数", "=", "-"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join), st.booleans())
def test_plain_agrees_with_rich_on_generated_markup(text: str, escaped: bool) -> None:
    markup = escape(text) if escaped else text
    try:
        expected: Any = render(markup).plain
    except Exception:  # rich refuses it (MarkupError): plain must not accept it
        expected = NotPlain
    try:
        got: Any = plain(markup)
    except NotPlain:
        return
    assert got == expected


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("env", "tty"),
    [
        ({}, False),
        ({}, True),
        ({"FORCE_COLOR": "1"}, False),
        ({"FORCE_COLOR": ""}, True),
        ({"TTY_COMPATIBLE": "0"}, True),
        ({"TTY_COMPATIBLE": "1"}, False),
        ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, False),
        ({"TTY_COMPATIBLE": "x", "FORCE_COLOR": "1"}, False),
        ({"NO_COLOR": "1", "COLUMNS": "40"}, False),
    ],
)
def test_plain_stdout_exactly_where_rich_sees_no_terminal(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tty: bool
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = _Tty() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    rich_terminal = Console(highlight=False).is_terminal
    assert (plain_stdout() is None) == rich_terminal
    if not rich_terminal:
        assert plain_stdout() is out


def test_no_plain_stdout_for_other_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    out = io.TextIOWrapper(io.BytesIO(), encoding="latin-1")
    monkeypatch.setattr(sys, "stdout", out)
    assert plain_stdout() is None  # rich draws ASCII boxes there
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert plain_stdout() is sys.stdout


@pytest.mark.parametrize(
    ("columns", "width"), [(None, 120), ("80", 80), ("200", 200), ("", 120), ("x", 120), ("0", 120)]
)
def test_log_width_is_columns_else_120(
    monkeypatch: pytest.MonkeyPatch, columns: str | None, width: int
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert log_width() == width


def test_wrap_breaks_at_spaces_then_slashes_then_inside_words() -> None:
    text = "lake/t: purge: would rewrite 9 files /tmp/newcomer/work/lake2/a/part-0000000000.parquet"
    assert wrap(text, 30, "    ") == [
        "lake/t: purge: would rewrite 9",
        "    files /tmp/newcomer/work/",
        "    lake2/a/",
        "    part-0000000000.parquet",
    ]
    assert wrap("x" * 25, 10, "  ") == ["x" * 10, "  " + "x" * 8, "  " + "x" * 7]
    assert wrap("", 10) == [""]
    assert wrap("a\nb c", 3, " ") == ["a", " b", " c"]
    assert wrap("数据表数据", 5) == ["数据", "表数", "据"]  # two cells each
    # KEEP (a no-break space) holds a number and its unit together, and shows as a space.
    assert wrap("size=4.2\u00a0KiB, n=1", 14, " ") == ["size=4.2 KiB,", " n=1"]
    assert wrap("size=4.2 KiB, n=1", 10, " ") == ["size=4.2", " KiB, n=1"]


@given(st.text(alphabet="ab /-数", max_size=60), st.integers(4, 30))
@settings(max_examples=300, deadline=None)
def test_wrapped_lines_fit_and_keep_the_text(text: str, width: int) -> None:
    lines = wrap(text, width, "  ")
    assert all(cell_len(line) <= width for line in lines)
    kept = "".join(line.removeprefix("  ") if i else line for i, line in enumerate(lines))
    assert kept.replace(" ", "") == text.replace(" ", "")
