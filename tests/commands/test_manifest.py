"""Acceptance tests of `dvtool generate-manifest` (`run_generate_manifest`).

The live files a manifest must list come from deltalake (`DeltaTable.file_uris()`, its own log
replay); the rows a manifest reader would see are read from the listed parquet files with
pyarrow and compared with polars' read of the table.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import fsspec
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.enable import run_enable
from dvtool.commands.manifest import run_generate_manifest
from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.delta.log.symlink_manifests import MANIFEST_DIR, existing_manifests, manifest_path
from dvtool.errors import WriteRefusedError
from dvtool.storage.table_storage import Storage
from tests.oracles import copy_golden

PARTS = ["a b/c", "x", None, "100%", "a=b"]
HIVE = {None: "__HIVE_DEFAULT_PARTITION__", "a b/c": "a b%2Fc", "100%": "100%25", "a=b": "a%3Db"}


def manifests(table: Path) -> dict[str, list[str]]:
    """Every manifest under the table: partition directory -> its lines."""
    root = table / MANIFEST_DIR
    out = {}
    for path in sorted(root.rglob("manifest")):
        text = path.read_text()
        assert text == "" or text.endswith("\n"), "each line is newline-terminated"
        key = "" if path.parent == root else str(path.parent.relative_to(root))
        out[key] = text.splitlines()
    return out


def local(line: str) -> str:
    """A manifest line as a local path (manifests write Hadoop's `file:/abs/path`)."""
    assert line.startswith("file:/") and not line.startswith("file://"), line
    return line[len("file:") :]


def rows_of(table: Path) -> list[dict[str, object]]:
    return pl.read_delta(str(table)).sort(pl.all()).to_dicts()


def manifest_ids(table: Path) -> dict[str, list[int]]:
    """The ids a manifest reader sees, by manifest directory (from the listed files)."""
    return {
        directory: sorted(i for line in lines for i in pq.read_table(local(line))["id"].to_pylist())
        for directory, lines in manifests(table).items()
    }


def expected_ids(table: Path, partitioned: bool) -> dict[str, list[int]]:
    """polars' rows of the table, grouped by the Hive directory of their partition."""
    out: dict[str, list[int]] = {}
    for row in rows_of(table):
        key = "part=" + HIVE.get(row["part"], str(row["part"])) if partitioned else ""
        out.setdefault(key, []).append(int(row["id"]))  # type: ignore[call-overload]
    return {k: sorted(v) for k, v in out.items()}


def partitioned_table(path: Path) -> Path:
    ids = list(range(20))
    data = pa.table({"id": ids, "part": [PARTS[i % len(PARTS)] for i in ids]})
    write_deltalake(str(path), data.slice(0, 10), partition_by=["part"])
    write_deltalake(str(path), data.slice(10), mode="append")
    return path


def dv_table(path: Path, *, partitioned: bool) -> tuple[Path, dict[str, list[int]]]:
    """deltalake writes, dvtool enables DVs and deletes rows through DVs; also the ids left,
    by manifest directory (computed from the data, not read back)."""
    ids = list(range(40))
    parts = [PARTS[i % 2] for i in ids]
    data = pa.table({"id": ids, "part": parts})
    write_deltalake(str(path), data, partition_by=["part"] if partitioned else None)
    write_deltalake(str(path), data.slice(0, 5), mode="append")
    run_enable(open_log(str(path)))
    result = run_delete(open_log(str(path)), DeleteRequest("id % 3 = 0"))
    assert result.mode == "dv" and result.version is not None
    left: dict[str, list[int]] = {}
    for i, part in [*zip(ids, parts, strict=True), *zip(ids[:5], parts[:5], strict=True)]:
        if i % 3:
            key = f"part={HIVE.get(part, part)}" if partitioned else ""
            left.setdefault(key, []).append(i)
    return path, {k: sorted(v) for k, v in left.items()}


def tree_hashes(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def test_unpartitioned_manifest_lists_exactly_the_live_files(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for start in (0, 10, 20):
        write_deltalake(str(table), pa.table({"id": list(range(start, start + 10))}), mode="append")
    DeltaTable(str(table)).delete("id < 5")  # copy-on-write: one file replaced

    result = run_generate_manifest(open_log(str(table)))

    found = manifests(table)
    assert list(found) == [""]
    assert sorted(local(line) for line in found[""]) == sorted(DeltaTable(str(table)).file_uris())
    assert result.version == DeltaTable(str(table)).version()
    assert [m.partition for m in result.manifests] == [""]
    assert result.manifests[0].num_files == len(found[""])
    assert result.deleted == []
    assert manifest_ids(table) == expected_ids(table, partitioned=False)


def test_partitioned_manifests_per_partition_with_hive_escaping(tmp_path: Path) -> None:
    table = partitioned_table(tmp_path / "t")

    result = run_generate_manifest(open_log(str(table)))

    found = manifests(table)
    # Spark's escapePathName: '/', '%', '=' escaped, space kept; NULL is the Hive default.
    assert sorted(found) == [
        "part=100%25",
        "part=__HIVE_DEFAULT_PARTITION__",
        "part=a b%2Fc",
        "part=a%3Db",
        "part=x",
    ]
    listed = sorted(local(line) for lines in found.values() for line in lines)
    assert listed == sorted(DeltaTable(str(table)).file_uris())
    # Each manifest holds exactly the files of its partition (deltalake's add actions).
    adds = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).to_pylist()
    by_directory: dict[str, set[str]] = {}
    for add in adds:
        directory = "part=" + HIVE.get(add["partition.part"], str(add["partition.part"]))
        by_directory.setdefault(directory, set()).add(add["path"].rsplit("/", 1)[-1])
    assert {d: {local(line).rsplit("/", 1)[-1] for line in found[d]} for d in found} == (
        by_directory
    )
    assert sorted(m.partition for m in result.manifests) == sorted(found)
    assert result.num_files == len(adds)
    assert manifest_ids(table) == expected_ids(table, partitioned=True)


def test_stale_partition_manifests_are_removed(tmp_path: Path) -> None:
    table = partitioned_table(tmp_path / "t")
    run_generate_manifest(open_log(str(table)))
    assert "part=a b%2Fc" in manifests(table)

    DeltaTable(str(table)).delete("part = 'a b/c'")
    result = run_generate_manifest(open_log(str(table)))

    found = manifests(table)
    assert "part=a b%2Fc" not in found
    assert not (table / MANIFEST_DIR / "part=a b%2Fc").exists(), "empty directory pruned"
    assert result.deleted == [str(table / MANIFEST_DIR / "part=a b%2Fc" / "manifest")]
    listed = sorted(local(line) for lines in found.values() for line in lines)
    assert listed == sorted(DeltaTable(str(table)).file_uris())
    # Regenerating without changes deletes nothing and rewrites the same contents.
    again = run_generate_manifest(open_log(str(table)))
    assert again.deleted == [] and manifests(table) == found


def test_existing_manifests_lists_partition_directories(tmp_path: Path) -> None:
    table = partitioned_table(tmp_path / "t")
    storage = Storage.for_table(str(table))
    assert existing_manifests(storage) == []
    run_generate_manifest(open_log(str(table)))
    assert existing_manifests(storage) == sorted(manifests(table))


def test_empty_unpartitioned_table_gets_an_empty_manifest(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"id": [1, 2]}))
    DeltaTable(str(table)).delete()
    result = run_generate_manifest(open_log(str(table)))
    assert (table / MANIFEST_DIR / "manifest").read_bytes() == b""
    assert result.num_files == 0 and len(result.manifests) == 1


def test_refused_while_the_table_has_deletion_vectors(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    before = tree_hashes(table)
    with pytest.raises(WriteRefusedError) as error:
        run_generate_manifest(open_log(str(table)))
    message = str(error.value)
    assert "deletion vectors" in message
    assert "--purge-first" in message and "dvtool optimize" in message
    assert tree_hashes(table) == before, "nothing written"


@pytest.mark.parametrize("partitioned", [False, True])
def test_purge_first_purges_then_lists_the_purged_files(tmp_path: Path, partitioned: bool) -> None:
    table, left = dv_table(tmp_path / "t", partitioned=partitioned)
    version_before = open_log(str(table)).snapshot().version

    result = run_generate_manifest(open_log(str(table)), purge_first=True)

    assert result.purge is not None and result.purge.versions
    assert result.version == result.purge.versions[-1] > version_before
    snapshot = open_log(str(table)).snapshot()
    assert snapshot.files.column("deletionVector").null_count == snapshot.files.num_rows
    found = manifests(table)
    listed = sorted(local(line) for lines in found.values() for line in lines)
    assert listed == sorted(DeltaTable(str(table)).file_uris())
    assert manifest_ids(table) == left, "a manifest reader sees exactly the rows not deleted"
    assert manifest_ids(table) == expected_ids(table, partitioned), "and polars agrees"


def test_purge_first_on_golden_dv_table(tmp_path: Path) -> None:
    table = copy_golden("dv-partitioned-with-checkpoint/delta", tmp_path)
    expected = pl.read_delta(str(table)).height
    result = run_generate_manifest(open_log(str(table)), purge_first=True)
    listed = sorted(local(line) for lines in manifests(table).values() for line in lines)
    assert listed == sorted(DeltaTable(str(table)).file_uris())
    assert sum(pq.read_metadata(p).num_rows for p in listed) == expected
    assert result.to_json()["num_files"] == len(listed)


def test_purge_first_without_dvs_purges_nothing(tmp_path: Path) -> None:
    table = partitioned_table(tmp_path / "t")
    result = run_generate_manifest(open_log(str(table)), purge_first=True)
    assert result.purge is None
    assert result.version == 1


@pytest.mark.parametrize("name", ["cdf-column-mapping-name-mode", "dv-with-columnmapping/delta"])
def test_column_mapped_table_refused(tmp_path: Path, name: str) -> None:
    table = copy_golden(name, tmp_path)
    before = tree_hashes(table)
    with pytest.raises(WriteRefusedError, match="column mapping"):
        run_generate_manifest(open_log(str(table)), purge_first=True)
    assert tree_hashes(table) == before


def test_manifest_paths_are_hadoop_path_strings(tmp_path: Path) -> None:
    s3 = Storage.for_table("s3://bucket/warehouse/t")
    assert manifest_path(s3, "p=a%20b/f.parquet") == "s3://bucket/warehouse/t/p=a b/f.parquet"
    assert manifest_path(s3, "p=a%2520b/f.parquet") == "s3://bucket/warehouse/t/p=a%20b/f.parquet"
    assert manifest_path(s3, "s3://other/x%20y.parquet") == "s3://other/x y.parquet"
    disk = Storage.for_table(str(tmp_path))
    assert manifest_path(disk, "f.parquet") == f"file:{tmp_path}/f.parquet"
    assert manifest_path(disk, "file:///data/z.parquet") == "file:/data/z.parquet"
    assert manifest_path(disk, "/data/z%20z.parquet") == "file:/data/z z.parquet"


def test_object_store_manifests(tmp_path: Path) -> None:
    """On object stores (here fsspec's memory://) lines are `scheme://bucket/key` URIs."""
    fs = fsspec.filesystem("memory")
    bucket = f"manifest-{uuid.uuid4().hex}"
    source = partitioned_table(tmp_path / "t")
    try:
        for p in source.rglob("*"):
            if p.is_file():
                fs.pipe_file(f"/{bucket}/t/{p.relative_to(source)}", p.read_bytes())
        storage = Storage.for_table(f"memory://{bucket}/t")
        fs.pipe_file(f"/{bucket}/t/{MANIFEST_DIR}/part=gone/manifest", b"stale\n")

        result = run_generate_manifest(DeltaLog(storage))

        assert result.deleted == [f"memory://{bucket}/t/{MANIFEST_DIR}/part=gone/manifest"]
        assert existing_manifests(storage) == sorted(m.partition for m in result.manifests)
        lines = []
        for m in result.manifests:
            lines += fs.cat_file(m.location.removeprefix("memory:/")).decode().splitlines()
        prefix = f"memory://{bucket}/t/"
        assert all(line.startswith(prefix) for line in lines)
        expected = {u.removeprefix(str(source) + "/") for u in DeltaTable(str(source)).file_uris()}
        assert {line.removeprefix(prefix) for line in lines} == expected
    finally:
        fs.rm(f"/{bucket}", recursive=True)


def test_result_json(tmp_path: Path) -> None:
    table = partitioned_table(tmp_path / "t")
    doc = run_generate_manifest(open_log(str(table))).to_json()
    assert set(doc) == {
        "version",
        "root",
        "num_manifests",
        "num_files",
        "manifests",
        "deleted",
        "purge",
        "warnings",
    }
    assert doc["num_manifests"] == 5 and doc["root"] == str(table / MANIFEST_DIR)
    assert json.loads(json.dumps(doc)) == doc
