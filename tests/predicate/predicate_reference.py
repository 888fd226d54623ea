"""Spark SQL's semantics in plain Python: the reference the predicate property tests
check dvtool against (three-valued logic, NaN ordering, Java `%`, 1-based substring, the
calendar of date and time functions, ...), written independently of dvtool.predicate."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

Row = dict[str, Any]
Ref = Callable[[Row], Any]


def _key(x: Any) -> tuple[int, Any]:
    """Spark's ordering: NaN equals NaN and is above every number."""
    if isinstance(x, float) and math.isnan(x):
        return (1, 0)
    return (0, x)


def ref_compare(op: str, a: Any, b: Any) -> bool | None:
    if op == "<=>":
        if a is None or b is None:
            return a is None and b is None
        return _key(a) == _key(b)
    if a is None or b is None:
        return None
    ka, kb = _key(a), _key(b)
    return {
        "=": ka == kb,
        "!=": ka != kb,
        "<>": ka != kb,
        "<": ka < kb,
        "<=": ka <= kb,
        ">": ka > kb,
        ">=": ka >= kb,
    }[op]


def ref_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def ref_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def ref_not(a: bool | None) -> bool | None:
    return None if a is None else not a


def ref_in(value: Any, options: list[Any]) -> bool | None:
    if value is None:
        return None
    if any(o is not None and ref_compare("=", value, o) for o in options):
        return True
    return None if any(o is None for o in options) else False


def ref_like(s: str | None, pattern: str) -> bool | None:
    if s is None:
        return None
    regex, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            regex += re.escape(pattern[i + 1])
            i += 2
            continue
        regex += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(regex, s, re.DOTALL) is not None


def ref_substring(s: str | None, pos: int, length: int | None) -> str | None:
    """UTF8String.substringSQL."""
    if s is None:
        return None
    n = len(s)
    start = pos - 1 if pos > 0 else (n + pos if pos < 0 else 0)
    end = n if length is None else start + length
    start = max(start, 0)
    return "" if start >= end else s[start : min(end, n)]


def ref_remainder(a: int | None, b: int | None) -> int | None:
    if a is None or b is None or b == 0:
        return None
    return int(math.fmod(a, b))


def ref_divide(a: Any, b: Any) -> float | None:
    if a is None or b is None or float(b) == 0:
        return None
    return float(a) / float(b)


def strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NULL in, NULL out."""
    return lambda *args: None if any(a is None for a in args) else fn(*args)


def ref_string_to_long(s: str | None) -> int | None:
    if s is None:
        return None
    text = s.strip()
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else None


# --- dates and times (session time zone UTC) -----------------------------------------------


def ref_add_months(d: date, months: int) -> date:
    """LocalDate.plusMonths: the day clamped to the new month's length."""
    index = d.year * 12 + d.month - 1 + months
    year, month = index // 12, index % 12 + 1
    last = (date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)).day
    return d.replace(year=year, month=month, day=min(d.day, last))


def ref_add_months_ts(ts: datetime, months: int) -> datetime:
    utc = ts.astimezone(timezone.utc)
    day = ref_add_months(utc.date(), months)
    return utc.replace(year=day.year, month=day.month, day=day.day)


def ref_trunc_date(d: date, unit: str) -> date:
    """trunc(date, unit) for YEAR, QUARTER, MONTH, WEEK (weeks start on Monday)."""
    if unit == "WEEK":
        return d - timedelta(days=d.weekday())
    month = {"YEAR": 1, "QUARTER": (d.month - 1) // 3 * 3 + 1, "MONTH": d.month}[unit]
    return date(d.year, month, 1)


def ref_date_trunc(unit: str, ts: datetime) -> datetime:
    """date_trunc(unit, ts) in UTC."""
    utc = ts.astimezone(timezone.utc)
    if unit in ("YEAR", "QUARTER", "MONTH", "WEEK"):
        d = ref_trunc_date(utc.date(), unit)
        return datetime(d.year, d.month, d.day, tzinfo=timezone.utc)
    sizes = {"DAY": 86_400_000_000, "HOUR": 3_600_000_000, "MINUTE": 60_000_000}
    sizes |= {"SECOND": 1_000_000, "MILLISECOND": 1_000, "MICROSECOND": 1}
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    micros = (utc - epoch) // timedelta(microseconds=1)
    return epoch + timedelta(microseconds=micros - micros % sizes[unit])


def ref_dayofweek(d: date) -> int:
    """1 = Sunday ... 7 = Saturday."""
    return d.isoweekday() % 7 + 1


_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def ref_date_format(ts: datetime, pattern: str) -> str:
    """date_format for the few fixed patterns the grammar draws (see DATE_FORMATS)."""
    t = ts.astimezone(timezone.utc)
    fields = {
        "yyyy": f"{t.year:04d}",
        "MM": f"{t.month:02d}",
        "MMM": _MONTHS[t.month - 1],
        "dd": f"{t.day:02d}",
        "d": str(t.day),
        "HH": f"{t.hour:02d}",
        "mm": f"{t.minute:02d}",
        "ss": f"{t.second:02d}",
        "SSS": f"{t.microsecond // 1000:03d}",
        "EEE": _DAYS[t.weekday()],
    }
    return "".join(fields.get(part, part) for part in re.split(r"(\w+)", pattern))
