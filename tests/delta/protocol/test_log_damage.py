"""The pure judgement of `_last_checkpoint` and of incomplete multi-part checkpoints."""

from __future__ import annotations

import pytest

from dvtool.delta.protocol.log_damage import (
    CHECKPOINT_PART_MISSING,
    CHECKPOINT_SIDECAR_MISSING,
    CHECKPOINT_UNREADABLE,
    LAST_CHECKPOINT_DANGLING,
    LAST_CHECKPOINT_TOO_NEW,
    DamagedCheckpoint,
    incomplete_checkpoints,
    last_checkpoint_problem,
    parse_last_checkpoint,
)
from dvtool.delta.protocol.log_files import LogFile, commit_name, parse_log_name


def files(*names: str) -> list[LogFile]:
    parsed = [parse_log_name(n) for n in names]
    assert all(parsed)
    return [f for f in parsed if f is not None]


def cp(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def part(version: int, n: int, of: int) -> str:
    return f"{version:020d}.checkpoint.{n:010d}.{of:010d}.parquet"


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (b'{"version":7,"size":10}', 7),
        (b'{"version":0}', 0),
        # Every optional field of PROTOCOL.md's "Last Checkpoint File Schema".
        (
            b'{"version":5,"size":7,"parts":3,"sizeInBytes":58606,"numOfAddFiles":5,'
            b'"checkpointSchema":{"type":"struct","fields":[]},"tags":{},"checksum":"ab",'
            b'"v2Checkpoint":{"path":"x"}}',
            5,
        ),
    ],
)
def test_a_valid_hint_names_its_version(text: bytes, version: int) -> None:
    assert parse_last_checkpoint(text) == version


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b"\x00{garbage", "not JSON"),
        (b"", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON list, not an object"),
        (b"7", "JSON int, not an object"),
        (b'{"size": 10}', "no 'version'"),
        (b'{"version": "7"}', "'version' is \"7\""),
        (b'{"version": -1}', "'version' is -1"),
        (b'{"version": true}', "'version' is true"),
        (b'{"version": 7.5}', "'version' is 7.5"),
        (b'{"version": 7, "parts": "3"}', "'parts' is \"3\""),
        (b'{"version": 7, "tags": []}', "'tags' is not an object"),
    ],
)
def test_an_invalid_hint_is_rejected_with_its_reason(text: bytes, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_last_checkpoint(text)
    assert reason in str(caught.value)


def test_a_hint_beyond_the_newest_version_is_too_new() -> None:
    log = files(*(commit_name(v) for v in range(8)), cp(7))
    problem = last_checkpoint_problem(5000, log)
    assert problem is not None and problem.kind == LAST_CHECKPOINT_TOO_NEW
    assert problem.version == 5000
    assert "version 5000, beyond the newest commit 7" in problem.message


def test_a_hint_naming_no_checkpoint_dangles() -> None:
    log = files(*(commit_name(v) for v in range(8)), cp(7))
    problem = last_checkpoint_problem(3, log)
    assert problem is not None and problem.kind == LAST_CHECKPOINT_DANGLING
    assert "checkpoint of version 3, which does not exist" in problem.message


def test_a_hint_naming_an_existing_checkpoint_is_fine_even_if_that_is_incomplete() -> None:
    log = files(*(commit_name(v) for v in range(8)), cp(3), part(7, 1, 2))
    assert last_checkpoint_problem(3, log) is None
    # The incomplete checkpoint is the checkpoint's damage (incomplete_checkpoints).
    assert last_checkpoint_problem(7, log) is None


def test_incomplete_multi_part_checkpoints_newer_than_the_one_used() -> None:
    log = files(
        *(commit_name(v) for v in range(12)),
        part(2, 1, 2),
        cp(5),
        part(7, 1, 3),
        part(7, 3, 3),
        part(9, 2, 2),
        part(11, 1, 2),
    )
    damaged = incomplete_checkpoints(log, after=5, upto=10)
    assert [(d.version, d.kind, d.files) for d in damaged] == [
        (9, CHECKPOINT_PART_MISSING, (part(9, 1, 2),)),
        (7, CHECKPOINT_PART_MISSING, (part(7, 2, 3),)),
    ]
    assert damaged[1].checkpoint == (part(7, 1, 3), part(7, 2, 3), part(7, 3, 3))
    assert f"part {part(7, 2, 3)} is missing" in damaged[1].message
    assert [d.version for d in incomplete_checkpoints(log, after=None, upto=11)] == [11, 9, 7, 2]


@pytest.mark.parametrize(
    ("kind", "faulty", "words"),
    [
        (CHECKPOINT_UNREADABLE, cp(7), f"({cp(7)}) cannot be read: Corrupt footer"),
        (CHECKPOINT_SIDECAR_MISSING, "_sidecars/a.parquet", "sidecar _sidecars/a.parquet, which"),
    ],
)
def test_messages_name_the_checkpoint_and_the_file_at_fault(
    kind: str, faulty: str, words: str
) -> None:
    damage = DamagedCheckpoint(7, kind, (cp(7),), (faulty,), "Corrupt footer")
    assert words in damage.message
    assert damage.to_json() == {
        "version": 7,
        "kind": kind,
        "checkpoint": [cp(7)],
        "files": [faulty],
        "message": damage.message,
    }
