"""The CLI's answer to a signal at the edges of a command: while its outcome is reported, and
when Python wraps the interrupt in another error. Found by the soak (scripts/soak.py
--signals), which sends real signals to dvtool processes; here the signal is sent by the
process to itself at the exact point, in-process through click's runner (main thread).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from deltalake import write_deltalake

import dvtool.commands.inspect.command as inspect_module
from dvtool.render.renderer import Renderer
from tests.cli_helpers import cli_runner, error_object
from tests.test_signals import _table


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    for _ in range(10_000):  # Python runs the handler at the next instructions
        pass


@pytest.fixture
def table(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    write_deltalake(str(root), _table(0))
    return root


def _invoke(*args: str | Path) -> Any:
    from dvtool.cli import cli

    return cli_runner().invoke(cli, [str(a) for a in args])


def test_a_signal_after_the_result_is_printed_keeps_exit_0(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result is out: the command has finished; one JSON document, exit 0."""
    real = Renderer.json

    def json_then_signal(self: Renderer, payload: Any) -> None:
        real(self, payload)
        _signal_self(signal.SIGTERM)

    monkeypatch.setattr(Renderer, "json", json_then_signal)
    result = _invoke("inspect", table, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["version"] == 0


def test_a_signal_while_an_error_is_reported_keeps_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Renderer.error

    def error_then_signal(self: Renderer, message: str) -> None:
        _signal_self(signal.SIGINT)
        real(self, message)

    monkeypatch.setattr(Renderer, "error", error_then_signal)
    result = _invoke("inspect", tmp_path / "missing", "--json")
    assert result.exit_code == 5
    assert error_object(result)["kind"] == "not-found"


def test_an_interrupt_wrapped_by_python_is_reported_as_the_interrupt(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python 3.11 wraps a KeyboardInterrupt raised while a class is created (a lazy import
    during the command) in "RuntimeError: Error calling __set_name__"; it is the signal, not
    a bug (exit 143, never 70)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from dvtool.interrupts import Terminated

        try:
            raise Terminated()
        except Terminated as stop:
            raise RuntimeError("Error calling __set_name__ on '_State' instance") from stop

    monkeypatch.setattr(inspect_module, "run_inspect", wrapped)
    result = _invoke("inspect", table, "--json")
    assert result.exit_code == 143, result.output
    error = error_object(result)
    assert error["kind"] == "terminated"
    assert "before committing" in error["message"]
