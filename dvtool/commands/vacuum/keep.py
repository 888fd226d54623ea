"""The files `dvtool vacuum` must keep: those the table's snapshot still references.

Every live add's data file and its DV file ('u': the path derived from the UUID and prefix;
'i': none; 'p': the named file, which vacuum never deletes); every remove (tombstone) whose
`deletionTimestamp` is at or after the cutoff, with its DV file. DV files have no tombstones
of their own: a DV file shared by several files lives while any live add or unexpired remove
names it. Expired tombstones and every DV file named anywhere are remembered too, to give
each deleted file its reason. The log itself (`_delta_log`: commits, checkpoints, sidecars)
is never listed, so it needs no entry here.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dvtool.commands.vacuum.log_paths import LogPathResolver
from dvtool.delta.log.snapshot import Snapshot


@dataclass
class KeepSet:
    """Relative paths vacuum must not delete, and what it knows about the others."""

    paths: set[str] = field(default_factory=set)
    tombstones: set[str] = field(default_factory=set)  # data files of expired removes
    dv_files: set[str] = field(default_factory=set)  # every DV file any action names

    def add(self, relative: str | None) -> None:
        if relative is not None:
            self.paths.update(unicode_forms(relative))

    def kept(self, relative: str) -> bool:
        return any(form in self.paths for form in unicode_forms(relative))


def unicode_forms(path: str) -> tuple[str, ...]:
    """The path and its Unicode NFC/NFD forms (file systems may store either)."""
    nfc = unicodedata.normalize("NFC", path)
    nfd = unicodedata.normalize("NFD", path)
    return (path,) if path == nfc == nfd else (path, nfc, nfd)


def referenced_files(snapshot: Snapshot, cutoff: int, paths: LogPathResolver) -> KeepSet:
    """The keep set of a snapshot: live adds, and removes not older than `cutoff`, with
    their DV files."""
    keep = KeepSet()
    adds = snapshot.files.select(["path", "deletionVector"]).to_pylist()
    for row in adds:
        keep.add(paths.relative(row["path"], "add"))
        _keep_dv(keep, paths, row, "add", live=True)
    removes = snapshot.tombstones.select(["path", "deletionVector", "deletionTimestamp"])
    for row in removes.to_pylist():
        live = (row["deletionTimestamp"] or 0) >= cutoff
        relative = paths.relative(row["path"], "remove")
        if live:
            keep.add(relative)
        elif relative is not None:
            keep.tombstones.add(relative)
        _keep_dv(keep, paths, row, "remove", live=live)
    return keep


def _keep_dv(
    keep: KeepSet, paths: LogPathResolver, row: Mapping[str, Any], action: str, *, live: bool
) -> None:
    """Record the DV file of an add or remove row; keep it if the row is live or it is an
    absolute-path DV."""
    dv = row["deletionVector"]
    if dv is None:
        return
    needed = row["path"] if live else None
    relative, absolute = paths.dv_relative(dv, action, needed=needed)
    if relative is None:
        return
    keep.dv_files.update(unicode_forms(relative))
    if live or absolute:
        keep.add(relative)
