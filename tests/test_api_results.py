"""The Python API gives what the CLI gives: `result.to_dict()` of `dvtool.inspect`, `enable`,
`delete`, `optimize` and `vacuum` equals the document `dvtool COMMAND --json` prints for the
same request (timings and clock readings aside), and an Airflow-style task reads it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dvtool
from dvtool.errors import TableNotFoundError
from tests.cli_helpers import run

CLOCK = {"scanTimeMs", "rewriteTimeMs", "executionTimeMs", "cutoff_ms", "commit_timestamp"}


def _table(root: Path, dvs: bool = True) -> Path:
    for k in range(3):
        data = pa.table({"id": pa.array(range(10 * k, 10 * (k + 1)), pa.int64())})
        config = {"delta.enableDeletionVectors": "true"} if dvs else None
        write_deltalake(str(root), data, mode="append", configuration=config)
    return root


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _without_clock(doc: Any) -> Any:
    """`doc` without timings and clock readings, and with new files' random UUIDs masked."""
    if isinstance(doc, dict):
        return {k: _without_clock(v) for k, v in doc.items() if k not in CLOCK}
    if isinstance(doc, list):
        return [_without_clock(v) for v in doc]
    return UUID.sub("UUID", doc) if isinstance(doc, str) else doc


def _cli_json(*args: str | Path) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _twin(tmp_path: Path, dvs: bool = True) -> tuple[Path, Path]:
    """Two byte-identical tables at the same depth, for a command that writes."""
    first = _table(tmp_path / "a" / "t", dvs)
    second = tmp_path / "b" / "t"
    shutil.copytree(first, second)
    return first, second


def _same(api: dict[str, Any], cli: dict[str, Any], first: Path, second: Path) -> None:
    text = json.dumps(_without_clock(cli)).replace(str(second), str(first))
    assert _without_clock(api) == json.loads(text)


def test_inspect(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    api = dvtool.inspect(table, files=True, history=5, checks={"max-files": 10})
    cli = _cli_json("inspect", table, "--files", "--history", "5", "--check", "max-files=10")
    assert api.to_dict() == cli
    assert api.exit_code == 0


def test_enable_delete_optimize_vacuum(tmp_path: Path) -> None:
    first, second = _twin(tmp_path, dvs=False)
    steps: list[tuple[Any, tuple[str, ...]]] = [
        (lambda t: dvtool.enable(t), ("enable",)),
        (lambda t: dvtool.delete(t, "id % 4 = 1"), ("delete", "--where", "id % 4 = 1")),
        (lambda t: dvtool.optimize(t, purge=True), ("optimize", "--purge")),
        (
            lambda t: dvtool.vacuum(t, retain="0h", force=True, dry_run=True),
            ("vacuum", "--retain", "0h", "--force", "--dry-run"),
        ),
    ]
    for api_call, argv in steps:
        api = api_call(first).to_dict()
        cli = _cli_json(argv[0], second, *argv[1:])
        _same(api, cli, first, second)


def test_an_airflow_style_task(tmp_path: Path) -> None:
    """What README's example does: gate, delete, purge when the ratio is high, XCom-able dicts."""
    table = _table(tmp_path / "t")

    def maintain(path: str) -> dict[str, Any]:
        deleted = dvtool.delete(path, "id < 5")
        summary = dvtool.inspect(path)
        purged = None
        if summary.summary and summary.summary.deleted_ratio > 0.1:
            purged = dvtool.optimize(path, purge=True).to_dict()
        return {"delete": deleted.to_dict(), "purge": purged}

    out = json.loads(json.dumps(maintain(str(table))))  # what an XCom stores
    assert out["delete"]["metrics"]["numDeletedRows"] == 5
    assert out["purge"]["metrics"]["numDeletionVectorsRemoved"] == 1
    assert dvtool.inspect(table).to_dict()["deleted_rows"] == 0


def test_errors_are_dvtool_errors(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        dvtool.inspect(tmp_path / "nowhere")
