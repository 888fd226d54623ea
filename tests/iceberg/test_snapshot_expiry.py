"""The snapshot expiry rules (dvtool/iceberg/snapshot_expiry.py), on pyiceberg metadata.

Each case builds table metadata with pyiceberg's own model, plans the expiry and applies
the plan's updates with pyiceberg's `update_table_metadata`: the snapshots left are the ones
the rules of Iceberg Java's `RemoveSnapshots` keep (written out per case from the rules).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.table.update import (
    AssertRefSnapshotId,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    update_table_metadata,
)

from dvtool.errors import UsageError, WriteRefusedError
from dvtool.iceberg.snapshot_expiry import ExpiryPlan, plan_expiry, table_policy

HOUR = 3_600_000
DAY = 24 * HOUR
NOW = 1_700_000_000_000


def snapshot(sid: int, parent: int | None, age_ms: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "snapshot-id": sid,
        "timestamp-ms": NOW - age_ms,
        "sequence-number": sid,
        "manifest-list": f"/t/metadata/snap-{sid}.avro",
        "summary": {"operation": "append"},
    }
    if parent is not None:
        out["parent-snapshot-id"] = parent
    return out


def metadata(
    snapshots: list[dict[str, Any]],
    refs: dict[str, dict[str, Any]] | None = None,
    properties: dict[str, str] | None = None,
    **extra: Any,
) -> TableMetadata:
    current = snapshots[-1]["snapshot-id"] if snapshots else None
    refs = {"main": {"snapshot-id": current, "type": "branch"}, **(refs or {})}
    return TableMetadataUtil.parse_obj(
        {
            "format-version": 2,
            "table-uuid": str(uuid.UUID(int=7)),
            "location": "/t",
            "last-sequence-number": len(snapshots),
            "last-updated-ms": NOW,
            "last-column-id": 1,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": []}],
            "current-schema-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "default-spec-id": 0,
            "last-partition-id": 999,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "default-sort-order-id": 0,
            "properties": properties or {},
            "current-snapshot-id": current,
            "snapshots": snapshots,
            "refs": refs,
            **extra,
        }
    )


def chain(*ages_in_days: float) -> list[dict[str, Any]]:
    """Snapshots 1..n on one line, oldest first, aged as given (days)."""
    out: list[dict[str, Any]] = []
    for i, age in enumerate(ages_in_days, start=1):
        out.append(snapshot(i, i - 1 if i > 1 else None, int(age * DAY)))
    return out


def plan(meta: TableMetadata, **policy: Any) -> ExpiryPlan:
    return plan_expiry(meta, table_policy(meta, NOW, **policy))


def applied(meta: TableMetadata, p: ExpiryPlan) -> TableMetadata:
    for requirement in p.requirements:
        requirement.validate(meta)
    return update_table_metadata(meta, p.updates)


def kept_ids(meta: TableMetadata, p: ExpiryPlan) -> set[int]:
    return {s.snapshot_id for s in applied(meta, p).snapshots}


def test_default_retention_keeps_five_days_and_the_current_snapshot() -> None:
    meta = metadata(chain(9, 7, 4, 2, 6))  # the current one (5) is old, but current
    p = plan(meta)
    assert p.expired_snapshot_ids == (1, 2)  # 3 and 4 are younger than 5 days
    assert kept_ids(meta, p) == {3, 4, 5}


def test_the_walk_stops_at_the_first_old_ancestor_beyond_the_minimum() -> None:
    # 3 is old, so the walk from 5 stops there: 2 goes although it is young (Java's rule)
    meta = metadata(chain(9, 1, 8, 1, 1))
    assert kept_ids(meta, plan(meta)) == {4, 5}


def test_min_snapshots_to_keep_from_the_table_and_from_retain_last() -> None:
    meta = metadata(chain(9, 8, 7, 6), properties={"history.expire.min-snapshots-to-keep": "3"})
    assert kept_ids(meta, plan(meta)) == {2, 3, 4}
    assert kept_ids(meta, plan(meta, retain_last=1)) == {4}


def test_a_given_max_age_replaces_the_tables() -> None:
    meta = metadata(chain(9, 3, 2, 1), properties={"history.expire.max-snapshot-age-ms": "1"})
    assert kept_ids(meta, plan(meta)) == {4}
    assert kept_ids(meta, plan(meta, max_age_ms=int(2.5 * DAY))) == {3, 4}


def test_tags_keep_their_snapshot_until_the_ref_is_too_old() -> None:
    tags = {
        "kept": {"snapshot-id": 1, "type": "tag"},
        "aged": {"snapshot-id": 2, "type": "tag", "max-ref-age-ms": DAY},
    }
    meta = metadata(chain(9, 8, 7), refs=tags)
    p = plan(meta)
    assert p.expired_refs == ("aged",)
    assert p.expired_snapshot_ids == (2,)
    assert isinstance(p.updates[0], RemoveSnapshotRefUpdate)  # refs first, for pyiceberg
    assert isinstance(p.updates[-1], RemoveSnapshotsUpdate)
    after = applied(meta, p)
    assert set(after.refs) == {"main", "kept"}
    assert {s.snapshot_id for s in after.snapshots} == {1, 3}


def test_the_tables_max_ref_age_and_a_refs_own_override() -> None:
    refs = {
        "old": {"snapshot-id": 1, "type": "tag"},
        "own": {"snapshot-id": 2, "type": "tag", "max-ref-age-ms": 30 * DAY},
    }
    meta = metadata(chain(9, 8, 7), refs, {"history.expire.max-ref-age-ms": str(DAY)})
    p = plan(meta)
    assert p.expired_refs == ("old",)
    assert kept_ids(meta, p) == {2, 3}


def test_main_is_never_removed_however_old() -> None:
    meta = metadata(chain(9, 8), properties={"history.expire.max-ref-age-ms": "1"})
    p = plan(meta)
    assert p.expired_refs == ()
    assert kept_ids(meta, p) == {2}


def test_branches_keep_their_own_history_with_their_own_settings() -> None:
    # main: 1 <- 2 <- 3; branch b: 1 <- 4 <- 5 (all old)
    snaps = [*chain(9, 8, 7), snapshot(4, 1, 6 * DAY), snapshot(5, 4, 6 * DAY)]
    branch = {"snapshot-id": 5, "type": "branch", "min-snapshots-to-keep": 2}
    meta = metadata(snaps[:2] + snaps[3:] + snaps[2:3], refs={"b": branch})
    assert meta.current_snapshot_id == 3
    assert kept_ids(meta, plan(meta)) == {3, 4, 5}
    young = {"snapshot-id": 5, "type": "branch", "max-snapshot-age-ms": 10 * DAY}
    meta = metadata(snaps[:2] + snaps[3:] + snaps[2:3], refs={"b": young})
    assert kept_ids(meta, plan(meta)) == {1, 3, 4, 5}  # 1 is in b's young-enough history


def test_unreferenced_snapshots_stay_while_young() -> None:
    # 3 and 4 were on main before a rollback to 2 (main then moved on to 5)
    snaps = [*chain(9, 8), snapshot(3, 2, 3 * DAY), snapshot(4, 3, 9 * DAY), snapshot(5, 2, 1)]
    meta = metadata(snaps)
    p = plan(meta)
    assert kept_ids(meta, p) == {3, 5}
    assert p.expired_snapshot_ids == (1, 4, 2)  # oldest first


def test_statistics_of_expired_snapshots_go_with_them() -> None:
    def stats(sid: int) -> dict[str, Any]:
        return {
            "snapshot-id": sid,
            "statistics-path": f"/t/metadata/stats-{sid}.puffin",
            "file-size-in-bytes": 10,
            "file-footer-size-in-bytes": 5,
            "blob-metadata": [],
        }

    def partition_stats(sid: int) -> dict[str, Any]:
        return {
            "snapshot-id": sid,
            "statistics-path": f"/t/metadata/pstats-{sid}.parquet",
            "file-size-in-bytes": 10,
        }

    meta = metadata(
        chain(9, 1),
        statistics=[stats(1), stats(2)],
        **{"partition-statistics": [partition_stats(1), partition_stats(2)]},
    )
    after = applied(meta, plan(meta))
    assert [s.snapshot_id for s in after.statistics] == [2]
    assert [s.snapshot_id for s in after.partition_statistics] == [2]


def test_nothing_to_expire_is_no_change() -> None:
    meta = metadata(chain(1, 0.5))
    p = plan(meta)
    assert not p.changes_table
    assert p.updates == ()


def test_the_requirements_fail_when_a_ref_moved() -> None:
    meta = metadata(chain(9, 8, 7))
    p = plan(meta)
    moved = metadata(chain(9, 8, 7), refs={"main": {"snapshot-id": 2, "type": "branch"}})
    refs = [r for r in p.requirements if isinstance(r, AssertRefSnapshotId)]
    assert [r.ref for r in refs] == ["main"]
    from pyiceberg.exceptions import CommitFailedException

    with pytest.raises(CommitFailedException):
        for requirement in p.requirements:
            requirement.validate(moved)


@pytest.mark.parametrize(
    ("properties", "error"),
    [
        ({"gc.enabled": "false"}, "gc.enabled=false"),
        ({"history.expire.max-snapshot-age-ms": "5d"}, "not an integer"),
        ({"history.expire.min-snapshots-to-keep": "x"}, "not an integer"),
    ],
)
def test_refused_properties(properties: dict[str, str], error: str) -> None:
    meta = metadata(chain(9, 8), properties=properties)
    with pytest.raises(WriteRefusedError, match=error):
        plan(meta)


def test_retain_last_must_be_positive() -> None:
    with pytest.raises(UsageError, match="at least 1"):
        plan(metadata(chain(9)), retain_last=0)
