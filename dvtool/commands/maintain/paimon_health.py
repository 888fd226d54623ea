"""The health inspection of `dvtool maintain` on a Paimon table: is Paimon's full compaction
due? dvtool never compacts a Paimon table (its writers own the LSM levels); it measures
what `dvtool inspect --check` measures and says when to run Paimon's own full compaction.

The gates (`dvtool.commands.inspect.paimon_checks`, measured on the latest snapshot as
`inspect` summarizes it) and their limits:

- `max-deleted-ratio`: the purge ratio (`--purge-ratio`, else the table option
  `dvtool.maintain.purgeRatio`, else 0.2). The share of read rows DV readers skip; a full
  compaction drops them, as Delta's purge does.
- `max-level0-files`: the table option `num-sorted-run.compaction-trigger`, else 5. A
  primary-key table's level-0 files are not read in deletion-vectors mode until compacted;
  that many is what makes Paimon's writer compact a bucket, so none is compacting them.
- `max-small-files`: the buckets holding files. Small files are below `--target-size`,
  else `target-file-size`; a full compaction leaves at most one small file per bucket.

A gate that cannot be measured is left out and named in `unmeasured`: the deleted ratio of
a primary-key table without deletion vectors (its metadata gives no exact row counts), the
small files when `target-file-size` is no size. When any gate fails, the table's
`recommendation` (`TableOutcome.recommendation`) is Paimon's full compaction:
`{"action": "paimon-full-compaction", "reasons": [...], "checks": [the failed gates],
"how": "..."}`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dvtool.commands.inspect.outcome import inspect_document
from dvtool.commands.inspect.paimon_checks import evaluate_paimon_checks
from dvtool.commands.inspect.paimon_summary import PaimonSummary, summarize
from dvtool.paimon.deletion_files import with_cardinalities
from dvtool.paimon.protocol.table_files import TableFiles
from dvtool.paimon.snapshot_files import read_snapshot_files

if TYPE_CHECKING:
    from dvtool.commands.inspect.checks import CheckOutcome
    from dvtool.paimon.protocol.schema import TableSchema
    from dvtool.paimon.tables import PaimonTable

SORTED_RUN_TRIGGER = "num-sorted-run.compaction-trigger"
DEFAULT_SORTED_RUN_TRIGGER = 5
"""Paimon's `num-sorted-run.compaction-trigger` default (CoreOptions)."""
FULL_COMPACTION = "paimon-full-compaction"
_LABELS = {
    "max-deleted-ratio": "deleted ratio",
    "max-level0-files": "level-0 files (not read by DV readers yet)",
    "max-small-files": "small files",
}


def level0_limit(schema: TableSchema) -> int:
    """The `max-level0-files` limit: the table's sorted-run compaction trigger."""
    text = schema.options.get(SORTED_RUN_TRIGGER, "")
    try:
        value = int(text.strip())
    except ValueError:
        return DEFAULT_SORTED_RUN_TRIGGER
    return value if value > 0 else DEFAULT_SORTED_RUN_TRIGGER


@dataclass(frozen=True)
class PaimonHealth:
    """The gates of one Paimon table and the summary they were measured on."""

    summary: PaimonSummary
    checks: list[CheckOutcome]
    unmeasured: list[str]
    """The gates left out, each with why."""
    identifier: str
    """The table's `database.table` as Paimon's catalogs name it (from its folders)."""

    @property
    def compaction_due(self) -> bool:
        return any(not c.passed for c in self.checks)

    def detail(self) -> str:
        """One line: the recommendation and its reasons, or the figures that passed."""
        if self.compaction_due:
            failed = [_reason(c) for c in self.checks if not c.passed]
            return f"run Paimon's full compaction: {'; '.join(failed)}"
        passed = ", ".join(_reason(c) for c in self.checks)
        return f"no full compaction due: {passed or 'nothing measured'}"

    def recommendation(self) -> dict[str, Any] | None:
        """The table's `recommendation` (module docstring), None when no gate failed."""
        if not self.compaction_due:
            return None
        failed = [c for c in self.checks if not c.passed]
        return {
            "action": FULL_COMPACTION,
            "reasons": [_reason(c) for c in failed],
            "checks": [c.to_json() for c in failed],
            "how": (
                "Run Paimon's full compaction, e.g. in Spark: CALL sys.compact(table => "
                f"'{self.identifier}', compact_strategy => 'full'); dvtool leaves compaction "
                "to Paimon, whose writers own the LSM levels"
            ),
        }

    def to_json(self) -> dict[str, Any]:
        """`inspect --check --json`'s document, with the verdict and the gates left out."""
        document = inspect_document(self.summary.to_json(), None, None, None, self.checks)
        return {**document, "compaction_due": self.compaction_due, "unmeasured": self.unmeasured}


def inspect_health(
    table: PaimonTable, deleted_ratio: float, target_size: int | None, level0_files: int
) -> PaimonHealth:
    """Summarize the latest snapshot as `inspect` does and evaluate the gates (module
    docstring) with these limits; small files are those below `target_size`."""
    snapshot = table.select()
    if snapshot is None:
        schema, files = table.latest_schema(), TableFiles()
    else:
        read = read_snapshot_files(table, snapshot)
        schema, files = read.schema, with_cardinalities(table, read.files)
    summary = summarize(table, schema, snapshot, files)
    if target_size is not None and target_size != summary.small_file_size:
        small = sum(f.meta.file_size < target_size for f in files.data)
        summary = replace(summary, small_file_size=target_size, small_files=small)
    gates: list[tuple[str, float]] = []
    unmeasured = []
    if summary.row_counts_exact:
        gates.append(("max-deleted-ratio", deleted_ratio))
    else:
        unmeasured.append("max-deleted-ratio: the table's metadata gives no exact row counts")
    gates.append(("max-level0-files", level0_files))
    if summary.small_files is not None:
        gates.append(("max-small-files", summary.buckets["count"]))
    else:
        unmeasured.append("max-small-files: target-file-size is no size")
    checks = evaluate_paimon_checks(summary, gates)
    return PaimonHealth(summary, checks, unmeasured, identifier_of(table))


def identifier_of(table: PaimonTable) -> str:
    """`database.table` when the table lies in a `database.db` folder (as Paimon's
    filesystem catalog places it), else the folder's name."""
    parent = table.location.rstrip("/").rpartition("/")[0].rpartition("/")[2]
    return f"{parent.removesuffix('.db')}.{table.name}" if parent.endswith(".db") else table.name


def _reason(check: CheckOutcome) -> str:
    label = _LABELS.get(check.name, check.name)
    if check.name == "max-deleted-ratio":
        actual, limit = f"{check.actual:.1%}", f"{check.limit:.0%}"
    else:
        actual, limit = f"{int(check.actual):,}", f"{int(check.limit):,}"
    if check.name == "max-small-files":
        limit += ", one per bucket"
    return f"{label}: {actual} ({'at most' if check.passed else 'above'} {limit})"
