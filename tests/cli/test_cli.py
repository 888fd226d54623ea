"""`dvtool inspect` through the command line: options, JSON document, exit codes, errors.

Every number dvtool prints is checked against an independent oracle: the JSON commits of the
golden tables read directly, parquet footers read with pyarrow, the file list of deltalake
and the rows polars returns (which applies deletion vectors through delta-kernel-rs).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import deltalake
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import Result

import dvtool
from tests.cli_helpers import all_output, error_object, run, run_wide
from tests.oracles import GOLDEN, copy_golden, z85_uuid

# As tests/conftest.py: ../shared/golden beside the repository; CI always has it, so a
# missing directory fails the tests rather than skipping them.

SMALL = "table-with-dv-small"
PARTITIONED = "dv-partitioned-with-checkpoint/delta"
HISTORY_TABLE = "basic-dv-with-checkpoint"
TWO_VERSIONS = "basic-dv-no-checkpoint"
BAD = "bad/dv-file-missing"

# Tables whose protocol polars can read (it refuses columnMapping, v2Checkpoint).
POLARS_READABLE = [
    "table-with-dv-small",
    "with-short-dv",
    "basic-dv-no-checkpoint",
    "basic-dv-with-checkpoint",
    "dv-partitioned-with-checkpoint/delta",
    "log-replay-dv-key-cases/delta",
    "cdf-table-with-dv",
    "cdf-table-with-cdc-and-dvs",
    "compacted-log-files-table",
    "v1-multi-part-partitioned-struct-stats-only",
    "app-txn-checkpoint",
    "table-without-dv-small",
    "basic_partitioned",
]
DV_TABLES = [
    "table-with-dv-small",
    "with-short-dv",
    "basic-dv-no-checkpoint",
    "basic-dv-with-checkpoint",
    "dv-partitioned-with-checkpoint/delta",
    "dv-with-columnmapping/delta",
    "log-replay-dv-key-cases/delta",
    "cdf-table-with-dv",
    "cdf-table-with-cdc-and-dvs",
    "compacted-log-files-table",
    "v1-multi-part-partitioned-struct-stats-only",
]

README_KEYS = {
    "version",
    "table_id",
    "name",
    "location",
    "commit_timestamp",
    "operation",
    "protocol",
    "reader_features",
    "writer_features",
    "configuration",
    "partition_columns",
    "column_mapping_mode",
    "schema",
    "num_files",
    "size_bytes",
    "physical_rows",
    "logical_rows",
    "deleted_rows",
    "deleted_ratio",
    "files_with_dvs",
    "files_without_stats",
    "row_counts_exact",
    "dv_storage",
    "deleted_ratio_histogram",
    "num_tombstones",
}
README_CHECKS = [
    "max-deleted-ratio",
    "max-deleted-rows",
    "max-dv-files",
    "max-files-with-dvs",
    "max-inline-dvs",
    "max-files",
    "max-files-without-stats",
    "max-small-files",
    "max-log-files",
    "min-avg-file-size",
]


# -- running the CLI -------------------------------------------------------------------------


def run_json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


# -- independent oracles ---------------------------------------------------------------------


def _commit_path(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def _actions(table: Path, version: int) -> list[dict[str, Any]]:
    lines = _commit_path(table, version).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _commit_info(table: Path, version: int) -> dict[str, Any]:
    return next(a["commitInfo"] for a in _actions(table, version) if "commitInfo" in a)


def _dv_key(dv: dict[str, Any] | None) -> str:
    if not dv:
        return ""
    offset = dv.get("offset")
    return dv["storageType"] + dv["pathOrInlineDv"] + ("" if offset is None else f"@{offset}")


def _live_adds(table: Path, version: int | None = None) -> dict[str, dict[str, Any]]:
    """Replay the JSON commits 0..version by (path, DV id): the live add actions by path."""
    commits = sorted(int(p.name[:20]) for p in (table / "_delta_log").glob("[0-9]" * 20 + ".json"))
    last = commits[-1] if version is None else version
    assert commits[: last + 1] == list(range(last + 1)), "the JSON commits must be complete"
    live: dict[tuple[str, str], dict[str, Any]] = {}
    for v in range(last + 1):
        for action in _actions(table, v):
            if "remove" in action:
                r = action["remove"]
                live.pop((r["path"], _dv_key(r.get("deletionVector"))), None)
            if "add" in action:
                a = action["add"]
                live[(a["path"], _dv_key(a.get("deletionVector")))] = a
    by_path = {path: add for (path, _), add in live.items()}
    assert len(by_path) == len(live)
    return by_path


def _footer_rows(path: Path | str) -> int:
    return int(pq.ParquetFile(path).metadata.num_rows)


def _local(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _physical_rows(table: Path, version: int | None = None) -> int:
    """Sum of the parquet footers of the live files deltalake lists."""
    uris = deltalake.DeltaTable(str(table), version=version).file_uris()
    return sum(_footer_rows(_local(u)) for u in uris)


def _logical_rows(table: Path, version: int | None = None) -> int:
    return pl.read_delta(str(table), version=version).height


def _dv_path(table: Path, dv: dict[str, Any]) -> Path:
    prefix, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
    return table / prefix / f"deletion_vector_{z85_uuid(encoded)}.bin"


# -- inspect: summary ------------------------------------------------------------------------


def _value_cell(output: str, label: str) -> str:
    """The last cell of the rich table row whose first cell is `label`."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] == label:
            return cells[-1]
    raise AssertionError(f"no row {label!r} in:\n{output}")


def test_inspect_rich_output_shows_the_summary() -> None:
    table = GOLDEN / SMALL
    result = run("inspect", table)
    assert result.exit_code == 0, all_output(result)
    out = result.stdout
    adds = _live_adds(table)
    physical = _physical_rows(table)
    logical = _logical_rows(table)
    deleted = physical - logical
    assert (physical, logical, deleted) == (10, 8, 2)  # INDEX.md
    assert "version 1" in out
    assert "DELETE" in out  # commitInfo.operation of version 1
    assert _commit_info(table, 1)["operation"] == "DELETE"
    assert _value_cell(out, "physical rows") == str(physical)
    assert _value_cell(out, "logical rows") == str(logical)
    assert _value_cell(out, "deleted rows") == f"{deleted} ({deleted / physical:.2%})"
    assert _value_cell(out, "live files") == str(len(adds))
    assert "deletionVectors" in out
    assert "value" in out  # the schema's only column
    assert result.stderr == ""


def test_inspect_json_document_against_oracles() -> None:
    table = GOLDEN / SMALL
    doc = run_json("inspect", table)
    assert set(doc) >= README_KEYS
    adds = _live_adds(table)
    physical = sum(_footer_rows(table / unquote(p)) for p in adds)
    assert physical == _physical_rows(table)
    logical = _logical_rows(table)
    assert doc["version"] == 1
    assert doc["num_files"] == len(adds) == 1
    assert doc["size_bytes"] == sum(os.path.getsize(table / unquote(p)) for p in adds)
    assert doc["physical_rows"] == physical
    assert doc["logical_rows"] == logical
    assert doc["deleted_rows"] == physical - logical
    assert doc["deleted_ratio"] == pytest.approx((physical - logical) / physical)
    assert doc["files_with_dvs"] == sum(1 for a in adds.values() if a.get("deletionVector"))
    assert doc["files_without_stats"] == 0
    assert doc["row_counts_exact"] is True
    assert doc["operation"] == _commit_info(table, 1)["operation"]
    assert doc["commit_timestamp"] == pytest.approx(
        _commit_path(table, 1).stat().st_mtime * 1000, abs=1
    )
    log0 = _actions(table, 0)
    protocol = next(a["protocol"] for a in log0 if "protocol" in a)
    metadata = next(a["metaData"] for a in log0 if "metaData" in a)
    assert doc["protocol"] == {
        "minReaderVersion": protocol["minReaderVersion"],
        "minWriterVersion": protocol["minWriterVersion"],
        "readerFeatures": protocol["readerFeatures"],
        "writerFeatures": protocol["writerFeatures"],
    }
    assert doc["configuration"] == metadata["configuration"]
    assert doc["table_id"] == metadata["id"]
    assert doc["partition_columns"] == metadata["partitionColumns"] == []
    schema = json.loads(metadata["schemaString"])
    assert [c["name"] for c in doc["schema"]] == [f["name"] for f in schema["fields"]]
    assert Path(doc["location"]).resolve() == table.resolve()
    dv = next(iter(adds.values()))["deletionVector"]
    assert doc["dv_storage"] == {
        "dv_files": 1,
        "on_disk_dvs": 1,
        "inline_dvs": 0,
        "absolute_path_dvs": 0,
        "dv_bytes": dv["sizeInBytes"],
    }
    # 2 of 10 rows deleted in the only file: the 20-30% bucket.
    histogram = {b["bucket"]: b["files"] for b in doc["deleted_ratio_histogram"]}
    assert histogram["20-30%"] == 1
    assert sum(histogram.values()) == doc["num_files"]
    assert doc["num_tombstones"] == sum(1 for a in _actions(table, 1) if "remove" in a)
    for key in ("files", "history", "verify", "checks"):
        assert key not in doc


def test_json_stdout_is_only_the_document_for_a_legacy_protocol_table() -> None:
    table = GOLDEN / "table-without-dv-small"
    doc = run_json("inspect", table)
    assert doc["protocol"]["readerFeatures"] is None
    assert doc["protocol"]["writerFeatures"] is None
    assert doc["files_with_dvs"] == 0
    assert doc["logical_rows"] == doc["physical_rows"] == _logical_rows(table)


# -- inspect --files -------------------------------------------------------------------------


def test_files_json_lists_every_live_file_as_in_the_log() -> None:
    table = GOLDEN / PARTITIONED
    doc = run_json("inspect", table, "--files")
    adds = _live_adds(table)  # replayed from the JSON commits, ignoring the checkpoint
    uris = deltalake.DeltaTable(str(table)).file_uris()
    assert {Path(_local(u)).resolve() for u in uris} == {
        (table / unquote(p)).resolve() for p in adds
    }
    files = doc["files"]
    assert len(files) == doc["num_files"] == len(adds)
    assert sorted(f["path"] for f in files) == sorted(adds)
    for f in files:
        add = adds[f["path"]]
        local = table / unquote(f["path"])
        assert f["partition_values"] == add["partitionValues"]
        assert f["size"] == os.path.getsize(local) == add["size"]
        assert f["num_records"] == json.loads(add["stats"])["numRecords"] == _footer_rows(local)
        assert f["deletion_vector"] == add.get("deletionVector")
        dv = add.get("deletionVector")
        assert f["deleted_rows"] == (dv["cardinality"] if dv else 0)
        if dv:
            assert f["dv_storage"] == "file"
            assert Path(f["dv_location"]) == _dv_path(table, dv)
            assert Path(f["dv_location"]).is_file()
        else:
            assert f["dv_storage"] is None and f["dv_location"] is None
    assert sum(f["num_records"] - f["deleted_rows"] for f in files) == _logical_rows(table)


def test_files_json_inline_dv(tmp_path: Path) -> None:
    table = GOLDEN / "cdf-table-with-dv"
    doc = run_json("inspect", table, "--files", "--version", "3")
    adds = _live_adds(table, 3)
    [f] = doc["files"]
    dv = adds[f["path"]]["deletionVector"]
    assert dv["storageType"] == "i"
    # The log spells the inline DV's absent offset as an explicit null.
    assert f["deletion_vector"] == {k: v for k, v in dv.items() if v is not None}
    assert f["dv_storage"] == "inline"
    assert f["dv_location"] is None
    assert f["num_records"] - f["deleted_rows"] == _logical_rows(table, 3)


def test_files_output_shows_whole_paths() -> None:
    """Where lines may be as long as their content, each live file is one line holding its
    whole path and its DV file's, both relative to the table root."""
    table = GOLDEN / PARTITIONED
    result = run_wide("inspect", table, "--files", "--limit", "0")
    assert result.exit_code == 0, all_output(result)
    adds = _live_adds(table)
    lines = result.stdout.splitlines()
    for path, add in adds.items():
        [line] = [line for line in lines if f"  {path}" in line]
        if add.get("deletionVector"):
            dv = _dv_path(table, add["deletionVector"]).relative_to(table)
            assert f"  dv={dv.as_posix()}" in line
    assert "…" not in result.stdout and str(table) not in "".join(lines[-len(adds) :])


# -- inspect --history -----------------------------------------------------------------------


def test_history_n_newest_first_matches_commit_info() -> None:
    table = GOLDEN / HISTORY_TABLE
    doc = run_json("inspect", table, "--history", "3")
    assert list(doc) == ["history"]  # README: with --history alone only this key
    latest = deltalake.DeltaTable(str(table)).version()
    entries = doc["history"]
    assert [e["version"] for e in entries] == [latest, latest - 1, latest - 2]
    for e in entries:
        info = _commit_info(table, e["version"])
        assert e["operation"] == info["operation"]
        assert e["operation_parameters"] == info.get("operationParameters", {})
        metrics = info.get("operationMetrics", {})
        assert metrics and all(isinstance(v, str) for v in metrics.values())  # as Spark logs them
        assert e["operation_metrics"] == {k: int(v) for k, v in metrics.items()}  # numbers
        assert e["engine_info"] == info.get("engineInfo")
        mtime_ms = _commit_path(table, e["version"]).stat().st_mtime * 1000
        assert e["timestamp"] == pytest.approx(mtime_ms, abs=1)


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "{table}", "--history"],  # the documented form, N omitted
        ["inspect", "{table}", "--history", "--json"],
        ["inspect", "--history", "20", "{table}"],
        ["inspect", "--json", "{table}", "--history"],
    ],
    ids=["after-table", "before-json", "before-table-with-n", "last"],
)
def test_history_without_n_shows_twenty(args: list[str]) -> None:
    table = GOLDEN / HISTORY_TABLE
    argv = [a.format(table=table) for a in args]
    if "--json" not in argv:
        argv.append("--json")
    result = run(*argv)
    assert result.exit_code == 0, all_output(result)
    entries = json.loads(result.stdout)["history"]
    latest = deltalake.DeltaTable(str(table)).version()
    assert latest + 1 > 20  # the table has more commits than the default
    assert [e["version"] for e in entries] == list(range(latest, latest - 20, -1))


def test_history_rich_output() -> None:
    table = GOLDEN / TWO_VERSIONS
    result = run("inspect", table, "--history")
    assert result.exit_code == 0, all_output(result)
    assert "History" in result.stdout
    for v in (0, 1):
        assert _commit_info(table, v)["operation"] in result.stdout


def test_history_with_other_views_keeps_the_summary() -> None:
    table = GOLDEN / HISTORY_TABLE
    doc = run_json("inspect", table, "--history", "2", "--files")
    assert [e["version"] for e in doc["history"]] == [46, 45]
    assert doc["logical_rows"] == _logical_rows(table)
    assert len(doc["files"]) == doc["num_files"]


@pytest.mark.parametrize("value", ["0", "x"])
def test_history_rejects_non_positive_or_non_numbers(value: str) -> None:
    result = run("inspect", GOLDEN / SMALL, "--history", value)
    assert result.exit_code == 2
    assert "--history" in result.stderr


def test_history_negative_is_a_usage_error() -> None:
    # click reads "-1" as an option here, whether written "--history -1" or "--history=-1".
    for args in (["--history", "-1"], ["--history=-1"]):
        result = run("inspect", GOLDEN / SMALL, *args)
        assert result.exit_code == 2
        assert "Traceback" not in result.stderr


# -- time travel -----------------------------------------------------------------------------


def test_version_time_travel_matches_polars() -> None:
    table = GOLDEN / TWO_VERSIONS
    docs = {v: run_json("inspect", table, "--version", str(v)) for v in (0, 1)}
    for v, doc in docs.items():
        assert doc["version"] == v
        assert doc["logical_rows"] == _logical_rows(table, v)
        assert doc["physical_rows"] == _physical_rows(table, v)
        assert doc["num_files"] == len(_live_adds(table, v))
        assert doc["operation"] == _commit_info(table, v)["operation"]
    assert docs[0]["logical_rows"] != docs[1]["logical_rows"]
    assert docs[0]["files_with_dvs"] == 0 < docs[1]["files_with_dvs"]


def _iso_ms(text: str) -> int:
    import datetime as dt

    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_timestamp_time_travel(tmp_path: Path) -> None:
    table = copy_golden(TWO_VERSIONS, tmp_path)
    # Commit times are the commit files' modification times (no in-commit timestamps here).
    for v, when in ((0, "2024-05-01T00:00:00Z"), (1, "2024-05-02T00:00:00Z")):
        seconds = _iso_ms(when) / 1000
        os.utime(_commit_path(table, v), (seconds, seconds))
    cases = {
        "2024-05-01T12:00:00Z": 0,
        "2024-05-01": 0,  # naive = UTC: midnight, exactly version 0
        "2024-05-01T23:59:59": 0,
        "2024-05-02": 1,  # exactly version 1
        "2024-05-02T00:00:00+00:00": 1,
        "2024-05-01T19:00:00-05:00": 1,  # midnight UTC on May 2
        "2024-05-01T18:59:59-05:00": 0,
    }
    for text, version in cases.items():
        doc = run_json("inspect", table, "--timestamp", text)
        assert doc["version"] == version, text
        assert doc["logical_rows"] == _logical_rows(table, version), text
        assert doc["commit_timestamp"] == _iso_ms(f"2024-05-0{version + 1}T00:00:00Z")

    before = run("inspect", table, "--timestamp", "2024-04-30")
    assert before.exit_code == 5  # not found: before the earliest version
    assert "earliest" in before.stderr
    # As in Delta, a time after the latest commit is an error, not the latest version.
    after = run("inspect", table, "--timestamp", "2024-05-02T00:00:01Z")
    assert after.exit_code == 5
    assert "latest" in after.stderr
    assert "Traceback" not in all_output(before) + all_output(after)


@pytest.mark.parametrize("text", ["yesterday", "2024-13-01", "12:00 May 1"])
def test_bad_timestamp_is_a_usage_error(text: str) -> None:
    result = run("inspect", GOLDEN / SMALL, "--timestamp", text)
    assert result.exit_code == 2
    assert "--timestamp" in result.stderr
    assert text in result.stderr


def test_version_beyond_latest() -> None:
    table = GOLDEN / SMALL
    latest = deltalake.DeltaTable(str(table)).version()
    result = run("inspect", table, "--version", "999", "--json")
    assert result.exit_code == 5
    assert error_object(result)["kind"] == "not-found"
    assert "999" in result.stderr
    assert f"latest version is {latest}" in result.stderr
    assert "Traceback" not in result.stderr


def test_version_and_timestamp_together_are_refused() -> None:
    result = run("inspect", GOLDEN / SMALL, "--version", "0", "--timestamp", "2024-01-01")
    assert result.exit_code == 2
    assert "--version" in result.stderr and "--timestamp" in result.stderr


def test_negative_version_is_a_usage_error() -> None:
    result = run("inspect", GOLDEN / SMALL, "--version", "-1")
    assert result.exit_code == 2
    assert "--version" in result.stderr


# -- inspect --verify ------------------------------------------------------------------------


@pytest.mark.parametrize("name", DV_TABLES)
def test_verify_golden_tables_ok(name: str) -> None:
    table = GOLDEN / name
    doc = run_json("inspect", table, "--verify")
    adds = _live_adds(table)
    # Each golden table's newest checkpoint (if it has one) is good and read.
    log = table / "_delta_log"
    has_checkpoint = any(".checkpoint." in p.name for p in log.iterdir())
    assert doc["verify"] == {
        "ok": True,
        "files_checked": len(adds),
        "dvs_checked": sum(1 for a in adds.values() if a.get("deletionVector")),
        "checkpoints_checked": int(has_checkpoint),
        "problems": [],
    }


def test_verify_rich_output_ok() -> None:
    result = run("inspect", GOLDEN / SMALL, "--verify")
    assert result.exit_code == 0, all_output(result)
    assert "no problems" in result.stdout


def test_verify_missing_dv_files() -> None:
    table = GOLDEN / BAD
    adds = _live_adds(table)
    with_dv = {p: a["deletionVector"] for p, a in adds.items() if a.get("deletionVector")}
    expected = {(p, _dv_path(table, dv)) for p, dv in with_dv.items()}
    # The oracle's paths are the protocol's names of the prefixed files that do exist.
    present = {f.name.split("-", 1)[1] for f in table.glob("*deletion_vector_*.bin")}
    assert {dv.name for _, dv in expected} == present
    assert not any(dv.exists() for _, dv in expected)

    result = run_wide("inspect", table, "--verify")
    assert result.exit_code == 6  # integrity
    lines = result.stdout.splitlines()
    for data_file, dv_file in expected:
        assert any(str(dv_file) in line and data_file in line for line in lines), (
            data_file,
            dv_file,
        )
    assert "Traceback" not in all_output(result)

    doc = run_json("inspect", table, "--verify", code=6)
    problems = doc["verify"]["problems"]
    assert doc["verify"]["ok"] is False
    assert {p["kind"] for p in problems} == {"dv-file-missing"}
    assert {(p["data_file"], Path(p["dv_file"])) for p in problems} == expected
    # The rows stay deleted: counts come from the descriptors, never from a missing DV.
    physical = _physical_rows(table)
    assert doc["physical_rows"] == physical
    assert doc["logical_rows"] == physical - sum(dv["cardinality"] for dv in with_dv.values())


# Corruptions of a copy of table-with-dv-small; each must be reported as its own kind.


def _only_add(table: Path, version: int = 1) -> dict[str, Any]:
    [add] = _live_adds(table, version).values()
    return add


def _edit_add(table: Path, edit: Callable[[dict[str, Any]], None], version: int = 1) -> None:
    """Rewrite the add action(s) of one JSON commit with `edit`."""
    path = _commit_path(table, version)
    actions = _actions(table, version)
    for action in actions:
        if "add" in action:
            edit(action["add"])
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))


def _edit_stats(add: dict[str, Any], **changes: Any) -> None:
    stats = json.loads(add["stats"])
    stats.update(changes)
    add["stats"] = json.dumps(stats)


def _dv_file(table: Path) -> tuple[Path, int, int]:
    """The DV file of the live add, the offset of its entry and the bitmap size."""
    dv = _only_add(table)["deletionVector"]
    return _dv_path(table, dv), dv.get("offset") or 1, dv["sizeInBytes"]


def _patch(path: Path, at: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[at : at + len(data)] = data
    path.write_bytes(bytes(raw))


def _flip_crc(table: Path) -> None:
    path, offset, size = _dv_file(table)
    crc_at = offset + 4 + size
    _patch(path, crc_at, bytes([path.read_bytes()[crc_at] ^ 0xFF]))


def _truncate_dv(table: Path) -> None:
    path, offset, size = _dv_file(table)
    path.write_bytes(path.read_bytes()[: offset + 4 + size])  # the CRC is cut off


def _wrong_magic(table: Path) -> None:
    """A different magic number with a CRC that matches it, so the magic check is reached."""
    path, offset, size = _dv_file(table)
    _patch(path, offset + 4, struct.pack("<I", 0x12345678))
    payload = path.read_bytes()[offset + 4 : offset + 4 + size]
    _patch(path, offset + 4 + size, struct.pack(">I", zlib.crc32(payload)))


def _version_two(table: Path) -> None:
    path, _, _ = _dv_file(table)
    _patch(path, 0, b"\x02")


def _descriptor_size(table: Path) -> None:
    def edit(add: dict[str, Any]) -> None:
        add["deletionVector"]["sizeInBytes"] -= 1

    _edit_add(table, edit)


def _size_field(table: Path) -> None:
    path, offset, size = _dv_file(table)
    _patch(path, offset, struct.pack(">I", size - 1))


def _descriptor_cardinality(table: Path) -> None:
    def edit(add: dict[str, Any]) -> None:
        add["deletionVector"]["cardinality"] += 1

    _edit_add(table, edit)


def _short_data_file(table: Path) -> None:
    """Replace the data file by one of 5 rows (log size and numRecords agree with it).

    The DV still deletes row 9, beyond the end of the file.
    """
    data = table / unquote(_only_add(table)["path"])
    pq.write_table(pa.table({"value": pa.array(range(5), pa.int32())}), data)

    def edit(add: dict[str, Any]) -> None:
        add["size"] = os.path.getsize(data)
        _edit_stats(add, numRecords=5)

    _edit_add(table, edit)


def _stats_too_small(table: Path) -> None:
    def edit(add: dict[str, Any]) -> None:
        _edit_stats(add, numRecords=5)

    _edit_add(table, edit)


def _delete_data_file(table: Path) -> None:
    (table / unquote(_only_add(table)["path"])).unlink()


def _truncate_data_file(table: Path) -> None:
    data = table / unquote(_only_add(table)["path"])
    data.write_bytes(data.read_bytes()[: os.path.getsize(data) // 2])


def _grow_data_file(table: Path) -> None:
    """Bytes in front of the parquet file: its footer still reads, its size is wrong."""
    data = table / unquote(_only_add(table)["path"])
    data.write_bytes(b"\0" * 16 + data.read_bytes())


DV_CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "crc": (_flip_crc, "dv-checksum"),
    "truncated": (_truncate_dv, "dv-range"),
    "magic": (_wrong_magic, "dv-magic"),
    "version": (_version_two, "dv-version"),
    "descriptor-size": (_descriptor_size, "dv-size-mismatch"),
    "size-field": (_size_field, "dv-size-mismatch"),
    "cardinality": (_descriptor_cardinality, "dv-cardinality"),
    "row-index": (_short_data_file, "dv-row-index"),
}
DATA_CORRUPTIONS: dict[str, tuple[Callable[[Path], None], set[str]]] = {
    "num-records": (_stats_too_small, {"num-records"}),
    "missing": (_delete_data_file, {"data-file-missing"}),
    "truncated": (_truncate_data_file, {"data-file-size", "data-file-unreadable"}),
    "grown": (_grow_data_file, {"data-file-size"}),
}


@pytest.mark.parametrize("case", list(DV_CORRUPTIONS))
def test_verify_dv_corruption(tmp_path: Path, case: str) -> None:
    corrupt, kind = DV_CORRUPTIONS[case]
    table = copy_golden(SMALL, tmp_path)
    assert run("inspect", table, "--verify").exit_code == 0
    corrupt(table)
    data_file = _only_add(table)["path"]
    dv_file, _, _ = _dv_file(table)

    result = run_wide("inspect", table, "--verify")
    assert result.exit_code == 6, all_output(result)
    [line] = [line for line in result.stdout.splitlines() if kind in line]
    assert str(dv_file) in line
    assert data_file in line
    assert "Traceback" not in all_output(result)

    doc = run_json("inspect", table, "--verify", code=6)
    problems = doc["verify"]["problems"]
    assert [p["kind"] for p in problems] == [kind]
    assert problems[0]["data_file"] == data_file
    assert Path(problems[0]["dv_file"]) == dv_file
    assert str(dv_file) in problems[0]["message"]


@pytest.mark.parametrize("case", list(DATA_CORRUPTIONS))
def test_verify_data_file_corruption(tmp_path: Path, case: str) -> None:
    corrupt, kinds = DATA_CORRUPTIONS[case]
    table = copy_golden(SMALL, tmp_path)
    corrupt(table)
    data_file = _only_add(table)["path"]

    result = run_wide("inspect", table, "--verify")
    assert result.exit_code == 6, all_output(result)
    problem_lines = [line for line in result.stdout.splitlines() if any(k in line for k in kinds)]
    assert problem_lines
    assert all(data_file in line for line in problem_lines)

    doc = run_json("inspect", table, "--verify", code=6)
    problems = doc["verify"]["problems"]
    assert problems
    assert {p["kind"] for p in problems} <= kinds
    assert all(p["data_file"] == data_file for p in problems)


def test_verify_stats_mismatch_names_both_counts(tmp_path: Path) -> None:
    table = copy_golden(SMALL, tmp_path)
    _stats_too_small(table)
    footer = _footer_rows(table / unquote(_only_add(table)["path"]))
    doc = run_json("inspect", table, "--verify", code=6)
    [problem] = doc["verify"]["problems"]
    assert problem["kind"] == "num-records"
    assert f"has {footer} rows" in problem["message"]
    assert "say 5" in problem["message"]


def test_verify_row_index_against_stats_when_the_footer_is_unreadable(tmp_path: Path) -> None:
    """Without a readable footer, the DV's row indexes are checked against numRecords."""
    table = copy_golden(SMALL, tmp_path)
    _truncate_data_file(table)
    _stats_too_small(table)  # numRecords 5; the DV deletes row 9
    data_file = _only_add(table)["path"]
    dv_file, _, _ = _dv_file(table)
    doc = run_json("inspect", table, "--verify", code=6)
    kinds = {p["kind"]: p for p in doc["verify"]["problems"]}
    assert set(kinds) == {"data-file-unreadable", "dv-row-index"}
    assert kinds["dv-row-index"]["data_file"] == data_file
    assert Path(kinds["dv-row-index"]["dv_file"]) == dv_file


# -- inspect --check -------------------------------------------------------------------------


def test_check_passes() -> None:
    table = GOLDEN / SMALL
    ratio = 1 - _logical_rows(table) / _physical_rows(table)
    assert ratio == pytest.approx(0.2)
    result = run("inspect", table, "--check", "max-deleted-ratio=0.5")
    assert result.exit_code == 0, all_output(result)
    assert "max-deleted-ratio" in result.stdout


def test_check_fails_with_exit_3() -> None:
    result = run("inspect", GOLDEN / SMALL, "--check", "max-deleted-ratio=0.1")
    assert result.exit_code == 3, all_output(result)
    [line] = [line for line in result.stdout.splitlines() if "max-deleted-ratio" in line]
    assert "FAIL" in line


def test_multiple_checks_in_json() -> None:
    table = GOLDEN / SMALL
    physical, logical = _physical_rows(table), _logical_rows(table)
    deleted = physical - logical
    files = len(deltalake.DeltaTable(str(table)).file_uris())
    args = [
        "--check",
        f"max-deleted-rows={deleted}",  # at the limit: passes
        "--check",
        "max-deleted-ratio=0.5",
        "--check",
        f"max-files={files - 1}",  # one over: fails
    ]
    doc = run_json("inspect", table, *args, code=3)
    assert doc["checks"] == [
        {"name": "max-deleted-rows", "limit": deleted, "actual": deleted, "passed": True},
        {
            "name": "max-deleted-ratio",
            "limit": 0.5,
            "actual": pytest.approx(deleted / physical),
            "passed": True,
        },
        {"name": "max-files", "limit": files - 1, "actual": files, "passed": False},
    ]
    assert doc["logical_rows"] == logical  # the summary is still there

    passing = run_json("inspect", table, *args[:4])
    assert all(c["passed"] for c in passing["checks"])


@pytest.mark.parametrize("name", README_CHECKS)
def test_every_documented_check_is_accepted(name: str) -> None:
    table = GOLDEN / "cdf-table-with-dv"
    limit = 1 if name.startswith("min-") else 1000000
    doc = run_json("inspect", table, "--version", "3", "--check", f"{name}={limit}")
    [check] = doc["checks"]
    assert check["name"] == name and check["passed"] is True
    expected = {
        "max-deleted-ratio": doc["deleted_ratio"],
        "max-deleted-rows": doc["deleted_rows"],
        "max-dv-files": 0,
        "max-files-with-dvs": 1,
        "max-inline-dvs": 1,  # version 3 holds one inline DV (grep '"storageType":"i"')
        "max-files": 1,
        "max-files-without-stats": 0,
        "max-small-files": 1,  # its one file of 635 B is below the 256 MiB target
        "max-log-files": 4,  # versions 0-3, no checkpoint
        "min-avg-file-size": 635,
    }[name]
    assert check["actual"] == pytest.approx(expected)


def test_unknown_check_lists_the_available_ones() -> None:
    result = run("inspect", GOLDEN / SMALL, "--check", "bogus=1")
    assert result.exit_code == 2
    assert "bogus" in result.stderr
    for name in README_CHECKS:
        assert name in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("text", ["max-files=-1", "max-files=abc", "max-files", "=1"])
def test_invalid_check_is_a_usage_error(text: str) -> None:
    result = run("inspect", GOLDEN / SMALL, "--check", text)
    assert result.exit_code == 2, all_output(result)
    assert "--check" in result.stderr
    assert "Traceback" not in result.stderr


def test_verify_and_checks_together() -> None:
    table = GOLDEN / SMALL
    doc = run_json("inspect", table, "--verify", "--check", "max-dv-files=0", code=3)
    assert doc["verify"]["ok"] is True
    assert doc["checks"][0]["passed"] is False


# -- errors ----------------------------------------------------------------------------------


def _assert_one_clear_error(result: Result, *needles: str) -> None:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr
    assert "Traceback" not in all_output(result)
    assert "internal error" not in result.stderr


def test_missing_table_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-table"
    result = run("inspect", missing, "--json")
    assert result.exit_code == 5
    assert error_object(result)["kind"] == "not-found"
    _assert_one_clear_error(result, str(missing))


def test_directory_without_delta_log(tmp_path: Path) -> None:
    (tmp_path / "data.parquet").write_bytes(b"not a table")
    result = run("inspect", tmp_path)
    assert result.exit_code == 5
    _assert_one_clear_error(result, str(tmp_path), "_delta_log")


def test_storage_option_without_value() -> None:
    result = run("inspect", GOLDEN / SMALL, "--storage-option", "novalue")
    assert result.exit_code == 2
    _assert_one_clear_error(result, "--storage-option", "novalue")


def test_storage_option_reaches_the_backend() -> None:
    table = GOLDEN / SMALL
    doc = run_json("inspect", table, "--storage-option", "auto_mkdir=true")
    assert doc["logical_rows"] == _logical_rows(table)


@pytest.mark.parametrize("scheme", ["file", "memory"])
def test_table_uris(scheme: str, tmp_path: Path) -> None:
    table = GOLDEN / SMALL
    if scheme == "file":
        uri = table.as_uri()
    else:
        import fsspec

        fs = fsspec.filesystem("memory")
        uri = f"memory://dvtool-test-cli-{tmp_path.name}/small"
        for f in table.rglob("*"):
            if f.is_file():
                fs.pipe(f"{uri}/{f.relative_to(table).as_posix()}", f.read_bytes())
    doc = run_json("inspect", uri, "--verify")
    assert doc["verify"]["ok"] is True
    assert doc["logical_rows"] == _logical_rows(table)
    assert doc["physical_rows"] == _physical_rows(table)


def test_unknown_scheme() -> None:
    result = run("inspect", "foo://x")
    assert result.exit_code == 2  # usage: an unsupported scheme
    _assert_one_clear_error(result, "foo://")


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("boom")


def test_internal_error_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dvtool.commands.inspect.command.run_inspect", _boom)
    result = run("inspect", GOLDEN / SMALL)
    assert result.exit_code == 70
    assert "internal error, please report" in result.stderr
    assert "RuntimeError: boom" in result.stderr
    assert "-v" in result.stderr
    assert "Traceback" not in all_output(result)


def test_internal_error_traceback_with_verbose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dvtool.commands.inspect.command.run_inspect", _boom)
    result = run("-v", "inspect", GOLDEN / SMALL)
    assert result.exit_code == 70
    assert "internal error, please report" in result.stderr
    assert "Traceback (most recent call last)" in result.stderr
    assert "_boom" in result.stderr


def test_dvtool_error_verbose_shows_traceback_quiet_does_not() -> None:
    quiet = run("inspect", GOLDEN / SMALL, "--version", "999")
    loud = run("-v", "inspect", GOLDEN / SMALL, "--version", "999")
    assert quiet.exit_code == loud.exit_code == 5
    assert "Traceback" not in all_output(quiet)
    assert "Run with -v" not in quiet.stderr  # not a bug: nothing to report
    assert "Traceback (most recent call last)" in loud.stderr


def test_unknown_option_is_a_usage_error() -> None:
    result = run("inspect", GOLDEN / SMALL, "--no-such-option")
    assert result.exit_code == 2
    assert "--no-such-option" in result.stderr


# -- entry points ----------------------------------------------------------------------------


def test_python_m_dvtool_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dvtool", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "inspect" in proc.stdout
    assert "Usage:" in proc.stdout


def test_console_script_version() -> None:
    script = shutil.which("dvtool", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the dvtool console script is not installed next to this interpreter")
    proc = subprocess.run(
        [script, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert dvtool.__version__ in proc.stdout
    from importlib.metadata import version

    assert version("dvtool") == dvtool.__version__


def test_console_script_json_is_pipeable() -> None:
    """Off a terminal stdout holds only the document, and exit codes reach the shell."""
    table = GOLDEN / SMALL
    proc = subprocess.run(
        [sys.executable, "-m", "dvtool", "inspect", str(table), "--json", "--verify"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["logical_rows"] == _logical_rows(table)
    failing = subprocess.run(
        [sys.executable, "-m", "dvtool", "inspect", str(table), "--check", "max-files=0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert failing.returncode == 3
