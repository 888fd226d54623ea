"""Keep writing commands inside the table root, whatever paths the log holds.

A log written by a buggy or hostile writer can name data files and DV files anywhere: with
`..` segments (also percent-encoded), as absolute paths or URIs of other storage, through a
symbolic link inside the table that points elsewhere, or with control characters and
backslashes that no URI may hold. Reading such a file is harmless, but a command that
rewrites, removes or re-points it would act on something that is not the table's. So before
`delete` and `optimize` (and the purges of `downgrade` and `generate-manifest`) touch a file,
`require_inside_root` checks the data file and its DV file and refuses with the path named.
`vacuum` has its own, stricter handling: it ignores such paths and never deletes outside.

A command checks thousands of files at once, so the links are resolved in bulk: one call
resolves the root and each directory once (`Storage.real_relative_paths`), about one stat per
file instead of one per component of every path; the answers are those of checking each file
on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dvtool.delta.protocol.actions import unsafe_path_reason
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.errors import StorageError, WriteRefusedError
from dvtool.storage.table_storage import Storage

RealRelative = Callable[[str], str | None]
"""A location's path under the root with links resolved, None if outside (`Storage`)."""


def require_inside_root(
    storage: Storage, files: Iterable[Mapping[str, Any]], operation: str
) -> None:
    """Raise WriteRefusedError unless every file and its DV file lie inside the root.

    `files` are live add rows (`path`, `deletionVector`) the command is about to act on;
    `operation` names the command in the message (`DELETE`, `REORG`, `OPTIMIZE`). Pass all
    the files of a command in one call: the call resolves each directory once.
    """
    real_relative = storage.real_relative_paths()
    for row in files:
        path = str(row["path"])
        reason = outside_reason(storage, path, real_relative)
        if reason is not None:
            _refuse(operation, f"data file {path!r}", reason)
        dv = row.get("deletionVector")
        if dv:
            _require_dv_inside_root(storage, path, dv, operation, real_relative)


def _require_dv_inside_root(
    storage: Storage,
    data_file: str,
    dv: Mapping[str, Any],
    operation: str,
    real_relative: RealRelative,
) -> None:
    descriptor = DeletionVectorDescriptor.from_json(dv)
    if descriptor.is_relative:
        # The derived path is not percent-encoded: keep a '%' in a prefix literal.
        path_in_log = descriptor.relative_path().replace("%", "%25")
    elif descriptor.is_absolute_path:
        path_in_log = descriptor.path_or_inline_dv
    else:
        return  # inline: no file
    reason = outside_reason(storage, path_in_log, real_relative)
    if reason is not None:
        what = f"the deletion vector {descriptor.path_or_inline_dv!r} of data file {data_file!r}"
        _refuse(operation, what, reason)


def outside_reason(
    storage: Storage, path_in_log: str, real_relative: RealRelative | None = None
) -> str | None:
    """Why the file a log path names is not safely inside the table root, or None.

    `real_relative` is the `storage.real_relative_paths()` shared by the files of one check
    (default: `storage.real_relative_to_root`, which resolves everything afresh).
    """
    reason = unsafe_path_reason(path_in_log)
    if reason is not None:
        return reason
    try:
        location = storage.resolve(path_in_log)
    except StorageError as e:
        return e.message
    relative = storage.relative_to_root(location)
    real = (real_relative or storage.real_relative_to_root)(location)
    if relative is None and real is None:
        return f"it lies outside the table root {storage.root}"
    if relative == "" or real == "":
        return "it names the table root itself"
    if real is None:
        return "it leads out of the table root through a symbolic link"
    return None


def _refuse(operation: str, what: str, reason: str) -> None:
    raise WriteRefusedError(
        f"{operation} refuses to act on {what}: {reason}",
        hint="dvtool rewrites and removes only files inside the table root; repair the "
        "log entry (or restore the table) first.",
    )
