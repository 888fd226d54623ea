"""LogWriter: put-if-absent commits, races, lost responses, checkpoints — checked with oracles.

Tables come from `deltalake.write_deltalake` in tmp_path or are copies of golden tables; after
dvtool writes, deltalake (`DeltaTable`) and polars (`read_delta`) must still read the same rows.
"""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import deltalake
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvtool.delta.log.reader import DeltaLog, open_log
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.transaction import Prepared, Written, commit_transaction
from dvtool.delta.log.writer import (
    Backoff,
    CommitRace,
    LogWriter,
    TransactionConflictError,
    checkpoint_interval,
)
from dvtool.delta.protocol.checkpoint_build import checkpoint_table, last_checkpoint_checksum
from dvtool.delta.protocol.commit import (
    add_action_from_row,
    commit_info,
    encode_commit,
    remove_for_add,
)
from dvtool.delta.protocol.conflicts import CONCURRENT_DELETE_READ, ReadSet
from dvtool.delta.protocol.replay import ActionBatch
from dvtool.delta.protocol.retention import parse_interval_ms, tombstone_retention_ms
from dvtool.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    StorageError,
    UnsupportedFeatureError,
)
from dvtool.storage.table_storage import Storage
from tests.conftest import GOLDEN

NO_WAIT = Backoff(initial=0.0, maximum=0.0, jitter=0.0)
DAY_MS = 24 * 3600 * 1000


# -- helpers -------------------------------------------------------------------------------


def make_table(
    root: Path, *, partitioned: bool = True, config: dict[str, str] | None = None, writes: int = 1
) -> Path:
    data = pa.table(
        {
            "id": pa.array(range(12), pa.int64()),
            "p": pa.array(["a", "b", "c"] * 4),
            "s": pa.array([f"v{i}" for i in range(12)]),
        }
    )
    for i in range(writes):
        deltalake.write_deltalake(
            str(root),
            data,
            mode="append",
            partition_by=["p"] if partitioned else None,
            configuration=config if i == 0 else None,
        )
    return root


def rows(path: Path) -> list[dict[str, Any]]:
    """The table's rows as polars reads them, sorted."""
    return sorted(pl.read_delta(str(path)).to_dicts(), key=lambda r: json.dumps(r, default=str))


def dl_rows(path: Path) -> list[Any]:
    """The rows as deltalake reads them; for DV tables, which deltalake's pyarrow reader
    refuses, the live files its log replay finds (path, size, numRecords)."""
    table = deltalake.DeltaTable(str(path))
    if "deletionVectors" in (table.protocol().reader_features or []):
        adds = pa.table(table.get_add_actions(flatten=True))
        return sorted(adds.select(["path", "size_bytes", "num_records"]).to_pylist(), key=str)
    return sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: json.dumps(r, default=str))


def log_of(path: Path) -> DeltaLog:
    return open_log(str(path))


def readd_actions(
    snapshot: Snapshot, txn_id: str, *, which: int = 0, ict: int | None = None
) -> list[dict[str, Any]]:
    """A metadata-only commit: commitInfo and the live file `which` added again
    (same path and DV, dataChange=false), which the protocol allows."""
    row = snapshot.files.to_pylist()[which]
    return [
        commit_info(
            "OPTIMIZE",
            {"predicate": []},
            {"numAddedFiles": 1},
            snapshot.version,
            txn_id,
            1_700_000_000_000,
            False,
            in_commit_timestamp=ict,
        ),
        add_action_from_row(row, data_change=False),
    ]


def readd(log: DeltaLog, *, which: int = 0) -> Any:
    """Re-add live file `which` through the commit path every command uses (post-commit
    checkpoint included); the CommitResult."""

    def prepare(snapshot: Snapshot, _: Written) -> Prepared[None]:
        actions = readd_actions(snapshot, str(uuid.uuid4()), which=which)
        return Prepared(None, actions, ReadSet.for_actions(snapshot.version, actions))

    return commit_transaction(log, prepare, plans=1).commit


def commit_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "_delta_log").glob("*.json"))


def txn_ids(path: Path) -> list[str | None]:
    out = []
    for name in commit_files(path):
        first = (path / "_delta_log" / name).read_text().splitlines()[0]
        out.append(json.loads(first).get("commitInfo", {}).get("txnId"))
    return out


# -- single commits ------------------------------------------------------------------------


def test_metadata_only_commit_on_deltalake_table(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", writes=2)
    before = rows(root)
    log = log_of(root)
    v = log.snapshot().version
    result = readd(log)
    assert result.version == v + 1 and result.attempts == 1 and not result.recovered
    assert result.winners == () and result.checkpoint is None
    assert deltalake.DeltaTable(str(root)).version() == v + 1
    assert rows(root) == before
    assert dl_rows(root) == before
    after = log_of(root).snapshot()
    assert after.version == v + 1 and after.files.num_rows == 6
    assert after.commit.commit_info is not None
    assert after.commit.commit_info["operation"] == "OPTIMIZE"


@pytest.mark.parametrize(
    "name", ["basic-dv-no-checkpoint", "dv-partitioned-with-checkpoint/delta", "with-short-dv"]
)
def test_metadata_only_commit_on_golden_dv_table(
    golden_copy: Callable[[str], Path], name: str
) -> None:
    root = golden_copy(name)
    before = rows(root)
    before_dl = dl_rows(root)
    log = log_of(root)
    snapshot = log.snapshot()
    with_dv = next(
        i for i, r in enumerate(snapshot.files.to_pylist()) if r["deletionVector"] is not None
    )
    result = readd(log, which=with_dv)
    assert result.version == snapshot.version + 1
    assert rows(root) == before
    assert dl_rows(root) == before_dl
    assert deltalake.DeltaTable(str(root)).version() == result.version
    committed = (root / "_delta_log" / f"{result.version:020d}.json").read_text()
    assert '"deletionVector"' in committed


def test_commit_race_raises_with_winner(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    snapshot = log.snapshot()
    writer = LogWriter(log)
    writer.commit(1, readd_actions(snapshot, "first"), "first")
    with pytest.raises(CommitRace) as info:
        writer.commit(1, readd_actions(snapshot, "second"), "second")
    assert info.value.version == 1
    assert info.value.winner is not None
    assert info.value.winner.commit_info is not None
    assert info.value.winner.commit_info["txnId"] == "first"


def test_commit_needs_matching_txn_id(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    with pytest.raises(ValueError, match="txnId"):
        LogWriter(log).commit(1, readd_actions(log.snapshot(), "a"), "b")


def test_commit_on_memory_storage() -> None:
    storage = Storage.for_table(f"memory://dvtool-writer-{uuid.uuid4().hex}/t")
    log = DeltaLog(storage)
    writer = LogWriter(log)
    create = [
        commit_info("CREATE TABLE", {}, {}, None, "c", 1, False),
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "m",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": '{"type":"struct","fields":[]}',
                "partitionColumns": [],
                "configuration": {},
            }
        },
    ]
    writer.commit(0, create, "c")
    with pytest.raises(CommitRace):
        writer.commit(0, [commit_info("X", {}, {}, None, "d", 1, False)], "d")
    result = writer.try_commit(
        0,
        [commit_info("SET TBLPROPERTIES", {}, {}, 0, "e", 2, False)],
        ReadSet(0),
        backoff=NO_WAIT,
    )
    assert result.version == 1
    assert log.snapshot().version == 1


# -- the optimistic loop -------------------------------------------------------------------


def test_two_writers_race_one_wins_other_retries(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t")
    before = rows(root)
    snapshot = log_of(root).snapshot()
    barrier = threading.Barrier(2)
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def run(which: int) -> None:
        try:
            log = log_of(root)
            txn_id = f"writer-{which}"
            actions = readd_actions(snapshot, txn_id, which=which)
            read_set = ReadSet.for_actions(
                snapshot.version, actions, read_keys=[(actions[1]["add"]["path"], None)]
            )
            barrier.wait()
            results[which] = LogWriter(log).try_commit(
                snapshot.version, actions, read_set, backoff=NO_WAIT
            )
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    versions = sorted(r.version for r in results.values())
    assert versions == [snapshot.version + 1, snapshot.version + 2]
    loser = max(results.values(), key=lambda r: r.version)
    winner = min(results.values(), key=lambda r: r.version)
    assert winner.attempts == 1 and winner.winners == ()
    assert loser.attempts == 2 and loser.winners == (snapshot.version + 1,)
    assert sorted(t for t in txn_ids(root) if t) == ["writer-0", "writer-1"]
    assert rows(root) == before
    assert deltalake.DeltaTable(str(root)).version() == snapshot.version + 2


def test_many_writers_each_commit_once(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", writes=2)
    snapshot = log_of(root).snapshot()
    n = 4
    barrier = threading.Barrier(n)
    results: list[Any] = []
    lock = threading.Lock()

    def run(which: int) -> None:
        actions = readd_actions(snapshot, f"w{which}", which=which)
        read_set = ReadSet.for_actions(snapshot.version, actions)
        barrier.wait()
        result = LogWriter(log_of(root)).try_commit(
            snapshot.version, actions, read_set, backoff=NO_WAIT
        )
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.version for r in results) == [snapshot.version + i for i in range(1, n + 1)]
    ids = [t for t in txn_ids(root) if t and t.startswith("w")]
    assert sorted(ids) == [f"w{i}" for i in range(n)]


def test_conflicting_winner_raises_commit_conflict(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    snapshot = log.snapshot()
    target = snapshot.files.to_pylist()[0]
    # Another writer deletes the file we are about to rewrite.
    other = [
        commit_info("DELETE", {}, {}, snapshot.version, "other", 1, False),
        remove_for_add(target, 1_700_000_000_000),
    ]
    LogWriter(log).commit(snapshot.version + 1, other, "other")
    ours = readd_actions(snapshot, "ours")
    read_set = ReadSet.for_actions(snapshot.version, ours, read_keys=[(target["path"], None)])
    with pytest.raises(TransactionConflictError) as info:
        LogWriter(log).try_commit(snapshot.version, ours, read_set, backoff=NO_WAIT)
    assert isinstance(info.value, CommitConflictError)
    assert info.value.result.exception == CONCURRENT_DELETE_READ
    assert CONCURRENT_DELETE_READ in str(info.value) and target["path"] in str(info.value)
    assert commit_files(root)[-1] == f"{snapshot.version + 1:020d}.json"


def test_non_conflicting_winners_are_skipped_in_one_retry(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    snapshot = log.snapshot()
    for i in range(1, 4):  # three other commits land after our read
        LogWriter(log).commit(
            snapshot.version + i, readd_actions(snapshot, f"o{i}", which=1), f"o{i}"
        )
    sleeps: list[float] = []
    actions = readd_actions(snapshot, "ours", which=0)
    writer = LogWriter(log, sleep=sleeps.append)
    result = writer.try_commit(
        snapshot.version, actions, ReadSet.for_actions(snapshot.version, actions)
    )
    assert result.version == snapshot.version + 4
    assert result.attempts == 2
    assert result.winners == (1, 2, 3)
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.075


def test_builder_gets_version_and_winners(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    snapshot = log.snapshot()
    LogWriter(log).commit(1, readd_actions(snapshot, "other", which=1), "other")
    calls: list[tuple[int, list[int]]] = []

    def build(version: int, winners: Sequence[ActionBatch]) -> list[dict[str, Any]]:
        calls.append((version, [w.version for w in winners]))
        return readd_actions(snapshot, "ours")

    result = LogWriter(log).try_commit(0, build, ReadSet(0), backoff=NO_WAIT)
    assert result.version == 2
    assert calls == [(1, []), (2, [1])]


def test_gives_up_after_max_tries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    snapshot = log.snapshot()
    writer = LogWriter(log, sleep=lambda s: None)
    original = writer.storage.put_if_absent

    def others_always_first(location: str, data: bytes) -> bool:
        # Another writer takes the version just before us, every time.
        version = int(Path(location).name.split(".")[0])
        other = readd_actions(snapshot, f"other-{version}", which=1)
        original(location, encode_commit(other))
        return original(location, data)

    monkeypatch.setattr(writer.storage, "put_if_absent", others_always_first)
    actions = readd_actions(snapshot, "ours")
    with pytest.raises(CommitConflictError, match="after 3 attempts"):
        writer.try_commit(0, actions, ReadSet.for_actions(0, actions), max_tries=3)
    assert "ours" not in txn_ids(root)


def test_backoff_grows_with_jitter() -> None:
    import random

    rng = random.Random(1)
    b = Backoff(initial=0.1, factor=2, maximum=1.0, jitter=0.5)
    delays = [b.delay(a, rng) for a in range(1, 7)]
    for attempt, d in enumerate(delays, 1):
        base = min(1.0, 0.1 * 2 ** (attempt - 1))
        assert base * 0.5 <= d <= base * 1.5
    assert Backoff(jitter=0).delay(1, rng) == Backoff().initial


# -- lost responses ------------------------------------------------------------------------


def test_lost_response_is_recognised_as_our_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_table(tmp_path / "t")
    before = rows(root)
    log = log_of(root)
    snapshot = log.snapshot()
    writer = LogWriter(log, sleep=lambda s: None)
    original = writer.storage.put_if_absent
    calls: list[str] = []

    def write_then_time_out(location: str, data: bytes) -> bool:
        calls.append(location)
        original(location, data)
        raise StorageError(f"cannot create {location}: read timed out")

    monkeypatch.setattr(writer.storage, "put_if_absent", write_then_time_out)
    actions = readd_actions(snapshot, "mine")
    result = writer.try_commit(0, actions, ReadSet.for_actions(0, actions))
    assert result.version == 1 and result.recovered and result.attempts == 1
    assert len(calls) == 1  # not written a second time
    assert txn_ids(root).count("mine") == 1
    assert commit_files(root) == [f"{v:020d}.json" for v in range(2)]
    assert rows(root) == before


def test_failed_put_that_wrote_nothing_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    snapshot = log.snapshot()
    writer = LogWriter(log, sleep=lambda s: None)
    original = writer.storage.put_if_absent
    failures = [StorageError("connection reset")]

    def flaky(location: str, data: bytes) -> bool:
        if failures:
            raise failures.pop()
        return original(location, data)

    monkeypatch.setattr(writer.storage, "put_if_absent", flaky)
    result = writer.commit(1, readd_actions(snapshot, "mine"), "mine")
    assert result.version == 1 and not result.recovered
    assert txn_ids(root).count("mine") == 1


def test_persistent_put_failure_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    writer = LogWriter(log, sleep=lambda s: None)

    def broken(location: str, data: bytes) -> bool:
        raise StorageError("access denied")

    monkeypatch.setattr(writer.storage, "put_if_absent", broken)
    with pytest.raises(StorageError, match="access denied"):
        writer.commit(1, readd_actions(log.snapshot(), "mine"), "mine")
    assert len(commit_files(root)) == 1


def test_lost_response_with_someone_elses_commit_is_a_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    snapshot = log.snapshot()
    writer = LogWriter(log, sleep=lambda s: None)
    original = writer.storage.put_if_absent

    def other_wins_then_time_out(location: str, data: bytes) -> bool:
        if location.endswith(f"{1:020d}.json"):
            original(location, encode_commit(readd_actions(snapshot, "other", which=1)))
            raise StorageError("timed out")
        return original(location, data)

    monkeypatch.setattr(writer.storage, "put_if_absent", other_wins_then_time_out)
    actions = readd_actions(snapshot, "mine")
    result = writer.try_commit(0, actions, ReadSet.for_actions(0, actions))
    assert result.version == 2 and result.winners == (1,)
    assert txn_ids(root) == [None, "other", "mine"]


def test_unreadable_log_after_failed_put_says_outcome_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_table(tmp_path / "t")
    log = log_of(root)
    writer = LogWriter(log, sleep=lambda s: None)

    def fail(*args: Any) -> Any:
        raise StorageError("network down")

    actions = readd_actions(log.snapshot(), "mine")
    monkeypatch.setattr(writer.storage, "put_if_absent", fail)
    monkeypatch.setattr(writer.storage, "read", fail)
    with pytest.raises(CommitOutcomeUnknownError, match="may or may not have been written"):
        writer.commit(1, actions, "mine")


# -- in-commit timestamps ------------------------------------------------------------------


def _ict_table(root: Path, first_ict: int) -> Path:
    log_dir = root / "_delta_log"
    log_dir.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True}]}
    actions = [
        commit_info("CREATE TABLE", {}, {}, None, "c", 0, False, in_commit_timestamp=first_ict),
        {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["inCommitTimestamp", "appendOnly", "invariants"],
            }
        },
        {
            "metaData": {
                "id": "m",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"delta.enableInCommitTimestamps": "true"},
                "createdTime": 0,
            }
        },
    ]
    (log_dir / f"{0:020d}.json").write_bytes(encode_commit(actions))
    return root


def test_ict_retry_exceeds_winner_and_stays_first(tmp_path: Path) -> None:
    root = _ict_table(tmp_path / "t", first_ict=1_000)
    log = log_of(root)
    now = 5_000
    writer = LogWriter(log, clock_ms=lambda: now, sleep=lambda s: None)
    # A winner with a clock far ahead of ours.
    winner = [commit_info("X", {}, {}, 0, "other", 0, False, in_commit_timestamp=9_000)]
    writer.commit(1, winner, "other")
    ours = [commit_info("Y", {}, {}, 0, "ours", 0, False, in_commit_timestamp=1_001)]
    result = writer.try_commit(0, ours, ReadSet(0))
    assert result.version == 2
    lines = (root / "_delta_log" / f"{2:020d}.json").read_text().splitlines()
    info = json.loads(lines[0])["commitInfo"]
    assert next(iter(info)) == "inCommitTimestamp"
    assert info["inCommitTimestamp"] == 9_001 == info["timestamp"]
    history = log.history()
    icts = [r.timestamp_ms for r in sorted(history, key=lambda r: r.version)]
    assert icts == [1_000, 9_000, 9_001]


def test_ict_retry_uses_clock_when_ahead(tmp_path: Path) -> None:
    root = _ict_table(tmp_path / "t", first_ict=1_000)
    log = log_of(root)
    writer = LogWriter(log, clock_ms=lambda: 50_000, sleep=lambda s: None)
    writer.commit(1, [commit_info("X", {}, {}, 0, "o", 0, False, in_commit_timestamp=2_000)], "o")
    ours = [commit_info("Y", {}, {}, 0, "ours", 0, False, in_commit_timestamp=1_001)]
    result = writer.try_commit(0, ours, ReadSet(0))
    info = json.loads((root / "_delta_log" / f"{2:020d}.json").read_text().splitlines()[0])
    assert result.version == 2 and info["commitInfo"]["inCommitTimestamp"] == 50_000


# -- checkpoints ---------------------------------------------------------------------------


def test_checkpoint_interval_parsing() -> None:
    assert checkpoint_interval({}) == 10
    assert checkpoint_interval({"delta.checkpointInterval": "2"}) == 2
    assert checkpoint_interval({"delta.checkpointInterval": "0"}) == 10
    assert checkpoint_interval({"delta.checkpointInterval": "x"}) == 10


def _only_checkpoint_copy(root: Path, version: int, dest: Path) -> Path:
    """A copy of the table whose commits up to `version` are deleted: readers must use the
    checkpoint of `version`."""
    shutil.copytree(root, dest)
    for v in range(version + 1):
        if v < version:
            (dest / "_delta_log" / f"{v:020d}.json").unlink(missing_ok=True)
    return dest


def test_checkpoint_every_interval_read_by_oracles(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", config={"delta.checkpointInterval": "2"})
    deltalake.write_deltalake(  # an overwrite: tombstones for the checkpoint
        str(root),
        pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"], "s": ["x", "y"]}),
        mode="overwrite",
    )
    (root / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)
    for cp in (root / "_delta_log").glob("*.checkpoint.parquet"):
        cp.unlink()  # deltalake's own checkpoint: we want readers to use ours
    before = rows(root)
    log = log_of(root)
    assert log.snapshot().version == 1
    result = readd(log)
    assert result.version == 2
    assert result.checkpoint is not None and result.checkpoint_warning is None
    cp = result.checkpoint
    assert cp.version == 2 and cp.name == f"{2:020d}.checkpoint.parquet" and not cp.v2
    last = json.loads((root / "_delta_log" / "_last_checkpoint").read_text())
    assert {k: last[k] for k in ("version", "size", "sizeInBytes", "numOfAddFiles")} == {
        "version": 2,
        "size": cp.size,
        "sizeInBytes": (root / "_delta_log" / cp.name).stat().st_size,
        "numOfAddFiles": 2,
    }
    assert last["checksum"] == last_checkpoint_checksum(last)
    table = pq.read_table(root / "_delta_log" / cp.name)
    assert table.num_rows == cp.size == 1 + 1 + 2 + 3  # protocol, metaData, adds, tombstones
    # Readers that can only use the checkpoint read the same rows.
    copy = _only_checkpoint_copy(root, 2, tmp_path / "copy")
    assert deltalake.DeltaTable(str(copy)).version() == 2
    assert dl_rows(copy) == before
    assert rows(copy) == before
    snapshot = log_of(copy).snapshot()
    assert snapshot.version == 2 and snapshot.files.num_rows == 2
    assert snapshot.tombstones.num_rows == 3
    # Version 3 is not a multiple of 2: no checkpoint; version 4 is.
    assert readd(log_of(root)).checkpoint is None
    assert readd(log_of(root)).checkpoint is not None
    assert json.loads((root / "_delta_log" / "_last_checkpoint").read_text())["version"] == 4


def test_default_interval_is_ten(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", partitioned=False)
    log = log_of(root)
    for expected in range(1, 11):
        result = readd(log)
        assert result.version == expected
        assert (result.checkpoint is not None) == (expected == 10)
    assert log_of(root).last_checkpoint_hint() == 10
    assert rows(_only_checkpoint_copy(root, 10, tmp_path / "copy")) == rows(root)


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("basic-dv-no-checkpoint", 1),
        ("table-with-dv-small", 1),
        ("dv-partitioned-with-checkpoint/delta", 15),
        ("dv-with-columnmapping/delta", 15),
        ("log-replay-dv-key-cases/delta", 3),
        ("app-txn-checkpoint", 1),
        ("basic_partitioned", 1),
    ],
)
def test_checkpoint_with_dvs_read_by_oracles(
    golden_copy: Callable[[str], Path], tmp_path: Path, name: str, version: int
) -> None:
    root = golden_copy(name)
    # polars does not read column mapping tables; deltalake and dvtool still check those.
    before = rows(root) if "columnmapping" not in name else None
    before_dl = dl_rows(root)
    original = log_of(root).snapshot()
    info = LogWriter(log_of(root)).write_checkpoint(version)
    assert info.num_add_files == original.files.num_rows
    copy = _only_checkpoint_copy(root, version, tmp_path / "copy")
    for old in (copy / "_delta_log").glob("*.checkpoint*.parquet"):
        if not old.name.startswith(f"{version:020d}"):
            old.unlink()  # only our checkpoint is left to read
    assert deltalake.DeltaTable(str(copy)).version() == version
    if before is not None:
        assert rows(copy) == before
    assert dl_rows(copy) == before_dl
    snapshot = log_of(copy).snapshot()
    assert _keys(snapshot.files) == _keys(original.files)
    assert snapshot.txns == original.txns
    assert snapshot.metadata == original.metadata and snapshot.protocol == original.protocol


def _keys(table: pa.Table) -> list[tuple[str, str]]:
    return sorted(
        (r["path"], json.dumps(r["deletionVector"], sort_keys=True))
        for r in table.select(["path", "deletionVector"]).to_pylist()
    )


def test_v2_checkpoint_table_gets_v2_spec_checkpoint(
    golden_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    """polars and deltalake do not read v2Checkpoint tables: the rows are read from the data
    files of the live files dvtool's reader finds through our checkpoint alone."""
    root = golden_copy("v2-classic-checkpoint-parquet")
    before = data_rows(root)
    assert len(before) == 20  # INDEX.md
    info = LogWriter(log_of(root)).write_checkpoint(1)  # replaces Spark's classic checkpoint 1
    assert info.v2
    table = pq.read_table(root / "_delta_log" / info.name)
    assert table.column("checkpointMetadata").to_pylist()[0] == {"version": 1, "tags": None}
    assert table.column("sidecar").null_count == table.num_rows
    assert table.column("add").null_count == table.num_rows - 4
    shutil.rmtree(root / "_delta_log" / "_sidecars")  # ours needs no sidecars
    (root / "_delta_log" / f"{0:020d}.json").unlink()
    last = json.loads((root / "_delta_log" / "_last_checkpoint").read_text())
    assert "v2Checkpoint" not in last and last["version"] == 1
    assert log_of(root).snapshot().files.num_rows == 4
    assert data_rows(root) == before


def data_rows(root: Path) -> list[dict[str, Any]]:
    """Rows of the live files (tables without DVs or partitions), read with pyarrow."""
    snapshot = log_of(root).snapshot()
    assert snapshot.files.column("deletionVector").null_count == snapshot.files.num_rows
    out: list[dict[str, Any]] = []
    for path in snapshot.files.column("path").to_pylist():
        out += pq.read_table(Storage.for_table(str(root)).resolve(path)).to_pylist()
    return sorted(out, key=str)


def test_checkpoint_schema_matches_delta_spark(
    golden_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    """Every column we write has Spark's physical type, logical type and nullability."""
    root = golden_copy("v2-classic-checkpoint-parquet")
    ours = tmp_path / "ours.parquet"
    table = checkpoint_table(log_of(root).snapshot().state, v2=True)
    pq.write_table(table, ours)
    spark = _columns(
        GOLDEN / "v2-classic-checkpoint-parquet/_delta_log/" / f"{1:020d}.checkpoint.parquet"
    )
    mine = _columns(ours)
    missing = {path for path in mine if path not in spark}
    # Spark 3.5 still writes remove.stats/tags; the protocol leaves them out of checkpoints.
    assert missing == set()
    for path, desc in mine.items():
        assert desc == spark[path], path
    legacy = _columns(
        GOLDEN / "basic-dv-with-checkpoint/_delta_log" / f"{40:020d}.checkpoint.parquet"
    )
    for path, desc in legacy.items():
        if path in mine:
            assert mine[path] == desc, path


def _columns(path: Path) -> dict[str, tuple[Any, ...]]:
    schema = pq.ParquetFile(path).schema
    out = {}
    for i in range(len(schema)):
        col = schema.column(i)
        out[col.path] = (
            col.physical_type,
            str(col.logical_type),
            col.max_definition_level,
            col.max_repetition_level,
        )
    return out


def test_checkpoint_failure_does_not_fail_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_table(tmp_path / "t", config={"delta.checkpointInterval": "1"})
    log = log_of(root)

    def broken(location: str, data: bytes) -> None:
        raise StorageError(f"cannot write {location}: disk full")

    monkeypatch.setattr(log.storage, "write", broken)
    result = readd(log)
    assert result.version == 1 and result.checkpoint is None
    assert result.checkpoint_warning is not None
    assert "committed version 1" in result.checkpoint_warning
    assert "disk full" in result.checkpoint_warning
    assert deltalake.DeltaTable(str(root)).version() == 1


def test_write_stats_as_struct_tables_are_not_checkpointed(tmp_path: Path) -> None:
    root = make_table(
        tmp_path / "t",
        config={"delta.checkpointInterval": "1", "delta.checkpoint.writeStatsAsStruct": "true"},
    )
    result = readd(log_of(root))
    assert result.version == 1 and result.checkpoint is None
    assert result.checkpoint_warning is not None
    assert "writeStatsAsStruct" in result.checkpoint_warning
    assert not list((root / "_delta_log").glob("*.checkpoint.parquet"))


def test_write_stats_as_json_false_omits_stats(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", config={"delta.checkpoint.writeStatsAsJson": "false"})
    table = checkpoint_table(log_of(root).snapshot().state, v2=False)
    add_type = table.schema.field("add").type
    assert "stats" not in [add_type.field(i).name for i in range(add_type.num_fields)]


def test_last_checkpoint_never_moves_back(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", config={"delta.checkpointInterval": "100"})
    log = log_of(root)
    for _ in range(3):
        readd(log)
    writer = LogWriter(log)
    writer.write_checkpoint(3)
    writer.write_checkpoint(1)
    assert log.last_checkpoint_hint() == 3
    assert (root / "_delta_log" / f"{1:020d}.checkpoint.parquet").exists()


def test_checkpoint_compression_follows_table_property(tmp_path: Path) -> None:
    root = make_table(tmp_path / "t", config={"delta.checkpointInterval": "10"})
    first = root / "_delta_log" / f"{0:020d}.json"
    # deltalake refuses to write this property, so it is put into the log directly.
    text = first.read_text().replace(
        '"delta.checkpointInterval":"10"', '"delta.parquet.compression.codec":"snappy"'
    )
    first.write_text(text)
    assert log_of(root).snapshot().metadata.configuration == {
        "delta.parquet.compression.codec": "snappy"
    }
    info = LogWriter(log_of(root)).write_checkpoint(0)
    meta = pq.ParquetFile(root / "_delta_log" / info.name).metadata
    assert meta.row_group(0).column(0).compression == "SNAPPY"
    root2 = make_table(tmp_path / "t2")
    info2 = LogWriter(log_of(root2)).write_checkpoint(0)
    meta2 = pq.ParquetFile(root2 / "_delta_log" / info2.name).metadata
    assert meta2.row_group(0).column(0).compression == "ZSTD"


# -- checkpoint builder (pure) -------------------------------------------------------------


def test_tombstone_expiry(golden_copy: Callable[[str], Path]) -> None:
    state = log_of(GOLDEN / "basic-dv-with-checkpoint").snapshot().state
    timestamps = state.removes.column("deletionTimestamp").to_pylist()
    assert state.removes.num_rows == 46
    newest = max(t for t in timestamps if t is not None)
    keep_all = checkpoint_table(state, v2=False, now_ms=newest)
    assert keep_all.column("remove").null_count == keep_all.num_rows - 46
    week = 7 * DAY_MS
    cutoff = sorted(timestamps)[20]
    some = checkpoint_table(state, v2=False, now_ms=cutoff + week)
    kept = [r["deletionTimestamp"] for r in some.column("remove").to_pylist() if r]
    assert kept and all(t > cutoff for t in kept) and len(kept) == 46 - 21
    none = checkpoint_table(state, v2=False, now_ms=newest + week + 1)
    assert none.column("remove").null_count == none.num_rows


def test_tombstone_retention_property(golden_copy: Callable[[str], Path]) -> None:
    snap = log_of(GOLDEN / "basic-dv-with-checkpoint").snapshot()
    state = snap.state
    newest = max(state.removes.column("deletionTimestamp").to_pylist())
    from dataclasses import replace

    def with_retention(text: str) -> Any:
        config = {**state.metadata.configuration, "delta.deletedFileRetentionDuration": text}
        return replace(state, metadata=replace(state.metadata, configuration=config))

    month_later = newest + 30 * DAY_MS
    long = checkpoint_table(with_retention("interval 60 days"), v2=False, now_ms=month_later)
    assert long.column("remove").null_count == long.num_rows - 46
    short = checkpoint_table(with_retention("interval 1 weeks"), v2=False, now_ms=month_later)
    assert short.column("remove").null_count == short.num_rows
    # Unparseable: keep every tombstone rather than drop one too early.
    odd = checkpoint_table(with_retention("interval 1 month"), v2=False, now_ms=month_later)
    assert odd.column("remove").null_count == odd.num_rows - 46


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 1 weeks", 7 * DAY_MS),
        ("interval 1 week", 7 * DAY_MS),
        ("interval 7 days", 7 * DAY_MS),
        ("7 days", 7 * DAY_MS),
        ("168 hours", 7 * DAY_MS),
        ("INTERVAL 2 HOURS", 2 * 3600_000),
        ("interval 1 day 12 hours", 36 * 3600_000),
        ("interval 30 minutes", 1800_000),
        ("interval 90 seconds", 90_000),
        ("interval 500 milliseconds", 500),
        ("interval 0 days", 0),
    ],
)
def test_parse_interval(text: str, ms: int) -> None:
    assert parse_interval_ms(text) == ms


@pytest.mark.parametrize("text", ["", "interval", "1 month", "interval 1 years", "x days", "7"])
def test_parse_interval_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_interval_ms(text)


def test_retention_default_and_unparseable() -> None:
    assert tombstone_retention_ms({}) == 7 * DAY_MS
    assert tombstone_retention_ms({"delta.deletedFileRetentionDuration": "interval 2 days"}) == (
        2 * DAY_MS
    )
    assert tombstone_retention_ms({"delta.deletedFileRetentionDuration": "soon"}) is None


def test_checkpoint_rows_layout(golden_copy: Callable[[str], Path]) -> None:
    snap = log_of(GOLDEN / "dv-partitioned-with-checkpoint/delta").snapshot()
    table = checkpoint_table(snap.state, v2=False, now_ms=0)
    assert table.column_names == ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]
    per_row = [sum(v is not None for v in r.values()) for r in table.to_pylist()]
    assert per_row == [1] * table.num_rows  # one action per row
    adds = [r for r in table.column("add").to_pylist() if r]
    assert all(a["dataChange"] is False for a in adds)
    assert any(a["deletionVector"] for a in adds)
    assert all(a["partitionValues"] for a in adds)
    removes = [r for r in table.column("remove").to_pylist() if r]
    assert all(r["extendedFileMetadata"] and "stats" not in r for r in removes)
    meta = next(r for r in table.column("metaData").to_pylist() if r)
    assert meta["partitionColumns"] == ["part"]
    assert meta["format"] == {"provider": "parquet", "options": []}
    assert dict(meta["configuration"]) == dict(snap.metadata.configuration)


def test_domain_metadata_preserved_in_checkpoint() -> None:
    from dataclasses import replace

    from dvtool.delta.protocol.actions import DomainMetadata

    state = log_of(GOLDEN / "table-with-dv-small").snapshot().state
    state = replace(
        state,
        domains={
            "delta.clustering": DomainMetadata("delta.clustering", '{"clusteringColumns":[]}'),
            "user.x": DomainMetadata("user.x", "cfg"),
        },
    )
    table = checkpoint_table(state, v2=False)
    domains = [r for r in table.column("domainMetadata").to_pylist() if r]
    assert domains == [
        {
            "domain": "delta.clustering",
            "configuration": '{"clusteringColumns":[]}',
            "removed": False,
        },
        {"domain": "user.x", "configuration": "cfg", "removed": False},
    ]


def test_checkpoint_of_empty_table_state() -> None:
    state = log_of(GOLDEN / "table-without-dv-small").snapshot().state
    from dataclasses import replace

    from dvtool.delta.protocol.replay import FileActions

    empty = replace(state, live_files=FileActions("add"), tombstones=FileActions("remove"))
    table = checkpoint_table(empty, v2=True)
    assert table.num_rows == 3  # checkpointMetadata, protocol, metaData
    assert table.column_names[-2:] == ["checkpointMetadata", "sidecar"]


def test_write_stats_as_struct_refused_by_builder() -> None:
    from dataclasses import replace

    state = log_of(GOLDEN / "table-without-dv-small").snapshot().state
    config = {"delta.checkpoint.writeStatsAsStruct": "true"}
    state = replace(state, metadata=replace(state.metadata, configuration=config))
    with pytest.raises(UnsupportedFeatureError, match="writeStatsAsStruct"):
        checkpoint_table(state, v2=False)


def test_snapshot_commit_info_sets_in_commit_timestamp_after_previous(tmp_path: Path) -> None:
    """On a table with in-commit timestamps, a new commit's ICT is first in commitInfo and
    later than the previous commit's, even when the local clock is behind."""
    from dvtool.delta.log.writer import snapshot_commit_info

    deltalake.write_deltalake(str(tmp_path), pa.table({"id": [1, 2]}))
    log = open_log(str(tmp_path))
    previous_ict = 4_000_000_000_000  # far in the future: the clock must not win
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": [],
        "writerFeatures": ["inCommitTimestamp"],
    }
    metadata = log.snapshot().metadata.to_json()
    metadata["configuration"] = {"delta.enableInCommitTimestamps": "true"}
    lines = [
        {
            "commitInfo": {
                "inCommitTimestamp": previous_ict,
                "timestamp": previous_ict,
                "operation": "SET TBLPROPERTIES",
            }
        },
        {"protocol": protocol},
        {"metaData": metadata},
    ]
    (tmp_path / "_delta_log" / f"{1:020d}.json").write_text(
        "\n".join(json.dumps(line) for line in lines) + "\n"
    )
    snapshot = log.snapshot()
    info = snapshot_commit_info(snapshot, "DELETE", {}, {}, txn_id="t", now_ms=1000)
    body = info["commitInfo"]
    assert next(iter(body)) == "inCommitTimestamp"
    assert body["inCommitTimestamp"] == previous_ict + 1
    plain = snapshot_commit_info(
        open_log(str(tmp_path)).snapshot(0), "DELETE", {}, {}, txn_id="t", now_ms=1000
    )
    assert "inCommitTimestamp" not in plain["commitInfo"]
