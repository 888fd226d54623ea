"""The metadata cleanup planner (PROTOCOL.md "Metadata Cleanup"), on log listings alone.

Listings are built by name as writers leave them (commits, classic, multi-part and V2
checkpoints, checksums and Hadoop `.crc` files, compactions, staged commits, sidecars); the
expected deletions are spelled out from the protocol's steps, and a property test checks the
invariant that matters on random logs: every version from the cutoffCommit on still has a
complete checkpoint at or below it and every commit after that checkpoint.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.log_cleanup import (
    DAY_MS,
    DEFAULT_LOG_RETENTION_MS,
    CleanupPolicy,
    CommitTimeline,
    Cutoff,
    LogEntry,
    cleanup_policy,
    cutoff_timestamp,
    expired_entries,
    expired_sidecars,
    find_cutoff,
    midnight_utc,
    sidecar_cutoff,
    sidecar_holders,
)
from dvtool.delta.protocol.log_files import (
    LogFile,
    LogFileKind,
    commit_name,
    monotonic_times,
    parse_log_name,
)
from dvtool.errors import WriteRefusedError

HOUR_MS = 3_600_000
UUID = "2a15d0c6-8b11-4a98-bab4-957905d62f7f"


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def cp(v: int) -> str:
    return f"{v:020d}.checkpoint.parquet"


def part(v: int, n: int, of: int) -> str:
    return f"{v:020d}.checkpoint.{n:010d}.{of:010d}.parquet"


def entries(names: Iterable[str], times: dict[str, int] | None = None) -> list[LogEntry]:
    times = times or {}
    return [LogEntry(n, 10, times.get(n, 0)) for n in names]


def log_files(listing: Iterable[LogEntry]) -> list[LogFile]:
    out = []
    for e in listing:
        parsed = parse_log_name(e.name, e.size, e.modification_time_ms)
        if parsed is not None:
            out.append(parsed)
    return out


def commits_at(times: dict[int, int]) -> list[LogEntry]:
    return [LogEntry(commit_name(v), 10, t) for v, t in sorted(times.items())]


def timeline(listing: list[LogEntry]) -> CommitTimeline:
    """The commit times of a listing without in-commit timestamps."""
    commits = [f for f in log_files(listing) if f.kind == LogFileKind.COMMIT]
    return CommitTimeline(commits, None, lambda f: None)


# -- settings --------------------------------------------------------------------------------


def meta(**config: str) -> Metadata:
    return Metadata("id", "{}", (), dict(config))


LEGACY = Protocol(1, 2)
FEATURES = Protocol(1, 7, None, ("checkpointProtection", "inCommitTimestamp"))


def test_policy_defaults() -> None:
    assert cleanup_policy(LEGACY, meta()) == CleanupPolicy(True, DEFAULT_LOG_RETENTION_MS, 0, None)
    assert DEFAULT_LOG_RETENTION_MS == 30 * DAY_MS


@pytest.mark.parametrize(
    ("text", "expected"),
    [("interval 7 days", 7 * DAY_MS), ("2 days", 2 * DAY_MS), ("interval 36 hours", 36 * HOUR_MS)],
)
def test_policy_reads_the_retention_interval(text: str, expected: int) -> None:
    policy = cleanup_policy(LEGACY, meta(**{"delta.logRetentionDuration": text}))
    assert policy.retention_ms == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("delta.logRetentionDuration", "forever"),
        ("delta.logRetentionDuration", "interval 1 month"),
        ("delta.logRetentionDuration", "-3 days"),
        ("delta.enableExpiredLogCleanup", "maybe"),
        ("delta.requireCheckpointProtectionBeforeVersion", "ten"),
        ("delta.inCommitTimestampEnablementVersion", "-1"),
    ],
)
def test_unreadable_properties_refuse_the_cleanup(key: str, value: str) -> None:
    config = {key: value, "delta.enableInCommitTimestamps": "true"}
    with pytest.raises(WriteRefusedError, match=key.replace(".", r"\.")):
        cleanup_policy(FEATURES, meta(**config))


def test_policy_disabled_protected_and_ict() -> None:
    assert not cleanup_policy(LEGACY, meta(**{"delta.enableExpiredLogCleanup": " FALSE"})).enabled
    protected = {"delta.requireCheckpointProtectionBeforeVersion": "12"}
    assert cleanup_policy(FEATURES, meta(**protected)).protected_before == 12
    # The property means nothing without the writer feature.
    assert cleanup_policy(LEGACY, meta(**protected)).protected_before == 0
    ict = {"delta.enableInCommitTimestamps": "true"}
    assert cleanup_policy(FEATURES, meta(**ict)).ict_from == 0
    since = {**ict, "delta.inCommitTimestampEnablementVersion": "5"}
    assert cleanup_policy(FEATURES, meta(**since)).ict_from == 5
    assert cleanup_policy(LEGACY, meta(**since)).ict_from is None  # feature not supported


def test_cutoff_is_midnight_utc() -> None:
    now = ms("2024-05-31T15:42:07")
    assert cutoff_timestamp(now, 30 * DAY_MS) == ms("2024-05-01T00:00:00")
    assert midnight_utc(ms("2024-05-01T00:00:00")) == ms("2024-05-01T00:00:00")
    assert cutoff_timestamp(now, 2 * HOUR_MS) == ms("2024-05-31T00:00:00")
    # Sidecars younger than a day (as of midnight) stay, even with a shorter log retention.
    assert sidecar_cutoff(now, cutoff_timestamp(now, 2 * HOUR_MS)) == ms("2024-05-30T00:00:00")
    assert sidecar_cutoff(now, ms("2024-05-01T00:00:00")) == ms("2024-05-01T00:00:00")


# -- commit times ----------------------------------------------------------------------------


def test_monotonic_times() -> None:
    assert monotonic_times([5, 3, 3, 10, None, 11]) == [5, 6, 7, 10, 11, 12]


def test_a_commit_exactly_at_midnight_is_the_cutoff_commit() -> None:
    midnight = ms("2024-05-01T00:00:00")
    line = timeline(commits_at({0: midnight - 5, 1: midnight, 2: midnight + 1}))
    assert line.newest_at_or_before(midnight) == 1
    assert line.newest_at_or_before(midnight - 6) is None


def test_file_times_made_monotonic_keep_later_commits() -> None:
    """A commit whose file time went back (clock skew) counts as after its predecessor."""
    line = timeline(commits_at({0: 100, 1: 500, 2: 200, 3: 300, 4: 900}))
    assert line.newest_at_or_before(499) == 0
    assert line.newest_at_or_before(501) == 2  # 500, then 501 and 502
    assert line.newest_at_or_before(899) == 3


def test_future_dated_commit_protects_everything_after_it() -> None:
    future = ms("2999-01-01T00:00:00")
    line = timeline(commits_at({0: 100, 1: future, 2: 300}))
    assert line.newest_at_or_before(ms("2024-01-01T00:00:00")) == 0


def test_in_commit_timestamps_from_their_enablement_version() -> None:
    """File times before the enablement version, in-commit timestamps from it on, read only
    for the commits the binary search probes."""
    n = 1000
    files = commits_at({v: 10**12 + v for v in range(n)})  # files all "new"
    icts = {v: 1000 + 10 * v for v in range(200, n)}
    read: list[int] = []

    def ict(f: LogFile) -> int | None:
        read.append(f.version)
        return icts.get(f.version)

    old_files = {v: 500 + v for v in range(200)}
    listing = commits_at(old_files) + files[200:]
    line = CommitTimeline(log_files(listing), 200, ict)
    assert line.newest_at_or_before(1000 + 10 * 700 + 5) == 700
    assert len(read) <= 12, "a binary search reads O(log n) commits"
    assert line.newest_at_or_before(999) == 199, "before the first ICT: file times"
    assert line.newest_at_or_before(550) == 50


def test_missing_in_commit_timestamp_falls_back_to_the_file_time() -> None:
    line = CommitTimeline(log_files(commits_at({0: 5, 1: 7})), 0, lambda f: None)
    assert line.newest_at_or_before(6) == 0


# -- the cutoff ------------------------------------------------------------------------------

CUT = ms("2024-05-01T00:00:00")
OLD, NEW = CUT - DAY_MS, CUT + DAY_MS


def table_log(
    old: int, new: int, checkpoints: Iterable[int], *, extra: Iterable[str] = ()
) -> list[LogEntry]:
    """Commits 0..old-1 before the cutoff, old..old+new-1 after, checkpoints as named."""
    times = {v: OLD + v if v < old else NEW + v for v in range(old + new)}
    listing = commits_at(times)
    listing += [LogEntry(cp(v), 10, times[v]) for v in checkpoints]
    listing += [LogEntry(n, 10, OLD) for n in extra]
    return listing


def plan(
    listing: list[LogEntry], protected: int = 0, hint: int | None = None
) -> tuple[Cutoff, list[str]]:
    files = log_files(listing)
    cutoff = find_cutoff(files, timeline(listing), CUT, protected, hint)
    if cutoff.reason is not None:
        return cutoff, []
    assert cutoff.checkpoint_version is not None
    return cutoff, [e.name for e in expired_entries(listing, cutoff.checkpoint_version)]


def test_cutoff_checkpoint_is_the_newest_not_after_the_cutoff_commit() -> None:
    listing = table_log(8, 8, [3, 6, 10])
    cutoff, deleted = plan(listing)
    assert (cutoff.cutoff_commit, cutoff.checkpoint_version) == (7, 6)
    assert deleted == [*(commit_name(v) for v in range(4)), cp(3), commit_name(4), commit_name(5)]


def test_nothing_without_a_checkpoint_old_enough() -> None:
    cutoff, deleted = plan(table_log(8, 8, [10]))
    assert deleted == [] and "no complete checkpoint at or before version 7" in str(cutoff.reason)
    cutoff, deleted = plan(table_log(0, 8, [2]))
    assert deleted == [] and cutoff.reason == "no commit is older than the cutoff"


def test_last_checkpoint_bounds_the_cutoff_checkpoint() -> None:
    """A reader trusting `_last_checkpoint` (version 3) must still find the commits after it."""
    cutoff, deleted = plan(table_log(8, 8, [3, 6]), hint=3)
    assert cutoff.checkpoint_version == 3 and deleted == [commit_name(v) for v in range(3)]


def test_incomplete_multipart_checkpoint_is_not_a_cutoff_but_goes_when_older() -> None:
    listing = table_log(8, 4, [2], extra=[part(6, 1, 2), part(1, 1, 3), part(1, 2, 3)])
    cutoff, deleted = plan(listing)
    assert cutoff.checkpoint_version == 2, "version 6 lacks part 2 of 2"
    assert set(deleted) == {commit_name(0), commit_name(1), part(1, 1, 3), part(1, 2, 3)}


def test_complete_multipart_and_v2_checkpoints_are_cutoffs_with_all_parts() -> None:
    parts = [part(5, n, 3) for n in (1, 2, 3)]
    uuid = f"{2:020d}.checkpoint.{UUID}.json"
    cutoff, deleted = plan(table_log(8, 4, [], extra=[*parts, uuid]))
    assert cutoff.checkpoint_version == 5 and [p.name for p in cutoff.checkpoint] == parts
    assert uuid in deleted and not set(parts) & set(deleted)


@pytest.mark.parametrize(
    ("protected", "checkpoints", "expected"),
    [
        (0, [6, 8], 6),
        (2, [6, 8], 6),
        (6, [6, 8], 6),  # everything before 6 goes at once
        (7, [6, 8], None),  # the cleanup cannot reach 7 in one go: nothing
        (20, [6], None),
        (3, [1], None),
        (1, [1], 1),
    ],
)
def test_checkpoint_protection(
    protected: int, checkpoints: list[int], expected: int | None
) -> None:
    cutoff, deleted = plan(table_log(8, 8, checkpoints), protected=protected)
    if expected is None:
        assert deleted == [] and "checkpointProtection" in str(cutoff.reason)
    else:
        assert cutoff.checkpoint_version == expected
        gone = {commit_name(v) for v in range(expected)} | {cp(v) for v in checkpoints}
        assert set(deleted) == {n for n in gone if int(n[:20]) < expected}


def test_what_goes_and_in_which_order() -> None:
    """Step 3: commits, checkpoints, checksums (and their Hadoop .crc) before the cutoff
    checkpoint, compactions starting at or before it, staged commits at or before it;
    nothing else: not `_last_checkpoint`, unknown files, temp files, or anything at or
    after the checkpoint."""
    names = [
        commit_name(0),
        ".00000000000000000000.json.crc",
        "00000000000000000000.crc",
        ".00000000000000000000.crc.crc",
        commit_name(1),
        ".00000000000000000001.json.crc",  # orphan: its commit is already gone below
        part(1, 1, 2),
        part(1, 2, 2),
        ".00000000000000000001.checkpoint.0000000001.0000000002.parquet.crc",
        f"{0:020d}.{3:020d}.compacted.json",
        f"{3:020d}.{6:020d}.compacted.json",
        f"{4:020d}.{6:020d}.compacted.json",
        commit_name(3),
        cp(3),
        "00000000000000000003.crc",
        ".00000000000000000003.checkpoint.parquet.crc",
        commit_name(4),
        "_last_checkpoint",
        "._last_checkpoint.crc",
        "_last_vacuum_info",
        ".00000000000000000002.json.tmp-1234.dvtool",
        "notes.txt",
        f"_staged_commits/{2:020d}.{UUID}.json",
        f"_staged_commits/{3:020d}.{UUID}.json",
        f"_staged_commits/{4:020d}.{UUID}.json",
        f"_staged_commits/.{3:020d}.{UUID}.json.crc",
        "_sidecars/x.parquet",
    ]
    listing = entries([n for n in names if n != commit_name(1)])
    deleted = [e.name for e in expired_entries(listing, 3)]
    assert deleted == [
        f"{0:020d}.{3:020d}.compacted.json",
        commit_name(0),
        ".00000000000000000000.json.crc",
        "00000000000000000000.crc",
        ".00000000000000000000.crc.crc",
        ".00000000000000000001.json.crc",
        part(1, 1, 2),
        ".00000000000000000001.checkpoint.0000000001.0000000002.parquet.crc",
        part(1, 2, 2),
        f"_staged_commits/{2:020d}.{UUID}.json",
        f"{3:020d}.{6:020d}.compacted.json",
        f"_staged_commits/{3:020d}.{UUID}.json",
        f"_staged_commits/.{3:020d}.{UUID}.json.crc",
    ]


def test_sidecars_referenced_or_young_stay() -> None:
    cutoff = ms("2024-05-01T00:00:00")
    listing = [
        LogEntry("_sidecars/a.parquet", 5, cutoff - 1),
        LogEntry("_sidecars/.a.parquet.crc", 1, cutoff - 1),
        LogEntry("_sidecars/b.parquet", 5, cutoff - 1),
        LogEntry("_sidecars/.b.parquet.crc", 1, cutoff - 1),
        LogEntry("_sidecars/c.parquet", 5, cutoff),
        LogEntry("_sidecars/d.parquet", 5, None),
        LogEntry("_sidecars/.gone.parquet.crc", 1, cutoff - 1),
    ]
    deleted = [e.name for e in expired_sidecars(listing, {"b.parquet"}, cutoff)]
    assert deleted == [
        "_sidecars/.a.parquet.crc",
        "_sidecars/.gone.parquet.crc",
        "_sidecars/a.parquet",
    ]
    assert all(e.version is None for e in expired_sidecars(listing, (), cutoff))


def test_sidecar_holders_are_the_remaining_single_file_checkpoints() -> None:
    files = log_files(
        entries(
            [cp(2), cp(5), part(6, 1, 1), f"{7:020d}.checkpoint.{UUID}.parquet", commit_name(8)]
        )
    )
    assert [f.version for f in sidecar_holders(files, 5)] == [5, 7]


# -- the invariant, on random logs -------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 40),
    gaps=st.lists(st.integers(1, 3 * DAY_MS), min_size=40, max_size=40),
    checkpoint_every=st.sets(st.integers(0, 39), max_size=8),
    start=st.integers(0, 10),
    cut_at=st.integers(0, 60 * DAY_MS),
    hint=st.none() | st.integers(0, 39),
    protected=st.integers(0, 20),
)
def test_every_retained_version_stays_rebuildable(
    n: int,
    gaps: list[int],
    checkpoint_every: set[int],
    start: int,
    cut_at: int,
    hint: int | None,
    protected: int,
) -> None:
    """On a log that starts at `start` (earlier history already cleaned, with a checkpoint
    there), the plan never touches anything at or after the cutoff checkpoint, deletes all
    commits and checkpoints before it, and leaves, for every version from the cutoffCommit
    on, a complete checkpoint at or below it and every commit from there on."""
    versions = range(start, start + n)
    times, t = {}, 0
    for v in versions:
        t += gaps[v - start]
        times[v] = t
    checkpoints = {start} | {v for v in checkpoint_every if v in versions}
    listing = commits_at(times) + [LogEntry(cp(v), 10, times[v]) for v in checkpoints]
    files = log_files(listing)
    cutoff = find_cutoff(files, timeline(listing), cut_at, protected, hint)
    if cutoff.reason is not None:
        return
    boundary = cutoff.checkpoint_version
    assert boundary is not None and cutoff.cutoff_commit is not None
    assert boundary <= cutoff.cutoff_commit and boundary >= protected
    assert times[cutoff.cutoff_commit] <= cut_at
    assert all(times[v] > cut_at for v in versions if v > cutoff.cutoff_commit)
    deleted = {e.name for e in expired_entries(listing, boundary)}
    assert deleted == {e.name for e in listing if int(e.name[:20]) < boundary}
    left = [e for e in listing if e.name not in deleted]
    left_commits = {int(e.name[:20]) for e in left if e.name.endswith(".json")}
    left_checkpoints = {int(e.name[:20]) for e in left if "checkpoint" in e.name}
    for v in range(cutoff.cutoff_commit, start + n):
        base = max(c for c in left_checkpoints if c <= v)
        assert set(range(base, v + 1)) <= left_commits | {base}
