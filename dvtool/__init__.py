"""dvtool: maintenance for Delta Lake tables with deletion vectors.

The command line is `dvtool` (or `python -m dvtool`). The Python API (`dvtool.api`, loaded on
first use so that `import dvtool` stays cheap and starts nothing):

- `dvtool.delete(table, where, *, mode="auto", dry_run=False, spark=None,
  storage_options=None) -> DeleteResult`
- `dvtool.optimize(table, *, purge=False, min_deleted_ratio=None, target_size=None,
  where=None, dry_run=False, spark=None, storage_options=None) -> OptimizeResult`

`spark=` runs them on an existing SparkSession (classic or Spark Connect), which dvtool
leaves running. Errors are `DvtoolError` subclasses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dvtool.api import delete, optimize
    from dvtool.commands.delete import DeleteResult
    from dvtool.commands.optimize import OptimizeResult
    from dvtool.errors import DvtoolError

__version__ = "0.1.0"
__all__ = ["DeleteResult", "DvtoolError", "OptimizeResult", "__version__", "delete", "optimize"]

# Loaded on first access (module `__getattr__`): no pyarrow, fsspec or pyspark at import.
_HOMES = {
    "delete": "dvtool.api",
    "optimize": "dvtool.api",
    "DeleteResult": "dvtool.commands.delete",
    "OptimizeResult": "dvtool.commands.optimize",
    "DvtoolError": "dvtool.errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
