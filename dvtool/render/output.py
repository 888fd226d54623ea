"""The output every view draws with: lines and tables for people, or JSON.

With `--json`, stdout carries exactly one JSON document (the result's `to_json()`), so CI
scripts can pipe it to `jq`; progress and errors go to stderr. Without it, results are lines
of console markup (`say`), tables (`table`) and listings (`listing`), all within one width:
the terminal's on a terminal, `COLUMNS` or 120 off one
(`dvtool.render.plain_console.log_width`). A table that does not fit is shown as records
(`dvtool.render.box_table`); a long line wraps at spaces and `/` with an indent
(`dvtool.render.plain_console.wrap`).

Off a terminal the text is made without rich (`dvtool.render.plain_console`): rich's import
was most of the start-up of `dvtool inspect TABLE` on a small table (issue 12); rich draws
only what that text does not cover, and everything on a terminal (colours).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from dvtool import interrupts
from dvtool.render.box_table import BoxTable, listing_lines
from dvtool.render.plain_console import (
    KEEP,
    NotPlain,
    escape,
    log_width,
    plain,
    plain_stdout,
    text_width,
    wrap,
    wrap_spans,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

_UNSET: Any = object()


class Output:
    """Lines, tables and listings for people (within the output's width), or one JSON
    document: what every view draws with."""

    def __init__(
        self, as_json: bool = False, console: Console | None = None, limit: int | None = 20
    ) -> None:
        """`limit`: the most rows a human listing shows (None: all); JSON lists all.
        `console`: draw on it with rich (tests); else stdout, as text off a terminal."""
        self.as_json = as_json
        self._console = console
        self._err: Console | None = None
        self._plain: TextIO | None = _UNSET
        self.limit = limit

    @property
    def console(self) -> Console:
        """The rich console on stdout, made on first use (`_console`); a command that
        prints its result has finished (`interrupts.command_finished`)."""
        interrupts.command_finished()
        if self._console is None:
            self._console = _console(stderr=False)
        return self._console

    @property
    def err(self) -> Console:
        """The rich console on stderr (progress, errors, warnings), made on first use."""
        if self._err is None:
            self._err = _console(stderr=True)
        return self._err

    @property
    def plain_out(self) -> TextIO | None:
        """stdout when output is drawn as text without rich (off a terminal, no console
        given; `dvtool.render.plain_console.plain_stdout`), else None: rich draws. Asked for only
        to print a result: the command has finished (`interrupts.command_finished`)."""
        interrupts.command_finished()
        if self._plain is _UNSET:
            self._plain = None if self._console is not None else plain_stdout()
        return self._plain

    @property
    def width(self) -> int:
        """How wide a line may be: `COLUMNS` or 120 off a terminal, else the console's."""
        return log_width() if self.plain_out is not None else self.console.width

    # -- generic -------------------------------------------------------------------------

    def json(self, payload: Any) -> None:
        interrupts.command_finished()
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def error(self, message: str) -> None:
        # soft_wrap: never break a message (paths, hints) into lines at the console width.
        self.err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)

    def warn(self, message: str, label: str = "[yellow]warning:[/]") -> None:
        """A warning (or another `label`ed line) on stderr, never broken into lines."""
        self.err.print(f"{label} {escape(message)}", soft_wrap=True)

    def say(self, markup: str, indent: str = "  ") -> None:
        """A line of console markup within the width; what does not fit goes on next lines
        after `indent`, broken at spaces, then after a `/` (`dvtool.render.plain_console.wrap`)."""
        width = self.width
        out = self.plain_out
        if out is not None:
            try:
                text = plain(markup)
            except NotPlain:
                pass
            else:
                out.write("".join(line + "\n" for line in wrap(text, width, indent)))
                return
        from rich.text import Text

        spans = wrap_spans(Text.from_markup(markup).plain, width, width - text_width(indent))
        styled = Text.from_markup(markup.replace(KEEP, " "))  # the same text, KEEP a space
        for index, (start, end) in enumerate(spans):
            line = styled[start:end]
            self.console.print(Text(indent) + line if index else line, soft_wrap=True)

    def write(self, text: str) -> None:
        """Text already within the width (lines ending with a newline), as it is."""
        out = self.plain_out
        if out is not None:
            out.write(text)
        else:
            self.console.file.write(text)

    def table(self, table: BoxTable) -> None:
        """`table` if it fits the width, else its records (`dvtool.render.box_table`)."""
        width = self.width
        if self.plain_out is not None:
            try:
                self.write(table.text(width))
                return
            except NotPlain:
                pass  # cells only rich draws
        if table.width(_rich_text) <= width:
            self.console.print(table.to_rich())
        else:
            self.write(table.records(width, _rich_text))

    @contextmanager
    def progress(self, description: str) -> Iterator[Callable[[int], Callable[[int], None]]]:
        """Yields `start(total) -> advance(n)`; silent in JSON mode or off a terminal. The bar
        (and rich) comes with the first `start`: a command that shows none imports neither."""
        if self.as_json:
            yield lambda total: lambda n: None
            return
        with ExitStack() as stack:
            bars: list[Progress] = []

            def start(total: int) -> Callable[[int], None]:
                if not bars:
                    if not self.err.is_terminal:
                        return lambda n: None
                    bars.append(stack.enter_context(_progress_bar(description, self.err)))
                bar = bars[0]
                task = bar.add_task(description, total=total)
                return lambda n: bar.advance(task, n)

            yield start

    def listing(
        self,
        title: str,
        header: Sequence[str],
        rows: Iterable[Sequence[str]],
        total: int,
        noun: str,
        key: str | None = None,
    ) -> None:
        """Rows of text written as they come, aligned or as records within the width
        (`dvtool.render.box_table.listing_lines`; `key` names the last column in a record). At most
        `limit` rows, then one line saying how many were left out. Nothing at all when
        there are no rows: a title over nothing reads as a plan that lost its lines."""
        if total == 0:
            return
        shown = rows if self.limit is None else itertools.islice(rows, self.limit)
        counted = [0]

        def count(row: Sequence[str]) -> Sequence[str]:
            counted[0] += 1
            return row

        self.say(f"[bold]{escape(title)}[/]")
        for line in listing_lines(header, map(count, shown), self.width, key):
            self.write(line + "\n")
        left = total - counted[0]
        if left > 0:
            self.say(f"... {left:,} more {noun}; use --json or --limit 0 to list them all")


# stderr off a terminal: a message is one line however long (a path is never broken).
_UNLIMITED_WIDTH = 1_000_000


def _console(*, stderr: bool) -> Console:
    """A console for stdout or stderr: the terminal's width and colours on a terminal; off
    one, no colour and no markup styles, stdout `log_width()` wide (its lines come wrapped:
    rich wraps none, as it would break a table's title at the table's width)."""
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if console.is_terminal:
        return console
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=True,
        width=_UNLIMITED_WIDTH if stderr else log_width(),
        color_system=None,
        no_color=True,
    )


def _rich_text(markup: str) -> str:
    """The text rich shows for console markup (emoji codes replaced)."""
    from rich.text import Text

    return Text.from_markup(markup).plain


@contextmanager
def _progress_bar(description: str, console: Console) -> Iterator[Progress]:
    from rich.progress import (  # local: only a terminal shows progress
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        yield bar
