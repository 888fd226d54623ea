"""The leftovers of failed commits in a Paimon table's `snapshot/` and `changelog/`, by
Paimon 1.4's rule (`OrphanFilesClean.cleanSnapshotDir`): every file directly in the folder
whose name does not start with `snapshot-` (`changelog-`) and is not a hint. The rule is
tested against Paimon's Java cleaner in tests/reference/test_paimon_vacuum.py; here its
edges, without a JVM.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dvtool.paimon.orphan_files import commit_leftovers, is_commit_leftover
from dvtool.paimon.tables import PaimonTable
from dvtool.storage.table_storage import Storage


@pytest.mark.parametrize(
    ("name", "prefix", "leftover"),
    [
        (".snapshot-7.0b8f5c4e-1d7a-4c3e-9a2b-5f6e7d8c9b0a.tmp", "snapshot-", True),
        (".LATEST.5e4d3c2b-1a0f-4e9d-8c7b-6a5f4e3d2c1b.tmp", "snapshot-", True),
        ("notes.txt", "snapshot-", True),
        ("snapshot-7", "snapshot-", False),
        ("snapshot-7.tmp", "snapshot-", False),  # Paimon keeps every snapshot-* name
        ("LATEST", "snapshot-", False),
        ("EARLIEST", "changelog-", False),
        ("changelog-3", "changelog-", False),
        ("snapshot-3", "changelog-", True),
    ],
)
def test_which_names_are_leftovers(name: str, prefix: str, leftover: bool) -> None:
    assert is_commit_leftover(name, prefix) is leftover


def test_only_files_directly_in_the_folders_are_listed(tmp_path: Path) -> None:
    for relative in (
        "snapshot/snapshot-1",
        "snapshot/LATEST",
        "snapshot/.snapshot-2.a.tmp",
        "snapshot/sub/.snapshot-3.b.tmp",  # in a folder below: not Paimon's to clean
        "changelog/changelog-1",
        "changelog/.changelog-2.c.tmp",
        "tag/.tag-x.d.tmp",
    ):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    table = PaimonTable(Storage.for_table(str(tmp_path)))
    found = {table.storage.relative_to_root(i.location) for i in commit_leftovers(table)}
    assert found == {"snapshot/.snapshot-2.a.tmp", "changelog/.changelog-2.c.tmp"}
