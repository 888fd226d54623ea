"""How human output looks: the history is one line per commit with its key metrics in human
units, the rest indented beneath; the summary of `inspect` off a terminal is made without
rich, and is byte for byte what rich prints at the same width (tables that fit) or the same
records (tables that do not). tests/test_output_width.py holds every command to its width."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import dvtool
from dvtool.commands.inspect.command import HistoryEntry, InspectResult, history
from dvtool.commands.inspect.summary import TableSummary
from dvtool.delta.log.reader import open_log
from dvtool.render import inspect as render_inspect
from dvtool.render.box_table import BoxTable
from dvtool.render.inspect import plain_summary, print_summary
from dvtool.render.plain_console import NotPlain
from dvtool.render.renderer import Renderer
from dvtool.render.values import format_time
from tests.cli_helpers import run
from tests.oracles import GOLDEN
from tests.rich_output import WIDE, rich_off_terminal

SMALL = "table-with-dv-small"


def _table_with_long_history(tmp_path: Path) -> Path:
    table = tmp_path / "t"
    shutil.copytree(GOLDEN / SMALL, table)
    assert run("delete", table, "--where", "value = 1").exit_code == 0
    return table


def _rendered_history(table: Path, width: int) -> str:
    """The history on a terminal `width` columns wide (rich draws)."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width, color_system=None)
    Renderer(console=console).inspect(InspectResult(None, history=history(open_log(str(table)), 5)))
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 200])
def test_history_is_one_line_per_commit_then_its_details(tmp_path: Path, width: int) -> None:
    text = _rendered_history(_table_with_long_history(tmp_path), width)
    lines = text.splitlines()
    assert "┃" not in text and max(map(len, lines)) <= width
    assert lines[0] == "History"
    heads = [line for line in lines[1:] if not line.startswith(" ")]
    assert [line.split()[0] for line in heads] == ["2", "1", "0"]
    delete = heads[0].split("  ")
    assert delete[2:] == ["DELETE", "1 row deleted"] and delete[1].endswith("Z")
    details = lines[lines.index(heads[0]) + 1 : lines.index(heads[1])]
    assert all(line.startswith("   ") for line in details)
    assert details[0].startswith("   predicate: ")
    metrics = " ".join(line.strip() for line in details if "metrics:" in line or "=" in line)
    assert "numDeletionVectorsUpdated=1" in metrics and "numRemovedBytes=635 B" in metrics
    assert re.search(r"executionTimeMs=[\d,]+ ms", metrics)
    assert "numDeletedRows" not in metrics  # on the commit's line
    assert "None" not in text and "True" not in text and "{" not in text


def test_history_lines_read_parameters_and_metrics() -> None:
    entry = HistoryEntry(
        7,
        0,
        "WRITE",
        {"mode": "Append", "partitionBy": '["region", "day"]', "version": None, "x": True},
        {"numOutputRows": "2953", "numAddedFiles": 2, "numAddedBytes": "4331658", "zero": 0},
        None,
    )
    assert render_inspect.history_lines([entry], 80) == [
        "7  1970-01-01T00:00:00Z  WRITE  2,953 rows written, 2 files added (4.1 MiB)",
        "   mode: Append",
        "   partitionBy: region, day",
        "   x: true",
    ]


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
    """The rows of the listing `title` (after its header line), up to the closing line; or,
    where the listing is records (too wide for the width), the first line of each record."""
    lines = stdout.splitlines()
    start = lines.index(title) + 1
    rows = []
    if lines[start].startswith("path: "):
        for line in lines[start:]:
            if not line.startswith(("path: ", " ")):
                break
            rows += [line] if line.startswith("path: ") else []
        return rows
    for line in lines[start + 1 :]:
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
WIDTH = WIDE


def _rich_summary(s: TableSummary, width: int = WIDE) -> str:
    return rich_off_terminal(lambda console: print_summary(Renderer(console=console), s), width)


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
    monkeypatch.setenv("COLUMNS", str(WIDTH))
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
    "markup in partition columns": _summary(partition_columns=["[magenta]p[/]"]),
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
    text, _tables = _rendered(InspectResult(summary), monkeypatch)
    assert text == expected  # rich drew what plain text does not cover, the rest is the same


def test_rich_draws_the_summary_on_a_terminal_and_plain_text_off_one_with_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary = PLAIN_CASES["non-ASCII names"]
    expected = _rich_summary(summary)
    assert _rendered(InspectResult(summary, checks=[]), monkeypatch) == (expected, 0)
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

    at_80 = _rich_summary(summary, 80)  # the CLI runner's COLUMNS
    assert max(map(len, at_80.splitlines())) <= 80
    monkeypatch.setattr(BoxTable, "to_rich", no_rich)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    result = run("inspect", GOLDEN / table)
    assert (result.exit_code, result.stdout, result.stderr) == (0, at_80, "")


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


@pytest.mark.parametrize(
    ("n", "noun", "text"),
    [
        (1, "empty directory", "1 empty directory"),
        (0, "empty directory", "0 empty directories"),
        (2953, "deleted row", "2,953 deleted rows"),
        (1, "file", "1 file"),
        (1_000_000, "day", "1,000,000 days"),
    ],
)
def test_counts_agree_with_their_noun(n: int, noun: str, text: str) -> None:
    from dvtool.render.values import plural

    assert plural(n, noun) == text


def test_downgrade_purge_step_has_thousands_separators() -> None:
    from dvtool.commands.downgrade.purge import purge_detail
    from dvtool.commands.optimize.command import OptimizeResult
    from dvtool.commands.optimize.plan import PlannedBin

    bins = [PlannedBin("", [f"f{i}"], 10, 1000, 2953 if i == 0 else 0) for i in range(1200)]
    result = OptimizeResult("REORG", 3, True, "arrow", [], bins, {})
    assert purge_detail(result) == (
        "rewrite 1,200 files with deletion vectors, dropping 2,953 deleted rows"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "-"),
        (True, "true"),
        ('["region"]', "region"),
        ('{"delta.enableDeletionVectors": "true"}', "delta.enableDeletionVectors=true"),
        ("[not json", "[not json"),
        (4331658, "4,331,658"),
    ],
)
def test_parameter_values_have_no_python_reprs(value: Any, shown: str) -> None:
    from dvtool.render.values import format_value

    assert format_value(value) == shown


def test_locations_are_shown_as_the_user_named_them() -> None:
    from dvtool.render.values import location_as_given, relative_location

    given = {"/work/lake": "lake", "s3://b/x": "s3://b/x/"}
    assert location_as_given("/work/lake/a/t", given) == "lake/a/t"
    assert location_as_given("/work/lake", given) == "lake"
    assert location_as_given("s3://b/x/t", given) == "s3://b/x/t"
    assert location_as_given("/work/lakehouse/t", given) == "/work/lakehouse/t"
    assert relative_location("/t/root/deletion_vector_1.bin", "/t/root") == "deletion_vector_1.bin"
    assert relative_location("/elsewhere/dv.bin", "/t/root") == "/elsewhere/dv.bin"
