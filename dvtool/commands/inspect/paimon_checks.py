"""The `--check NAME=LIMIT` gates of `dvtool inspect` on a Paimon table: when to run
Paimon's full compaction (dvtool leaves compaction to Paimon, whose writers own the LSM
levels).

Delta's gates that mean the same on Paimon keep their names and limits
(`dvtool.commands.inspect.checks`): `max-deleted-ratio`, `max-deleted-rows` (rows the DVs
of the read files delete), `max-files-with-dvs`, `max-dv-files` (deletion files),
`max-files`, `max-small-files` (below `target-file-size`), `min-avg-file-size`. Paimon adds
`max-level0-files`: a primary-key table's level-0 files in deletion-vectors mode, the
freshest data its DV readers do not see until a compaction. Delta's gates without a Paimon
meaning (`max-inline-dvs`, `max-files-without-stats`, `max-log-files`) and Iceberg's are
usage errors here. A gate on deleted rows needs exact counts (`row_counts_exact`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dvtool.commands.inspect.checks import CHECK_NAMES as DELTA_CHECK_NAMES
from dvtool.commands.inspect.checks import CheckOutcome, evaluate_gates, parse_format_check
from dvtool.commands.inspect.iceberg_checks import ICEBERG_ONLY_CHECK_NAMES
from dvtool.commands.inspect.paimon_summary import PaimonSummary
from dvtool.errors import UsageError
from dvtool.paimon.protocol.schema import TARGET_FILE_SIZE

Measure = Callable[[PaimonSummary], float]


def _exact(measure: Measure, name: str) -> Measure:
    def measured(s: PaimonSummary) -> float:
        if not s.row_counts_exact:
            raise UsageError(
                f"--check {name} needs exact row counts, which this Paimon table's "
                "metadata does not give",
                hint="A primary-key table without deletion vectors merges rows on read; "
                "gate on max-files or max-level0-files instead.",
            )
        return measure(s)

    return measured


def _small_files(s: PaimonSummary) -> float:
    if s.small_files is None:
        raise UsageError(
            f"--check max-small-files: the table option {TARGET_FILE_SIZE} is not a size "
            f"({s.options.get(TARGET_FILE_SIZE)!r})",
            hint=f"Set {TARGET_FILE_SIZE} to a size such as 128mb.",
        )
    return float(s.small_files)


_SHARED: dict[str, Measure] = {
    "max-deleted-ratio": _exact(lambda s: s.deleted_ratio, "max-deleted-ratio"),
    "max-deleted-rows": _exact(lambda s: s.deleted_rows, "max-deleted-rows"),
    "max-files-with-dvs": lambda s: s.files_with_dvs,
    "max-dv-files": lambda s: s.deletion_files,
    "max-files": lambda s: s.num_files,
    "max-small-files": _small_files,
    "min-avg-file-size": lambda s: s.avg_file_size,
}
_PAIMON_ONLY: dict[str, Measure] = {
    "max-level0-files": lambda s: s.pending_level0_files,
}
_GATES = {**_SHARED, **_PAIMON_ONLY}
PAIMON_CHECK_NAMES = tuple(sorted(_GATES))
PAIMON_ONLY_CHECK_NAMES = tuple(sorted(_PAIMON_ONLY))


def parse_paimon_check(text: str) -> tuple[str, float]:
    """Parse `NAME=LIMIT` for a Paimon table; UsageError for a gate it has not."""
    return parse_format_check(
        text, "Paimon", _GATES, _PAIMON_ONLY, (*DELTA_CHECK_NAMES, *ICEBERG_ONLY_CHECK_NAMES)
    )


def evaluate_paimon_checks(
    summary: PaimonSummary, checks: Sequence[tuple[str, float]]
) -> list[CheckOutcome]:
    """Each gate (`checks.evaluate_gates`)."""
    return evaluate_gates(_GATES, summary, checks, summary.num_files)
