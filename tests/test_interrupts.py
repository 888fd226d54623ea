"""dvtool.interrupts: which signals raise, which are held, with real signals sent to the
process (the tests run in the main thread, where Python runs signal handlers)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from dvtool import interrupts


def _send(signum: int) -> None:
    """Send `signum` to this process and give Python the chance to run its handler."""
    os.kill(os.getpid(), signum)
    for _ in range(100):
        time.sleep(0.001)


@pytest.fixture
def scope() -> Iterator[None]:
    with interrupts.command_scope():
        yield


@pytest.mark.usefixtures("scope")
def test_sigterm_stops_like_sigint_before_a_commit() -> None:
    with pytest.raises(interrupts.Terminated) as stopped:
        _send(signal.SIGTERM)
    assert interrupts.exit_code_for(stopped.value) == 143
    with pytest.raises(KeyboardInterrupt) as interrupted:
        _send(signal.SIGINT)
    assert not isinstance(interrupted.value, interrupts.Terminated)
    assert interrupts.exit_code_for(interrupted.value) == 130


@pytest.mark.usefixtures("scope")
def test_a_put_is_never_interrupted_and_the_signal_is_kept() -> None:
    with interrupts.deferred():
        _send(signal.SIGTERM)
        _send(signal.SIGINT)
    assert interrupts.received() == signal.SIGTERM  # the first one


@pytest.mark.usefixtures("scope")
def test_after_a_commit_signals_are_held_outside_interruptible_work() -> None:
    interrupts.after_commit(7)
    _send(signal.SIGINT)  # e.g. while the result is rendered: not raised
    assert interrupts.received() == signal.SIGINT
    with pytest.raises(KeyboardInterrupt), interrupts.interruptible():
        pytest.fail("a signal held before interruptible work stops it before it starts")
    assert interrupts.received() is None  # delivered once, as the exception
    with pytest.raises(interrupts.Terminated), interrupts.interruptible():
        _send(signal.SIGTERM)
    assert interrupts.landed() == (7,)


def test_scope_restores_the_previous_handlers() -> None:
    def mine(signum: int, frame: object) -> None:
        del signum, frame

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with interrupts.command_scope():
            assert signal.getsignal(signal.SIGTERM) is not mine
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("scope")
def test_library_calls_start_without_an_earlier_calls_signal() -> None:
    with interrupts.deferred():
        _send(signal.SIGINT)
    assert interrupts.received() == signal.SIGINT
    interrupts.begin_library_call()  # inside a command scope: kept
    assert interrupts.received() == signal.SIGINT


def test_outside_a_scope_handlers_are_set_only_while_deferred() -> None:
    default = signal.getsignal(signal.SIGINT)
    interrupts.begin_library_call()
    assert signal.getsignal(signal.SIGINT) is default
    with interrupts.deferred():
        assert signal.getsignal(signal.SIGINT) is not default
        _send(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is default
    assert interrupts.received() == signal.SIGINT
    interrupts.begin_library_call()
    assert interrupts.received() is None


@pytest.mark.usefixtures("scope")
def test_a_signal_python_cannot_raise_is_kept_for_the_next_check(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A signal handled inside a weakref callback or `__del__` (the import system has such
    callbacks) cannot raise there: Python would print a traceback and lose it; dvtool keeps
    it, and the next check stops the command."""

    class Finalized:
        def __del__(self) -> None:
            raise interrupts.Terminated()

    Finalized()  # collected at once: its __del__ raises where nothing can catch it
    assert interrupts.received() == signal.SIGTERM
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(interrupts.Terminated), interrupts.interruptible():
        pytest.fail("the kept signal stops the work before it starts")
