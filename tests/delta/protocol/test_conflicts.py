"""Conflict detection between our transaction and winning commits (Serializable, as Delta)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from dvtool.delta.protocol.actions import DomainMetadata, Metadata, Protocol, Txn
from dvtool.delta.protocol.commit import commit_info, encode_commit
from dvtool.delta.protocol.conflicts import (
    CONCURRENT_APPEND,
    CONCURRENT_DELETE_DELETE,
    CONCURRENT_DELETE_READ,
    CONCURRENT_TRANSACTION,
    METADATA_CHANGED,
    PROTOCOL_CHANGED,
    ReadSet,
    check_conflicts,
    check_winners,
    is_our_commit,
)
from dvtool.delta.protocol.log_json import parse_commit
from dvtool.delta.protocol.replay import ActionBatch

DV1 = {"storageType": "u", "pathOrInlineDv": "dv1", "offset": 1, "sizeInBytes": 10}
DV1["cardinality"] = 1


def add(path: str, part: str | None = None, data_change: bool = True, **kw: Any) -> dict[str, Any]:
    pv = {} if part is None else {"p": part}
    return {"path": path, "partitionValues": pv, "size": 1, "modificationTime": 0} | {
        "dataChange": data_change,
        **kw,
    }


def remove(path: str, data_change: bool = True, **kw: Any) -> dict[str, Any]:
    return {"path": path, "deletionTimestamp": 1, "dataChange": data_change, **kw}


def winner(version: int = 5, operation: str = "WRITE", **kw: Any) -> ActionBatch:
    info = commit_info(operation, {}, {}, version - 1, f"w{version}", 0, False)["commitInfo"]
    return ActionBatch(version, commit_info=info, **kw)


def partition_is(*values: str) -> Any:
    def might_match(a: Mapping[str, Any]) -> bool:
        return (a.get("partitionValues") or {}).get("p") in values

    return might_match


# Our transaction: a DELETE on partition p=1 that read files a and b and removes a.
OURS = ReadSet(
    read_version=4,
    read_keys=frozenset({("p=1/a", None), ("p=1/b", "udv1@1")}),
    removed_keys=frozenset({("p=1/a", None)}),
    might_match=partition_is("1"),
)


def test_no_winner_actions_no_conflict() -> None:
    result = check_conflicts(OURS, winner())
    assert not result.conflict and not result
    assert result.exception is None


@pytest.mark.parametrize(
    ("batch", "exception", "named"),
    [
        (winner(protocol=Protocol(3, 7, (), ())), PROTOCOL_CHANGED, "protocol"),
        (winner(metadata=Metadata("id", "{}", (), {})), METADATA_CHANGED, "metadata"),
        (winner(adds=[add("p=1/new", "1")]), CONCURRENT_APPEND, "p=1/new"),
        (winner(removes=[remove("p=1/b")]), CONCURRENT_DELETE_READ, "p=1/b"),
        (winner(removes=[remove("p=1/a")]), CONCURRENT_DELETE_READ, "p=1/a"),
        (winner(txns=[Txn("app", 3)]), None, None),
    ],
)
def test_conflict_matrix(batch: ActionBatch, exception: str | None, named: str | None) -> None:
    result = check_conflicts(OURS, batch)
    assert result.exception == exception
    assert result.conflict == (exception is not None)
    if exception is not None:
        assert result.reason.startswith(f"{exception}: version 5 (WRITE)")
        assert named is not None and named in result.reason
        assert "\n" not in result.reason
        assert result.winner_version == 5


def test_append_reason_names_partition() -> None:
    result = check_conflicts(OURS, winner(adds=[add("p=1/new", "1")]))
    assert "partition p=1" in result.reason


def test_delete_delete_when_we_did_not_read_the_file() -> None:
    ours = ReadSet(4, removed_keys=frozenset({("x", None)}))
    result = check_conflicts(ours, winner(removes=[remove("x")]))
    assert result.exception == CONCURRENT_DELETE_DELETE
    assert "x" in result.reason


def test_delete_delete_via_for_actions() -> None:
    actions = [
        commit_info("DELETE", {}, {}, 4, "me", 0, False),
        {"remove": remove("p=1/a")},
        {"add": add("p=1/a", "1", deletionVector=DV1)},
    ]
    ours = ReadSet.for_actions(4, actions)
    assert ours.removed_keys == {("p=1/a", None)}
    assert ours.read_keys == {("p=1/a", None)}
    # The file we remove is a file we read: Delta reports the read conflict first.
    result = check_conflicts(ours, winner(removes=[remove("p=1/a")]))
    assert result.exception == CONCURRENT_DELETE_READ


def test_winner_dv_update_of_a_file_we_read_conflicts() -> None:
    """A concurrent DELETE that put a new DV on our file: remove (f, none) + add (f, dv)."""
    batch = winner(
        operation="DELETE",
        removes=[remove("p=1/a")],
        adds=[add("p=1/a", "1", deletionVector=DV1)],
    )
    result = check_conflicts(OURS, batch)
    # The add is a dataChange add in our partition, so Delta reports the append first.
    assert result.exception == CONCURRENT_APPEND
    ours = ReadSet(4, read_keys=frozenset({("p=1/a", None)}))
    assert check_conflicts(ours, batch).exception == CONCURRENT_DELETE_READ


def test_compaction_removing_a_file_we_read_conflicts() -> None:
    batch = winner(
        operation="OPTIMIZE",
        removes=[remove("p=1/b", data_change=False)],
        adds=[add("p=1/big", "1", data_change=False)],
    )
    assert check_conflicts(OURS, batch).exception == CONCURRENT_DELETE_READ


def test_compaction_elsewhere_does_not_conflict() -> None:
    batch = winner(
        operation="OPTIMIZE",
        removes=[remove("p=2/x", data_change=False)],
        adds=[add("p=2/big", "2", data_change=False)],
    )
    assert not check_conflicts(OURS, batch)


def test_data_change_false_adds_in_our_partition_do_not_conflict() -> None:
    batch = winner(adds=[add("p=1/re", "1", data_change=False)])
    assert not check_conflicts(OURS, batch)


def test_disjoint_partitions_do_not_conflict() -> None:
    batch = winner(adds=[add("p=2/new", "2")], removes=[remove("p=3/old")])
    assert not check_conflicts(OURS, batch)


def test_blind_append_outside_predicate_does_not_conflict() -> None:
    info = commit_info("WRITE", {"mode": "Append"}, {}, 4, "w", 0, True)["commitInfo"]
    batch = ActionBatch(5, commit_info=info, adds=[add("p=9/new", "9")])
    assert not check_conflicts(OURS, batch)


def test_blind_append_inside_predicate_conflicts_under_serializable() -> None:
    info = commit_info("WRITE", {"mode": "Append"}, {}, 4, "w", 0, True)["commitInfo"]
    batch = ActionBatch(5, commit_info=info, adds=[add("p=1/new", "1")])
    assert check_conflicts(OURS, batch).exception == CONCURRENT_APPEND


def test_adds_we_cannot_match_do_not_conflict() -> None:
    ours = ReadSet(4, read_keys=frozenset({("a", None)}), might_match=lambda a: False)
    assert not check_conflicts(ours, winner(adds=[add("new1"), add("new2")]))


def test_no_predicate_means_appends_do_not_matter() -> None:
    ours = ReadSet(4, read_keys=frozenset({("a", None)}))
    assert not check_conflicts(ours, winner(adds=[add("new")]))


def test_whole_table_read_conflicts_with_any_append_or_remove() -> None:
    ours = ReadSet(4, read_whole_table=True)
    assert check_conflicts(ours, winner(adds=[add("x")])).exception == CONCURRENT_APPEND
    removed = winner(removes=[remove("y", data_change=False)])
    assert check_conflicts(ours, removed).exception == CONCURRENT_DELETE_READ
    assert not check_conflicts(ours, winner(adds=[add("z", data_change=False)]))
    assert not check_conflicts(ours, winner())


def test_metadata_change_depends_on_whole_table() -> None:
    ours = ReadSet(4, changes_metadata=True)
    assert check_conflicts(ours, winner(adds=[add("x")])).exception == CONCURRENT_APPEND


def test_protocol_change_conflicts_with_any_file_action() -> None:
    ours = ReadSet(4, changes_protocol=True)
    rearranged = winner(adds=[add("x", data_change=False)])
    assert check_conflicts(ours, rearranged).exception == CONCURRENT_APPEND


def test_concurrent_txn_same_app_id() -> None:
    ours = ReadSet(4, app_ids=frozenset({"stream-1"}))
    result = check_conflicts(ours, winner(txns=[Txn("stream-1", 8)]))
    assert result.exception == CONCURRENT_TRANSACTION and "stream-1" in result.reason
    assert not check_conflicts(ours, winner(txns=[Txn("other", 8)]))


def test_txn_app_id_taken_from_our_actions() -> None:
    actions = [
        commit_info("WRITE", {}, {}, 4, "me", 0, True),
        {"txn": {"appId": "stream-1", "version": 3}},
    ]
    ours = ReadSet.for_actions(4, actions)
    assert check_conflicts(ours, winner(txns=[Txn("stream-1", 8)])).conflict


def test_same_domain_metadata_conflicts() -> None:
    actions = [
        commit_info("X", {}, {}, 4, "me", 0, False),
        {"domainMetadata": {"domain": "my.domain", "configuration": "{}", "removed": False}},
    ]
    ours = ReadSet.for_actions(4, actions)
    batch = winner(domains=[DomainMetadata("my.domain", "{}")])
    result = check_conflicts(ours, batch)
    assert result.exception == CONCURRENT_TRANSACTION and "my.domain" in result.reason
    assert not check_conflicts(ours, winner(domains=[DomainMetadata("other", "{}")]))


def test_for_actions_sees_metadata_and_protocol() -> None:
    actions = [
        commit_info("ENABLE", {}, {}, 4, "me", 0, False),
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7}},
        {"metaData": {"id": "x"}},
    ]
    ours = ReadSet.for_actions(4, actions)
    assert ours.changes_protocol and ours.changes_metadata and ours.depends_on_whole_table


def test_protocol_checked_before_files() -> None:
    batch = winner(protocol=Protocol(3, 7, (), ()), removes=[remove("p=1/a")])
    assert check_conflicts(OURS, batch).exception == PROTOCOL_CHANGED


def test_check_winners_reports_first_conflict() -> None:
    winners = [winner(5, adds=[add("p=2/x", "2")]), winner(6, removes=[remove("p=1/b")])]
    result = check_winners(OURS, winners)
    assert result.winner_version == 6 and result.exception == CONCURRENT_DELETE_READ
    assert not check_winners(OURS, winners[:1])
    assert not check_winners(OURS, [])


def test_is_our_commit() -> None:
    data = encode_commit([commit_info("DELETE", {}, {}, 4, "txn-abc", 0, False)])
    batch = parse_commit(data, 5, "x.json")
    assert is_our_commit(batch, "txn-abc")
    assert not is_our_commit(batch, "txn-other")
    assert not is_our_commit(ActionBatch(5), "txn-abc")


# -- canonical paths: a winner may spell a file otherwise than our snapshot did ---------------

ROOT = "/data/my table"


@pytest.mark.parametrize(
    "spelling",
    ["p=1/a b", "p%3D1/a%20b", "/data/my table/p=1/a b", "file:/data/my%20table/p%3D1/a%20b"],
)
def test_winner_removing_another_spelling_of_a_file_we_read_conflicts(spelling: str) -> None:
    ours = ReadSet.for_actions(
        4, [{"remove": remove("p%3D1/a%20b")}], read_keys=[("p%3D1/a%20b", None)], root=ROOT
    )
    result = check_conflicts(ours, winner(removes=[remove(spelling)]))
    assert result.exception == CONCURRENT_DELETE_READ


def test_without_a_root_paths_compare_as_logged() -> None:
    ours = ReadSet.for_actions(4, [], read_keys=[("p%3D1/a%20b", None)])
    assert not check_conflicts(ours, winner(removes=[remove("p=1/a b")]))


def test_a_file_outside_the_root_is_not_one_under_it() -> None:
    ours = ReadSet.for_actions(4, [], read_keys=[("a", None)], root=ROOT)
    assert not check_conflicts(ours, winner(removes=[remove("/data/other/a")]))


def test_commit_check_sees_two_spellings_of_one_path() -> None:
    actions = [{"remove": remove("x%20y")}, {"remove": remove("file:/t/x%20y")}]
    encode_commit(actions)  # as logged, two paths
    with pytest.raises(ValueError, match="one remove per path"):
        encode_commit(actions, root="/t")


def test_commit_check_refuses_add_and_remove_of_one_file_spelled_twice() -> None:
    actions = [{"remove": remove("/t/x")}, {"add": add("x")}]
    with pytest.raises(ValueError, match="same logical file"):
        encode_commit(actions, root="/t")
