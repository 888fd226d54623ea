"""Retention for `dvtool vacuum`: how long removed and unreferenced files are protected.

Files are protected for `--retain` (default: the table's `delta.deletedFileRetentionDuration`,
"interval 1 weeks"); the cutoff is now - retention. A retention shorter than the table's is
refused unless forced: readers of older versions (time travel, long queries, concurrent
writers that have not committed yet) may still need the files.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dvtool.delta.protocol.actions import Metadata
from dvtool.delta.protocol.retention import parse_interval_ms, tombstone_retention_ms
from dvtool.errors import UsageError, WriteRefusedError

RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"

_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "hr": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+)$")
_NEGATIVE = re.compile(r"(^|\s)-\s*\d")


def parse_duration(text: str) -> int:
    """Milliseconds of a `--retain` duration: `168h`, `7d`, `30m`, `90s`, `1w`, `500ms`, `0h`,
    or a Delta interval (`7 days`, `interval 1 weeks`). UsageError for anything else,
    negative durations included."""
    raw = text.strip().lower()
    if _NEGATIVE.search(raw):
        raise UsageError(
            f"--retain {text!r} is negative",
            hint="A retention is a duration of 0 or more, e.g. 168h or 7d.",
        )
    match = _DURATION.match(raw)
    if match is not None and match.group(2) in _UNIT_MS:
        ms = float(match.group(1)) * _UNIT_MS[match.group(2)]
        if not math.isfinite(ms):
            shown = text if len(text) <= 32 else f"{text[:29]}..."
            raise UsageError(f"--retain {shown!r} is too long to be a duration")
        return round(ms)
    if " " in raw:
        try:
            return parse_interval_ms(raw)
        except ValueError:
            pass
    raise UsageError(
        f"--retain {text!r} is not a duration",
        hint="Give a number and a unit: 168h, 7d, 30m, 90s, 1w, 500ms (or '7 days').",
    )


def format_duration(ms: int) -> str:
    """A duration in the largest unit that divides it: `7d`, `36h`, `90s`, `1500ms`."""
    if ms == 0:
        return "0h"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


@dataclass(frozen=True)
class RetentionWindow:
    """The retention a run uses and the cutoff it sets: files last changed, and tombstones
    removed, before `cutoff_ms` are no longer protected.

    `default_ms` is the table's retention (None when its property is not a duration dvtool
    understands); `retention_ms` the one in effect.
    """

    retention_ms: int
    default_ms: int | None
    cutoff_ms: int


def retention_window(
    metadata: Metadata, retain_ms: int | None, force: bool, now_ms: int
) -> RetentionWindow:
    """The window for `--retain` (None: the table's), checked against the table's retention.

    WriteRefusedError for a retention shorter than the table's without `force`, and when the
    table's retention cannot be read and so cannot be checked.
    """
    default_ms = tombstone_retention_ms(metadata.configuration)
    configured = metadata.configuration.get(RETENTION_PROPERTY)
    retention = _retention(retain_ms, force, default_ms, configured)
    cutoff = max(now_ms - retention, 0)  # a retention reaching before 1970 keeps everything
    return RetentionWindow(retention, default_ms, cutoff)


def _retention(
    retain_ms: int | None, force: bool, default_ms: int | None, configured: str | None
) -> int:
    if retain_ms is not None and retain_ms < 0:
        raise UsageError(f"the retention must not be negative ({retain_ms} ms)")
    if default_ms is None:
        return _unchecked_retention(retain_ms, force, configured)
    if retain_ms is None:
        return default_ms
    if retain_ms < default_ms and not force:
        raise WriteRefusedError(
            f"--retain {format_duration(retain_ms)} is shorter than the table's "
            f"retention ({format_duration(default_ms)}, {RETENTION_PROPERTY}): "
            "files that concurrent readers, writers that have not committed yet, or time "
            "travel to recent versions still need could be deleted",
            hint="Use a retention of at least the table's, or add --force if you are sure no "
            "reader or writer needs those files.",
        )
    return retain_ms


def _unchecked_retention(retain_ms: int | None, force: bool, configured: str | None) -> int:
    """The retention when the table's property is unreadable: only a forced `--retain`."""
    if retain_ms is None:
        raise WriteRefusedError(
            f"{RETENTION_PROPERTY} is {configured!r}, which is not a duration dvtool understands",
            hint="Fix the table property, or give --retain (with --force).",
        )
    if not force:
        raise WriteRefusedError(
            f"cannot check --retain against {RETENTION_PROPERTY} "
            f"{configured!r}, which is not a duration dvtool understands",
            hint="Fix the table property, or add --force if no reader needs older files.",
        )
    return retain_ms
