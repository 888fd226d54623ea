"""Choosing the checkpoint and commits that rebuild a version."""

from __future__ import annotations

import pytest

from dvtool.delta.protocol.log_files import LogFileKind, commit_name, parse_log_name, plan_segment
from dvtool.errors import LogError


def files(*names: str):
    parsed = [parse_log_name(n) for n in names]
    assert all(p is not None for p in parsed), names
    return parsed


def cp(v: int) -> str:
    return f"{v:020d}.checkpoint.parquet"


def test_parse_names() -> None:
    assert parse_log_name(commit_name(7)).kind == LogFileKind.COMMIT
    mp = parse_log_name(f"{5:020d}.checkpoint.0000000002.0000000003.parquet")
    assert (mp.kind, mp.version, mp.part, mp.parts) == (LogFileKind.MULTIPART_CHECKPOINT, 5, 2, 3)
    uuid = parse_log_name(f"{6:020d}.checkpoint.2a15d0c6-8b11-4a98-bab4-957905d62f7f.json")
    assert uuid.kind == LogFileKind.UUID_CHECKPOINT
    comp = parse_log_name(f"{2:020d}.{4:020d}.compacted.json")
    assert (comp.kind, comp.start_version, comp.version) == (LogFileKind.COMPACTION, 2, 4)
    for other in ("_last_checkpoint", f"{1:020d}.crc", ".00000000000000000001.json.crc", "x.json"):
        assert parse_log_name(other) is None


def test_latest_uses_newest_checkpoint_then_commits() -> None:
    seg = plan_segment(files(*(commit_name(v) for v in range(13)), cp(10)))
    assert seg.version == 12
    assert seg.checkpoint_version == 10
    assert [d.version for d in seg.deltas] == [11, 12]


def test_time_travel_ignores_newer_checkpoints() -> None:
    seg = plan_segment(files(*(commit_name(v) for v in range(13)), cp(10)), version=9)
    assert seg.checkpoint_version is None
    assert [d.version for d in seg.deltas] == list(range(10))


def test_incomplete_multipart_checkpoint_is_ignored() -> None:
    part = f"{5:020d}.checkpoint.0000000001.0000000002.parquet"
    seg = plan_segment(files(*(commit_name(v) for v in range(7)), part))
    assert seg.checkpoint_version is None


def test_complete_multipart_checkpoint_is_used_in_part_order() -> None:
    parts = [f"{5:020d}.checkpoint.{i:010d}.0000000002.parquet" for i in (2, 1)]
    seg = plan_segment(files(commit_name(5), commit_name(6), *parts))
    assert [p.part for p in seg.checkpoint] == [1, 2]


def test_gap_is_an_error_naming_the_missing_commit() -> None:
    with pytest.raises(LogError, match=f"{2:020d}.json is missing"):
        plan_segment(files(commit_name(0), commit_name(1), commit_name(3)))


def test_version_beyond_latest_is_an_error() -> None:
    with pytest.raises(LogError, match="latest version is 1"):
        plan_segment(files(commit_name(0), commit_name(1)), version=5)


def test_cleaned_log_before_checkpoint_cannot_time_travel_back() -> None:
    with pytest.raises(LogError, match="missing"):
        plan_segment(files(cp(10), commit_name(10), commit_name(11)), version=3)


def test_compactions_replace_commit_ranges() -> None:
    names = [commit_name(v) for v in range(8)]
    names += [f"{1:020d}.{3:020d}.compacted.json", f"{1:020d}.{9:020d}.compacted.json"]
    seg = plan_segment(files(*names))
    kinds = [(d.kind, d.start_version, d.version) for d in seg.deltas]
    assert kinds == [
        (LogFileKind.COMMIT, 0, 0),
        (LogFileKind.COMPACTION, 1, 3),
        *((LogFileKind.COMMIT, v, v) for v in range(4, 8)),
    ]


def test_skipped_checkpoint_falls_back_to_older() -> None:
    names = [commit_name(v) for v in range(13)] + [cp(5), cp(10)]
    seg = plan_segment(files(*names), skip_checkpoints=[10])
    assert seg.checkpoint_version == 5
    assert [d.version for d in seg.deltas] == list(range(6, 13))
