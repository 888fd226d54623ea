"""Parsing log lines: fields and actions dvtool does not know are ignored wherever they stand
(PROTOCOL.md "Protocol Evolution": readers must ignore unrecognized fields), what is corrupt
is still refused, naming the file and line.

The lines below are the shapes Delta's own evolvability tests write: a commitInfo with an
unknown top-level field beside it, and a line holding only an unknown action.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dvtool.delta.protocol.log_json import batch_from_actions, parse_actions, parse_commit
from dvtool.errors import LogError

INFO = {"commitInfo": {"operation": "WRITE", "timestamp": 1}}
ADD = {"add": {"path": "a.parquet", "size": 1, "modificationTime": 0, "dataChange": True}}
PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def lines(*actions: Any) -> bytes:
    return "".join(json.dumps(a) + "\n" for a in actions).encode()


def test_an_unknown_field_beside_an_action_is_ignored() -> None:
    data = lines(
        {**INFO, "some_new_action_alongside_add_action": ["a", "1"]},
        {**ADD, "futureTopLevel": {"x": 1}},
        PROTOCOL,
    )
    assert parse_actions(data, "5.json") == [INFO, ADD, PROTOCOL]
    batch = parse_commit(data, 5, "5.json")
    assert batch.commit_info == INFO["commitInfo"]
    assert batch.adds == [ADD["add"]]
    assert batch.protocol == PROTOCOL["protocol"]


@pytest.mark.parametrize(
    "unknown",
    [
        {"some_new_action": {"payload": "x"}},
        {"some_new_action": ["a", "1"]},  # not even an object: nothing to read, nothing wrong
        {"one_new_action": 1, "another_new_action": "x"},
        {"add": None, "remove": None},  # a writer that serializes every action column
        {},
    ],
    ids=["object", "list", "two-unknown-keys", "null-actions", "empty"],
)
def test_a_line_with_no_known_action_is_skipped(unknown: dict[str, Any]) -> None:
    batch = parse_commit(lines(INFO, unknown, ADD), 1, "1.json")
    assert batch.adds == [ADD["add"]]
    assert batch.commit_info == INFO["commitInfo"]
    assert batch.removes == [] and batch.protocol is None and batch.metadata is None


def test_single_key_and_multi_key_commits_give_the_same_batch() -> None:
    """The fast path (every line one key) and the normalizing path agree."""
    plain = parse_commit(lines(INFO, {"future": [1]}, ADD), 2, "2.json")
    mixed = parse_commit(lines({**INFO, "future": [1]}, ADD), 2, "2.json")
    assert (plain.commit_info, plain.adds) == (mixed.commit_info, mixed.adds)


def test_a_line_with_two_known_actions_is_refused() -> None:
    """Readers disagree on such a line (Delta Spark keeps one, kernels both): refused."""
    data = lines(INFO, {**ADD, "remove": {"path": "b.parquet"}})
    with pytest.raises(LogError) as info:
        parse_actions(data, "1.json")
    assert "1.json line 2 holds more than one action (add, remove)" in info.value.message


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        (b"[1, 2]", r"7\.json line 2 is not a JSON object"),
        (b'"text"', r"7\.json line 2 is not a JSON object"),
        (b'{"add": {"path": ', r"7\.json is corrupt at line 2"),
    ],
    ids=["array", "string", "cut"],
)
def test_what_is_corrupt_is_still_refused(line: bytes, pattern: str) -> None:
    data = lines(INFO) + line + b"\n" + lines(ADD)
    with pytest.raises(LogError, match=pattern):
        parse_actions(data, "7.json")


def test_a_known_action_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(LogError, match="'add' action is not an object"):
        parse_commit(lines(INFO, {"add": ["a.parquet"]}), 1, "1.json")


def test_malformed_actions_name_the_missing_field_once() -> None:
    """A KeyError's text is already quoted: the message must not quote it again."""
    with pytest.raises(LogError) as info:
        parse_commit(lines({"txn": {"version": 3}}), 1, "1.json")
    assert "malformed 'txn' action (missing field 'appId')" in info.value.message
    assert "''" not in info.value.message


def test_incomplete_protocol_and_metadata_are_kept_as_logged() -> None:
    """Validation waits for the replay: a later commit may replace them."""
    batch = batch_from_actions(
        [{"metaData": {"id": "x"}}, {"protocol": {"minReaderVersion": 1}}], 0, "0.json"
    )
    assert batch.metadata == {"id": "x"}
    assert batch.protocol == {"minReaderVersion": 1}
