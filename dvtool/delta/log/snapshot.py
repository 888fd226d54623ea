"""A snapshot: the reconciled state of a table at one version, plus what is derived from it.

Live files are a pyarrow table in the canonical add layout with one extra column,
`numRecords` (from `stats`), so summaries over millions of files are column operations. It
is built on first use: a snapshot of JSON commits alone also offers the actions as parsed
(`state.live_files`), which small summaries read without importing pyarrow.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from dvtool.delta.protocol.actions import DomainMetadata, Metadata, Protocol, Txn
from dvtool.delta.protocol.features import reader_features, writer_features
from dvtool.delta.protocol.paths import CanonicalRoot
from dvtool.delta.protocol.replay import TableState
from dvtool.delta.protocol.schema import StructType, column_mapping_mode, parse_schema
from dvtool.errors import LogError

if TYPE_CHECKING:
    import pyarrow as pa

    from dvtool.delta.log.reader import CommitRecord
    from dvtool.delta.protocol.log_damage import DamagedCheckpoint, LastCheckpointProblem


@dataclass
class Snapshot:
    """The table at one version: protocol, metadata, live files and tombstones."""

    root: str
    state: TableState
    commit: CommitRecord
    checkpoint_version: int | None = None
    """The checkpoint the state was replayed from (None: replayed from version 0)."""
    damaged_checkpoints: tuple[DamagedCheckpoint, ...] = ()
    """Checkpoints from `checkpoint_version` on (at most `version`) that the reader passed
    over because they cannot be used, newest first: other readers fail on them."""
    last_checkpoint_problem: LastCheckpointProblem | None = None
    """What is wrong with `_last_checkpoint` (for the latest version only; None: nothing)."""

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def protocol(self) -> Protocol:
        return self.state.protocol

    @property
    def metadata(self) -> Metadata:
        return self.state.metadata

    @property
    def txns(self) -> dict[str, Txn]:
        return self.state.txns

    @property
    def domains(self) -> dict[str, DomainMetadata]:
        return self.state.domains

    @property
    def tombstones(self) -> pa.Table:
        return self.state.removes

    @cached_property
    def schema(self) -> StructType:
        return parse_schema(self.metadata.schema_string)

    @cached_property
    def column_mapping_mode(self) -> str:
        return column_mapping_mode(self.metadata.configuration)

    @cached_property
    def reader_features(self) -> frozenset[str]:
        return reader_features(self.protocol)

    @cached_property
    def writer_features(self) -> frozenset[str]:
        return writer_features(self.protocol)

    @cached_property
    def files(self) -> pa.Table:
        """Live add actions with a `numRecords` column (null where stats lack it)."""
        from dvtool.delta.protocol.stats import num_records

        adds = self.state.adds
        return adds.append_column("numRecords", num_records(adds.column("stats")))

    def require_paths_live_once(self, operation: str) -> None:
        """LogError if a data file is live twice, which no command may act on.

        Replay keys files on (path, DV uniqueId), so a writer that re-added a path with
        another DV without removing the old add leaves both live: its rows count twice and
        which DV applies is ambiguous. Valid writers never do this; dvtool refuses to guess.
        """
        import pyarrow.compute as pc

        from dvtool.delta.protocol.file_actions import canonical_path_column

        paths = canonical_path_column(self.files.column("path"), CanonicalRoot.parse(self.root))
        if pc.count_distinct(paths).as_py() == len(paths):
            return
        counts = pc.value_counts(paths)
        twice = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), _one(counts)))
        raise LogError(
            f"{operation} refused: data file {twice[0].as_py()!r} is live more than once in "
            f"version {self.version} (added again with another deletion vector without a "
            "remove of the earlier add)",
            hint="The log was written by a faulty writer; repair it (remove the stale add) "
            "before rewriting or deleting.",
        )

    @cached_property
    def dv_cardinality(self) -> pa.Array:
        """Rows each live file's DV deletes (0 for files without a DV)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from dvtool.arrays import arrow_values

        dv = self.files.column("deletionVector")
        return pc.fill_null(pc.struct_field(dv, "cardinality"), arrow_values.scalar(0, pa.int64()))


def _one(counts: pa.StructArray) -> pa.Scalar:
    """1, typed as the counts of `pc.value_counts`."""
    from dvtool.arrays import arrow_values

    return arrow_values.scalar(1, counts.type.field("counts").type)
