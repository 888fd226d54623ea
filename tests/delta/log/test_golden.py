"""Acceptance tests of the log reader on the golden tables, against independent oracles.

Every table of `../shared/golden/INDEX.md` (parsed here, so INDEX.md is the single source of
the expected numbers) is read by dvtool and compared with:

- INDEX.md's latest version and logical rows;
- deltalake (delta-rs): its log replay (add actions, `numRecords`) and its decoded deletion
  vectors (`deletion_vectors()`, one selection vector per file with a DV);
- polars `read_delta`, which applies deletion vectors (where polars can read the table);
- the `expected/` folders that hold the rows a correct reader returns.

The robustness tests damage copies of the tables (`golden_copy`), never the originals.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaProtocolError

from dvtool.commands.inspect.command import InspectRequest, load_snapshot, run_inspect
from dvtool.commands.inspect.summary import summarize
from dvtool.delta.dvstore import DVStore
from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.delta.protocol.file_actions import key_column
from dvtool.delta.protocol.log_files import LogFileKind, plan_segment
from dvtool.delta.protocol.schema import partition_physical_names
from dvtool.errors import LogError, UnsupportedFeatureError
from tests import oracles
from tests.conftest import GOLDEN

GoldenCopy = Callable[[str], Path]

# -- INDEX.md --------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexRow:
    """One row of the main table of INDEX.md."""

    table: str
    version: int
    features: str
    logical_rows: int


def _read_index() -> list[IndexRow]:
    """The main table of INDEX.md; a single failing placeholder when the file is missing."""
    path = GOLDEN / "INDEX.md"
    if not path.is_file():
        return [IndexRow(f"missing:{path}", -1, "", -1)]
    rows: list[IndexRow] = []
    in_table = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("| table | latest version"):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(cells[0]) <= set("-: "):
            continue  # the header separator
        rows.append(IndexRow(cells[0], int(cells[1]), cells[2], int(cells[3])))
    return rows


INDEX = _read_index()
BY_NAME = {row.table: row for row in INDEX}
ALL_TABLES = [pytest.param(row, id=row.table) for row in INDEX]

# Tables whose `expected/` folder (beside the `delta/` table) holds the rows at the latest version.
WITH_EXPECTED = [
    "dv-partitioned-with-checkpoint/delta",
    "dv-with-columnmapping/delta",
    "log-replay-dv-key-cases/delta",
]

# Tables polars `read_delta` refuses (it raises DeltaProtocolError naming the feature), so the
# polars comparison cannot run for them; they are still checked against INDEX.md and against
# deltalake's log replay in `test_rows_match_deltalake_log`.
POLARS_UNREADABLE = {
    "dv-with-columnmapping/delta": "polars does not support the columnMapping reader feature",
    "cdf-column-mapping-name-mode": "polars does not support reader version 2 (column mapping)",
    "v2-checkpoints-json-with-sidecars": "polars does not support the v2Checkpoint feature",
    "v2-checkpoints-parquet-with-sidecars": "polars does not support the v2Checkpoint feature",
    "v2-checkpoints-parquet-with-last-checkpoint": "polars does not support v2Checkpoint",
    "v2-classic-checkpoint-parquet": "polars does not support the v2Checkpoint feature",
    "type-widening": "polars does not support the typeWidening-preview reader feature",
}

# Tables deltalake (delta-rs) refuses to open (it raises naming the feature): their log replay
# and DVs are checked against the independent JSON replay of tests/oracles.py instead.
DELTALAKE_UNREADABLE = {
    "type-widening": "Unsupported table features required: [TypeWideningPreview]",
}


def table_dir(name: str) -> Path:
    path = GOLDEN / name
    if not (path / "_delta_log").is_dir():
        pytest.fail(f"golden table {path} is missing (CI provides ../shared/golden)")
    return path


# -- helpers ---------------------------------------------------------------------------------


def commit_file(root: Path, version: int) -> Path:
    return root / "_delta_log" / f"{version:020d}.json"


def logical_rows(snapshot: Snapshot) -> int:
    return summarize(snapshot).logical_rows


def state(log: DeltaLog, version: int | None = None) -> tuple[Any, ...]:
    """What two readings of the same table version must agree on."""
    snap = log.snapshot(version)
    keys = sorted(key_column(snap.files).to_pylist())
    return snap.version, keys, logical_rows(snap), snap.protocol, snap.metadata


def uri_to_path(uri: str) -> str:
    parsed = urlparse(uri)
    assert parsed.scheme == "file", uri
    return os.path.realpath(url2pathname(parsed.path))


def dvtool_deleted_rows(log: DeltaLog, snap: Snapshot) -> dict[str, set[int]]:
    """Deleted row indexes per data file (real path) of every live file with a DV."""
    store = DVStore(log.storage)
    out: dict[str, set[int]] = {}
    for row in snap.files.select(["path", "numRecords", "deletionVector"]).to_pylist():
        dv = row["deletionVector"]
        if dv is None:
            continue
        descriptor = DeletionVectorDescriptor.from_json(dv)
        bitmap = store.load(descriptor, data_file=row["path"], num_records=row["numRecords"])
        assert len(bitmap) == dv["cardinality"], row["path"]
        location = os.path.realpath(log.storage.resolve(row["path"]))
        assert location not in out, f"two live entries for {location}"
        out[location] = set(bitmap)
    return out


def deltalake_deleted_rows(path: Path, version: int | None = None) -> dict[str, set[int]]:
    """The same, from delta-rs: a selection vector per file with a DV (False = deleted)."""
    table = DeltaTable(str(path), version=version)
    out: dict[str, set[int]] = {}
    for row in pa.table(table.deletion_vectors()).to_pylist():
        location = uri_to_path(row["filepath"])
        assert location not in out
        out[location] = {i for i, keep in enumerate(row["selection_vector"]) if not keep}
    return out


def oracle_deleted_rows(path: Path) -> dict[str, set[int]]:
    """Deleted row indexes per data file (real path), from the raw JSON replay of
    tests/oracles.py, for the tables deltalake cannot open."""
    _, live = oracles.replay_json(path)
    return {
        os.path.realpath(path / unquote(add["path"])): oracles.read_dv(path, dv)
        for add in live.values()
        if (dv := add.get("deletionVector"))
    }


def oracle_counts(path: Path) -> tuple[int, int, int]:
    """(live files, physical rows, logical rows) from the raw JSON replay of tests/oracles.py."""
    _, live = oracles.replay_json(path)
    physical = sum(json.loads(add["stats"])["numRecords"] for add in live.values())
    deleted = sum(len(rows) for rows in oracle_deleted_rows(path).values())
    return len(live), physical, physical - deleted


def deltalake_counts(path: Path, version: int | None = None) -> tuple[int, int, int]:
    """(live files, physical rows, logical rows) from delta-rs's own log replay."""
    table = DeltaTable(str(path), version=version)
    adds = pa.table(table.get_add_actions(flatten=True))
    records = adds.column("num_records")
    assert records.null_count == 0, "deltalake found files without numRecords"
    physical = int(pc.sum(records).as_py() or 0)
    deleted = sum(len(rows) for rows in deltalake_deleted_rows(path, version).values())
    return adds.num_rows, physical, physical - deleted


def read_logical_table(path: Path) -> pa.Table:
    """The table's rows at its latest version, read with dvtool's log and DVs.

    Data files are read with pyarrow, deleted rows dropped, physical column names mapped to
    logical ones and partition values added as string columns.
    """
    log = open_log(str(path))
    snap = log.snapshot()
    store = DVStore(log.storage)
    mode = snap.column_mapping_mode
    partitions = partition_physical_names(snap.schema, snap.metadata.partition_columns, mode)
    pieces = []
    columns = ["path", "partitionValues", "numRecords", "deletionVector"]
    for row in snap.files.select(columns).to_pylist():
        data = pq.read_table(log.storage.resolve(row["path"]))
        if row["deletionVector"] is not None:
            deleted = store.load(
                DeletionVectorDescriptor.from_json(row["deletionVector"]),
                data_file=row["path"],
                num_records=row["numRecords"],
            )
            data = data.filter(pa.array([i not in deleted for i in range(data.num_rows)]))
        values = dict(row["partitionValues"] or [])
        logical = {}
        for f in snap.schema:
            if f.name in partitions:
                logical[f.name] = pa.array([values.get(partitions[f.name])] * data.num_rows)
            else:
                logical[f.name] = data.column(f.physical_name(mode))
        pieces.append(pa.table(logical))
    return pa.concat_tables(pieces)


def sorted_rows(table: pa.Table, schema: pa.Schema) -> list[tuple[Any, ...]]:
    columns = [table.column(f.name).cast(f.type).to_pylist() for f in schema]
    return sorted(zip(*columns, strict=True), key=repr)


# -- the index -------------------------------------------------------------------------------


def test_index_lists_every_golden_table() -> None:
    """INDEX.md is the single source for the parametrized tests: it must list every table."""
    assert GOLDEN.is_dir(), f"golden tables missing at {GOLDEN} (CI provides ../shared/golden)"
    on_disk = set()
    for log_dir in GOLDEN.glob("**/_delta_log"):
        name = log_dir.parent.relative_to(GOLDEN).as_posix()
        if not name.startswith("bad/"):
            on_disk.add(name)
    assert len(INDEX) >= 19
    assert set(BY_NAME) == on_disk


# -- 1. version and logical rows of every table ----------------------------------------------


@pytest.mark.parametrize("row", ALL_TABLES)
def test_inspect_matches_index(row: IndexRow) -> None:
    out = run_inspect(open_log(str(table_dir(row.table))), InspectRequest()).to_json()
    assert out["version"] == row.version
    assert out["logical_rows"] == row.logical_rows
    assert out["row_counts_exact"] is True
    assert out["physical_rows"] - out["deleted_rows"] == out["logical_rows"]
    # the commit of the latest version, also when that version has a checkpoint
    commit = commit_file(table_dir(row.table), row.version)
    actions = [json.loads(line) for line in commit.read_text(encoding="utf-8").splitlines()]
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    assert out["operation"] == info.get("operation")
    expected_time = info.get("inCommitTimestamp", int(commit.stat().st_mtime * 1000))
    assert out["commit_timestamp"] == expected_time


# -- 2. deletion vectors against deltalake ---------------------------------------------------

DV_VERSIONS = [pytest.param(row, None, id=row.table) for row in INDEX] + [
    pytest.param(BY_NAME.get(name, INDEX[0]), v, id=f"{name}@{v}")
    for name, versions in {
        "log-replay-dv-key-cases/delta": [0, 1, 2],
        "basic-dv-with-checkpoint": [1, 10, 25, 40],
        "compacted-log-files-table": [5, 10, 15, 20],
    }.items()
    for v in versions
]


@pytest.mark.parametrize(("row", "version"), DV_VERSIONS)
def test_deletion_vectors_match_deltalake(row: IndexRow, version: int | None) -> None:
    path = table_dir(row.table)
    log = open_log(str(path))
    snap = log.snapshot(version)
    ours = dvtool_deleted_rows(log, snap)
    if row.table in DELTALAKE_UNREADABLE:
        with pytest.raises(Exception, match=re.escape(DELTALAKE_UNREADABLE[row.table])):
            DeltaTable(str(path), version=version).deletion_vectors()
        assert version is None
        theirs = oracle_deleted_rows(path)
    else:
        theirs = deltalake_deleted_rows(path, version)
    assert set(ours) == set(theirs), "files with DVs differ"
    for location, rows in ours.items():
        assert rows == theirs[location], location
    if "deletionVectors" not in row.features:
        assert not ours


def test_dv_tables_have_dvs() -> None:
    """The DV comparison above is not vacuous: most DV tables have live DVs."""
    with_dvs = [
        row.table
        for row in INDEX
        if dvtool_deleted_rows(log := open_log(str(table_dir(row.table))), log.snapshot())
    ]
    assert len(with_dvs) >= 9, with_dvs


# -- 3. logical rows against polars and deltalake --------------------------------------------


@pytest.mark.parametrize("row", ALL_TABLES)
def test_logical_rows_match_polars(row: IndexRow) -> None:
    """polars where it reads the table; for the tables it refuses (listed with the reason in
    POLARS_UNREADABLE) the refusal itself is asserted, and INDEX.md plus deltalake's log replay
    (test_rows_match_deltalake_log) are the oracles."""
    path = table_dir(row.table)
    ours = logical_rows(open_log(str(path)).snapshot())
    assert ours == row.logical_rows
    if row.table in POLARS_UNREADABLE:
        with pytest.raises(DeltaProtocolError, match="does not support"):
            pl.read_delta(str(path))
        return
    assert ours == pl.read_delta(str(path)).height


@pytest.mark.parametrize("row", ALL_TABLES)
def test_rows_match_deltalake_log(row: IndexRow) -> None:
    """Files, physical and logical rows agree with delta-rs's log replay and DV decoding.

    This runs for every table, also those polars (and deltalake's own reader) refuse.
    """
    path = table_dir(row.table)
    out = run_inspect(open_log(str(path)), InspectRequest()).to_json()
    if row.table in DELTALAKE_UNREADABLE:
        with pytest.raises(Exception, match=re.escape(DELTALAKE_UNREADABLE[row.table])):
            deltalake_counts(path)
        files, physical, logical = oracle_counts(path)
    else:
        files, physical, logical = deltalake_counts(path)
    assert (out["num_files"], out["physical_rows"], out["logical_rows"]) == (
        files,
        physical,
        logical,
    )


# -- 4. the expected/ folders ----------------------------------------------------------------


@pytest.mark.parametrize("name", WITH_EXPECTED)
def test_rows_match_expected_folder(name: str) -> None:
    path = table_dir(name)
    expected = pq.read_table(path.parent / "expected")
    out = run_inspect(open_log(str(path)), InspectRequest()).to_json()
    assert out["logical_rows"] == expected.num_rows
    # and the rows themselves: data files read through dvtool's log and DVs
    ours = read_logical_table(path)
    assert sorted_rows(ours, expected.schema) == sorted_rows(expected, expected.schema)


# -- 5. time travel --------------------------------------------------------------------------

TIME_TRAVEL = {
    "basic-dv-with-checkpoint": [0, 1, 9, 10, 11, 19, 20, 21, 30, 39, 40, 41, 45, 46],
    "compacted-log-files-table": list(range(26)),
}


@pytest.mark.parametrize("name", list(TIME_TRAVEL))
def test_time_travel_matches_oracles(name: str) -> None:
    path = table_dir(name)
    log = open_log(str(path))
    for v in TIME_TRAVEL[name]:
        snap = log.snapshot(v)
        assert snap.version == v
        rows = logical_rows(snap)
        assert rows == pl.read_delta(str(path), version=v).height, f"version {v}"
        assert rows == deltalake_counts(path, v)[2], f"version {v}"
    out = run_inspect(log, InspectRequest(version=TIME_TRAVEL[name][3])).to_json()
    assert out["version"] == TIME_TRAVEL[name][3]


def test_time_travel_past_latest_is_an_error() -> None:
    log = open_log(str(table_dir("basic-dv-with-checkpoint")))
    with pytest.raises(LogError, match="version 47 does not exist; the latest version is 46"):
        log.snapshot(47)


def _mtime_s(version: int) -> int:
    return (version + 1) * 1000


def test_version_at_uses_commit_file_times(golden_copy: GoldenCopy) -> None:
    root = golden_copy("basic-dv-with-checkpoint")
    for v in range(47):
        os.utime(commit_file(root, v), (_mtime_s(v), _mtime_s(v)))
    # checkpoints and other files get times that would confuse a reader that used them
    for other in (root / "_delta_log").glob("*.checkpoint.parquet"):
        os.utime(other, (5, 5))
    log = open_log(str(root))
    ms = [_mtime_s(v) * 1000 for v in range(47)]
    for v in (0, 1, 10, 23, 45, 46):
        assert log.version_at(ms[v]) == v, f"at commit {v}"
    for v in (0, 9, 10, 30, 45):
        assert log.version_at(ms[v] + 1) == v, f"just after commit {v}"
        assert log.version_at(ms[v + 1] - 1) == v, f"just before commit {v + 1}"
    with pytest.raises(LogError, match="before the earliest available version 0"):
        log.version_at(ms[0] - 1)
    with pytest.raises(LogError, match="after the latest version 46"):
        log.version_at(ms[46] + 1)
    out = run_inspect(log, InspectRequest(timestamp_ms=ms[20] + 500)).to_json()
    assert out["version"] == 20
    assert out["commit_timestamp"] == ms[20]
    assert out["logical_rows"] == 480


def test_version_at_makes_file_times_increase_like_delta(golden_copy: GoldenCopy) -> None:
    """A commit file older than its predecessor (clock skew, a copy) counts as predecessor +
    1 ms, as Delta's history manager does, so the search stays sound."""
    root = golden_copy("basic-dv-with-checkpoint")
    times = {v: _mtime_s(v) for v in range(47)}
    times[21] = times[20] - 100  # written "before" commit 20
    for v, t in times.items():
        os.utime(commit_file(root, v), (t, t))
    log = open_log(str(root))
    at_20 = times[20] * 1000
    assert log.version_at(at_20) == 20
    assert log.version_at(at_20 + 1) == 21
    assert log.version_at(times[22] * 1000 - 1) == 21


_SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)


def _write_commit(root: Path, version: int, actions: list[dict[str, Any]]) -> Path:
    path = commit_file(root, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions), encoding="utf-8")
    return path


def _add(name: str, records: int = 5) -> dict[str, Any]:
    return {
        "add": {
            "path": name,
            "partitionValues": {},
            "size": 100,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps({"numRecords": records}),
        }
    }


def _commit_info(ict: int | None) -> dict[str, Any]:
    info: dict[str, Any] = {"timestamp": 1, "operation": "WRITE"}
    if ict is not None:
        info["inCommitTimestamp"] = ict
    return {"commitInfo": info}


def _metadata(ict: bool) -> dict[str, Any]:
    configuration = {"delta.enableInCommitTimestamps": "true"} if ict else {}
    return {
        "metaData": {
            "id": "ict-table",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": _SCHEMA,
            "partitionColumns": [],
            "configuration": configuration,
            "createdTime": 0,
        }
    }


_ICT_PROTOCOL = {
    "protocol": {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["inCommitTimestamp"],
    }
}


def test_version_at_uses_in_commit_timestamps(tmp_path: Path) -> None:
    """With in-commit timestamps, file modification times are ignored (here: reversed)."""
    ict = [1_700_000_000_000 + v * 60_000 for v in range(4)]
    _write_commit(tmp_path, 0, [_commit_info(ict[0]), _ICT_PROTOCOL, _metadata(True), _add("a")])
    for v in (1, 2, 3):
        _write_commit(tmp_path, v, [_commit_info(ict[v]), _add(f"f{v}")])
    for v in range(4):  # mtimes in the opposite order, long before the ICTs
        os.utime(commit_file(tmp_path, v), ((10 - v) * 1000, (10 - v) * 1000))
    log = open_log(str(tmp_path))
    for v in range(4):
        assert log.version_at(ict[v]) == v
    assert log.version_at(ict[1] + 1) == 1
    assert log.version_at(ict[2] - 1) == 1
    with pytest.raises(LogError, match="before the earliest"):
        log.version_at(ict[0] - 1)
    with pytest.raises(LogError, match="after the latest"):
        log.version_at(ict[3] + 1)
    with pytest.raises(LogError, match="before the earliest"):
        log.version_at(9_000_000)  # the mtime of commit 1
    out = run_inspect(log, InspectRequest(timestamp_ms=ict[2] + 10)).to_json()
    assert (out["version"], out["commit_timestamp"], out["logical_rows"]) == (2, ict[2], 15)
    assert [h.timestamp_ms for h in log.history()] == ict[::-1]


def test_version_at_with_in_commit_timestamps_enabled_later(tmp_path: Path) -> None:
    """Commits before ICT enablement use file times; from enablement on, the ICTs."""
    _write_commit(tmp_path, 0, [_commit_info(None), _ICT_PROTOCOL, _metadata(False), _add("a")])
    _write_commit(tmp_path, 1, [_commit_info(None), _add("b")])
    _write_commit(tmp_path, 2, [_commit_info(3_000_000), _metadata(True), _add("c")])
    _write_commit(tmp_path, 3, [_commit_info(4_000_000), _add("d")])
    for v, seconds in ((0, 1000), (1, 2000), (2, 10_000_000), (3, 10_000_000)):
        os.utime(commit_file(tmp_path, v), (seconds, seconds))
    log = open_log(str(tmp_path))
    assert log.version_at(1_000_000) == 0
    assert log.version_at(2_500_000) == 1
    assert log.version_at(3_500_000) == 2
    assert log.version_at(4_000_000) == 3


# -- 6. robustness of log reading ------------------------------------------------------------

WITH_LAST_CHECKPOINT = [
    "basic-dv-with-checkpoint",
    "dv-partitioned-with-checkpoint/delta",
    "dv-with-columnmapping/delta",
    "v1-multi-part-partitioned-struct-stats-only",
    "v2-checkpoints-json-with-sidecars",
    "v2-checkpoints-parquet-with-last-checkpoint",
    "app-txn-checkpoint",
]


@pytest.mark.parametrize("name", WITH_LAST_CHECKPOINT)
def test_without_last_checkpoint(name: str, golden_copy: GoldenCopy) -> None:
    expected = state(open_log(str(table_dir(name))))
    root = golden_copy(name)
    hint = root / "_delta_log" / "_last_checkpoint"
    assert hint.is_file()
    hint.unlink()
    assert state(open_log(str(root))) == expected


def _rewrite_hint(text: str) -> Callable[[str], str]:
    return lambda _old: text


def _hint_version(version: int) -> Callable[[str], str]:
    def edit(old: str) -> str:
        data = json.loads(old)
        data["version"] = version
        return json.dumps(data)

    return edit


STALE_HINTS = {
    "no-checkpoint-at-44": _hint_version(44),
    "beyond-latest": _hint_version(1000),
    "older-checkpoint": _hint_version(20),
    "not-json": _rewrite_hint("{not json"),
    "empty": _rewrite_hint(""),
}


@pytest.mark.parametrize("edit", list(STALE_HINTS))
def test_stale_last_checkpoint(edit: str, golden_copy: GoldenCopy) -> None:
    name = "basic-dv-with-checkpoint"
    expected = state(open_log(str(table_dir(name))))
    root = golden_copy(name)
    hint = root / "_delta_log" / "_last_checkpoint"
    hint.write_text(STALE_HINTS[edit](hint.read_text()))
    assert state(open_log(str(root))) == expected


@pytest.mark.parametrize("with_hint", [True, False], ids=["with-hint", "without-hint"])
def test_corrupt_checkpoint_falls_back(with_hint: bool, golden_copy: GoldenCopy) -> None:
    name = "basic-dv-with-checkpoint"
    expected = state(open_log(str(table_dir(name))))
    root = golden_copy(name)
    assert all(commit_file(root, v).is_file() for v in range(47))  # every commit is kept
    checkpoint = root / "_delta_log" / f"{40:020d}.checkpoint.parquet"
    with checkpoint.open("r+b") as f:
        f.truncate(checkpoint.stat().st_size // 2)
    if not with_hint:
        (root / "_delta_log" / "_last_checkpoint").unlink()
    assert state(open_log(str(root))) == expected


def test_corrupt_checkpoint_without_older_commits(golden_copy: GoldenCopy) -> None:
    """When the log before a corrupt checkpoint was cleaned up, the error names the checkpoint."""
    root = golden_copy("basic-dv-with-checkpoint")
    log_dir = root / "_delta_log"
    for f in log_dir.iterdir():
        if f.name[:20].isdigit() and int(f.name[:20]) < 40:
            f.unlink()
    checkpoint = log_dir / f"{40:020d}.checkpoint.parquet"
    with checkpoint.open("r+b") as f:
        f.truncate(100)
    with pytest.raises(LogError, match=re.escape(checkpoint.name)):
        open_log(str(root)).snapshot()


@pytest.mark.parametrize("with_hint", [True, False], ids=["with-hint", "without-hint"])
@pytest.mark.parametrize("part", [1, 2, 3])
def test_incomplete_multi_part_checkpoint(
    part: int, with_hint: bool, golden_copy: GoldenCopy
) -> None:
    name = "v1-multi-part-partitioned-struct-stats-only"
    expected = state(open_log(str(table_dir(name))))
    root = golden_copy(name)
    assert all(commit_file(root, v).is_file() for v in range(6))
    (root / "_delta_log" / f"{5:020d}.checkpoint.{part:010d}.{3:010d}.parquet").unlink()
    if not with_hint:
        (root / "_delta_log" / "_last_checkpoint").unlink()
    log = open_log(str(root))
    assert plan_segment(log.list_files()).checkpoint == ()
    assert state(log) == expected


def test_version_gap_after_checkpoint(golden_copy: GoldenCopy) -> None:
    root = golden_copy("basic-dv-with-checkpoint")
    commit_file(root, 43).unlink()
    with pytest.raises(LogError, match=f"{43:020d}.json is missing"):
        open_log(str(root)).snapshot()


def test_gap_before_checkpoint(golden_copy: GoldenCopy) -> None:
    """A missing commit older than the checkpoint does not matter for later versions."""
    name = "basic-dv-with-checkpoint"
    expected = state(open_log(str(table_dir(name))))
    root = golden_copy(name)
    commit_file(root, 5).unlink()
    log = open_log(str(root))
    assert state(log) == expected
    assert state(log, 12)[0] == 12
    with pytest.raises(LogError, match=f"{5:020d}.json is missing"):
        log.snapshot(7)


def test_empty_last_commit(golden_copy: GoldenCopy) -> None:
    root = golden_copy("basic-dv-with-checkpoint")
    commit_file(root, 46).write_bytes(b"")
    with pytest.raises(LogError, match=f"{46:020d}.json"):
        open_log(str(root)).snapshot()


@pytest.mark.parametrize("where", ["last-line", "first-line"])
def test_commit_cut_mid_line(where: str, golden_copy: GoldenCopy) -> None:
    root = golden_copy("basic-dv-with-checkpoint")
    path = commit_file(root, 46)
    data = path.read_bytes()
    lines = data.split(b"\n")
    assert len(lines) > 2
    if where == "last-line":
        last = data.rstrip(b"\n").rfind(b"\n") + 1
        cut = last + (len(data) - last) // 2
    else:
        cut = len(lines[0]) // 2
    path.write_bytes(data[:cut])
    with pytest.raises(LogError, match=f"{46:020d}.json"):
        open_log(str(root)).snapshot()


# -- 7. column mapping -----------------------------------------------------------------------


def test_column_mapping_names() -> None:
    path = table_dir("dv-with-columnmapping/delta")
    log = open_log(str(path))
    snap = log.snapshot()
    out = run_inspect(log, InspectRequest(files=True)).to_json()
    assert out["column_mapping_mode"] == "name"
    assert out["partition_columns"] == ["part"]
    by_name = {c["name"]: c["physical_name"] for c in out["schema"]}
    assert set(by_name) == {"part", "col1", "col2"}
    for name, physical in by_name.items():
        assert physical != name
        assert physical.startswith("col-")
    physical_part = by_name["part"]
    # the log keeps physical names, inspect --files shows logical ones
    for values in snap.files.column("partitionValues").to_pylist():
        assert [k for k, _ in values] == [physical_part]
    assert len(out["files"]) == snap.files.num_rows
    for entry in out["files"]:
        assert list(entry["partition_values"]) == ["part"]
        assert entry["path"].startswith(f"{physical_part}=")
        assert entry["path"].startswith(f"{physical_part}={entry['partition_values']['part']}/")


def test_column_mapping_legacy_protocol() -> None:
    """Column mapping by protocol version (2/5) without feature lists."""
    out = run_inspect(
        open_log(str(table_dir("cdf-column-mapping-name-mode"))), InspectRequest()
    ).to_json()
    assert out["protocol"]["readerFeatures"] is None
    assert "columnMapping" in out["reader_features"]
    assert out["column_mapping_mode"] == "name"
    assert all(c["physical_name"] != c["name"] for c in out["schema"])


# -- 8. unsupported reader features ----------------------------------------------------------


def test_unsupported_reader_feature(golden_copy: GoldenCopy) -> None:
    root = golden_copy("table-with-dv-small")
    features = ["deletionVectors", "someFutureFeature"]
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": features,
    }
    _write_commit(root, 2, [_commit_info(None), {"protocol": protocol}])
    log = open_log(str(root))
    with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
        load_snapshot(log)
    with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
        run_inspect(log, InspectRequest())
    # the version before the protocol change is still readable
    assert load_snapshot(log, version=1).version == 1


# -- 9. log compaction -----------------------------------------------------------------------


def test_log_compaction_equals_plain_replay(golden_copy: GoldenCopy) -> None:
    name = "compacted-log-files-table"
    compacted = open_log(str(table_dir(name)))
    root = golden_copy(name)
    removed = list((root / "_delta_log").glob("*.compacted.json"))
    assert len(removed) == 3
    for f in removed:
        f.unlink()
    plain = open_log(str(root))
    used = 0
    for v in range(26):
        deltas = plan_segment(compacted.list_files(), v).deltas
        used += any(d.kind == LogFileKind.COMPACTION for d in deltas)
        assert all(d.kind == LogFileKind.COMMIT for d in plan_segment(plain.list_files(), v).deltas)
        assert state(compacted, v) == state(plain, v), f"version {v}"
    assert used > 0, "no version was read through a compaction file"
    assert any(
        d.kind == LogFileKind.COMPACTION for d in plan_segment(compacted.list_files()).deltas
    )
