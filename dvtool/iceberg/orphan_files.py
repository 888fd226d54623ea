"""Orphan files of an Iceberg table: files under its location that no metadata reaches.

Iceberg Java's `DeleteOrphanFilesSparkAction` (Spark's `remove_orphan_files`) is the model:

- What is listed: the table location, recursively (as Iceberg 1.12 does: a stray file at
  the top goes too), without hidden names (starting with `_` or `.`, Hadoop's checksum
  files among them) except partition folders of a partition field whose name starts with
  one (`_x=...`). A data or metadata folder set outside the location (`write.data.path`,
  `write.metadata.path`) is not listed: dvtool deletes nothing there.
- What is valid: every file the metadata reaches (`reachable_files.reachable_files`: all
  snapshots' manifest lists, manifests and live content files, statistics files, the
  metadata file, the `metadata-log`, the version hint).
- Locations are compared as URIs (Hadoop's `Path.toUri`): scheme, authority and path, with
  `s3a` and `s3n` equal to `s3`; a location without scheme or authority matches any. A
  listed file whose path a valid location has with another scheme or authority is not an
  orphan, and the run is refused (Java's default `PrefixMismatchMode.ERROR`): dvtool cannot
  tell whether the two name the same file.
- Only files last modified before the cutoff are orphans (default 3 days ago, Java's): a
  writer that has not committed yet may be writing the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dvtool.errors import WriteRefusedError
from dvtool.storage.listing import TreeEntry

ORPHAN_RETENTION_MS_DEFAULT = 3 * 24 * 3600 * 1000
EQUAL_SCHEMES = {"s3a": "s3", "s3n": "s3"}
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):(.*)$", re.DOTALL)


@dataclass(frozen=True)
class FileUri:
    """A location as Hadoop's `Path.toUri` splits it (not percent-decoded: Iceberg
    locations are plain strings). `scheme` and `authority` are None when absent."""

    scheme: str | None
    authority: str | None
    path: str


def parse_location(location: str) -> FileUri:
    """`location` split into scheme, authority and a path with repeated and trailing
    slashes removed (as Hadoop's Path normalizes it)."""
    scheme: str | None = None
    authority: str | None = None
    rest = location
    match = _SCHEME.match(location)
    if match is not None and len(match[1]) > 1:  # `C:` is a Windows drive, not a scheme
        scheme = match[1].lower()
        scheme = EQUAL_SCHEMES.get(scheme, scheme)
        rest = match[2]
        if rest.startswith("//"):
            authority, slash, path = rest[2:].partition("/")
            rest = slash + path
    path = re.sub(r"/+", "/", rest)
    if len(path) > 1:
        path = path.rstrip("/")
    if scheme == "file" and authority in ("", "localhost"):
        authority = None
    return FileUri(scheme, authority or None, path)


def _component_matches(valid: str | None, actual: str | None) -> bool:
    """Java's `uriComponentMatch`: an absent valid component matches anything."""
    return not valid or (actual is not None and valid.lower() == actual.lower())


def under_location(uri: FileUri, table: FileUri) -> bool:
    """Whether `uri` lies inside the table location `table` (same scheme and authority,
    where both have them, and a path below the table's)."""
    if not (_component_matches(table.scheme, uri.scheme) or uri.scheme is None):
        return False
    if not (_component_matches(table.authority, uri.authority) or uri.authority is None):
        return False
    root = table.path.rstrip("/") + "/"
    return uri.path.startswith(root)


@dataclass(frozen=True)
class ListedFile:
    """A file found under the table location: where, its size and modification time."""

    location: str
    size: int
    modification_time_ms: int | None


@dataclass(frozen=True)
class OrphanScan:
    """The orphans (not reachable, older than the cutoff, inside the location), how many
    files were listed, and the newer unreachable files left for a later run."""

    orphans: tuple[ListedFile, ...]
    listed: int
    too_new: int


def hidden_filter(partition_field_names: Iterable[str]) -> Callable[[str], bool]:
    """Whether a listed name is hidden (Java's `PartitionAwareHiddenPathFilter`): starts
    with `_` or `.`, unless it is a folder of a partition field so named (`_x=...`)."""
    prefixes = tuple(f"{name}=" for name in partition_field_names if name.startswith(("_", ".")))

    def hidden(name: str) -> bool:
        return name.startswith(("_", ".")) and not (prefixes and name.startswith(prefixes))

    return hidden


def find_orphans(
    listed: Iterable[ListedFile],
    valid: Iterable[str],
    table_location: str,
    cutoff_ms: int,
) -> OrphanScan:
    """The listed files no valid location names, last modified before `cutoff_ms` and
    inside `table_location`. WriteRefusedError when a listed file matches a valid one but
    for the scheme or authority (Java's prefix mismatch: refuse rather than guess)."""
    by_path: dict[str, list[FileUri]] = {}
    for location in valid:
        uri = parse_location(location)
        by_path.setdefault(uri.path, []).append(uri)
    table = parse_location(table_location)
    orphans: list[ListedFile] = []
    conflicts: set[tuple[str, str]] = set()
    count = too_new = 0
    for f in listed:
        count += 1
        uri = _in_table_scheme(parse_location(f.location), table)
        if not under_location(uri, table):
            continue
        matches = by_path.get(uri.path, [])
        if any(_same_file(v, uri) for v in matches):
            continue
        if matches:
            conflicts.update(_conflicts(matches, uri))
            continue
        if f.modification_time_ms is None or f.modification_time_ms >= cutoff_ms:
            too_new += 1
            continue
        orphans.append(f)
    if conflicts:
        raise _prefix_mismatch(conflicts)
    return OrphanScan(tuple(sorted(orphans, key=lambda o: o.location)), count, too_new)


def _in_table_scheme(uri: FileUri, table: FileUri) -> FileUri:
    """A listed location without scheme (a local path) in the table location's scheme."""
    if uri.scheme is None and uri.authority is None:
        return FileUri(table.scheme, table.authority, uri.path)
    return uri


def _same_file(valid: FileUri, actual: FileUri) -> bool:
    return _component_matches(valid.scheme, actual.scheme) and _component_matches(
        valid.authority, actual.authority
    )


def _conflicts(matches: list[FileUri], actual: FileUri) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for valid in matches:
        if not _component_matches(valid.scheme, actual.scheme):
            out.add((str(valid.scheme), str(actual.scheme)))
        if not _component_matches(valid.authority, actual.authority):
            out.add((str(valid.authority), str(actual.authority)))
    return out


def _prefix_mismatch(conflicts: set[tuple[str, str]]) -> WriteRefusedError:
    shown = ", ".join(f"{a} vs {b}" for a, b in sorted(conflicts)[:5])
    return WriteRefusedError(
        "cannot tell whether some files are orphans: the metadata names files at the same "
        f"paths with another scheme or authority ({shown}); no orphan file was deleted",
        hint="Check the table's locations: the metadata and the storage must name its files alike.",
    )


def listed_files(entries: Iterable[TreeEntry]) -> list[ListedFile]:
    """The files (not folders or links) of a walk."""
    return [
        ListedFile(e.location, e.size, e.modification_time_ms) for e in entries if e.kind == "file"
    ]


def unlisted_folders(table_location: str, properties: Mapping[str, str]) -> list[str]:
    """The data and metadata folders (`write.data.path`, `write.metadata.path`) outside the
    table location: never listed (Java 1.12 lists only the location too), reported."""
    table = parse_location(table_location)
    folders = [properties.get("write.data.path"), properties.get("write.metadata.path")]
    return [f for f in folders if f and not under_location(parse_location(f + "/x"), table)]
