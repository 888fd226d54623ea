"""The roots of a Paimon orphan clean: every snapshot document whose files are kept, on every
branch, as Paimon's `OrphanFilesClean` (1.4) collects them.

- Branches (`validBranches`): main and every `branch/branch-NAME` folder (Paimon's
  `FileSystemBranchManager.branches`: the folders of `branch/` named `branch-*`). A branch
  without a schema file stops Paimon's cleaner ("Branches [...] have no schemas"), so it
  stops dvtool's too (`check_branches`).
- Per branch (`safelyGetAllSnapshots`): its snapshots (`snapshot/snapshot-N`), its tags
  (`tag/tag-NAME`) and its long-lived changelogs (`changelog/changelog-N`), each a
  snapshot document, in the branch's own folders (`PaimonTable.branch_path`). Their
  manifest lists, manifests, index manifests and the files those name all lie in the
  table's shared `manifest/`, `index/` and bucket folders, so the roots of all branches
  reach into one set of names: a file any branch reaches is kept.
- Which named metadata files may be missing (`Roots.may_be_gone`): those Paimon's own
  snapshot expiry deletes while a tag or a decoupled changelog still names them. A branch
  created from a tag starts with a copy of the tag as its first snapshot (Paimon's
  `createBranch(branch, tag)` copies the tag file to the branch's `snapshot/` and `tag/`):
  that snapshot is the tag's document, so, like the tag, it may have lost its changelog
  manifest list to main's expiry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dvtool.errors import LogError, TableNotFoundError, WriteRefusedError
from dvtool.io_pool import map_io
from dvtool.paimon.protocol.snapshots import Snapshot
from dvtool.paimon.tables import MAIN_BRANCH, PaimonTable
from dvtool.storage.listing import FileInfo

TAG_DIR, CHANGELOG_DIR = "tag", "changelog"
TAG_PREFIX, CHANGELOG_PREFIX = "tag-", "changelog-"


@dataclass(frozen=True)
class Roots:
    """The snapshot documents whose files are kept: snapshots, tags, changelogs (of every
    branch), and the branches' snapshots that are copies of the tag they were created from
    (`tag_copies`, also among `snapshots`)."""

    snapshots: list[Snapshot]
    tags: list[Snapshot]
    changelogs: list[Snapshot]
    tag_copies: list[Snapshot] = field(default_factory=list)

    def all(self) -> list[Snapshot]:
        return self.snapshots + self.tags + self.changelogs

    def may_be_gone(self) -> set[str]:
        """The metadata files Paimon's snapshot expiry deletes although a tag or changelog
        still names them: a tag's changelog manifest list (tags keep no changelog; so does a
        branch's copy of its tag), and a decoupled changelog's base and delta manifest lists
        and index manifest (it keeps only its changelog). A missing one reaches nothing, as
        Paimon's cleaner reads it; any other missing metadata file stops the plan."""
        optional = {t.changelog_manifest_list for t in self.tags + self.tag_copies}
        for c in self.changelogs:
            optional.update((*c.manifest_lists(), c.index_manifest))
        needed = {
            n
            for root in self.snapshots + self.tags
            for n in (*root.manifest_lists(), root.index_manifest)
        }
        needed |= {s.changelog_manifest_list for s in self.snapshots if s not in self.tag_copies}
        needed |= {c.changelog_manifest_list for c in self.changelogs}
        return {n for n in optional - needed if n}

    def __add__(self, other: Roots) -> Roots:
        return Roots(
            self.snapshots + other.snapshots,
            self.tags + other.tags,
            self.changelogs + other.changelogs,
            self.tag_copies + other.tag_copies,
        )


def all_branches(table: PaimonTable) -> list[str]:
    """Main and every branch of the table (Paimon's `validBranches` order: branches, main)."""
    return [*table.branches(), MAIN_BRANCH]


def check_branches(table: PaimonTable) -> None:
    """WriteRefusedError naming the branches without a schema file, on which Paimon's
    cleaner aborts (a half-created or half-dropped branch: its files cannot be told)."""
    broken = []
    for branch in table.branches():
        try:
            table.switch_to_branch(branch).latest_schema()
        except TableNotFoundError:
            broken.append(branch)
    if broken:
        raise WriteRefusedError(
            f"the Paimon table's branches {', '.join(broken)} have no schema; which files "
            "they use cannot be told (Paimon's orphan clean aborts on them too)",
            hint="Check these branches (branch/branch-NAME/schema/) and drop or repair them.",
        )


def table_roots(table: PaimonTable) -> Roots:
    """The kept snapshots, tags and changelogs of every branch."""
    total = Roots([], [], [])
    for branch in all_branches(table):
        total = total + branch_roots(table.switch_to_branch(branch))
    return total


def branch_roots(branch: PaimonTable) -> Roots:
    """One branch's snapshots, tags and changelogs, each read as a snapshot document."""
    found: dict[str, list[Snapshot]] = {}
    for folder, prefix in ((TAG_DIR, TAG_PREFIX), (CHANGELOG_DIR, CHANGELOG_PREFIX)):
        listing = branch.storage.list_dir(branch.branch_path(folder))
        found[folder] = map_io(
            lambda info: _read_root(branch, info),
            [i for i in listing if i.name.startswith(prefix)],
        )
    snapshots = map_io(branch.snapshot, branch.snapshot_ids())
    tags = found[TAG_DIR]
    copies = [s for s in snapshots if s in tags] if branch.branch != MAIN_BRANCH else []
    return Roots(snapshots, tags, found[CHANGELOG_DIR], copies)


def _read_root(table: PaimonTable, info: FileInfo) -> Snapshot:
    try:
        return Snapshot.from_json(table.storage.read(info.location))
    except LogError as e:
        raise LogError(f"{e.message}: {info.location}") from None
