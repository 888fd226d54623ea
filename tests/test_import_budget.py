"""What the start-up of a command imports: only what the command needs.

Start-up is most of what a user waits for on a small table (`dvtool inspect` of an 8-row
table spends ~10 ms on the table and the rest importing), so each command below runs in a
fresh interpreter (the CLI entry `dvtool.cli.main`, from a temporary directory) that then
reports `sys.modules`; the modules a command must not import are listed per command, with
the reason. This tests what is imported, not how long it takes (scripts/bench_startup.py
measures that), so it holds on any machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dvtool
from tests.oracles import GOLDEN

REPO = Path(__file__).resolve().parent.parent

# Forbidden in every command below (none uses Spark or an object store), and sqlglot in those
# without a --where predicate:
NEVER = frozenset(
    {
        # pyarrow imports pandas (0.1-0.2 s), when installed, the first time it converts a
        # Python object (pa.array, pa.scalar, a Python number given to a compute function);
        # dvtool converts through dvtool.arrays.arrow_values instead. Installed with the Spark
        # extras, so this venv (test extras) has it.
        "pandas",
        # Only the Spark engine imports it, when a command runs on Spark.
        "pyspark",
        # The SQL parser of --where predicates (delete, optimize --where).
        "sqlglot",
        # fsspec backends of object stores: only for s3://, gs://, abfs:// tables.
        "s3fs",
        "gcsfs",
        "adlfs",
        # Import pandas themselves (pyarrow.acero imports pyarrow.dataset, and pyarrow._dataset
        # converts a Python True when imported): predicates are evaluated with acero's compiled
        # module, pyarrow._acero, which imports neither (dvtool.predicate.arrow).
        "pyarrow.dataset",
        "pyarrow.acero",
        # Iceberg's library (and its pydantic models): only an Iceberg table needs them;
        # detecting a Delta table (dvtool.table) imports neither.
        "pyiceberg",
        "pydantic",
    }
)
# `dvtool --help`: click renders it from the command definitions; no table is opened.
HELP_FORBIDDEN = NEVER | {
    "pyarrow",  # every table is read through it; help reads none
    "numpy",
    "fsspec",  # the storage layer
    "rich",  # click prints the help itself
    "dvtool.delta.log.reader",
}
# Reading the small table: JSON commits only, no DV read, no data file opened.
_SMALL_TABLE = {
    # A few file actions from JSON commits are summed up as parsed (inspect_summary): the
    # file table, and pyarrow with numpy (~0.1 s of start-up), are not built.
    "pyarrow",
    "numpy",
    "dvtool.delta.protocol.file_actions",
    "pyarrow.parquet",  # for checkpoints, data files and their footers: the table has none
    "pyarrow.fs",
    "dvtool.delta.protocol.checkpoint",  # the checkpoint reader
    "dvtool.delta.protocol.checkpoint_build",  # and builder (a commit that writes a checkpoint)
    "pyroaring",  # the DV codec: DVs are only read by --files and --verify
    "dvtool.delta.dvstore",
    "dvtool.data_files",  # footers: --count-rows and --verify
    # fsspec (with asyncio, ~25 ms): a local table without storage options is read through
    # dvtool.storage.local_files on `os`; object stores, memory:// and options need fsspec.
    "fsspec",
    # ~11 ms: only the checks of object-store backend versions (commits) need it.
    "importlib.metadata",
}
# `dvtool inspect T --json`: one json.dumps of the result; rich only draws tables.
INSPECT_JSON_FORBIDDEN = NEVER | _SMALL_TABLE | {"rich"}
# `dvtool inspect T` off a terminal (stdout a pipe or a file, colour not forced): the summary's
# tables are drawn as rich would draw them there, without rich (~30 ms; dvtool.render.inspect).
INSPECT_HUMAN_FORBIDDEN = NEVER | _SMALL_TABLE | {"rich"}
# On a terminal rich draws them; the progress bar (rich.progress) comes only with a task
# (--verify).
INSPECT_TERMINAL_FORBIDDEN = NEVER | _SMALL_TABLE | {"rich.progress"}
# `dvtool inspect --json` of a table with a classic parquet checkpoint: the checkpoint reader
# and pyarrow.parquet are needed now; the checkpoint builder, the DV codec and rich still not.
INSPECT_CHECKPOINT_FORBIDDEN = NEVER | {
    "rich",
    "pyroaring",
    "dvtool.delta.dvstore",
    "dvtool.delta.protocol.checkpoint_build",
}
# `dvtool delete T --where ...`: the predicate is parsed (sqlglot), checked against statistics
# and evaluated on the rows, and still pandas stays out (issue 12).
DELETE_FORBIDDEN = NEVER - {"sqlglot"}

REPORT = """
import contextlib, io, json, sys
from dvtool.cli import main

out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(sys.argv[2:])
        code = 0
    except SystemExit as e:
        code = e.code or 0
with open(sys.argv[1], "w") as report:
    json.dump({"exit": code, "stdout": out.getvalue(), "modules": sorted(sys.modules)}, report)
"""


@pytest.fixture(scope="module")
def small_dv_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 rows in one file written by deltalake, then a DV deleting 3 of them."""
    root = tmp_path_factory.mktemp("budget") / "T"
    data = pa.table(
        {
            "id": pa.array(range(8), pa.int64()),
            "name": pa.array([f"row-{i}" for i in range(8)], pa.string()),
        }
    )
    write_deltalake(str(root), data, configuration={"delta.enableDeletionVectors": "true"})
    result = dvtool.delete(root, "id % 3 = 0")
    assert result.mode == "dv" and result.metrics["numDeletedRows"] == 3
    return root


def _run_cli(args: list[str], cwd: Path, **environ: str) -> dict[str, Any]:
    """Run the CLI in a fresh interpreter in `cwd`; its exit code, stdout and sys.modules.
    stdout is a string (no terminal), colour not forced unless `environ` says so."""
    report = cwd / "modules.json"
    forcing = ("FORCE_COLOR", "TTY_COMPATIBLE")
    env = {k: v for k, v in os.environ.items() if k not in forcing} | environ
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", REPORT, str(report), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(report.read_text())
    report.unlink()
    return result


def _loaded(modules: list[str], forbidden: frozenset[str] | set[str]) -> list[str]:
    return sorted(m for m in forbidden if m in modules)


def test_help_imports_no_table_machinery(tmp_path: Path) -> None:
    run = _run_cli(["--help"], tmp_path)
    assert run["exit"] == 0 and "inspect" in run["stdout"]
    assert "click" in run["modules"]
    assert _loaded(run["modules"], HELP_FORBIDDEN) == []


def test_inspect_json_imports_no_pandas_and_no_rich(small_dv_table: Path) -> None:
    run = _run_cli(["inspect", "T", "--json"], small_dv_table.parent)
    assert run["exit"] == 0
    summary = json.loads(run["stdout"])
    assert (summary["files_with_dvs"], summary["deleted_rows"]) == (1, 3)
    assert {"dvtool.delta.log.reader", "dvtool.commands.inspect.summary"} <= set(run["modules"])
    assert _loaded(run["modules"], INSPECT_JSON_FORBIDDEN) == []


def test_inspect_human_output_off_a_terminal_imports_no_rich(small_dv_table: Path) -> None:
    run = _run_cli(["inspect", "T"], small_dv_table.parent)
    assert run["exit"] == 0
    assert re.search(r"│ deleted rows +│ +3 \(37\.50%\) │", run["stdout"])
    assert "\x1b[" not in run["stdout"]
    assert "dvtool.render.inspect" in run["modules"]
    assert _loaded(run["modules"], INSPECT_HUMAN_FORBIDDEN) == []


def test_inspect_human_output_on_a_terminal_is_rich_s(small_dv_table: Path) -> None:
    run = _run_cli(["inspect", "T"], small_dv_table.parent, FORCE_COLOR="1")
    assert run["exit"] == 0 and "deleted rows" in run["stdout"]
    assert "\x1b[1m" in run["stdout"]  # bold: rich, for a terminal
    assert {"rich", "rich.table"} <= set(run["modules"])
    assert _loaded(run["modules"], INSPECT_TERMINAL_FORBIDDEN) == []


def test_inspect_of_a_parquet_checkpoint_imports_no_pandas(tmp_path: Path) -> None:
    table = GOLDEN / "basic-dv-with-checkpoint"
    run = _run_cli(["inspect", str(table), "--json"], tmp_path)
    assert run["exit"] == 0 and json.loads(run["stdout"])["version"] == 46
    assert {"pyarrow.parquet", "dvtool.delta.protocol.checkpoint"} <= set(run["modules"])
    assert _loaded(run["modules"], INSPECT_CHECKPOINT_FORBIDDEN) == []


def _writable_copy(table: Path, tmp_path: Path) -> Path:
    """A copy of `table` at tmp_path/T, for the commands that write."""
    copy = tmp_path / "T"
    shutil.copytree(table, copy)
    return copy


@pytest.mark.parametrize(
    "options", [[], ["--dry-run"], ["--mode", "cow"]], ids=["dv", "dry-run", "cow"]
)
def test_delete_where_imports_no_pandas(
    small_dv_table: Path, tmp_path: Path, options: list[str]
) -> None:
    _writable_copy(small_dv_table, tmp_path)
    where = "id IN (1, 4) OR name LIKE '%7'"  # rows 1, 4 and 7 (0, 3 and 6 already deleted)
    run = _run_cli(["delete", "T", "--where", where, "--json", *options], tmp_path)
    assert run["exit"] == 0
    assert json.loads(run["stdout"])["metrics"]["numDeletedRows"] == 3
    assert {"sqlglot", "pyarrow._acero", "pyarrow.parquet"} <= set(run["modules"])
    assert _loaded(run["modules"], DELETE_FORBIDDEN) == []


def test_optimize_purge_and_compaction_import_no_pandas(
    small_dv_table: Path, tmp_path: Path
) -> None:
    table = _writable_copy(small_dv_table, tmp_path)
    purge = _run_cli(["optimize", "T", "--purge", "--json"], tmp_path)
    assert purge["exit"] == 0
    assert json.loads(purge["stdout"])["metrics"]["numDeletionVectorRowsRemoved"] == 3
    assert _loaded(purge["modules"], NEVER) == []

    more = pa.table({"id": pa.array([8, 9], pa.int64()), "name": pa.array(["a", "b"])})
    write_deltalake(str(table), more, mode="append")
    compaction = _run_cli(["optimize", "T", "--json"], tmp_path)
    assert compaction["exit"] == 0
    (compacted,) = json.loads(compaction["stdout"])["bins"]
    assert (len(compacted["inputs"]), compacted["input_rows"]) == (2, 7)
    assert _loaded(compaction["modules"], NEVER) == []


def test_forbidden_modules_are_detected(small_dv_table: Path) -> None:
    """The check is not vacuous: a run that does import a forbidden module is caught."""
    run = _run_cli(["inspect", "T", "--json", "--files"], small_dv_table.parent)
    assert _loaded(run["modules"], INSPECT_JSON_FORBIDDEN) == [
        "dvtool.delta.dvstore",
        "dvtool.delta.protocol.file_actions",
        "numpy",
        "pyarrow",
        "pyroaring",
    ]
