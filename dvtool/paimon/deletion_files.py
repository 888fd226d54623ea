"""The DVs of a Paimon snapshot read from their deletion files, for what the index manifest
does not record.

Paimon's index manifests record each DV's cardinality since Paimon 0.9 (`_CARDINALITY`);
deletion files older writers left name the DV's range only. `with_cardinalities` reads the
deletion files holding such DVs (each whole, once: one per bucket, small) and fills in the
cardinality each bitmap holds, so `inspect` counts deleted rows exactly without
`--verify`. A deletion file that cannot be read or a DV that does not decode raises its
`dvtool.errors` error naming the file (`--verify` reports them all instead).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from dvtool.deletion_vectors.paimon import decode_paimon_dv
from dvtool.errors import DeletionVectorError, FileMissingError, StorageError
from dvtool.io_pool import map_io
from dvtool.paimon.protocol.table_files import LiveDataFile, TableFiles
from dvtool.paimon.tables import PaimonTable


def with_cardinalities(table: PaimonTable, files: TableFiles) -> TableFiles:
    """`files` with every DV's cardinality known: those the index manifest lacks are
    counted from the deletion files (no read when none lacks one)."""
    missing: dict[str, list[LiveDataFile]] = defaultdict(list)
    for f in files.data:
        if f.dv is not None and f.dv_file is not None and f.dv.cardinality is None:
            missing[f.dv_file.path].append(f)
    if not missing:
        return files
    counted = dict(
        item
        for found in map_io(lambda path: _count(table, path, missing[path]), sorted(missing))
        for item in found.items()
    )
    return replace(files, data=[_counted(f, counted.get(id(f))) for f in files.data])


def _counted(f: LiveDataFile, cardinality: int | None) -> LiveDataFile:
    """`f` with its DV's cardinality set, when counted."""
    if cardinality is None or f.dv is None:
        return f
    return replace(f, dv=replace(f.dv, cardinality=cardinality))


def _count(table: PaimonTable, path: str, files: list[LiveDataFile]) -> dict[int, int]:
    """The cardinality of each file's DV in the deletion file at `path`, by `id(file)`."""
    try:
        data = table.storage.read(table.location_of(path))
    except FileMissingError:
        raise
    except StorageError as e:
        raise StorageError(
            f"cannot read the deletion file {path} to count the rows its DVs delete: {e.message}",
            f"Check that the storage can read it; `dvtool inspect {table.location} --verify` "
            "lists every deletion file it cannot read.",
        ) from None
    out = {}
    for f in files:
        assert f.dv is not None
        try:
            out[id(f)] = len(decode_paimon_dv(data, f.dv.offset, f.dv.length).rows)
        except DeletionVectorError as e:
            raise e.locate(path, f.path) from None
    return out
