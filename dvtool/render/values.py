"""Values as human output shows them: times, byte sizes, counts, commit parameters and
metrics, protocols, and locations as the user named them.

Every number a person reads has thousands separators, every byte count a unit; no Python
repr (`None`, `True`, a dict's braces) reaches the output: JSON output keeps the raw values.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dvtool.render.plain_console import KEEP


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


def plural(n: int, noun: str) -> str:
    """`1 file`, `2,953 files`: the count with separators and the noun agreeing with it
    (`directory` -> `directories`)."""
    if n == 1:
        return f"1 {noun}"
    many = noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"
    return f"{n:,} {many}"


def as_int(value: Any) -> int | None:
    """A metric's value as an int (Delta writes them as strings, delta-rs as numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def format_value(value: Any) -> str:
    """A commit parameter (or any JSON value) for a person: JSON text inside strings
    (`["region"]`, `{"k": "v"}`) read, lists as `a, b`, objects as `k=v, k=v`, `null` as
    `-`, booleans as `true`/`false`, integers with separators."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{" and text:
            try:
                return format_value(json.loads(text))
            except ValueError:
                return value
        return value
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, dict):
        return format_pairs(value)
    return str(value)


def format_pairs(values: Mapping[str, Any]) -> str:
    """`k1=v1, k2=v2` in the order of `values`, each value as `format_value` shows it."""
    return ", ".join(f"{k}={format_value(v)}" for k, v in values.items())


def format_metric(name: str, value: Any) -> str:
    """One operation metric's value: byte counts (names with `bytes` or `size`, as
    `numAddedBytes`, `tableSizeAfterRestore`) in units, times in ms (`...TimeMs`, `..._ms`)
    as `47 ms`, other counts with separators."""
    n = as_int(value)
    if n is None:
        return format_value(value)
    lower = name.lower()
    if "bytes" in lower or "size" in lower:
        return format_bytes(n)
    if lower.endswith(("timems", "_ms")):
        return f"{n:,} ms"
    return f"{n:,}"


def format_metrics(metrics: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> str:
    """`name=value, ...` of the metrics not in `skip` and not zero (or empty), in their
    order, each as `format_metric` shows it; no line breaks inside one (`KEEP`)."""
    return ", ".join(
        f"{k}={format_metric(k, v)}".replace(" ", KEEP)
        for k, v in metrics.items()
        if k not in skip and v not in (0, "0", None, "")
    )


def format_protocol(p: dict[str, Any]) -> str:
    """`reader/writer (features)` of a protocol action; without features, `reader/writer`."""
    text = f"{p['minReaderVersion']}/{p['minWriterVersion']}"
    features = sorted(set(p.get("readerFeatures") or []) | set(p.get("writerFeatures") or []))
    return f"{text} ({', '.join(features)})" if features else text


def relative_location(location: str, root: str | None) -> str:
    """`location` relative to the table `root` when it lies under it (as the log writes data
    paths), else as it is."""
    if root:
        base = root.rstrip("/") + "/"
        if location.startswith(base):
            return location[len(base) :]
    return location


def location_as_given(location: str, prefixes: Mapping[str, str]) -> str:
    """`location` as the user named it: `prefixes` maps each location the user's arguments
    resolved to (an absolute path, a URI) to the argument as typed; a location at or under
    one is that argument, followed by the rest of the path. Else `location` itself."""
    for resolved, given in sorted(prefixes.items(), key=lambda item: -len(item[0])):
        base = resolved.rstrip("/")
        if location == base:
            return given
        if base and location.startswith(base + "/"):
            return given.rstrip("/") + location[len(base) :] if given.rstrip("/") else location
    return location


def as_given(targets: Sequence[str]) -> Callable[[str], str]:
    """How a table found under TARGETS is shown: as the user named its prefix (a command's
    result holds resolved locations: absolute paths, URIs); `location_as_given`."""
    from dvtool.errors import DvtoolError
    from dvtool.storage.locations import file_uri_to_path, local_abspath
    from dvtool.storage.schemes import scheme_of

    resolved: dict[str, str] = {}
    for target in targets:
        scheme = scheme_of(target)
        try:
            root = file_uri_to_path(target) if scheme == "file" else target
        except DvtoolError:
            continue
        resolved[local_abspath(root) if scheme in (None, "file") else target] = target
    return lambda location: location_as_given(location, resolved)


def names_location(message: str, location: str) -> bool:
    """Whether `message` names `location` as typed or, for a local path, as an absolute
    path: as a whole path (`t` is not named by "table" but is by "/tmp/x/t:")."""
    spellings = {location.rstrip("/")}
    if "://" not in location:
        spellings.add(os.path.abspath(location))
    return any(
        re.search(rf"(^|[\s/'\"]){re.escape(s)}($|[\s:;,'\"])", message) for s in spellings if s
    )
