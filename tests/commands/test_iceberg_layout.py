"""The column metrics judgement of Iceberg data files (`dvtool.commands.iceberg_layout`).

`stats_paths(schema, predicate.columns)` decodes only the bounds of the predicate's columns:
on every live file of a pyiceberg-written table (two files, a struct column, nulls) the
verdict must be the one the bounds of every column give, and the paths kept exactly those
under the predicate's top-level columns.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from dvtool.commands.iceberg_layout import metrics_verdict, parse_predicate, stats_paths
from dvtool.iceberg.live_files import live_files
from dvtool.iceberg.tables import open_iceberg
from dvtool.predicate import Match

ROWS = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("name", pa.string()),
    ]
)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> object:
    root: Path = tmp_path_factory.mktemp("layout")
    catalog = load_catalog(
        "t", type="sql", uri=f"sqlite:///{root / 'c.db'}", warehouse=f"file://{root}"
    )
    catalog.create_namespace("db")
    made = catalog.create_table("db.t", ROWS)
    for lo in (0, 100):
        ids = list(range(lo, lo + 100))
        made.append(
            pa.table(
                {
                    "id": ids,
                    "s": [{"x": i % 7, "y": None if i % 3 else f"y{i}"} for i in ids],
                    "name": [f"n{i}" for i in ids],
                },
                schema=ROWS,
            )
        )
    return open_iceberg(str(made.metadata_location))


@pytest.mark.parametrize(
    ("where", "verdicts"),
    [
        ("id < 100", {Match.ALL, Match.NONE}),
        ("id = 150", {Match.NONE, Match.SOME}),
        ("s.x IS NULL", {Match.NONE}),  # pyiceberg writes no bounds in structs: counts
        ("s.y IS NULL AND id >= 0", {Match.SOME}),
        ("name = 'n5' OR s.x = 3", {Match.SOME}),
    ],
)
def test_verdicts_from_the_predicates_columns_only(
    table: object, where: str, verdicts: set[Match]
) -> None:
    metadata = table.metadata  # type: ignore[attr-defined]
    predicate = parse_predicate(metadata, where, None)
    every = stats_paths(metadata.schema())
    some = stats_paths(metadata.schema(), predicate.columns)
    assert some == {k: v for k, v in every.items() if v[0].split(".")[0] in predicate.columns}
    judged = [
        (metrics_verdict(predicate, live, every), metrics_verdict(predicate, live, some))
        for live in live_files(table).data  # type: ignore[arg-type]
    ]
    assert all(a == b for a, b in judged) and {a for a, _ in judged} == verdicts
