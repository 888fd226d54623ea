"""Paths from the Delta log, placed under the table root for `dvtool vacuum`.

Every path an action names (an add's or remove's `path`, a `cdc` file, the DV file a
deletion vector descriptor derives) is decoded once (`Storage.resolve`) and made relative
to the root. Paths that lie outside the root (absolute paths elsewhere, other storage,
`..` segments leading out) can neither be kept nor deleted: they are reported as ignored,
so the user sees what vacuum did not deal with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import unquote

from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.errors import DvtoolError, LogError, StorageError
from dvtool.storage.table_storage import Storage

MAX_IGNORED_REPORTED = 100


@dataclass(frozen=True)
class IgnoredPath:
    """A path from the log that vacuum cannot keep: it does not lie inside the table root."""

    path: str
    action: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class LogPathResolver:
    """Decodes paths from the log once and places them under the root (or reports them).

    `ignored` holds the first `MAX_IGNORED_REPORTED` paths that are not inside the root,
    `num_ignored` counts them all (each distinct path once).
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.local = storage.protocol == "file"
        self.ignored: list[IgnoredPath] = []
        self.num_ignored = 0
        self._seen: set[str] = set()

    def relative(self, path_in_log: str, action: str, *, strict: bool = False) -> str | None:
        """The path under the root of a log path, or None (reported) if it is not inside.

        `..` segments are resolved lexically (keeping a file is always safe); with `strict`
        (deletion candidates) a path with `..` segments is refused instead.
        """
        if strict and ".." in unquote(path_in_log).split("/"):
            self._ignore(path_in_log, action, "has '..' segments")
            return None
        try:
            location = self.storage.resolve(path_in_log)
        except StorageError as e:
            self._ignore(path_in_log, action, e.message)
            return None
        relative = self.storage.relative_to_root(location)
        if relative is None and self.local:
            # The root may have been given through a symbolic link, the log's absolute paths
            # through its real path (or the other way round).
            relative = self.storage.real_relative_to_root(location)
        if relative is None:
            self._ignore(path_in_log, action, "outside the table root")
            return None
        if relative == "":
            self._ignore(path_in_log, action, "names the table root, not a file")
            return None
        return relative

    def dv_relative(
        self,
        dv: Mapping[str, Any],
        action: str,
        *,
        strict: bool = False,
        needed: str | None = None,
    ) -> tuple[str | None, bool]:
        """The DV file of a descriptor under the root (None: inline or outside), and whether
        it is an absolute-path ('p') DV, which vacuum never deletes.

        A malformed descriptor names no file we could keep: LogError when the DV is `needed`
        (by this data file: a live add or an unexpired tombstone), else it is reported and
        ignored.
        """
        try:
            descriptor = DeletionVectorDescriptor.from_json(dv)
        except DvtoolError as e:
            if needed is not None:
                raise LogError(
                    f"the {action} of {needed} has a malformed deletion vector descriptor "
                    f"({e.message}): vacuum cannot tell which DV file to keep",
                    hint="Repair the table first; vacuum refuses rather than risk deleting "
                    "a DV file that is still needed.",
                ) from e
            self._ignore(str(dv.get("pathOrInlineDv")), action, f"bad DV descriptor: {e}")
            return None, False
        if descriptor.is_relative:
            # The derived path is not percent-encoded: keep a '%' in a prefix literal.
            encoded = descriptor.relative_path().replace("%", "%25")
            return self.relative(encoded, f"{action} DV", strict=strict), False
        if descriptor.is_absolute_path:
            return self.relative(descriptor.path_or_inline_dv, f"{action} DV"), True
        return None, False

    def _ignore(self, path: str, action: str, reason: str) -> None:
        if path in self._seen:
            return
        self._seen.add(path)
        self.num_ignored += 1
        if len(self.ignored) < MAX_IGNORED_REPORTED:
            self.ignored.append(IgnoredPath(path, action, reason))
