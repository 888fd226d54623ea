"""`ArrowStorage`: the data-file half of the storage contract over pyarrow's filesystems,
which Spark executors use (they have no fsspec). Checked on local disk and on the S3
emulator against what dvtool's fsspec `Storage` reads back, and its option mapping against
pyarrow's own constructors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from dvtool.errors import FileMissingError, UsageError
from dvtool.storage import Storage
from dvtool.storage.arrow_storage import ArrowStorage, arrow_filesystem_options
from tests.s3_server import S3Server


@pytest.mark.parametrize(
    ("protocol", "options", "expected"),
    [
        (
            "s3",
            {"key": "k", "secret": "s", "token": "t", "region": "eu-west-1"},
            {"access_key": "k", "secret_key": "s", "session_token": "t", "region": "eu-west-1"},
        ),
        (
            "s3",
            {"endpoint_url": "http://127.0.0.1:9000"},
            {"endpoint_override": "127.0.0.1:9000", "scheme": "http"},
        ),
        ("s3", {"anon": "true"}, {"anonymous": True}),
        ("gs", {"token": "anon"}, {"anonymous": True}),
        (
            "abfs",
            {"account_name": "a", "account_key": "k"},
            {"account_name": "a", "account_key": "k"},
        ),
    ],
)
def test_options_map_to_pyarrow(
    protocol: str, options: dict[str, str], expected: dict[str, object]
) -> None:
    assert arrow_filesystem_options(protocol, options) == expected


def test_mapped_s3_options_are_accepted_by_pyarrow() -> None:
    options = {"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:1", "region": "x"}
    pafs.S3FileSystem(**arrow_filesystem_options("s3", options))


@pytest.mark.parametrize(
    ("protocol", "key"), [("s3", "cache_type"), ("gs", "token"), ("abfs", "sas")]
)
def test_options_without_a_pyarrow_equivalent_are_refused(protocol: str, key: str) -> None:
    with pytest.raises(UsageError, match=key):
        arrow_filesystem_options(protocol, {key: "x"})


def _roundtrip(storage: ArrowStorage, fsspec_storage: Storage) -> None:
    """Write a parquet file through `storage`, read and stat it through both, delete it."""
    location = storage.join("p=a b/part-0.parquet")
    assert storage.relative_to_root(location) == "p=a b/part-0.parquet"
    assert storage.resolve("p=a%20b/part-0.parquet") == location
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": [1, 2, 3]}), sink)
    data = sink.getvalue().to_pybytes()
    storage.write(location, data)
    with storage.open_parquet(location) as source:
        assert pq.read_table(source)["id"].to_pylist() == [1, 2, 3]
    assert fsspec_storage.read(location) == data
    info = storage.info(location)
    assert info is not None and info.size == len(data) and info.modification_time_ms
    storage.delete(location)
    assert storage.info(location) is None
    assert not fsspec_storage.exists(location)
    storage.delete(location)  # deleting a missing file is not an error
    with pytest.raises(FileMissingError):
        storage.open_parquet(location)


def test_local_disk(tmp_path: Path) -> None:
    root = tmp_path / "table"
    root.mkdir()
    storage = ArrowStorage(str(root))
    assert storage.protocol == "file" and storage.root == str(root)
    _roundtrip(storage, Storage.for_table(str(root)))
    assert ArrowStorage(root.as_uri()).root == str(root)


def test_s3(s3_server: S3Server) -> None:
    uri = s3_server.uri("arrow-storage")
    storage = ArrowStorage(uri, s3_server.storage_options())
    assert storage.protocol == "s3" and storage.root == uri
    _roundtrip(storage, Storage.for_table(uri, s3_server.storage_options()))
