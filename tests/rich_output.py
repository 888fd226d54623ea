"""What rich prints off a terminal: dvtool's stdout console (`dvtool.render.output._console`) made
with stdout redirected to a string, colour not forced, so it is the console a pipe gets,
`width` columns wide (`COLUMNS`, as dvtool.render.plain_console.log_width reads it)."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from unittest import mock

from rich.console import Console

from dvtool.render.output import _console

_FORCING = ("FORCE_COLOR", "TTY_COMPATIBLE")
WIDE = 1_000_000  # wider than any table of the tests: rich draws every one


def rich_off_terminal(draw: Callable[[Console], object], width: int = WIDE) -> str:
    """What `draw(console)` prints on dvtool's off-terminal stdout console `width` wide."""
    out = io.StringIO()
    environ = {k: v for k, v in os.environ.items() if k not in _FORCING}
    environ["COLUMNS"] = str(width)
    with mock.patch.dict(os.environ, environ, clear=True), contextlib.redirect_stdout(out):
        console = _console(stderr=False)
        assert not console.is_terminal and console.width == width
        draw(console)
    return out.getvalue()
