"""Checking that rewritten rows belong to the partition their new file is committed in.

Readers skip a data file by its partition: a row written into a file of another partition
is lost to every query that filters on the partition, so a rewrite never writes one. The
rows of a source in the new file's own spec and partition belong there already (a purge,
a copy-on-write delete, a compaction within one partition); a source of another spec or
partition (a compaction across a spec change) has its rows' partition values computed
under the new file's spec and compared with the file's (pyiceberg's transforms, on each
batch's distinct values - only its least and greatest for the order-preserving transforms:
identity, truncate, year, month, day, hour).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
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

    def check(self, batch: pa.RecordBatch, location: str) -> None:
        """Refuse `batch` (rows of the data file at `location`, in the new file's columns)
        if a row's partition is not the new file's."""
        for check in self._checks:
            column = _column(batch, check.path)
            for value in _distinct(column, check):
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


def _column(batch: pa.RecordBatch, path: tuple[int, ...]) -> pa.Array:
    """The column at `path` (struct positions), null where a parent struct is null."""
    column = batch.column(path[0])
    return pc.struct_field(column, list(path[1:])) if len(path) > 1 else column


def _distinct(column: pa.Array, check: _FieldCheck) -> list[Any]:
    """The values of `column` whose partition decides the batch's: all distinct ones, or
    for an order-preserving transform the least and the greatest (and null if any)."""
    integers = _AS_INTEGERS.get(type(check.source_type))
    if integers is not None:
        column = column.cast(integers)
    transform = check.field.transform
    floats = isinstance(check.source_type, (FloatType, DoubleType))
    ordered = isinstance(transform, (IdentityTransform, TruncateTransform, TimeTransform))
    if ordered and not floats and not isinstance(transform, BucketTransform):
        try:
            bounds = pc.min_max(column).as_py()
        except pa.ArrowNotImplementedError:  # no order for the type (uuid): every value
            return list(pc.unique(column).to_pylist())
        values = [v for v in (bounds["min"], bounds["max"]) if v is not None]
        return values + ([None] if column.null_count else [])
    return list(pc.unique(column).to_pylist())
