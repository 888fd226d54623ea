"""Which metadata files a Paimon vacuum may find missing (`Roots.may_be_gone`): those
Paimon's snapshot expiry deletes while a tag or a decoupled changelog still names them,
never one a kept snapshot (or a tag's table files) needs. Tested on Paimon-written tables
in tests/reference/test_paimon_index_kinds.py; here the rule itself."""

from __future__ import annotations

import json

from dvtool.paimon.orphan_files import Roots
from dvtool.paimon.protocol.snapshots import Snapshot


def snapshot(n: int, changelog: bool = True, index: bool = True) -> Snapshot:
    doc = {
        "id": n,
        "schemaId": 0,
        "baseManifestList": f"base-{n}",
        "deltaManifestList": f"delta-{n}",
        "changelogManifestList": f"changelog-list-{n}" if changelog else None,
        "indexManifest": f"index-manifest-{n}" if index else None,
        "commitKind": "APPEND",
        "timeMillis": n,
    }
    return Snapshot.from_json(json.dumps(doc))


def test_a_tags_changelog_and_a_changelogs_table_files_may_be_gone() -> None:
    roots = Roots(snapshots=[snapshot(5)], tags=[snapshot(2)], changelogs=[snapshot(3)])
    assert roots.may_be_gone() == {"changelog-list-2", "base-3", "delta-3", "index-manifest-3"}


def test_what_a_kept_snapshot_or_tag_needs_is_never_optional() -> None:
    """A changelog of the latest snapshot shares its lists; a tag of a kept snapshot its
    changelog list; a changelog's own changelog list is what it keeps."""
    roots = Roots(snapshots=[snapshot(5)], tags=[snapshot(5)], changelogs=[snapshot(5)])
    assert roots.may_be_gone() == set()
    roots = Roots(snapshots=[], tags=[snapshot(4, index=False)], changelogs=[snapshot(4)])
    assert roots.may_be_gone() == {"index-manifest-4"}
    roots = Roots(snapshots=[], tags=[snapshot(1, changelog=False)], changelogs=[])
    assert roots.may_be_gone() == set()
