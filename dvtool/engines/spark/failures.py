"""Spark's failures as dvtool errors: `SparkEngineError`, with Spark's message on one line.

Spark (through py4j, or gRPC for Spark Connect) raises its own exception types with
messages that span a JVM stack trace. The engine promises a `SparkEngineError` whose message
is the one line that says most - the exception a Python worker raised (the last line of the
Python traceback Spark's message carries), else Spark's own - while dvtool's own errors and
dvtool bugs still surface as themselves. When a Python worker could not import a module, the
error's hint says so: "executors cannot import X: ...". Spark's CAST_INVALID_INPUT (a
`--where` string that is no number, as `name > 5` reads it) is a PredicateError, as in the
arrow engine (dvtool.predicate.ansi).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from dvtool.errors import DvtoolError, PredicateError

_TRACEBACK = "Traceback (most recent call last):"
# The line that ends a Python traceback: `name: message` or a bare exception name, unindented.
_PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.]*(: |:?$)")
_JAVA_ERROR = re.compile(r"^[A-Za-z_.]*(Error|Exception): ")
_MISSING_MODULE = re.compile(r"^(?:ModuleNotFoundError|ImportError): No module named '([^'.]+)")
_MAX_CHARS = 500


class SparkEngineError(DvtoolError):
    """Spark could not run a scan or rewrite (the message carries Spark's own, on one line)."""


@contextlib.contextmanager
def spark_errors(action: str) -> Iterator[None]:
    """Turn Spark's (and py4j's) exceptions into a SparkEngineError with a one-line message."""
    try:
        yield
    except DvtoolError:
        raise
    except Exception as exc:
        top = type(exc).__module__.partition(".")[0]
        if top not in ("pyspark", "py4j", "grpc"):
            raise
        line = _one_line(exc)
        if "[CAST_INVALID_INPUT]" in line:  # --where read a string that is no number (ansi.py)
            raise PredicateError(
                f"cannot {action} with Spark: {line}",
                hint="compare the column with a string literal ('5', not 5), or cast it "
                "explicitly with try_cast, which reads invalid values as NULL",
            ) from exc
        raise SparkEngineError(f"cannot {action} with Spark: {line}", _hint(exc)) from exc


def _one_line(exc: BaseException) -> str:
    """The line of a Spark exception's message that says most, at most 500 characters."""
    text = str(exc)
    line = _worker_error(text)
    if line is None:
        # py4j puts the Java exception on a line of its own after ": ".
        lines = [line.strip().removeprefix(": ") for line in text.splitlines() if line.strip()]
        line = lines[0] if lines else type(exc).__name__
        for candidate in lines:
            if _JAVA_ERROR.match(candidate) and "JVM stacktrace" not in candidate:
                line = candidate
    return line if len(line) <= _MAX_CHARS else line[: _MAX_CHARS - 3] + "..."


def _worker_error(text: str) -> str | None:
    """The exception line of the last Python traceback in `text` (a Python worker's error)."""
    found = None
    inside = False
    for raw in text.splitlines():
        if raw.rstrip().endswith(_TRACEBACK):
            inside = True
        elif inside and raw[:1].strip() and _PYTHON_ERROR.match(raw):
            found = raw.strip()
            inside = False
    return found


def _hint(exc: BaseException) -> str | None:
    """For a Python worker that could not import a module: which, and what to do."""
    line = _worker_error(str(exc))
    missing = _MISSING_MODULE.match(line or "")
    if missing is None:
        return None
    name = missing.group(1)
    return (
        f"executors cannot import {name}: install it in the executors' Python environment "
        "(PYSPARK_PYTHON / spark.pyspark.python), or ship one (spark.archives)"
    )
