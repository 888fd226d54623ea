"""Running the CLI in tests: a runner with stderr apart, and the JSON error object's shape."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from dvtool.cli import cli


def cli_runner(columns: int = 80) -> CliRunner:
    """A runner that keeps stderr apart from stdout (click 8.1 needs mix_stderr=False)."""
    env = {"COLUMNS": str(columns), "NO_COLOR": "1"}
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False, env=env)  # type: ignore[call-arg]
    return CliRunner(env=env)


def run(*args: str | Path) -> Result:
    """`dvtool ARGS` in-process, named `dvtool` as the console script is; exceptions the CLI
    does not handle fail the test."""
    return cli_runner().invoke(
        cli, [str(a) for a in args], catch_exceptions=False, prog_name="dvtool"
    )


def run_wide(*args: str | Path) -> Result:
    """`run`, with lines as long as their content (COLUMNS=10000): for tests of what a line
    holds (a whole path, a whole message), not of how it fits a width."""
    return cli_runner(10_000).invoke(cli, [str(a) for a in args], catch_exceptions=False)


def all_output(result: Result) -> str:
    return result.stdout + result.stderr


def error_object(result: Result) -> dict[str, Any]:
    """The `{"error": {...}}` document of a failed `--json` run (the whole of stdout)."""
    doc = json.loads(result.stdout)
    assert list(doc) == ["error"], doc
    error: dict[str, Any] = doc["error"]
    assert set(error) == {"code", "kind", "message", "hint"}
    assert error["code"] == result.exit_code
    assert error["message"] and error["message"] in result.stderr
    return error
