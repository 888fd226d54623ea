"""Which metadata file is current without a catalog (dvtool/iceberg/metadata_files.py)."""

from __future__ import annotations

import re

import pytest

from dvtool.errors import TableNotFoundError, UsageError
from dvtool.iceberg.metadata_files import current_metadata_name, metadata_number

CATALOG_FILES = [
    "00000-3f1c2f5e-0b6a-4d0e-9d7e-1a2b3c4d5e6f.metadata.json",
    "00002-8a7b6c5d-4e3f-2a1b-0c9d-8e7f6a5b4c3d.metadata.json",
    "00001-11111111-2222-3333-4444-555555555555.metadata.json",
    "snap-1-1-abc.avro",
]
HADOOP_FILES = ["v1.metadata.json", "v2.metadata.json", "v10.metadata.json", "version-hint.text"]


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("v12.metadata.json", 12),
        ("00042-3f1c2f5e-0b6a-4d0e-9d7e-1a2b3c4d5e6f.metadata.json", 42),
        ("v3.gz.metadata.json", 3),
        ("00007-3f1c2f5e-0b6a-4d0e-9d7e-1a2b3c4d5e6f.metadata.json.gz", 7),
        ("snap-1-1-abc.avro", None),
        ("notes.metadata.json", None),
    ],
)
def test_metadata_numbers(name: str, number: int | None) -> None:
    assert metadata_number(name) == number


def test_the_hint_wins_when_its_file_is_there() -> None:
    assert current_metadata_name(HADOOP_FILES, "2\n", "t/metadata") == "v2.metadata.json"
    # A hint that lags is walked forward while v{N+1} exists, as Iceberg Java reads it.
    assert current_metadata_name(HADOOP_FILES, "v1.metadata.json", "t/metadata") == (
        "v2.metadata.json"
    )
    assert current_metadata_name([*HADOOP_FILES, "v3.gz.metadata.json"], "1", "t") == (
        "v3.gz.metadata.json"
    )


@pytest.mark.parametrize("hint", [None, "garbage", "99", ""])
def test_without_a_usable_hint_the_highest_number_is_current(hint: str | None) -> None:
    assert current_metadata_name(HADOOP_FILES, hint, "t/metadata") == "v10.metadata.json"
    assert current_metadata_name(CATALOG_FILES, hint, "t/metadata") == CATALOG_FILES[1]


def test_two_files_of_one_number_are_ambiguous() -> None:
    names = [*CATALOG_FILES, "00002-99999999-2222-3333-4444-555555555555.metadata.json"]
    with pytest.raises(UsageError, match="two metadata files numbered 2"):
        current_metadata_name(names, None, "t/metadata")


def test_no_metadata_file_is_not_found() -> None:
    with pytest.raises(TableNotFoundError, match=re.escape("no *.metadata.json in t/metadata")):
        current_metadata_name(["snap-1.avro"], None, "t/metadata")
