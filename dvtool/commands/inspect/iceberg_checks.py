"""The `--check NAME=LIMIT` gates of `dvtool inspect` on an Iceberg table.

Delta's gates that mean the same on Iceberg keep their names and limits
(`dvtool.commands.inspect.checks`): `max-deleted-ratio`, `max-deleted-rows`,
`max-files-with-dvs` (data files with any deletes), `max-dv-files` (Puffin files),
`max-files`, `max-small-files` (below `write.target-file-size-bytes`, default 512 MiB),
`min-avg-file-size`. Iceberg adds:

- `max-delete-files-per-data-file`: the most delete files (a DV counts one) applying to a
  single data file, what a reader merges per file (`rewrite_position_delete_files`, or
  compaction, brings it down);
- `max-equality-delete-files`: live equality delete files (every reader applies them to
  every older file of their partition);
- `max-dangling-deletes`: live delete files applying to no live data file.

Delta's gates without an Iceberg meaning (`max-inline-dvs`, `max-files-without-stats`,
`max-log-files`) are usage errors here. A gate on deleted rows needs exact counts: with
equality deletes applying it asks for `--count-rows` rather than gate on a lower bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dvtool.commands.inspect.checks import CHECK_NAMES as DELTA_CHECK_NAMES
from dvtool.commands.inspect.checks import CheckOutcome, evaluate_gates, parse_format_check
from dvtool.commands.inspect.iceberg_summary import TARGET_FILE_SIZE, IcebergSummary
from dvtool.errors import UsageError

Measure = Callable[[IcebergSummary], float]


def _exact(measure: Measure, name: str) -> Measure:
    def measured(s: IcebergSummary) -> float:
        if not s.row_counts_exact:
            raise UsageError(
                f"--check {name} needs exact row counts, and equality deletes apply",
                hint="Add --count-rows, which applies the equality deletes.",
            )
        return measure(s)

    return measured


def _small_files(s: IcebergSummary) -> float:
    if s.small_files is None:
        raise UsageError(
            f"--check max-small-files: the table property {TARGET_FILE_SIZE} is not a "
            f"size in bytes ({s.properties.get(TARGET_FILE_SIZE)!r})",
            hint=f"Set {TARGET_FILE_SIZE} to a positive number of bytes.",
        )
    return float(s.small_files)


_SHARED: dict[str, Measure] = {
    "max-deleted-ratio": _exact(lambda s: s.deleted_ratio, "max-deleted-ratio"),
    "max-deleted-rows": _exact(lambda s: s.deleted_rows, "max-deleted-rows"),
    "max-files-with-dvs": lambda s: s.files_with_dvs,
    "max-dv-files": lambda s: s.puffin.files,
    "max-files": lambda s: s.num_files,
    "max-small-files": _small_files,
    "min-avg-file-size": lambda s: s.avg_file_size,
}
_ICEBERG_ONLY: dict[str, Measure] = {
    "max-delete-files-per-data-file": lambda s: s.delete_files_per_data_file["max"],
    "max-equality-delete-files": lambda s: s.delete_files["equality"],
    "max-dangling-deletes": lambda s: s.dangling_deletes,
}
_GATES = {**_SHARED, **_ICEBERG_ONLY}
ICEBERG_CHECK_NAMES = tuple(sorted(_GATES))
ICEBERG_ONLY_CHECK_NAMES = tuple(sorted(_ICEBERG_ONLY))


def parse_iceberg_check(text: str) -> tuple[str, float]:
    """Parse `NAME=LIMIT` for an Iceberg table; UsageError for a gate it has not."""
    return parse_format_check(text, "Iceberg", _GATES, _ICEBERG_ONLY, DELTA_CHECK_NAMES)


def evaluate_iceberg_checks(
    summary: IcebergSummary, checks: Sequence[tuple[str, float]]
) -> list[CheckOutcome]:
    """Each gate (`checks.evaluate_gates`)."""
    return evaluate_gates(_GATES, summary, checks, summary.num_files)
