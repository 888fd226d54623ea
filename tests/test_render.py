"""How human output looks: off a terminal lines are as wide as their content (CI logs); on a
narrow terminal the history is one block per commit, on a wide one a table."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from rich.console import Console

from dvtool.commands.inspect import InspectResult, history
from dvtool.log.reader import open_log
from dvtool.render import Renderer
from tests.cli_helpers import run
from tests.oracles import GOLDEN

SMALL = "table-with-dv-small"


def _table_with_long_history(tmp_path: Path) -> Path:
    table = tmp_path / "t"
    shutil.copytree(GOLDEN / SMALL, table)
    assert run("delete", table, "--where", "value = 1").exit_code == 0
    return table


def test_off_a_terminal_nothing_wraps_and_nothing_is_coloured(tmp_path: Path) -> None:
    table = _table_with_long_history(tmp_path)
    result = run("inspect", table, "--history", "--files")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    metrics = next(line for line in lines if "numDeletionVectorsUpdated=1" in line)
    # The whole metrics cell of the DELETE is on its line, in its order, unbroken.
    assert "numDeletedRows=1, numRemovedFiles=0, numAddedFiles=0" in metrics
    assert "rewriteTimeMs=" in metrics and "executionTimeMs=" in metrics
    assert max(map(len, lines)) > 200  # wider than any terminal default, as the content is
    paths = [p.name for p in table.glob("*.parquet")]
    assert all(any(p in line for line in lines) for p in paths)  # paths never folded
    assert "\x1b[" not in result.stdout


def _rendered_history(table: Path, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width, color_system=None)
    Renderer(console=console).inspect(InspectResult(None, history=history(open_log(str(table)), 5)))
    return out.getvalue()


def test_narrow_terminal_history_is_one_block_per_commit(tmp_path: Path) -> None:
    text = _rendered_history(_table_with_long_history(tmp_path), 80)
    assert "┃" not in text  # no table
    assert [line.split()[1] for line in text.splitlines() if line.startswith("version ")] == [
        "2",
        "1",
        "0",
    ]
    assert "  metrics: numDeletedRows=1" in text


def test_wide_terminal_history_is_a_table(tmp_path: Path) -> None:
    text = _rendered_history(_table_with_long_history(tmp_path), 200)
    assert "┃ version" in text and max(map(len, text.splitlines())) <= 200


def test_human_inspect_shows_the_table_properties() -> None:
    result = run("inspect", GOLDEN / SMALL)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    start = lines.index("Table properties")
    block = "\n".join(lines[start : start + 6])
    assert "delta.enableDeletionVectors" in block and "true" in block


def _many_files(tmp_path: Path, n: int = 25) -> Path:
    """`n` one-row files written by deltalake, DVs enabled."""
    import pyarrow as pa
    from deltalake import write_deltalake

    table = tmp_path / "many"
    for i in range(n):
        data = pa.table({"id": pa.array([i], pa.int64())})
        config = {"delta.enableDeletionVectors": "true"} if i == 0 else None
        write_deltalake(str(table), data, mode="append", configuration=config)
    return table


def _listed(stdout: str, title: str) -> list[str]:
    """The rows of the listing `title` (after its header line), up to the closing line."""
    lines = stdout.splitlines()
    start = lines.index(title) + 2
    rows = []
    for line in lines[start:]:
        if line.startswith("... ") or not line.strip():
            break
        rows.append(line)
    return rows


def test_limit_lists_the_first_n_then_says_how_many_more(tmp_path: Path) -> None:
    table = _many_files(tmp_path)
    default = run("inspect", table, "--files")
    assert len(_listed(default.stdout, "Live files")) == 20
    assert "... 5 more files; use --json or --limit 0 to list them all" in default.stdout
    five = run("inspect", table, "--files", "--limit", "5")
    assert len(_listed(five.stdout, "Live files")) == 5 and "... 20 more files" in five.stdout
    everything = run("inspect", table, "--files", "--limit", "0")
    assert len(_listed(everything.stdout, "Live files")) == 25
    assert "more files" not in everything.stdout
    as_json = run("inspect", table, "--files", "--limit", "5", "--json")
    assert len(json.loads(as_json.stdout)["files"]) == 25  # JSON always lists all


def test_dry_run_plans_end_with_the_totals(tmp_path: Path) -> None:
    table = _many_files(tmp_path)
    plan = run("delete", table, "--where", "id >= 0", "--dry-run", "--limit", "3")
    assert plan.exit_code == 0, plan.output
    assert len(_listed(plan.stdout, "Plan")) == 3 and "... 22 more files" in plan.stdout
    last = plan.stdout.splitlines()[-1]  # whole files from stats: none scanned
    assert last == "files: 0 skipped, 0 scanned, 25 changed; rows deleted: 25"
    done = run("delete", table, "--where", "id < 12")
    assert done.exit_code == 0
    vacuum = run("vacuum", table, "--retain", "0h", "--force", "--dry-run", "--limit", "2")
    assert vacuum.exit_code == 0, vacuum.output
    assert len(_listed(vacuum.stdout, "Files to delete")) == 2
    assert "more files; use --json or --limit 0" in vacuum.stdout
