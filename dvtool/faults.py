"""Fault injection for tests: crash or fail dvtool at a named step, chosen by `DVTOOL_FAULT`.

dvtool promises that a process killed or a storage call failing at any point leaves a table
that reads as before or after the command, and that running the command again finishes it.
The fault-injection tests prove that by setting, for one dvtool process,

    DVTOOL_FAULT="STEP[@N]:KIND[,STEP[@N]:KIND...]"

which fires KIND the N-th time (default the first) the process reaches STEP. Unset (as in
normal use) every hook is an environment lookup that finds nothing. With `DVTOOL_FAULT_LOG`
set to a file, each fault appends `STEP KIND` to it before it fires, so a test knows the
step was reached.

Steps reached through `Storage` (the call is classified by what it writes or deletes):

- `dv-file`: writing a deletion vector file (`*.bin`);
- `commit`: creating a commit file `_delta_log/<version>.json` (put-if-absent); for Iceberg,
  creating a path table's `metadata/vN.metadata.json` (put-if-absent) or a catalog's swap
  of the table's metadata location (`dvtool.iceberg.catalog_swap`);
- `checkpoint`: writing a checkpoint file (parquet, or a UUID-named JSON one);
- `last-checkpoint`: replacing `_delta_log/_last_checkpoint`;
- `manifest`: writing a file under `_symlink_format_manifest/`;
- `write`: any other whole-file write (e.g. `_last_vacuum_info`);
- `delete`: deleting one file (vacuum counts them: `delete@3:kill` stops after 3 of n).

Steps marked in the program flow:

- `data-files-written`: a command has written its new parquet files (rewrites,
  copy-on-write deletes), nothing of them is committed yet;
- `commit-temp-written`: local disk, the commit's temp file is written and fsynced, not
  yet linked to its final name;
- `commit-linked`: local disk, the commit is linked to its final name, before the fsync of
  the directory;
- `committed`: the commit landed and is known to be ours, before the post-commit hooks;
- `iceberg-metadata-written`: a catalog table's new metadata file is written, the catalog's
  swap not yet sent.

Kinds:

- `kill`: SIGKILL this process; at a storage step, right after the call succeeded;
- `fail`: the call fails before doing anything (an I/O error, not retried); at a program
  step, the command fails there;
- `half`: a write fails after writing half its bytes (on local disk they stay in a temp
  file beside the target, as a crash mid-write would leave them; object stores publish a
  PUT whole or not at all, so nothing stays there);
- `timeout`: the call succeeds but reports a timeout, like a lost response (retried by
  `Storage`; a commit is then recognised as ours by its txnId);
- `sigint`, `sigterm`: send that signal to this process (Ctrl-C, a CI cancellation); at a
  storage step, right after the call succeeded. What it stops is `dvtool.interrupts`'s to say.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from dvtool.errors import StorageError

ENV = "DVTOOL_FAULT"
LOG_ENV = "DVTOOL_FAULT_LOG"
STORAGE_STEPS = frozenset(
    {"dv-file", "commit", "checkpoint", "last-checkpoint", "manifest", "write", "delete"}
)
PROGRAM_STEPS = frozenset(
    {
        "data-files-written",
        "commit-temp-written",
        "commit-linked",
        "committed",
        "iceberg-metadata-written",
    }
)
KINDS = frozenset({"kill", "fail", "half", "timeout", "sigint", "sigterm"})
_SIGNALS = {"kill": signal.SIGKILL, "sigint": signal.SIGINT, "sigterm": signal.SIGTERM}

T = TypeVar("T")


class InjectedFault(OSError):
    """The error an injected `fail` or `half` raises (an I/O error, which is not retried)."""


class InjectedTimeout(TimeoutError):
    """The error an injected `timeout` raises after the call succeeded."""


@dataclass
class _Rule:
    step: str
    kind: str
    nth: int
    seen: int = 0


_parsed: tuple[str, list[_Rule]] = ("", [])
_counting = threading.Lock()


def parse(text: str) -> list[_Rule]:
    """The rules of a `DVTOOL_FAULT` value; ValueError naming the bad part."""
    rules = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        target, _, kind = part.partition(":")
        step, _, nth = target.partition("@")
        if step not in STORAGE_STEPS | PROGRAM_STEPS or kind not in KINDS:
            raise ValueError(f"bad {ENV} rule {part!r}: expected STEP[@N]:KIND")
        if nth and not nth.isdigit():
            raise ValueError(f"bad {ENV} rule {part!r}: N must be a positive integer")
        rules.append(_Rule(step, kind, int(nth or 1)))
    return rules


def _due(step: str) -> str | None:
    """The kind to inject now at `step`, counting this visit; None (nearly always) if none."""
    global _parsed
    text = os.environ.get(ENV, "")
    if not text:
        return None
    with _counting:  # steps run on IO threads too: each visit counts once
        if _parsed[0] != text:
            _parsed = (text, parse(text))
        for rule in _parsed[1]:
            if rule.step == step:
                rule.seen += 1
                if rule.seen == rule.nth:
                    _record(step, rule.kind)
                    return rule.kind
    return None


def _record(step: str, kind: str) -> None:
    """Append the fault about to fire to the `DVTOOL_FAULT_LOG` file, if one is set."""
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{step} {kind}\n")
            f.flush()
            os.fsync(f.fileno())


def reached(step: str) -> None:
    """Mark a program step: kill or fail here if a rule says so."""
    kind = _due(step)
    if kind in _SIGNALS:
        _signal(kind)
    elif kind is not None:
        raise StorageError(f"injected fault at step {step}")


def storage_call(step: str, call: Callable[[], T], half: Callable[[], None] | None = None) -> T:
    """Run the storage `call` of `step` with the fault a rule asks for, if any.

    `half` leaves half of the bytes of a write where a crash would leave them.
    """
    kind = _due(step)
    if kind is None:
        return call()
    if kind == "fail":
        raise InjectedFault(errno.EIO, f"injected fault: {step} failed")
    if kind == "half":
        if half is not None:
            half()
        raise InjectedFault(errno.ENOSPC, f"injected fault: {step} failed half-way")
    result = call()
    if kind in _SIGNALS:
        _signal(kind)
        return result
    raise InjectedTimeout(f"injected fault: {step} timed out (it succeeded)")


def half_temp_file(path: str, data: bytes) -> None:
    """Leave the first half of `data` in a dvtool temp file beside the local `path`."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f".tmp-{uuid.uuid4().hex}.dvtool"), "xb") as f:
        f.write(data[: len(data) // 2])


def _signal(kind: str) -> None:
    """Send this process the signal of `kind`; Python runs a handler for SIGINT/SIGTERM at
    the main thread's next instruction, as it would for a signal from outside."""
    os.kill(os.getpid(), _SIGNALS[kind])
