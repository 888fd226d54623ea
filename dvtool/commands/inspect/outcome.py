"""What a Delta and an Iceberg `inspect` result share: the exit code and the JSON document.

Both results (`command.InspectResult`, `iceberg.IcebergInspectResult`) hold a summary, the
live files, the history, a `--verify` report and the `--check` outcomes, each of its own
format's type; the exit code (6 on verify problems, else 3 on a failed gate) and the
document (the summary's keys, then `files`, `history`, `verify`, `checks` where asked for)
are one rule for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from dvtool.commands.inspect.checks import CheckOutcome
from dvtool.errors import exit_code_of


class JsonPart(Protocol):
    """A part of the result with its JSON form."""

    def to_json(self) -> dict[str, Any]: ...


class VerifyPart(JsonPart, Protocol):
    """A `--verify` report: `ok` when it found no problem."""

    @property
    def ok(self) -> bool: ...


def inspect_exit_code(verify: VerifyPart | None, checks: Sequence[CheckOutcome] | None) -> int:
    """6 (integrity) when `--verify` found problems, else 3 when a gate failed, else 0."""
    if verify is not None and not verify.ok:
        return exit_code_of("integrity")
    if checks and not all(c.passed for c in checks):
        return exit_code_of("check-failed")
    return 0


def inspect_document(
    summary: dict[str, Any],
    files: Sequence[JsonPart] | None,
    history: Sequence[JsonPart] | None,
    verify: VerifyPart | None,
    checks: Sequence[CheckOutcome] | None,
) -> dict[str, Any]:
    """The `--json` document: the summary's keys, then what else was asked for."""
    out = dict(summary)
    if files is not None:
        out["files"] = [f.to_json() for f in files]
    if history is not None:
        out["history"] = [h.to_json() for h in history]
    if verify is not None:
        out["verify"] = verify.to_json()
    if checks is not None:
        out["checks"] = [c.to_json() for c in checks]
    return out
