"""Iceberg data file rewrites as plain data, to run wherever an engine runs its writes.

A rewrite (MERGE, compaction, copy-on-write delete) writes one new data file per bin. The
engines run those writes (`Engine.run_writes`): the arrow engine on its thread pool in this
process, the Spark engine one task per bin on the executors. Both run the same
`RewriteJob` (`dvtool.iceberg.rewrite_executor`) on the same plain `FilePlan`s, which
`plan_rewrites` makes here on the driver with pyiceberg (`FilePlanner`: each source's footer
read, its projection by field id, the writer settings, the positions to drop, row lineage),
and the driver turns each `NewFile` that comes back into its `DataFile` (`FilePlanner.data_file`:
pyiceberg's metrics from the footer). So the files, values, metrics, row lineage and sequence
numbers are the same whichever engine wrote them, and Spark executors need pyarrow and numpy
only (besides the dvtool package the Spark engine ships).

In this process the job writes through the table's own FileIO. Pickled for executors, the
FileIO becomes what opens the same files with pyarrow alone (`portable_io`,
`dvtool.iceberg.data_file_io`):

- a path table's `StorageFileIO`: its root and storage options, reopened over pyarrow's
  filesystems (`StoreIO` over `ArrowStorage`: executors have no fsspec backends; options
  pyarrow cannot take are refused here, before any task; memory:// tables too);
- a catalog's pyiceberg FileIO: the pyarrow filesystems pyiceberg's `PyArrowFileIO` builds
  from its properties (credentials the catalog vended included), one per scheme and bucket
  of the files the job reads and writes (`FileSystemIO`). A FileIO whose files pyarrow has
  no filesystem for travels as its class and properties instead, and then needs pyiceberg
  (and that FileIO's own dependencies) on the executors.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dvtool.iceberg.data_file_io import FileSystemIO, StoreIO, parse_location
from dvtool.iceberg.rewrite_executor import FilePlan, RewriteJob

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata

    from dvtool.iceberg.data_file_rewrite import FilePlanner, PlannedFile, RewriteSource


def plan_rewrites(
    io: FileIO,
    metadata: TableMetadata,
    bins: Sequence[tuple[str, int, Any, Sequence[RewriteSource]]],
) -> tuple[FilePlanner, list[PlannedFile]]:
    """The planner of the table's rewrites and the plan of each (location, spec id,
    partition, sources) bin, the sources' footers read on the IO threads."""
    from dvtool.iceberg.data_file_rewrite import FilePlanner
    from dvtool.io_pool import map_io

    planner = FilePlanner(io, metadata)

    def plan(item: tuple[str, int, Any, Sequence[RewriteSource]]) -> PlannedFile:
        location, spec_id, partition, sources = item
        return planner.plan(sources, location, spec_id=spec_id, partition=partition)

    return planner, map_io(plan, bins)


def rewrite_job(planner: FilePlanner, plans: Sequence[FilePlan]) -> RewriteJob:
    """The job writing `plans` through the planner's FileIO (pickled: `portable_io` of it,
    for the files of `plans`)."""
    locations = [p.location for p in plans] + [s.path for p in plans for s in p.sources]
    return RewriteJob(planner.io, planner.spec, locations)


def portable_io(io: Any, locations: Sequence[str]) -> Any:
    """What opens the files at `locations` again on an executor (module docstring); a
    path table's storage options are checked against pyarrow's filesystems here
    (UsageError, StorageError for memory://)."""
    from dvtool.iceberg.file_io import StorageFileIO
    from dvtool.storage.arrow_storage import ArrowStorage

    if isinstance(io, (StoreIO, FileSystemIO, PyicebergIO)):
        return io
    if isinstance(io, StorageFileIO):
        storage = io.storage
        options = {str(k): str(v) for k, v in storage.options.items()}
        ArrowStorage(storage.root, options).check_options()
        return StoreIO(storage.root, options)
    properties = {str(k): str(v) for k, v in (io.properties or {}).items()}
    filesystems = _arrow_filesystems(io, properties, locations)
    if filesystems is not None:
        return FileSystemIO(filesystems)
    cls = type(io)
    return PyicebergIO(f"{cls.__module__}:{cls.__qualname__}", properties)


def _arrow_filesystems(
    io: Any, properties: dict[str, str], locations: Sequence[str]
) -> dict[tuple[str, str], pafs.FileSystem] | None:
    """pyiceberg's pyarrow filesystems for `locations`, as pyarrow's own classes (which
    unpickle without pyiceberg); None when pyarrow has none for one of them."""
    import pyarrow.fs as pafs
    from pyiceberg.io.pyarrow import PyArrowFileIO

    arrow = io if isinstance(io, PyArrowFileIO) else PyArrowFileIO(properties)
    out: dict[tuple[str, str], pafs.FileSystem] = {}
    for location in locations:
        scheme, netloc, _ = parse_location(location)
        if (scheme, netloc) in out:
            continue
        try:
            filesystem = arrow.fs_by_scheme(scheme, netloc)
        except (ValueError, ImportError, OSError):
            return None
        if isinstance(filesystem, pafs.LocalFileSystem):
            filesystem = pafs.LocalFileSystem()  # pyiceberg's subclass: pyiceberg to unpickle
        elif not type(filesystem).__module__.startswith("pyarrow."):
            return None
        out[scheme, netloc] = filesystem
    return out


class PyicebergIO:
    """A pyiceberg FileIO as its class (`module:qualname`) and properties: opened again
    where it is unpickled, which needs pyiceberg there (module docstring)."""

    def __init__(self, name: str, properties: dict[str, str]) -> None:
        self.name = name
        self.properties = properties

    def __reduce__(self) -> tuple[Any, tuple[str, dict[str, str]]]:
        return (_open_file_io, (self.name, self.properties))


def _open_file_io(name: str, properties: dict[str, str]) -> Any:
    module, _, qualname = name.partition(":")
    cls = getattr(importlib.import_module(module), qualname)
    return cls(dict(properties))


__all__ = ["PyicebergIO", "plan_rewrites", "portable_io", "rewrite_job"]
