"""Paimon's own view of a fixture table, and corrupt copies of one, for the inspect tests.

`paimon_scan(session, path, snapshot_id)`: Paimon's Java reader (the `paimon_java`
session) at a snapshot (`scan.snapshot-id`; None: the latest): how many rows it returns,
and for every data file of its splits the level, rows and DV, each DV read back with
Paimon's `DeletionVector.read` (positions by `isDeleted`). This is the oracle of what a
reader in deletion-vectors mode sees.

`TableCopy` edits a copy of a fixture table as damage would leave it: bytes of a deletion
file, fields of the latest snapshot's manifests and index manifest (rewritten under the
writer schema Paimon used, tests/paimon/avro_writer.py), files removed or truncated.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dvtool.paimon.avro_files import decode_avro
from tests.engines.jvm_engines import JvmSession
from tests.paimon.avro_writer import schema_of, write_avro

Record = dict[str, Any]

SCAN = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
if args["snapshot"] is not None:
    options = jvm.java.util.HashMap()
    options.put("scan.snapshot-id", str(args["snapshot"]))
    table = table.copy(options)
builder = P.table.source.ReadBuilderImpl(table)
read = builder.newRead()
io = table.fileIO()
rows, files = 0, []
for split in builder.newScan().plan().splits():
    dvs = split.deletionFiles()
    dvs = list(dvs.get()) if dvs.isPresent() else [None] * split.dataFiles().size()
    for meta, deletion in zip(split.dataFiles(), dvs):
        entry = {
            "path": str(split.bucketPath()).removeprefix("file:") + "/" + meta.fileName(),
            "level": meta.level(), "rows": meta.rowCount(), "dv": None}
        if deletion is not None:
            dv = P.deletionvectors.DeletionVector.read(io, deletion)
            entry["dv"] = {
                "path": str(deletion.path()).removeprefix("file:"),
                "offset": deletion.offset(), "length": deletion.length(),
                "cardinality": deletion.cardinality(),
                "positions": [i for i in range(meta.rowCount()) if dv.isDeleted(i)]}
        files.append(entry)
    reader = read.createReader(split)
    batch = reader.readBatch()
    while batch is not None:
        while batch.next() is not None:
            rows += 1
        batch.releaseBatch()
        batch = reader.readBatch()
    reader.close()
result = {"rows": rows, "files": files}
"""


def paimon_scan(session: JvmSession, path: Path | str, snapshot_id: int | None = None) -> Any:
    """Paimon's read of the table at `path` (at `snapshot_id`): rows and files with DVs."""
    return session.python(SCAN, path=str(path), snapshot=snapshot_id)


@dataclass
class TableCopy:
    """A copy of a fixture table to damage, and where its latest snapshot's files are."""

    root: Path

    @property
    def snapshot(self) -> Record:
        latest = max(int(p.name.split("-")[1]) for p in self.root.glob("snapshot/snapshot-*"))
        doc: Record = json.loads((self.root / f"snapshot/snapshot-{latest}").read_text())
        return doc

    def manifest(self, name: str) -> Path:
        return self.root / "manifest" / name

    def records(self, name: str) -> list[Record]:
        return decode_avro(self.manifest(name).read_bytes())

    def rewrite(self, name: str, edit: Callable[[list[Record]], None]) -> None:
        """Rewrite a manifest file with `edit` applied to its records."""
        data = self.manifest(name).read_bytes()
        records = decode_avro(data)
        edit(records)
        self.manifest(name).write_bytes(write_avro(schema_of(data), records))

    def index_entries(self) -> list[Record]:
        """The index manifest's deletion files that hold DVs."""
        index = self.records(self.snapshot["indexManifest"])
        return [r for r in index if r["_DELETIONS_VECTORS_RANGES"]]

    def edit_index(self, edit: Callable[[Record], None]) -> Record:
        """Apply `edit` to the first deletion file entry holding DVs; return the entry."""
        target = self.index_entries()[0]["_FILE_NAME"]
        edited: list[Record] = []

        def apply(records: list[Record]) -> None:
            for r in records:
                if r["_FILE_NAME"] == target:
                    edit(r)
                    edited.append(r)

        self.rewrite(self.snapshot["indexManifest"], apply)
        return edited[0]

    def deletion_file(self) -> tuple[Path, Record]:
        """The first deletion file holding DVs, and its first DV's range."""
        entry = self.index_entries()[0]
        return self.root / "index" / entry["_FILE_NAME"], entry["_DELETIONS_VECTORS_RANGES"][0]

    def data_manifests(self) -> list[str]:
        """The manifests of the latest snapshot, base then delta."""
        names = []
        for key in ("baseManifestList", "deltaManifestList"):
            names += [r["_FILE_NAME"] for r in self.records(self.snapshot[key])]
        return names

    def live_add(self, file_name: str) -> tuple[str, int]:
        """The manifest and record index of the last ADD of `file_name`."""
        found = None
        for manifest in self.data_manifests():
            for n, r in enumerate(self.records(manifest)):
                if r["_FILE"]["_FILE_NAME"] == file_name and r["_KIND"] == 0:
                    found = (manifest, n)
        assert found is not None, file_name
        return found

    def edit_data_file(self, file_name: str, edit: Callable[[Record], None]) -> None:
        """Apply `edit` to the `_FILE` of the live ADD of `file_name`."""
        manifest, index = self.live_add(file_name)
        self.rewrite(manifest, lambda records: edit(records[index]["_FILE"]))
