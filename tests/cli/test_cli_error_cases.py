"""Errors as a new user meets them (issue 23): each says what, where and what to do.

Each case is built the way users run into it (a read-only or full disk, a data file deleted
by hand, a flipped byte in a DV file, a file given as TABLE, a numeric option mistyped,
options in the wrong order) and checked through the CLI for its exit code and both lines of
its report. Mistakes that used to pass silently (`optimize --purge --target-size`) are
refused; nothing prints an empty "Plan".
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.cli.test_cli_errors import SMALL, _corrupt_dv, _refuse_local_writes, _table, _two_lines
from tests.cli_helpers import all_output, error_object, run
from tests.oracles import GOLDEN, tree_hashes


def _log_files(table: Path) -> list[str]:
    return sorted(p.name for p in (table / "_delta_log").iterdir())


# -- storage: the file meant, never dvtool's temp file; what to do ------------------------------


@pytest.mark.parametrize(
    ("code", "what", "to_do"),
    [
        (errno.EROFS, "Read-only file system (errno 30)", "a read-write mount"),
        (errno.ENOSPC, "No space left on device (errno 28)", "Free space on the file system"),
        (errno.EACCES, "Permission denied (errno 13)", "write access to"),
    ],
    ids=["read-only", "disk-full", "permission-denied"],
)
def test_a_failed_local_write_names_the_file_and_what_to_do(
    code: int, what: str, to_do: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OS names dvtool's temp file (`.tmp-<uuid>.dvtool`); the user hears of the DV file
    the delete was writing, in the table they named, and how to get it written."""
    table = _table(tmp_path)
    _refuse_local_writes(monkeypatch, code)
    result = run("delete", table, "--where", "value = 1", "--json")
    assert result.exit_code == 8, all_output(result)
    first, hint = _two_lines(result)
    assert f"cannot write {table}/deletion_vector_" in first and first.endswith(what)
    assert to_do in hint and str(table) in hint
    assert ".tmp-" not in all_output(result) and "[Errno" not in all_output(result)
    assert error_object(result)["hint"] == hint


def test_immutable_directory_names_the_file_and_what_to_do(tmp_path: Path) -> None:
    """A real refusal by the kernel: the table directory made immutable (`chattr +i`, which
    stops root too, as the tests run). The checkpoint file is named, not the temp file."""
    table = _table(tmp_path)
    log_dir = table / "_delta_log"
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    if subprocess.run(["chattr", "+i", str(log_dir)], capture_output=True).returncode != 0:
        pytest.skip("this file system does not support immutable files")
    try:
        result = run("checkpoint", table)
    finally:
        subprocess.run(["chattr", "-i", str(log_dir)], check=True)
    assert result.exit_code == 8, all_output(result)
    first, hint = _two_lines(result)
    assert f"cannot write {log_dir}/" in first and "Operation not permitted (errno 1)" in first
    assert "chattr -i" in hint and str(log_dir) in hint
    assert ".tmp-" not in all_output(result)


# -- damage met by delete and optimize ----------------------------------------------------------


def test_a_missing_data_file_on_delete_is_damage(tmp_path: Path) -> None:
    table = _table(tmp_path)
    [data_file] = table.glob("*.parquet")
    data_file.unlink()  # deleted by hand, or by a vacuum of another tool
    result = run("delete", table, "--where", "value = 1")
    assert result.exit_code == 5, all_output(result)
    first, hint = _two_lines(result)
    assert f"data file {data_file} is missing: the table's log names it" in first
    assert f"`dvtool inspect {table} --verify` lists every damaged file" in hint
    assert "dvtool restore" in hint


@pytest.mark.parametrize(
    "argv",
    [["delete", "TABLE", "--where", "value = 1"], ["optimize", "TABLE", "--purge"]],
    ids=["delete", "optimize"],
)
def test_a_corrupt_dv_says_it_is_damage_and_how_to_find_the_rest(
    argv: list[str], tmp_path: Path
) -> None:
    table = _table(tmp_path)
    dv_file = _corrupt_dv(table)
    before = tree_hashes(table)
    result = run(*[str(table) if a == "TABLE" else a for a in argv])
    assert result.exit_code == 6, all_output(result)
    first, hint = _two_lines(result)
    assert "deletion vector checksum mismatch" in first and str(dv_file) in first
    assert f"`dvtool inspect {table} --verify`" in hint and "restore" in hint
    assert tree_hashes(table) == before
    verify = run("inspect", table, "--verify")
    assert verify.exit_code == 6 and "dv-checksum" in verify.stdout  # the hint holds


# -- what TABLE is ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["inspect"], ["vacuum"], ["delete", "--where", "x = 1"]])
def test_a_file_is_not_a_table(command: list[str], tmp_path: Path) -> None:
    """A file given as TABLE is `not-found` (5) like any other path without a table, not a
    storage error about `afile.txt/_delta_log/_last_checkpoint`."""
    afile = tmp_path / "afile.txt"
    afile.write_text("hello\n")
    result = run(command[0], afile, *command[1:])
    assert result.exit_code == 5, all_output(result)
    first, hint = _two_lines(result)
    assert first == f"error: no Delta table at {afile}: it is a file, not a directory"
    assert hint.startswith("Check the table path")


def test_a_missing_directory_says_so(tmp_path: Path) -> None:
    first, _ = _two_lines(run("inspect", tmp_path / "nope"))
    assert first.endswith(f"{tmp_path / 'nope'}: no such directory")


# -- option errors: one line and a hint, like every other error ---------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["inspect", "TABLE", "--limit", "-3"], "--limit"),
        (["inspect", "TABLE", "--version", "x"], "--version"),
        (["optimize", "TABLE", "--target-size", "abc"], "--target-size"),
        (["optimize", "TABLE", "--batch-size", "many"], "--batch-size"),
        (["maintain", "TABLE", "--purge-ratio", "2"], "--purge-ratio"),
        (["inspect", "TABLE", "--no-such-option"], "--no-such-option"),
    ],
    ids=["limit", "version", "target-size", "batch-size", "purge-ratio", "unknown"],
)
def test_option_errors_are_one_line_and_a_hint(args: list[str], option: str) -> None:
    argv = [str(GOLDEN / SMALL) if a == "TABLE" else a for a in args]
    result = run(*argv)
    assert result.exit_code == 2, all_output(result)
    first, hint = _two_lines(result)
    assert option in first and "Usage:" not in all_output(result)
    assert hint == f"See `dvtool {args[0]} --help` for its arguments and options."
    error = error_object(run(*argv, "--json"))
    assert error["kind"] == "usage" and error["hint"] == hint


def test_history_before_table_says_to_put_table_first() -> None:
    table = str(GOLDEN / SMALL)
    result = run("inspect", "--history", table)
    assert result.exit_code == 2, all_output(result)
    assert result.stderr.splitlines() == [
        f"error: invalid value for '--history': {table!r} is not a number of commits; "
        "put TABLE first: dvtool inspect TABLE --history [N]"
    ]
    assert run("inspect", table, "--history").exit_code == 0
    assert run("inspect", "--history", "3", table).exit_code == 0


# -- mistakes no longer accepted silently -------------------------------------------------------


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_purge_with_target_size_is_refused(dry_run: bool, tmp_path: Path) -> None:
    table = _table(tmp_path)
    before = tree_hashes(table)
    result = run("optimize", table, "--purge", "--target-size", "1MB", *["--dry-run"] * dry_run)
    assert result.exit_code == 2, all_output(result)
    first, hint = _two_lines(result)
    assert first == (
        "error: --target-size applies to compaction; --purge rewrites each file with a "
        "deletion vector as one file, as Delta's REORG ... APPLY (PURGE) does"
    )
    assert "Drop --target-size" in hint
    assert result.stdout == "" and tree_hashes(table) == before


@pytest.mark.parametrize("purge", [True, False], ids=["purge", "compaction"])
def test_a_dry_run_with_nothing_to_do_prints_no_empty_plan(purge: bool, tmp_path: Path) -> None:
    table = _table(tmp_path)
    assert run("optimize", table, "--purge").exit_code == 0  # no DV left to purge
    result = run("optimize", table, *["--purge"] * purge, "--dry-run")
    assert result.exit_code == 0, all_output(result)
    assert "Plan" not in result.stdout and "inputs" not in result.stdout
    assert "0 files (0 B) into 0 new files" in result.stdout


def test_append_only_refusal_says_what_dvtool_can_do(tmp_path: Path) -> None:
    table = tmp_path / "append-only"
    write_deltalake(
        str(table), pa.table({"id": [1, 2, 3]}), configuration={"delta.appendOnly": "true"}
    )
    result = run("delete", table, "--where", "id = 1")
    assert result.exit_code == 7, all_output(result)
    first, hint = _two_lines(result)
    assert "append-only (delta.appendOnly=true)" in first
    assert "ALTER TABLE" not in all_output(result)
    assert "optimize, vacuum and checkpoint still work" in hint
    assert "the table's owner must set delta.appendOnly=false with their engine" in hint


# -- maintain -----------------------------------------------------------------------------------


@pytest.mark.parametrize("recursive", [False, True], ids=["table", "prefix"])
def test_maintain_names_a_missing_path_once(
    recursive: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("maintain", *["-r"] * recursive, "nope")
    assert result.exit_code == 5, all_output(result)
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert error.count("nope") == 1, error
    doc = json.loads(run("maintain", *["-r"] * recursive, "nope", "--json").stdout)
    assert doc["tables"][0]["error"]["hint"]
