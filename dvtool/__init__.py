"""dvtool: maintenance for merge-on-read tables: Delta Lake with deletion vectors, and Apache
Iceberg (inspect and verify).

The command line is `dvtool` (or `python -m dvtool`). The Python API (`dvtool.api`, loaded on
first use so that `import dvtool` stays cheap and starts nothing):

- `dvtool.inspect(table, *, version=None, timestamp=None, files=False, history=None,
  verify=False, checks=None, count_rows=False, storage_options=None, catalog=None)
  -> InspectResult` (an Iceberg table: `IcebergInspectResult`)
- `dvtool.inspect_tables(prefixes, *, recursive=True, checks=None, verify=False,
  count_rows=False, storage_options=None) -> InspectTablesResult`
- `dvtool.enable(table, *, storage_options=None) -> EnableResult`
- `dvtool.delete(table, where, *, mode="auto", dry_run=False, spark=None,
  storage_options=None) -> DeleteResult`
- `dvtool.optimize(table, *, purge=False, min_deleted_ratio=None, target_size=None,
  where=None, dry_run=False, spark=None, storage_options=None) -> OptimizeResult`
- `dvtool.vacuum(table, *, retain=None, dry_run=False, lite=False, force=False,
  storage_options=None) -> VacuumResult`
- `dvtool.maintain(targets, *, recursive=False, dry_run=False, purge_ratio=None,
  target_size=None, checkpoint_interval=None, retain=None, time_budget=None, spark=None,
  storage_options=None) -> MaintainResult`
- `dvtool.cleanup_log(table, *, dry_run=False, storage_options=None) -> LogCleanupResult`
- `dvtool.checkpoint(table, *, storage_options=None) -> CheckpointResult`
- `dvtool.restore(table, *, version=None, timestamp=None, dry_run=False,
  storage_options=None) -> RestoreResult`

Every result has `to_dict()`: the document `dvtool COMMAND --json` prints.

`spark=` runs them on an existing SparkSession (classic or Spark Connect), which dvtool
leaves running. Errors are `DvtoolError` subclasses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dvtool.api import (
        checkpoint,
        cleanup_log,
        delete,
        enable,
        inspect,
        inspect_tables,
        maintain,
        optimize,
        restore,
        vacuum,
    )
    from dvtool.commands.checkpoint import CheckpointResult
    from dvtool.commands.delete.command import DeleteResult
    from dvtool.commands.enable import EnableResult
    from dvtool.commands.inspect.command import InspectResult
    from dvtool.commands.inspect.iceberg import IcebergInspectResult
    from dvtool.commands.inspect.tables import InspectTablesResult
    from dvtool.commands.log_cleanup import LogCleanupResult
    from dvtool.commands.maintain.command import MaintainResult
    from dvtool.commands.optimize.command import OptimizeResult
    from dvtool.commands.restore.command import RestoreResult
    from dvtool.commands.vacuum.command import VacuumResult
    from dvtool.errors import DvtoolError

__version__ = "0.1.0"
__all__ = [
    "CheckpointResult",
    "DeleteResult",
    "DvtoolError",
    "EnableResult",
    "IcebergInspectResult",
    "InspectResult",
    "InspectTablesResult",
    "LogCleanupResult",
    "MaintainResult",
    "OptimizeResult",
    "RestoreResult",
    "VacuumResult",
    "__version__",
    "checkpoint",
    "cleanup_log",
    "delete",
    "enable",
    "inspect",
    "inspect_tables",
    "maintain",
    "optimize",
    "restore",
    "vacuum",
]

# Loaded on first access (module `__getattr__`): no pyarrow, fsspec or pyspark at import.
_HOMES = {
    "checkpoint": "dvtool.api",
    "cleanup_log": "dvtool.api",
    "delete": "dvtool.api",
    "enable": "dvtool.api",
    "inspect": "dvtool.api",
    "inspect_tables": "dvtool.api",
    "maintain": "dvtool.api",
    "optimize": "dvtool.api",
    "restore": "dvtool.api",
    "vacuum": "dvtool.api",
    "CheckpointResult": "dvtool.commands.checkpoint",
    "DeleteResult": "dvtool.commands.delete.command",
    "EnableResult": "dvtool.commands.enable",
    "InspectResult": "dvtool.commands.inspect.command",
    "IcebergInspectResult": "dvtool.commands.inspect.iceberg",
    "InspectTablesResult": "dvtool.commands.inspect.tables",
    "LogCleanupResult": "dvtool.commands.log_cleanup",
    "MaintainResult": "dvtool.commands.maintain.command",
    "OptimizeResult": "dvtool.commands.optimize.command",
    "RestoreResult": "dvtool.commands.restore.command",
    "VacuumResult": "dvtool.commands.vacuum.command",
    "DvtoolError": "dvtool.errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
