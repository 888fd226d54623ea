"""Orphan files of a Paimon table: files in its data and metadata folders that no kept
snapshot, tag or changelog of any branch reaches, as Paimon's `remove_orphan_files`
procedure finds them (`OrphanFilesClean`, shared by its local and Spark cleaners).

- What is used, by file name (Paimon's files are named by UUID): for every snapshot, tag
  and long-lived changelog of every branch (`dvtool.paimon.orphan_roots`: main's in
  `snapshot/`, `tag/`, `changelog/`, a branch's under `branch/branch-NAME/`): its manifest
  lists (base, delta, changelog), every manifest they list, every file every entry of
  those manifests names (ADD and DELETE, with its extra files, wherever it lies: in the
  table folder or an external data path), its index manifest and every index file in it,
  its statistics file. Each manifest is read once however many snapshots share it. A
  metadata file that cannot be read stops the plan: dvtool deletes nothing it cannot prove
  unused. Except the files Paimon's own expiry deletes while a tag or changelog still
  names them (`Roots.may_be_gone`): missing, they reach nothing, as for Paimon's cleaner.
- What is listed: the files directly in `manifest/`, `index/` and `statistics/`, and in
  every `bucket-*` folder found by descending exactly as many `key=value` partition
  folders as the table has partition keys, from the table folder or from its
  `data-file.path-directory` (branches share these folders: they have none of their own).
  Nothing else is ever a candidate: not the table root, `schema/`,
  `snapshot/`, `tag/`, `consumer/`, `branch/`, a partition folder above its buckets.
- External data paths (`data-file.external-paths`): Paimon's cleaner lists their bucket
  folders too and deletes the orphans there. dvtool never deletes outside the table
  folder: it lists an external path only when it lies inside the table folder, and leaves
  the orphans of the others to Paimon. The files the table keeps there are reached as any
  other (by name), never candidates.
- Leftovers of failed commits (`commit_leftovers`): Paimon writes a snapshot, changelog or
  hint file to a temporary name (`.snapshot-7.<uuid>.tmp`) and renames it; a commit that
  failed in between leaves the temporary file. As Paimon's cleaner (`cleanSnapshotDir`,
  1.4, for every branch) does, every file directly in a branch's `snapshot/` whose name
  does not start with `snapshot-` and is not the `EARLIEST` or `LATEST` hint is one, and
  likewise in its `changelog/` (names not starting with `changelog-`). A failed write's
  temporary manifest or index file lies in `manifest/` or `index/` under a name no
  snapshot reaches: an orphan like any other.
- Only files last modified before the cutoff are orphans (Paimon's default: a day ago): a
  writer that has not committed yet may be writing the others (or renaming its temporary
  snapshot file).

Refused (`WriteRefusedError`), as Paimon's cleaner aborts on it: a branch folder without a
schema file (`check_branches`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dvtool.errors import FileMissingError, LogError, exception_text
from dvtool.io_pool import map_io
from dvtool.paimon.avro_files import decode_avro
from dvtool.paimon.orphan_roots import (
    CHANGELOG_DIR,
    CHANGELOG_PREFIX,
    Roots,
    all_branches,
    check_branches,
    table_roots,
)
from dvtool.paimon.protocol.manifests import (
    ManifestFileMeta,
    index_manifest_entry,
    manifest_entry,
    manifest_file_meta,
)
from dvtool.paimon.protocol.snapshots import (
    EARLIEST_HINT,
    LATEST_HINT,
    SNAPSHOT_DIR,
    SNAPSHOT_PREFIX,
    snapshot_id_of,
)
from dvtool.paimon.snapshot_files import DECODE_ERRORS
from dvtool.paimon.tables import BRANCH_DIR, BRANCH_PREFIX, MANIFEST_DIR, PaimonTable
from dvtool.storage.listing import FileInfo

__all__ = ["Roots"]  # the roots of the clean: dvtool.paimon.orphan_roots
COMMIT_FOLDERS = {SNAPSHOT_DIR: SNAPSHOT_PREFIX, CHANGELOG_DIR: CHANGELOG_PREFIX}
"""The folders of committed snapshot and changelog files, each with its files' prefix."""
INDEX_DIR, STATISTICS_DIR = "index", "statistics"
EXTERNAL_PATHS = "data-file.external-paths"
DEFAULT_ORPHAN_RETENTION_MS = 24 * 3600 * 1000
"""Paimon's `remove_orphan_files` default `older_than`: files modified a day ago or more."""


@dataclass(frozen=True)
class OrphanFile:
    """A file no kept snapshot reaches: its path under the table and its size."""

    path: str
    size: int
    modification_time_ms: int


@dataclass
class UsedFiles:
    """The file names the kept snapshots, tags and changelogs reach, and how many roots."""

    names: set[str] = field(default_factory=set)
    roots: int = 0


def used_files(table: PaimonTable) -> UsedFiles:
    """Every file name a kept snapshot, tag or changelog reaches (module docstring)."""
    roots = table_roots(table)
    used = UsedFiles(roots=len(roots.all()))
    lists: set[str] = set()
    index_manifests: set[str] = set()
    for root in roots.all():
        lists.update(n for n in (*root.manifest_lists(), root.changelog_manifest_list) if n)
        if root.index_manifest:
            index_manifests.add(root.index_manifest)
        if root.statistics:
            used.names.add(root.statistics)
    gone = roots.may_be_gone()
    manifests = {
        m.file_name for found in map_io(_manifests_of(table, gone), sorted(lists)) for m in found
    }
    for names in map_io(_files_of(table), sorted(manifests)):
        used.names.update(names)
    for names in map_io(_index_files_of(table, gone), sorted(index_manifests)):
        used.names.update(names)
    used.names |= lists | manifests | index_manifests
    return used


def _records(
    table: PaimonTable, name: str, kind: str, gone: set[str] | None = None
) -> list[dict[str, object]]:
    """The records of a metadata file; none for a missing one among `gone`."""
    location = table.manifest_path(name)
    try:
        data = table.storage.read(location)
    except FileMissingError:
        if gone and name in gone:
            return []
        raise
    try:
        return decode_avro(data, location)
    except DECODE_ERRORS as e:
        raise LogError(f"cannot read the Paimon {kind} {location}: {exception_text(e)}") from None


def _manifests_of(table: PaimonTable, gone: set[str]) -> Callable[[str], list[ManifestFileMeta]]:
    return lambda name: [
        manifest_file_meta(r) for r in _records(table, name, "manifest list", gone)
    ]


def _files_of(table: PaimonTable) -> Callable[[str], set[str]]:
    def names(manifest: str) -> set[str]:
        out: set[str] = set()
        for record in _records(table, manifest, "manifest"):
            entry = manifest_entry(record)
            out.add(entry.file.file_name)
            out.update(entry.file.extra_files)
        return out

    return names


def _index_files_of(table: PaimonTable, gone: set[str]) -> Callable[[str], set[str]]:
    return lambda name: {
        index_manifest_entry(r).index_file.file_name
        for r in _records(table, name, "index manifest", gone)
    }


def check_supported(table: PaimonTable) -> None:
    """WriteRefusedError for what dvtool does not clean: a table with a branch whose files
    cannot be told (`check_branches`)."""
    check_branches(table)


def candidate_files(table: PaimonTable) -> list[FileInfo]:
    """The files of the folders Paimon's cleaner lists inside the table folder, and the
    leftovers of failed commits on every branch (module docstring)."""
    storage = table.storage
    schema = table.latest_schema()
    keys = len(schema.partition_keys)
    data = schema.data_directory  # Paimon lists the bucket folders there only
    folders = [MANIFEST_DIR, INDEX_DIR, STATISTICS_DIR, *_bucket_folders(table, data, keys)]
    for inside in external_folders_inside(table):
        folders += [f for f in _bucket_folders(table, inside, keys) if f not in folders]
    listed = [
        info
        for found in map_io(lambda f: storage.list_dir(storage.join(f)), folders)
        for info in found
    ]
    return listed + commit_leftovers(table)


def external_paths_outside(table: PaimonTable) -> list[str]:
    """The external data paths outside the table folder, as the table option names them:
    dvtool lists none of them (their orphans are Paimon's to clean)."""
    paths = table.latest_schema().options.get(EXTERNAL_PATHS)
    if not paths:
        return []
    storage = table.storage
    return [p for p in paths.split(",") if storage.relative_to_root(table.location_of(p)) is None]


def external_folders_inside(table: PaimonTable) -> list[str]:
    """The external data paths (`data-file.external-paths`, comma-separated, as Paimon
    splits them) that lie inside the table folder, relative to it ("" for the folder itself);
    the others are never listed: dvtool deletes nothing outside the table folder."""
    paths = table.latest_schema().options.get(EXTERNAL_PATHS)
    if not paths:
        return []
    inside = (table.storage.relative_to_root(table.location_of(p)) for p in paths.split(","))
    return [r.strip("/") for r in inside if r is not None]


def _bucket_folders(table: PaimonTable, top: str, partition_keys: int) -> list[str]:
    """The `bucket-*` folders under exactly `partition_keys` levels of `key=value` ones
    below `top` (relative to the table, "" for the table folder)."""
    level = [top]
    for _ in range(partition_keys):
        listed = map_io(lambda d: (d, table.storage.list_subdirs(table.storage.join(d))), level)
        level = [f"{d}/{n}" if d else n for d, names in listed for n in names if "=" in n]
    listed = map_io(lambda d: (d, table.storage.list_subdirs(table.storage.join(d))), level)
    return [f"{d}/{n}" if d else n for d, names in listed for n in names if n.startswith("bucket-")]


def commit_leftovers(table: PaimonTable) -> list[FileInfo]:
    """The files in every branch's `snapshot/` and `changelog/` that are neither a
    committed snapshot or changelog file nor a hint: the temporary files of failed commits,
    whatever their age (`orphan_files` keeps the young ones)."""
    folders = [
        (table.switch_to_branch(branch).branch_path(folder), prefix)
        for branch in all_branches(table)
        for folder, prefix in COMMIT_FOLDERS.items()
    ]
    listed = map_io(lambda f: table.storage.list_dir(f[0]), folders)
    return [
        info
        for (_, prefix), infos in zip(folders, listed, strict=True)
        for info in infos
        if is_commit_leftover(info.name, prefix)
    ]


def is_commit_leftover(name: str, prefix: str) -> bool:
    """Whether a file named `name` in the folder of files named `prefix*` is a leftover
    (Paimon's `nonSnapshotFileFilter` / `nonChangelogFileFilter`)."""
    return not name.startswith(prefix) and name not in (EARLIEST_HINT, LATEST_HINT)


def orphan_files(
    table: PaimonTable, cutoff_ms: int, candidates: Iterable[FileInfo], used: UsedFiles
) -> list[OrphanFile]:
    """The candidates no kept snapshot reaches (in `snapshot/` and `changelog/`: the
    leftovers of failed commits), last modified before `cutoff_ms`."""
    out = []
    for info in candidates:
        relative = table.storage.relative_to_root(info.location)
        if relative is None or not _unused(relative, info.name, used):
            continue
        if info.modification_time_ms is None or info.modification_time_ms >= cutoff_ms:
            continue
        out.append(OrphanFile(relative, info.size, info.modification_time_ms))
    return sorted(out, key=lambda f: f.path)


def _unused(relative: str, name: str, used: UsedFiles) -> bool:
    if relative.startswith(f"{BRANCH_DIR}/{BRANCH_PREFIX}"):  # a branch's own folders
        relative = relative.split("/", 2)[2]
    folder, _, rest = relative.partition("/")
    prefix = COMMIT_FOLDERS.get(folder)
    if prefix is not None and rest == name:  # directly in snapshot/ or changelog/
        return is_commit_leftover(name, prefix)
    return name not in used.names and snapshot_id_of(name) is None
