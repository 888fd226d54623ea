"""Spark's failures as dvtool errors: `SparkEngineError`, with Spark's message on one line.

Spark (through py4j, or gRPC for Spark Connect) raises its own exception types with
messages that span a JVM stack trace. The engine promises a `SparkEngineError` whose message
is the one line that says most - Spark's own, or the exception a Python worker raised - while
dvtool's own errors and dvtool bugs still surface as themselves.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from dvtool.errors import DvtoolError


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
        raise SparkEngineError(f"cannot {action} with Spark: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    """The line of a Spark exception's message that says most, at most 500 characters."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    # A Python worker's failure ends with the exception it raised: that line says most.
    text = lines[0] if lines else type(exc).__name__
    for line in lines:
        if re.match(r"^[A-Za-z_.]*(Error|Exception): ", line) and "JVM stacktrace" not in line:
            text = line
    return text if len(text) <= 500 else text[:497] + "..."
