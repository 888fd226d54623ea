"""Human output a person can read in a CI log and at 80 columns (issue 23).

Off a terminal every line fits `COLUMNS` when it is set, else 120 columns; on a terminal, the
terminal's width. Tables that would not fit become records (`key: value` lines, long values
wrapped at `/` or spaces with an indent), the history is one line per commit. Each command is
run three ways on a table written by deltalake (then given DVs, purged and rewritten by
dvtool, so that every listing has rows): in-process through click's runner, as a real
process whose stdout is a pipe, and on a pseudo-terminal 80 columns wide.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import write_deltalake
from rich.cells import cell_len

import dvtool
from dvtool.cli import cli

REPO = Path(__file__).resolve().parent.parent
# A deep directory: its absolute paths are wider than 80 columns, as a CI runner's are.
DEEP = "a-rather-long-workspace-directory/newcomer/work/lake2/partitioned"
PREFIX = "lake"  # maintain's prefix, given relative to the working directory
DELETED = 257  # rows the table's DVs delete: ids % 10 = 3, less those the purge dropped
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cwd/lake/<DEEP>/t: three deltalake appends partitioned by `part`, DVs enabled, then
    a dvtool delete (DVs), a purge (files removed: something to vacuum) and another delete
    (DVs again, for --files)."""
    cwd = tmp_path_factory.mktemp("width")
    table = cwd / PREFIX / DEEP / "t"
    for k in range(3):
        ids = list(range(k * 1000, (k + 1) * 1000))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "part": pa.array([f"p{i % 2}" for i in ids], pa.string()),
            }
        )
        config = {"delta.enableDeletionVectors": "true"} if k == 0 else None
        write_deltalake(
            str(table), data, mode="append", partition_by=["part"], configuration=config
        )
    assert dvtool.delete(table, "id % 7 = 1").metrics["numDeletedRows"] == 429
    dvtool.optimize(table, purge=True)
    assert dvtool.delete(table, "id % 10 = 3").metrics["numDeletedRows"] == DELETED
    return cwd


TABLE = f"{PREFIX}/{DEEP}/t"
COMMANDS = {
    "inspect": ["inspect", TABLE],
    "history": ["inspect", TABLE, "--history"],
    "files": ["inspect", TABLE, "--files"],
    "maintain": ["maintain", PREFIX, "--recursive", "--dry-run"],
    "tables": ["inspect", PREFIX, "--recursive", "--check", "max-files=100"],
    "vacuum": ["vacuum", TABLE, "--retain", "0h", "--force", "--dry-run"],
    "restore": ["restore", TABLE, "--version", "1", "--dry-run"],
}


def _widths(text: str) -> list[int]:
    return [cell_len(line) for line in text.splitlines()]


def _check_layout(name: str, text: str, width: int, cwd: Path) -> None:
    """What each command shows at `width`: never a line wider, and its layout."""
    lines = text.splitlines()
    assert lines and max(_widths(text)) <= width, (name, max(_widths(text)))
    assert "…" not in text  # nothing cut
    assert "None" not in text and "True" not in text
    if name == "history":
        assert lines[0] == "History" and "┃" not in text
        heads = [line for line in lines[1:] if not line.startswith(" ")]
        assert [int(line.split()[0]) for line in heads] == list(range(len(heads) - 1, -1, -1))
        assert any("rows deleted" in line for line in heads)
        assert any(line.endswith("WRITE  1,000 rows written, 2 files added") for line in heads)
        assert any(
            re.search(r"REORG  429 rows purged, 6 files added \([\d.]+ KiB\)", h) for h in heads
        )
        assert all(line.startswith("   ") for line in lines[1:] if line not in heads)
        assert "predicate: " in text
        sizes = re.findall(r"Bytes=([^,\n]+)", text)  # never broken inside a metric
        assert sizes and all(re.fullmatch(r"[\d.,]+ (B|KiB|MiB)", size) for size in sizes)
    elif name == "files":
        records = width < 200
        assert lines[lines.index("Live files") + 1].startswith("path: " if records else "   size")
        assert "dv=deletion_vector_" in text and str(cwd) not in text.split("Live files")[1]
    elif name == "maintain":
        joined = " ".join(line.strip() for line in lines)
        assert f"{TABLE}: purge: would rewrite" in joined.replace("/ ", "/")
        assert str(cwd) not in text  # the prefix as given, not absolute
        if "┃" in text:
            assert "┃ table" in text and "┃ log cleanup ┃" in text
        else:
            assert any(line.startswith("table: lake/") for line in lines)
            assert "  log cleanup: " in text
        # Each deleted row is dropped once: by the purge, or by the compaction after it.
        dropped = re.findall(r"(purge|compaction): would rewrite .*?dropping (\d+)", joined)
        assert [step for step, _ in dropped] == ["purge", "compaction"]
        assert sum(int(rows) for _, rows in dropped) == DELETED
    elif name == "tables":
        assert lines[0] == f"Tables under {PREFIX}" and str(cwd) not in text
        relative = TABLE.removeprefix(f"{PREFIX}/")
        if "┃" in text:
            assert "┃ table" in text and "┃ status" in text
            assert any(line.startswith(f"│ {relative} ") for line in lines)
        else:
            assert f"table: {relative}" in " ".join(line.strip() for line in lines)
        assert lines[-1] == "1 table: 1 ok; 1 gate checked, 0 failed; exit code 0 (ok)"
    elif name == "vacuum":
        assert lines[0].startswith("dry run: vacuum of version")
        assert "Files to delete" in lines
    elif name == "restore":
        assert lines[0].startswith("dry run: restore version 1") and "Plan" in lines
        assert any(line.startswith("would re-add") for line in lines)


WIDTHS = {"unset": 120, "80": 80, "200": 200}


def _environ(columns: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env.pop("COLUMNS", None)
    if columns != "unset":
        env["COLUMNS"] = columns
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _in_process(args: list[str], columns: str, cwd: Path) -> str:
    env: dict[str, str | None] = {"COLUMNS": None if columns == "unset" else columns}
    env |= {"FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner(env=env).invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)
    assert result.exit_code == 0, result.output
    return result.stdout


def _piped(args: list[str], columns: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dvtool", *args],
        cwd=cwd,
        env=_environ(columns),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("name", COMMANDS)
def test_in_process_output_fits_columns(workdir: Path, name: str, columns: str) -> None:
    text = _in_process(COMMANDS[name], columns, workdir)
    _check_layout(name, text, WIDTHS[columns], workdir)


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("name", COMMANDS)
def test_piped_output_fits_columns(workdir: Path, name: str, columns: str) -> None:
    text = _piped(COMMANDS[name], columns, workdir)
    _check_layout(name, text, WIDTHS[columns], workdir)
    if columns == "unset":  # the same text as in-process (vacuum's cutoff is "now")
        same = _in_process(COMMANDS[name], "unset", workdir)
        assert TIME.sub("T", text) == TIME.sub("T", same)


def test_json_output_is_unchanged_by_columns(workdir: Path) -> None:
    args = [*COMMANDS["history"], "--json"]
    assert _piped(args, "80", workdir) == _piped(args, "200", workdir)
    assert max(_widths(_piped([*COMMANDS["files"], "--json"], "80", workdir))) > 80


def _on_terminal(args: list[str], cwd: Path, columns: int = 80) -> str:
    """What dvtool prints on a pseudo-terminal `columns` wide (COLUMNS unset: rich asks the
    terminal), colour codes removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = _environ("unset") | {"TERM": "xterm-256color"}
    process = subprocess.Popen(
        [sys.executable, "-m", "dvtool", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError as e:  # EIO: the process closed the terminal
            assert e.errno == errno.EIO
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    raw = b"".join(chunks).decode()
    assert "\x1b[1m" in raw  # bold: rich drew for a terminal
    return ANSI.sub("", raw).replace("\r\n", "\n")


@pytest.mark.parametrize("name", ["history", "files", "maintain", "inspect", "tables"])
def test_terminal_output_fits_the_terminal(workdir: Path, name: str) -> None:
    text = _on_terminal(COMMANDS[name], workdir)
    _check_layout(name, text, 80, workdir)
