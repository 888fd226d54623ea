"""What bench_iceberg_delete.py and bench_iceberg_purge.py share: the wide Iceberg table in a
SQL catalog on SQLite, fresh copies of it per run, the check of a run's outcome, timed child
processes, and Iceberg Spark as a peer.

The table (`build_v2`): --files data files of 20 columns (id int64 sequential; bucket int32
uniform in 0..999, the column the predicates use, so that every file holds matching rows;
18 more of the usual types: int64, int32, double, float, strings short and long, date,
timestamptz, boolean, decimal(12,2)), random with a fixed seed, written by pyiceberg (one
append per file: zstd, pyiceberg's defaults) into a `SqlCatalog` named `bench` on
ROOT/catalog.db, warehouse ROOT/warehouse, format version 2, `write.delete.mode`
merge-on-read. pyiceberg 0.12 cannot write v3 metadata ("Writing V3 is not yet supported"),
so the v3 table (`build_v3`) is written by Iceberg Spark (JdbcCatalog on the same SQLite
file): created empty, then one `INSERT INTO ... SELECT` of each v2 file's id range (one
data file each).

Fresh copies (`register_copy`): every Iceberg file is immutable and uniquely named, so a run
works on a new catalog entry `db.NAME` registered at the base's metadata file
(`register_table`): what it writes (metadata, manifests, delete files, data files) is new
files beside the base's, which no other run reads; the base's own files are never changed.
No data is copied, so each run reads the same (page-cached) data files as every other run
and every peer.

`expected(...)` and `check(...)`: the live rows after a delete of `where`, counted and
summed (id) from the generator's values, against what pyiceberg (an independent reader: it
applies v2 position deletes and v3 deletion vectors) reads from the run's table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CATALOG = "bench"
NAMESPACE = "db"
SEED = 20240626
BUCKETS = 1000
PREDICATES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # name -> (Spark SQL and pyiceberg expression, the same test on a numpy array of bucket)
    "selective": ("bucket = 7", lambda bucket: bucket == 7),
    "broad": ("bucket < 100", lambda bucket: bucket < 100),
}
TABLE_PROPERTIES = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


@dataclass(frozen=True)
class BenchCatalog:
    """The SQL catalog `bench` on ROOT/catalog.db (pyiceberg SqlCatalog, Iceberg JdbcCatalog)."""

    root: Path

    @property
    def database(self) -> Path:
        return self.root / "catalog.db"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    def properties(self) -> dict[str, str]:
        """pyiceberg's `load_catalog(CATALOG, **properties)`."""
        return {
            "type": "sql",
            "uri": f"sqlite:///{self.database}",
            "warehouse": f"file://{self.warehouse}",
        }

    def env(self) -> dict[str, str]:
        """This environment with PYICEBERG_CATALOG__BENCH__* (`--catalog bench` loads it) and
        bytecode caches on, under .bench/pycache (as bench_purge.py runs its children: as an
        installed package; with PYTHONDONTWRITEBYTECODE set every process compiles dvtool)."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(ROOT / ".bench" / "pycache")
        for key, value in self.properties().items():
            env[f"PYICEBERG_CATALOG__{CATALOG.upper()}__{key.upper()}"] = value
        return env

    def spark_settings(self) -> dict[str, str]:
        """`spark.sql.catalog.bench.*`: Iceberg's JdbcCatalog on the same SQLite file."""
        return {
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{self.database}",
            "warehouse": str(self.warehouse),
        }

    def load(self) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog(CATALOG, **self.properties())


def generate(index: int, rows: int) -> Any:
    """Data file `index` of the table: 20 columns, ids continuing across files."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(SEED + index)
    first = index * rows
    ids = np.arange(first, first + rows, dtype=np.int64)
    words = np.array([f"word{i:03d}" for i in range(200)])
    categories = np.array(["AIR", "MAIL", "RAIL", "SHIP", "TRUCK", "FOB", "REG AIR"])
    days = rng.integers(8_000, 20_000, rows).astype("int32")
    micros = rng.integers(1_500_000_000_000_000, 1_800_000_000_000_000, rows)
    cents = rng.integers(0, 10_000_000, rows)
    comment = np.char.add(np.char.add(rng.choice(words, rows), " "), rng.choice(words, rows))
    columns = {
        "id": pa.array(ids),
        "bucket": pa.array(rng.integers(0, BUCKETS, rows).astype("int32")),
        "order_key": pa.array(rng.integers(0, 6_000_000_000, rows)),
        "part_key": pa.array(rng.integers(0, 200_000, rows)),
        "supplier_key": pa.array(rng.integers(0, 10_000, rows).astype("int32")),
        "line_number": pa.array(rng.integers(1, 8, rows).astype("int32")),
        "quantity": pa.array(rng.integers(1, 51, rows).astype("float64")),
        "price": pa.array(rng.random(rows) * 100_000),
        "discount": pa.array(rng.random(rows).astype("float32")),
        "tax": _decimal(cents % 900),
        "amount": _decimal(cents),
        "return_flag": pa.array(rng.choice(np.array(["A", "N", "R"]), rows)),
        "status": pa.array(rng.choice(np.array(["F", "O"]), rows)),
        "ship_date": pa.array(days, pa.date32()),
        "commit_date": pa.array(days + rng.integers(0, 90, rows).astype("int32"), pa.date32()),
        "updated_at": pa.array(micros, pa.timestamp("us", tz="UTC")),
        "ship_mode": pa.array(rng.choice(categories, rows)),
        "priority": pa.array(rng.integers(0, 5, rows).astype("int32")),
        "is_returned": pa.array(rng.random(rows) < 0.25),
        "comment": pa.array(comment),
    }
    return pa.table(columns)


def _decimal(unscaled: Any) -> Any:
    """A decimal(12, 2) array of non-negative unscaled int64 values (cents), built from its
    16-byte little-endian buffer (a cast from int64 would scale the values)."""
    import numpy as np
    import pyarrow as pa

    words = np.zeros((len(unscaled), 2), dtype="<i8")
    words[:, 0] = unscaled
    return pa.Array.from_buffers(
        pa.decimal128(12, 2), len(unscaled), [None, pa.py_buffer(words.tobytes())]
    )


@dataclass
class Base:
    """The base tables built once per benchmark run: their identifiers and metadata files,
    and per predicate the expected live rows (count, sum of id) after deleting it."""

    catalog: BenchCatalog
    files: int
    rows_per_file: int
    metadata: dict[int, str] = field(default_factory=dict)  # format version -> metadata file
    expected: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return self.files * self.rows_per_file

    def identifier(self, version: int) -> str:
        return f"{NAMESPACE}.wide_v{version}"


def build_v2(root: Path, files: int, rows_per_file: int) -> Base:
    """The v2 base table, written by pyiceberg (module docstring), and the expected rows."""

    catalog = BenchCatalog(root)
    root.mkdir(parents=True, exist_ok=True)
    loaded = catalog.load()
    loaded.create_namespace(NAMESPACE)
    base = Base(catalog, files, rows_per_file)
    table = None
    kept = {name: [0, 0] for name in PREDICATES}
    for index in range(files):
        data = generate(index, rows_per_file)
        if table is None:
            properties = {"format-version": "2", **TABLE_PROPERTIES}
            table = loaded.create_table(base.identifier(2), data.schema, properties=properties)
        table.append(data)
        ids = data.column("id").to_numpy()
        bucket = data.column("bucket").to_numpy()
        for name, (_, matches) in PREDICATES.items():
            keep = ~matches(bucket)
            kept[name][0] += int(keep.sum())
            kept[name][1] += int(ids[keep].sum())
    assert table is not None
    base.metadata[2] = str(loaded.load_table(base.identifier(2)).metadata_location)
    base.expected = {name: (count, total) for name, (count, total) in kept.items()}
    return base


def configure(session: Any, catalog: BenchCatalog) -> None:
    """The catalog `bench` in a running Iceberg Spark session (loaded on first use)."""
    conf = {f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog"}
    conf.update(
        {f"spark.sql.catalog.{CATALOG}.{k}": v for k, v in catalog.spark_settings().items()}
    )
    session.python("for k, v in args['conf'].items():\n    spark.conf.set(k, v)", conf=conf)


def build_v3(session: Any, base: Base) -> None:
    """The v3 table: the same rows, written by Iceberg Spark one v2 file's ids at a time."""
    configure(session, base.catalog)
    v2, v3 = f"{CATALOG}.{base.identifier(2)}", f"{CATALOG}.{base.identifier(3)}"
    properties = {"format-version": "3", **TABLE_PROPERTIES}
    tbl = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
    session.sql(
        f"CREATE TABLE {v3} USING iceberg TBLPROPERTIES ({tbl}) AS SELECT * FROM {v2} LIMIT 0"
    )
    for index in range(base.files):
        lo, hi = index * base.rows_per_file, (index + 1) * base.rows_per_file
        session.sql(f"INSERT INTO {v3} SELECT * FROM {v2} WHERE id >= {lo} AND id < {hi}")
    base.metadata[3] = str(base.catalog.load().load_table(base.identifier(3)).metadata_location)


def register_copy(base: Base, version: int, name: str) -> str:
    """A fresh copy of the v`version` base table: `db.NAME` registered at its metadata."""
    identifier = f"{NAMESPACE}.{name}"
    base.catalog.load().register_table(identifier, base.metadata[version])
    return identifier


def live(catalog: BenchCatalog, identifier: str) -> tuple[int, int, int]:
    """pyiceberg's read of the table's id and bucket: its live rows, their id sum, and how
    many of them have bucket < 100."""
    import pyarrow.compute as pc

    table = catalog.load().load_table(identifier)
    data = table.scan(selected_fields=("id", "bucket")).to_arrow()
    bucket = data.column("bucket")
    matching = pc.sum(pc.less(bucket, 100)).as_py() or 0
    return data.num_rows, int(pc.sum(data.column("id")).as_py() or 0), matching


def check(base: Base, predicate: str, identifier: str, what: str) -> list[str]:
    """What is wrong with `identifier` after a delete of `predicate` (empty: nothing): its
    live rows' count and id sum as pyiceberg reads them, against the generator's."""
    count, total, below_100 = live(base.catalog, identifier)
    want_count, want_total = base.expected[predicate]
    problems = []
    if (count, total) != (want_count, want_total):
        problems.append(
            f"{what} ({identifier}): pyiceberg reads {count:,} rows (id sum {total}), "
            f"expected {want_count:,} (id sum {want_total})"
        )
    if predicate == "broad" and below_100:
        problems.append(f"{what} ({identifier}): {below_100:,} rows with bucket < 100 remain")
    return problems


def run_json(cmd: list[str], env: dict[str, str], what: str) -> Any:
    """Run a child that prints one JSON document; its document (exit on failure)."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:  # a library's own output before the document
        return json.loads(done.stdout.strip().splitlines()[-1])


def timed_process(cmd: list[str], env: dict[str, str], what: str) -> float:
    """The wall time of one child process (interpreter start-up included); exit on failure."""
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return took


@dataclass
class SparkTimes:
    """Iceberg Spark's times (seconds) for one statement on fresh copies."""

    start: float = 0.0
    first: float = 0.0
    warm: list[float] = field(default_factory=list)
    version: str = ""
    outputs: list[Any] = field(default_factory=list)


def _harness_importable() -> None:
    """The repository on sys.path: the Spark sessions come from the test harness."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def spark_session(workdir: Path) -> Any:
    """A fresh Iceberg Spark session (`local[2]`, the test harness, a production JVM)."""
    _harness_importable()
    from tests.engines.jvm_engines import ICEBERG_SPARK, PRODUCTION_JVM, start

    return start(ICEBERG_SPARK, workdir, PRODUCTION_JVM)


def spark_measure(
    catalog: BenchCatalog, statements: list[str], workdir: Path, rows: bool = False
) -> SparkTimes:
    """Start Iceberg Spark, configure the catalog, run each statement (each on its own fresh
    copy) timed: the first apart (JIT warm-up), the others warm. `rows`: keep each
    statement's result rows (procedures report what they did)."""
    _harness_importable()
    from tests.engines.jvm_engines import ICEBERG_VERSION

    times = SparkTimes()
    began = time.perf_counter()
    session = spark_session(workdir)
    try:
        configure(session, catalog)
        session.rows("SELECT 1 AS one")  # the catalog settings are applied; not timed apart
        times.start = time.perf_counter() - began
        spark = session.rows("SELECT version() AS v")[0]["v"].split()[0]
        times.version = f"Iceberg Spark {ICEBERG_VERSION} on Spark {spark} (local[2])"
        for index, statement in enumerate(statements):
            began = time.perf_counter()
            if rows:
                times.outputs.append(session.rows(statement))
            else:
                session.sql(statement)
            took = time.perf_counter() - began
            if index == 0:
                times.first = took
            else:
                times.warm.append(took)
            print(f"  iceberg-spark run {index + 1}: {took:.2f} s", file=sys.stderr, flush=True)
    finally:
        session.stop()
    return times


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def progress(message: str) -> None:
    """Progress lines go to stderr (stdout is the table, or the --json document)."""
    print(message, file=sys.stderr, flush=True)


def dvtool_python(dvtool: str | None) -> str:
    """The Python beside --dvtool (a runtime-only install), else this one."""
    if dvtool:
        python = Path(dvtool).parent / "python"
        if python.exists():
            return str(python)
    return sys.executable


def dvtool_bin(dvtool: str | None) -> str:
    return dvtool or str(Path(sys.executable).parent / "dvtool")


Check = Callable[[str], list[str]]
