"""The soak's signals (see scripts/soak.py): SIGINT or SIGTERM sent to a random share of the
operations at a random moment (`SignalChooser`, `run_process`), what a stopped `dvtool` may
answer (`stop_point`); soak_report.py prints what the signals did (`print_signals`).

What dvtool promises (README "Failures, retries and crashes"), and so what `stop_point`
accepts from an operation that was sent signal S (exit code 128 + S: 130 for SIGINT, 143 for
SIGTERM):

- stopped before its commit was sent: exit 128 + S, the `--json` error of kind `interrupted`
  (SIGINT) or `terminated` (SIGTERM) with the message "interrupted (S) before committing: ...",
  which is also on stderr; its commit must not be in the log;
- stopped between two commits (vacuum's START and END, optimize's batches): exit 128 + S and
  "interrupted (S) after committing version(s) A, B; nothing after that was committed"; the
  versions named are claimed by the operation in the log checks (soak_checks.py), so a named
  version that is not its commit, or one of its commits it does not name, is a mismatch;
- a signal during the put is held and one after the commit landed is recorded: the
  operation exits 0 and reports its commit (classified "ok" and checked as any other);
- stopped while the interpreter itself starts (before dvtool's first line): killed by the
  signal's default action (exit -S), with at most Python's own `KeyboardInterrupt`
  traceback through import frames (the standard library's, `dvtool/__init__.py`,
  `dvtool/__main__.py`, but no other dvtool module), or exit 1 with Python's "Fatal Python
  error: init_import_site" and such a traceback (SIGINT while `site` imports); once
  `dvtool/__main__.py` set its handlers, exit 128 + S with no output or one "interrupted
  (S) before committing" line on stderr and nothing on stdout. Nothing was done then.

Anything else after a signal (another exit code, a message naming another signal, a
traceback through dvtool's code, output besides the error) is an unexpected failure.
"""

from __future__ import annotations

import random
import re
import signal
import statistics
import subprocess
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OPERATION_TIMEOUT_S = 600.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)
DEFAULT_TYPICAL_S = 1.5  # an operation kind's duration before a worker has timed one
# Delays, as shares of the kind's median duration: uniform over the whole run, or (half of
# them) over its end, where the commit and the post-commit work are.
WHOLE_RUN = (0.0, 1.25)
RUN_END = (0.6, 1.1)
RECENT_DURATIONS = 25  # the median is of this many latest unsignalled runs of the kind
# The wording after "before committing" is dvtool's to change; the versions are not.
STOP_MESSAGE = re.compile(
    r"interrupted \((?P<name>SIG[A-Z]+)\) (?:before committing(?:: [^\n]*)?"
    r"|after committing versions? (?P<versions>\d+(?:, \d+)*); nothing after that was committed)"
)
FILE_LINE = re.compile(r'^\s*File "([^"]+)"', re.MULTILINE)
# A frame of dvtool's own code other than the package's and `python -m`'s first lines.
DVTOOL_FRAME = re.compile(r"/dvtool/(?!__init__\.py$|__main__\.py$)")
SITE_FAILED = "Fatal Python error: init_import_site: Failed to import the site module"
STOP_KINDS: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
STOPPED = ("starting", "before commit", "after commit")


@dataclass(frozen=True)
class SignalPlan:
    """The signal to send to one operation, `delay` seconds after it started."""

    signum: int
    delay: float

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class SignalChooser:
    """A worker's signals: with probability `rate` an operation gets SIGINT or SIGTERM (even
    odds) after a delay drawn from the median duration m of that kind of operation in this
    worker so far: uniform in 0 .. 1.25 m, or half the time in 0.6 m .. 1.1 m, so that
    signals fall in every phase (the interpreter's start, planning, writing, the commit, the
    post-commit work, the exit) and often near the commits."""

    def __init__(self, rate: float, rng: random.Random) -> None:
        self.rate = rate
        self.rng = rng
        self.durations: defaultdict[str, list[float]] = defaultdict(list)

    def choose(self, kind: str) -> SignalPlan | None:
        if self.rate <= 0 or self.rng.random() >= self.rate:
            return None
        recent = self.durations[kind][-RECENT_DURATIONS:]
        typical = statistics.median(recent) if recent else DEFAULT_TYPICAL_S
        low, high = WHOLE_RUN if self.rng.random() < 0.5 else RUN_END
        delay = self.rng.uniform(low * typical, high * typical)
        return SignalPlan(self.rng.choice(SIGNALS), delay)

    def observe(self, kind: str, seconds: float, signalled: bool) -> None:
        if not signalled:
            self.durations[kind].append(seconds)


@dataclass
class Ran:
    """A finished process: exit code (negative: killed by that signal; -1 also for a
    timeout), output, and when the planned signal was sent (None: not sent, the process had
    already exited)."""

    code: int
    stdout: str
    stderr: str
    signal_sent: float | None = None


def run_process(argv: Sequence[str], plan: SignalPlan | None = None) -> Ran:
    """Run `argv` to its end, sending `plan`'s signal after its delay if it still runs."""
    started = time.monotonic()
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sent: float | None = None
    try:
        try:
            out, err = proc.communicate(timeout=None if plan is None else plan.delay)
        except subprocess.TimeoutExpired:
            assert plan is not None
            if proc.poll() is None:
                proc.send_signal(plan.signum)
                sent = time.monotonic() - started
            out, err = proc.communicate(timeout=OPERATION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Ran(-1, "", f"timed out after {OPERATION_TIMEOUT_S:.0f} s\n{err}", sent)
    return Ran(proc.returncode, out, err, sent)


def stop_point(
    signum: int, code: int, stdout: str, stderr: str, parsed: dict[str, Any]
) -> tuple[str, list[int]] | None:
    """How a process sent `signum` stopped, if that is one of the ways dvtool may stop:
    ("starting" | "before commit" | "after commit", the versions it says it committed);
    None otherwise (an unexpected failure)."""
    if not stdout and (code == -signum or (code == 1 and SITE_FAILED in stderr)):
        return ("starting", []) if interpreter_traceback(signum, stderr) else None
    if code != 128 + signum:
        return None
    if not stdout:  # dvtool/__main__.py's handler: dvtool's modules were still importing
        m = STOP_MESSAGE.fullmatch(stderr.strip().removeprefix("error: "))
        quiet = not stderr.strip() or (m is not None and m["name"] == signal.Signals(signum).name)
        return ("starting", []) if quiet and (m is None or m["versions"] is None) else None
    error = parsed.get("error") if set(parsed) == {"error"} else None
    if not isinstance(error, dict):
        return None
    message = str(error.get("message"))
    m = STOP_MESSAGE.fullmatch(message)
    if (
        m is None
        or m["name"] != signal.Signals(signum).name
        or error.get("code") != code
        or error.get("kind") != STOP_KINDS[signum]
        or message not in " ".join(stderr.split())
    ):
        return None
    if m["versions"] is None:
        return "before commit", []
    return "after commit", [int(v) for v in m["versions"].split(", ")]


def interpreter_traceback(signum: int, stderr: str) -> bool:
    """Whether `stderr` is what an interpreter stopped while starting prints: nothing, or
    (SIGINT) Python's KeyboardInterrupt traceback through no dvtool module but
    `dvtool/__init__.py` and `dvtool/__main__.py` (maybe after "Fatal Python error: ...")."""
    text = stderr.strip()
    if not text:
        return True
    lines = text.splitlines()
    if lines[0] == SITE_FAILED:
        lines = lines[2:] if lines[1].startswith("Python runtime state") else lines[1:]
    return (
        signum == signal.SIGINT
        and lines[0] == "Traceback (most recent call last):"
        and lines[-1] == "KeyboardInterrupt"
        and not any(DVTOOL_FRAME.search(f) for f in FILE_LINE.findall(text))
    )
