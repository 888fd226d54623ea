"""Exit codes and error reports: one code per kind of error, the JSON error object, -v, Ctrl-C.

Each kind of `dvtool.errors.EXIT_CODES` is provoked the way a user meets it, through the CLI,
and checked for its exit code, its one-line message on stderr and, with `--json`, the
`{"error": {"code", "kind", "message", "hint"}}` document on stdout.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from dvtool import interrupts
from dvtool.errors import EXIT_CODES, DvtoolError
from tests.cli_helpers import all_output, error_object, run
from tests.oracles import GOLDEN

README = Path(__file__).resolve().parents[2] / "README.md"
SMALL = "table-with-dv-small"


def _table(tmp_path: Path) -> Path:
    table = tmp_path / "t"
    shutil.copytree(GOLDEN / SMALL, table)
    return table


def _corrupt_dv(table: Path) -> Path:
    """Flip a byte of the table's DV file inside the DV's bytes (its checksum no longer
    holds), as a bad disk or a truncated copy would."""
    [dv_file] = table.glob("deletion_vector_*.bin")
    data = bytearray(dv_file.read_bytes())
    data[-8] ^= 0xFF
    dv_file.write_bytes(bytes(data))
    return dv_file


def test_readme_documents_every_exit_code() -> None:
    """README.md's "Exit codes" table lists exactly EXIT_CODES, in order."""
    section = README.read_text().split("### Exit codes", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `([a-z-]+)` \|", section, flags=re.M)
    assert [(int(code), kind) for code, kind in rows] == [
        (code, kind) for kind, (code, _) in EXIT_CODES.items()
    ]


def test_distinct_codes() -> None:
    codes = [code for code, _ in EXIT_CODES.values()]
    assert len(codes) == len(set(codes))


def _json_error(*args: str | Path, kind: str) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == EXIT_CODES[kind][0], all_output(result)
    error = error_object(result)
    assert error["kind"] == kind
    assert "Traceback" not in all_output(result)
    return error


def test_not_found(tmp_path: Path) -> None:
    error = _json_error("inspect", tmp_path / "nope", kind="not-found")
    assert str(tmp_path / "nope") in error["message"] and error["hint"]


def test_usage_from_dvtool_and_from_click(tmp_path: Path) -> None:
    _json_error("inspect", GOLDEN / SMALL, "--check", "bogus=1", kind="usage")
    error = _json_error("inspect", GOLDEN / SMALL, "--no-such-option", kind="usage")
    assert "--no-such-option" in error["message"]
    error = _json_error("delete", GOLDEN / SMALL, "--where", "nope = 1", kind="usage")
    assert "nope" in error["message"]


def test_integrity(tmp_path: Path) -> None:
    table = _table(tmp_path)
    last = sorted((table / "_delta_log").glob("*.json"))[-1]
    last.write_text(last.read_text() + "{not json\n")
    error = _json_error("inspect", table, kind="integrity")
    assert last.name in error["message"]


def test_refused(tmp_path: Path) -> None:
    error = _json_error("vacuum", _table(tmp_path), "--retain", "0h", kind="refused")
    assert "--force" in (error["hint"] or "") + error["message"]


def test_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage call that fails (an I/O error, injected writing the DV file) is `storage`."""
    table = _table(tmp_path)
    monkeypatch.setenv("DVTOOL_FAULT", "dv-file:fail")
    monkeypatch.setattr("dvtool.faults._parsed", ("", []))  # rules count visits per process
    error = _json_error("delete", table, "--where", "value = 1", kind="storage")
    assert "cannot write" in error["message"] and ".bin" in error["message"]


def test_check_failed_is_a_result_not_an_error() -> None:
    result = run("inspect", GOLDEN / SMALL, "--check", "max-files=0", "--json")
    assert result.exit_code == EXIT_CODES["check-failed"][0]
    doc = json.loads(result.stdout)
    assert doc["checks"][0]["passed"] is False and "error" not in doc


def _raise(error: BaseException) -> Any:
    def raiser(*_: object, **__: object) -> None:
        raise error

    return raiser


def test_internal_error_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dvtool.commands.inspect.command.run_inspect", _raise(RuntimeError("boom")))
    error = _json_error("inspect", GOLDEN / SMALL, kind="internal")
    assert "RuntimeError: boom" in error["message"] and "-v" in error["hint"]


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dvtool.commands.inspect.command.run_inspect", _raise(KeyboardInterrupt()))
    result = run("inspect", GOLDEN / SMALL)
    assert result.exit_code == 130
    assert "interrupted" in result.stderr and "Traceback" not in all_output(result)
    assert error_object(run("inspect", GOLDEN / SMALL, "--json"))["kind"] == "interrupted"


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "inspect", "TABLE", "--version", "999"],
        ["inspect", "TABLE", "--version", "999", "-v"],
        ["inspect", "-v", "TABLE", "--version", "999"],
        ["inspect", "TABLE", "--verbose", "--version", "999"],
    ],
    ids=["before", "after", "between", "long"],
)
def test_verbose_anywhere(argv: list[str]) -> None:
    result = run(*[str(GOLDEN / SMALL) if a == "TABLE" else a for a in argv])
    assert result.exit_code == EXIT_CODES["not-found"][0]
    assert "Traceback (most recent call last)" in result.stderr


def test_without_verbose_no_traceback() -> None:
    result = run("inspect", str(GOLDEN / SMALL), "--version", "999")
    assert "Traceback" not in all_output(result)


@pytest.mark.parametrize(
    "args",
    [["optimize", "TABLE", "--target-size", "12xb"], ["optimize", "TABLE", "--target-size", "0"]],
    ids=["not-a-size", "zero"],
)
def test_bad_sizes_are_usage_errors(args: list[str]) -> None:
    error = _json_error(*[str(GOLDEN / SMALL) if a == "TABLE" else a for a in args], kind="usage")
    assert "--target-size" in error["message"]


# -- every kind: what, where, and what to do, in two lines --------------------------------------


def _two_lines(result: Result) -> tuple[str, str]:
    """The error report on stderr: exactly two lines, `error: WHAT (WHERE)` and the hint."""
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    return lines[0], lines[1]


def _conflicting_delete(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a delete commit on `table` while a rewrite has written its files, as a writer in
    another process would: the rewrite's inputs change under it."""
    from dvtool import faults
    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.delta.log.reader import open_log

    reached = faults.reached
    done: list[bool] = []

    def concurrent(step: str) -> None:
        if step == "data-files-written" and not done:
            done.append(True)
            run_delete(open_log(str(table)), DeleteRequest("value = 5", "dv"))
        reached(step)

    monkeypatch.setattr(faults, "reached", concurrent)


def _refuse_local_writes(monkeypatch: pytest.MonkeyPatch, code: int = errno.EROFS) -> None:
    """Local writes fail with OSError `code` (default: as on a read-only mount): the OS
    refuses to create dvtool's temp file, naming it. Simulated at the storage layer's own
    `open`, because the tests run as root, for whom permission bits do not stop a write,
    and mounting a read-only file system needs privileges a CI runner may lack (`chattr +i`
    is tried in test_cli_error_cases.py)."""
    from dvtool.storage import local_disk

    def refuse(path: str, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "x" in mode or "w" in mode:
            raise OSError(code, os.strerror(code), path)
        return open(path, mode, *args, **kwargs)

    monkeypatch.setattr(local_disk, "open", refuse, raising=False)


def _kind_case(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The command line that meets an error of `kind`, with what it needs set up."""
    table = _table(tmp_path)
    if kind == "error":
        monkeypatch.setattr(
            "dvtool.commands.inspect.command.run_inspect", _raise(DvtoolError("boom"))
        )
    elif kind == "conflict":
        _conflicting_delete(table, monkeypatch)
        return ["optimize", str(table), "--purge"]
    elif kind == "storage":
        _refuse_local_writes(monkeypatch)
        return ["delete", str(table), "--where", "value = 1"]
    elif kind == "integrity":
        _corrupt_dv(table)
        return ["delete", str(table), "--where", "value = 1"]
    elif kind == "refused":
        return ["vacuum", str(table), "--retain", "0h"]
    elif kind == "usage":
        return ["optimize", str(table), "--target-size", "12xb"]
    elif kind == "not-found":
        return ["inspect", str(tmp_path / "nope")]
    elif kind == "internal":
        monkeypatch.setattr(
            "dvtool.commands.inspect.command.run_inspect", _raise(RuntimeError("boom"))
        )
    elif kind in ("interrupted", "terminated"):
        stop = interrupts.Terminated() if kind == "terminated" else KeyboardInterrupt()
        monkeypatch.setattr("dvtool.commands.inspect.command.run_inspect", _raise(stop))
    return ["inspect", str(table)]


# kind -> words of the second line, the hint: what to do.
WHAT_TO_DO = {
    "error": "Run the command again with -v",
    "usage": "See `dvtool optimize --help`",
    "conflict": "run the command again",
    "not-found": "Check the table path",
    "integrity": "--verify` lists every damaged file",
    "refused": "--force",
    "storage": "a read-write mount",
    "internal": "Run with -v for the traceback.",
    "interrupted": "run the command again",
    "terminated": "run the command again",
}


NOT_ERRORS = ("ok", "check-failed", "broken-pipe")  # results, or nobody left to read a message


@pytest.mark.parametrize("kind", [k for k in EXIT_CODES if k not in NOT_ERRORS])
def test_every_error_kind_says_what_to_do(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each error kind of EXIT_CODES, met through the CLI: its exit code, a first line that
    says what and where, and a second line that says what to do (the JSON `hint`)."""
    argv = _kind_case(kind, tmp_path, monkeypatch)
    result = run(*argv)
    assert result.exit_code == EXIT_CODES[kind][0], all_output(result)
    _, hint = _two_lines(result)
    assert WHAT_TO_DO[kind] in hint
    assert "Traceback" not in all_output(result)


def test_check_failed_says_which_gate_and_by_how_much() -> None:
    """check-failed (3) is a result, not an error: the gate's line says what failed (its
    value against its limit), and nothing is reported on stderr."""
    result = run("inspect", GOLDEN / SMALL, "--check", "max-files=0")
    assert result.exit_code == EXIT_CODES["check-failed"][0]
    assert "check max-files: FAIL (actual 1, limit 0)" in result.stdout
    assert result.stderr == ""


def test_every_kind_is_covered() -> None:
    assert set(WHAT_TO_DO) | set(NOT_ERRORS) == set(EXIT_CODES)


@pytest.mark.parametrize("args", [["--files"], ["--files", "--json"], ["--history"]])
def test_stdout_closed_by_its_reader_is_broken_pipe(args: list[str], tmp_path: Path) -> None:
    """`dvtool inspect T | head -1`: the reader closed the pipe before dvtool wrote. dvtool
    exits 141 (as a program SIGPIPE stops), says nothing and shows no traceback (it was
    exit 70, an internal error, when the pipe broke mid-output)."""
    table = tmp_path / "t"
    shutil.copytree(GOLDEN / SMALL, table)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dvtool", "inspect", str(table), *args],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == EXIT_CODES["broken-pipe"][0], done.stderr
    assert done.stderr == b""


@pytest.mark.parametrize(
    ("flush_error", "gone"), [(BrokenPipeError(32, "EPIPE"), True), (None, False)]
)
def test_without_poll_a_failing_flush_tells_the_reader_is_gone(
    flush_error: OSError | None, gone: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows has no `select.poll`: a flush of stdout that fails again tells a closed pipe;
    one that succeeds leaves the BrokenPipeError a bug (exit 70)."""
    import select

    from dvtool import cli

    class Stdout:
        def fileno(self) -> int:
            return 1

        def flush(self) -> None:
            if flush_error is not None:
                raise flush_error

    monkeypatch.delattr(select, "poll", raising=False)
    monkeypatch.setattr(sys, "stdout", Stdout())
    assert cli._stdout_reader_gone() is gone
