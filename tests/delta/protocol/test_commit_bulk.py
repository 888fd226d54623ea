"""The column-wise builders and the encoder of `dvtool.delta.protocol.commit` against the
per-action path.

`add_actions_from_table` and `remove_actions_for_adds` build thousands of file actions from a
snapshot's file table at once, and `encode_commit` encodes with one shared encoder and checks
add/remove keys only where paths collide. What a commit file holds must not change by a
byte, so the reference below is the per-row code they replaced (one `to_pylist` row, one
dict round trip and one `json.dumps` per action, a key per add and remove), kept verbatim:
every test compares the bytes of both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.delta.protocol.actions import file_action_key
from dvtool.delta.protocol.commit import (
    add_actions_from_table,
    check_commit,
    encode_commit,
    remove_actions_for_adds,
)
from dvtool.delta.protocol.file_actions import ADD_SCHEMA, DV_TYPE, file_actions_table
from dvtool.delta.protocol.paths import CanonicalRoot

# -- the reference: the per-action code the bulk path replaced -------------------------------

_ADD = tuple(f.name for f in ADD_SCHEMA if f.name != "extraFields")
_MAPS = frozenset({"partitionValues", "tags"})
_DV = tuple(f.name for f in DV_TYPE)


def ref_body(row: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name in _ADD:
        value = row.get(name)
        if value is None:
            continue
        if name in _MAPS:
            value = dict(value) if isinstance(value, Mapping) else {k: v for k, v in value}
        elif name == "deletionVector":
            value = ref_dv(value)
        body[name] = value
    extra = row.get("extraFields")
    if extra:
        for key, value in json.loads(extra).items():
            body.setdefault(key, value)
    return body


def ref_dv(value: Mapping[str, Any]) -> dict[str, Any]:
    out = {name: value[name] for name in _DV if value.get(name) is not None}
    for name, v in value.items():
        if name not in out and name not in _DV and v is not None:
            out[name] = v
    return out


def ref_add(row: Mapping[str, Any], data_change: bool | None) -> dict[str, Any]:
    body = ref_body(row)
    body.setdefault("partitionValues", {})
    if data_change is not None:
        body["dataChange"] = data_change
    out = {name: body[name] for name in _ADD if name in body}
    out.update((k, v) for k, v in body.items() if k not in out)
    return {"add": out}


def ref_remove(row: Mapping[str, Any], ts: int, data_change: bool) -> dict[str, Any]:
    body = ref_body(row)
    out: dict[str, Any] = {"path": body["path"], "deletionTimestamp": int(ts)}
    out["dataChange"] = data_change
    out["extendedFileMetadata"] = True
    out["partitionValues"] = dict(body.get("partitionValues") or {})
    if body.get("size") is not None:
        out["size"] = body["size"]
    for name in ("stats", "tags", "deletionVector", "baseRowId", "defaultRowCommitVersion"):
        if body.get(name) is not None:
            out[name] = body[name]
    return {"remove": out}


def ref_encode(actions: Sequence[Mapping[str, Any]]) -> bytes:
    lines = [
        json.dumps(a, separators=(",", ":"), ensure_ascii=False, allow_nan=False) for a in actions
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def ref_check(actions: Sequence[Mapping[str, Any]], root: str | None = None) -> None:
    """The check before: a key for every add and remove, kinds counted in one pass."""
    canonical = None if root is None else CanonicalRoot.parse(root)
    if not actions:
        raise ValueError("a commit needs at least one action")
    counts: dict[str, int] = {}
    paths: dict[str, set[str]] = {"add": set(), "remove": set()}
    keys: dict[str, set[tuple[str, str | None]]] = {"add": set(), "remove": set()}
    app_ids: set[str] = set()
    for index, action in enumerate(actions):
        if not isinstance(action, Mapping) or len(action) != 1:
            raise ValueError(f"action {index} is not a single-key action object: {action!r}")
        ((kind, body),) = action.items()
        if not isinstance(body, Mapping):
            raise ValueError(f"action {index} ('{kind}') is not an object")
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "commitInfo" and index != 0:
            raise ValueError("commitInfo must be the first action of a commit")
        if kind in ("add", "remove"):
            path = body.get("path")
            if not isinstance(path, str) or not path:
                raise ValueError(f"{kind} action {index} has no path")
            key = path if canonical is None else canonical.key(path)
            if key in paths[kind]:
                raise ValueError(f"a commit may hold one {kind} per path; {path} appears twice")
            paths[kind].add(key)
            keys[kind].add(file_action_key(key, body.get("deletionVector")))
        elif kind == "txn":
            app_id = str(body.get("appId"))
            if app_id in app_ids:
                raise ValueError(f"a commit may hold one txn per appId; {app_id} appears twice")
            app_ids.add(app_id)
    for kind in ("commitInfo", "protocol", "metaData"):
        if counts.get(kind, 0) > 1:
            raise ValueError(f"a commit may hold at most one {kind} action")
    both = keys["add"] & keys["remove"]
    if both:
        path, dv = min(both, key=str)
        raise ValueError(
            f"a commit must not add and remove the same logical file ({path}, DV {dv}); "
            "to update its metadata, add it again without removing it"
        )


# -- varied rows -----------------------------------------------------------------------------

FILE_DV = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4}
FILE_DV.update(sizeInBytes=40, cardinality=6)
INLINE_DV = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D7"}
INLINE_DV.update(sizeInBytes=40, cardinality=6)
ABSOLUTE_DV = {"storageType": "p", "pathOrInlineDv": "s3://b/t/dv é.bin", "offset": 1}
ABSOLUTE_DV.update(sizeInBytes=12, cardinality=1)
NEW_DV = {"storageType": "u", "pathOrInlineDv": "new-dv", "offset": 9, "sizeInBytes": 1}
NEW_DV["cardinality"] = 2
INFO = {"commitInfo": {"timestamp": 1, "operation": "REORG", "txnId": "t"}}


def add(path: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"path": path, "partitionValues": {}, "size": 100}
    out.update(modificationTime=5, dataChange=True, stats='{"numRecords":3}')
    out.update(fields)
    return {k: v for k, v in out.items() if v is not None}


VARIED = [
    add("a.parquet"),
    add("p=1/b.parquet", partitionValues={"p": "1", "q": None}, deletionVector=FILE_DV),
    add("p=__HIVE_DEFAULT_PARTITION__/c.parquet", partitionValues={"p": None}, stats=None),
    add("d é%20x.parquet", tags={"INSERTION_TIME": "1", "t": "v"}, deletionVector=INLINE_DV),
    add("e.parquet", baseRowId=70, defaultRowCommitVersion=2, clusteringProvider="liquid"),
    add("f.parquet", deletionVector=ABSOLUTE_DV, futureField={"nested": [1, 2.5, None]}),
    add("g.parquet", partitionValues=None, size=None, modificationTime=None, dataChange=None),
    add("h.parquet", tags={}, zz=1, baseRowId=0, stats='{"a":"\\"q\\" \\u00e9 \\n"}'),
    add("i.parquet", deletionVector={**INLINE_DV, "offset": None}, dataChange=False),
]


def files_table(adds: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Canonical add rows as a snapshot's `files` (with its extra `numRecords` column)."""
    table = file_actions_table(adds, ADD_SCHEMA)
    return table.append_column("numRecords", pa.nulls(table.num_rows, pa.int64()))


@pytest.mark.parametrize("data_change", [None, True, False])
def test_add_actions_from_table_are_the_row_actions(data_change: bool | None) -> None:
    table = files_table(VARIED)
    bulk = add_actions_from_table(table, data_change=data_change)
    reference = [ref_add(row, data_change) for row in table.to_pylist()]
    assert encode_commit([INFO, *bulk]) == ref_encode([INFO, *reference])
    assert bulk == reference


@pytest.mark.parametrize("data_change", [True, False])
def test_removes_for_adds_are_the_row_removes(data_change: bool) -> None:
    table = files_table(VARIED)
    bulk = remove_actions_for_adds(table, 1_700_000_000_123, data_change=data_change)
    reference = [ref_remove(row, 1_700_000_000_123, data_change) for row in table.to_pylist()]
    assert encode_commit([INFO, *bulk]) == ref_encode([INFO, *reference])
    assert [list(a["remove"]) for a in bulk] == [list(a["remove"]) for a in reference]


def test_a_commit_of_both_encodes_as_before() -> None:
    """A delete's shape: each file removed and re-added with a new DV, plus new files."""
    table = files_table(VARIED)
    removes = remove_actions_for_adds(table, 9)
    adds = add_actions_from_table(table, data_change=True)
    for action in adds:
        action["add"]["deletionVector"] = NEW_DV
    actions = [INFO, *removes, *adds]
    rows = table.to_pylist()
    reference = [INFO, *(ref_remove(r, 9, True) for r in rows)]
    reference += [json.loads(json.dumps(a)) for a in adds]
    assert encode_commit(actions, root="file:///t") == ref_encode(reference)


def test_empty_and_all_null_tables() -> None:
    empty = files_table([])
    assert add_actions_from_table(empty) == [] == remove_actions_for_adds(empty, 1)
    bare = files_table([{"path": "x"}, {"path": "y", "size": 1}])
    assert add_actions_from_table(bare) == [ref_add(r, None) for r in bare.to_pylist()]
    assert remove_actions_for_adds(bare, 1) == [ref_remove(r, 1, True) for r in bare.to_pylist()]


def test_a_row_without_path_is_built_as_before() -> None:
    table = files_table([{"size": 3}, {"path": "b"}])
    assert add_actions_from_table(table) == [ref_add(r, None) for r in table.to_pylist()]
    with pytest.raises(KeyError):
        remove_actions_for_adds(table, 1)


def test_bulk_actions_are_independent_objects() -> None:
    """Callers edit the actions they get (a delete sets the new DV): no shared dicts."""
    table = files_table([add("a"), add("b")])
    first, second = add_actions_from_table(table)
    first["add"]["partitionValues"]["p"] = "x"
    assert second["add"]["partitionValues"] == {}
    one, two = remove_actions_for_adds(table, 1)
    assert one["remove"]["partitionValues"] is not two["remove"]["partitionValues"]


# -- random rows and commits -----------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)
_dvs = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "storageType": st.sampled_from(["u", "p"]),
            "pathOrInlineDv": st.text(min_size=1, max_size=20),
            "offset": st.one_of(st.none(), st.integers(1, 2**31 - 1)),
            "sizeInBytes": st.integers(1, 2**31 - 1),
            "cardinality": st.integers(1, 2**62),
        }
    ),
    st.just(INLINE_DV),
)
_adds = st.fixed_dictionaries(
    {"path": st.text(min_size=1, max_size=20)},
    optional={
        "partitionValues": st.dictionaries(_keys, st.one_of(st.none(), _text), max_size=3),
        "size": st.integers(0, 2**62),
        "modificationTime": st.integers(0, 2**62),
        "dataChange": st.booleans(),
        "stats": st.one_of(st.none(), _text, st.just('{"numRecords":1,"tightBounds":false}')),
        "tags": st.one_of(st.none(), st.dictionaries(_keys, _text, max_size=2)),
        "deletionVector": _dvs,
        "baseRowId": st.integers(0, 2**62),
        "defaultRowCommitVersion": st.integers(0, 2**40),
        "clusteringProvider": st.one_of(st.none(), st.just("liquid")),
        "zz": st.integers(),
        "newField": st.one_of(st.none(), _text, st.lists(st.integers(), max_size=2)),
    },
)


@settings(max_examples=80, deadline=None)
@given(adds=st.lists(_adds, max_size=8), data_change=st.sampled_from([None, True, False]))
def test_random_rows_encode_exactly_as_before(
    adds: list[dict[str, Any]], data_change: bool | None
) -> None:
    table = files_table(adds)
    rows = table.to_pylist()
    bulk = add_actions_from_table(table, data_change=data_change)
    assert ref_encode(bulk or [INFO]) == ref_encode(
        [ref_add(r, data_change) for r in rows] or [INFO]
    )
    removes = remove_actions_for_adds(table, 42, data_change=bool(data_change))
    reference = [ref_remove(r, 42, bool(data_change)) for r in rows]
    assert ref_encode([INFO, *removes]) == ref_encode([INFO, *reference])
    paths = [r["path"] for r in rows]
    if len(set(paths)) == len(paths):
        assert encode_commit([INFO, *removes]) == ref_encode([INFO, *reference])


_small_paths = st.sampled_from(["a", "b", "./a", "a%20b", "a b", "/t/a", "file:///t/b"])
_file_actions = st.builds(
    lambda kind, path, dv: {kind: {"path": path, **({"deletionVector": dv} if dv else {})}},
    st.sampled_from(["add", "remove"]),
    _small_paths,
    st.sampled_from([None, FILE_DV, INLINE_DV]),
)
_other_actions = st.sampled_from(
    [
        INFO,
        {"txn": {"appId": "x", "version": 1}},
        {"metaData": {}},
        {"protocol": {}},
        {"add": {"size": 1}},
        {"remove": {"path": ""}},
        {"cdc": {"path": "c"}},
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    actions=st.lists(st.one_of(_file_actions, _file_actions, _other_actions), max_size=6),
    root=st.sampled_from([None, "file:///t"]),
)
def test_check_commit_decides_as_before(actions: list[dict[str, Any]], root: str | None) -> None:
    expected: str | None = None
    try:
        ref_check(actions, root)
    except ValueError as e:
        expected = str(e)
    try:
        check_commit(actions, root=root)
    except ValueError as e:
        assert str(e) == expected
    else:
        assert expected is None
