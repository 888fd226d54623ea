"""CLI runs of the commands that close the life cycle of a DV: vacuum, manifests, downgrade.

Exit codes and output through CliRunner; the table state is checked with polars, deltalake
and the files on disk.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import deltalake
import polars as pl
from click.testing import CliRunner, Result

from dvtool.cli import cli
from tests.oracles import copy_golden


def _cli(*args: str | Path) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(cli, [str(a) for a in args])


def test_generate_manifest_cli(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    refused = _cli("generate-manifest", table)
    assert refused.exit_code == 7 and "--purge-first" in refused.output
    done = _cli("generate-manifest", table, "--purge-first", "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output)
    assert doc["num_manifests"] == 1 and doc["purge"]["versions"] == [2]
    lines = (table / "_symlink_format_manifest" / "manifest").read_text().splitlines()
    uris = deltalake.DeltaTable(str(table)).file_uris()
    expected = sorted(u if u.startswith("file:") else f"file:{u}" for u in uris)
    assert sorted(lines) == expected


def test_downgrade_cli(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    before = sorted(pl.read_delta(str(table)).rows())
    plan = _cli("downgrade", table, "--dry-run")
    assert plan.exit_code == 0 and "dry run" in plan.output
    assert "1/7 (checkpointProtection)" in plan.output
    assert _cli("downgrade", table, "--force").exit_code == 2
    done = _cli("downgrade", table, "--json")
    assert done.exit_code == 0 and json.loads(done.output)["version"] == 7
    after = deltalake.DeltaTable(str(table)).to_pyarrow_table()  # refuses DV tables
    assert sorted(tuple(row.values()) for row in after.to_pylist()) == before
    waiting = _cli("downgrade", table, "--truncate-history")
    assert waiting.exit_code == 7 and "--force" in waiting.output
    forced = _cli("downgrade", table, "--truncate-history", "--force", "--json")
    assert forced.exit_code == 0
    assert json.loads(forced.output)["protocol_after"] == {
        "minReaderVersion": 1,
        "minWriterVersion": 1,
    }


def test_vacuum_cli(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    rows = sorted(pl.read_delta(str(table)).rows())
    assert _cli("optimize", table, "--purge").exit_code == 0
    past = 1_000_000_000
    for path in table.rglob("*"):
        if path.is_file() and "_delta_log" not in path.parts:
            os.utime(path, (past, past))
    refused = _cli("vacuum", table, "--retain", "0h")
    assert refused.exit_code == 7 and "--force" in refused.output
    assert _cli("vacuum", table, "--retain", "soon").exit_code == 2
    dry = _cli("vacuum", table, "--retain", "0h", "--force", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    planned = {f["path"] for f in json.loads(dry.output)["files"]}
    assert planned and all(p.endswith((".parquet", ".bin")) for p in planned)
    assert all((table / p).exists() for p in planned)
    real = _cli("vacuum", table, "--retain", "0h", "--force", "--json")
    assert real.exit_code == 0, real.output
    assert {f["path"] for f in json.loads(real.output)["files"]} == planned
    assert not any((table / p).exists() for p in planned)
    assert sorted(pl.read_delta(str(table)).rows()) == rows
