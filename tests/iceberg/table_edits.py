"""Editing a writable copy of an Iceberg fixture table the way faults do, for the damaged
tables of tests/iceberg/damaged_tables.py.

`Copy` is a copy made by `writable_copy` (Iceberg's `rewrite_table_path`, through
tests/reference/iceberg_tables.copy_table); `Copy.entries` lists its live manifest
entries, read with each manifest's own Avro schema by pyiceberg's Avro reader, and
`edit_manifest` writes a manifest back with pyiceberg's Avro writer, the same schema and
key-value metadata, entries changed. `restored` puts the copy back as it was, so the
tests of a module share one copy. `patch` and `truncate` change bytes in place.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyiceberg.avro.file import AvroFile, AvroOutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import StaticTable
from pyiceberg.typedef import Record

from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import copy_table, latest_metadata

DATA, POSITION, EQUALITY = 0, 1, 2
"""Manifest entry `content`: data, position deletes (also DVs), equality deletes."""
DELETED = 2
"""Manifest entry `status` of a removed file."""


# -- manifests ------------------------------------------------------------------------------


class Entry:
    """A manifest entry read with the manifest's own schema, its fields by name
    (`status`, or a `data_file` field such as `content_offset`)."""

    def __init__(self, record: Record, schema: Any) -> None:
        self.record = record
        self._top = {f.name: i for i, f in enumerate(schema.fields)}
        data_file = schema.find_field("data_file").field_type
        self._data_file = {f.name: i for i, f in enumerate(data_file.fields)}

    def _slot(self, name: str) -> tuple[Record, int]:
        if name in self._top:
            return self.record, self._top[name]
        return self.record[self._top["data_file"]], self._data_file[name]

    def __getitem__(self, name: str) -> Any:
        record, i = self._slot(name)
        return record[i]

    def get(self, name: str) -> Any:
        """A field, or None when the manifest's schema has no such field (a v2 manifest
        has no `content_offset`)."""
        return self[name] if name in self._top or name in self._data_file else None

    def __setitem__(self, name: str, value: Any) -> None:
        record, i = self._slot(name)
        record[i] = value

    def copy(self) -> Entry:
        twin = copy.copy(self)
        twin.record = copy.deepcopy(self.record)
        return twin


def read_manifest(path: str) -> tuple[list[Entry], Any, dict[str, str]]:
    """A manifest's entries (all, DELETED ones too), its schema and Avro metadata."""
    with AvroFile[Record](PyArrowFileIO().new_input(path)) as reader:
        schema, meta = reader.schema, dict(reader.header.meta)
        return [Entry(r, schema) for r in reader], schema, meta


def edit_manifest(path: str, edit: Callable[[list[Entry]], list[Entry]]) -> None:
    """Rewrite the manifest at `path` with `edit(entries)`, same schema and metadata."""
    entries, schema, meta = read_manifest(path)
    entries = edit(entries)
    meta.pop("avro.schema", None)
    output = PyArrowFileIO().new_output(path)
    with AvroOutputFile[Record](output, schema, "manifest_entry", metadata=meta) as out:
        out.write_block([e.record for e in entries])


@dataclass
class Copy:
    """A writable copy of a fixture table, and the engine session that wrote it."""

    root: Path
    session: JvmSession

    def table(self) -> StaticTable:
        """The copy as pyiceberg opens it (its latest metadata)."""
        return StaticTable.from_metadata(str(latest_metadata(self.root)))

    def manifests(self) -> list[str]:
        """The manifests of the current snapshot."""
        table = self.table()
        return [m.manifest_path for m in table.current_snapshot().manifests(table.io)]

    def entries(self, content: int, file_format: str | None = None) -> list[tuple[str, Entry]]:
        """The live entries of one content kind, with the manifest that holds each."""
        found = []
        for manifest in self.manifests():
            for entry in read_manifest(manifest)[0]:
                if entry["status"] == DELETED or entry["content"] != content:
                    continue
                if file_format is None or entry["file_format"].upper() == file_format:
                    found.append((manifest, entry))
        return found

    def edit(self, content: int, file_format: str | None, change: Callable[[Entry], Any]) -> Entry:
        """Apply `change` to the first live entry of the kind (in its manifest); it."""
        manifest, target = self.entries(content, file_format)[0]
        key = target["file_path"], target.get("content_offset")

        def edit(entries: list[Entry]) -> list[Entry]:
            for entry in entries:
                mine = entry["file_path"], entry.get("content_offset")
                if mine == key and entry["status"] != DELETED:
                    change(entry)
                    return entries
            raise AssertionError(f"{key} not in {manifest}")

        edit_manifest(manifest, edit)
        return target


@contextmanager
def restored(root: Path) -> Iterator[None]:
    """Put every file under `root` back as it was when the block ends (the damages of one
    test must not leak into the next one's copy)."""
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    try:
        yield
    finally:
        for path in [p for p in root.rglob("*") if p.is_file() and p not in before]:
            path.unlink()
        for path, data in before.items():
            if not path.is_file() or path.read_bytes() != data:
                path.write_bytes(data)


# -- bytes ------------------------------------------------------------------------------------


def local(path: str) -> Path:
    """The local file of a `file:` or plain path a manifest names."""
    return Path(path.removeprefix("file:"))


def patch(path: str, offset: int, data: bytes) -> None:
    """Overwrite the bytes at `offset` of a file (its size stays)."""
    file = local(path)
    content = bytearray(file.read_bytes())
    content[offset : offset + len(data)] = data
    file.write_bytes(bytes(content))


def truncate(path: str) -> None:
    """Cut a file in half, as an interrupted upload or copy leaves it."""
    data = local(path).read_bytes()
    local(path).write_bytes(data[: len(data) // 2])


def writable_copy(session: JvmSession, entry: dict[str, Any], dst: Path) -> Copy:
    """A writable copy of a fixture table (tests/reference/iceberg_tables.copy_table)."""
    if dst.exists():
        shutil.rmtree(dst)
    copy_table(session, entry, dst)
    return Copy(dst, session)
