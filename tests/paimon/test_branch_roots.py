"""The roots of a Paimon orphan clean on a table with branches and external data paths, by
Paimon 1.4's rules (`OrphanFilesClean.validBranches`, `safelyGetAllSnapshots` and
`cleanSnapshotDir` per branch, `listPaimonFileDirs`), on hand-made folders without a JVM.
The rules are tested against Paimon's Java cleaner on tables Paimon wrote in
tests/reference/test_paimon_branches.py; here their edges.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dvtool.errors import WriteRefusedError
from dvtool.paimon.orphan_files import (
    UsedFiles,
    _unused,
    commit_leftovers,
    external_folders_inside,
)
from dvtool.paimon.orphan_roots import Roots, check_branches, table_roots
from dvtool.paimon.tables import PaimonTable
from dvtool.storage.table_storage import Storage
from tests.paimon.test_orphan_roots import snapshot
from tests.paimon.test_paimon_table import SCHEMA


def _doc(n: int, tag: str = "") -> str:
    """A snapshot document naming `base-{tag}{n}` and the like."""
    return json.dumps(
        {
            "id": n,
            "schemaId": 0,
            "baseManifestList": f"base-{tag}{n}",
            "deltaManifestList": f"delta-{tag}{n}",
            "changelogManifestList": f"changelog-list-{tag}{n}",
            "commitKind": "APPEND",
            "timeMillis": n,
        }
    )


def _write(root: Path, files: dict[str, str]) -> PaimonTable:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return PaimonTable(Storage.for_table(str(root)))


def _branched(root: Path) -> PaimonTable:
    """Main with snapshot 5, tag t1 (snapshot 2) and changelog 3; branch `dev` created from
    t1 (its snapshot 2 and tag t1 are the tag's copies) with snapshot 4 and changelog 3;
    `branch/notes` (no `branch-` prefix): no branch."""
    dev = "branch/branch-dev"
    return _write(
        root,
        {
            "schema/schema-0": SCHEMA,
            "snapshot/snapshot-5": _doc(5),
            "tag/tag-t1": _doc(2),
            "changelog/changelog-3": _doc(3),
            f"{dev}/schema/schema-0": SCHEMA,
            f"{dev}/snapshot/snapshot-2": _doc(2),
            f"{dev}/snapshot/snapshot-4": _doc(4, "dev-"),
            f"{dev}/tag/tag-t1": _doc(2),
            f"{dev}/changelog/changelog-3": _doc(3, "dev-"),
            "branch/notes/schema/schema-0": SCHEMA,
        },
    )


def test_every_branch_is_a_root_and_only_branch_folders_are_branches(tmp_path: Path) -> None:
    table = _branched(tmp_path)
    assert table.branches() == ["dev"]
    roots = table_roots(table)
    assert sorted(s.base_manifest_list for s in roots.snapshots) == [
        "base-2",
        "base-5",
        "base-dev-4",
    ]
    assert [t.base_manifest_list for t in roots.tags] == ["base-2", "base-2"]
    assert sorted(c.base_manifest_list for c in roots.changelogs) == ["base-3", "base-dev-3"]
    assert [s.id for s in roots.tag_copies] == [2]


def test_a_branchs_copy_of_its_tag_may_have_lost_its_changelog_list(tmp_path: Path) -> None:
    """Main's expiry deletes a tag's changelog manifest list; the branch created from the
    tag names it in its first snapshot too (a copy of the tag)."""
    roots = table_roots(_branched(tmp_path))
    assert "changelog-list-2" in roots.may_be_gone()
    assert "base-2" not in roots.may_be_gone() and "changelog-list-5" not in roots.may_be_gone()
    # the same document as a snapshot of main (no copy) still needs its changelog list
    plain = Roots(snapshots=[snapshot(2)], tags=[snapshot(2)], changelogs=[])
    assert plain.may_be_gone() == set()


def test_a_branch_without_a_schema_is_refused(tmp_path: Path) -> None:
    table = _branched(tmp_path)
    check_branches(table)
    (tmp_path / "branch" / "branch-half" / "snapshot").mkdir(parents=True)
    with pytest.raises(WriteRefusedError, match="branches half have no schema"):
        check_branches(table)


def test_every_branchs_commit_leftovers_and_nothing_else_of_its_folders(tmp_path: Path) -> None:
    table = _branched(tmp_path)
    dev = "branch/branch-dev"
    _write(
        tmp_path,
        {
            f"{dev}/snapshot/.snapshot-5.a.tmp": "x",
            f"{dev}/snapshot/LATEST": "4",
            f"{dev}/changelog/.changelog-4.b.tmp": "x",
            f"{dev}/tag/.tag-x.c.tmp": "x",
            "snapshot/.snapshot-6.d.tmp": "x",
        },
    )
    found = {table.storage.relative_to_root(i.location) for i in commit_leftovers(table)}
    assert found == {
        f"{dev}/snapshot/.snapshot-5.a.tmp",
        f"{dev}/changelog/.changelog-4.b.tmp",
        "snapshot/.snapshot-6.d.tmp",
    }
    used = UsedFiles({".snapshot-5.a.tmp"})  # a leftover is one by its folder, not its name
    assert _unused(f"{dev}/snapshot/.snapshot-5.a.tmp", ".snapshot-5.a.tmp", used)
    assert not _unused(f"{dev}/snapshot/LATEST", "LATEST", used)


@pytest.mark.parametrize(
    ("paths", "inside"),
    [
        ("file:///elsewhere/data", []),
        ("{root}/external", ["external"]),
        ("file://{root}/external,/elsewhere,{root}", ["external", ""]),
        ("s3://bucket/external", []),
    ],
)
def test_only_external_paths_inside_the_table_are_listed(
    tmp_path: Path, paths: str, inside: list[str]
) -> None:
    root = tmp_path / "t"
    options = {"bucket": "5", "data-file.external-paths": paths.format(root=root)}
    schema = json.loads(SCHEMA) | {"options": options}
    table = _write(root, {"schema/schema-0": json.dumps(schema)})
    assert external_folders_inside(table) == inside
