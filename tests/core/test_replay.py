"""Action reconciliation keyed on (path, DV uniqueId), per PROTOCOL.md."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dvtool.core.actions import ADD_SCHEMA, Metadata, Protocol, file_actions_table
from dvtool.core.replay import ActionBatch, key_column, key_string, replay

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


def live(state) -> list[tuple[str, str]]:
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
    from dvtool.core.actions import DomainMetadata, Txn

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
