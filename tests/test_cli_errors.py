"""Exit codes and error reports: one code per kind of error, the JSON error object, -v, Ctrl-C.

Each kind of `dvtool.errors.EXIT_CODES` is provoked the way a user meets it, through the CLI,
and checked for its exit code, its one-line message on stderr and, with `--json`, the
`{"error": {"code", "kind", "message", "hint"}}` document on stdout.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from dvtool.errors import EXIT_CODES
from tests.cli_helpers import all_output, error_object, run
from tests.oracles import GOLDEN

README = Path(__file__).resolve().parent.parent / "README.md"
SMALL = "table-with-dv-small"


def _table(tmp_path: Path) -> Path:
    table = tmp_path / "t"
    shutil.copytree(GOLDEN / SMALL, table)
    return table


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
    monkeypatch.setattr("dvtool.commands.inspect.run_inspect", _raise(RuntimeError("boom")))
    error = _json_error("inspect", GOLDEN / SMALL, kind="internal")
    assert "RuntimeError: boom" in error["message"] and "-v" in error["hint"]


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dvtool.commands.inspect.run_inspect", _raise(KeyboardInterrupt()))
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
