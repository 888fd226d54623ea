"""The `inspect` library functions on the golden tables, checked against independent oracles.

Oracles: the JSON commits replayed here by (path, DV id) (every golden table keeps all of
its commits, so the checkpoints dvtool reads are not needed), parquet footers read with
pyarrow, the file list of deltalake, the rows polars returns (it applies DVs through
delta-kernel-rs) and, for tables polars refuses, the logical row counts of INDEX.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import deltalake
import polars as pl
import pyarrow.parquet as pq
import pytest

from dvtool.commands.inspect.columns import count_missing_rows
from dvtool.commands.inspect.command import (
    CHECK_NAMES,
    InspectRequest,
    evaluate_checks,
    history,
    list_files,
    load_snapshot,
    parse_check,
    run_inspect,
    verify,
)
from dvtool.commands.inspect.summary import summarize
from dvtool.delta.dvstore import DVStore
from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.errors import UsageError
from tests.oracles import GOLDEN, copy_golden, z85_uuid

# As tests/conftest.py: ../shared/golden beside the repository; CI always has it, so a
# missing directory fails the tests rather than skipping them.


def _index() -> dict[str, tuple[int, int]]:
    """INDEX.md: table -> (latest version, logical rows)."""
    rows: dict[str, tuple[int, int]] = {}
    for line in (GOLDEN / "INDEX.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[1].isdigit() and cells[3].isdigit():
            rows[cells[0]] = (int(cells[1]), int(cells[3]))
    return rows


INDEX = _index() if GOLDEN.is_dir() else {}
TABLES = sorted(INDEX)
POLARS_REFUSES = {"columnMapping", "v2Checkpoint", "typeWidening-preview", "typeWidening"}
# Reader features deltalake (delta-rs) refuses to open a table with: the file's own JSON
# `Replay` is the oracle for those tables instead.
DELTALAKE_REFUSES = {"typeWidening-preview"}

README_CHECKS = {
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
}


def test_index_lists_the_golden_tables() -> None:
    on_disk = {
        d.parent.relative_to(GOLDEN).as_posix()
        for d in GOLDEN.glob("**/_delta_log")
        if not d.parent.relative_to(GOLDEN).as_posix().startswith("bad/")
    }
    assert set(TABLES) == on_disk
    assert len(TABLES) >= 21
    assert INDEX["table-with-dv-small"] == (1, 8)


# -- oracles ---------------------------------------------------------------------------------


def _actions(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _dv_key(dv: dict[str, Any] | None) -> str:
    if not dv:
        return ""
    offset = dv.get("offset")
    return dv["storageType"] + dv["pathOrInlineDv"] + ("" if offset is None else f"@{offset}")


class Replay:
    """The JSON commits 0..version of a table, replayed by (path, DV id)."""

    def __init__(self, table: Path, version: int | None = None) -> None:
        log = table / "_delta_log"
        commits = sorted(int(p.name[:20]) for p in log.glob("[0-9]" * 20 + ".json"))
        self.version = commits[-1] if version is None else version
        assert commits[: self.version + 1] == list(range(self.version + 1))
        live: dict[tuple[str, str], dict[str, Any]] = {}
        self.protocol: dict[str, Any] = {}
        self.metadata: dict[str, Any] = {}
        for v in range(self.version + 1):
            for action in _actions(table, v):
                if "remove" in action:
                    r = action["remove"]
                    live.pop((r["path"], _dv_key(r.get("deletionVector"))), None)
                if "add" in action:
                    a = action["add"]
                    live[(a["path"], _dv_key(a.get("deletionVector")))] = a
                self.protocol = action.get("protocol", self.protocol)
                self.metadata = action.get("metaData", self.metadata)
        self.table = table
        self.adds = {path: add for (path, _), add in live.items()}
        assert len(self.adds) == len(live)

    def dvs(self) -> list[dict[str, Any]]:
        return [a["deletionVector"] for a in self.adds.values() if a.get("deletionVector")]

    def records(self, path: str) -> int:
        """numRecords from the add's stats, else the parquet footer."""
        stats = json.loads(self.adds[path].get("stats") or "{}")
        if "numRecords" in stats:
            return int(stats["numRecords"])
        return _footer_rows(self.table / unquote(path))


def _footer_rows(path: Path | str) -> int:
    return int(pq.ParquetFile(path).metadata.num_rows)


def _local(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _deltalake_refuses(table: Path) -> bool:
    features = set(Replay(table).protocol.get("readerFeatures") or [])
    return bool(features & DELTALAKE_REFUSES)


def _deltalake_files(table: Path, version: int | None = None) -> list[str]:
    """The live files by deltalake; by the independent `Replay` where deltalake refuses."""
    if _deltalake_refuses(table):
        return [str(table / unquote(p)) for p in Replay(table, version).adds]
    return [_local(u) for u in deltalake.DeltaTable(str(table), version=version).file_uris()]


def _deltalake_version(table: Path) -> int:
    if _deltalake_refuses(table):
        return Replay(table).version
    return int(deltalake.DeltaTable(str(table)).version())


def _logical_rows(table: Path, name: str, version: int | None = None) -> int:
    """polars where it can read the table; else INDEX.md (latest version only)."""
    features = set(Replay(table, version).protocol.get("readerFeatures") or [])
    legacy_mapping = Replay(table, version).protocol.get("minReaderVersion") == 2
    if features & POLARS_REFUSES or legacy_mapping:
        assert version is None
        return INDEX[name][1]
    return pl.read_delta(str(table), version=version).height


def _open(table: Path) -> DeltaLog:
    return open_log(str(table))


# -- summarize -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_summarize_golden_table(name: str) -> None:
    table = GOLDEN / name
    log = _open(table)
    s = summarize(load_snapshot(log))
    replay = Replay(table)
    files = _deltalake_files(table)

    assert s.version == INDEX[name][0] == _deltalake_version(table)
    assert s.num_files == len(files) == len(replay.adds)
    assert {Path(f).resolve() for f in files} == {
        (table / unquote(p)).resolve() for p in replay.adds
    }
    assert s.size_bytes == sum(os.path.getsize(f) for f in files)
    physical = sum(_footer_rows(f) for f in files)
    assert s.physical_rows == physical
    assert s.row_counts_exact is True
    assert s.files_without_stats == 0
    logical = _logical_rows(table, name)
    assert logical == INDEX[name][1]
    assert s.logical_rows == logical
    assert s.deleted_rows == physical - logical
    assert s.deleted_ratio == pytest.approx((physical - logical) / physical if physical else 0)
    dvs = replay.dvs()
    assert s.files_with_dvs == len(dvs)
    assert sum(dv["cardinality"] for dv in dvs) == physical - logical

    on_disk = [dv for dv in dvs if dv["storageType"] == "u"]
    assert s.dv_storage.dv_files == len({dv["pathOrInlineDv"] for dv in on_disk})
    assert s.dv_storage.on_disk_dvs == len(on_disk)
    assert s.dv_storage.inline_dvs == sum(1 for dv in dvs if dv["storageType"] == "i")
    assert s.dv_storage.absolute_path_dvs == sum(1 for dv in dvs if dv["storageType"] == "p")
    assert s.dv_storage.dv_bytes == sum(dv["sizeInBytes"] for dv in dvs)

    assert s.table_id == replay.metadata["id"]
    assert s.configuration == (replay.metadata.get("configuration") or {})
    assert s.protocol["minReaderVersion"] == replay.protocol["minReaderVersion"]
    assert s.protocol["minWriterVersion"] == replay.protocol["minWriterVersion"]
    assert s.protocol["readerFeatures"] == replay.protocol.get("readerFeatures")
    assert s.protocol["writerFeatures"] == replay.protocol.get("writerFeatures")
    schema = json.loads(replay.metadata["schemaString"])
    assert [c["name"] for c in s.schema] == [f["name"] for f in schema["fields"]]
    assert s.partition_columns == replay.metadata["partitionColumns"]


@pytest.mark.parametrize("name", TABLES)
def test_histogram_against_per_file_ratios(name: str) -> None:
    table = GOLDEN / name
    s = summarize(load_snapshot(_open(table)))
    replay = Replay(table)
    buckets = s.deleted_ratio_histogram
    assert [b["bucket"] for b in buckets] == ["no DV"] + [
        f"{10 * i}-{10 * (i + 1)}%" for i in range(10)
    ]
    assert sum(b["files"] for b in buckets) == s.num_files
    expected = [0] * 11
    for path, add in replay.adds.items():
        dv = add.get("deletionVector")
        if not dv:
            expected[0] += 1
            continue
        ratio = dv["cardinality"] / replay.records(path)
        expected[1 + min(int(ratio * 10), 9)] += 1
    assert [b["files"] for b in buckets] == expected


def test_histogram_spreads_files_over_buckets() -> None:
    table = GOLDEN / "dv-partitioned-with-checkpoint/delta"
    s = summarize(load_snapshot(_open(table)))
    with_files = [b for b in s.deleted_ratio_histogram if b["files"]]
    assert len(with_files) >= 2  # files without DVs and files with DVs


def test_legacy_protocol_implies_features() -> None:
    """Reader 2 / writer 5 imply the features of PROTOCOL.md's legacy versions."""
    s = summarize(load_snapshot(_open(GOLDEN / "cdf-column-mapping-name-mode")))
    assert (s.protocol["minReaderVersion"], s.protocol["minWriterVersion"]) == (2, 5)
    assert s.protocol["readerFeatures"] is None and s.protocol["writerFeatures"] is None
    assert "columnMapping" in s.reader_features
    assert {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
    } <= set(s.writer_features)
    assert "deletionVectors" not in s.writer_features

    plain = summarize(load_snapshot(_open(GOLDEN / "table-without-dv-small")))
    assert (plain.protocol["minReaderVersion"], plain.protocol["minWriterVersion"]) == (1, 2)
    assert plain.reader_features == []
    assert set(plain.writer_features) == {"appendOnly", "invariants"}


def test_column_mapping_schema_and_partitions() -> None:
    table = GOLDEN / "dv-with-columnmapping/delta"
    log = _open(table)
    snapshot = load_snapshot(log)
    s = summarize(snapshot)
    replay = Replay(table)
    fields = json.loads(replay.metadata["schemaString"])["fields"]
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in fields}
    assert s.column_mapping_mode == "name"
    assert {c["name"]: c["physical_name"] for c in s.schema} == physical
    assert all(c["physical_name"] != c["name"] for c in s.schema)

    # --files shows partition values under their logical names.
    logical_of = {p: name for name, p in physical.items()}
    entries = list_files(snapshot, DVStore(log.storage))
    assert len(entries) == len(replay.adds)
    for e in entries:
        add = replay.adds[e.path]
        assert e.partition_values == {logical_of[k]: v for k, v in add["partitionValues"].items()}
        assert set(e.partition_values) == set(s.partition_columns)
    # The expected/ rows the table ships with, counted with pyarrow.
    expected = sum(_footer_rows(f) for f in (table.parent / "expected").rglob("*.parquet"))
    assert s.logical_rows == expected == INDEX["dv-with-columnmapping/delta"][1]


# -- DV storage: inline DVs ------------------------------------------------------------------


def test_inline_dvs_by_version() -> None:
    table = GOLDEN / "cdf-table-with-dv"
    log = _open(table)
    inline_versions = {
        v
        for v in range(7)
        if '"storageType":"i"' in (table / "_delta_log" / f"{v:020d}.json").read_text()
    }
    assert inline_versions == {3, 4, 5, 6}  # v6 removes the last inline DV
    for version in range(7):
        s = summarize(load_snapshot(log, version))
        replay = Replay(table, version)
        dvs = replay.dvs()
        inline = [dv for dv in dvs if dv["storageType"] == "i"]
        assert s.dv_storage.inline_dvs == len(inline), version
        assert s.dv_storage.on_disk_dvs == len(dvs) - len(inline), version
        assert s.dv_storage.dv_files == len(
            {dv["pathOrInlineDv"] for dv in dvs if dv["storageType"] == "u"}
        )
        assert s.logical_rows == pl.read_delta(str(table), version=version).height, version
        assert s.physical_rows == sum(_footer_rows(f) for f in _deltalake_files(table, version))
    assert summarize(load_snapshot(log, 3)).dv_storage.inline_dvs == 1


def test_verify_reads_inline_dvs() -> None:
    table = GOLDEN / "cdf-table-with-dv"
    log = _open(table)
    for version in (3, 4, 5):
        report = verify(load_snapshot(log, version), log)
        assert report.ok, report.problems
        assert report.dvs_checked == 1


def test_distinct_dv_files_with_shared_file() -> None:
    """Several DVs in one DV file count once in dv_files."""
    table = GOLDEN / "bad/dv-file-missing"
    s = summarize(load_snapshot(_open(table)))
    dvs = Replay(table).dvs()
    paths = {dv["pathOrInlineDv"] for dv in dvs}
    assert len(paths) < len(dvs)
    assert s.dv_storage.dv_files == len(paths)
    assert s.dv_storage.on_disk_dvs == len(dvs)


# -- --count-rows ----------------------------------------------------------------------------


def _drop_stats(table: Path, version: int) -> None:
    path = table / "_delta_log" / f"{version:020d}.json"
    actions = _actions(table, version)
    for action in actions:
        if "add" in action:
            action["add"].pop("stats", None)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))


@pytest.mark.parametrize(
    ("name", "version"), [("table-without-dv-small", 0), ("table-with-dv-small", 1)]
)
def test_count_rows_for_files_without_stats(tmp_path: Path, name: str, version: int) -> None:
    table = copy_golden(name, tmp_path)
    _drop_stats(table, version)
    assert all("stats" not in a for a in Replay(table).adds.values())
    log = _open(table)
    snapshot = load_snapshot(log)
    physical = sum(_footer_rows(f) for f in _deltalake_files(table))
    # Dropping stats changes no data: the original's rows (deltalake refuses a DV file
    # without numRecords, so read the untouched golden table).
    logical = pl.read_delta(str(GOLDEN / name)).height

    rough = summarize(snapshot)
    assert rough.files_without_stats == rough.num_files == 1
    assert rough.row_counts_exact is False
    assert rough.physical_rows < physical  # the log alone does not know the count

    footers = count_missing_rows(snapshot, log)
    exact = summarize(snapshot, footers)
    assert exact.row_counts_exact is True
    assert exact.files_without_stats == 1
    assert exact.physical_rows == physical
    assert exact.logical_rows == logical
    assert exact.deleted_rows == physical - logical

    via_request = run_inspect(log, InspectRequest(count_rows=True)).summary
    assert via_request is not None
    assert via_request.logical_rows == logical and via_request.row_counts_exact

    [entry] = list_files(snapshot, DVStore(log.storage))
    assert entry.num_records is None
    assert entry.deleted_ratio is None


def test_count_rows_reads_only_files_without_stats(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-no-checkpoint", tmp_path)
    _drop_stats(table, 0)  # the file whose add is in version 0 and untouched at version 1
    replay = Replay(table)
    missing = [p for p, a in replay.adds.items() if "stats" not in a]
    assert len(missing) == 1
    log = _open(table)
    snapshot = load_snapshot(log)
    footers = count_missing_rows(snapshot, log)
    paths = snapshot.files.column("path").to_pylist()
    assert {paths[i]: n for i, n in footers.counts.items()} == {
        missing[0]: _footer_rows(table / unquote(missing[0]))
    }
    s = summarize(snapshot, footers)
    assert s.logical_rows == pl.read_delta(str(table)).height


# -- list_files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "dv-partitioned-with-checkpoint/delta",
        "basic-dv-with-checkpoint",
        "log-replay-dv-key-cases/delta",
        "v2-checkpoints-parquet-with-sidecars",
    ],
)
def test_list_files_matches_the_log(name: str) -> None:
    table = GOLDEN / name
    log = _open(table)
    entries = list_files(load_snapshot(log), DVStore(log.storage))
    replay = Replay(table)
    assert sorted(e.path for e in entries) == sorted(replay.adds)
    for e in entries:
        add = replay.adds[e.path]
        local = table / unquote(e.path)
        assert e.size == add["size"] == os.path.getsize(local)
        assert e.num_records == replay.records(e.path) == _footer_rows(local)
        assert e.partition_values == add["partitionValues"]
        dv = add.get("deletionVector")
        assert e.deletion_vector == dv
        assert e.deleted_rows == (dv["cardinality"] if dv else 0)
        assert e.deleted_ratio == pytest.approx(e.deleted_rows / e.num_records)
        if dv:
            uuid = z85_uuid(dv["pathOrInlineDv"][-20:])
            assert e.dv_storage == "file"
            assert e.dv_location is not None
            assert Path(e.dv_location) == table / f"deletion_vector_{uuid}.bin"
            assert Path(e.dv_location).is_file()
        else:
            assert (e.dv_storage, e.dv_location) == (None, None)
        assert e.to_json()["path"] == e.path


# -- history ---------------------------------------------------------------------------------


def test_history_newest_first_with_limits() -> None:
    table = GOLDEN / "basic-dv-with-checkpoint"
    log = _open(table)
    latest = INDEX["basic-dv-with-checkpoint"][0]
    everything = history(log)
    assert [h.version for h in everything] == list(range(latest, -1, -1))
    for h in everything:
        info = next(a["commitInfo"] for a in _actions(table, h.version) if "commitInfo" in a)
        assert h.operation == info["operation"]
        assert h.operation_parameters == info.get("operationParameters", {})
        metrics = info.get("operationMetrics", {})
        assert h.operation_metrics == {k: int(v) for k, v in metrics.items()}  # numbers
        assert h.engine_info == info.get("engineInfo")
    assert [h.version for h in history(log, 3)] == [latest, latest - 1, latest - 2]
    assert len(history(log, 1000)) == latest + 1


def test_history_only_request_skips_the_snapshot() -> None:
    log = _open(GOLDEN / "table-with-dv-small")
    result = run_inspect(log, InspectRequest(history=5))
    assert result.summary is None
    assert result.history is not None and [h.version for h in result.history] == [1, 0]
    assert list(result.to_json()) == ["history"]
    assert result.exit_code == 0


# -- verify ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TABLES)
def test_verify_golden_table(name: str) -> None:
    table = GOLDEN / name
    log = _open(table)
    ticks: list[int] = []
    report = verify(load_snapshot(log), log, ticks.append)
    replay = Replay(table)
    assert report.ok, report.problems
    assert report.files_checked == len(replay.adds) == sum(ticks)
    assert report.dvs_checked == len(replay.dvs())
    # Every golden table's newest checkpoint is good: the one the snapshot was read from.
    has_checkpoint = any(".checkpoint." in p.name for p in (table / "_delta_log").iterdir())
    assert report.to_json() == {
        "ok": True,
        "files_checked": len(replay.adds),
        "dvs_checked": len(replay.dvs()),
        "checkpoints_checked": int(has_checkpoint),
        "problems": [],
    }


def test_verify_missing_dv_files() -> None:
    table = GOLDEN / "bad/dv-file-missing"
    log = _open(table)
    report = verify(load_snapshot(log), log)
    replay = Replay(table)
    expected = {
        (p, str(table / f"deletion_vector_{z85_uuid(a['deletionVector']['pathOrInlineDv'])}.bin"))
        for p, a in replay.adds.items()
        if a.get("deletionVector")
    }
    assert not report.ok
    assert {(p.data_file, p.dv_file) for p in report.problems} == expected
    assert {p.kind for p in report.problems} == {"dv-file-missing"}
    for p in report.problems:
        assert p.dv_file is not None and not Path(p.dv_file).exists()
        assert p.dv_file in p.message and p.data_file in p.message


def test_run_inspect_progress_and_exit_codes() -> None:
    log = _open(GOLDEN / "bad/dv-file-missing")
    totals: list[int] = []
    advanced: list[int] = []

    def progress(total: int) -> Any:
        totals.append(total)
        return advanced.append

    request = InspectRequest(verify=True, checks=(("max-files", 0.0),))
    result = run_inspect(log, request, progress)
    assert result.summary is not None
    assert totals == [result.summary.num_files]
    assert sum(advanced) == result.summary.num_files
    assert result.verify is not None and not result.verify.ok
    assert result.checks is not None and not result.checks[0].passed
    assert result.exit_code == 6  # verify problems outrank failed checks

    checks_only = run_inspect(log, InspectRequest(checks=(("max-files", 0.0),)))
    assert checks_only.exit_code == 3
    passing = run_inspect(log, InspectRequest(checks=(("max-files", 1e9),)))
    assert passing.exit_code == 0


# -- checks ----------------------------------------------------------------------------------


def test_check_names_are_the_documented_ones() -> None:
    assert set(CHECK_NAMES) == README_CHECKS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max-deleted-ratio=0.2", ("max-deleted-ratio", 0.2)),
        ("max-files=1000", ("max-files", 1000.0)),
        (" max-dv-files = 3", ("max-dv-files", 3.0)),
        ("max-inline-dvs=0", ("max-inline-dvs", 0.0)),
        ("max-deleted-rows=1e3", ("max-deleted-rows", 1000.0)),
    ],
)
def test_parse_check(text: str, expected: tuple[str, float]) -> None:
    assert parse_check(text) == expected


@pytest.mark.parametrize(
    "text", ["bogus=1", "max-files", "max-files=", "max-files=abc", "max-files=-1", "=1"]
)
def test_parse_check_rejects(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_check(text)
    assert info.value.exit_code == 2
    assert text.strip() in str(info.value)


def test_parse_check_unknown_name_lists_checks() -> None:
    with pytest.raises(UsageError) as info:
        parse_check("bogus=1")
    for name in README_CHECKS:
        assert name in str(info.value)


def test_evaluate_checks_against_oracles() -> None:
    table = GOLDEN / "table-with-dv-small"
    s = summarize(load_snapshot(_open(table)))
    physical = sum(_footer_rows(f) for f in _deltalake_files(table))
    logical = pl.read_delta(str(table)).height
    deleted = physical - logical
    dvs = Replay(table).dvs()
    actual = {
        "max-deleted-ratio": deleted / physical,
        "max-deleted-rows": deleted,
        "max-dv-files": len({dv["pathOrInlineDv"] for dv in dvs}),
        "max-files-with-dvs": len(dvs),
        "max-inline-dvs": 0,
        "max-files": len(_deltalake_files(table)),
        "max-files-without-stats": 0,
    }
    for name, value in actual.items():
        at, below = evaluate_checks(s, [(name, value), (name, value - 0.01)])
        assert at.actual == pytest.approx(value)
        assert at.passed is True  # "at most LIMIT"
        assert below.passed is (value - 0.01 >= value)
        assert at.to_json() == {
            "name": name,
            "limit": value,
            "actual": pytest.approx(value),
            "passed": True,
        }
    outcomes = evaluate_checks(s, [("max-deleted-ratio", 0.5), ("max-deleted-ratio", 0.1)])
    assert [o.passed for o in outcomes] == [True, False]


# -- time travel -----------------------------------------------------------------------------


def test_load_snapshot_version_and_timestamp_exclusive() -> None:
    log = _open(GOLDEN / "table-with-dv-small")
    with pytest.raises(UsageError, match="--version and --timestamp"):
        load_snapshot(log, 0, 0)


def test_load_snapshot_by_timestamp(tmp_path: Path) -> None:
    table = copy_golden("basic-dv-no-checkpoint", tmp_path)
    for v, seconds in ((0, 1_700_000_000), (1, 1_700_000_100)):
        os.utime(table / "_delta_log" / f"{v:020d}.json", (seconds, seconds))
    log = _open(table)
    assert load_snapshot(log, timestamp_ms=1_700_000_050_000).version == 0
    assert load_snapshot(log, timestamp_ms=1_700_000_100_000).version == 1
    s = summarize(load_snapshot(log, timestamp_ms=1_700_000_000_000))
    assert s.commit_timestamp == 1_700_000_000_000
    assert s.logical_rows == pl.read_delta(str(table), version=0).height


def test_index_versions_match_deltalake() -> None:
    for name, (version, _) in INDEX.items():
        assert _deltalake_version(GOLDEN / name) == version, name


def test_history_metrics_are_numbers_where_they_are_numbers() -> None:
    """Delta writers log metrics as strings; --history gives numbers, other text unchanged."""
    from dvtool.commands.inspect.command import _history_entry
    from dvtool.delta.log.reader import CommitRecord

    metrics = {"a": "12", "b": "-3", "c": "0.25", "d": "1.5e3", "e": "n/a", "f": "1_000", "g": 7}
    entry = _history_entry(CommitRecord(0, 1, {"operationMetrics": metrics}))
    assert entry.operation_metrics == {
        "a": 12,
        "b": -3,
        "c": 0.25,
        "d": 1500.0,
        "e": "n/a",
        "f": "1_000",
        "g": 7,
    }
