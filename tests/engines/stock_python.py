"""A "stock" Python for Spark executors: a virtual environment with only pyarrow, pandas, numpy.

Real clusters' Python workers have what PySpark needs and nothing of dvtool's: no dvtool, no
pyroaring, sqlglot, fsspec, click or rich. The Spark tests that prove dvtool ships itself to
the executors (tests/engines/test_spark_stock.py) give the workers this interpreter instead
of the test venv's.

- `stock_python()` is the interpreter (`<dir>/bin/python`). The environment is built once
  (`python -m venv`, then `pip install --only-binary :all:` of the test venv's exact pyarrow,
  pandas and numpy versions, so that the Arrow IPC between driver and workers is that of a
  matched cluster) and cached across runs in `tempfile.gettempdir()/dvtool-stock-python-KEY`,
  KEY naming the Python version and the three package versions. It has the driver's Python
  version, as PySpark requires. A file lock serialises parallel builders (pytest-xdist), and
  a marker file written last says that a directory is complete.
- `clean_env()` is this process's environment without anything that would let the stock
  interpreter see the repository or the test venv (PYTHONPATH, PYTHONHOME, VIRTUAL_ENV, the
  venv's bin on PATH). The Spark processes whose Python workers must be stock run with it.

Every call in a process checks, in `clean_env()` and outside the repository, that the stock
interpreter imports pyarrow, pandas and numpy and can NOT import dvtool or its other
dependencies; a failure says what leaked.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.engines.spark_cluster import Server

PACKAGES = ("pyarrow", "pandas", "numpy")
# What the executors must not have: dvtool itself and its dependencies beyond PACKAGES.
FORBIDDEN = ("dvtool", "pyroaring", "pyiceberg", "sqlglot", "fsspec", "click", "rich")
MARKER = ".dvtool-stock-complete"
REPO = Path(__file__).resolve().parents[2]
PIP_OPTIONS = ("--disable-pip-version-check", "--only-binary", ":all:")
_LEAKY_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")

_PROBE = """
import importlib, json, sys
found = {}
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
        found[name] = None
    except Exception as exc:
        found[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix, "path": sys.path,
                  "version": list(sys.version_info[:2]), "imports": found}))
"""


def package_versions() -> dict[str, str]:
    """The test venv's versions of PACKAGES (the stock environment pins the same)."""
    return {name: importlib.metadata.version(name) for name in PACKAGES}


def cache_dir() -> Path:
    """The stock environment's directory: keyed by Python and package versions."""
    versions = package_versions()
    python = ".".join(map(str, sys.version_info[:3]))
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    key = "-".join([f"py{python}", digest, *(f"{n}{v}" for n, v in versions.items())])
    return Path(tempfile.gettempdir()) / f"dvtool-stock-python-{key}"


def clean_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: os.environ) without PYTHONPATH & co. and without this venv on PATH."""
    env = {k: v for k, v in (base if base is not None else os.environ).items()}
    for name in _LEAKY_VARS:
        env.pop(name, None)
    venv_bin = os.path.realpath(Path(sys.executable).parent)
    if sys.prefix != sys.base_prefix:
        path = env.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in path if p and os.path.realpath(p) != venv_bin)
    return env


@functools.cache
def stock_python() -> Path:
    """The stock interpreter, built (or found in the cache) and verified; see the module doc."""
    target = cache_dir()
    python = target / "bin" / "python"
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.with_name(target.name + ".lock")):
        if not (target / MARKER).exists():
            _build(target)
    verify(python)
    return python


def _build(target: Path) -> None:
    """Create the environment in `target` (replacing an incomplete one), marker last."""
    shutil.rmtree(target, ignore_errors=True)
    env = clean_env()
    started = time.monotonic()
    pins = [f"{name}=={version}" for name, version in package_versions().items()]
    steps = [
        [sys.executable, "-m", "venv", str(target)],
        [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", *PIP_OPTIONS, *pins],
    ]
    for args in steps:
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            raise RuntimeError(
                f"cannot build the stock Python in {target}: {' '.join(args)} exited "
                f"{done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
            )
    seconds = round(time.monotonic() - started, 1)
    (target / MARKER).write_text(json.dumps({**package_versions(), "build_seconds": seconds}))


def probe(python: Path, modules: tuple[str, ...]) -> dict[str, object]:
    """What `python` (in clean_env, outside the repository) reports: imports and sys.path."""
    with tempfile.TemporaryDirectory(prefix="dvtool-stock-probe-") as cwd:
        done = subprocess.run(
            [str(python), "-c", _PROBE, ",".join(modules)],
            capture_output=True,
            text=True,
            env=clean_env(),
            cwd=cwd,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"stock Python {python} does not run: {done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def verify(python: Path) -> None:
    """Fail loudly unless `python` is this Python version with PACKAGES and none of FORBIDDEN."""
    report = probe(python, PACKAGES + FORBIDDEN)
    imports: dict[str, str | None] = report["imports"]  # type: ignore[assignment]
    problems = [f"cannot import {n}: {imports[n]}" for n in PACKAGES if imports[n] is not None]
    problems += [f"{n} is importable, but must not be" for n in FORBIDDEN if imports[n] is None]
    if report["version"] != list(sys.version_info[:2]):
        problems.append(f"Python {report['version']}, but the driver runs {sys.version_info[:2]}")
    if problems:
        hint = f"\n(remove {cache_dir()} to rebuild it)" if cache_dir() in python.parents else ""
        raise RuntimeError(
            f"the stock Python {python} is not stock: {'; '.join(problems)}\n"
            f"sys.path: {report['path']}{hint}"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` for the block (waits for another builder)."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# -- the executors of a Spark server --------------------------------------------------------


def executor_report(master: str | None, remote: str | None, conf: dict[str, str]) -> dict[str, Any]:
    """What the executors' Python workers are: `sys.executable`, `sys.path`, PYTHONPATH and
    which of PACKAGES and FORBIDDEN they import, from a `mapInArrow` job of a plain session
    (dvtool ships nothing to it) on `master` or `remote`, 2 partitions.
    """
    from pyspark.sql import SparkSession

    names = list(PACKAGES + FORBIDDEN)

    # Nested, so that cloudpickle sends it by value: executors cannot import this module.
    def report(batches: Any) -> Any:
        import importlib
        import json
        import os
        import sys

        import pyarrow as pa

        for _ in batches:
            pass
        found: dict[str, str | None] = {}
        for name in names:
            try:
                importlib.import_module(name)
                found[name] = None
            except Exception as exc:
                found[name] = f"{type(exc).__name__}: {exc}"
        info = {
            "executable": sys.executable,
            "path": sys.path,
            "pythonpath": os.environ.get("PYTHONPATH"),
            "imports": found,
        }
        yield pa.record_batch([pa.array([json.dumps(info)])], names=["report"])

    builder = SparkSession.builder.appName("dvtool-test-probe")
    if remote:
        builder = builder.remote(remote)
    else:
        builder = builder.master(master or "local[1]")
        for key, value in conf.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        rows = spark.range(0, 2, 1, 2).mapInArrow(report, "report string").collect()
    finally:
        spark.stop()
    reports = [json.loads(row["report"]) for row in rows]
    return {"reports": reports}


def probe_executors(server: Server, workdir: Path) -> dict[str, Any]:
    """Check that `server`'s executors run its stock `worker_python` and cannot import any of
    FORBIDDEN (dvtool, pyroaring, ...) when nothing was shipped; their report.

    The probe runs in a child process in `server.driver_env()`, like a dvtool driver.
    """
    from tests.engines.spark_cluster import run_in_child

    assert server.worker_python is not None, "probe_executors is for stock servers"
    key = "remote" if server.url.startswith("sc://") else "master"
    workdir.mkdir(parents=True, exist_ok=True)
    result = run_in_child(
        {"probe": True, key: server.url}, workdir, worker_python=server.worker_python
    )
    reports = result["reports"]
    # Spark's own pyspark.zip and py4j may sit in this venv (SPARK_HOME is the pyspark
    # package); the repository and this venv's site-packages must not be on the path.
    leaks = {os.path.realpath(p) for p in (str(REPO), *site.getsitepackages())}
    problems = []
    for report in reports:
        imports = report["imports"]
        if report["executable"] != str(server.worker_python):
            problems.append(f"executor Python is {report['executable']}")
        absolute = [p for p in report["path"] if os.path.isabs(p)]  # "." is the executor's
        problems += [f"{p} on sys.path" for p in absolute if os.path.realpath(p) in leaks]
        problems += [f"executor cannot import {n}: {imports[n]}" for n in PACKAGES if imports[n]]
        problems += [f"executors import {n}" for n in FORBIDDEN if imports[n] is None]
    if not reports or problems:
        raise AssertionError(
            f"{server.name} executors are not stock ({server.worker_python}): "
            f"{sorted(set(problems)) or 'no reports'}\n{json.dumps(reports, indent=1)}"
        )
    return result


if __name__ == "__main__":
    began = time.monotonic()
    interpreter = stock_python()
    print(f"{interpreter} ({time.monotonic() - began:.1f} s)")
