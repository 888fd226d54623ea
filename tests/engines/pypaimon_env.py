"""pypaimon, Paimon's Python reader and writer, as a test oracle in an environment of its own.

pypaimon cannot be a test dependency: 2.1 pins pyarrow<20, polars<2 and fsspec<2026, which
would downgrade ours (pyproject.toml). So, like the reference engines' jars, it lives in a
cache folder per machine: a virtual environment `pypaimon-VERSION-pyX.Y` beside the jars
(`cache_dir()` of tests/engines/jvm_engines.py, `$DVTOOL_JVM_CACHE`), made by `ensure()`
the first time a test (or `python -m tests.engines.jvm_engines fetch`, which CI runs before
pytest) needs it: `python -m venv --without-pip` and our pip installing `pypaimon==VERSION`
from PyPI into it (about 25 s and 580 MB with an empty pip cache: pypaimon brings pandas,
polars and pyarrow 19). A `.ready` marker is written last, so an interrupted install is
redone; a file lock keeps two test workers from installing at once.

`run(requests)` sends requests to tests/engines/pypaimon_worker.py in that environment's
Python (one process per call, about 1.5 s of imports) and returns the answers; `read(path,
snapshot)` is pypaimon's read of a table: its rows as Arrow and the files of its splits.
A request pypaimon refuses raises `PypaimonError` with pypaimon's exception and message.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.engines.jvm_engines import cache_dir

PYPAIMON_VERSION = "2.1.0"
WORKER = Path(__file__).resolve().with_name("pypaimon_worker.py")
INSTALL_TIMEOUT = 900.0
REQUEST_TIMEOUT = 300.0


class PypaimonError(Exception):
    """A request pypaimon refused: its exception's class and message."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message


def env_dir() -> Path:
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return cache_dir() / f"pypaimon-{PYPAIMON_VERSION}-{python}"


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    with open(cache_dir() / ".pypaimon.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure() -> Path:
    """The environment's Python, installing pypaimon first if this machine has not."""
    folder = env_dir()
    python = folder / "bin" / "python"
    if (folder / ".ready").exists():
        return python
    with _install_lock():
        if not (folder / ".ready").exists():
            shutil.rmtree(folder, ignore_errors=True)
            _install(folder)
            (folder / ".ready").write_text(PYPAIMON_VERSION)
    return python


def _install(folder: Path) -> None:
    """A venv without pip, and our pip installing pypaimon into it (pip's `--python`)."""
    steps = (
        [sys.executable, "-m", "venv", "--without-pip", str(folder)],
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(folder / "bin" / "python"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            f"pypaimon=={PYPAIMON_VERSION}",
        ],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        if done.returncode:
            raise RuntimeError(
                f"installing pypaimon {PYPAIMON_VERSION} into {folder} failed:"
                f" {' '.join(step[:4])}...\n{done.stderr[-3000:]}"
            )


def run(requests: list[dict[str, Any]]) -> list[Any]:
    """Each request's result, in order; PypaimonError for the first one refused."""
    answers = run_all(requests)
    for answer in answers:
        if not answer["ok"]:
            raise PypaimonError(answer["error"], answer["message"])
    return [a["result"] for a in answers]


def run_all(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each request's answer (`ok`, and `result` or `error` and `message`), in order."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(
        [str(ensure()), str(WORKER)],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        timeout=REQUEST_TIMEOUT,
        env=env,
    )
    if done.returncode:
        raise RuntimeError(f"the pypaimon worker failed:\n{done.stderr[-3000:]}")
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def read(path: Path | str, snapshot: int | None = None) -> tuple[pa.Table, dict[str, Any]]:
    """pypaimon's read of the table at `path` (at `snapshot`): its rows, and the files."""
    return read_many([(path, snapshot)])[0]


def read_many(
    tables: list[tuple[Path | str, int | None]],
) -> list[tuple[pa.Table, dict[str, Any]]]:
    """`read` of several tables (or snapshots) in one worker process."""
    with tempfile.TemporaryDirectory(prefix="dvtool-pypaimon-") as tmp:
        requests = [
            {"op": "read", "path": str(p), "snapshot": s, "arrow": f"{tmp}/{n}.arrow"}
            for n, (p, s) in enumerate(tables)
        ]
        results = run(requests)
        out = []
        for request, result in zip(requests, results, strict=True):
            with pa.memory_map(request["arrow"]) as source:
                out.append((pa.ipc.open_file(source).read_all(), result))
        return out


if __name__ == "__main__":
    print(ensure())
