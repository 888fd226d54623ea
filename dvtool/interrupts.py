"""SIGINT and SIGTERM around a commit: stop cleanly before it, never lose it after.

A writing command can be stopped by Ctrl-C (SIGINT) or by a CI cancellation (SIGTERM). What
that may do depends on where the command is:

- **before its commit is sent**, the signal stops the command: SIGINT raises
  `KeyboardInterrupt` as Python does, SIGTERM raises `Terminated` (a `KeyboardInterrupt`, so
  the same cleanup runs); the commit path deletes what the run wrote and the CLI exits 130 or
  143;
- **while the commit's put is in flight** (`deferred`), the signal is recorded, not raised:
  the put finishes and its answer is known;
- **after the commit landed** (`after_commit`), the signal is recorded again, except inside
  the optional post-commit work (`interruptible`: checkpoint, log cleanup, manifest refresh),
  which it stops; the commit is then reported as committed with a note that the rest was
  skipped. The command never says "interrupted" for a commit that landed.

Signal handlers can only be set in the main thread; elsewhere (a library call on a worker
thread) nothing here changes a handler, and the commit path relies on reading the log back
to tell whether an interrupted put landed. The handlers dvtool sets are removed again when
its `command_scope` (the CLI's) or its `deferred` block (a library call) ends.

This module does no IO.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM received: stops the command like Ctrl-C, with exit code 143."""


class _State:
    """Whether a signal raises now, the first one recorded, and the commits that landed.

    A signal is recorded instead of raised inside `deferred` blocks, and after a commit
    landed in this command scope except inside `interruptible` blocks.
    """

    def __init__(self) -> None:
        self.installed = False
        self.scoped = False
        self.reset()

    def reset(self) -> None:
        self.deferring = 0
        self.interruptible = 0
        self.received: int | None = None
        self.landed: list[int] = []
        self.finished = False

    def defers(self) -> bool:
        held = bool(self.landed) or self.finished
        return self.deferring > 0 or (held and self.interruptible == 0)


_state = _State()


def _handle(signum: int, frame: FrameType | None) -> None:
    if _state.defers():
        record(signum)
        return
    raise_for(signum)


def raise_for(signum: int) -> None:
    """Raise what `signum` stops a command with: `Terminated` or `KeyboardInterrupt`."""
    if signum == signal.SIGTERM:
        raise Terminated()
    raise KeyboardInterrupt()


def record(signum: int) -> None:
    """Remember `signum` (the first one only) to act on when raising is safe again."""
    if _state.received is None:
        _state.received = signum


def signum_of(error: BaseException) -> int:
    """The signal a `KeyboardInterrupt` stands for: SIGTERM for `Terminated`, else SIGINT."""
    return signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT


def signal_name(signum: int) -> str:
    """`SIGINT`, `SIGTERM`, ... for a signal number."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code_for(error: BaseException) -> int:
    """The exit code of a command stopped by `error`: 128 + the signal (130, 143)."""
    return 128 + signum_of(error)


def received() -> int | None:
    """The first signal recorded instead of raised (None: none was)."""
    return _state.received


def landed() -> tuple[int, ...]:
    """The versions committed in this command scope, oldest first."""
    return tuple(_state.landed)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def _handlers(then_ignore: bool = False) -> Iterator[None]:
    """Our handler on SIGINT and SIGTERM for the block, unless set already (main thread only);
    afterwards the previous handlers again, or with `then_ignore` none at all."""
    if _state.installed or not _main_thread():
        yield
        return
    previous: dict[int, Callable[..., Any] | int | None] = {}
    for signum in SIGNALS:
        previous[signum] = signal.getsignal(signum)
        signal.signal(signum, _handle)
    _state.installed = True
    try:
        yield
    finally:
        _state.installed = False
        for number, handler in previous.items():
            if then_ignore:
                handler = signal.SIG_IGN
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def _unraisable(
    previous: Callable[[Any], object],
) -> Callable[[Any], object]:
    """An unraisable-exception hook that keeps a signal raised where Python cannot raise (in
    a weakref callback of the import system, a `__del__`): recorded, to stop the command at
    its next check (`interruptible`, the put), instead of a traceback and a lost signal."""

    def hook(unraisable: Any) -> object:
        error = getattr(unraisable, "exc_value", None)
        if isinstance(error, KeyboardInterrupt):
            record(signum_of(error))
            return None
        return previous(unraisable)

    return hook


@contextmanager
def command_scope(process_exits: bool = False) -> Iterator[None]:
    """One CLI command: SIGTERM stops it like SIGINT (`Terminated`), a fresh record of
    signals and landed commits, and the previous handlers back when it ends. With
    `process_exits` (the entry point) signals are ignored once it ends: the command is over,
    and a signal now must not turn it into a killed one (exit 130 after a commit landed)."""
    if _state.scoped:  # the entry point's scope holds the group's
        yield
        return
    _state.reset()
    _state.scoped = True
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(previous_hook)
    try:
        with _handlers(then_ignore=process_exits):
            yield
    finally:
        sys.unraisablehook = previous_hook
        _state.scoped = False
        _state.reset()  # nothing of this command carries over to a next one in the process


def begin_library_call() -> None:
    """A call of the Python API begins: outside a command scope, a fresh record of signals
    and landed commits (a Ctrl-C held during an earlier call's put must not stop this one)."""
    if not _state.scoped:
        _state.reset()


@contextmanager
def deferred() -> Iterator[None]:
    """Signals arriving inside are recorded (`received`), not raised: a commit's put runs
    to its answer. A signal recorded stays recorded after the block."""
    with _handlers():
        _state.deferring += 1
        try:
            yield
        finally:
            _state.deferring -= 1


def after_commit(version: int) -> None:
    """Commit `version` landed: from now on in this command scope signals are recorded, not
    raised, except in `interruptible` blocks, so nothing reports the command as stopped."""
    _state.landed.append(version)


def command_finished() -> None:
    """The command's outcome is known and being reported (its result or its error): from now
    on in this command scope signals are recorded, not raised, so the report is never cut
    short or followed by a second one, and the exit code stays the outcome's."""
    _state.finished = True


@contextmanager
def interruptible() -> Iterator[None]:
    """Work that a signal may stop even after a commit landed (post-commit hooks, the next
    step of a multi-commit command): a signal recorded before raises at once, and one
    arriving inside raises."""
    _state.interruptible += 1
    try:
        signum = _state.received
        if signum is not None and _state.deferring == 0:
            _state.received = None  # delivered now, as the exception
            raise_for(signum)
        yield
    finally:
        _state.interruptible -= 1
