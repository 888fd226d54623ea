"""The soak's table (see scripts/soak.py): where it lives and how readers reach it
(`Target`), its shape (`TableShape`) and the state the workers found it in (`Setup`), how it is
built with deltalake, and its delete predicates: a spec drawn at random, its Spark SQL text for
dvtool (`predicate_sql`) and its meaning in plain Python (`predicate_matches`).

Nothing here runs dvtool or reads the log: the operations (soak_ops.py) draw predicates from
the shape, the checks (soak_expected.py) evaluate them over the original rows.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGIONS = ("eu", "us", "ap", "sa")
FIRST_DAY = dt.date(2024, 1, 1)
DAYS = 365
PREDICATE_WEIGHTS = {
    "id_between": 6, "id_in": 6, "id_mod_grp": 5, "amount_range": 5, "name_prefix": 4,
    "region_grp": 4, "day_eq": 4, "score_null": 3, "score_not_lt": 4, "concat": 3,
    "sum_mod": 3, "tails": 1, "file_range": 1,
}  # fmt: skip
Row = dict[str, Any]
Spec = dict[str, Any]


# -- settings and the table's location ------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where the table lives and how each reader reaches it."""

    uri: str
    cli_options: tuple[str, ...] = ()  # dvtool --storage-option arguments
    reader_options: tuple[tuple[str, str], ...] = ()  # deltalake / polars storage_options
    endpoint: str | None = None  # S3 endpoint (moto)

    @property
    def local_path(self) -> Path | None:
        return None if self.endpoint else Path(self.uri)

    def filesystem(self) -> Any:
        """An fsspec filesystem for the raw log checks (not dvtool's storage layer)."""
        import fsspec

        if self.endpoint is None:
            return fsspec.filesystem("file")
        return fsspec.filesystem(
            "s3", key="test", secret="test", client_kwargs={"endpoint_url": self.endpoint}
        )

    def fs_path(self, relative: str) -> str:
        root = self.uri.removeprefix("s3://")
        return f"{root}/{relative}" if relative else root


@dataclass(frozen=True)
class TableShape:
    """What workers need to draw predicates and options: no rows, only the shape."""

    num_rows: int
    rows_per_file: int
    rows_per_append: int  # one write_deltalake call: one file, or one per region
    num_files: int
    partitioned: bool
    file_size: int  # average initial data file size in bytes


@dataclass(frozen=True)
class Setup:
    """The table as the workers found it."""

    rows: list[Row]
    shape: TableShape
    version: int  # the last setup commit (dvtool enable)
    checkpoint: int  # the version of the checkpoint written after it
    checkpoint_files: tuple[str, ...]
    aged: int  # how many of the setup's log entries were aged LOG_AGE_DAYS (0 on S3)
    log_names: frozenset[str]  # the _delta_log entries when the workers started


# -- building the table ---------------------------------------------------------------------


def make_rows(rng: random.Random, num_rows: int) -> list[Row]:
    """The original rows: unique sequential `id`, random other columns, some NULL scores."""
    rows = []
    for i in range(num_rows):
        rows.append(
            {
                "id": i,
                "grp": rng.randrange(100),
                "amount": round(rng.uniform(0, 1000), 2),
                "name": f"n{i:07d}",
                "day": FIRST_DAY + dt.timedelta(days=rng.randrange(DAYS)),
                "score": None if rng.random() < 0.1 else rng.randrange(1000),
                "region": rng.choice(REGIONS),
            }
        )
    return rows


def arrow_rows(rows: Sequence[Row]) -> Any:
    import pyarrow as pa

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("grp", pa.int32()),
            ("amount", pa.float64()),
            ("name", pa.string()),
            ("day", pa.date32()),
            ("score", pa.int64()),
            ("region", pa.string()),
        ]
    )
    return pa.Table.from_pylist(list(rows), schema=schema)


def write_table(path: Path, rows: Sequence[Row], appends: int, partitioned: bool) -> None:
    """One `write_deltalake` append per chunk of ids (one file, or one per region)."""
    from deltalake import write_deltalake

    size = len(rows) // appends
    for k in range(appends):
        chunk = arrow_rows(rows[k * size : (k + 1) * size])
        write_deltalake(
            str(path), chunk, mode="append", partition_by=["region"] if partitioned else None
        )


def data_file_sizes(path: Path) -> list[int]:
    return [p.stat().st_size for p in path.rglob("*.parquet") if "_delta_log" not in p.parts]


def build_table(rng: random.Random, local: Path) -> tuple[list[Row], TableShape]:
    """Write the table at `local` (a new directory); its rows and shape."""
    partitioned = rng.random() < 0.5
    if partitioned:
        appends = rng.choice((2, 3, 4))
        num_files = appends * len(REGIONS)
    else:
        appends = num_files = rng.randint(8, 16)
    per_append = rng.randint(2000, 5000) * (len(REGIONS) if partitioned else 1)
    rows = make_rows(rng, appends * per_append)
    write_table(local, rows, appends, partitioned)
    sizes = data_file_sizes(local)
    if len(sizes) != num_files:
        raise SystemExit(f"expected {num_files} data files in {local}, found {len(sizes)}")
    shape = TableShape(
        num_rows=len(rows),
        rows_per_file=len(rows) // num_files,
        rows_per_append=per_append,
        num_files=num_files,
        partitioned=partitioned,
        file_size=sum(sizes) // num_files,
    )
    return rows, shape


# -- predicates: SQL for dvtool, plain Python for the expected rows ---------------------------


def random_predicate(rng: random.Random, shape: TableShape, kinds: Sequence[str]) -> Spec:
    """A predicate spec of one of `kinds`, deleting well under 1% of the rows (whole files
    rarely)."""
    n = shape.num_rows
    kind = rng.choices(kinds, weights=[PREDICATE_WEIGHTS[k] for k in kinds])[0]
    a = rng.randrange(n)
    if kind == "id_between":
        return {"kind": kind, "lo": a, "hi": a + rng.randint(0, max(1, n // 300))}
    if kind == "id_in":
        return {"kind": kind, "ids": sorted(rng.sample(range(n), rng.randint(1, 20)))}
    if kind == "id_mod_grp":
        k = rng.randint(50, 200)
        return {"kind": kind, "k": k, "r": rng.randrange(k), "g": rng.randint(10, 100)}
    if kind == "amount_range":
        lo = rng.randint(0, 9990) / 10
        return {"kind": kind, "lo": lo, "hi": round(lo + rng.randint(5, 50) / 10, 1)}
    if kind == "name_prefix":
        return {"kind": kind, "prefix": f"n{a // 100:05d}"}
    if kind in ("region_grp", "concat"):
        return {"kind": kind, "region": rng.choice(REGIONS), "g": rng.randrange(100)}
    if kind == "day_eq":
        return {
            "kind": kind,
            "day": (FIRST_DAY + dt.timedelta(days=rng.randrange(DAYS))).isoformat(),
        }
    if kind == "score_null":
        return {"kind": kind, "lo": a, "hi": a + n // 50}
    if kind == "score_not_lt":
        return {"kind": kind, "s": rng.randint(900, 999), "g": rng.randrange(100)}
    if kind == "sum_mod":
        m = rng.randint(500, 2000)
        return {"kind": kind, "m": m, "r": rng.randrange(m)}
    if kind == "tails":
        return {"kind": kind, "lo": rng.randint(1, n // 400), "hi": n - rng.randint(1, n // 400)}
    # One data file as written: all its rows match, so dvtool removes it without reading it.
    start = rng.randrange(shape.num_rows // shape.rows_per_append) * shape.rows_per_append
    region = rng.choice(REGIONS) if shape.partitioned else None
    return {"kind": kind, "lo": start, "hi": start + shape.rows_per_append, "region": region}


def predicate_sql(spec: Spec) -> str:
    """The `--where` text of a spec (Spark SQL)."""
    kind = spec["kind"]
    sql: dict[str, Callable[[Spec], str]] = {
        "id_between": lambda s: f"id BETWEEN {s['lo']} AND {s['hi']}",
        "id_in": lambda s: f"id IN ({', '.join(map(str, s['ids']))})",
        "id_mod_grp": lambda s: f"id % {s['k']} = {s['r']} AND grp < {s['g']}",
        "amount_range": lambda s: f"amount >= {s['lo']} AND amount < {s['hi']}",
        "name_prefix": lambda s: f"name LIKE '{s['prefix']}%'",
        "region_grp": lambda s: f"region = '{s['region']}' AND grp = {s['g']}",
        "day_eq": lambda s: f"day = DATE '{s['day']}'",
        "score_null": lambda s: f"score IS NULL AND id BETWEEN {s['lo']} AND {s['hi']}",
        "score_not_lt": lambda s: f"NOT (score < {s['s']}) AND grp = {s['g']}",
        "concat": lambda s: f"concat(region, '-', CAST(grp AS STRING)) = '{s['region']}-{s['g']}'",
        "sum_mod": lambda s: f"(id + grp) % {s['m']} = {s['r']}",
        "tails": lambda s: f"id < {s['lo']} OR id >= {s['hi']}",
        "file_range": lambda s: (
            f"id >= {s['lo']} AND id < {s['hi']}"
            + (f" AND region = '{s['region']}'" if s["region"] else "")
        ),
    }
    return sql[kind](spec)


def predicate_matches(spec: Spec, row: Row) -> bool:
    """Whether Spark SQL's predicate is TRUE for `row` (NULL is not TRUE: not deleted)."""
    kind, s = spec["kind"], spec
    i, score = row["id"], row["score"]
    checks: dict[str, Callable[[], bool]] = {
        "id_between": lambda: s["lo"] <= i <= s["hi"],
        "id_in": lambda: i in s["ids"],
        "id_mod_grp": lambda: i % s["k"] == s["r"] and row["grp"] < s["g"],
        "amount_range": lambda: s["lo"] <= row["amount"] < s["hi"],
        "name_prefix": lambda: bool(row["name"].startswith(s["prefix"])),
        "region_grp": lambda: row["region"] == s["region"] and row["grp"] == s["g"],
        "day_eq": lambda: row["day"].isoformat() == s["day"],
        "score_null": lambda: score is None and s["lo"] <= i <= s["hi"],
        "score_not_lt": lambda: score is not None and score >= s["s"] and row["grp"] == s["g"],
        "concat": lambda: f"{row['region']}-{row['grp']}" == f"{s['region']}-{s['g']}",
        "sum_mod": lambda: (i + row["grp"]) % s["m"] == s["r"],
        "tails": lambda: i < s["lo"] or i >= s["hi"],
        "file_range": lambda: s["lo"] <= i < s["hi"] and s["region"] in (None, row["region"]),
    }
    return checks[kind]()
