"""Action reconciliation keyed on (canonical path, DV uniqueId), per PROTOCOL.md."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from dvtool.delta.protocol.actions import Metadata, Protocol, file_action_key
from dvtool.delta.protocol.file_actions import ADD_SCHEMA, file_actions_table, key_column
from dvtool.delta.protocol.paths import CanonicalRoot, canonical_path, is_plain
from dvtool.delta.protocol.replay import ActionBatch, TableState, key_string, replay
from dvtool.errors import LogError

PROTOCOL = Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))
META = Metadata("id", '{"type":"struct","fields":[]}', (), {})


def add(path: str, dv: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    action = {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 0}
    action.update(dataChange=True, **extra)
    if dv is not None:
        action["deletionVector"] = dv
    return action


def dv(name: str, offset: int | None = 1, card: int = 1) -> dict[str, Any]:
    out = {"storageType": "u", "pathOrInlineDv": name, "sizeInBytes": 10, "cardinality": card}
    if offset is not None:
        out["offset"] = offset
    return out


def first(**kw: Any) -> ActionBatch:
    return ActionBatch(0, protocol=PROTOCOL, metadata=META, **kw)


def keys(table: pa.Table) -> list[tuple[str, str]]:
    rows = table.select(["path", "deletionVector"]).to_pylist()
    return sorted((r["path"], (r["deletionVector"] or {}).get("pathOrInlineDv", "")) for r in rows)


def live(state: TableState) -> list[tuple[str, str]]:
    return keys(state.adds)


def test_same_file_with_new_dv_replaces_old() -> None:
    batches = [
        ActionBatch(2, adds=[add("a", dv("d2"))], removes=[add("a", dv("d1"))]),
        ActionBatch(1, adds=[add("a", dv("d1"))], removes=[add("a")]),
        first(adds=[add("a"), add("b")]),
    ]
    state = replay(batches, 2)
    assert live(state) == [("a", "d2"), ("b", "")]
    assert keys(state.removes) == [("a", ""), ("a", "d1")]


def test_remove_then_readd_same_key_is_live() -> None:
    batches = [
        ActionBatch(2, adds=[add("a")]),
        ActionBatch(1, removes=[add("a")]),
        first(adds=[add("a")]),
    ]
    state = replay(batches, 2)
    assert live(state) == [("a", "")]
    assert state.removes.num_rows == 0


def test_offset_is_part_of_the_key() -> None:
    assert key_string("a", dv("x", offset=1)) != key_string("a", dv("x", offset=9))
    assert key_string("a", dv("x", offset=None)) == "a\x00ux"
    batches = [ActionBatch(1, removes=[add("a", dv("x", 9))]), first(adds=[add("a", dv("x", 1))])]
    assert live(replay(batches, 1)) == [("a", "x")]


def test_checkpoint_table_filtered_by_later_commits() -> None:
    table = file_actions_table([add("a", dv("d1")), add("b"), add("c", dv("d3", None))], ADD_SCHEMA)
    batches = [
        ActionBatch(11, removes=[add("a", dv("d1")), add("c", dv("d3", None))]),
        ActionBatch(10, protocol=PROTOCOL, metadata=META, add_table=table),
    ]
    assert live(replay(batches, 11)) == [("b", "")]


def test_key_column_matches_key_string() -> None:
    actions = [add("a"), add("b", dv("x", 1)), add("c", dv("y", None)), add("d%20e", dv("z", 77))]
    table = file_actions_table(actions, ADD_SCHEMA)
    expected = [key_string(a["path"], a.get("deletionVector")) for a in actions]
    assert key_column(table).to_pylist() == expected


def test_latest_protocol_metadata_txn_domain_win() -> None:
    from dvtool.delta.protocol.actions import DomainMetadata, Txn

    newer = Protocol(3, 7, ("deletionVectors", "columnMapping"), ("deletionVectors",))
    batches = [
        ActionBatch(
            2,
            protocol=newer,
            txns=[Txn("app", 5)],
            domains=[DomainMetadata("gone", "", removed=True)],
        ),
        ActionBatch(1, txns=[Txn("app", 4), Txn("other", 1)], domains=[DomainMetadata("d", "c")]),
        first(domains=[DomainMetadata("gone", "x")]),
    ]
    state = replay(batches, 2)
    assert state.protocol == newer
    assert state.metadata == META
    assert {k: t.version for k, t in state.txns.items()} == {"app": 5, "other": 1}
    assert set(state.domains) == {"d"}


def test_unknown_add_fields_are_preserved() -> None:
    table = file_actions_table([add("a", futureField={"x": 1})], ADD_SCHEMA)
    assert table.column("extraFields").to_pylist() == ['{"futureField":{"x":1}}']
    assert pa.types.is_string(table.schema.field("extraFields").type)


# -- canonical paths ------------------------------------------------------------------------

ROOT = "/data/table"


def remove(path: str, dv_: dict[str, Any] | None = None) -> dict[str, Any]:
    action: dict[str, Any] = {"path": path, "deletionTimestamp": 1, "dataChange": True}
    if dv_ is not None:
        action["deletionVector"] = dv_
    return action


def live_paths(batches: list[ActionBatch], root: str | None = ROOT) -> list[str]:
    state = replay(batches, batches[0].version, root)
    return sorted(state.adds.column("path").to_pylist())


@pytest.mark.parametrize(
    ("added", "removed"),
    [
        ("file:/data/table/x.parquet", "x.parquet"),
        ("x.parquet", "file:/data/table/x.parquet"),
        ("file:///data/table/x.parquet", "/data/table/x.parquet"),
        ("file://localhost/data/table/x.parquet", "x.parquet"),
        ("/data/table/p=1/x.parquet", "p=1/x.parquet"),
        ("a%20b/x.parquet", "a b/x.parquet"),
        ("file:/data/table/a%20b/x.parquet", "a b/x.parquet"),
        ("p=1/x%3Ay.parquet", "p=1/x:y.parquet"),
        ("p=1%253A2/x.parquet", "file:/data/table/p=1%253A2/x.parquet"),
        ("%C3%A9t%C3%A9/x.parquet", "été/x.parquet"),
        ("file:/some/path/file", "file:///some/path/file"),
        ("/some/path/file%20with%20space", "file:/some/path/file%20with%20space"),
        ("file:/some/path/p@%23h", "file:///some/path/p@#h"),
    ],
)
def test_a_remove_in_another_spelling_removes_the_add(added: str, removed: str) -> None:
    # The last four are the adds/removes of Delta's canonicalized-paths-* golden tables.
    batches = [ActionBatch(1, removes=[remove(removed)]), first(adds=[add(added), add("keep")])]
    assert live_paths(batches) == ["keep"]
    assert replay(batches, 1, ROOT).removes.column("path").to_pylist() == [removed]


@pytest.mark.parametrize(
    "root", ["/data/table", "/data/table/", "file:///data/table", "file:/data/table"]
)
def test_every_spelling_of_the_root_gives_the_same_keys(root: str) -> None:
    batches = [
        ActionBatch(1, removes=[remove("/data/table/x.parquet")]),
        first(adds=[add("file:///data/table/x.parquet"), add("y.parquet")]),
    ]
    assert live_paths(batches, root) == ["y.parquet"]


def test_a_path_outside_the_root_stays_live_and_distinct() -> None:
    outside = "file:/elsewhere/x.parquet"
    batches = [
        ActionBatch(1, removes=[remove("x.parquet"), remove("/data/tablex/y.parquet")]),
        first(adds=[add(outside), add("x.parquet"), add("/data/table/y.parquet")]),
    ]
    assert live_paths(batches) == ["/data/table/y.parquet", outside]


def test_a_colon_in_the_first_segment_is_a_uri_scheme_not_a_file() -> None:
    # `x:y.parquet` is a URI with scheme `x` (Delta Spark, Storage.resolve); writers spell
    # the file `x:y.parquet` under the root as `x%3Ay.parquet`.
    batches = [
        ActionBatch(1, removes=[remove("xy:z.parquet")]),
        first(adds=[add("xy%3Az.parquet")]),
    ]
    assert live_paths(batches) == ["xy%3Az.parquet"]


def test_the_newest_spelling_of_a_readded_file_wins_once() -> None:
    batches = [
        ActionBatch(1, adds=[{**add("file:/data/table/a%20b"), "dataChange": False}]),
        first(adds=[add("a b")]),
    ]
    assert live_paths(batches) == ["file:/data/table/a%20b"]


def test_the_dv_stays_part_of_the_canonical_key() -> None:
    batches = [
        ActionBatch(2, removes=[remove("x.parquet", dv("d1"))]),
        ActionBatch(1, removes=[remove("y.parquet", dv("other"))]),
        first(
            adds=[
                add("file:/data/table/x.parquet", dv("d1")),
                add("/data/table/y.parquet", dv("d2")),
            ]
        ),
    ]
    assert live_paths(batches) == ["/data/table/y.parquet"]


def test_without_a_root_paths_are_keyed_as_logged() -> None:
    batches = [
        ActionBatch(1, removes=[remove("x.parquet"), remove("a b")]),
        first(adds=[add("file:/data/table/x.parquet"), add("a%20b")]),
    ]
    assert live_paths(batches, None) == ["a%20b", "file:/data/table/x.parquet"]


@pytest.mark.parametrize(
    ("checkpointed", "removed"),
    [
        ("file:/data/table/a%20b/x.parquet", "a b/x.parquet"),
        ("/data/table/p=1/x%3Ay.parquet", "file:///data/table/p=1/x:y.parquet"),
        ("x.parquet", "file:/data/table/x.parquet"),
    ],
)
def test_checkpoint_rows_are_canonicalized_against_later_removes(
    checkpointed: str, removed: str
) -> None:
    rows = [add(checkpointed, dv("d1")), add("keep", dv("d1")), add("file:/elsewhere/x.parquet")]
    table = file_actions_table(rows, ADD_SCHEMA)
    batches = [
        ActionBatch(11, removes=[remove(removed, dv("d1")), remove("x.parquet")]),
        ActionBatch(10, protocol=PROTOCOL, metadata=META, add_table=table),
    ]
    assert live_paths(batches) == ["file:/elsewhere/x.parquet", "keep"]


def test_key_column_with_a_root_matches_the_per_action_keys() -> None:
    paths = ["a", "file:/data/table/a", "b%20c", "/data/table/b c", "p=1/x:y", "/other/z", None]
    actions: list[dict[str, Any]] = [{"path": p} for p in paths]
    actions[1]["deletionVector"] = dv("u", 3)
    table = file_actions_table(actions, ADD_SCHEMA)
    root = CanonicalRoot.parse(ROOT)
    expected = [
        None if p is None else key_string(root.key(p), a.get("deletionVector"))
        for p, a in zip(paths, actions, strict=True)
    ]
    assert key_column(table, root).to_pylist() == expected
    assert expected[:6] == ["a", "a\x00uu@3", "b c", "b c", "p=1/x:y", "file:/other/z"]


def test_key_column_leaves_plain_paths_untouched() -> None:
    table = file_actions_table([add("a"), add("p=1/b")], ADD_SCHEMA)
    assert key_column(table, CanonicalRoot.parse(ROOT)).to_pylist() == ["a", "p=1/b"]


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("x.parquet", "x.parquet"),
        ("a%2520b", "a%20b"),  # decoded exactly once
        ("/data/table", "file:/data/table"),  # the root itself is no file under it
        ("/data/tablex/y", "file:/data/tablex/y"),
        ("file://host/data/table/x", "file://host/data/table/x"),
        ("S3://bucket/x%20y", "s3://bucket/x y"),
        ("xy%3Az", "./xy:z"),  # a relative key never reads as a URI
        ("x%3Ay", "x:y"),  # a one-letter scheme is none (a drive), as for Storage
    ],
)
def test_canonical_path(path: str, key: str) -> None:
    assert canonical_path(path, ROOT) == key


def test_object_store_roots_qualify_absolute_paths() -> None:
    root = CanonicalRoot.parse("s3://bucket/t")
    assert root.key("s3://bucket/t/a%20b") == "a b"
    assert root.key("/t/a b") == "a b"
    assert root.key("/u/x") == "s3://bucket/u/x"
    assert root.key("gs://bucket/t/x") == "gs://bucket/t/x"


def test_is_plain() -> None:
    assert is_plain("p=1/part-0.parquet")
    assert not any(is_plain(p) for p in ("a%20b", "p=1:2/x", "/x", "file:/x"))


def test_file_action_key_canonical_only_with_a_root() -> None:
    assert file_action_key("file:/data/table/a%20b", None) == ("file:/data/table/a%20b", None)
    assert file_action_key("file:/data/table/a%20b", None, root=ROOT) == ("a b", None)
    assert file_action_key("a b", dv("x", 2), root=ROOT) == ("a b", "ux@2")


# -- only the winning protocol and metaData must be complete ----------------------------------

COMPLETE_META = {"id": "t", "schemaString": '{"type":"struct","fields":[]}', "configuration": {}}
COMPLETE_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}


def test_an_incomplete_metadata_replaced_later_is_never_checked() -> None:
    """Version 0 without `schemaString`, version 1 complete: the state uses version 1's."""
    state = replay(
        [
            ActionBatch(1, metadata=COMPLETE_META, name="1.json"),
            ActionBatch(0, protocol=COMPLETE_PROTOCOL, metadata={"id": "t"}, name="0.json"),
        ],
        1,
    )
    assert state.metadata.schema_string == COMPLETE_META["schemaString"]
    assert state.protocol.min_writer_version == 2


def test_a_malformed_protocol_replaced_later_is_never_checked() -> None:
    state = replay(
        [
            ActionBatch(1, protocol=COMPLETE_PROTOCOL, name="1.json"),
            ActionBatch(0, protocol={"minReaderVersion": "x"}, metadata=COMPLETE_META),
        ],
        1,
    )
    assert state.protocol == Protocol(1, 2)


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (
            ActionBatch(0, protocol=COMPLETE_PROTOCOL, metadata={"id": "t"}, name="0.json"),
            "log file 0.json: metaData action has no 'schemaString' field; it is the newest "
            "such action up to version 0",
        ),
        (
            ActionBatch(0, protocol={"minReaderVersion": 1}, metadata=COMPLETE_META, name="0.json"),
            "log file 0.json: protocol action lacks valid reader/writer versions",
        ),
        (
            ActionBatch(
                0,
                protocol={**COMPLETE_PROTOCOL, "writerFeatures": "liquid"},
                metadata=COMPLETE_META,
                name="0.json",
            ),
            "log file 0.json: protocol field 'writerFeatures' is not a list of feature names",
        ),
        (
            ActionBatch(
                0,
                protocol=COMPLETE_PROTOCOL,
                metadata={**COMPLETE_META, "partitionColumns": "p"},
                name="0.json",
            ),
            "log file 0.json: metaData field 'partitionColumns' is not a list of names",
        ),
    ],
    ids=["metadata-without-schema", "protocol-without-writer", "features-not-a-list", "columns"],
)
def test_the_winning_action_must_be_complete(batch: ActionBatch, expected: str) -> None:
    """The error names the log file of the action the state would use, each name quoted
    once (a KeyError quoted again read `''schemaString''`)."""
    with pytest.raises(LogError) as info:
        replay([batch], 0)
    assert info.value.message.startswith(expected), info.value.message
    assert "''" not in info.value.message
