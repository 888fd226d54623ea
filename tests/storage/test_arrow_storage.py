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
from dvtool.storage.arrow_storage import ArrowStorage, arrow_filesystem_options
from dvtool.storage.table_storage import Storage
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
        # object_store's (delta-rs's) keys, resolved as for fsspec first
        (
            "s3",
            {
                "AWS_ACCESS_KEY_ID": "k",
                "AWS_SECRET_ACCESS_KEY": "s",
                "AWS_SESSION_TOKEN": "t",
                "AWS_REGION": "eu-west-1",
                "AWS_ENDPOINT_URL": "https://minio.example:9000",
                "AWS_ALLOW_HTTP": "true",
                "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
            },
            {
                "access_key": "k",
                "secret_key": "s",
                "session_token": "t",
                "region": "eu-west-1",
                "endpoint_override": "minio.example:9000",
                "scheme": "https",
            },
        ),
        ("s3", {"aws_default_region": "us-east-2"}, {"region": "us-east-2"}),
        ("s3", {"client_kwargs.region_name": "us-east-2"}, {"region": "us-east-2"}),
        ("s3", {"AWS_SKIP_SIGNATURE": "true"}, {"anonymous": True}),
        ("s3", {"AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}, {"force_virtual_addressing": True}),
        ("s3", {"AWS_S3_ADDRESSING_STYLE": "path"}, {}),
        ("gs", {"GOOGLE_SKIP_SIGNATURE": "true"}, {"anonymous": True}),
        ("gs", {"GOOGLE_PROJECT_ID": "p"}, {"project_id": "p"}),
        (
            "gs",
            {"endpoint_url": "http://127.0.0.1:4443"},
            {"endpoint_override": "127.0.0.1:4443", "scheme": "http"},
        ),
        (
            "abfs",
            {
                "AZURE_STORAGE_ACCOUNT_NAME": "a",
                "AZURE_STORAGE_SAS_TOKEN": "sv=1",
                "AZURE_CLIENT_ID": "c",
                "AZURE_CLIENT_SECRET": "cs",
                "AZURE_TENANT_ID": "t",
            },
            {
                "account_name": "a",
                "sas_token": "sv=1",
                "client_id": "c",
                "client_secret": "cs",
                "tenant_id": "t",
            },
        ),
        ("file", {"auto_mkdir": "true"}, {}),
    ],
)
def test_options_map_to_pyarrow(
    protocol: str, options: dict[str, str], expected: dict[str, object]
) -> None:
    assert arrow_filesystem_options(protocol, options) == expected


def test_mapped_s3_options_are_accepted_by_pyarrow() -> None:
    options = {"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:1", "region": "x"}
    pafs.S3FileSystem(**arrow_filesystem_options("s3", options))
    delta_rs = {
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_REGION": "x",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true",
    }
    pafs.S3FileSystem(**arrow_filesystem_options("s3", delta_rs))


@pytest.mark.parametrize(
    ("protocol", "key"),
    [
        ("s3", "cache_type"),
        ("s3", "AWS_PROFILE"),
        ("s3", "use_ssl"),
        ("gs", "token"),
        ("abfs", "sas"),
        ("abfs", "connection_string"),
    ],
)
def test_options_without_a_pyarrow_equivalent_are_refused(protocol: str, key: str) -> None:
    with pytest.raises(UsageError, match=key):
        arrow_filesystem_options(protocol, {key: "x"})


def test_options_are_checked_as_for_fsspec() -> None:
    """Bad values and conflicts are refused on the driver, naming the key."""
    with pytest.raises(UsageError, match="AWS_SKIP_SIGNATURE takes true or false"):
        arrow_filesystem_options("s3", {"AWS_SKIP_SIGNATURE": "maybe"})
    with pytest.raises(UsageError, match="AWS_REGION and region both set"):
        arrow_filesystem_options("s3", {"AWS_REGION": "a", "region": "b"})
    with pytest.raises(UsageError, match="GOOGLE_SERVICE_ACCOUNT_KEY is not valid JSON"):
        arrow_filesystem_options("gs", {"GOOGLE_SERVICE_ACCOUNT_KEY": "{"})


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


def test_s3_with_deltalake_options(s3_server: S3Server) -> None:
    """deltalake's options for the server (AWS_ENDPOINT_URL, AWS_REGION, AWS_ALLOW_HTTP, ...)
    reach pyarrow's S3 filesystem as they reach s3fs."""
    uri = s3_server.uri("arrow-storage-delta-keys")
    storage = ArrowStorage(uri, s3_server.delta_options())
    storage.check_options()
    _roundtrip(storage, Storage.for_table(uri, s3_server.delta_options()))
