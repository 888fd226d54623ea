"""Iceberg's delete scope rules (dvtool/iceberg/delete_index.py) against the spec's bullets.

The oracle `spec_applies` is the spec's "Scan Planning" list read literally, one data file
and one delete file at a time, with no index; hypothesis draws snapshots over a small space
(two partition specs, one unpartitioned; float partition values incl. NaN and -0.0; a few
paths and sequence numbers) so that every rule and their interplay are exercised.
"""

from __future__ import annotations

import math
import struct
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.errors import DeletionVectorError
from dvtool.iceberg.delete_index import (
    DataFileEntry,
    DeleteContent,
    DeleteFileEntry,
    DeleteIndex,
    dangling_deletes,
)

PARTITIONED, UNPARTITIONED = 0, 1
PATHS = ["s3://b/t/data/a.parquet", "s3://b/t/data/b.parquet", "s3://b/t/data/c.parquet"]
VALUES = [1.5, 0.0, -0.0, math.nan]


def _partition(spec_id: int, value: float) -> tuple[Any, ...]:
    return () if spec_id == UNPARTITIONED else (value,)


@st.composite
def data_files(draw: st.DrawFn) -> DataFileEntry:
    spec_id = draw(st.sampled_from([PARTITIONED, UNPARTITIONED]))
    return DataFileEntry(
        path=draw(st.sampled_from(PATHS)),
        spec_id=spec_id,
        partition=_partition(spec_id, draw(st.sampled_from(VALUES))),
        data_sequence_number=draw(st.integers(1, 4)),
        record_count=10,
    )


@st.composite
def delete_files(draw: st.DrawFn) -> DeleteFileEntry:
    content = draw(st.sampled_from(list(DeleteContent)))
    spec_id = draw(st.sampled_from([PARTITIONED, UNPARTITIONED]))
    referenced = draw(st.sampled_from(PATHS))
    if content is DeleteContent.POSITION:
        referenced = draw(st.one_of(st.none(), st.just(referenced)))
    elif content is DeleteContent.EQUALITY:
        referenced = None
    bounds = None
    if content is DeleteContent.POSITION and draw(st.booleans()):
        low, high = sorted(draw(st.lists(st.sampled_from(PATHS), min_size=2, max_size=2)))
        bounds = (low, high)
    return DeleteFileEntry(
        path="named by unique_deletes",
        content=content,
        spec_id=spec_id,
        partition=_partition(spec_id, draw(st.sampled_from(VALUES))),
        data_sequence_number=draw(st.integers(1, 4)),
        record_count=1,
        referenced_data_file=referenced,
        content_offset=4 if content is DeleteContent.DELETION_VECTOR else None,
        path_bounds=bounds,
    )


def _bits(value: Any) -> Any:
    if isinstance(value, float):
        return 0x7FF8000000000000 if math.isnan(value) else struct.pack("<d", value)
    return value


def same_partition(a: DataFileEntry, d: DeleteFileEntry) -> bool:
    """Spec note 3: spec id and values equal, floats by their (NaN-normalized) bits."""
    return a.spec_id == d.spec_id and [_bits(v) for v in a.partition] == [
        _bits(v) for v in d.partition
    ]


def dv_applies(data: DataFileEntry, d: DeleteFileEntry) -> bool:
    return (
        d.content is DeleteContent.DELETION_VECTOR
        and data.path == d.referenced_data_file
        and data.data_sequence_number <= d.data_sequence_number
        and same_partition(data, d)
    )


def spec_applies(data: DataFileEntry, deletes: list[DeleteFileEntry]) -> set[str]:
    """The delete files that must be applied to `data`, by the spec's bullets."""
    dvs = [d for d in deletes if dv_applies(data, d)]
    applied = {max(dvs, key=lambda d: d.data_sequence_number).path} if dvs else set()
    for d in deletes:
        if d.content is DeleteContent.POSITION and not dvs:
            bounds_ok = d.path_bounds is None or d.path_bounds[0] <= data.path <= d.path_bounds[1]
            if (
                (d.referenced_data_file is None or d.referenced_data_file == data.path)
                and data.data_sequence_number <= d.data_sequence_number
                and same_partition(data, d)
                and bounds_ok
            ):
                applied.add(d.path)
        if d.content is DeleteContent.EQUALITY and (
            data.data_sequence_number < d.data_sequence_number
            and (same_partition(data, d) or d.spec_id == UNPARTITIONED)
        ):
            applied.add(d.path)
    return applied


def _named(deletes: list[DeleteFileEntry]) -> list[DeleteFileEntry]:
    return [replace(d, path=f"delete-{i}") for i, d in enumerate(deletes)]


unique_deletes = st.lists(delete_files(), max_size=10).map(_named)


@settings(max_examples=400)
@given(st.lists(data_files(), max_size=6), unique_deletes)
def test_the_index_applies_what_the_spec_says(
    data: list[DataFileEntry], deletes: list[DeleteFileEntry]
) -> None:
    index = DeleteIndex(deletes, unpartitioned_specs={UNPARTITIONED})
    for entry in data:
        got = index.for_data_file(entry)
        assert {d.path for d in got.files()} == spec_applies(entry, deletes)
        assert all(d.content is DeleteContent.POSITION for d in got.position)
        assert all(d.content is DeleteContent.EQUALITY for d in got.equality)
    used = set().union(*(spec_applies(entry, deletes) for entry in data))
    assert {d.path for d in dangling_deletes(deletes, index, data)} == {
        d.path for d in deletes if d.path not in used
    }


def test_a_dv_hides_older_position_deletes_of_its_file_only() -> None:
    a = DataFileEntry(PATHS[0], PARTITIONED, (1.5,), 1, 10)
    b = DataFileEntry(PATHS[1], PARTITIONED, (1.5,), 1, 10)
    position = DeleteFileEntry("pos.parquet", DeleteContent.POSITION, PARTITIONED, (1.5,), 2, 3)
    dv = DeleteFileEntry(
        "dv.puffin",
        DeleteContent.DELETION_VECTOR,
        PARTITIONED,
        (1.5,),
        3,
        4,
        referenced_data_file=PATHS[0],
        content_offset=4,
    )
    index = DeleteIndex([position, dv], unpartitioned_specs={UNPARTITIONED})
    assert index.for_data_file(a).deletion_vector == dv
    assert index.for_data_file(a).position == ()
    assert index.for_data_file(b).position == (position,)


def test_a_dv_without_its_data_file_is_reported_as_damage() -> None:
    dv = DeleteFileEntry("dv.puffin", DeleteContent.DELETION_VECTOR, PARTITIONED, (1.5,), 1, 1)
    with pytest.raises(DeletionVectorError, match=r"no referenced_data_file.*DV file dv\.puffin"):
        DeleteIndex([dv], unpartitioned_specs=set())
