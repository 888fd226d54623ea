"""Tests of the storage layer's contract (see the docstring of dvtool.storage)."""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import multiprocessing
import os
import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dvtool.errors import FileMissingError, StorageError, UsageError
from dvtool.storage.backends import fsspec_options as _fsspec_options
from dvtool.storage.listing import FileInfo
from dvtool.storage.table_storage import Storage
from tests.oracles import GOLDEN
from tests.s3_server import S3Server

KINDS = ["local", "file_uri", "memory"]


@pytest.fixture(autouse=True)
def clean_memory_fs() -> Iterator[None]:
    """Every test starts and ends with an empty memory:// filesystem."""
    MemoryFileSystem.store.clear()
    MemoryFileSystem.pseudo_dirs[:] = [""]
    yield
    MemoryFileSystem.store.clear()
    MemoryFileSystem.pseudo_dirs[:] = [""]


def make_storage(kind: str, tmp_path: Path, **kwargs: Any) -> Storage:
    """A Storage of the given kind rooted at a fresh table directory."""
    table = tmp_path / "tbl"
    if kind == "local":
        return Storage.for_table(str(table), **kwargs)
    if kind == "file_uri":
        return Storage.for_table(table.as_uri(), **kwargs)
    return Storage.for_table("memory://tbl", **kwargs)


@pytest.fixture(params=KINDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return make_storage(request.param, tmp_path)


@pytest.fixture
def local(tmp_path: Path) -> Storage:
    return make_storage("local", tmp_path)


def temp_files(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if n.startswith(".tmp-")]


# Locations


class TestLocations:
    def test_local_roots(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        expected = str(tmp_path / "tbl")
        assert Storage.for_table("tbl").root == expected
        assert Storage.for_table(expected + "/").root == expected
        assert Storage.for_table(f"file://{expected}").root == expected
        assert Storage.for_table(f"file:{expected}").root == expected
        assert Storage.for_table(f"file://localhost{expected}").root == expected
        assert Storage.for_table(f"file://{tmp_path}/a%20b").root == str(tmp_path / "a b")
        assert Storage.for_table("tbl").protocol == "file"

    def test_memory_root(self) -> None:
        storage = Storage.for_table("memory://tbl/")
        assert (storage.root, storage.protocol) == ("memory://tbl", "memory")
        assert Storage.for_table("memory:///tbl").root == "memory://tbl"
        assert storage.join("_delta_log/x.json") == "memory://tbl/_delta_log/x.json"

    def test_unknown_scheme(self) -> None:
        with pytest.raises(UsageError, match=r"hdfs://"):
            Storage.for_table("hdfs://namenode/table")

    def test_file_uri_with_host_is_refused(self) -> None:
        with pytest.raises(StorageError, match="host"):
            Storage.for_table("file://server/share/tbl")

    @pytest.mark.parametrize(
        ("uri", "package"),
        [
            ("s3://bucket/tbl", "s3fs"),
            ("gs://bucket/tbl", "gcsfs"),
            ("abfss://c@acct.dfs.core.windows.net/tbl", "adlfs"),
        ],
    )
    def test_missing_backend_package(
        self, uri: str, package: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(sys.modules, package, None)
        with pytest.raises(StorageError) as caught:
            Storage.for_table(uri)
        assert f"pip install {package}" in str(caught.value)

    def test_storage_options_booleans(self) -> None:
        options = _fsspec_options("s3", {"anon": "true", "use_ssl": "False", "key": "k"})
        assert options == {"anon": True, "use_ssl": False, "key": "k"}

    def test_join_and_relative_to_root(self, storage: Storage) -> None:
        location = storage.join("a/b.parquet")
        assert location == storage.root + "/a/b.parquet"
        assert storage.join("") == storage.root
        assert storage.relative_to_root(location) == "a/b.parquet"
        assert storage.relative_to_root(storage.root) == ""
        assert storage.relative_to_root(storage.root + "2/x") is None
        assert storage.relative_to_root("s3://bucket/tbl/x") is None

    def test_relative_to_root_accepts_file_uris(self, local: Storage) -> None:
        assert local.relative_to_root("file://" + local.join("x/y")) == "x/y"
        assert local.relative_to_root(local.root + "/../x") is None
        assert local.relative_to_root(local.root + "/a/../b") == "b"

    def test_location_elsewhere_is_refused(self, local: Storage) -> None:
        with pytest.raises(StorageError, match="not on the table's storage"):
            local.read("s3://bucket/key")


class TestResolve:
    def test_relative(self, storage: Storage) -> None:
        assert storage.resolve("part-0.parquet") == storage.join("part-0.parquet")

    def test_percent_encoded(self, storage: Storage) -> None:
        assert storage.resolve("a%20b/c.parquet") == storage.root + "/a b/c.parquet"

    def test_decoded_exactly_once(self, storage: Storage) -> None:
        assert storage.resolve("x%2525y") == storage.join("x%25y")
        assert storage.resolve("x%25y") == storage.join("x%y")

    def test_absolute_file_uris_and_paths(self, storage: Storage) -> None:
        assert storage.resolve("file:///x/y") == "/x/y"
        assert storage.resolve("file:/x/y") == "/x/y"
        assert storage.resolve("file:///x/a%20b") == "/x/a b"
        assert storage.resolve("/x/y") == "/x/y"
        assert storage.resolve("/x/a%20b") == "/x/a b"

    def test_absolute_uri_kept(self, storage: Storage) -> None:
        assert storage.resolve("s3://b/k") == "s3://b/k"
        assert storage.resolve("s3://b/a%20b/%2525") == "s3://b/a b/%25"

    def test_partition_directory(self, storage: Storage) -> None:
        path = "letter=__HIVE_DEFAULT_PARTITION__/part-0.parquet"
        assert storage.resolve(path) == storage.join(path)


class TestEncodeForLog:
    @pytest.mark.parametrize(
        ("relative", "encoded"),
        [
            ("test%file%prefix-part-0.parquet", "test%25file%25prefix-part-0.parquet"),
            (
                "letter=__HIVE_DEFAULT_PARTITION__/p.parquet",
                "letter=__HIVE_DEFAULT_PARTITION__/p.parquet",
            ),
            ("a b/c.parquet", "a%20b/c.parquet"),
            ("x=a:b/c#d?e", "x=a%3Ab/c%23d%3Fe"),
            ("ü/ö", "ü/ö"),
        ],
    )
    def test_examples(self, relative: str, encoded: str) -> None:
        assert Storage.encode_for_log(relative) == encoded

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(
            # "." and ".." are dot segments, not names: no writer puts them in a file path
            st.text(
                st.characters(exclude_categories=["Cs"], exclude_characters="/"),
                min_size=1,
                max_size=12,
            ).filter(lambda segment: segment not in (".", "..")),
            min_size=1,
            max_size=4,
        ).map("/".join)
    )
    @example("::")  # fsspec reads `::` as a URL chain: memory://t/:: once lost its root
    @example("a::b/c")
    def test_round_trip(self, relative: str) -> None:
        for storage in (Storage.for_table("/nonexistent/tbl"), Storage.for_table("memory://t")):
            encoded = Storage.encode_for_log(relative)
            assert storage.resolve(encoded) == storage.join(relative)
            assert storage.relative_to_root(storage.resolve(encoded)) == relative

    def test_golden_log_paths(self) -> None:
        table = GOLDEN / "v1-multi-part-partitioned-struct-stats-only"
        storage = Storage.for_table(str(table))
        paths = []
        for info in storage.list_dir(storage.join("_delta_log")):
            if info.name.endswith(".json"):
                for line in storage.read(info.location).splitlines():
                    add = json.loads(line).get("add")
                    if add:
                        paths.append(add["path"])
        assert any("%25" in p for p in paths)
        for path in paths:
            location = storage.resolve(path)
            assert storage.exists(location), location
            relative = storage.relative_to_root(location)
            assert relative is not None
            assert Storage.encode_for_log(relative) == path

    def test_golden_dv_file_with_percent_in_name(self) -> None:
        table = GOLDEN / "bad" / "dv-file-missing"
        storage = Storage.for_table(str(table))
        names = [i.name for i in storage.list_dir(storage.root) if i.name.endswith(".bin")]
        assert names and all(n.startswith("test%dv%prefix-") for n in names)
        location = storage.resolve(Storage.encode_for_log(names[0]))
        assert location == storage.join(names[0])
        assert storage.read_range(location, 0, 1) == b"\x01"


# Listing


class TestListDir:
    def test_sorted_files_only(self, storage: Storage) -> None:
        names = [
            "00000000000000000010.json",
            "00000000000000000002.json",
            "00000000000000000009.checkpoint.parquet",
            "10.json",
            "9.json",
            "100.json",
            "B",
            "a",
            "_last_checkpoint",
        ]
        shuffled = names[:]
        random.Random(7).shuffle(shuffled)
        for i, name in enumerate(shuffled):
            storage.write(storage.join(f"_delta_log/{name}"), b"x" * i)
        storage.write(storage.join("_delta_log/_sidecars/s.parquet"), b"nested")
        infos = storage.list_dir(storage.join("_delta_log"))
        assert [i.name for i in infos] == sorted(names)
        assert [i.name for i in infos][:3] == [
            "00000000000000000002.json",
            "00000000000000000009.checkpoint.parquet",
            "00000000000000000010.json",
        ]
        for info in infos:
            assert info.location == storage.join(f"_delta_log/{info.name}")
            assert info.size == shuffled.index(info.name)
            assert isinstance(info.modification_time_ms, int)
            assert info.modification_time_ms > 1_600_000_000_000

    def test_missing_directory_is_empty(self, storage: Storage) -> None:
        assert storage.list_dir(storage.join("_delta_log")) == []

    def test_start_after(self, storage: Storage) -> None:
        for version in range(5):
            storage.write(storage.join(f"_delta_log/{version:020d}.json"), b"{}")
        infos = storage.list_dir(storage.join("_delta_log"), start_after=f"{2:020d}.json")
        assert [i.name for i in infos] == [f"{3:020d}.json", f"{4:020d}.json"]
        assert storage.list_dir(storage.join("_delta_log"), start_after="z") == []

    def test_file_info_is_frozen(self, storage: Storage) -> None:
        storage.write(storage.join("f"), b"abc")
        info = storage.info(storage.join("f"))
        assert info is not None
        assert info == FileInfo(storage.join("f"), "f", 3, info.modification_time_ms)
        with pytest.raises(dataclasses.FrozenInstanceError):
            info.size = 4  # type: ignore[misc]


# Reading


class TestRead:
    def test_read_and_ranges(self, storage: Storage) -> None:
        data = bytes(range(256)) * 4
        location = storage.join("dv/deletion_vector_x.bin")
        storage.write(location, data)
        assert storage.read(location) == data
        assert storage.read_range(location, 0, 1) == data[:1]
        assert storage.read_range(location, 100, 37) == data[100:137]
        assert storage.read_range(location, 1000, 24) == data[1000:]
        assert storage.read_range(location, 5, 0) == b""
        assert storage.size(location) == len(data)
        assert storage.exists(location)

    def test_short_read(self, storage: Storage) -> None:
        location = storage.join("f.bin")
        storage.write(location, b"0123456789")
        with pytest.raises(StorageError) as caught:
            storage.read_range(location, 8, 5)
        message = str(caught.value)
        assert location in message and "8..13" in message and "got 2" in message
        assert not isinstance(caught.value, FileMissingError)

    def test_bad_range(self, storage: Storage) -> None:
        with pytest.raises(ValueError):
            storage.read_range(storage.join("f"), -1, 2)

    @pytest.mark.parametrize("method", ["read", "size", "open_parquet"])
    def test_missing_file(self, storage: Storage, method: str) -> None:
        location = storage.join("nope.bin")
        with pytest.raises(FileMissingError) as caught:
            getattr(storage, method)(location)
        assert caught.value.location == location
        assert location in str(caught.value)

    def test_missing_file_ranged(self, storage: Storage) -> None:
        location = storage.join("nope.bin")
        with pytest.raises(FileMissingError) as caught:
            storage.read_range(location, 1, 4)
        assert caught.value.location == location
        with pytest.raises(FileMissingError):
            storage.read_range(location, 0, 0)

    def test_info_and_exists(self, storage: Storage) -> None:
        storage.write(storage.join("d/f"), b"xy")
        assert storage.info(storage.join("missing")) is None
        assert not storage.exists(storage.join("missing"))
        assert storage.info(storage.join("d")) is None
        info = storage.info(storage.join("d/f"))
        assert info is not None and (info.name, info.size) == ("f", 2)
        assert info.location == storage.join("d/f")

    def test_ranged_read_local_reads_only_the_range(
        self, local: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        location = local.join("big.bin")
        data = os.urandom(4 * 2**20)
        local.write(location, data)
        fs = local._fs
        real_open = fs.open
        counted = [0]

        class Counting(io.RawIOBase):
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def read(self, n: int = -1) -> bytes:
                chunk = bytes(self.inner.read(n))
                counted[0] += len(chunk)
                return chunk

            def seek(self, offset: int, whence: int = 0) -> int:
                return int(self.inner.seek(offset, whence))

            def close(self) -> None:
                self.inner.close()

        monkeypatch.setattr(fs, "open", lambda *a, **k: Counting(real_open(*a, **k)))
        assert local.read_range(location, 3 * 2**20, 1000) == data[3 * 2**20 : 3 * 2**20 + 1000]
        assert 0 < counted[0] <= 64 * 1024

    def test_ranged_read_memory_asks_for_the_range(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        storage = make_storage("memory", tmp_path)
        location = storage.join("big.bin")
        data = os.urandom(2**20)
        storage.write(location, data)
        calls: list[tuple[Any, ...]] = []
        real = storage._fs.cat_file

        def spy(path: str, start: Any = None, end: Any = None, **kw: Any) -> bytes:
            calls.append((start, end))
            return bytes(real(path, start=start, end=end, **kw))

        monkeypatch.setattr(storage._fs, "cat_file", spy)
        assert storage.read_range(location, 500_000, 10) == data[500_000:500_010]
        assert calls == [(500_000, 500_010)]

    def test_backend_error_is_one_line_storage_error(
        self, storage: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        location = storage.join("f")
        storage.write(location, b"x")

        def denied(*args: Any, **kwargs: Any) -> bytes:
            raise PermissionError("Access Denied\nrequest id 42")

        monkeypatch.setattr(storage._fs, "cat_file", denied)
        with pytest.raises(StorageError) as caught:
            storage.read(location)
        assert not isinstance(caught.value, FileMissingError)
        assert str(caught.value) == f"cannot read {location}: Access Denied request id 42"

    def test_reading_a_directory_is_a_storage_error(self, local: Storage) -> None:
        local.write(local.join("d/f"), b"x")
        with pytest.raises(StorageError) as caught:
            local.read(local.join("d"))
        assert not isinstance(caught.value, FileMissingError)
        assert local.join("d") in str(caught.value)

    def test_bugs_are_not_hidden(self, storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
        def bug(*args: Any, **kwargs: Any) -> bytes:
            raise TypeError("a bug")

        monkeypatch.setattr(storage._fs, "cat_file", bug)
        with pytest.raises(TypeError):
            storage.read(storage.join("f"))


class TestParquet:
    def parquet_bytes(self) -> bytes:
        buf = io.BytesIO()
        pq.write_table(pa.table({"id": list(range(100)), "s": [str(i) for i in range(100)]}), buf)
        return buf.getvalue()

    def test_open_parquet(self, storage: Storage) -> None:
        location = storage.join("part-0.parquet")
        storage.write(location, self.parquet_bytes())
        with storage.open_parquet(location) as f:
            table = pq.ParquetFile(f).read()
        assert table.num_rows == 100 and table.column("id")[99].as_py() == 99

    def test_arrow_filesystem(self, storage: Storage) -> None:
        location = storage.join("p/part-0.parquet")
        storage.write(location, self.parquet_bytes())
        fs, path = storage.arrow_filesystem(location)
        assert pq.read_table(path, filesystem=fs).num_rows == 100
        root_fs, root_path = storage.arrow_filesystem()
        assert root_fs is fs
        assert root_path.rstrip("/").endswith("tbl")


# Writing


class TestPutIfAbsent:
    def test_create_once(self, storage: Storage) -> None:
        location = storage.join("_delta_log/00000000000000000000.json")
        assert storage.put_if_absent(location, b"first")
        assert not storage.put_if_absent(location, b"second")
        assert storage.read(location) == b"first"
        assert [i.name for i in storage.list_dir(storage.join("_delta_log"))] == [
            "00000000000000000000.json"
        ]

    def test_no_temp_files_left(self, local: Storage) -> None:
        location = local.join("_delta_log/00000000000000000000.json")
        local.put_if_absent(location, b"a")
        local.put_if_absent(location, b"b")
        assert os.listdir(Path(local.root) / "_delta_log") == ["00000000000000000000.json"]

    @pytest.mark.parametrize("kind", ["local", "memory"])
    def test_thread_race(self, kind: str, tmp_path: Path) -> None:
        storage = make_storage(kind, tmp_path)
        location = storage.join("_delta_log/00000000000000000001.json")
        barrier = threading.Barrier(8)
        results: dict[int, bool] = {}

        def commit(i: int) -> None:
            barrier.wait()
            results[i] = storage.put_if_absent(location, f"writer {i}".encode() * 1000)

        threads = [threading.Thread(target=commit, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [i for i, won in results.items() if won]
        assert len(results) == 8 and len(winners) == 1
        assert storage.read(location) == f"writer {winners[0]}".encode() * 1000
        if kind == "local":
            assert os.listdir(Path(storage.root) / "_delta_log") == ["00000000000000000001.json"]

    def test_process_race(self, local: Storage) -> None:
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(4)
        queue = ctx.Queue()
        rel = "_delta_log/00000000000000000002.json"
        procs = [
            ctx.Process(target=race_worker, args=(local.root, rel, i, barrier, queue))
            for i in range(4)
        ]
        for p in procs:
            p.start()
        results = [queue.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        winners = [i for i, won in results if won]
        assert len(results) == 4 and len(winners) == 1
        assert local.read(local.join(rel)) == f"process {winners[0]}".encode() * 1000
        assert os.listdir(Path(local.root) / "_delta_log") == ["00000000000000000002.json"]

    def test_without_hard_links(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        def no_link(src: str, dst: str) -> None:
            raise OSError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_link)
        strict = make_storage("local", tmp_path)
        location = strict.join("_delta_log/00000000000000000000.json")
        with pytest.raises(StorageError, match="cannot commit safely"):
            strict.put_if_absent(location, b"a")
        assert os.listdir(Path(strict.root) / "_delta_log") == []
        unsafe = make_storage("local", tmp_path, unsafe_single_writer=True)
        assert unsafe.put_if_absent(location, b"a")
        assert not unsafe.put_if_absent(location, b"b")
        assert unsafe.read(location) == b"a"
        assert temp_files(Path(unsafe.root) / "_delta_log") == []

    @pytest.mark.parametrize("fail", ["fsync", "link"])
    def test_failure_removes_temp_file(
        self, local: Storage, monkeypatch: pytest.MonkeyPatch, fail: str
    ) -> None:
        def broken(*args: Any) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(os, fail, broken)
        location = local.join("_delta_log/00000000000000000000.json")
        with pytest.raises(StorageError, match="I/O error"):
            local.put_if_absent(location, b"a")
        monkeypatch.undo()
        assert os.listdir(Path(local.root) / "_delta_log") == []

    def test_old_object_store_backend_is_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        pytest.importorskip("s3fs")
        import importlib.metadata

        real_version = importlib.metadata.version
        monkeypatch.setattr(
            importlib.metadata,
            "version",
            lambda name: "2024.10.0" if name == "s3fs" else real_version(name),
        )
        storage = Storage.for_table(
            "s3://bucket/tbl", {"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:9"}
        )
        with pytest.raises(StorageError, match=r"cannot commit safely.*s3fs 2024\.10\.0"):
            storage.put_if_absent(storage.join("_delta_log/0.json"), b"x")


def race_worker(root: str, rel: str, i: int, barrier: Any, queue: Any) -> None:
    """One process of the put_if_absent race (module level, so spawn can import it)."""
    storage = Storage.for_table(root)
    barrier.wait()
    queue.put((i, storage.put_if_absent(storage.join(rel), f"process {i}".encode() * 1000)))


class TestWrite:
    def test_write_creates_parents(self, storage: Storage) -> None:
        location = storage.join("a/b/c/deletion_vector_1.bin")
        storage.write(location, b"dv")
        assert storage.read(location) == b"dv"

    def test_write_atomic_replace(self, storage: Storage) -> None:
        location = storage.join("_delta_log/_last_checkpoint")
        storage.write_atomic_replace(location, b'{"version":1}')
        storage.write_atomic_replace(location, b'{"version":2}')
        assert storage.read(location) == b'{"version":2}'

    def test_local_writes_leave_no_temp_files(self, local: Storage) -> None:
        local.write(local.join("d/x.bin"), b"1")
        local.write_atomic_replace(local.join("d/x.bin"), b"2")
        assert os.listdir(Path(local.root) / "d") == ["x.bin"]

    def test_failed_replace_keeps_old_file(
        self, local: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        location = local.join("_delta_log/_last_checkpoint")
        local.write_atomic_replace(location, b"old")

        def broken(src: str, dst: str) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "replace", broken)
        with pytest.raises(StorageError, match="No space left"):
            local.write_atomic_replace(location, b"new")
        monkeypatch.undo()
        assert local.read(location) == b"old"
        assert temp_files(Path(local.root) / "_delta_log") == []


class TestDelete:
    def test_delete_is_idempotent(self, storage: Storage) -> None:
        location = storage.join("x.parquet")
        storage.write(location, b"x")
        storage.delete(location)
        assert not storage.exists(location)
        storage.delete(location)
        storage.delete(storage.join("never/existed"))

    def test_delete_many(self, storage: Storage) -> None:
        keep = storage.join("keep")
        storage.write(keep, b"k")
        gone = [storage.join(f"d/{i}.parquet") for i in range(5)]
        for location in gone:
            storage.write(location, b"x")
        storage.delete_many([*gone, storage.join("d/missing.parquet")])
        assert storage.list_dir(storage.join("d")) == []
        assert storage.exists(keep)
        storage.delete_many([])


# S3 through a local moto server


class TestS3Moto:
    @pytest.fixture
    def s3(self, s3_server: S3Server, request: pytest.FixtureRequest) -> Storage:
        """A table root of its own on the session's moto server (tests/s3_server.py)."""
        return Storage.for_table(s3_server.uri(request.node.name), s3_server.storage_options())

    def test_put_if_absent(self, s3: Storage) -> None:
        location = s3.join("_delta_log/00000000000000000000.json")
        assert s3.put_if_absent(location, b"winner")
        assert not s3.put_if_absent(location, b"loser")
        assert s3.read(location) == b"winner"
        # A retried create whose first reply was lost finds its own bytes: still ours.
        assert s3.put_if_absent(location, b"winner")

    def test_read_range_and_listing(self, s3: Storage) -> None:
        location = s3.join("dv.bin")
        data = bytes(range(256)) * 64
        s3.write(location, data)
        assert s3.read_range(location, 1000, 100) == data[1000:1100]
        with pytest.raises(StorageError, match="short read"):
            s3.read_range(location, len(data) - 4, 8)
        with pytest.raises(FileMissingError):
            s3.read(s3.join("missing.bin"))
        assert [i.location for i in s3.list_dir(s3.root)] == [location]
        assert s3.list_dir(s3.join("_delta_log")) == []
        s3.delete_many([location, s3.join("missing.bin")])
        assert not s3.exists(location)


def test_replace_removes_stale_hadoop_checksum(tmp_path: Path) -> None:
    """Spark's local file system keeps `.<name>.crc` beside files it wrote; after we replace
    `_last_checkpoint` that checksum would no longer match, so it goes."""
    storage = Storage.for_table(str(tmp_path))
    target = tmp_path / "_last_checkpoint"
    target.write_bytes(b'{"version":1}')
    crc = tmp_path / "._last_checkpoint.crc"
    crc.write_bytes(b"crc of the old bytes")
    storage.write_atomic_replace(storage.join("_last_checkpoint"), b'{"version":2}')
    assert target.read_bytes() == b'{"version":2}'
    assert not crc.exists()
