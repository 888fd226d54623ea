"""Every writing command of dvtool on S3, run through the CLI against a moto server.

A table is written locally by deltalake (or copied from the golden tables), uploaded to the
session's moto server on 127.0.0.1 (tests/s3_server.py), and changed with
`dvtool COMMAND s3://... --storage-option endpoint_url=... ...`. After each command the table
is read back from S3 by independent readers, polars `read_delta` and deltalake (delta-kernel
and object_store, no code shared with dvtool), and, after downloading the prefix, by the raw
reader of tests/oracles.py; the rows must equal those computed here in Python.

The server's request log shows how dvtool talked to S3: every commit is a conditional PUT
(`If-None-Match: *`), a commit that loses a race is refused by S3 (412) and lands at the next
version, and DVs are read with ranged GETs of exactly the bytes their descriptors name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.cli import cli
from dvtool.commands.delete.command import DeleteRequest, run_delete
from dvtool.delta.log.reader import open_log
from dvtool.storage.table_storage import Storage
from tests.oracles import GOLDEN, commit_actions, raw_rows, replay_json, z85_uuid
from tests.s3_server import KEY_ID, SECRET, S3Request, S3Server

COMMIT_KEY = "_delta_log/{:020d}.json"


@dataclass
class S3Table:
    """A table under `prefix` in the moto bucket, and the ways the tests look at it."""

    s3: S3Server
    prefix: str
    scratch: Path

    @property
    def uri(self) -> str:
        return self.s3.uri(self.prefix)

    def dvtool(self, command: str, *args: str, exit_code: int = 0) -> Result:
        """`dvtool COMMAND s3://... --storage-option ... ARGS`; the exit code must match."""
        argv = [command, self.uri, *self.s3.cli_options(), *args]
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == exit_code, (argv, result.output, result.exception)
        return result

    def dvtool_json(self, command: str, *args: str) -> dict[str, Any]:
        """The `--json` document of a successful command."""
        document: dict[str, Any] = json.loads(self.dvtool(command, *args, "--json").stdout)
        return document

    def ids(self, column: str = "id") -> list[int]:
        """`column` of every row, sorted: polars and deltalake read S3 and must agree."""
        options = self.s3.delta_options()
        by_polars = sorted(pl.read_delta(self.uri, storage_options=options)[column].to_list())
        table = DeltaTable(self.uri, storage_options=options)
        reader = QueryBuilder().register("t", table).execute(f"select {column} from t")
        by_deltalake = sorted(pa.table(reader.read_all()).column(column).to_pylist())
        assert by_polars == by_deltalake
        return by_polars

    def download(self) -> Path:
        """A fresh local copy of every object under the prefix."""
        n = len(list(self.scratch.glob("copy-*")))
        return self.s3.download(self.prefix, self.scratch / f"copy-{n}")

    def raw_ids(self, column: str = "id") -> list[int]:
        """`column` of every row of a downloaded copy, read by the raw oracle reader."""
        return sorted(row[column] for row in raw_rows(self.download()))

    def live_adds(self) -> list[dict[str, Any]]:
        """The live add actions, replayed from the JSON commits of a downloaded copy."""
        return list(replay_json(self.download())[1].values())

    def commit_puts(self, requests: list[S3Request]) -> list[S3Request]:
        """The PUTs of this table's commit files among `requests`."""
        log = f"{self.prefix}/_delta_log/"
        return [
            r
            for r in requests
            if r.method == "PUT" and r.key.startswith(log) and r.key.endswith(".json")
        ]


def write_local(path: Path, files: int = 3, rows: int = 20, **kwargs: Any) -> list[int]:
    """A deltalake table of `files` appends of `rows` rows each (`id`, `v`, `p`)."""
    ids = list(range(files * rows))
    for k in range(files):
        chunk = ids[k * rows : (k + 1) * rows]
        data = pa.table(
            {
                "id": pa.array(chunk, pa.int64()),
                "v": [f"v{i}" for i in chunk],
                "p": ["abc"[i % 3] for i in chunk],
            }
        )
        write_deltalake(str(path), data, mode="append", **kwargs)
    return ids


@pytest.fixture
def make_table(
    s3_server: S3Server, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[..., tuple[S3Table, list[int]]]:
    """`make_table(**write_local options)`: a fresh table uploaded to its own prefix."""
    made: list[str] = []

    def make(**kwargs: Any) -> tuple[S3Table, list[int]]:
        local = tmp_path / f"local-{len(made)}"
        ids = write_local(local, **kwargs)
        # No brackets in keys: delta-kernel percent-encodes them and then misses the files.
        prefix = f"commands/{re.sub(r'[^A-Za-z0-9_-]', '-', request.node.name)}/t{len(made)}"
        made.append(s3_server.upload(local, prefix))
        return S3Table(s3_server, prefix, tmp_path), ids

    return make


def dv_ranges(adds: list[dict[str, Any]], prefix: str) -> set[tuple[str, str]]:
    """(key, Range header) of every on-disk DV of `adds`, as PROTOCOL.md lays DV files out:
    at `offset` a 4-byte size, `sizeInBytes` bytes of bitmap, a 4-byte CRC."""
    out = set()
    for add in adds:
        dv = add.get("deletionVector")
        if not dv or dv["storageType"] != "u":
            continue
        encoded = dv["pathOrInlineDv"]
        folder = encoded[:-20]
        name = f"deletion_vector_{z85_uuid(encoded[-20:])}.bin"
        key = f"{prefix}/{folder + '/' if folder else ''}{name}"
        start = dv.get("offset") or 0
        out.add((key, f"bytes={start}-{start + dv['sizeInBytes'] + 7}"))
    return out


def dv_gets(requests: list[S3Request]) -> list[S3Request]:
    """The GETs of DV files among `requests`."""
    return [r for r in requests if r.method == "GET" and "deletion_vector_" in r.key]


# -- the commands, one after another --------------------------------------------------------


def test_enable_delete_purge_and_compact_on_s3(
    make_table: Callable[..., tuple[S3Table, list[int]]],
) -> None:
    table, ids = make_table()
    before = len(table.s3.requests())

    enabled = table.dvtool_json("enable")
    assert enabled["version"] == 3
    protocol = DeltaTable(table.uri, storage_options=table.s3.delta_options()).protocol()
    assert "deletionVectors" in (protocol.reader_features or [])
    assert table.ids() == ids

    deleted = table.dvtool_json("delete", "--where", "id % 3 = 0")
    assert (deleted["version"], deleted["mode"]) == (4, "dv")
    expected = [i for i in ids if i % 3]
    assert table.ids() == expected
    assert table.raw_ids() == expected
    adds = table.live_adds()
    assert len(adds) == 3 and all(a.get("deletionVector") for a in adds)

    mark = len(table.s3.requests())
    purged = table.dvtool_json("optimize", "--purge")
    assert purged["versions"] == [5]
    gets = dv_gets(table.s3.requests()[mark:])
    assert gets and all(r.range is not None and r.status == 206 for r in gets), gets
    assert dv_ranges(adds, table.prefix) <= {(r.key, r.range) for r in gets}
    assert table.ids() == expected
    assert not any(a.get("deletionVector") for a in table.live_adds())

    table.dvtool("delete", "--where", "id % 5 = 0")
    compacted = table.dvtool_json("optimize")
    assert compacted["versions"] == [7]
    expected = [i for i in expected if i % 5]
    assert table.ids() == expected
    adds = table.live_adds()
    assert len(adds) == 1 and not adds[0].get("deletionVector")
    assert table.raw_ids() == expected

    puts = table.commit_puts(table.s3.requests()[before:])
    assert [r.key for r in puts] == [
        f"{table.prefix}/{COMMIT_KEY.format(v)}" for v in (3, 4, 5, 6, 7)
    ]
    assert all(r.if_none_match == "*" and r.status == 200 for r in puts), puts


def test_spark_written_dvs_are_read_by_ranged_gets(s3_server: S3Server, tmp_path: Path) -> None:
    """A golden table written by Databricks: its DV sits at offset 1 of its DV file."""
    source = GOLDEN / "table-with-dv-small"
    table = S3Table(s3_server, "commands/spark-dv/t", tmp_path)
    s3_server.upload(source, table.prefix)
    adds = list(replay_json(source)[1].values())
    assert table.ids("value") == [1, 2, 3, 4, 5, 6, 7, 8]

    mark = len(s3_server.requests())
    table.dvtool("delete", "--where", "value % 2 = 0")
    gets = dv_gets(s3_server.requests()[mark:])
    expected_ranges = dv_ranges(adds, table.prefix)
    assert next(iter(expected_ranges))[1].startswith("bytes=1-")
    assert expected_ranges <= {(r.key, r.range) for r in gets}
    assert all(r.range is not None for r in gets), gets
    assert table.ids("value") == [1, 3, 5, 7]
    assert table.raw_ids("value") == [1, 3, 5, 7]


# -- a commit racing another writer ---------------------------------------------------------


def test_commit_losing_a_race_is_refused_by_s3_and_lands_next(
    make_table: Callable[..., tuple[S3Table, list[int]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer commits the version the CLI's delete wants, just before its PUT: S3
    refuses the conditional PUT (412), the delete checks the winner and commits after it."""
    table, ids = make_table()
    table.dvtool("enable")
    real_put = Storage.put_if_absent
    rival_versions: list[int | None] = []

    def put_after_a_rival(storage: Storage, location: str, data: bytes) -> bool:
        if not rival_versions and location.endswith(".json"):
            rival_versions.append(None)  # the race is on: the rival's own PUT goes through
            rival = open_log(table.uri, table.s3.storage_options())
            rival_versions[0] = run_delete(rival, DeleteRequest("id < 10")).version
        return real_put(storage, location, data)

    monkeypatch.setattr(Storage, "put_if_absent", put_after_a_rival)
    mark = len(table.s3.requests())
    result = table.dvtool_json("delete", "--where", "id >= 50")
    monkeypatch.undo()

    assert rival_versions == [4]
    assert result["version"] == 5
    puts = [
        (r.key[len(table.prefix) + 1 :], r.status)
        for r in table.commit_puts(table.s3.requests()[mark:])
    ]
    assert puts == [
        (COMMIT_KEY.format(4), 200),
        (COMMIT_KEY.format(4), 412),
        (COMMIT_KEY.format(5), 200),
    ]
    copy = table.download()
    operations = [
        (a["commitInfo"]["operation"], a["commitInfo"]["operationParameters"]["predicate"])
        for v in (4, 5)
        for a in commit_actions(copy, v)
        if "commitInfo" in a
    ]
    assert [op for op, _ in operations] == ["DELETE", "DELETE"]
    assert "`id` < CAST(10 AS BIGINT)" in operations[0][1]
    assert "`id` >= CAST(50 AS BIGINT)" in operations[1][1]
    assert table.ids() == [i for i in ids if 10 <= i < 50]


def test_put_if_absent_against_s3_refuses_an_existing_commit(s3_server: S3Server) -> None:
    storage = Storage.for_table(s3_server.uri("commands/put"), s3_server.storage_options())
    location = storage.join(COMMIT_KEY.format(0))
    assert storage.put_if_absent(location, b'{"commitInfo":{"txnId":"a"}}\n')
    assert not storage.put_if_absent(location, b'{"commitInfo":{"txnId":"b"}}\n')
    assert storage.read(location) == b'{"commitInfo":{"txnId":"a"}}\n'
    puts = [r for r in s3_server.requests() if r.key == "commands/put/" + COMMIT_KEY.format(0)]
    assert [(r.method, r.if_none_match, r.status) for r in puts if r.method == "PUT"] == [
        ("PUT", "*", 200),
        ("PUT", "*", 412),
    ]


# -- vacuum --------------------------------------------------------------------------------


def test_vacuum_on_s3_deletes_exactly_the_unreferenced_files(
    make_table: Callable[..., tuple[S3Table, list[int]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    table, ids = make_table()
    table.dvtool("enable")
    table.dvtool("delete", "--where", "id % 3 = 0")
    table.dvtool("optimize", "--purge")
    expected = [i for i in ids if i % 3]
    live = {a["path"] for a in table.live_adds()}
    garbage = {k for k in table.s3.keys(table.prefix) if not k.startswith("_delta_log/")} - live
    assert len(garbage) == 4  # the 3 files before the purge and their DV file

    # Credentials from the environment this time; only the endpoint is an option.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    argv = ["vacuum", table.uri, "--storage-option", f"endpoint_url={table.s3.endpoint}"]
    dry = CliRunner().invoke(cli, [*argv, "--retain", "0h", "--force", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert {f["path"] for f in json.loads(dry.stdout)["files"]} == garbage
    done = CliRunner().invoke(cli, [*argv, "--retain", "0h", "--force", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["deleted_files"] == 4

    remaining = {k for k in table.s3.keys(table.prefix) if not k.startswith("_delta_log/")}
    assert remaining == live
    assert table.ids() == expected
    assert table.raw_ids() == expected

    # --lite takes its candidates from the log: the files the next purge removes, their DVs.
    table.dvtool("delete", "--where", "id % 5 = 0")
    table.dvtool("optimize", "--purge")
    expected = [i for i in expected if i % 5]
    live = {a["path"] for a in table.live_adds()}
    lite = table.dvtool_json("vacuum", "--lite", "--retain", "0h", "--force")
    assert lite["deleted_files"] == 4
    remaining = {k for k in table.s3.keys(table.prefix) if not k.startswith("_delta_log/")}
    assert remaining == live
    assert table.ids() == expected


# -- manifests -----------------------------------------------------------------------------


def test_generate_manifest_on_s3(make_table: Callable[..., tuple[S3Table, list[int]]]) -> None:
    table, ids = make_table(partition_by=["p"])
    table.dvtool("enable")
    table.dvtool("delete", "--where", "id % 4 = 1")
    refused = table.dvtool("generate-manifest", exit_code=7)
    assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) <= 2

    table.dvtool("generate-manifest", "--purge-first")
    expected = [i for i in ids if i % 4 != 1]
    assert table.ids() == expected
    assert read_manifests(table) == expected_manifests(table)
    assert set(read_manifests(table)) == {"p=a", "p=b", "p=c"}

    table.dvtool("delete", "--where", "p = 'a'")
    written = table.dvtool_json("generate-manifest")
    assert written["deleted"] == [f"{table.uri}/_symlink_format_manifest/p=a/manifest"]
    assert read_manifests(table) == expected_manifests(table)
    assert set(read_manifests(table)) == {"p=b", "p=c"}
    assert table.ids() == [i for i in expected if i % 3 != 0]


def read_manifests(table: S3Table) -> dict[str, list[str]]:
    """Manifest lines by partition directory, as stored under the prefix."""
    client = table.s3.client()
    out = {}
    for key in table.s3.keys(table.prefix):
        directory, _, name = key.removeprefix("_symlink_format_manifest/").rpartition("/")
        if key.startswith("_symlink_format_manifest/") and name == "manifest":
            body = client.get_object(Bucket=table.s3.bucket, Key=f"{table.prefix}/{key}")
            out[directory] = sorted(body["Body"].read().decode().splitlines())
    return out


def expected_manifests(table: S3Table) -> dict[str, list[str]]:
    """What Delta writes: per partition, the absolute `s3://` URI of every live file."""
    out: dict[str, list[str]] = {}
    for add in table.live_adds():
        directory = "/".join(f"{k}={v}" for k, v in add["partitionValues"].items())
        out.setdefault(directory, []).append(f"{table.uri}/{add['path']}")
    return {d: sorted(lines) for d, lines in out.items()}


# -- downgrade -----------------------------------------------------------------------------


@pytest.mark.parametrize("truncate", [False, True], ids=["protected", "truncated"])
def test_downgrade_on_s3(
    make_table: Callable[..., tuple[S3Table, list[int]]], truncate: bool
) -> None:
    table, ids = make_table()
    table.dvtool("enable")
    table.dvtool("delete", "--where", "id % 3 = 0")
    args = ("--truncate-history", "--force") if truncate else ()
    result = table.dvtool_json("downgrade", *args)
    assert "deletionVectors" in result["dropped_features"]

    dt = DeltaTable(table.uri, storage_options=table.s3.delta_options())
    protocol = dt.protocol()
    assert "deletionVectors" not in (protocol.reader_features or [])
    assert "deletionVectors" not in (protocol.writer_features or [])
    # deltalake's pyarrow reader refuses DV tables: it reading the rows shows the downgrade.
    expected = [i for i in ids if i % 3]
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == expected
    assert table.ids() == expected
    log = {k for k in table.s3.keys(table.prefix) if k.startswith("_delta_log/")}
    assert (COMMIT_KEY.format(0) in log) is not truncate
    gone = {f"_delta_log/{p.rpartition('/')[2]}" for p in result["deleted_log_files"]}
    assert bool(gone) is truncate and not gone & log


# -- paths ---------------------------------------------------------------------------------


def test_glob_characters_in_the_table_path_never_touch_a_sibling_table(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """`t[12]` is a glob pattern matching `t1`: deleting files of `t[12]` (vacuum, history
    truncation) must delete them by name, never the sibling's files of the same names."""
    local = tmp_path / "local"
    ids = write_local(local)
    sibling = S3Table(s3_server, "commands/glob/t1", tmp_path)
    table = S3Table(s3_server, "commands/glob/t[12]", tmp_path)
    for t in (sibling, table):
        s3_server.upload(local, t.prefix)
    sibling_keys = s3_server.keys(sibling.prefix)
    originals = {k for k in sibling_keys if not k.startswith("_delta_log/")}

    table.dvtool("enable")
    table.dvtool("delete", "--where", "id % 3 = 0")
    table.dvtool("optimize", "--purge")
    vacuumed = table.dvtool_json("vacuum", "--retain", "0h", "--force")
    assert {f["path"] for f in vacuumed["files"]} >= originals
    downgraded = table.dvtool_json("downgrade", "--truncate-history", "--force")
    assert downgraded["deleted_log_files"]

    assert s3_server.keys(sibling.prefix) == sibling_keys
    assert sibling.ids() == ids
    keys = set(s3_server.keys(table.prefix))
    assert not keys & originals
    assert COMMIT_KEY.format(0) not in keys
    assert table.ids() == [i for i in ids if i % 3]


# -- errors --------------------------------------------------------------------------------


def test_missing_table_on_s3_is_a_clear_error(s3_server: S3Server, tmp_path: Path) -> None:
    table = S3Table(s3_server, "commands/no-such-table", tmp_path)
    result = table.dvtool("delete", "--where", "id = 1", exit_code=5)
    assert "no Delta table at s3://dvtool-test/commands/no-such-table" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2
