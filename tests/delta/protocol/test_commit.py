"""Commit building: commitInfo as Delta writes it, encoding, file actions back from rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool import __version__
from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.checkpoint import canonical_file_table
from dvtool.delta.protocol.commit import (
    add_action_from_row,
    check_commit,
    commit_info,
    dv_descriptor,
    encode_commit,
    in_commit_timestamps_enabled,
    next_in_commit_timestamp,
    remove_action_from_row,
    remove_for_add,
    with_in_commit_timestamp,
)
from dvtool.delta.protocol.file_actions import ADD_SCHEMA, REMOVE_SCHEMA, file_actions_table
from dvtool.delta.protocol.log_json import parse_actions, parse_commit
from tests.conftest import GOLDEN

DV: dict[str, Any] = {
    "storageType": "u",
    "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
    "offset": 4,
    "sizeInBytes": 40,
}
DV["cardinality"] = 6
INLINE_DV: dict[str, Any] = {
    "storageType": "i",
    "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
}
INLINE_DV.update(sizeInBytes=40, cardinality=6)


def info(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = dict(
        operation="DELETE",
        parameters={"predicate": ["(id > 5)"]},
        metrics={"numDeletedRows": 3, "numRemovedFiles": 0},
        read_version=4,
        txn_id="t-1",
        timestamp_ms=1_700_000_000_000,
        is_blind_append=False,
    )
    args.update(kw)
    return commit_info(**args)


# -- commitInfo ----------------------------------------------------------------------------


def test_commit_info_fields_as_delta_writes_them() -> None:
    body = info()["commitInfo"]
    assert body == {
        "timestamp": 1_700_000_000_000,
        "operation": "DELETE",
        "operationParameters": {"predicate": '["(id > 5)"]'},
        "readVersion": 4,
        "isolationLevel": "Serializable",
        "isBlindAppend": False,
        "operationMetrics": {"numDeletedRows": "3", "numRemovedFiles": "0"},
        "engineInfo": f"dvtool/{__version__}",
        "txnId": "t-1",
    }
    # Same key order as Delta Spark's commitInfo.
    assert list(body)[:3] == ["timestamp", "operation", "operationParameters"]


def test_operation_parameters_encoding() -> None:
    params = {
        "mode": "Append",
        "partitionBy": [],
        "auto": False,
        "description": None,
        "properties": {"delta.enableDeletionVectors": "true"},
        "batchId": 7,
    }
    encoded = info(parameters=params)["commitInfo"]["operationParameters"]
    assert encoded == {
        "mode": "Append",
        "partitionBy": "[]",
        "auto": "false",
        "description": None,
        "properties": '{"delta.enableDeletionVectors":"true"}',
        "batchId": "7",
    }
    # The predicate string decodes back to Delta's JSON array of SQL texts.
    assert json.loads(info()["commitInfo"]["operationParameters"]["predicate"]) == ["(id > 5)"]


def test_metrics_are_strings() -> None:
    metrics = {"a": 1, "b": True, "c": "x", "d": 2.5}
    assert info(metrics=metrics)["commitInfo"]["operationMetrics"] == {
        "a": "1",
        "b": "true",
        "c": "x",
        "d": "2.5",
    }


def test_read_version_omitted_when_none() -> None:
    assert "readVersion" not in info(read_version=None)["commitInfo"]


def test_in_commit_timestamp_first_field_and_timestamp() -> None:
    body = info(in_commit_timestamp=1_700_000_000_123)["commitInfo"]
    assert next(iter(body)) == "inCommitTimestamp"
    assert body["inCommitTimestamp"] == body["timestamp"] == 1_700_000_000_123


def test_ict_rule_is_monotonic() -> None:
    assert next_in_commit_timestamp(1000, None) == 1000
    assert next_in_commit_timestamp(1000, 500) == 1000
    assert next_in_commit_timestamp(1000, 1000) == 1001
    assert next_in_commit_timestamp(1000, 5000) == 5001  # a clock behind the previous commit
    ts = None
    for now in [10, 5, 5, 20, 1]:
        new = next_in_commit_timestamp(now, ts)
        assert ts is None or new > ts
        ts = new


def test_with_in_commit_timestamp_refreshes_first_action() -> None:
    actions = [info(in_commit_timestamp=100), {"add": {"path": "a"}}]
    out = with_in_commit_timestamp(actions, 250)
    assert out[0]["commitInfo"]["inCommitTimestamp"] == 250
    assert out[0]["commitInfo"]["timestamp"] == 250
    assert next(iter(out[0]["commitInfo"])) == "inCommitTimestamp"
    assert out[1] == actions[1]
    assert actions[0]["commitInfo"]["inCommitTimestamp"] == 100  # input untouched
    with pytest.raises(ValueError):
        with_in_commit_timestamp([{"add": {"path": "a"}}], 1)


def test_in_commit_timestamps_enabled_needs_feature_and_property() -> None:
    proto = Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "inCommitTimestamp"))
    on = Metadata("i", "{}", (), {"delta.enableInCommitTimestamps": "true"})
    off = Metadata("i", "{}", (), {"delta.enableInCommitTimestamps": "false"})
    assert in_commit_timestamps_enabled(proto, on)
    assert not in_commit_timestamps_enabled(proto, off)
    assert not in_commit_timestamps_enabled(Protocol(3, 7, (), ("deletionVectors",)), on)
    assert not in_commit_timestamps_enabled(Protocol(1, 2), on)


# -- encoding ------------------------------------------------------------------------------


def test_encode_one_compact_line_per_action() -> None:
    actions = [info(), {"add": {"path": "p é", "partitionValues": {}, "size": 1}}]
    data = encode_commit(actions)
    assert data.endswith(b"\n")
    lines = data.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3
    assert b": " not in data and b", " not in data.replace(b"(id > 5)", b"")
    assert "p é".encode() in data  # UTF-8, not \u escapes, as Delta writes
    assert [json.loads(line) for line in lines[:-1]] == actions


def test_encode_parse_round_trip_of_golden_commits() -> None:
    commits = sorted(GOLDEN.glob("*/_delta_log/*.json")) + sorted(
        GOLDEN.glob("*/delta/_delta_log/*.json")
    )
    commits = [p for p in commits if "compacted" not in p.name and "checkpoint" not in p.name]
    assert len(commits) > 50
    checked = 0
    for path in commits:
        actions = parse_actions(path.read_bytes(), path.name)
        if any("commitInfo" in a for a in actions[1:]):
            continue  # a few writers put commitInfo last; dvtool always writes it first
        data = encode_commit(actions)
        assert parse_actions(data, path.name) == actions
        batch = parse_commit(data, 3, path.name)
        original = parse_commit(path.read_bytes(), 3, path.name)
        assert batch.adds == original.adds and batch.removes == original.removes
        assert batch.protocol == original.protocol and batch.metadata == original.metadata
        checked += 1
    assert checked > 50


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ([], "at least one"),
        ([{"add": {"path": "a"}, "remove": {"path": "a"}}], "single-key"),
        ([{"add": {"path": "a"}}, {"commitInfo": {}}], "first"),
        ([{"add": {"path": "a"}}, {"add": {"path": "a"}}], "appears twice"),
        ([{"remove": {"path": "a"}}, {"remove": {"path": "a"}}], "appears twice"),
        ([{"txn": {"appId": "x", "version": 1}}, {"txn": {"appId": "x", "version": 2}}], "txn"),
        ([{"metaData": {}}, {"metaData": {}}], "metaData"),
        ([{"protocol": {}}, {"protocol": {}}], "protocol"),
        ([{"add": {"size": 1}}], "no path"),
        ([{"remove": {"path": "a"}}, {"add": {"path": "a"}}], "same logical file"),
        (
            [
                {"remove": {"path": "a", "deletionVector": DV}},
                {"add": {"path": "a", "deletionVector": DV}},
            ],
            "same logical file",
        ),
    ],
)
def test_invalid_commits_are_refused(actions: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_commit(actions)


def test_add_and_remove_of_same_path_is_legal() -> None:
    check_commit(
        [
            {"commitInfo": {"txnId": "x"}},
            {"remove": {"path": "a", "deletionVector": DV}},
            {"add": {"path": "a", "deletionVector": INLINE_DV}},
        ]
    )


def test_nan_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_commit([{"add": {"path": "a", "x": float("nan")}}])


# -- file actions from canonical rows ------------------------------------------------------


def golden_file_actions(kind: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(GOLDEN.glob("**/_delta_log/0*.json")):
        if ".checkpoint." in path.name or "compacted" in path.name:
            continue
        for action in parse_actions(path.read_bytes(), path.name):
            if kind in action:
                out.append(action[kind])
    return out


def test_add_rows_round_trip_exactly_from_golden_commits() -> None:
    adds = golden_file_actions("add")
    assert any("deletionVector" in a for a in adds)
    table = file_actions_table(adds, ADD_SCHEMA)
    for original, row in zip(adds, table.to_pylist(), strict=True):
        assert add_action_from_row(row) == {"add": _without_nulls(original)}


def test_remove_rows_round_trip_exactly_from_golden_commits() -> None:
    removes = golden_file_actions("remove")
    assert removes
    table = file_actions_table(removes, REMOVE_SCHEMA)
    for original, row in zip(removes, table.to_pylist(), strict=True):
        assert remove_action_from_row(row) == {"remove": _without_nulls(original)}


def _without_nulls(action: dict[str, Any]) -> dict[str, Any]:
    """The action as dvtool writes it back: null fields (and a DV's null offset) dropped."""
    out = {k: v for k, v in action.items() if v is not None}
    if "deletionVector" in out:
        out["deletionVector"] = {k: v for k, v in out["deletionVector"].items() if v is not None}
    return out


def test_unknown_fields_and_null_partition_values_survive() -> None:
    add = {
        "path": "p=__HIVE_DEFAULT_PARTITION__/f.parquet",
        "partitionValues": {"p": None, "q": "1"},
        "size": 10,
        "modificationTime": 5,
        "dataChange": True,
        "tags": {"INSERTION_TIME": "1"},
        "deletionVector": DV,
        "futureField": {"nested": [1, 2]},
    }
    row = file_actions_table([add], ADD_SCHEMA).to_pylist()[0]
    out = add_action_from_row(row)["add"]
    assert out == add
    assert list(out)[-1] == "futureField"  # unknown fields after the protocol's fields
    assert add_action_from_row(row, data_change=False)["add"]["dataChange"] is False


def test_snapshot_extra_columns_are_ignored() -> None:
    add = {"path": "a", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}
    row = file_actions_table([add], ADD_SCHEMA).to_pylist()[0]
    row["numRecords"] = 12
    assert add_action_from_row(row) == {"add": add}


def test_rows_from_a_checkpoint_drop_null_offset_and_max_row_index() -> None:
    """A checkpoint struct (Spark's DV with maxRowIndex, null offset for inline DVs)."""
    dv_type = pa.struct(
        [
            ("storageType", pa.string()),
            ("pathOrInlineDv", pa.string()),
            ("offset", pa.int32()),
            ("sizeInBytes", pa.int32()),
            ("cardinality", pa.int64()),
            ("maxRowIndex", pa.int64()),
        ]
    )
    typ = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", pa.map_(pa.string(), pa.string())),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("tags", pa.map_(pa.string(), pa.string())),
            ("deletionVector", dv_type),
            ("stats", pa.string()),
        ]
    )
    rows = pa.array(
        [
            {
                "path": "a",
                "partitionValues": [("p", "1")],
                "size": 3,
                "modificationTime": 4,
                "dataChange": False,
                "tags": None,
                "deletionVector": {**INLINE_DV, "offset": None, "maxRowIndex": None},
                "stats": '{"numRecords":9}',
            }
        ],
        typ,
    )
    row = canonical_file_table(rows, ADD_SCHEMA).to_pylist()[0]
    assert add_action_from_row(row) == {
        "add": {
            "path": "a",
            "partitionValues": {"p": "1"},
            "size": 3,
            "modificationTime": 4,
            "dataChange": False,
            "stats": '{"numRecords":9}',
            "deletionVector": INLINE_DV,
        }
    }


def test_add_always_has_partition_values() -> None:
    assert add_action_from_row({"path": "a", "size": 1})["add"]["partitionValues"] == {}


def test_dv_descriptor_drops_null_offset() -> None:
    assert dv_descriptor({**INLINE_DV, "offset": None}) == INLINE_DV
    assert "offset" in dv_descriptor(DV)


def test_remove_for_add_like_delta() -> None:
    add = {
        "path": "p=1/f.parquet",
        "partitionValues": {"p": "1"},
        "size": 10,
        "modificationTime": 5,
        "dataChange": True,
        "stats": '{"numRecords":3}',
        "tags": {"t": "v"},
        "deletionVector": DV,
        "baseRowId": 7,
        "defaultRowCommitVersion": 2,
        "clusteringProvider": "liquid",
        "futureField": 1,
    }
    expected = {
        "remove": {
            "path": "p=1/f.parquet",
            "deletionTimestamp": 99,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": {"p": "1"},
            "size": 10,
            "stats": '{"numRecords":3}',
            "tags": {"t": "v"},
            "deletionVector": DV,
            "baseRowId": 7,
            "defaultRowCommitVersion": 2,
        }
    }
    assert remove_for_add(add, 99) == expected
    assert remove_for_add({"add": add}, 99) == expected
    row = file_actions_table([add], ADD_SCHEMA).to_pylist()[0]
    assert remove_for_add(row, 99) == expected
    assert remove_for_add(add, 99, data_change=False)["remove"]["dataChange"] is False


_keys = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
_dvs = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "storageType": st.sampled_from(["u", "p"]),
            "pathOrInlineDv": st.text(min_size=1, max_size=30),
            "offset": st.integers(1, 2**31 - 1),
            "sizeInBytes": st.integers(1, 2**31 - 1),
            "cardinality": st.integers(1, 2**62),
        }
    ),
    st.fixed_dictionaries(
        {
            "storageType": st.just("i"),
            "pathOrInlineDv": st.text(min_size=1, max_size=30),
            "sizeInBytes": st.integers(1, 2**31 - 1),
            "cardinality": st.integers(1, 2**62),
        }
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    path=st.text(min_size=1, max_size=40),
    partition=st.dictionaries(_keys, st.one_of(st.none(), st.text(max_size=10)), max_size=3),
    size=st.integers(0, 2**62),
    data_change=st.booleans(),
    stats=st.one_of(st.none(), st.just('{"numRecords":1}')),
    tags=st.one_of(st.none(), st.dictionaries(_keys, st.text(max_size=5), max_size=2)),
    dv=_dvs,
    extra=st.dictionaries(st.sampled_from(["zz", "newField"]), st.integers(), max_size=2),
)
def test_add_round_trip_property(
    path: str,
    partition: dict[str, str | None],
    size: int,
    data_change: bool,
    stats: str | None,
    tags: dict[str, str] | None,
    dv: dict[str, Any] | None,
    extra: dict[str, int],
) -> None:
    add: dict[str, Any] = {
        "path": path,
        "partitionValues": partition,
        "size": size,
        "modificationTime": 1,
        "dataChange": data_change,
    }
    for name, value in (("stats", stats), ("tags", tags), ("deletionVector", dv)):
        if value is not None:
            add[name] = value
    add.update(extra)
    row = file_actions_table([add], ADD_SCHEMA).to_pylist()[0]
    out = add_action_from_row(row)
    assert out == {"add": add}
    decoded = parse_commit(encode_commit([out]), 1, "x.json")
    assert decoded.adds == [add]


def test_golden_dir_exists() -> None:
    assert Path(GOLDEN).is_dir()
