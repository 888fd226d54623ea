"""The Paimon fixture tables (tests/reference/paimon_tables.py) are what they claim to be.

For every table: Paimon's Java reader returns the rows the builder's batches intend; the
schema has the deletion-vector options; its reads use deletion vectors kept in deletion
files under `index/`, which decode from the spec (version byte, sizes, CRC-32s, the magic
of the 32- or 64-bit layout the options ask for) to as many positions as Paimon counted; a
plain pyarrow read of the data files that drops those positions and the delete records
agrees; the expired table keeps one snapshot and reads the same despite an orphan file;
and a copy of a table reads the same as the original.

pypaimon (the Python reader) runs in its own environment (tests/engines/pypaimon_env.py: 2.1
pins pyarrow<20, polars<2 and fsspec<2026): tests/reference/test_pypaimon_oracle.py reads
these tables with it (it refuses `pk_dv_bitmap64`: "Invalid magic number: 3520280932,
expected: 1581511376" — it knows only the 32-bit layout).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.engines.jvm_engines import JvmSession
from tests.reference.dv_files import Bitmap, paimon_deletion_file
from tests.reference.paimon_tables import SPECS, copy_table, read_table

NAMES = [spec.name for spec in SPECS]
# Paimon's row kinds in `_VALUE_KIND`: +I 0, -U 1, +U 2, -D 3.
RETRACTIONS = [1, 3]


@pytest.fixture(scope="module")
def paimon_reads(paimon_tables: dict[str, Any], paimon_java: JvmSession) -> dict[str, Any]:
    """Paimon's own read of every fixture table (rows and the files it used)."""
    return {name: read_table(paimon_java, entry["path"]) for name, entry in paimon_tables.items()}


@pytest.mark.parametrize("name", NAMES)
def test_paimon_reads_the_intended_rows(
    name: str, paimon_tables: dict[str, Any], paimon_reads: dict[str, Any]
) -> None:
    assert paimon_reads[name]["rows"] == paimon_tables[name]["expected"]


@pytest.mark.parametrize("name", NAMES)
def test_schema_has_the_deletion_vector_options(name: str, paimon_tables: dict[str, Any]) -> None:
    schemas = sorted(Path(paimon_tables[name]["path"], "schema").glob("schema-*"))
    options = json.loads(schemas[-1].read_text())["options"]
    assert options["deletion-vectors.enabled"] == "true"
    bitmap64 = options.get("deletion-vectors.bitmap64", "false") == "true"
    assert bitmap64 == (name == "pk_dv_bitmap64")


def referenced_bitmaps(files: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Bitmap]]:
    """Each data file's deletion vector as Paimon names it, decoded from its deletion file."""
    decoded: list[tuple[dict[str, Any], Bitmap]] = []
    for f in files:
        if f["dv"] is not None:
            dv = f["dv"]
            decoded.append((f, paimon_deletion_file(Path(dv["path"]))[dv["offset"]]))
    return decoded


@pytest.mark.parametrize("name", NAMES)
def test_deletion_vectors_are_in_index_files_and_decode_per_spec(
    name: str, paimon_tables: dict[str, Any], paimon_reads: dict[str, Any]
) -> None:
    index = Path(paimon_tables[name]["path"], "index")
    bitmaps = referenced_bitmaps(paimon_reads[name]["files"])
    assert bitmaps, "no data file has a deletion vector"
    bitmap64 = paimon_tables[name]["options"].get("deletion-vectors.bitmap64") == "true"
    for f, bitmap in bitmaps:
        assert Path(f["dv"]["path"]).parent == index
        assert bitmap.bitmap64 == bitmap64
        assert len(bitmap.positions) == f["dv"]["cardinality"]
        assert max(bitmap.positions) < f["rows"]
    for path in index.iterdir():
        if not path.name.startswith("."):
            assert all(b.bitmap64 == bitmap64 for b in paimon_deletion_file(path).values())


def plain_read(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live rows read with pyarrow: each data file of the scan minus its DV positions
    and, in primary-key tables, minus delete records (kept in lower levels until a full
    compaction)."""
    deleted = {f["path"]: b.positions for f, b in referenced_bitmaps(files)}
    rows: list[dict[str, Any]] = []
    for f in files:
        data = pq.read_table(f["path"])
        keep = np.ones(data.num_rows, dtype=bool)
        keep[deleted.get(f["path"], [])] = False
        data = data.filter(pa.array(keep))
        if "_VALUE_KIND" in data.column_names:  # primary-key tables only
            kinds = pa.array(RETRACTIONS, pa.int8())
            data = data.filter(pc.invert(pc.is_in(data["_VALUE_KIND"], kinds)))
        rows += data.select(["id", "part", "v"]).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


@pytest.mark.parametrize("name", NAMES)
def test_a_plain_pyarrow_read_applying_the_deletion_vectors_agrees(
    name: str, paimon_tables: dict[str, Any], paimon_reads: dict[str, Any]
) -> None:
    assert plain_read(paimon_reads[name]["files"]) == paimon_tables[name]["expected"]


def test_expired_table_keeps_one_snapshot_and_ignores_its_orphan(
    paimon_tables: dict[str, Any], paimon_reads: dict[str, Any]
) -> None:
    entry = paimon_tables["pk_dv_expired"]
    snapshots = sorted(p.name for p in Path(entry["path"], "snapshot").glob("snapshot-*"))
    assert len(snapshots) == 1
    assert len(list(Path(paimon_tables["pk_dv"]["path"], "snapshot").glob("snapshot-*"))) > 1
    used = {f["path"] for f in paimon_reads["pk_dv_expired"]["files"]}
    assert Path(entry["orphan"]).is_file() and entry["orphan"] not in used


def test_a_copied_table_reads_the_same(
    paimon_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    entry = paimon_tables["pk_dv"]
    copy = copy_table(entry, tmp_path / "pk_dv")
    read = read_table(paimon_java, copy)
    assert read["rows"] == entry["expected"]
    assert all(f["path"].startswith(str(copy)) for f in read["files"])
