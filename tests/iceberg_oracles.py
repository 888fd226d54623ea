"""Independent readers of Iceberg tables: what the tests compare dvtool's Iceberg support with.

Each oracle reads a table's live rows (data files minus their position deletes, deletion
vectors and equality deletes) with a reader that shares no code with dvtool, nor with the
other oracles' read paths:

- `pyiceberg_rows`: pyiceberg 0.12's scan (applies v2 position deletes and v3 deletion
  vectors; refuses equality deletes: "PyIceberg does not yet support equality deletes").
- `duckdb_rows`: DuckDB's `iceberg_scan` (the iceberg extension, C++; applies position
  deletes, deletion vectors and equality deletes). DuckDB cannot download extensions here:
  the extension binaries come from the PyPI wheels `duckdb-extension-iceberg` and
  `duckdb-extension-avro`, whose version must be the installed duckdb's (the test extra pins
  all three), and are `LOAD`ed from the wheel's file (`extension_file`, `duckdb_connection`).
- `polars_rows`: polars' native Iceberg reader (`scan_iceberg(reader_override="native")`:
  polars plans the scan with its `polars-iceberg` planner and reads the Parquet files and
  applies the deletes itself). Without that planner polars plans with pyiceberg, which
  hands each data file every deletion vector of its partition, and the native reader then
  fails ("multiple deletion vectors associated with one data file"). With equality deletes
  polars falls back to pyiceberg's planning and refuses as pyiceberg does.

A table is named by its metadata JSON (a local path, or `s3://...` with pyiceberg's `s3.*`
FileIO properties in `io`; DuckDB then loads its httpfs extension, from its wheel too) or
given as a pyiceberg `Table` (from a catalog); `snapshot_id` reads an older snapshot. Rows
come back as dicts sorted by `key` (default `id`), with the columns of the table's current
schema (v3's row-lineage fields are metadata columns, not in the schema). An oracle that
cannot read a table's shape raises `OracleRefused` naming the oracle and its own message
(`KNOWN_REFUSALS`), so a test can assert the refusal instead of skipping.

Counts: `counts` from the table's manifests (pyiceberg's `inspect.files()`: data files and
`physical_rows`, the sum of their record counts; delete files and deleted records by kind)
and `live_row_count` (DuckDB's `count(*)`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.table import StaticTable, Table

Row = dict[str, Any]
Source = str | Path | Table
ORACLES = ("pyiceberg", "duckdb", "polars")
# The refusals known today, by oracle: (exception type, message fragment).
EQUALITY_REFUSAL = "PyIceberg does not yet support equality deletes"
KNOWN_REFUSALS: dict[str, tuple[type[BaseException], str]] = {
    "pyiceberg": (ValueError, EQUALITY_REFUSAL),
    # polars plans the scan with pyiceberg when a table has equality deletes.
    "polars": (ValueError, EQUALITY_REFUSAL),
}
# Further refusals: polars' native reader reads only position delete files limited to one
# data file (file-scoped, as Iceberg Spark writes them by default), once it has fallen back
# to pyiceberg's planning; partition-scoped ones (Flink's, `write.delete.granularity =
# partition`, a rewrite combining a partition's deletes) are valid Iceberg it refuses.
MORE_REFUSALS: dict[str, list[tuple[type[BaseException], str]]] = {
    "polars": [(Exception, "position delete file not limited to one data file")],
}


class OracleRefused(Exception):
    """An oracle that cannot read a table's shape, with its own reason."""

    def __init__(self, oracle: str, reason: str) -> None:
        super().__init__(f"{oracle} refuses this table: {reason}")
        self.oracle = oracle
        self.reason = reason


def load_table(source: Source, io: dict[str, str] | None = None) -> Table:
    """A pyiceberg table: `source` itself, or the static table of a metadata JSON."""
    if isinstance(source, Table):
        return source
    return StaticTable.from_metadata(str(source), properties=io or {})


def metadata_location(source: Source) -> str:
    return source.metadata_location if isinstance(source, Table) else str(source)


def schema_columns(table: Table) -> list[str]:
    return [f.name for f in table.schema().fields]


def _refusal(oracle: str, exc: BaseException) -> OracleRefused | None:
    known = [KNOWN_REFUSALS[oracle]] if oracle in KNOWN_REFUSALS else []
    for kind, fragment in known + MORE_REFUSALS.get(oracle, []):
        if isinstance(exc, kind) and fragment.lower() in str(exc).lower():
            return OracleRefused(oracle, str(exc))
    return None


def _guarded(oracle: str, read: Callable[[], pa.Table]) -> pa.Table:
    """`read()`, with a known refusal turned into `OracleRefused`."""
    try:
        return read()
    except Exception as exc:
        refused = _refusal(oracle, exc)
        if refused is not None:
            raise refused from exc
        raise


def pyiceberg_arrow(table: Table, snapshot_id: int | None = None) -> pa.Table:
    return _guarded("pyiceberg", lambda: table.scan(snapshot_id=snapshot_id).to_arrow())


def extension_file(name: str) -> Path:
    """The `NAME.duckdb_extension` binary shipped in the PyPI wheel `duckdb-extension-NAME`."""
    import duckdb

    module = importlib.import_module(f"duckdb_extension_{name}")
    version = f"v{duckdb.__version__}"
    path = Path(str(module.__file__)).parent / "extensions" / version / f"{name}.duckdb_extension"
    if not path.is_file():
        raise RuntimeError(
            f"{path} is missing: duckdb-extension-{name} must match duckdb {duckdb.__version__}"
            " (the test extra pins them together)"
        )
    return path


@functools.cache
def _extension_paths() -> tuple[str, ...]:
    return tuple(str(extension_file(name)) for name in ("avro", "iceberg"))


def duckdb_connection() -> Any:
    """An in-memory DuckDB with the avro and iceberg extensions loaded from their wheels
    (no autoinstall: DuckDB's extension repository is not reachable here)."""
    import duckdb

    config: dict[str, str | bool | int | float | list[str]] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    con = duckdb.connect(config=config)
    for path in _extension_paths():
        con.execute(f"LOAD '{path}'")
    return con


@functools.cache
def _shared_connection() -> Any:
    """One connection per process (loading the extensions takes a moment); each query
    runs on a cursor of its own."""
    return duckdb_connection()


def s3_secret(io: dict[str, str]) -> str:
    """DuckDB's S3 secret for pyiceberg's `s3.*` FileIO properties (path-style requests
    to an emulator's http endpoint, as tests/s3_server.py runs it)."""
    endpoint = io["s3.endpoint"]
    host = endpoint.split("://", 1)[-1].rstrip("/")
    options = {
        "KEY_ID": io["s3.access-key-id"],
        "SECRET": io["s3.secret-access-key"],
        "REGION": io.get("s3.region", "us-east-1"),
        "ENDPOINT": host,
        "URL_STYLE": "path",
    }
    settings = ", ".join(f"{k} '{v}'" for k, v in options.items())
    use_ssl = "false" if endpoint.startswith("http://") else "true"
    return f"CREATE OR REPLACE SECRET s3 (TYPE s3, {settings}, USE_SSL {use_ssl})"


def duckdb_arrow(
    location: str, snapshot_id: int | None = None, io: dict[str, str] | None = None
) -> pa.Table:
    """`iceberg_scan` of a metadata JSON: a local path, or `s3://` with pyiceberg's `s3.*`
    properties in `io` (then the httpfs extension, from its wheel too, reads it)."""
    snapshot = f", snapshot_from_id => {int(snapshot_id)}" if snapshot_id is not None else ""
    quoted = location.replace("'", "''")
    with _shared_connection().cursor() as con:
        if location.startswith("s3://"):
            con.execute(f"LOAD '{extension_file('httpfs')}'")
            con.execute(s3_secret(io or {}))
        reader = con.sql(f"SELECT * FROM iceberg_scan('{quoted}'{snapshot})")
        return _guarded("duckdb", reader.to_arrow_table)


def polars_arrow(table: Table, snapshot_id: int | None = None) -> pa.Table:
    import polars as pl

    def read() -> pa.Table:
        frame = pl.scan_iceberg(table, snapshot_id=snapshot_id, reader_override="native")
        return frame.collect().to_arrow()

    return _guarded("polars", read)


def _plain_strings(data: pa.Table) -> pa.Table:
    """polars hands strings out as `large_string`: cast them to `string`, so that tables
    from different readers compare equal."""
    fields = [
        pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
        for f in data.schema
    ]
    return data.cast(pa.schema(fields))


def oracle_arrow(
    oracle: str,
    source: Source,
    *,
    snapshot_id: int | None = None,
    key: str = "id",
    io: dict[str, str] | None = None,
) -> pa.Table:
    """The live rows as `oracle` (one of ORACLES) reads them: the current schema's columns,
    sorted by `key`; strings as `string` whatever the reader."""
    table = load_table(source, io)
    if oracle == "pyiceberg":
        data = pyiceberg_arrow(table, snapshot_id)
    elif oracle == "duckdb":
        location = metadata_location(source)
        data = duckdb_arrow(location, snapshot_id, io or dict(table.io.properties))
    elif oracle == "polars":
        data = polars_arrow(table, snapshot_id)
    else:
        raise ValueError(f"unknown oracle {oracle!r}: one of {ORACLES}")
    return _plain_strings(data.select(schema_columns(table))).sort_by(key)


def oracle_rows(oracle: str, source: Source, **options: Any) -> list[Row]:
    """`oracle_arrow` as Python rows (dicts)."""
    rows: list[Row] = oracle_arrow(oracle, source, **options).to_pylist()
    return rows


def pyiceberg_rows(source: Source, **options: Any) -> list[Row]:
    """The live rows as pyiceberg's scan reads them."""
    return oracle_rows("pyiceberg", source, **options)


def duckdb_rows(source: Source, **options: Any) -> list[Row]:
    """The live rows as DuckDB's iceberg extension reads them."""
    return oracle_rows("duckdb", source, **options)


def polars_rows(source: Source, **options: Any) -> list[Row]:
    """The live rows as polars' native Iceberg reader reads them."""
    return oracle_rows("polars", source, **options)


@dataclass(frozen=True)
class Counts:
    """Row and file counts of a table's current snapshot, from its manifests."""

    data_files: int
    physical_rows: int
    position_delete_files: int
    deletion_vectors: int
    equality_delete_files: int
    position_deletes: int
    equality_deletes: int


def counts(source: Source, io: dict[str, str] | None = None) -> Counts:
    """The live files' counts (pyiceberg's `inspect.files()`: the current snapshot's
    manifests). `position_deletes` adds Parquet position deletes and DV cardinalities."""
    files = (
        load_table(source, io).inspect.files().select(["content", "file_format", "record_count"])
    )
    rows = files.to_pylist()

    def of(content: int, puffin: bool | None = None) -> list[Row]:
        return [
            r
            for r in rows
            if r["content"] == content
            and (puffin is None or (r["file_format"] == "PUFFIN") == puffin)
        ]

    return Counts(
        data_files=len(of(0)),
        physical_rows=sum(r["record_count"] for r in of(0)),
        position_delete_files=len(of(1, puffin=False)),
        deletion_vectors=len(of(1, puffin=True)),
        equality_delete_files=len(of(2)),
        position_deletes=sum(r["record_count"] for r in of(1)),
        equality_deletes=sum(r["record_count"] for r in of(2)),
    )


def live_row_count(source: Source) -> int:
    """The live rows by DuckDB's `count(*)` (the only oracle that reads every delete kind)."""
    quoted = metadata_location(source).replace("'", "''")
    with _shared_connection().cursor() as con:
        answer = con.sql(f"SELECT count(*) FROM iceberg_scan('{quoted}')").fetchone()
    assert answer is not None
    return int(answer[0])
