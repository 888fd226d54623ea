"""Rows of Paimon data files from their own metadata (`dvtool.paimon.data_file_rows`).

Files are written by independent writers: Parquet and ORC by pyarrow, Avro by pyiceberg's
`AvroOutputFile` in several blocks (compressed and not); the counts are the rows the
writers were given, and for Avro also what pyiceberg's reader decodes. A truncated or
damaged Avro file fails with the block that does not end with the sync marker.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from dvtool.paimon.avro_files import decode_avro
from dvtool.paimon.data_file_rows import avro_record_count, data_file_rows
from dvtool.storage.table_storage import Storage

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "v", StringType(), required=False),
)
BLOCKS = (3, 1, 5, 2)


def _avro(path: Path, codec: str) -> Path:
    """An Avro file of BLOCKS records per block, with `codec`."""
    output = PyArrowFileIO().new_output(str(path))
    with AvroOutputFile[Record](output, SCHEMA, "row", metadata={"avro.codec": codec}) as writer:
        n = 0
        for size in BLOCKS:
            writer.write_block([Record(n + i, f"value {n + i}" * 3) for i in range(size)])
            n += size
    return path


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_avro_blocks_are_counted_without_decoding(tmp_path: Path, codec: str) -> None:
    path = _avro(tmp_path / "data-0.avro", codec)
    with pa.OSFile(str(path)) as stream:
        assert avro_record_count(stream) == sum(BLOCKS)
    assert len(decode_avro(path.read_bytes())) == sum(BLOCKS)


def test_damaged_avro_files_fail(tmp_path: Path) -> None:
    path = _avro(tmp_path / "data-0.avro", "null")
    data = path.read_bytes()
    cut = tmp_path / "cut.avro"
    cut.write_bytes(data[:-20])
    with pa.OSFile(str(cut)) as stream, pytest.raises(ValueError, match=r"block 3 .*sync marker"):
        avro_record_count(stream)
    flipped = bytearray(data)
    flipped[-1] ^= 0xFF
    cut.write_bytes(bytes(flipped))
    with pa.OSFile(str(cut)) as stream, pytest.raises(ValueError, match="truncated or damaged"):
        avro_record_count(stream)
    cut.write_bytes(b"PAR1" + data[4:])
    with pa.OSFile(str(cut)) as stream, pytest.raises(ValueError, match="not an Avro file"):
        avro_record_count(stream)


def test_each_format_counts_its_rows(tmp_path: Path) -> None:
    table = pa.table({"id": list(range(17)), "v": [str(i) for i in range(17)]})
    pq.write_table(table, tmp_path / "data-0.parquet")
    orc.write_table(table, str(tmp_path / "data-0.orc"))
    _avro(tmp_path / "data-0.avro", "deflate")
    (tmp_path / "data-0.csv").write_text("id\n1\n")
    storage = Storage.for_table(str(tmp_path))

    def rows(name: str) -> int | None:
        return data_file_rows(storage, storage.join(name), name)

    assert rows("data-0.parquet") == rows("data-0.orc") == table.num_rows
    assert rows("data-0.avro") == sum(BLOCKS)
    assert rows("data-0.csv") is None
