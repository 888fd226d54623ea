"""Iceberg data file rewrites as plain data, to run wherever an engine runs its writes.

A rewrite (MERGE, compaction, copy-on-write delete) writes one new data file per bin with
`rewrite_data_files`. The engines run those writes (`Engine.run_writes`): the arrow engine
on its thread pool in this process, the Spark engine one task per bin on the executors. So
a bin travels as a `RewriteTask` (its new file's location, spec and partition, and per
source the data-file fields the rewrite reads, the positions to drop as portable Roaring
bytes, the data sequence number and first row id) and every task runs the same
`RewriteJob`: in this process it calls `rewrite_data_files` with the table's own FileIO and
metadata; pickled, it becomes plain data (`_reopened`):

- the FileIO as what opens it again: a path table's `StorageFileIO` as its root and storage
  options, reopened over pyarrow's filesystems (`ArrowStorage`: executors have no fsspec
  backends; options pyarrow cannot take are refused on the driver, before any task); a
  catalog's pyiceberg FileIO as its class and properties (credentials the catalog vended
  included);
- the metadata as its JSON (`metadata_json.to_json`, as dvtool writes metadata files: pyiceberg
  0.12 serializes no v3 metadata), parsed again once per executor process and job.

The new file comes back as its `DataFile`'s fields (`written_fields`), made a `DataFile` again
on the driver (`data_file_of`). The values, metrics, row lineage and sequence numbers are
therefore those of the one function, wherever it ran. Executors need what that function
imports: pyarrow, numpy, pyroaring and pyiceberg (dvtool's own dependencies), besides the
dvtool package the Spark engine ships.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import Record

    from dvtool.iceberg.data_file_rewrite import RewriteSource


@dataclass(frozen=True)
class SourceTask:
    """One input of a rewrite: the data-file fields the rewrite reads, the positions to
    drop (portable 64-bit Roaring bytes), and its row lineage inputs (`RewriteSource`)."""

    path: str
    file_format: str
    record_count: int
    spec_id: int
    partition: tuple[Any, ...]
    key_metadata: bytes | None
    drop: bytes
    data_sequence_number: int
    first_row_id: int | None

    @classmethod
    def of(cls, source: RewriteSource) -> SourceTask:
        record = source.data_file
        return cls(
            path=record.file_path,
            file_format=str(getattr(record.file_format, "value", record.file_format)),
            record_count=int(record.record_count),
            spec_id=int(record.spec_id),
            partition=_values(record.partition),
            key_metadata=record.key_metadata,
            drop=source.drop.serialize(),
            data_sequence_number=source.data_sequence_number,
            first_row_id=source.first_row_id,
        )

    def source(self) -> RewriteSource:
        """The `RewriteSource` again (a `DataFile` with the fields the rewrite reads)."""
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record
        from pyroaring import BitMap64

        from dvtool.iceberg.data_file_rewrite import RewriteSource

        record = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self.path,
            file_format=FileFormat(self.file_format),
            partition=Record(*self.partition),
            record_count=self.record_count,
            file_size_in_bytes=0,
            key_metadata=self.key_metadata,
        )
        record.spec_id = self.spec_id
        drop = BitMap64.deserialize(self.drop)
        return RewriteSource(record, drop, self.data_sequence_number, self.first_row_id)


@dataclass(frozen=True)
class RewriteTask:
    """One bin: the new file's location, spec and partition, and its sources in order."""

    location: str
    spec_id: int
    partition: tuple[Any, ...]
    sources: tuple[SourceTask, ...]


def rewrite_task(
    location: str, spec_id: int, partition: Record, sources: Sequence[RewriteSource]
) -> RewriteTask:
    """A bin as plain data (see the module docstring)."""
    return RewriteTask(
        location, spec_id, _values(partition), tuple(SourceTask.of(s) for s in sources)
    )


@dataclass(frozen=True)
class FileIOSpec:
    """What opens a FileIO again elsewhere: `kind` "storage" (a path table's
    `StorageFileIO`: `root` and `options`) or "pyiceberg" (`root` the FileIO class as
    `module:qualname`, `options` its properties)."""

    kind: str
    root: str
    options: tuple[tuple[str, str], ...]

    def open(self) -> FileIO:
        if self.kind == "storage":
            from dvtool.iceberg.file_io import StorageFileIO
            from dvtool.storage.arrow_storage import ArrowStorage

            return StorageFileIO(ArrowStorage(self.root, dict(self.options)))
        module, _, name = self.root.partition(":")
        cls = getattr(importlib.import_module(module), name)
        io: FileIO = cls(dict(self.options))
        return io


def file_io_spec(io: FileIO) -> FileIOSpec:
    """How to open `io` again elsewhere; a path table's storage options are checked
    against pyarrow's filesystems here (UsageError, StorageError for memory://)."""
    from dvtool.iceberg.file_io import StorageFileIO
    from dvtool.storage.arrow_storage import ArrowStorage

    if isinstance(io, StorageFileIO):
        storage = io.storage
        options = {str(k): str(v) for k, v in storage.options.items()}
        ArrowStorage(storage.root, options).check_options()
        return FileIOSpec("storage", storage.root, tuple(sorted(options.items())))
    cls = type(io)
    properties = {str(k): str(v) for k, v in (io.properties or {}).items()}
    return FileIOSpec(
        "pyiceberg", f"{cls.__module__}:{cls.__qualname__}", tuple(sorted(properties.items()))
    )


class RewriteJob:
    """Writes one bin (`RewriteTask`) with `rewrite_data_files`; returns the new file's
    fields (`written_fields`), or None when no row remained. Picklable as plain data."""

    def __init__(self, io: FileIO, metadata: TableMetadata) -> None:
        self.io = io
        self.metadata = metadata

    def __call__(self, task: RewriteTask) -> tuple[Any, ...] | None:
        from pyiceberg.typedef import Record

        from dvtool.iceberg.data_file_rewrite import rewrite_data_files

        data_file = rewrite_data_files(
            self.io,
            self.metadata,
            [s.source() for s in task.sources],
            task.location,
            spec_id=task.spec_id,
            partition=Record(*task.partition),
        )
        return None if data_file is None else written_fields(data_file)

    def __reduce__(self) -> tuple[Any, tuple[FileIOSpec, str]]:
        """Pickled as the FileIO's spec and the metadata's JSON (module docstring)."""
        from dvtool.iceberg.metadata_json import to_json

        return (_reopened, (file_io_spec(self.io), to_json(self.metadata)))


@functools.lru_cache(maxsize=4)
def _reopened(spec: FileIOSpec, metadata_json: str) -> RewriteJob:
    """The job again on an executor: reused by the tasks of one job in a Python worker."""
    from dvtool.iceberg.tables import parse_metadata

    return RewriteJob(spec.open(), parse_metadata(metadata_json.encode("utf-8"), "<driver>"))


def written_fields(data_file: DataFile) -> tuple[Any, ...]:
    """A new data file's `DataFile` as plain values: its fields (the partition as a tuple)
    and its spec id."""
    values = list(data_file._data)
    values[3] = _values(data_file.partition)
    return (tuple(values), int(data_file.spec_id))


def data_file_of(fields: tuple[Any, ...]) -> DataFile:
    """The `DataFile` of `written_fields`."""
    from pyiceberg.manifest import DataFile
    from pyiceberg.typedef import Record

    values, spec_id = fields
    values = list(values)
    values[3] = Record(*values[3])
    data_file = DataFile(*values)
    data_file.spec_id = spec_id
    return data_file


def _values(record: Record | None) -> tuple[Any, ...]:
    """A partition's values, in order, as a plain tuple."""
    if record is None:
        return ()
    return tuple(record[i] for i in range(len(record)))


__all__ = [
    "FileIOSpec",
    "RewriteJob",
    "RewriteTask",
    "SourceTask",
    "data_file_of",
    "file_io_spec",
    "rewrite_task",
    "written_fields",
]
