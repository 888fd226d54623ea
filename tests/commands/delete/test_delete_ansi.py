"""`dvtool delete --where "name > 5"` on a string column, as Spark 4 (ANSI mode) runs it.

Spark reads `name` as a BIGINT there and fails the statement on the first value that is no
number (CAST_INVALID_INPUT; tests/predicate/test_spark_ansi.py checks the rules against a
live Spark session). dvtool fails the same way, before anything is written: exit 2, a
two-line message naming the column, the value and the file, the table untouched. On a table
whose strings all hold numbers, it deletes exactly the rows whose number is above 5.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.cli import cli
from dvtool.commands.enable import run_enable
from dvtool.delta.log.reader import open_log
from dvtool.errors import InvalidInputError


def _write(path: Path, batches: list[list[tuple[int, str | None]]]) -> Path:
    """A deltalake table of `id`, `name`, one file per batch."""
    for batch in batches:
        ids, names = zip(*batch, strict=True)
        data = pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})
        write_deltalake(str(path), data, mode="append")
    return path


def _tree(path: Path) -> dict[str, str]:
    """Every file under the table with its content hash."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _rows(path: Path) -> list[tuple[int, str | None]]:
    """The table's rows as deltalake reads them (DataFusion applies deletion vectors)."""
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t")
    table = pa.table(result.read_all())
    return sorted(zip(table["id"].to_pylist(), table["name"].to_pylist(), strict=True))


@pytest.mark.parametrize("enable", [False, True], ids=["cow", "dv"])
def test_a_name_that_is_no_number_fails_and_writes_nothing(tmp_path: Path, enable: bool) -> None:
    table = _write(tmp_path / "t", [[(1, "1"), (2, "7")], [(3, "8"), (4, "abc"), (5, None)]])
    if enable:
        run_enable(open_log(str(table)))
    before, rows = _tree(table), _rows(table)
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "name > 5"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 2, result.output
    message, hint = lines
    assert "name" in message and "'abc'" in message and "BIGINT" in message
    assert ".parquet" in message and "CAST_INVALID_INPUT" in message
    assert "'5'" in hint and "try_cast(name AS BIGINT)" in hint
    assert _tree(table) == before  # no data file, DV file or commit written
    assert _rows(table) == rows


def test_json_output_reports_the_usage_error(tmp_path: Path) -> None:
    table = _write(tmp_path / "t", [[(1, "x")]])
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "name = 5", "--json"])
    assert result.exit_code == 2, result.output
    assert '"kind": "usage"' in result.output and "'x'" in result.output


@pytest.mark.parametrize("enable", [False, True], ids=["cow", "dv"])
def test_numeric_text_is_compared_as_numbers(tmp_path: Path, enable: bool) -> None:
    batches = [[(1, " 3"), (2, "10"), (3, "+6")], [(4, "5"), (5, None), (6, "-20"), (7, "\t9\n")]]
    table = _write(tmp_path / "t", batches)
    if enable:
        run_enable(open_log(str(table)))
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "name > 5"])
    assert result.exit_code == 0, result.output
    # As Spark: trimmed, signed integers compared as numbers ('10' > 5, not '10' < '5').
    assert _rows(table) == [(1, " 3"), (4, "5"), (5, None), (6, "-20")]


def test_try_cast_and_string_literals_delete_without_failing(tmp_path: Path) -> None:
    table = _write(tmp_path / "t", [[(1, "7"), (2, "abc"), (3, "4")]])
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "try_cast(name AS INT) > 5"])
    assert result.exit_code == 0, result.output
    assert _rows(table) == [(2, "abc"), (3, "4")]
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "name > '5'"])
    assert result.exit_code == 0, result.output
    assert _rows(table) == [(3, "4")]


def test_a_string_partition_value_that_is_no_number_fails_the_plan(tmp_path: Path) -> None:
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "part": pa.array(["7", "x"])})
    write_deltalake(str(tmp_path / "t"), data, partition_by=["part"])
    table = tmp_path / "t"
    before = _tree(table)
    result = CliRunner().invoke(cli, ["delete", str(table), "--where", "part > 5"])
    assert result.exit_code == 2, result.output
    assert "'x'" in result.output and "a partition value of part=x/" in result.output
    assert _tree(table) == before


def test_the_error_names_the_file_through_the_api(tmp_path: Path) -> None:
    from dvtool.commands.delete.command import DeleteRequest, run_delete

    table = _write(tmp_path / "t", [[(1, "1")], [(2, "two")]])
    with pytest.raises(InvalidInputError) as caught:
        run_delete(open_log(str(table)), DeleteRequest("name = 1"))
    assert caught.value.value == "two" and caught.value.where is not None
    assert caught.value.where.endswith(".parquet")
