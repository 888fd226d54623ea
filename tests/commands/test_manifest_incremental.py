"""Manifests kept up to date after every commit (`refresh_manifests_after_commit`), as Delta
does on tables with `delta.compatibility.symlinkFormatManifest.enabled=true`.

deltalake refuses to write that property, so it is set by a metaData commit through dvtool's
LogWriter (PROTOCOL.md: a metaData action replaces the table's configuration); the commits
under test are removes and adds written through LogWriter too. The live files each manifest
must list come from deltalake (`DeltaTable.file_uris()`, its own log replay), grouped by
partition with `get_add_actions`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from dvtool.commands.manifest import run_generate_manifest
from dvtool.delta.log.reader import open_log
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.symlink_manifests import (
    MANIFEST_DIR,
    SYMLINK_MANIFEST_PROPERTY,
    ManifestRefresh,
    refresh_manifests_after_commit,
)
from dvtool.delta.log.writer import CommitResult, LogWriter, snapshot_commit_info
from dvtool.delta.protocol.commit import remove_for_add
from tests.oracles import copy_golden

# Partition value -> its manifest directory (Spark's escapePathName; NULL is Hive's default).
DIRS = {
    "a b/c": "part=a b%2Fc",
    "x": "part=x",
    None: "part=__HIVE_DEFAULT_PARTITION__",
    "y": "part=y",
    "z": "part=z",
    "w": "part=w",
}
Action = dict[str, Any]


# -- helpers -------------------------------------------------------------------------------


def partitioned_table(path: Path) -> Path:
    """Partitions "a b/c", "x", NULL, "y", "z", two files each (two appends)."""
    values = ["a b/c", "x", None, "y", "z"]
    for start in (0, 100):
        ids = list(range(start, start + 10))
        data = pa.table({"id": ids, "part": [values[i % len(values)] for i in ids]})
        write_deltalake(str(path), data, partition_by=["part"], mode="append")
    return path


def unpartitioned_table(path: Path) -> Path:
    for start in (0, 10, 20):
        write_deltalake(str(path), pa.table({"id": list(range(start, start + 10))}), mode="append")
    return path


def commit(table: Path, actions: Sequence[Action], operation: str = "WRITE") -> CommitResult:
    """Commit `actions` (after a commitInfo) at the next version with dvtool's LogWriter."""
    log = open_log(str(table))
    snapshot = log.snapshot()
    txn_id = str(uuid.uuid4())
    info = snapshot_commit_info(
        snapshot, operation, {}, {}, txn_id=txn_id, now_ms=int(time.time() * 1000)
    )
    return LogWriter(log).commit(snapshot.version + 1, [info, *actions], txn_id)


def set_property(table: Path, value: str | None) -> CommitResult:
    """A SET TBLPROPERTIES commit: the metaData with the manifest property set (or unset)."""
    metadata = open_log(str(table)).snapshot().metadata.to_json()
    configuration = dict(metadata.get("configuration") or {})
    configuration.pop(SYMLINK_MANIFEST_PROPERTY, None)
    if value is not None:
        configuration[SYMLINK_MANIFEST_PROPERTY] = value
    metadata["configuration"] = configuration
    return commit(table, [{"metaData": metadata}], "SET TBLPROPERTIES")


def refresh(table: Path, result: CommitResult) -> ManifestRefresh | None:
    return refresh_manifests_after_commit(open_log(str(table)), result.version, result.actions)


def live_rows(table: Path, part: object = "<any>") -> list[dict[str, Any]]:
    """The live add rows of the latest snapshot (of partition `part` if given)."""
    snapshot: Snapshot = open_log(str(table)).snapshot()
    rows: list[dict[str, Any]] = snapshot.files.to_pylist()
    if part == "<any>":
        return rows
    return [r for r in rows if dict(r["partitionValues"] or []).get("part") == part]


def removes(rows: Sequence[Mapping[str, Any]]) -> list[Action]:
    return [remove_for_add(r, int(time.time() * 1000)) for r in rows]


def new_file(table: Path, ids: Sequence[int], partition: Mapping[str, str | None]) -> Action:
    """Write a parquet file at the table root and return its add action. It is not under its
    partition's directory on purpose: manifests group files by partitionValues, not by path."""
    name = f"added-{uuid.uuid4().hex}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), table / name)
    return {
        "add": {
            "path": name,
            "partitionValues": dict(partition),
            "size": (table / name).stat().st_size,
            "modificationTime": int(time.time() * 1000),
            "dataChange": True,
            "stats": json.dumps({"numRecords": len(ids)}),
        }
    }


def manifests(table: Path) -> dict[str, list[str]]:
    """Every manifest under the table: partition directory ("" for the root) -> its lines."""
    root = table / MANIFEST_DIR
    out = {}
    for path in sorted(root.rglob("manifest")):
        text = path.read_text()
        assert text == "" or text.endswith("\n"), "each line is newline-terminated"
        key = "" if path.parent == root else str(path.parent.relative_to(root))
        out[key] = text.splitlines()
    return out


def listed_files(lines: Sequence[str]) -> set[str]:
    """Manifest lines (Hadoop's `file:/abs/path`) as local paths."""
    assert all(line.startswith("file:/") and not line.startswith("file://") for line in lines)
    return {line[len("file:") :] for line in lines}


def live_by_directory(table: Path) -> dict[str, set[str]]:
    """deltalake's live files (absolute paths) by manifest directory."""
    dt = DeltaTable(str(table))
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    out: dict[str, set[str]] = {}
    for add in adds:
        out.setdefault(DIRS[add["partition.part"]], set()).add(str(table / unquote(add["path"])))
    assert set().union(*out.values()) == set(dt.file_uris()), "same files both ways"
    return out


def manifest_stats(table: Path) -> dict[str, tuple[bytes, int]]:
    """Each manifest's bytes and inode (an atomic replace gives a new inode)."""
    root = table / MANIFEST_DIR
    return {
        str(p.parent.relative_to(root)): (p.read_bytes(), os.stat(p).st_ino)
        for p in sorted(root.rglob("manifest"))
    }


def tree_bytes(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def enabled_partitioned_table(path: Path) -> Path:
    """A partitioned table with the property on and its manifests generated."""
    table = partitioned_table(path)
    done = refresh(table, set_property(table, "true"))
    assert done is not None and done.warning is None and done.full
    return table


# -- partitioned -----------------------------------------------------------------------------


def test_partitioned_commit_rewrites_exactly_the_touched_partitions(tmp_path: Path) -> None:
    table = enabled_partitioned_table(tmp_path / "t")
    before = manifest_stats(table)
    # Touch "a b/c" (one file replaced), empty "y", create "w"; leave "x", NULL, "z" alone.
    touched = live_rows(table, "a b/c")[:1] + live_rows(table, "y")
    actions = [
        *removes(touched),
        new_file(table, [1000, 1001], {"part": "a b/c"}),
        new_file(table, [2000], {"part": "w"}),
    ]
    result = commit(table, actions)

    done = refresh(table, result)

    assert done is not None and done.warning is None and not done.full
    assert done.version == done.snapshot_version == result.version
    assert sorted(m.partition for m in done.updated) == ["part=a b%2Fc", "part=w"]
    assert done.deleted == [str(table / MANIFEST_DIR / "part=y" / "manifest")]
    found = manifests(table)
    live = live_by_directory(table)
    assert sorted(found) == sorted(live), "no manifest for the emptied partition"
    for directory in ("part=a b%2Fc", "part=w"):
        assert listed_files(found[directory]) == live[directory]
        assert len(found[directory]) == len(live[directory])
    assert not (table / MANIFEST_DIR / "part=y").exists(), "its empty directory is pruned"
    after = manifest_stats(table)
    for directory in ("part=x", "part=__HIVE_DEFAULT_PARTITION__", "part=z"):
        assert after[directory] == before[directory], f"{directory} untouched, not rewritten"
    assert after["part=a b%2Fc"] != before["part=a b%2Fc"]


def test_partitioned_refresh_matches_a_full_generation(tmp_path: Path) -> None:
    table = enabled_partitioned_table(tmp_path / "t")
    actions = [*removes(live_rows(table, None)), new_file(table, [7], {"part": "x"})]
    assert refresh(table, commit(table, actions)) is not None
    incremental = manifests(table)

    run_generate_manifest(open_log(str(table)))

    assert manifests(table) == incremental
    assert {d: listed_files(lines) for d, lines in incremental.items()} == live_by_directory(table)


def test_remove_without_partition_values_regenerates_every_manifest(tmp_path: Path) -> None:
    table = enabled_partitioned_table(tmp_path / "t")
    now = int(time.time() * 1000)
    bare = [
        {"remove": {"path": r["path"], "deletionTimestamp": now, "dataChange": True}}
        for r in live_rows(table, "z")
    ]

    done = refresh(table, commit(table, bare))

    assert done is not None and done.full and done.warning is None
    assert done.deleted == [str(table / MANIFEST_DIR / "part=z" / "manifest")]
    found = manifests(table)
    assert {d: listed_files(lines) for d, lines in found.items()} == live_by_directory(table)


def test_first_refresh_generates_every_manifest(tmp_path: Path) -> None:
    """With no manifests yet, Delta generates them all, not only the touched partition's."""
    table = partitioned_table(tmp_path / "t")
    set_property(table, "true")  # committed without a refresh: no manifests yet
    result = commit(table, [new_file(table, [5], {"part": "x"})])

    done = refresh(table, result)

    assert done is not None and done.full
    found = manifests(table)
    assert len(found) == 5
    assert {d: listed_files(lines) for d, lines in found.items()} == live_by_directory(table)


# -- unpartitioned ---------------------------------------------------------------------------


def test_unpartitioned_commit_rewrites_the_single_manifest(tmp_path: Path) -> None:
    table = unpartitioned_table(tmp_path / "t")
    assert refresh(table, set_property(table, "true")) is not None
    actions = [*removes(live_rows(table)[:1]), new_file(table, [99], {})]

    done = refresh(table, commit(table, actions))

    assert done is not None and done.warning is None and not done.full
    assert [m.partition for m in done.updated] == [""] and done.deleted == []
    found = manifests(table)
    assert list(found) == [""]
    assert listed_files(found[""]) == set(DeltaTable(str(table)).file_uris())
    assert len(found[""]) == 3


def test_unpartitioned_table_emptied_gets_an_empty_manifest(tmp_path: Path) -> None:
    table = unpartitioned_table(tmp_path / "t")
    assert refresh(table, set_property(table, "true")) is not None

    done = refresh(table, commit(table, removes(live_rows(table))))

    assert done is not None and done.updated[0].num_files == 0
    assert DeltaTable(str(table)).file_uris() == []
    assert (table / MANIFEST_DIR / "manifest").read_bytes() == b""


# -- the property ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "false", "no"])
def test_nothing_happens_when_the_property_is_off(tmp_path: Path, value: str | None) -> None:
    table = partitioned_table(tmp_path / "t")
    if value is not None:
        set_property(table, value)
    run_generate_manifest(open_log(str(table)))
    before = tree_bytes(table / MANIFEST_DIR)
    result = commit(table, [*removes(live_rows(table, "x")), new_file(table, [3], {"part": "w"})])

    assert refresh(table, result) is None
    assert tree_bytes(table / MANIFEST_DIR) == before, "manifests left as they were"


@pytest.mark.parametrize("value", ["TRUE", "True", " true "])
def test_the_property_is_case_insensitive(tmp_path: Path, value: str) -> None:
    table = partitioned_table(tmp_path / "t")
    done = refresh(table, set_property(table, value))
    assert done is not None and done.full and len(done.updated) == 5


def test_turning_the_property_off_stops_the_refresh(tmp_path: Path) -> None:
    table = enabled_partitioned_table(tmp_path / "t")
    assert refresh(table, set_property(table, "false")) is None


def test_given_metadata_spares_reading_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = partitioned_table(tmp_path / "t")
    log = open_log(str(table))
    metadata = log.snapshot().metadata
    result = commit(table, [new_file(table, [3], {"part": "x"})])

    def no_read(*_: object) -> Snapshot:
        raise AssertionError("the log was read")

    monkeypatch.setattr(log, "snapshot", no_read)
    assert (
        refresh_manifests_after_commit(log, result.version, result.actions, metadata=metadata)
        is None
    )


# -- tables manifests would misdescribe, failures --------------------------------------------


def test_deletion_vectors_written_by_another_writer_are_a_warning(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    result = set_property(table, "true")
    before = tree_bytes(table)

    done = refresh(table, result)

    assert done is not None and done.warning is not None
    assert f"committed version {result.version}" in done.warning
    assert "deletion vectors" in done.warning and "--purge-first" in done.warning
    assert done.updated == [] and done.deleted == []
    assert tree_bytes(table) == before, "no manifest written"


def test_column_mapped_table_is_a_warning(tmp_path: Path) -> None:
    table = copy_golden("cdf-column-mapping-name-mode", tmp_path)
    done = refresh(table, set_property(table, "true"))
    assert done is not None and done.warning is not None and "column mapping" in done.warning
    assert not (table / MANIFEST_DIR).exists()


def test_write_failure_is_a_warning_and_the_commit_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = enabled_partitioned_table(tmp_path / "t")
    result = commit(table, [*removes(live_rows(table, "x")), new_file(table, [4], {"part": "x"})])
    monkeypatch.setenv("DVTOOL_FAULT", "manifest:fail")

    done = refresh(table, result)

    assert done is not None and done.warning is not None
    assert done.warning.startswith(f"committed version {result.version}, but its symlink")
    assert "dvtool generate-manifest" in done.warning
    assert DeltaTable(str(table)).version() == result.version, "the commit landed"
    monkeypatch.delenv("DVTOOL_FAULT")
    again = refresh(table, result)
    assert again is not None and again.warning is None
    assert listed_files(manifests(table)["part=x"]) == live_by_directory(table)["part=x"]


def test_result_json(tmp_path: Path) -> None:
    table = enabled_partitioned_table(tmp_path / "t")
    done = refresh(table, commit(table, removes(live_rows(table, "y"))))
    assert done is not None
    doc = done.to_json()
    assert doc == json.loads(json.dumps(doc))
    assert set(doc) == {"version", "snapshot_version", "full", "updated", "deleted", "warning"}
    assert doc["updated"] == [] and doc["deleted"] == [
        str(table / MANIFEST_DIR / "part=y" / "manifest")
    ]
