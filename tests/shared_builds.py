"""Fixture files built once per test run and shared by its processes (the xdist workers).

A builder that starts a JVM (Spark writing parquet files, say) costs tens of seconds; with
`pytest -n 2` each worker that needs its output would otherwise run it again.
`shared_build(name, build)` runs `build(folder)` once per run: the first process to ask
builds under an exclusive lock (`fcntl.flock` on a file beside the folder) while the others
wait for it, then every process reads the finished folder, which is never modified. A build
that fails leaves nothing behind but its error, and the next process to ask builds again.

The folder is under the run's shared temporary root, set by tests/conftest.py
(`SHARED_ROOT`: the parent of the workers' base temp folders, pytest's own recipe for
sharing between workers). Outside pytest (`SHARED_ROOT` unset) each process builds into
a temporary folder of its own, removed when it exits.
"""

from __future__ import annotations

import atexit
import fcntl
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

SHARED_ROOT: Path | None = None
_DONE = ".built"
_built: dict[str, Path] = {}


def shared_build(name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` that `build(folder)` filled (it creates `folder`), built once per
    run; treat it as read-only."""
    if name in _built:
        return _built[name]
    if SHARED_ROOT is None:
        root = Path(tempfile.mkdtemp(prefix=f"dvtool-{name}-"))
        atexit.register(shutil.rmtree, root, True)
    else:
        root = SHARED_ROOT / "shared-builds"
        root.mkdir(parents=True, exist_ok=True)
    folder = root / name
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / _DONE).is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a failed build's leftovers
            build(folder)
            (folder / _DONE).touch()
    _built[name] = folder
    return folder
