"""How human output looks: off a terminal lines are as wide as their content (CI logs); on a
narrow terminal the history is one block per commit, on a wide one a table. The summary of
`inspect` off a terminal is made without rich, and is byte for byte what rich prints."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import dvtool
from dvtool import render_inspect
from dvtool.box_table import BoxTable
from dvtool.commands.inspect import InspectResult, history
from dvtool.commands.inspect_summary import TableSummary
from dvtool.log.reader import open_log
from dvtool.plain_console import NotPlain
from dvtool.render import Renderer
from dvtool.render_inspect import plain_summary, print_summary
from dvtool.render_values import format_time
from tests.cli_helpers import run
from tests.oracles import GOLDEN
from tests.rich_output import rich_off_terminal

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


# -- the inspect summary off a terminal: plain text, byte for byte rich's -----------------------

GOLDEN_TABLES = sorted(p.parent for p in GOLDEN.rglob("_delta_log"))
WIDTH = 1_000_000  # dvtool.render._UNLIMITED_WIDTH


def _rich_summary(s: TableSummary) -> str:
    return rich_off_terminal(lambda console: print_summary(console, s))


def _rendered(result: InspectResult, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """What `Renderer().inspect(result)` writes to a piped stdout, and how many rich tables
    it made."""
    made: list[BoxTable] = []
    to_rich = BoxTable.to_rich

    def counted(table: BoxTable) -> Any:
        made.append(table)
        return to_rich(table)

    monkeypatch.setattr(BoxTable, "to_rich", counted)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        Renderer().inspect(result)
    return out.getvalue(), len(made)


def test_every_golden_table_is_found() -> None:
    assert len(GOLDEN_TABLES) >= 20 and GOLDEN / SMALL in GOLDEN_TABLES


@pytest.mark.parametrize("table", GOLDEN_TABLES, ids=lambda p: str(p.relative_to(GOLDEN)))
def test_plain_summary_of_golden_tables_is_what_rich_prints(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = dvtool.inspect(table).summary
    assert summary is not None
    expected = _rich_summary(summary)
    assert plain_summary(summary, WIDTH) == expected
    assert _rendered(InspectResult(summary), monkeypatch) == (expected, 0)  # without rich


@functools.cache
def _mapped_summary() -> TableSummary:
    """The summary of a golden table with column mapping and partitions."""
    summary = dvtool.inspect(GOLDEN / "dv-with-columnmapping" / "delta").summary
    assert summary is not None and summary.column_mapping_mode == "name"
    return summary


def _summary(**changes: Any) -> TableSummary:
    return dataclasses.replace(_mapped_summary(), **changes)


def _field(name: str, type_: str = "string", nullable: Any = True, physical: str = "col-1") -> Any:
    return {"name": name, "type": type_, "nullable": nullable, "physical_name": physical}


def _histogram(*files: int) -> list[dict[str, Any]]:
    labels = ["no DV", *(f"{10 * i}-{10 * i + 10}%" for i in range(10))]
    return [{"bucket": b, "files": f} for b, f in zip(labels, files, strict=True)]


BRACKETS = r"[bold]x[/] \[dim] a\b [/] [1] [link=http://h] c:\d\ e\\[f] g\ "
PLAIN_CASES = {
    "long property values": _summary(configuration={"k": "v" * 5000, "x" * 300: "y"}),
    "many properties": _summary(configuration={f"p.{i:03d}": f"v{i}" for i in range(300)}),
    "empty schema": _summary(schema=[]),
    "empty schema, no mapping": _summary(schema=[], column_mapping_mode="none"),
    "nested schema": _summary(
        schema=[
            _field("s", "struct<a: int, b: array<struct<c: map<string, decimal(10,2)>>>>"),
            _field("m", "map<string, array<timestamp_ntz>>", False),
        ]
    ),
    "None fields": _summary(
        name=None, operation=None, commit_timestamp=None, schema=[_field("n", nullable=None)]
    ),
    "no configuration, no partitions": _summary(configuration={}, partition_columns=[]),
    "zero files": _summary(
        num_files=0,
        size_bytes=0,
        physical_rows=0,
        logical_rows=0,
        deleted_rows=0,
        deleted_ratio=0.0,
        files_with_dvs=0,
        num_tombstones=0,
        deleted_ratio_histogram=_histogram(*[0] * 11),
    ),
    "huge numbers": _summary(
        num_files=10**9,
        size_bytes=2**62,
        physical_rows=10**18,
        logical_rows=10**18 - 1,
        deleted_rows=1,
        deleted_ratio=1e-18,
        files_with_dvs=10**9,
        files_without_stats=12_345_678,
        row_counts_exact=False,
        deleted_ratio_histogram=_histogram(10**9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 123_456_789),
    ),
    "files without stats, counted": _summary(files_without_stats=3, row_counts_exact=True),
    "brackets and backslashes": _summary(
        name=BRACKETS,
        location="/t/" + BRACKETS,
        configuration={BRACKETS: BRACKETS, "k\\": "v\\"},
        schema=[_field(BRACKETS, BRACKETS, physical=BRACKETS)],
    ),
    "trailing backslash": _summary(name="t\\", location="C:\\data\\t\\"),
    "non-ASCII names": _summary(
        name="café 数据表",
        location="/données/テーブル",
        configuration={"comment": "é — “quoted” … 한국어 ＦＵＬＬ"},
        schema=[_field("é", physical="ü"), _field("列名", "字符串", physical="列-1")],
    ),
    "spaces around values": _summary(configuration={" k ": "  v  ", "e": ""}),
    "colons without emoji": _summary(
        location="s3://bucket:9000/t", configuration={"t": "12:59:55", "u": "http://h:1/p"}
    ),
    "one mapping mode": _summary(column_mapping_mode="id"),
}
RICH_CASES = {  # what only rich draws: the renderer falls back to it
    "emoji code": _summary(configuration={"comment": "ship it :rocket:"}),
    "markup in partition columns": _summary(partition_columns=["[red]p[/]"]),
    "newline in a value": _summary(configuration={"k": "two\nlines"}),
    "tab in a name": _summary(schema=[_field("a\tb")]),
    "combining accent": _summary(name="e\u0301"),
    "emoji character": _summary(name="🙂"),
    "closing tag in an operation": _summary(operation="x[/]y"),
}


@pytest.mark.parametrize("case", PLAIN_CASES)
def test_plain_summary_of_edge_cases_is_what_rich_prints(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = PLAIN_CASES[case]
    expected = _rich_summary(summary)
    assert plain_summary(summary, WIDTH) == expected
    assert _rendered(InspectResult(summary), monkeypatch) == (expected, 0)


@pytest.mark.parametrize("case", RICH_CASES)
def test_what_plain_text_does_not_cover_rich_draws(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = RICH_CASES[case]
    with pytest.raises(NotPlain):
        plain_summary(summary, WIDTH)
    try:
        expected = _rich_summary(summary)
    except Exception as e:  # rich refuses it too: the renderer raises as before
        with pytest.raises(type(e)):
            _rendered(InspectResult(summary), monkeypatch)
        return
    text, tables = _rendered(InspectResult(summary), monkeypatch)
    assert (text, tables > 0) == (expected, True)


def test_rich_draws_the_summary_on_a_terminal_and_with_more_than_the_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary = PLAIN_CASES["non-ASCII names"]
    expected = _rich_summary(summary)
    assert _rendered(InspectResult(summary, checks=[]), monkeypatch) == (expected, 4)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich sees a terminal: its colours and width
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        Renderer().inspect(InspectResult(summary))
    assert "\x1b[1m" in out.getvalue()  # bold: drawn by rich


_SMALL_OUTPUT = """\
testId  LOCATION
version 1  committed COMMITTED  (DELETE)
protocol reader 3 / writer 7  features: deletionVectors
Files and rows
┌───────────────────┬────────────────────────────────────┐
│ live files        │                                  1 │
│ size              │                              635 B │
│ physical rows     │                                 10 │
│ logical rows      │                                  8 │
│ deleted rows      │                         2 (20.00%) │
│ files with DVs    │                                  1 │
│ DV files          │                    1 holding 1 DVs │
│ inline DVs        │                                  0 │
│ absolute-path DVs │                                  0 │
│ DV bytes          │                               36 B │
│ tombstones        │                                  1 │
│ average file size │                              635 B │
│ small files       │                  1 below 256.0 MiB │
│ log               │ no checkpoint, 2 commits to replay │
└───────────────────┴────────────────────────────────────┘
Table properties
┌─────────────────────────────┬──────┐
│ delta.columnMapping.mode    │ none │
│ delta.enableDeletionVectors │ true │
└─────────────────────────────┴──────┘
Schema
┏━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┓
┃ column ┃ type    ┃ nullable ┃
┡━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━┩
│ value  │ integer │ yes      │
└────────┴─────────┴──────────┘
Deleted ratio per file
┌─────────┬───┬──────────────────────────────────────────┐
│   no DV │ 0 │                                          │
│   0-10% │ 0 │                                          │
│  10-20% │ 0 │                                          │
│  20-30% │ 1 │ ████████████████████████████████████████ │
│  30-40% │ 0 │                                          │
│  40-50% │ 0 │                                          │
│  50-60% │ 0 │                                          │
│  60-70% │ 0 │                                          │
│  70-80% │ 0 │                                          │
│  80-90% │ 0 │                                          │
│ 90-100% │ 0 │                                          │
└─────────┴───┴──────────────────────────────────────────┘
"""


@pytest.mark.parametrize("table", [SMALL, "basic-dv-no-checkpoint", "dv-with-columnmapping/delta"])
def test_cli_human_inspect_output_is_unchanged(table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's summary off a terminal: rich's text, now made without rich."""
    summary = dvtool.inspect(GOLDEN / table).summary
    assert summary is not None
    expected = _rich_summary(summary)
    if table == SMALL:
        # The golden table's commit time is its log file's modification time: machine-dependent.
        committed = format_time(summary.commit_timestamp)
        assert expected == _SMALL_OUTPUT.replace("LOCATION", summary.location).replace(
            "COMMITTED", committed
        )

    def no_rich(_table: BoxTable) -> Any:
        raise AssertionError("rich drew the summary")

    monkeypatch.setattr(BoxTable, "to_rich", no_rich)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    result = run("inspect", GOLDEN / table)
    assert (result.exit_code, result.stdout, result.stderr) == (0, expected, "")


def test_the_progress_bar_comes_with_the_first_task() -> None:
    out = io.StringIO()
    renderer = Renderer()
    renderer._err = Console(file=out, force_terminal=True, width=100)
    with renderer.progress("verifying"):
        pass
    assert out.getvalue() == ""  # no task, no bar (nor rich.progress)
    with renderer.progress("verifying") as start:
        advance = start(3)
        advance(1)
        advance(2)
        start(2)(2)  # a second task: the same bar
    shown = out.getvalue()
    assert "verifying" in shown and "3/3" in shown and "2/2" in shown


def test_no_progress_bar_off_a_terminal_nor_with_json() -> None:
    for as_json, terminal in ((False, False), (True, True)):
        out = io.StringIO()
        renderer = Renderer(as_json)
        renderer._err = Console(file=out, force_terminal=terminal)
        with renderer.progress("rewriting") as start:
            start(2)(2)
        assert out.getvalue() == ""


@pytest.mark.parametrize(
    ("checkpoint", "commits", "text"),
    [
        (None, 2, "no checkpoint, 2 commits to replay"),
        (10, 1, "checkpoint at version 10, 1 commit after it"),
        (1200, 0, "checkpoint at version 1,200, 0 commits after it"),
    ],
)
def test_log_position_line(checkpoint: int | None, commits: int, text: str) -> None:
    assert render_inspect._log_position(checkpoint, commits) == text
