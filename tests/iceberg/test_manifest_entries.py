"""`snapshot_files.manifest_entries`: the entries of manifests pyiceberg wrote, as pyiceberg
itself reads them, with the reader tree resolved once per writer schema (not per file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyiceberg.avro.file import AvroFileHeader

from dvtool.iceberg.snapshot_files import manifest_entries
from dvtool.iceberg.tables import open_iceberg
from tests.iceberg.commit_tables import committed, new_path_table, rows, through_dvtool


def _entry(entry: Any) -> tuple[Any, ...]:
    data = entry.data_file
    return (
        entry.status,
        entry.sequence_number,
        data.file_path,
        data.record_count,
        data.file_size_in_bytes,
        dict(data.lower_bounds or {}),
    )


def test_entries_as_pyiceberg_reads_them_with_one_schema_resolution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = through_dvtool(new_path_table(str(tmp_path / "t"), 2))
    for n in range(3):
        writer.append(rows(n * 10, n * 10 + 10))
    committed(writer)
    table = open_iceberg(str(tmp_path / "t"))
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    assert len(manifests) == 3

    parsed = []
    original = AvroFileHeader.get_schema
    monkeypatch.setattr(
        AvroFileHeader, "get_schema", lambda self: parsed.append(1) or original(self)
    )
    ours = [_entry(e) for m in manifests for e in manifest_entries(m, table.io, 2)]
    assert len(parsed) <= 1  # three manifests, one writer schema: resolved at most once
    monkeypatch.undo()
    theirs = [_entry(e) for m in manifests for e in m.fetch_manifest_entry(table.io)]
    assert ours == theirs and len(ours) == 3
