"""`dvtool inspect` on an Iceberg table on S3 (the moto server of tests/s3_server.py): by
path with dvtool's storage options (read through dvtool's storage layer), and through a
SQL catalog with the same options in object_store's spelling, which become pyiceberg's
FileIO properties. The oracle is pyiceberg's own reading of the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from tests.cli_helpers import all_output, run
from tests.s3_server import KEY_ID, REGION, SECRET, S3Server

PREFIX = "iceberg-inspect"


def _json(*args: str | Path) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == 0, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.fixture(scope="module")
def on_s3(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, Path]:
    """A v2 table pyiceberg writes to S3 in two appends; its catalog's sqlite folder."""
    folder = tmp_path_factory.mktemp("s3-catalog")
    catalog = SqlCatalog(
        "s3fx",
        uri=f"sqlite:///{folder}/catalog.db",
        warehouse=s3_server.uri(PREFIX),
        **{
            "s3.endpoint": s3_server.endpoint,
            "s3.access-key-id": KEY_ID,
            "s3.secret-access-key": SECRET,
            "s3.region": REGION,
        },
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
    for lo in (0, 100):
        table.append(pa.table({"id": pa.array(range(lo, lo + 100), pa.int64())}))
    return catalog.load_table("db.t"), folder


def _oracle(table: Table) -> dict[str, Any]:
    tasks = list(table.scan().plan_files())
    return {
        "num_files": len(tasks),
        "physical_rows": sum(t.file.record_count for t in tasks),
        "logical_rows": table.scan().to_arrow().num_rows,
        "size_bytes": sum(t.file.file_size_in_bytes for t in tasks),
    }


def test_by_path_with_storage_options(on_s3: tuple[Table, Path], s3_server: S3Server) -> None:
    table, _ = on_s3
    doc = _json("inspect", table.location(), *s3_server.cli_options())
    expected = _oracle(table)
    assert {k: doc[k] for k in expected} == expected
    snapshot = table.current_snapshot()
    assert snapshot is not None and doc["snapshot_id"] == snapshot.snapshot_id
    assert doc["metadata_location"] == table.metadata_location


def test_through_a_catalog_with_object_store_keys(
    on_s3: tuple[Table, Path], s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    table, folder = on_s3
    monkeypatch.setenv("PYICEBERG_CATALOG__S3FX__URI", f"sqlite:///{folder}/catalog.db")
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    options = {k: v for k, v in s3_server.delta_options().items() if "UNSAFE" not in k}
    args = [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]
    doc = _json("inspect", "--catalog", "s3fx", "db.t", *args)
    expected = _oracle(table)
    assert {k: doc[k] for k in expected} == expected and doc["name"] == "db.t"
