"""What every command returns: a result object that is also the command's JSON document."""

from __future__ import annotations

from typing import Any


class CommandResult:
    """A command's result. `to_json()` is the document `--json` prints; `to_dict()` is the
    same dict under the name the Python API documents."""

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The dict `dvtool COMMAND --json` prints for this result (JSON types only)."""
        return self.to_json()
