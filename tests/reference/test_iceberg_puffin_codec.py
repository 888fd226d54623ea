"""dvtool's Puffin codec (dvtool/deletion_vectors/puffin.py) reads the deletion vectors Iceberg's
Spark runtime wrote: every live DV's Puffin footer parses, and the blob at the DV's content
offset decodes to the positions the spec reader of tests/reference/dv_files.py finds, as
many as Iceberg's `record_count`, for the data file the footer names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dvtool.deletion_vectors.puffin import (
    FOOTER_TRAILER,
    REFERENCED_DATA_FILE,
    decode_dv_blob,
    footer_length,
    parse_footer,
)
from tests.engines.jvm_engines import JvmSession
from tests.reference.dv_files import iceberg_dv_blob

LIVE_DVS = (
    "SELECT file_path, referenced_data_file, content_offset, content_size_in_bytes,"
    " record_count FROM {}.delete_files WHERE file_format = 'PUFFIN'"
)


@pytest.mark.parametrize("name", ["v3_flat", "v3_part", "v2_to_v3"])
def test_dvtool_decodes_iceberg_spark_deletion_vectors(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    dvs = iceberg_spark.rows(LIVE_DVS.format(iceberg_tables[name]["table"]))
    assert dvs
    for dv in dvs:
        data = Path(dv["file_path"]).read_bytes()
        footer = parse_footer(data[-footer_length(data[-FOOTER_TRAILER:], len(data)) :])
        (meta,) = [b for b in footer.blobs if b.offset == dv["content_offset"]]
        assert meta.length == dv["content_size_in_bytes"]
        assert meta.properties[REFERENCED_DATA_FILE] == dv["referenced_data_file"]
        blob = data[meta.offset : meta.offset + meta.length]
        rows = decode_dv_blob(blob, meta)
        assert len(rows) == dv["record_count"]
        assert sorted(rows) == sorted(iceberg_dv_blob(blob).positions)
