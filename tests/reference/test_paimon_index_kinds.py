"""dvtool on Paimon tables whose metadata holds more than deletion files: dynamic-bucket
hash indexes, changelogs (`lookup`, `input`, decoupled ones of expired snapshots) and tags
pinning expired snapshots (tests/reference/paimon_index_tables.py), against Paimon's Java
reader and orphan cleaner (the `paimon_java` session).

`inspect` counts the rows, files and DVs Paimon's reader reports, and the index manifest's
`HASH` files as hash index files, never as deletion files or DVs; `--verify` passes on every
snapshot and names a missing or cut hash index (which Paimon's next write needs); pypaimon
reads every table through the files and DVs dvtool counts. `vacuum` (on an aged copy with
strays planted, as tests/reference/test_paimon_vacuum.py does) lists exactly what Paimon's
`LocalOrphanFilesClean` would delete, deletes only that, and keeps every hash index,
changelog file and manifest and every file a tag pins: afterwards Paimon reads the same rows
at every kept snapshot and tag.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.engines import pypaimon_env
from tests.engines.jvm_engines import JvmError, JvmSession
from tests.reference.iceberg_writes import cli_json
from tests.reference.paimon_index_tables import SPECS, build_all
from tests.reference.paimon_state import paimon_scan
from tests.reference.paimon_tables import JAVA_OPEN_BY_PATH, JAVA_READ_ROWS

NAMES = [spec.name for spec in SPECS]
DAY_S = 24 * 3600

# Runs in the engine's process: the latest snapshot's index files (type, name) by Paimon's
# own index manifest reader.
INDEX_FILES = (
    JAVA_OPEN_BY_PATH
    + """
snapshot = table.snapshotManager().latestSnapshot()
handler = table.store().newIndexFileHandler()
entries = handler.readManifest(snapshot.indexManifest()) if snapshot.indexManifest() else []
result = [[str(e.indexFile().indexType()), str(e.indexFile().fileName())] for e in entries]
"""
)

# Runs in the engine's process: the rows Paimon reads with the options (a tag, a snapshot).
ROWS = (
    JAVA_OPEN_BY_PATH
    + """
options = jvm.java.util.HashMap()
for key, value in args["options"].items():
    options.put(key, value)
table = table.copy(options)
builder = P.table.source.ReadBuilderImpl(table)
read = builder.newRead()
rows = []
for split in builder.newScan().plan().splits():
"""
    + JAVA_READ_ROWS
    + """result = sorted(rows, key=lambda r: r["id"])
"""
)

PAIMON_CLEAN = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
found = P.operation.LocalOrphanFilesClean(table, args["older_than"], True).clean()
result = sorted(str(p).removeprefix("file:") for p in found.getDeletedFilesPath())
"""


@pytest.fixture(scope="module")
def paimon_index_tables(
    paimon_java: JvmSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The tables of tests/reference/paimon_index_tables.py, built once for this module."""
    out = tmp_path_factory.mktemp("paimon-index-tables")
    manifest: dict[str, Any] = json.loads(build_all(paimon_java, out).read_text())
    return manifest


def _rows(session: JvmSession, path: Path | str, **options: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = session.python(ROWS, path=str(path), options=options)
    return rows


@pytest.mark.parametrize("name", NAMES)
def test_inspect_counts_what_paimon_reads_and_hash_indexes_apart(
    name: str, paimon_index_tables: dict[str, Any], paimon_java: JvmSession
) -> None:
    entry = paimon_index_tables[name]
    path = entry["path"]
    assert _rows(paimon_java, path) == entry["expected"]
    scan = paimon_scan(paimon_java, path)
    doc = cli_json("inspect", path, "--files", "--verify")
    assert doc["logical_rows"] == scan["rows"] == len(entry["expected"])
    assert doc["physical_rows"] == sum(f["rows"] for f in scan["files"])
    assert doc["deleted_rows"] == sum(f["dv"]["cardinality"] for f in scan["files"] if f["dv"])
    dvs = sum(bool(f["dv"]) for f in scan["files"])
    assert doc["files_with_dvs"] == doc["deletion_vectors"] == dvs > 0
    assert {f"{path}/{f['path']}" for f in doc["files"] if f["visible"]} == {
        f["path"] for f in scan["files"]
    }
    kinds = [kind for kind, _ in paimon_java.python(INDEX_FILES, path=path)]
    assert doc["deletion_files"] == kinds.count("DELETION_VECTORS")
    assert doc.get("hash_index_files", 0) == kinds.count("HASH")
    assert (kinds.count("HASH") > 0) == (name == "pk_dynamic_bucket")
    assert doc["verify"]["ok"] and doc["verify"]["dvs_checked"] == dvs


def test_pypaimon_reads_them_as_dvtool_counts(paimon_index_tables: dict[str, Any]) -> None:
    """pypaimon (Paimon's Python reader) reads every table, hash indexes and changelogs
    beside its DVs, to the intended rows through the files and DVs dvtool counts."""
    names = list(paimon_index_tables)
    paths = [paimon_index_tables[n]["path"] for n in names]
    for name, path, (rows, read) in zip(
        names, paths, pypaimon_env.read_many([(p, None) for p in paths]), strict=True
    ):
        by_id = sorted(rows.select(["id", "part", "v"]).to_pylist(), key=lambda r: r["id"])
        assert by_id == paimon_index_tables[name]["expected"]
        doc = cli_json("inspect", path, "--files")
        assert doc["logical_rows"] == read["rows"]
        assert doc["deleted_rows"] == sum(f["dv"]["cardinality"] for f in read["files"] if f["dv"])
        assert {f"{path}/{f['path']}" for f in doc["files"] if f["visible"]} == {
            f["path"] for f in read["files"]
        }


def test_verify_passes_on_every_snapshot(paimon_index_tables: dict[str, Any]) -> None:
    for entry in paimon_index_tables.values():
        for h in cli_json("inspect", entry["path"], "--history")["history"]:
            doc = cli_json("inspect", entry["path"], "--version", str(h["snapshot_id"]), "--verify")
            assert doc["verify"]["ok"], doc["verify"]["problems"]


def test_the_fixtures_have_what_they_claim(paimon_index_tables: dict[str, Any]) -> None:
    lookup = Path(paimon_index_tables["pk_changelog_lookup"]["path"])
    assert list(lookup.glob("changelog/changelog-*")) and list(lookup.glob("bucket-*/changelog-*"))
    # `data-file.path-directory` data: partition folders under data/
    assert list(
        Path(paimon_index_tables["pk_changelog_input"]["path"]).glob("data/*/*/changelog-*")
    )
    tagged = Path(paimon_index_tables["pk_tagged"]["path"])
    assert sorted(p.name for p in tagged.glob("tag/tag-*")) == ["tag-t1", "tag-t2"]
    assert [p.name for p in tagged.glob("snapshot/snapshot-*")] == ["snapshot-6"]
    t2 = json.loads((tagged / "tag" / "tag-t2").read_text())
    assert not (tagged / "manifest" / t2["changelogManifestList"]).exists()
    decoupled = json.loads((lookup / "changelog" / "changelog-1").read_text())
    assert not (lookup / "manifest" / decoupled["baseManifestList"]).exists()


def _age(root: Path) -> None:
    then = time.time() - 2 * DAY_S
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def _plant(root: Path) -> set[str]:
    """Old strays where Paimon's cleaner looks: a manifest, an index file, a data file and a
    changelog file in a bucket folder."""
    bucket = next(p for p in sorted(root.rglob("bucket-*")) if p.is_dir()).relative_to(root)
    strays = {
        "manifest/manifest-00000000-stray-0",
        "index/index-00000000-stray-0",
        f"{bucket.as_posix()}/data-00000000-stray-0.parquet",
        f"{bucket.as_posix()}/changelog-00000000-stray-0.parquet",
    }
    then = time.time() - 2 * DAY_S
    for relative in strays:
        (root / relative).write_bytes(b"stray")
        os.utime(root / relative, (then, then))
    return strays


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", NAMES)
def test_vacuum_keeps_hash_indexes_changelogs_and_tagged_files(
    name: str, paimon_index_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    import shutil

    entry = paimon_index_tables[name]
    root = tmp_path / name
    shutil.copytree(entry["path"], root)
    _age(root)
    strays = _plant(root)
    history = [h["snapshot_id"] for h in cli_json("inspect", root, "--history")["history"]]
    before = {s: _rows(paimon_java, root, **{"scan.snapshot-id": str(s)}) for s in history}
    tags = {t: _rows(paimon_java, root, **{"scan.tag-name": t}) for t in entry["tags"]}
    assert tags == entry["tags"]
    files = _files(root)

    plan = cli_json("vacuum", root, "--dry-run")
    listed = {f["path"] for f in plan["files"]}
    paimon = paimon_java.python(PAIMON_CLEAN, path=str(root), older_than=plan["cutoff_ms"])
    assert listed == {Path(p).relative_to(root).as_posix() for p in paimon} == strays

    done = cli_json("vacuum", root)
    assert done["deleted_files"] == len(strays) and not done["failed"]
    assert _files(root) == files - strays
    for snapshot_id, rows in before.items():
        assert _rows(paimon_java, root, **{"scan.snapshot-id": str(snapshot_id)}) == rows
        verify = cli_json("inspect", root, "--version", str(snapshot_id), "--verify")["verify"]
        assert verify["ok"], verify["problems"]
    for tag, rows in tags.items():
        assert _rows(paimon_java, root, **{"scan.tag-name": tag}) == rows
    assert cli_json("vacuum", root, "--dry-run")["files"] == []


# Runs in the engine's process: what Paimon's next dynamic-bucket write does first, assign a
# key of partition `p0` to a bucket, which loads the partition's hash indexes.
ASSIGN = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
assigner = P.index.HashBucketAssigner(
    table.snapshotManager(), "check", table.store().newIndexFileHandler(), 1, 1, 0, 8, -1)
part = P.data.BinaryRow(1)
writer = P.data.BinaryRowWriter(part)
writer.writeString(0, P.data.BinaryString.fromString("p0"))
writer.complete()
result = assigner.assign(part, 12345)
"""


def _hash_file(root: Path, session: JvmSession) -> Path:
    name = next(n for kind, n in session.python(INDEX_FILES, path=str(root)) if kind == "HASH")
    return root / "index" / name


HASH_DAMAGES = ("hash-index-missing", "hash-index-size", "hash-index-unreadable")
"""The kinds of `--verify` problems tested here (tests/reference/test_paimon_inspect.py
counts them among the tested ones)."""


@pytest.mark.parametrize("kind", HASH_DAMAGES)
def test_verify_names_a_damaged_hash_index(
    kind: str,
    paimon_index_tables: dict[str, Any],
    paimon_java: JvmSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Readers do not need the hash index, so Paimon reads the rows all the same; its next
    write does: without the file its bucket assigner fails. An unreadable one: the storage's
    look-up of it fails (root stats any local file, so the failure is injected)."""
    import shutil

    from dvtool.storage.table_storage import Storage

    entry = paimon_index_tables["pk_dynamic_bucket"]
    root = tmp_path / "pk_dynamic_bucket"
    shutil.copytree(entry["path"], root)
    paimon_java.python(ASSIGN, path=str(root))  # the intact table assigns
    target = _hash_file(root, paimon_java)
    if kind == "hash-index-missing":
        target.unlink()
    elif kind == "hash-index-size":
        target.write_bytes(target.read_bytes()[:-4])
    else:
        real = Storage.info

        def refused(self: Storage, location: str) -> Any:
            if location.endswith(target.name):
                raise PermissionError(13, "Permission denied", location)
            return real(self, location)

        monkeypatch.setattr(Storage, "info", refused)
    problems = cli_json("inspect", root, "--verify", code=6)["verify"]["problems"]
    assert [p["kind"] for p in problems] == [kind] and target.name in problems[0]["message"]
    assert _rows(paimon_java, root) == entry["expected"]
    if kind == "hash-index-missing":
        with pytest.raises(JvmError):
            paimon_java.python(ASSIGN, path=str(root))
