"""What every command returns: a result object that is also the command's JSON document."""

from __future__ import annotations

import shlex
from typing import Any

from dvtool.errors import DvtoolError, exit_code_of


class CommandResult:
    """A command's result. `to_json()` is the document `--json` prints; `to_dict()` is the
    same dict under the name the Python API documents."""

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The dict `dvtool COMMAND --json` prints for this result (JSON types only)."""
        return self.to_json()


def table_error_json(
    command: str, location: str, error: DvtoolError | None, exception: Exception | None
) -> dict[str, Any] | None:
    """The `error` object of one table in a many-table result (`maintain`, `inspect -r`):
    a bug (exit 70) with its type, or the error with a hint that reruns `command` on it."""
    if exception is not None:
        return {
            "code": exit_code_of("internal"),
            "kind": "internal",
            "message": f"internal error, please report: {type(exception).__name__}: {exception}",
            "hint": "Run with -v for the traceback.",
        }
    if error is None:
        return None
    return error.with_fallback_hint(f"dvtool {command}", shlex.quote(location)).to_json()
