"""Finding the tables under a prefix (`dvtool maintain --recursive`), locally and on S3.

The layout holds Delta tables written by deltalake at several depths, a partitioned table,
an Iceberg table written by pyiceberg (a path table: `metadata/*.metadata.json`), a Paimon
table's folder as Paimon leaves it on creation (`schema/schema-0`, no snapshot yet), a plain
directory with a `metadata/` folder that holds no table metadata (not a table), a table
written inside another table's directory (never found: a table is not entered), tables in
hidden directories (`_x`, `.x`: not searched), a plain directory, an empty one and, on local
disk, a symbolic link to a table elsewhere (not followed). The same layout uploaded to the
moto S3 server is discovered alike, and the server's request log shows that no found table
was listed or entered: the only keys discovery touched are the `_delta_log`, `metadata` and
`schema` probes.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from dvtool.commands.table_discovery import discover_tables
from dvtool.errors import TableNotFoundError
from tests.s3_server import S3Server

FOUND = ["group/deeper/t3", "group/ice", "group/pai", "group/t2", "t1"]
HIDDEN = ["_hidden/t4", ".staging/t5"]
# Directories discovery probes for `_delta_log` (the prefix itself first): the visible
# subdirectories of every directory that is not a table; those without `_delta_log` are
# probed for `metadata` too, and those without Iceberg metadata for `schema`.
DELTA_TABLES = ["t1", "group/t2", "group/deeper/t3"]
ICEBERG_TABLES = ["group/ice"]
PROBED = ["", "group", "group/deeper", "group/pai", "group/plain", "group/plain/metadata"]
PROBED += DELTA_TABLES + ICEBERG_TABLES
PAIMON_SCHEMA = """{
  "version" : 3, "id" : 0,
  "fields" : [ { "id" : 0, "name" : "id", "type" : "INT NOT NULL" } ],
  "highestFieldId" : 0, "partitionKeys" : [ ], "primaryKeys" : [ "id" ],
  "options" : { "bucket" : "1", "deletion-vectors.enabled" : "true" }
}"""


def _table(path: Path, partitioned: bool = False) -> None:
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"]})
    write_deltalake(str(path), data, partition_by=["p"] if partitioned else None)


def _iceberg_table(path: Path) -> None:
    """A path Iceberg table as pyiceberg writes it (metadata/00000-UUID.metadata.json)."""
    catalog = SqlCatalog("discovery", uri="sqlite:///:memory:", warehouse=f"file://{path}")
    catalog.create_namespace("ns")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    table = catalog.create_table("ns.t", schema=data.schema, location=f"file://{path}")
    table.append(data)


def _paimon_table(path: Path) -> None:
    """A Paimon table before its first commit: only its schema file."""
    (path / "schema").mkdir(parents=True)
    (path / "schema" / "schema-0").write_text(PAIMON_SCHEMA)


def _layout(root: Path) -> Path:
    """The tables and directories of the module docstring under `root` (no link)."""
    _table(root / "t1")
    _iceberg_table(root / "group" / "ice")
    _paimon_table(root / "group" / "pai")
    _table(root / "t1" / "nested")  # inside a table: never found
    _table(root / "group" / "t2", partitioned=True)
    _table(root / "group" / "deeper" / "t3")
    for hidden in HIDDEN:
        _table(root / hidden)
    (root / "group" / "plain").mkdir(parents=True)
    (root / "group" / "plain" / "notes.txt").write_text("not a table")
    (root / "group" / "plain" / "metadata").mkdir()
    (root / "group" / "plain" / "metadata" / "notes.json").write_text("{}")
    return root


def test_tables_under_a_local_prefix(tmp_path: Path) -> None:
    root = _layout(tmp_path / "lake")
    (root / "empty").mkdir()
    _table(tmp_path / "elsewhere")
    (root / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    found = discover_tables([str(root)], None, recursive=True)
    assert found.tables == [str(root / t) for t in FOUND]
    assert found.failed == []


def test_tables_under_a_local_prefix_through_fsspec(tmp_path: Path) -> None:
    """With storage options a local prefix is read through fsspec's local filesystem, whose
    listings follow links: a link is still not entered."""
    root = _layout(tmp_path / "lake")
    _table(tmp_path / "elsewhere")
    (root / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    found = discover_tables([str(root)], {"auto_mkdir": "false"}, recursive=True)
    assert found.tables == [str(root / t) for t in FOUND]


def test_a_prefix_that_is_a_table_is_that_table(tmp_path: Path) -> None:
    root = _layout(tmp_path / "lake")
    found = discover_tables([str(root / "t1")], None, recursive=True)
    assert found.tables == [str(root / "t1")]  # t1/nested is inside it: not a table of its own


def test_without_recursive_the_arguments_are_the_tables(tmp_path: Path) -> None:
    found = discover_tables(["a", "b", "a"], None, recursive=False)
    assert found.tables == ["a", "b"]  # not looked at: maintain opens (and reports) each


def test_prefixes_are_searched_in_order_and_a_table_is_kept_once(tmp_path: Path) -> None:
    root = _layout(tmp_path / "lake")
    found = discover_tables([str(root / "group"), str(root)], None, recursive=True)
    group = ["group/deeper/t3", "group/ice", "group/pai", "group/t2"]
    assert found.tables == [str(root / t) for t in [*group, "t1"]]


@pytest.mark.parametrize("prefix", ["plain-dir", "missing"])
def test_a_prefix_without_tables_is_a_not_found_error(tmp_path: Path, prefix: str) -> None:
    root = _layout(tmp_path / "lake")
    (tmp_path / "plain-dir" / "sub").mkdir(parents=True)
    found = discover_tables([str(tmp_path / prefix), str(root)], None, recursive=True)
    assert found.tables == [str(root / t) for t in FOUND]  # the other prefix still searched
    [(failed, error)] = found.failed
    assert failed == str(tmp_path / prefix)
    assert isinstance(error, TableNotFoundError) and error.exit_code == 5
    assert "_delta_log" in error.message and "metadata/" in error.message
    assert "schema/" in error.message


def test_tables_under_an_s3_prefix_without_entering_them(
    s3_server: S3Server, tmp_path: Path
) -> None:
    _layout(tmp_path / "lake")
    uri = s3_server.upload(tmp_path / "lake", "discovery/lake")
    seen = len(s3_server.requests())
    found = discover_tables([uri], s3_server.storage_options(), recursive=True)
    assert found.tables == [f"{uri}/{t}" for t in FOUND]
    assert found.failed == []
    requests = s3_server.requests()[seen:]
    keys = {r.key for r in requests if r.key}  # listings are of the bucket, with a prefix
    probes = {f"discovery/lake/{d}/_delta_log".replace("//", "/") for d in PROBED}
    assert keys == probes
    # Listings: the directories walked (no table found among them), and of each probed
    # directory `_delta_log/` (at most one key), unless a Delta table `metadata/` and unless
    # an Iceberg table too `schema/`.
    walked = ["", "group", "group/deeper", "group/plain", "group/plain/metadata"]
    listed = {f"{d}/" for d in walked}
    listed |= {f"{d}/_delta_log/" for d in PROBED}
    listed |= {f"{d}/metadata/" for d in PROBED if d not in DELTA_TABLES}
    listed |= {f"{d}/schema/" for d in PROBED if d not in DELTA_TABLES + ICEBERG_TABLES}
    # The Paimon table has no `metadata/`: s3fs then lists its parent, the table's root, with
    # a delimiter (its top-level names, one page: nothing inside its folders).
    listed |= {"group/pai/"}
    prefixes = {r.prefix for r in requests if r.prefix is not None}
    assert prefixes == {
        f"discovery/lake/{p}".replace("//", "/") for p in listed
    }  # nothing in a table found is listed (group/ice/data, t1/...)
    assert all(r.method in ("GET", "HEAD") for r in requests)
