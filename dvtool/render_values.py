"""Values as human output shows them: times, byte sizes, key=value lists, protocols."""

from __future__ import annotations

import datetime as dt
from typing import Any


def format_time(ms: int | None) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time to the second (`...Z`); None: unknown."""
    if ms is None:
        return "unknown"
    moment = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def format_bytes(n: int) -> str:
    """A byte count in B, KiB, MiB, GiB or TiB (powers of 1024), one decimal above bytes."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} B"


def format_pairs(values: dict[str, Any]) -> str:
    """`k1=v1, k2=v2` in the order of `values` (commit parameters and metrics)."""
    return ", ".join(f"{k}={v}" for k, v in values.items())


def format_protocol(p: dict[str, Any]) -> str:
    """`reader/writer (features)` of a protocol action; without features, `reader/writer`."""
    text = f"{p['minReaderVersion']}/{p['minWriterVersion']}"
    features = sorted(set(p.get("readerFeatures") or []) | set(p.get("writerFeatures") or []))
    return f"{text} ({', '.join(features)})" if features else text
