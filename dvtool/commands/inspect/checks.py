"""The health gates of `dvtool inspect --check NAME=LIMIT`, which a maintainer sets in CI.

Each gate measures one value of the summary (`dvtool.commands.inspect.summary`); a `max-`
gate holds when the value is at most LIMIT, a `min-` gate when it is at least LIMIT. When
any gate fails, inspect exits 3 (`check-failed`). The gates a maintainer acts on with
`dvtool maintain` (or its single commands):

- `max-small-files`: live files below the compaction target size (`delta.targetFileSize`,
  else 256 MiB; `dvtool.delta.protocol.target_file_size`), the files `dvtool optimize` compacts;
- `max-log-files`: the commits a reader must replay after the newest checkpoint (all of
  them when there is none); a checkpoint (`dvtool checkpoint`, or `maintain` when one is
  due) brings it to 0. The number of files in `_delta_log` is not the gate: it is bounded
  by `delta.logRetentionDuration`, not by anything a maintainer runs;
- `min-avg-file-size`: bytes per live file, LIMIT a size as `--target-size` takes it
  (`256MB`, `1GiB`, bytes); a table without files has no average and passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dvtool.byte_size import parse_byte_size
from dvtool.commands.inspect.summary import TableSummary
from dvtool.delta.protocol.target_file_size import target_file_size
from dvtool.errors import UsageError


@dataclass(frozen=True)
class CheckOutcome:
    """One `--check NAME=LIMIT` gate and whether the table passes it."""

    name: str
    limit: float
    actual: float
    passed: bool

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Gate:
    """A gate: the value it measures, and whether LIMIT is an upper (`max-`) or lower
    (`min-`) bound and a byte size (`256MB`) rather than a plain number."""

    measure: Callable[[TableSummary], float]
    minimum: bool = False
    size_limit: bool = False


def _small_files(s: TableSummary) -> float:
    if s.small_files is None:
        target_file_size(s.configuration)  # raises the UsageError naming the property
    return float(s.small_files or 0)


def _commits_since_checkpoint(s: TableSummary) -> float:
    if s.commits_since_checkpoint is None:
        raise ValueError("max-log-files needs the summary's log position (run_inspect)")
    return float(s.commits_since_checkpoint)


_CHECKS: dict[str, Gate] = {
    "max-deleted-ratio": Gate(lambda s: s.deleted_ratio),
    "max-deleted-rows": Gate(lambda s: s.deleted_rows),
    "max-dv-files": Gate(lambda s: s.dv_storage.dv_files),
    "max-files-with-dvs": Gate(lambda s: s.files_with_dvs),
    "max-inline-dvs": Gate(lambda s: s.dv_storage.inline_dvs),
    "max-files": Gate(lambda s: s.num_files),
    "max-files-without-stats": Gate(lambda s: s.files_without_stats),
    "max-small-files": Gate(_small_files),
    "max-log-files": Gate(_commits_since_checkpoint),
    "min-avg-file-size": Gate(lambda s: s.avg_file_size, minimum=True, size_limit=True),
}
CHECK_NAMES = tuple(sorted(_CHECKS))


def parse_check(text: str) -> tuple[str, float]:
    """Parse `NAME=LIMIT` (e.g. `max-deleted-ratio=0.2`, `min-avg-file-size=128MB`);
    UsageError when it is not valid."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or name not in _CHECKS:
        raise UsageError(
            f"invalid --check {text!r}: expected NAME=LIMIT",
            hint=f"Available checks: {', '.join(CHECK_NAMES)}.",
        )
    limit = _size_limit(text, value) if _CHECKS[name].size_limit else _number_limit(text, value)
    if limit < 0:
        raise UsageError(f"invalid --check {text!r}: the limit must not be negative")
    return name, limit


def _number_limit(text: str, value: str) -> float:
    try:
        limit = float(value)
    except ValueError:
        raise UsageError(f"invalid --check {text!r}: {value!r} is not a number") from None
    if math.isnan(limit):
        raise UsageError(f"invalid --check {text!r}: {value!r} is not a number")
    return limit


def _size_limit(text: str, value: str) -> float:
    if value.strip().startswith("-"):
        raise UsageError(f"invalid --check {text!r}: the limit must not be negative")
    try:
        return float(parse_byte_size(value))
    except ValueError as e:
        raise UsageError(f"invalid --check {text!r}: {e}") from None


def evaluate_checks(
    summary: TableSummary, checks: Sequence[tuple[str, float]]
) -> list[CheckOutcome]:
    """Evaluate each gate: a `max-` gate passes when the actual value is at most the limit,
    a `min-` gate when it is at least the limit (`min-avg-file-size` also on a table
    without files, which has no average)."""
    outcomes = []
    for name, limit in checks:
        gate = _CHECKS[name]
        actual = float(gate.measure(summary))
        passed = _holds(gate, actual, limit, summary)
        outcomes.append(CheckOutcome(name, limit, actual, passed))
    return outcomes


def _holds(gate: Gate, actual: float, limit: float, summary: TableSummary) -> bool:
    if gate.minimum:
        return actual >= limit or summary.num_files == 0
    return actual <= limit


# -- the gates of the other formats ------------------------------------------------------------


def parse_format_check(
    text: str,
    kind: str,
    gates: Mapping[str, Callable[[Any], float]],
    own: Collection[str],
    foreign: Collection[str],
) -> tuple[str, float]:
    """Parse `NAME=LIMIT` for another format's table (`kind`: "Iceberg"): its
    `own` gates take a plain count; a gate it shares with Delta parses as Delta's; a name
    in `foreign` (other formats' gates) that `gates` lacks has no meaning there."""
    name, _, value = text.partition("=")
    name = name.strip()
    names = ", ".join(sorted(gates))
    if name in own:
        return name, _count_limit(text, value)
    if name in foreign and name not in gates:
        raise UsageError(
            f"--check {name} has no meaning for {_article(kind)} {kind} table",
            hint=f"{kind} tables have: {names}.",
        )
    if name not in gates:
        raise UsageError(
            f"invalid --check {text!r}: expected NAME=LIMIT",
            hint=f"Available checks for {kind} tables: {names}.",
        )
    return parse_check(text)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _count_limit(text: str, value: str) -> float:
    try:
        limit = float(value)
    except ValueError:
        raise UsageError(f"invalid --check {text!r}: {value!r} is not a number") from None
    if not limit >= 0:
        raise UsageError(f"invalid --check {text!r}: the limit must be a number, not negative")
    return limit


def evaluate_gates(
    gates: Mapping[str, Callable[[Any], float]],
    summary: Any,
    checks: Sequence[tuple[str, float]],
    num_files: int,
) -> list[CheckOutcome]:
    """Each gate of another format's table: `max-` holds when the value is at most the
    limit, `min-avg-file-size` when it is at least the limit or the table has no files."""
    outcomes = []
    for name, limit in checks:
        actual = float(gates[name](summary))
        upper = not name.startswith("min-")
        passed = actual <= limit if upper else (actual >= limit or num_files == 0)
        outcomes.append(CheckOutcome(name, limit, actual, passed))
    return outcomes
