"""Log replay on disk keys files on their canonical path, as Delta Spark does.

A table is built by hand (parquet data files written with pyarrow, JSON commits per
PROTOCOL.md) whose log adds files in one spelling and removes them in another: absolute
`file:` URIs (`file:/r/x`, `file:///r/x`) or POSIX paths versus paths relative to the root,
`%20`/`%3A` escapes versus the characters themselves. Its root has a space in it, so the
absolute spellings escape the root too. Optionally dvtool checkpoints the first version, so
that the checkpoint's rows meet the later removes in the vectorised replay.

The oracles: deltalake (`DeltaTable.file_uris`) and polars (`read_delta`) read a twin table
with the same data files and the same history spelled the standard way (every path relative
and escaped as Delta Spark writes it). deltalake 1.x and polars do not canonicalize paths
themselves (delta-kernel-rs skips Delta's `canonicalized-paths-*` golden tables for that
bug, and joins absolute paths onto the root), so they cannot read the mixed-spelling table
correctly; on the twin they must agree with dvtool on the mixed one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import deltalake
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.delta.log.writer import LogWriter
from dvtool.delta.protocol.paths import canonical_path
from dvtool.storage.table_storage import Storage

SCHEMA = {
    "type": "struct",
    "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
}
# The data files under the root and their ids.
DATA = {
    "a/part-0.parquet": [0, 1],
    "dir with space/part-1.parquet": [10, 11, 12],
    "b/part:2.parquet": [20],
    "part-3.parquet": [30, 31],
    "c d/part-4.parquet": [40, 41, 42, 43],
}
OUTSIDE_IDS = [90, 91]

# Spell a file for the mixed log: (table root, path under it) -> path as logged.
Spelling = Callable[[str, str], str]


def relative_escaped(root: str, rel: str) -> str:
    return quote(rel, safe="/")


def relative_literal(root: str, rel: str) -> str:
    return rel


def absolute_posix(root: str, rel: str) -> str:
    return quote(f"{root}/{rel}", safe="/")


def file_uri(root: str, rel: str) -> str:
    return "file:" + quote(f"{root}/{rel}", safe="/")


def file_uri_authority(root: str, rel: str) -> str:
    return "file://" + quote(f"{root}/{rel}", safe="/")


# The history: per version, (action, file under the root, its spelling in the mixed log).
HISTORY: list[list[tuple[str, str, Spelling]]] = [
    [
        ("add", "a/part-0.parquet", relative_escaped),
        ("add", "dir with space/part-1.parquet", file_uri),
        ("add", "b/part:2.parquet", absolute_posix),  # `%3A` here
        ("add", "part-3.parquet", file_uri_authority),
        ("add", "c d/part-4.parquet", relative_escaped),
    ],
    [
        ("remove", "dir with space/part-1.parquet", relative_literal),  # a literal space
        ("remove", "b/part:2.parquet", relative_literal),  # a literal `:`
        ("remove", "part-3.parquet", file_uri),  # `file:/` after `file:///`
    ],
    # The same file again, absolute, as a writer that re-adds it for new stats would.
    [("add", "c d/part-4.parquet", file_uri)],
]
LIVE = {"a/part-0.parquet", "c d/part-4.parquet"}


def add(path: str, size: int, data_change: bool = True) -> dict[str, Any]:
    body = {"path": path, "partitionValues": {}, "size": size, "modificationTime": 1}
    return {"add": {**body, "dataChange": data_change}}


def remove(path: str, size: int) -> dict[str, Any]:
    body = {"path": path, "deletionTimestamp": 2, "dataChange": True, "size": size}
    return {"remove": {**body, "extendedFileMetadata": True, "partitionValues": {}}}


def first_actions() -> list[dict[str, Any]]:
    return [
        {"commitInfo": {"timestamp": 1, "operation": "WRITE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "canonical-paths",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 1,
            }
        },
    ]


def write_parquet(path: Path, ids: list[int]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    return path.stat().st_size


def write_commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (root / "_delta_log").mkdir(parents=True, exist_ok=True)
    (root / "_delta_log" / f"{version:020d}.json").write_text(text)


def build(root: Path, mixed: bool, extra: list[list[dict[str, Any]]] | None = None) -> None:
    """Write the table of `HISTORY`: spelled as it says (`mixed`), else the standard way.

    `extra[v]` are more actions for version v.
    """
    sizes = {rel: write_parquet(root / rel, ids) for rel, ids in DATA.items()}
    for version, steps in enumerate(HISTORY):
        actions = first_actions() if version == 0 else [{"commitInfo": {"timestamp": 2}}]
        for kind, rel, spelling in steps:
            path = spelling(str(root), rel) if mixed else Storage.encode_for_log(rel)
            action = add if kind == "add" else remove
            actions.append(action(path, sizes[rel]))
        actions += extra[version] if extra else []
        write_commit(root, version, actions)


@pytest.fixture(params=[False, True], ids=["json-only", "checkpointed"])
def mixed_table(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    """The mixed-spelling table and the data file outside its root that it also holds.

    Besides `HISTORY`, version 0 adds the outside file by its `file:` URI and version 1
    removes `<outside dir>/a/part-0.parquet`, which must not remove the live
    `a/part-0.parquet` of the table.
    """
    root = tmp_path / "my table"
    outside_dir = tmp_path / "elsewhere"
    outside = outside_dir / "outside.parquet"
    size = write_parquet(outside, OUTSIDE_IDS)
    extra = [
        [add(file_uri(str(outside_dir), outside.name), size)],
        [remove(absolute_posix(str(outside_dir), "a/part-0.parquet"), 1)],
        [],
    ]
    build(root, mixed=True, extra=extra)
    if request.param:
        log = open_log(str(root))
        LogWriter(log).write_checkpoint(0)
        assert log.snapshot().version == 2
    return root, outside


@pytest.fixture
def twin_table(tmp_path: Path) -> Path:
    """The same files and history, every path relative and escaped as Delta Spark writes."""
    root = tmp_path / "twin"  # polars cannot read a table whose root has a space
    build(root, mixed=False)
    return root


def live_ids(log: DeltaLog, paths: list[str]) -> list[int]:
    """The ids in the data files at `paths` (as logged), read where dvtool resolves them."""
    ids: list[int] = []
    for path in paths:
        ids += pq.read_table(log.storage.resolve(path)).column("id").to_pylist()
    return sorted(ids)


def test_the_snapshot_keeps_only_files_no_spelling_removed(mixed_table: tuple[Path, Path]) -> None:
    root, outside = mixed_table
    log = open_log(str(root))
    paths = log.snapshot().files.column("path").to_pylist()
    # The newest spelling of the re-added file; the outside file by its URI.
    assert sorted(paths) == sorted(
        [
            "a/part-0.parquet",
            file_uri(str(root), "c d/part-4.parquet"),
            "file:" + quote(str(outside), safe="/"),
        ]
    )
    keys = {canonical_path(p, log.storage.root) for p in paths}
    assert keys == LIVE | {"file:" + str(outside)}
    assert live_ids(log, paths) == sorted(
        DATA["a/part-0.parquet"] + DATA["c d/part-4.parquet"] + OUTSIDE_IDS
    )


def test_removed_files_are_tombstones_in_their_logged_spelling(
    mixed_table: tuple[Path, Path],
) -> None:
    root, _ = mixed_table
    tombstones = open_log(str(root)).snapshot().tombstones.column("path").to_pylist()
    assert "dir with space/part-1.parquet" in tombstones
    assert "b/part:2.parquet" in tombstones
    assert file_uri(str(root), "part-3.parquet") in tombstones


def test_deltalake_on_the_standard_twin_agrees(
    mixed_table: tuple[Path, Path], twin_table: Path
) -> None:
    root, _ = mixed_table
    mixed_log = open_log(str(root))
    inside = [
        p
        for p in mixed_log.snapshot().files.column("path").to_pylist()
        if not canonical_path(p, mixed_log.storage.root).startswith("file:")
    ]
    prefix = str(twin_table) + "/"
    uris = deltalake.DeltaTable(str(twin_table)).file_uris()
    assert {u.removeprefix(prefix) for u in uris} == LIVE
    assert {canonical_path(p, mixed_log.storage.root) for p in inside} == LIVE
    assert deltalake.DeltaTable(str(twin_table)).version() == open_log(str(root)).snapshot().version


def test_polars_on_the_standard_twin_reads_the_same_rows(
    mixed_table: tuple[Path, Path], twin_table: Path
) -> None:
    root, _ = mixed_table
    log = open_log(str(root))
    paths = log.snapshot().files.column("path").to_pylist()
    expected = sorted(pl.read_delta(str(twin_table))["id"].to_list() + OUTSIDE_IDS)
    assert live_ids(log, paths) == expected


def test_dvtool_reads_the_twin_like_the_mixed_table(
    mixed_table: tuple[Path, Path], twin_table: Path
) -> None:
    root, _ = mixed_table
    twin = open_log(str(twin_table)).snapshot()
    assert sorted(twin.files.column("path").to_pylist()) == [
        "a/part-0.parquet",
        "c%20d/part-4.parquet",
    ]
    assert twin.version == open_log(str(root)).snapshot().version


@pytest.mark.parametrize(
    ("added", "removed"),
    [
        ("/some/unqualified/absolute/path", "file:/some/unqualified/absolute/path"),
        ("file:///some/unqualified/absolute/path", "/some/unqualified/absolute/path"),
        ("/some/unqualified/with%20space/p@%23h", "file:/some/unqualified/with%20space/p@%23h"),
        (
            "file:/some/unqualified/with%20space/p@%23h",
            "file:///some/unqualified/with%20space/p@%23h",
        ),
    ],
    ids=["normal-a", "normal-b", "special-a", "special-b"],
)
def test_delta_canonicalized_paths_golden_logs(tmp_path: Path, added: str, removed: str) -> None:
    """The logs of Delta's `canonicalized-paths-*` golden tables: version 1, no live files."""
    root = tmp_path / "table"
    write_commit(root, 0, [*first_actions(), add(added, 100)])
    write_commit(root, 1, [remove(removed, 100)])
    snapshot = open_log(str(root)).snapshot()
    assert snapshot.version == 1
    assert snapshot.files.num_rows == 0


def test_keys_are_canonical_against_the_actual_root(
    mixed_table: tuple[Path, Path], tmp_path: Path
) -> None:
    """In a copy of the table, the absolute spellings still name the original's files:
    outside the copy's root, the relative removes and re-add no longer meet them."""
    root, outside = mixed_table
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    paths = open_log(str(copy)).snapshot().files.column("path").to_pylist()
    assert sorted(paths) == sorted(
        [
            "a/part-0.parquet",
            file_uri(str(root), "dir with space/part-1.parquet"),
            absolute_posix(str(root), "b/part:2.parquet"),
            "c%20d/part-4.parquet",
            file_uri(str(root), "c d/part-4.parquet"),
            "file:" + quote(str(outside), safe="/"),
        ]
    )
