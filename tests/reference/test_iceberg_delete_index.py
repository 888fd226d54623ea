"""Iceberg's delete scope rules (dvtool/iceberg/delete_index.py) and the manifests read
through pyiceberg (dvtool/iceberg/snapshot_files.py) on tables Iceberg Spark wrote.

For every fixture table (v2 position deletes, v3 deletion vectors, a v2 table upgraded to
v3 holding both, equality deletes): each live data file read with pyarrow, minus the
positions of the deletes the index applies to it (DVs decoded by dvtool's Puffin codec,
Parquet position delete files) and minus the rows its equality deletes match, gives
exactly the rows the fixture's steps intend (tests/reference/iceberg_tables.py) - which
Iceberg Spark also reads (tests/reference/test_iceberg_tables.py). No delete file dangles
in these tables. In the upgraded table both kinds are live, and a file with a DV gets no
position deletes (Iceberg Java removed the file-scoped position deletes a DV replaced; the
precedence rule itself is tested in tests/iceberg/test_delete_index.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from dvtool.deletion_vectors.puffin import (
    FOOTER_TRAILER,
    decode_dv_blob,
    footer_length,
    parse_footer,
)
from dvtool.iceberg.delete_index import (
    AppliedDeletes,
    DeleteContent,
    DeleteIndex,
    dangling_deletes,
)
from dvtool.iceberg.snapshot_files import live_files, unpartitioned_specs
from tests.reference.iceberg_tables import SPECS

COLUMNS = ["id", "cat", "d", "v"]


def _dv_positions(path: str, offset: int) -> set[int]:
    data = Path(path).read_bytes()
    footer = parse_footer(data[-footer_length(data[-FOOTER_TRAILER:], len(data)) :])
    (meta,) = [b for b in footer.blobs if b.offset == offset]
    return set(decode_dv_blob(data[meta.offset : meta.offset + meta.length], meta))


def _deleted_positions(data_path: str, applied: AppliedDeletes) -> set[int]:
    if applied.deletion_vector is not None:
        dv = applied.deletion_vector
        assert dv.content_offset is not None
        return _dv_positions(dv.path, dv.content_offset)
    positions: set[int] = set()
    for delete in applied.position:
        rows = pq.read_table(delete.path, columns=["file_path", "pos"])
        mine = rows.filter(pc.equal(rows["file_path"], data_path))
        positions.update(mine["pos"].to_pylist())
    return positions


def _equality_kept(table: pa.Table, applied: AppliedDeletes, schema: Any) -> pa.Table:
    for delete in applied.equality:
        names = [schema.find_field(i).name for i in delete.equality_ids]
        keys = pq.read_table(delete.path, columns=names)
        for name in names:
            table = table.filter(pc.invert(pc.is_in(table[name], keys[name])))
    return table


def read_through_the_index(metadata_path: str) -> tuple[list[dict[str, Any]], Any]:
    table = StaticTable.from_metadata(metadata_path)
    metadata = table.metadata
    data, deletes = live_files(metadata, table.current_snapshot(), table.io)
    index = DeleteIndex(deletes, unpartitioned_specs(metadata))
    rows: list[dict[str, Any]] = []
    for entry in data:
        applied = index.for_data_file(entry)
        content = pq.read_table(entry.path, columns=COLUMNS)
        assert content.num_rows == entry.record_count
        keep = np.ones(content.num_rows, dtype=bool)
        keep[sorted(_deleted_positions(entry.path, applied))] = False
        content = _equality_kept(content.filter(pa.array(keep)), applied, metadata.schema())
        rows += content.to_pylist()
    assert dangling_deletes(deletes, index, data) == []
    return sorted(rows, key=lambda r: r["id"]), (data, deletes, index)


@pytest.mark.parametrize("name", [spec.name for spec in SPECS])
def test_the_index_gives_the_rows_iceberg_spark_wrote(
    name: str, iceberg_tables: dict[str, Any]
) -> None:
    entry = iceberg_tables[name]
    rows, _ = read_through_the_index(entry["metadata"])
    expected = sorted(entry["expected"], key=lambda r: r["id"])
    assert [{**r, "d": str(r["d"])} for r in rows] == [{**r, "d": str(r["d"])} for r in expected]


def test_the_upgraded_table_applies_dvs_and_position_deletes_apart(
    iceberg_tables: dict[str, Any],
) -> None:
    _, (data, deletes, index) = read_through_the_index(iceberg_tables["v2_to_v3"]["metadata"])
    kinds = {d.content for d in deletes}
    assert kinds == {DeleteContent.POSITION, DeleteContent.DELETION_VECTOR}
    with_dv = [d for d in data if index.for_data_file(d).deletion_vector is not None]
    assert with_dv and all(index.for_data_file(d).position == () for d in with_dv)
