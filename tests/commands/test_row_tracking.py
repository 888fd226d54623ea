"""Row tracking through every dvtool command that commits files, on Databricks-style tables
(tests/writers.py), checked with the independent reader of tests/oracles.py: each surviving
row keeps its stable row ID and commit version, IDs stay unique and below the high-water mark,
and the actions carry what PROTOCOL.md "Row Tracking" requires of writers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.commands.downgrade.command import run_downgrade
from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
from dvtool.delta.log.reader import open_log
from dvtool.engines.arrow import ArrowEngine
from tests.oracles import commit_actions, commit_versions, row_id_high_water_mark, row_tracking_rows
from tests.writers import row_tracking_table

Ids = list[tuple[Any, Any, Any]]


def _ids(path: Path) -> Ids:
    return sorted(
        (r["id"], r["_row_id"], r["_row_commit_version"]) for r in row_tracking_rows(path)
    )


def _check_invariants(path: Path) -> None:
    ids = _ids(path)
    row_ids = [row_id for _, row_id, _ in ids]
    assert len(set(row_ids)) == len(row_ids), "stable row IDs must be unique"
    mark = row_id_high_water_mark(path)
    assert mark is not None and max(row_ids) <= mark


def _check_last_commit(path: Path, old_mark: int, *, preserved: str = "true") -> None:
    version = max(commit_versions(path))
    actions = commit_actions(path, version)
    info = actions[0]["commitInfo"]
    assert info["tags"]["delta.rowTracking.preserved"] == preserved
    adds = [a["add"] for a in actions if "add" in a]
    for add in adds:
        assert add["baseRowId"] is not None and add["defaultRowCommitVersion"] is not None
    new = [add for add in adds if add["defaultRowCommitVersion"] == version]
    for add in new:
        assert add["baseRowId"] > old_mark
    if new:
        domains = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
        assert [d["domain"] for d in domains] == ["delta.rowTracking"]


Step = Callable[[Path], None]


def _purge(path: Path) -> None:
    run_optimize(open_log(str(path)), OptimizeRequest(purge=True), lambda _: ArrowEngine())


def _compact(path: Path) -> None:
    request = OptimizeRequest(target_size=10**9)
    run_optimize(open_log(str(path)), request, lambda _: ArrowEngine())


def _cow_delete(path: Path) -> None:
    run_delete(open_log(str(path)), DeleteRequest("id = 4", mode="cow"))


def _dv_delete(path: Path) -> None:
    run_delete(open_log(str(path)), DeleteRequest("id = 5", mode="dv"))


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize(
    ("step", "gone"),
    [(_purge, None), (_compact, None), (_cow_delete, 4), (_dv_delete, 5)],
    ids=["purge", "compaction", "delete-cow", "delete-dv"],
)
def test_stable_row_ids_survive(tmp_path: Path, partitioned: bool, step: Step, gone: int) -> None:
    path = row_tracking_table(tmp_path / "t", partitioned=partitioned)
    before = _ids(path)
    mark = row_id_high_water_mark(path)
    assert mark is not None
    last = max(commit_versions(path))
    step(path)
    assert max(commit_versions(path)) == last + 1, "the command must have committed"
    assert _ids(path) == [row for row in before if row[0] != gone]
    _check_invariants(path)
    _check_last_commit(path, mark)


def test_a_sequence_of_commands_keeps_every_row_id(tmp_path: Path) -> None:
    path = row_tracking_table(tmp_path / "t")
    before = _ids(path)
    for step in (_dv_delete, _purge, _cow_delete, _compact):
        step(path)
        _check_invariants(path)
    assert _ids(path) == [row for row in before if row[0] not in (4, 5)]
    run_delete(open_log(str(path)), DeleteRequest("id = 8"))
    run_downgrade(open_log(str(path)))
    assert _ids(path) == [row for row in before if row[0] not in (4, 5, 8)]
    _check_invariants(path)


def test_supported_but_not_enabled_assigns_fresh_ids(tmp_path: Path) -> None:
    """Without `delta.enableRowTracking`, rewrites cannot preserve IDs: copied rows get fresh
    ones (the tag says so), still unique and below the new high-water mark."""
    path = row_tracking_table(tmp_path / "t", enabled=False)
    rows = {r[0] for r in _ids(path)}
    mark = row_id_high_water_mark(path)
    assert mark is not None
    _purge(path)
    assert {r[0] for r in _ids(path)} == rows
    _check_invariants(path)
    _check_last_commit(path, mark, preserved="false")
