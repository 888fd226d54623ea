"""Retention durations of Delta table properties: interval text to milliseconds.

Delta spells retention periods as interval strings ("interval 1 weeks"): the deleted-file
(tombstone) retention `delta.deletedFileRetentionDuration`, the log retention
`delta.logRetentionDuration`, the history truncation of a feature drop
`delta.dropFeatureTruncateHistory.retentionDuration`. `parse_interval_ms` reads any of them.

The tombstone retention is one protocol rule with several users, not a part of the
checkpoint: a checkpoint drops the remove tombstones older than it
(`dvtool.delta.protocol.checkpoint_build`), vacuum protects the files removed within it and maintain
plans with it. So it lives here, apart from all of them, with the interval parser the log
cleanup (`dvtool.delta.protocol.log_cleanup`) and the protocol downgrade use for the other
properties.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 24 * 3600 * 1000
_INTERVAL_UNITS_MS: dict[str, float] = {
    "week": 7 * 24 * 3600 * 1000,
    "day": 24 * 3600 * 1000,
    "hour": 3600 * 1000,
    "minute": 60 * 1000,
    "second": 1000,
    "millisecond": 1,
    "microsecond": 0.001,
}
_UNIT_ALIASES = {
    "w": "week",
    "d": "day",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "ms": "millisecond",
    "msec": "millisecond",
    "msecs": "millisecond",
    "us": "microsecond",
    "usec": "microsecond",
    "usecs": "microsecond",
}


def parse_interval_ms(text: str) -> int:
    """Milliseconds of a Delta interval property (`interval 1 weeks`, `7 days`, `168 hours`,
    `interval 1 day 12 hours`). Months and years have no fixed length and are refused, as
    Delta refuses them for retention durations. ValueError when it cannot be parsed."""
    words = text.strip().lower().split()
    if words and words[0] == "interval":
        words = words[1:]
    if not words or len(words) % 2:
        raise ValueError(f"not an interval: {text!r}")
    total = 0.0
    for number, unit in zip(words[::2], words[1::2], strict=True):
        try:
            amount = float(number)
        except ValueError:
            raise ValueError(f"not an interval: {text!r}") from None
        name = _UNIT_ALIASES.get(unit, unit)
        if name.endswith("s") and name[:-1] in _INTERVAL_UNITS_MS:
            name = name[:-1]
        if name not in _INTERVAL_UNITS_MS:
            raise ValueError(f"interval {text!r}: unit {unit!r} has no fixed length")
        total += amount * _INTERVAL_UNITS_MS[name]
    if not math.isfinite(total):
        raise ValueError(f"not a finite interval: {text!r}")
    if total < 0:
        raise ValueError(f"negative interval: {text!r}")
    return int(total)


def tombstone_retention_ms(configuration: Mapping[str, str]) -> int | None:
    """`delta.deletedFileRetentionDuration` in ms (default 1 week); None if unparseable,
    in which case no tombstone may be dropped."""
    text = configuration.get("delta.deletedFileRetentionDuration")
    if text is None:
        return DEFAULT_TOMBSTONE_RETENTION_MS
    try:
        return parse_interval_ms(text)
    except ValueError:
        return None
