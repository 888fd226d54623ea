"""Commits to path (Hadoop) tables: `dvtool.iceberg.catalog_commit` on pyiceberg-made tables.

Each table is made with pyiceberg (tests/iceberg/commit_tables.py); data is appended by
pyiceberg's own writers with dvtool making the commit, and the result is read by pyiceberg
and DuckDB (tests/iceberg_oracles.py), never compared with hard-coded rows. The Spark-made
tables, catalogs and Iceberg Spark's reads are tests/reference/test_iceberg_catalog_commit.py.
"""

from __future__ import annotations

import gzip
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate

from dvtool.errors import CommitConflictError, WriteRefusedError
from dvtool.iceberg.catalog_commit import (
    RetryPolicy,
    commit_updates,
    refresh,
    retry_policy,
    writable_io,
)
from dvtool.iceberg.metadata_json import metadata_bytes
from dvtool.iceberg.tables import IcebergTable, open_iceberg
from tests import iceberg_oracles
from tests.iceberg.commit_tables import (
    committed,
    new_path_table,
    new_sql_table,
    rows,
    through_dvtool,
)
from tests.s3_server import REGION, S3Server


def set_properties(table: IcebergTable, **values: str) -> IcebergTable:
    return commit_updates(table, (), (SetPropertiesUpdate(updates=values),))


def metadata_files(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "metadata").glob("*.metadata.json*"))


def expected_ids(*ranges: tuple[int, int]) -> list[int]:
    return sorted(i for lo, hi in ranges for i in range(lo, hi))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_set_properties_writes_the_next_version(tmp_path: Path, version: int) -> None:
    table = new_path_table(str(tmp_path / "t"), version)
    done = set_properties(table, owner="dvtool")
    assert done.metadata_location == str(tmp_path / "t/metadata/v2.metadata.json")
    assert (tmp_path / "t/metadata/version-hint.text").read_text() == "2"
    reopened = open_iceberg(str(tmp_path / "t"))
    assert reopened.metadata_location == done.metadata_location
    assert reopened.metadata.properties["owner"] == "dvtool"
    assert [e.metadata_file for e in reopened.metadata.metadata_log] == [table.metadata_location]
    static = iceberg_oracles.load_table(done.metadata_location)
    assert static.metadata.properties["owner"] == "dvtool"
    assert static.metadata.format_version == version


@pytest.mark.parametrize("version", [1, 2])
def test_pyiceberg_appends_committed_by_dvtool(tmp_path: Path, version: int) -> None:
    table = through_dvtool(new_path_table(str(tmp_path / "t"), version))
    table.append(rows(0, 10))
    table.append(rows(10, 15))
    location = committed(table).metadata_location
    assert location.endswith("v3.metadata.json")
    for oracle in ("pyiceberg", "duckdb"):
        found = iceberg_oracles.oracle_rows(oracle, location)
        assert [r["id"] for r in found] == expected_ids((0, 15))


def test_path_table_on_s3(s3_server: S3Server) -> None:
    uri = s3_server.uri(f"commit-{random.getrandbits(32):08x}")
    options = s3_server.storage_options()
    base = new_path_table(uri, 2, options)
    table = through_dvtool(base)
    table.append(rows(0, 8))
    done = committed(table)
    assert done.metadata_location == f"{uri}/metadata/v2.metadata.json"
    assert open_iceberg(uri, options).metadata_location == done.metadata_location
    io = {
        "s3.endpoint": s3_server.endpoint,
        "s3.access-key-id": options["key"],
        "s3.secret-access-key": options["secret"],
        "s3.region": REGION,  # else pyiceberg asks the emulator for the bucket's region
    }
    found = iceberg_oracles.duckdb_rows(done.metadata_location, io=io)
    assert [r["id"] for r in found] == expected_ids((0, 8))
    with pytest.raises(CommitConflictError):
        set_properties(base, stale="yes")
    assert [k for k in s3_server.keys(uri.split("/", 3)[3]) if k.endswith(".json")] == [
        "metadata/v1.metadata.json",
        "metadata/v2.metadata.json",
    ]


def race_on_one_base(base: IcebergTable) -> tuple[str, IcebergTable]:
    """Two threads commit a property change on `base` at once: exactly one lands, the
    other gets CommitConflictError; the winner's name and table."""
    start = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def commit(name: str) -> None:
        start.wait()
        try:
            outcomes[name] = set_properties(base, writer=name)
        except CommitConflictError as e:
            outcomes[name] = e

    threads = [threading.Thread(target=commit, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    landed = [n for n, o in outcomes.items() if isinstance(o, IcebergTable)]
    assert len(landed) == 1
    assert sum(isinstance(o, CommitConflictError) for o in outcomes.values()) == 1
    return landed[0], outcomes[landed[0]]


def test_concurrent_committers_exactly_one_lands(tmp_path: Path) -> None:
    name, winner = race_on_one_base(new_path_table(str(tmp_path / "t"), 2))
    assert metadata_files(tmp_path / "t") == ["v1.metadata.json", "v2.metadata.json"]
    assert (tmp_path / "t/metadata/v2.metadata.json").read_bytes() == metadata_bytes(
        winner.metadata
    )
    assert open_iceberg(str(tmp_path / "t")).metadata.properties["writer"] == name


def test_concurrent_committers_on_s3(s3_server: S3Server) -> None:
    prefix = f"race-{random.getrandbits(32):08x}"
    options = s3_server.storage_options()
    name, winner = race_on_one_base(new_path_table(s3_server.uri(prefix), 3, options))
    assert s3_server.keys(prefix) == [
        "metadata/v1.metadata.json",
        "metadata/v2.metadata.json",
        "metadata/version-hint.text",
    ]
    stored = s3_server.client().get_object(
        Bucket=s3_server.bucket, Key=f"{prefix}/metadata/v2.metadata.json"
    )
    assert stored["Body"].read() == metadata_bytes(winner.metadata)
    assert open_iceberg(s3_server.uri(prefix), options).metadata.properties["writer"] == name


def test_stale_base_conflicts_then_refresh_commits(tmp_path: Path) -> None:
    base = new_path_table(str(tmp_path / "t"), 2)
    set_properties(base, first="1")
    with pytest.raises(CommitConflictError):
        set_properties(base, second="2")
    assert metadata_files(tmp_path / "t") == ["v1.metadata.json", "v2.metadata.json"]
    done = set_properties(refresh(base), second="2")
    assert done.metadata_location.endswith("v3.metadata.json")
    assert {"first", "second"} <= set(done.metadata.properties)


def test_requirement_that_fails_is_a_conflict(tmp_path: Path) -> None:
    base = new_path_table(str(tmp_path / "t"), 2)
    wrong = AssertRefSnapshotId(ref="main", snapshot_id=123)
    with pytest.raises(CommitConflictError, match="main"):
        commit_updates(base, (wrong,), (SetPropertiesUpdate(updates={"x": "y"}),))
    assert metadata_files(tmp_path / "t") == ["v1.metadata.json"]


def test_hint_lagging_behind(tmp_path: Path) -> None:
    """A commit whose hint update was lost: readers and the next commit list the folder."""
    base = new_path_table(str(tmp_path / "t"), 2)
    done = set_properties(base, a="1")
    (tmp_path / "t/metadata/version-hint.text").write_text("1")
    assert refresh(base).metadata_location == done.metadata_location
    with pytest.raises(CommitConflictError):
        set_properties(base, b="2")
    assert set_properties(refresh(base), b="2").metadata_location.endswith("v3.metadata.json")


def test_table_opened_by_an_old_metadata_file_is_refused(tmp_path: Path) -> None:
    base = new_path_table(str(tmp_path / "t"), 2)
    set_properties(base, a="1")
    old = open_iceberg(str(tmp_path / "t/metadata/v1.metadata.json"))
    assert old.pinned and refresh(old) is old
    with pytest.raises(WriteRefusedError, match="not the table's current metadata"):
        set_properties(old, b="2")
    current = open_iceberg(str(tmp_path / "t/metadata/v2.metadata.json"))
    done = set_properties(current, b="2")
    assert done.metadata_location.endswith("v3.metadata.json") and not done.pinned


def test_catalog_table_opened_by_path_is_refused(tmp_path: Path) -> None:
    table = new_sql_table(tmp_path, 2)
    by_path = open_iceberg(table.metadata_location)
    with pytest.raises(WriteRefusedError) as refused:
        set_properties(by_path, a="1")
    assert "--catalog" in str(refused.value)


def test_copy_naming_another_location_is_refused(tmp_path: Path) -> None:
    new_path_table(str(tmp_path / "t"), 2)
    copy = tmp_path / "copy"
    (copy / "metadata").mkdir(parents=True)
    for p in (tmp_path / "t/metadata").iterdir():
        (copy / "metadata" / p.name).write_bytes(p.read_bytes())
    with pytest.raises(WriteRefusedError, match="says it lives at"):
        set_properties(open_iceberg(str(copy)), a="1")


def test_lossy_metadata_is_refused(tmp_path: Path) -> None:
    base = new_path_table(str(tmp_path / "t"), 3)
    path = tmp_path / "t/metadata/v1.metadata.json"
    path.write_text(path.read_text()[:-1] + ',"encryption-keys":[{"key-id":"k"}]}')
    with pytest.raises(WriteRefusedError, match="encryption-keys"):
        set_properties(open_iceberg(str(tmp_path / "t")), a="1")
    assert base.metadata_location == str(path)


def test_gzip_codec_names_and_compresses(tmp_path: Path) -> None:
    codec = {"write.metadata.compression-codec": "gzip"}
    table = new_path_table(str(tmp_path / "t"), 3, properties=codec)
    done = set_properties(table, a="1")
    path = tmp_path / "t/metadata/v2.gz.metadata.json"
    assert done.metadata_location == str(path)
    assert gzip.decompress(path.read_bytes()).startswith(b'{"format-version":3')
    assert open_iceberg(str(tmp_path / "t")).metadata.properties["a"] == "1"
    assert iceberg_oracles.load_table(str(path)).metadata.properties["a"] == "1"


@pytest.mark.parametrize("delete", [True, False])
def test_previous_versions_max_and_delete_after_commit(tmp_path: Path, delete: bool) -> None:
    settings = {"write.metadata.previous-versions-max": "2"}
    if delete:
        settings["write.metadata.delete-after-commit.enabled"] = "true"
    table = new_path_table(str(tmp_path / "t"), 2, properties=settings)
    for i in range(4):
        table = set_properties(table, step=str(i))
    log = [e.metadata_file.rpartition("/")[2] for e in table.metadata.metadata_log]
    assert log == ["v3.metadata.json", "v4.metadata.json"]
    kept = metadata_files(tmp_path / "t")
    if delete:
        assert kept == ["v3.metadata.json", "v4.metadata.json", "v5.metadata.json"]
    else:
        assert kept == [f"v{n}.metadata.json" for n in range(1, 6)]


def test_nothing_to_change_writes_nothing(tmp_path: Path) -> None:
    table = new_path_table(str(tmp_path / "t"), 2)
    assert commit_updates(table, (), ()) is table
    assert metadata_files(tmp_path / "t") == ["v1.metadata.json"]


# -- the writable FileIO -----------------------------------------------------------------------


def test_storage_file_io_writes_whole_files(tmp_path: Path) -> None:
    io = writable_io(new_path_table(str(tmp_path / "t"), 2))
    target = str(tmp_path / "t/data/f.bin")
    with io.new_output(target).create() as out:
        out.write(b"abc")
    assert Path(target).read_bytes() == b"abc"
    assert len(io.new_output(target)) == 3
    with pytest.raises(FileExistsError):
        io.new_output(target).create(overwrite=False)
    with pytest.raises(RuntimeError), io.new_output(str(tmp_path / "t/data/g.bin")).create() as out:
        out.write(b"half")
        raise RuntimeError("writer failed")
    assert not (tmp_path / "t/data/g.bin").exists()
    with io.new_output(target).create(overwrite=True) as out:
        out.write(b"new")
    assert io.new_input(target).open().read() == b"new"
    io.delete(target)
    io.delete(target)  # gone already: not an error
    assert not Path(target).exists()


# -- commit.retry.* ----------------------------------------------------------------------------


def test_retry_policy_defaults_are_javas(tmp_path: Path) -> None:
    policy = retry_policy(new_path_table(str(tmp_path / "t"), 2).metadata)
    assert policy == RetryPolicy(4, 100, 60_000, 1_800_000)
    assert policy.attempts == 5
    assert [policy.base_delay_ms(r) for r in (1, 2, 3, 4)] == [100, 200, 400, 800]
    assert policy.allows(4, 0) and not policy.allows(5, 0) and not policy.allows(1, 1_800_000)
    rng = random.Random(1)
    assert all(0.1 <= policy.delay_s(1, rng) <= 0.11 for _ in range(20))


def test_retry_policy_from_properties(tmp_path: Path) -> None:
    settings = {
        "commit.retry.num-retries": "2",
        "commit.retry.min-wait-ms": "50",
        "commit.retry.max-wait-ms": "120",
        "commit.retry.total-timeout-ms": "bad",
    }
    policy = retry_policy(new_path_table(str(tmp_path / "t"), 2, properties=settings).metadata)
    assert policy == RetryPolicy(2, 50, 120, 1_800_000)
    assert [policy.base_delay_ms(r) for r in (1, 2, 3)] == [50, 100, 120]
