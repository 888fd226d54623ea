"""Checking that rewritten rows belong to the partition their new file is committed in.

Readers skip a data file by its partition: a row written into a file of another partition
is lost to every query that filters on the partition, so a rewrite never writes one. The
rows of a source in the new file's own spec and partition belong there already (a purge,
a copy-on-write delete, a compaction within one partition); a source of another spec or
partition (a compaction across a spec change) has its rows' partition values computed
under the new file's spec and compared with the file's (pyiceberg's transforms, on the
source's distinct values - only its least and greatest for the order-preserving transforms:
identity, truncate, year, month, day, hour). The values are gathered where the rows are
written (`Probe`, `dvtool.iceberg.rewrite_executor`: pyarrow only) and checked on the driver,
before the new file is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.transforms import (
    BucketTransform,
    IdentityTransform,
    TimeTransform,
    TruncateTransform,
    UnknownTransform,
    VoidTransform,
)
from pyiceberg.types import (
    DateType,
    DoubleType,
    FloatType,
    IcebergType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)

from dvtool.errors import UnsupportedFeatureError, WriteRefusedError
from dvtool.iceberg.delete_index import partition_key
from dvtool.iceberg.rewrite_executor import Probe, probe_values

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionField
    from pyiceberg.schema import Accessor, Schema
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import Record

# Iceberg's internal representation of temporal values (what transforms take and manifests
# hold): days, microseconds or nanoseconds as integers.
_AS_INTEGERS: dict[type[IcebergType], pa.DataType] = {DateType: pa.int32()}
_AS_INTEGERS |= dict.fromkeys(
    (TimeType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType),
    pa.int64(),
)


@dataclass(frozen=True)
class _FieldCheck:
    field: PartitionField
    path: tuple[int, ...]
    source_type: IcebergType
    transform: Callable[[Any], Any]
    expected: Any


class PartitionCheck:
    """The partition fields of the new file's spec, each with its source column and the
    value the file claims; `check(batch, location)` refuses rows of another partition."""

    def __init__(
        self, metadata: TableMetadata, target: Schema, spec_id: int, partition: Record
    ) -> None:
        self._spec_id = spec_id
        self._partition = partition
        self._checks: list[_FieldCheck] = []
        for index, field in enumerate(metadata.specs()[spec_id].fields):
            if isinstance(field.transform, VoidTransform):
                continue
            if isinstance(field.transform, UnknownTransform):
                raise UnsupportedFeatureError(
                    f"partition field {field.name} has a transform dvtool does not know "
                    f"({field.transform}): Iceberg writers must not write to such a spec"
                )
            try:
                accessor = target.accessor_for_field(field.source_id)
                source_type = target.find_type(field.source_id)
            except ValueError:
                raise WriteRefusedError(
                    f"the source column of partition field {field.name} is not in the "
                    "table's schema: dvtool cannot place rows in its partitions"
                ) from None
            function = field.transform.transform(source_type)
            path = _positions(accessor)
            self._checks.append(_FieldCheck(field, path, source_type, function, partition[index]))

    def applies_to(self, spec_id: int, partition: Record) -> bool:
        """Whether rows of a file of `spec_id` and `partition` need checking: not when
        they are the new file's own."""
        same = spec_id == self._spec_id and partition_key(spec_id, _values(partition)) == (
            partition_key(self._spec_id, _values(self._partition))
        )
        return not same

    def probes(self) -> tuple[Probe, ...]:
        """What the rewrite reports of a source's rows for `check_values`: per partition
        field, its source column and how its values decide (module docstring)."""
        return tuple(
            Probe(c.path, _AS_INTEGERS.get(type(c.source_type)), _ordered(c)) for c in self._checks
        )

    def check(self, batch: pa.RecordBatch, location: str) -> None:
        """Refuse `batch` (rows of the data file at `location`, in the new file's columns)
        if a row's partition is not the new file's."""
        self.check_values([probe_values(batch, p) for p in self.probes()], location)

    def check_values(self, values: Sequence[Sequence[Any]], location: str) -> None:
        """Refuse the rows of the data file at `location` whose probed values (`probes`,
        in order) are `values` if a row's partition is not the new file's."""
        for check, probed in zip(self._checks, values, strict=True):
            for value in probed:
                got = None if value is None else check.transform(value)
                if partition_key(0, [got]) != partition_key(0, [check.expected]):
                    raise WriteRefusedError(
                        f"a row of {location} belongs to {check.field.name}={got!r}, not to "
                        f"the partition of the new file ({check.field.name}="
                        f"{check.expected!r}, spec {self._spec_id})",
                        hint="dvtool writes a row only into a file of its own partition.",
                    )


def _values(partition: Record) -> Sequence[Any]:
    return [partition[i] for i in range(len(partition))]


def _positions(accessor: Accessor) -> tuple[int, ...]:
    positions = []
    current: Accessor | None = accessor
    while current is not None:
        positions.append(current.position)
        current = current.inner
    return tuple(positions)


def _ordered(check: _FieldCheck) -> bool:
    """Whether the least and the greatest values decide the partition of all: an
    order-preserving transform of a column that is not a float."""
    transform = check.field.transform
    floats = isinstance(check.source_type, (FloatType, DoubleType))
    ordered = isinstance(transform, (IdentityTransform, TruncateTransform, TimeTransform))
    return ordered and not floats and not isinstance(transform, BucketTransform)
