"""dvtool ships itself: its own pure-Python package, zipped, added to the Spark session.

Executors run dvtool code (the scan's and the rewrite's tasks). So that they need no dvtool
installed - only its dependencies (pyarrow, numpy) - the engine adds dvtool's package to every
session it uses, once: the session it created, one the user passed in, or the one
spark-submit's driver runs. Python workers then import dvtool from the zip (PySpark puts
python files ahead of site-packages on the workers' `sys.path`, so the executors run the
driver's exact dvtool even when another version is installed there).

The zip (`package_zip()`) holds the `.py` files of the installed `dvtool` package directory
under `dvtool/` (no `__pycache__`), with fixed timestamps and order, so the same code gives
the same bytes; its name carries a hash of them (`dvtool-<version>-<hash>.zip`). Spark
refuses a file whose name it knows with other content, and content-hashed names never meet
that. The zip is built once per process in dvtool's temporary directory (`temp_dir()`,
removed at exit).

Classic sessions get it with `sparkContext.addPyFile` (the files belong to the SparkContext,
which all its sessions share), Spark Connect sessions with `addArtifacts(..., pyfile=True)`
(artifacts belong to the server-side session). `ship(spark)` remembers, per process, the
contexts and Connect sessions it shipped to and skips them afterwards; a classic context
that already lists the zip among its Python files is not given it again either.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import io
import shutil
import tempfile
import threading
import weakref
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dvtool

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_lock = threading.Lock()
# SparkContexts (classic) and Connect sessions dvtool was added to, by this process.
_shipped: weakref.WeakSet[Any] = weakref.WeakSet()


@functools.lru_cache(maxsize=1)
def temp_dir() -> Path:
    """dvtool's temporary directory for this process (the zip, the JVM's log); removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="dvtool-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def package_dir() -> Path:
    """The directory of the installed `dvtool` package (the one this process imported)."""
    return Path(dvtool.__file__).resolve().parent


def zip_bytes(root: Path | None = None) -> bytes:
    """The deterministic zip of the `.py` files under `root` (default: dvtool's package)."""
    root = root or package_dir()
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.relative_to(root).parts)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            name = "/".join(("dvtool", *path.relative_to(root).parts))
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


@functools.lru_cache(maxsize=1)
def package_zip() -> Path:
    """dvtool's package as a zip in `temp_dir()`, built once per process; named by content."""
    data = zip_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = temp_dir() / f"dvtool-{dvtool.__version__}-{digest}.zip"
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)
    return path


def is_connect_session(spark: Any) -> bool:
    """True for a Spark Connect session (PySpark's `pyspark.sql.connect` classes)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def ship(spark: SparkSession) -> bool:
    """Add dvtool's zip to `spark` unless this process did already; True when it added it."""
    connect = is_connect_session(spark)
    target: Any = spark if connect else spark.sparkContext
    with _lock:
        if target in _shipped:
            return False
        path = package_zip()
        if connect:
            spark.addArtifacts(str(path), pyfile=True)
            added = True
        else:
            added = not _listed(target, path.name)
            if added:
                target.addPyFile(str(path))
        _shipped.add(target)
        return added


def _listed(context: Any, name: str) -> bool:
    """Whether a classic SparkContext already has `name` among its Python files."""
    return name in (getattr(context, "_python_includes", None) or [])
