"""pypaimon (Paimon's Python reader and writer) as an oracle of dvtool on Paimon tables.

Tables pypaimon writes (tests/reference/pypaimon_tables.py: append tables whose deletes are
32-bit DVs, partitioned and not; a primary-key table whose files all wait at level 0) and
the Java-written fixtures with 32-bit DVs (tests/reference/paimon_tables.py) are read by
pypaimon (its own environment, tests/engines/pypaimon_env.py), by Paimon's Java reader, and
inspected by dvtool: pypaimon and Java return the intended rows (Paimon Java 1.4 refuses
pypaimon's append tables with DVs: they need data evolution, which it does not allow with
DVs; the DV checks below read their data files directly), and dvtool's counts (rows,
deleted rows, files read, DVs, pending level-0 files) are those of pypaimon's read, at every
snapshot. Every DV pypaimon wrote decodes (shared codec) to the positions of the deleted
ids in its data file and re-encodes to pypaimon's bytes. `vacuum` on a pypaimon table
lists the planted strays, the same as Paimon's Java cleaner where Java opens the table,
and pypaimon reads every kept snapshot the same after it. pypaimon 2.1 refuses 64-bit DVs
(checked, so that a newer pin that reads them shows).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from dvtool.deletion_vectors.paimon import decode_paimon_dv, encode_paimon_dv
from tests.engines import pypaimon_env
from tests.engines.jvm_engines import JvmError, JvmSession
from tests.reference.iceberg_writes import cli_json
from tests.reference.paimon_tables import read_table
from tests.reference.pypaimon_tables import SPECS, build_all

PY_NAMES = [spec.name for spec in SPECS]
JAVA_32 = ["pk_dv", "pk_dv_expired", "append_dv"]
DATA_EVOLUTION = ["py_append_dv", "py_append_dv_part"]
DAY_S = 24 * 3600

PAIMON_CLEAN = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
found = P.operation.LocalOrphanFilesClean(table, args["older_than"], True).clean()
result = sorted(str(p).removeprefix("file:") for p in found.getDeletedFilesPath())
"""


@pytest.fixture(scope="module")
def pypaimon_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The pypaimon-written tables with their manifest entries, built once for the module."""
    manifest: dict[str, Any] = json.loads(
        build_all(tmp_path_factory.mktemp("pypaimon-tables")).read_text()
    )
    return manifest


@pytest.fixture(scope="module")
def tables(pypaimon_tables: dict[str, Any], paimon_tables: dict[str, Any]) -> dict[str, Any]:
    """Every table read here: pypaimon's and the Java-written ones with 32-bit DVs."""
    return {**pypaimon_tables, **{n: paimon_tables[n] for n in JAVA_32}}


@pytest.fixture(scope="module")
def reads(tables: dict[str, Any]) -> dict[str, Any]:
    """pypaimon's read of every table at its latest snapshot: (rows, files)."""
    names = list(tables)
    found = pypaimon_env.read_many([(tables[n]["path"], None) for n in names])
    return dict(zip(names, found, strict=True))


def _rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.select(["id", "part", "v"]).to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("name", PY_NAMES + JAVA_32)
def test_pypaimon_and_paimon_java_read_the_intended_rows(
    name: str, tables: dict[str, Any], reads: dict[str, Any], paimon_java: JvmSession
) -> None:
    assert _rows(reads[name][0]) == tables[name]["expected"]
    if name in DATA_EVOLUTION:
        # Paimon Java 1.4 does not open what pypaimon 2.1's DELETE needs (data evolution
        # with DVs); the data files and DVs are checked without it below.
        with pytest.raises(JvmError, match="Data evolution"):
            read_table(paimon_java, tables[name]["path"])
        return
    assert read_table(paimon_java, tables[name]["path"])["rows"] == tables[name]["expected"]


def _agrees(doc: dict[str, Any], read: dict[str, Any], root: str) -> None:
    """dvtool's summary against pypaimon's read of the same snapshot."""
    files = read["files"]
    assert doc["format"] == "paimon" and doc["row_counts_exact"]
    assert doc["logical_rows"] == read["rows"]
    assert doc["physical_rows"] == sum(f["rows"] for f in files)
    assert doc["deleted_rows"] == sum(f["dv"]["cardinality"] for f in files if f["dv"])
    assert doc["files_with_dvs"] == doc["deletion_vectors"] == sum(bool(f["dv"]) for f in files)
    assert {f"{root}/{f['path']}" for f in doc["files"] if f["visible"]} == {
        f["path"] for f in files
    }
    assert doc["pending_level0_files"] == doc["num_files"] - len(files)


@pytest.mark.parametrize("name", PY_NAMES + JAVA_32)
def test_inspect_counts_what_pypaimon_reads(
    name: str, tables: dict[str, Any], reads: dict[str, Any]
) -> None:
    path = tables[name]["path"]
    doc = cli_json("inspect", path, "--files", "--verify")
    _agrees(doc, reads[name][1], path)
    assert doc["verify"]["ok"], doc["verify"]["problems"]
    if name == "py_pk_level0":  # nothing compacted: every file waits at level 0
        assert doc["pending_level0_files"] == doc["num_files"] > 0 and doc["logical_rows"] == 0


def test_every_snapshot_agrees_with_pypaimon(pypaimon_tables: dict[str, Any]) -> None:
    for name in ("py_append_dv", "py_append_dv_part"):
        path = pypaimon_tables[name]["path"]
        ids = [h["snapshot_id"] for h in cli_json("inspect", path, "--history")["history"]]
        assert len(ids) == 4
        found = pypaimon_env.read_many([(path, i) for i in ids])
        for snapshot_id, (_, read) in zip(ids, found, strict=True):
            doc = cli_json("inspect", path, "--version", str(snapshot_id), "--files", "--verify")
            _agrees(doc, read, path)
            assert doc["verify"]["ok"], doc["verify"]["problems"]


@pytest.mark.parametrize("name", ["py_append_dv", "py_append_dv_part"])
def test_the_dvs_pypaimon_wrote_delete_the_intended_rows(
    name: str, pypaimon_tables: dict[str, Any], reads: dict[str, Any]
) -> None:
    deleted_ids = set(pypaimon_tables[name]["deleted_ids"])
    found = set()
    for f in reads[name][1]["files"]:
        dv = f["dv"]
        data = Path(dv["path"]).read_bytes()
        decoded = decode_paimon_dv(data, dv["offset"], dv["length"])
        assert not decoded.bitmap64 and len(decoded.rows) == dv["cardinality"]
        ids = pq.read_table(f["path"], columns=["id"]).column("id").to_pylist()
        dropped = {ids[p] for p in decoded.rows}
        assert dropped <= deleted_ids and len(dropped) == len(decoded.rows)
        found |= dropped
        framed, length = encode_paimon_dv(decoded.rows, False)
        assert length == dv["length"]
        assert data[dv["offset"] : dv["offset"] + len(framed)] == framed
    assert found == deleted_ids


def test_pypaimon_refuses_64_bit_dvs(paimon_tables: dict[str, Any], tmp_path: Path) -> None:
    """pypaimon 2.1 knows only the 32-bit layout; dvtool reads both (test_paimon_inspect)."""
    path = paimon_tables["pk_dv_bitmap64"]["path"]
    request = {"op": "read", "path": path, "snapshot": None, "arrow": str(tmp_path / "r")}
    [answer] = pypaimon_env.run_all([request])
    assert not answer["ok"] and "magic" in answer["message"].lower()
    assert cli_json("inspect", path, "--verify")["verify"]["ok"]


def _age_and_plant(root: Path) -> set[str]:
    then = time.time() - 2 * DAY_S
    bucket = next(p for p in sorted(root.rglob("bucket-*")) if p.is_dir()).relative_to(root)
    strays = {
        "manifest/manifest-00000000-stray-0",
        "index/index-00000000-stray-0",
        f"{bucket.as_posix()}/data-00000000-stray-0.parquet",
    }
    for relative in strays:
        (root / relative).parent.mkdir(exist_ok=True)
        (root / relative).write_bytes(b"stray")
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))
    return strays


@pytest.mark.parametrize("name", ["py_append_dv_part", "py_pk_level0"])
def test_vacuum_on_a_pypaimon_table(
    name: str, pypaimon_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    root = tmp_path / name
    shutil.copytree(pypaimon_tables[name]["path"], root)
    strays = _age_and_plant(root)
    ids = [h["snapshot_id"] for h in cli_json("inspect", root, "--history")["history"]]
    before = [_rows(t) for t, _ in pypaimon_env.read_many([(root, i) for i in ids])]

    plan = cli_json("vacuum", root, "--dry-run")
    listed = {f["path"] for f in plan["files"]}
    assert listed == strays
    if name not in DATA_EVOLUTION:  # which Paimon Java 1.4 does not open
        paimon = paimon_java.python(PAIMON_CLEAN, path=str(root), older_than=plan["cutoff_ms"])
        assert listed == {Path(p).relative_to(root).as_posix() for p in paimon}

    done = cli_json("vacuum", root)
    assert done["deleted_files"] == len(strays) and not done["failed"]
    after = [_rows(t) for t, _ in pypaimon_env.read_many([(root, i) for i in ids])]
    assert after == before
    assert not any((root / s).exists() for s in strays)
