"""Orphan file rules (dvtool/iceberg/orphan_files.py): locations compared as Hadoop's
`Path.toUri` splits them, Java's prefix-mismatch refusal, the hidden-name filter, and never
a file outside the table location."""

from __future__ import annotations

import pytest

from dvtool.errors import WriteRefusedError
from dvtool.iceberg.orphan_files import (
    FileUri,
    ListedFile,
    find_orphans,
    hidden_filter,
    parse_location,
    unlisted_folders,
)

OLD = 1_000
CUTOFF = 2_000


def old(location: str) -> ListedFile:
    return ListedFile(location, 1, OLD)


@pytest.mark.parametrize(
    ("location", "uri"),
    [
        ("/t/data/a.parquet", FileUri(None, None, "/t/data/a.parquet")),
        ("file:/t//data/a.parquet", FileUri("file", None, "/t/data/a.parquet")),
        ("file:///t/data/", FileUri("file", None, "/t/data")),
        ("s3a://bucket/t/a%20b", FileUri("s3", "bucket", "/t/a%20b")),
        ("S3N://Bucket/t", FileUri("s3", "Bucket", "/t")),
    ],
)
def test_parse_location(location: str, uri: FileUri) -> None:
    assert parse_location(location) == uri


def test_local_listing_matches_file_uris_and_plain_paths() -> None:
    listed = [old("/t/data/a"), old("/t/data/b"), old("/t/data/c")]
    scan = find_orphans(listed, ["file:/t/data/a", "/t/data/b"], "file:/t", CUTOFF)
    assert [o.location for o in scan.orphans] == ["/t/data/c"]


def test_s3a_and_s3_name_the_same_file() -> None:
    listed = [old("s3://b/t/data/a"), old("s3://b/t/data/z")]
    scan = find_orphans(listed, ["s3a://b/t/data/a"], "s3://b/t", CUTOFF)
    assert [o.location for o in scan.orphans] == ["s3://b/t/data/z"]


def test_another_authority_for_the_same_path_is_refused() -> None:
    with pytest.raises(WriteRefusedError, match="another scheme or authority"):
        find_orphans([old("s3://b/t/data/a")], ["s3://other/t/data/a"], "s3://b/t", CUTOFF)


def test_new_files_and_files_outside_the_location_are_never_orphans() -> None:
    listed = [
        ListedFile("/t/data/new", 1, CUTOFF),
        ListedFile("/t/data/unknown-time", 1, None),
        old("/elsewhere/x"),
        old("/tt/x"),
        old("/t/data/old"),
    ]
    scan = find_orphans(listed, [], "/t", CUTOFF)
    assert [o.location for o in scan.orphans] == ["/t/data/old"]
    assert scan.too_new == 2 and scan.listed == 5


def test_hidden_names_but_hidden_partition_folders() -> None:
    hidden = hidden_filter(["_part", "cat"])
    assert hidden(".x.crc") and hidden("_temporary") and not hidden("_part=1")
    assert not hidden("cat=a") and not hidden("data")
    assert hidden("_part_other=1")


def test_folders_outside_the_location_are_not_listed() -> None:
    properties = {"write.data.path": "/elsewhere/data", "write.metadata.path": "/t/meta"}
    assert unlisted_folders("/t", properties) == ["/elsewhere/data"]
