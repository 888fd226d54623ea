"""dvtool's writing commands on tables with variant columns whose files real Spark 4 wrote.

The fixture (`tests.writers.variant_table`) holds two files: file a (ids 1-5, shredded when
the table supports `variantShredding`) and file b (ids 6-9, never shredded). Variant values
are checked by decoding them with the independent variant decoder of tests/oracles.py
(`variant_from_parquet`, which also reassembles shredded values) against the JSON Spark
parsed; layouts by reading the footers of the files dvtool wrote. dvtool never re-encodes a
variant: a rewrite copies each value in the layout its file holds it, so it must not merge
files of different layouts into one.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dvtool.cli import cli
from tests import writers
from tests.oracles import raw_rows, replay_json, variant_from_parquet

EXPECTED = {
    r["id"]: None if r["json"] is None else json.loads(r["json"], parse_float=Decimal)
    for r in writers.VARIANT_ROWS
}


def _run(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.output)
    return parsed


def _values(table: Path) -> dict[int, Any]:
    return {r["id"]: variant_from_parquet(r["v"]) for r in raw_rows(table)}


def _layouts(table: Path) -> dict[str, list[str]]:
    """The variant group's fields of every live file, by path."""
    _, live = replay_json(table)
    out = {}
    for path, _ in live:
        v_type = pq.read_schema(table / path).field("v").type
        out[path] = sorted(v_type.field(i).name for i in range(v_type.num_fields))
    return out


PLAIN = ["metadata", "value"]
SHREDDED = ["metadata", "typed_value", "value"]


@pytest.fixture(params=[False, True], ids=["unshredded", "shredded"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return writers.variant_table(tmp_path / "t", shredded=request.param)


def test_dv_delete_then_purge_keeps_every_value_and_layout(table: Path) -> None:
    before = sorted(_layouts(table).values())
    _run("delete", str(table), "--where", "id IN (2, 7)")
    assert _values(table) == {k: v for k, v in EXPECTED.items() if k not in (2, 7)}
    _run("optimize", str(table), "--purge")
    assert _values(table) == {k: v for k, v in EXPECTED.items() if k not in (2, 7)}
    assert sorted(_layouts(table).values()) == before


def test_copy_on_write_delete_keeps_values(table: Path) -> None:
    _run("delete", str(table), "--where", "name = 'nested' OR id = 9", "--mode", "cow")
    assert _values(table) == {k: v for k, v in EXPECTED.items() if k not in (2, 9)}


def test_variant_stats_are_null_counts_only(table: Path) -> None:
    _run("delete", str(table), "--where", "id = 1", "--mode", "cow")
    _, live = replay_json(table)
    for add in live.values():
        stats = json.loads(add["stats"])
        assert "v" not in stats.get("minValues", {}) and "v" not in stats.get("maxValues", {})
        assert "v" in stats["nullCount"]


def test_compaction_never_mixes_layouts(table: Path, request: pytest.FixtureRequest) -> None:
    shredded = "shredded" in request.node.callspec.id.split("-")
    _run("optimize", str(table))
    assert _values(table) == EXPECTED
    layouts = sorted(_layouts(table).values())
    assert layouts == (sorted([PLAIN, SHREDDED]) if shredded else [PLAIN])


def test_where_on_a_variant_column_is_refused(table: Path) -> None:
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "v IS NULL"])
    assert result.exit_code != 0 and result.exit_code != 70
    assert "v" in result.output and "variant" in result.output
    assert _values(table) == EXPECTED
