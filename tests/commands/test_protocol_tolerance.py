"""Protocol tolerance (issue 22, parts 3-5): dvtool reads what the protocol lets writers add,
and refuses only what is corrupt or what it cannot honour.

Every table starts as deltalake writes it (three appends of ten rows); the rows are checked
after each dvtool command against the independent readers: tests/oracles.py's raw JSON
replay (`raw_rows`), polars and deltalake.

- An unknown top-level field beside an action, and a line holding only an unknown action (the
  shapes of Delta's own evolvability tests), in a commit in the middle of the log: every
  command reads the table as if they were not there (PROTOCOL.md "Protocol Evolution").
- A metaData that a later commit replaces (version 0 without `schemaString`, version 1
  complete): only the metaData that wins the replay must be complete.
- Writer feature `liquid` with `delta.liquid.clusteringColumns`, as early Databricks runtimes
  wrote liquid-clustered tables: read by every reader, and, as by Delta Spark (which has no
  `liquid` feature) and delta-rs, never written: each writing command is refused, naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import polars as pl
import pyarrow as pa
from click.testing import CliRunner, Result

from dvtool.cli import cli
from dvtool.errors import UnsupportedFeatureError
from tests.commands.other_writers import committing, deltalake_rows, dvtool
from tests.oracles import canon, commit_actions, raw_rows, tree_hashes

Action = dict[str, Any]


def run(*args: str) -> Result:
    return CliRunner(env={"COLUMNS": "2000"}).invoke(cli, list(args))


def deltalake_table(path: Path) -> Path:
    """Files of ids 0-9, 10-19 and 20-29, one append (version) each, written by deltalake."""
    for first in (0, 10, 20):
        ids = list(range(first, first + 10))
        data = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
        deltalake.write_deltalake(str(path), data, mode="append")
    return path


def write_commit(path: Path, version: int, actions: list[Action]) -> None:
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (path / "_delta_log" / f"{version:020d}.json").write_text(text)


def check_rows(path: Path, ids: set[int]) -> None:
    """Every reader sees exactly the rows of `ids`."""
    want = canon({"id": i, "name": f"n{i}"} for i in sorted(ids))
    assert canon(raw_rows(path)) == want
    assert canon(pl.read_delta(str(path)).to_dicts()) == want
    assert deltalake_rows(path) == want


def verify(path: Path) -> dict[str, Any]:
    result = run("inspect", str(path), "--verify", "--json")
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


# -- unknown fields beside actions ------------------------------------------------------------


def test_unknown_top_level_fields_are_ignored_by_every_command(tmp_path: Path) -> None:
    table = deltalake_table(tmp_path / "table")
    actions = commit_actions(table, 1)
    for action in actions:
        if "commitInfo" in action:
            action["some_new_action_alongside_add_action"] = ["a", "1"]
        if "add" in action:
            action["futureTopLevelField"] = {"nested": [1, 2]}
    actions.insert(1, {"some_new_action": {"payload": "x"}})
    actions.append({"some_other_new_action": ["a", "1"]})
    write_commit(table, 1, actions)
    everything = set(range(30))
    check_rows(table, everything)

    assert verify(table)["logical_rows"] == 30
    committing(table, "enable")
    committing(table, "delete", "--where", "id IN (3, 13)")
    assert verify(table)["files_with_dvs"] == 2
    check_rows(table, everything - {3, 13})
    committing(table, "optimize", "--purge")
    assert verify(table)["files_with_dvs"] == 0
    check_rows(table, everything - {3, 13})
    # The commit that held them is as it was: dvtool never rewrites other writers' commits.
    assert commit_actions(table, 1) == actions


def test_two_actions_on_one_line_are_refused(tmp_path: Path) -> None:
    """Readers disagree on such a line (Delta Spark reads one, kernels both): refused."""
    table = deltalake_table(tmp_path / "table")
    actions = commit_actions(table, 1)
    info = next(a for a in actions if "commitInfo" in a)
    add = next(a for a in actions if "add" in a)
    write_commit(table, 1, [{**info, **add}])
    before = tree_hashes(table)
    for args in (("inspect",), ("delete", "--where", "id = 1")):
        result = run(args[0], str(table), *args[1:])
        assert result.exit_code == 6, result.output
        assert "00000000000000000001.json line 1 holds more than one action" in result.output
    assert tree_hashes(table) == before


# -- a replaced incomplete metaData -------------------------------------------------------------


def test_an_incomplete_metadata_replaced_later_is_read(tmp_path: Path) -> None:
    """Version 0's metaData has no `schemaString`; version 1 carries the complete one.

    deltalake 1.6 cannot replay version 0 itself (its JSON schema requires `schemaString` on
    every metaData line), so it reads the table from the checkpoint dvtool writes at the end;
    the raw replay and polars (through that checkpoint too) agree on the rows."""
    table = deltalake_table(tmp_path / "table")
    first = commit_actions(table, 0)
    complete = next(a["metaData"] for a in first if "metaData" in a)
    incomplete = {k: v for k, v in complete.items() if k != "schemaString"}
    write_commit(table, 0, [{"metaData": incomplete} if "metaData" in a else a for a in first])
    second = commit_actions(table, 1)
    write_commit(table, 1, [second[0], {"metaData": complete}, *second[1:]])
    everything = set(range(30))
    assert canon(raw_rows(table)) == canon({"id": i, "name": f"n{i}"} for i in everything)

    assert verify(table)["logical_rows"] == 30
    committing(table, "enable")
    committing(table, "delete", "--where", "id IN (4, 25)")
    committing(table, "optimize", "--purge")
    assert verify(table)["files_with_dvs"] == 0
    # The state at version 0 does use the incomplete metaData: refused, naming where it is.
    result = run("restore", str(table), "--version", "0", "--dry-run")
    assert result.exit_code == 6, result.output
    assert "00000000000000000000.json: metaData action has no 'schemaString' field" in (
        result.output
    )
    dvtool(table, "checkpoint")
    check_rows(table, everything - {4, 25})


# -- writer feature `liquid` ------------------------------------------------------------------


def liquid_table(path: Path) -> Path:
    """deltalake's table, DVs enabled and one DV delete by dvtool, whose latest protocol and
    metaData are then as an early Databricks runtime wrote a liquid-clustered table: writer
    features liquid + domainMetadata + deletionVectors, `delta.liquid.clusteringColumns`,
    and a `delta.liquid` domain naming the clustering column."""
    deltalake_table(path)
    committing(path, "enable")
    committing(path, "delete", "--where", "id = 3")
    actions = commit_actions(path, 3)
    for action in actions:
        if "protocol" in action:
            action["protocol"]["writerFeatures"] = ["liquid", "domainMetadata", "deletionVectors"]
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.liquid.clusteringColumns"] = "id"
    domain = {"clusteringColumns": [{"physicalName": ["id"]}], "domainName": "delta.liquid"}
    actions.append(
        {
            "domainMetadata": {
                "domain": "delta.liquid",
                "configuration": json.dumps(domain),
                "removed": False,
            }
        }
    )
    write_commit(path, 3, actions)
    return path


def test_a_liquid_table_is_read_but_never_written(tmp_path: Path) -> None:
    table = liquid_table(tmp_path / "table")
    rows = set(range(30)) - {3}
    check_rows(table, rows)
    doc = verify(table)
    assert doc["logical_rows"] == 29 and doc["files_with_dvs"] == 1
    before = tree_hashes(table)
    for args in (
        ("delete", "--where", "id = 21"),
        ("optimize", "--purge"),
        ("vacuum", "--dry-run"),
        ("checkpoint",),
    ):
        result = run(args[0], str(table), *args[1:])
        assert result.exit_code == UnsupportedFeatureError.exit_code, result.output
        assert "writer feature(s) liquid (the name early Databricks runtimes gave" in (
            result.output
        )
    assert tree_hashes(table) == before
    check_rows(table, rows)
