"""The DV store: reading golden DV files, every corruption as its own error, an oracle check.

The store is exercised through `LocalStorage`, a small local-filesystem stand-in with the
`dvtool.storage.table_storage.Storage` methods the store uses (it also counts calls, to
check caching); the happy path also runs against the real storage.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from pyroaring import BitMap64

from dvtool.deletion_vectors import codec
from dvtool.delta.dvstore import DVStorage, DVStore
from dvtool.delta.protocol import deletion_vector as dv
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.errors import (
    DeletionVectorError,
    DVCardinalityError,
    DVChecksumError,
    DVEncodingError,
    DVFileMissingError,
    DVMagicError,
    DVRangeError,
    DVRowIndexError,
    DVSizeMismatchError,
    DVVersionError,
    FileMissingError,
    StorageError,
)
from tests.oracles import GOLDEN

SMALL = GOLDEN / "table-with-dv-small"
SMALL_DATA_FILE = "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
SMALL_DV_FILE = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
SMALL_DV = DeletionVectorDescriptor("u", "vBn[lx{q8@P<9BNH/isA", 1, 36, 2)

# A file with two entries (offsets 1 and 43), each deleting row 7.
TWO_ENTRY_TABLE = GOLDEN / "cdf-table-with-cdc-and-dvs"
TWO_ENTRY_FILE = "deletion_vector_e3507e10-ed85-4a01-b263-9ee6616389d4.bin"


class LocalStorage:
    """Local-filesystem storage with the interface of `dvtool.storage.table_storage.Storage`."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.calls: Counter[str] = Counter()

    def join(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def resolve(self, path_in_log: str) -> str:
        path = unquote(path_in_log)
        if path.startswith("file:"):
            return urlparse(path).path
        return path if path.startswith("/") else self.join(path)

    def read_range(self, location: str, offset: int, size: int) -> bytes:
        self.calls["read_range"] += 1
        try:
            with open(location, "rb") as f:
                f.seek(offset)
                data = f.read(size)
        except FileNotFoundError:
            raise FileMissingError(location) from None
        if len(data) != size:
            raise StorageError(f"{location}: range {offset}+{size} exceeds the file")
        return data

    def size(self, location: str) -> int:
        self.calls["size"] += 1
        try:
            return os.path.getsize(location)
        except FileNotFoundError:
            raise FileMissingError(location) from None


def _real_storage(root: Path) -> DVStorage:
    """`dvtool.storage.table_storage.Storage` for `root`."""
    from dvtool.storage.table_storage import Storage

    storage: DVStorage = Storage.for_table(str(root), None)
    return storage


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A writable copy of table-with-dv-small."""
    return Path(shutil.copytree(SMALL, tmp_path / "table"))


StorageFactory = Callable[[Path], DVStorage]


@pytest.fixture(params=["local", "real"])
def make_storage(request: pytest.FixtureRequest) -> StorageFactory:
    """Storage for a table root: the local stand-in, or the real `Storage`."""
    if request.param == "real":
        return _real_storage
    return LocalStorage


def _load(
    make_storage: StorageFactory,
    root: Path,
    descriptor: DeletionVectorDescriptor = SMALL_DV,
    num_records: int | None = 10,
) -> BitMap64:
    store = DVStore(make_storage(root))
    return store.load(descriptor, data_file=SMALL_DATA_FILE, num_records=num_records)


def _patch(path: Path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    path.write_bytes(bytes(raw))


# --- locations and happy paths --------------------------------------------------------


def test_location_per_storage_type(table: Path) -> None:
    store = DVStore(LocalStorage(table))
    assert store.location(SMALL_DV) == f"{table}/{SMALL_DV_FILE}"
    prefixed = DeletionVectorDescriptor("u", "ab" + SMALL_DV.path_or_inline_dv, 1, 36, 2)
    assert store.location(prefixed) == f"{table}/ab/{SMALL_DV_FILE}"
    absolute = DeletionVectorDescriptor("p", "/x/my%20dv.bin", 1, 36, 2)
    assert store.location(absolute) == "/x/my dv.bin"
    assert store.location(dv.descriptor_for_inline(BitMap64([1]))) is None


def test_load_golden(table: Path, make_storage: StorageFactory) -> None:
    assert list(_load(make_storage, table)) == [0, 9]


def test_load_golden_without_num_records(table: Path, make_storage: StorageFactory) -> None:
    assert list(_load(make_storage, table, num_records=None)) == [0, 9]


def test_load_absolute_path_dv(table: Path, make_storage: StorageFactory) -> None:
    descriptor = DeletionVectorDescriptor("p", f"file://{table}/{SMALL_DV_FILE}", 1, 36, 2)
    assert list(_load(make_storage, table, descriptor)) == [0, 9]


def test_load_inline(table: Path, make_storage: StorageFactory) -> None:
    descriptor = dv.descriptor_for_inline(BitMap64([2, 4]))
    assert list(_load(make_storage, table, descriptor)) == [2, 4]


def test_load_written_file_with_large_indexes(tmp_path: Path) -> None:
    bitmaps = [BitMap64([0, 2**32 + 1, 2**62]), BitMap64(range(100_000)), BitMap64()]
    data, placements = codec.encode_dv_file(bitmaps)
    (tmp_path / SMALL_DV_FILE).write_bytes(data)
    store = DVStore(LocalStorage(tmp_path))
    for rows, (offset, size) in zip(bitmaps, placements, strict=True):
        descriptor = DeletionVectorDescriptor(
            "u", SMALL_DV.path_or_inline_dv, offset, size, len(rows)
        )
        assert store.load(descriptor, data_file="f", num_records=None) == rows


def test_header_read_once_per_file(tmp_path: Path) -> None:
    shutil.copy(TWO_ENTRY_TABLE / TWO_ENTRY_FILE, tmp_path)
    storage = LocalStorage(tmp_path)
    store = DVStore(storage)
    path = dv.new_uuid_path(uuid.UUID(TWO_ENTRY_FILE[16:-4]))
    for _ in range(3):
        for offset in (1, 43):
            descriptor = DeletionVectorDescriptor("u", path, offset, 34, 1)
            assert list(store.load(descriptor, data_file="f", num_records=8)) == [7]
    assert storage.calls == Counter({"size": 1, "read_range": 1 + 6})


def test_thread_pool_loads(tmp_path: Path) -> None:
    bitmaps = [BitMap64(range(i, 5000, 7 + i)) for i in range(40)]
    data, placements = codec.encode_dv_file(bitmaps)
    (tmp_path / SMALL_DV_FILE).write_bytes(data)
    storage = LocalStorage(tmp_path)
    store = DVStore(storage)
    descriptors = [
        DeletionVectorDescriptor("u", SMALL_DV.path_or_inline_dv, o, n, len(b))
        for b, (o, n) in zip(bitmaps, placements, strict=True)
    ]
    with ThreadPoolExecutor(8) as pool:
        loaded = list(
            pool.map(lambda d: store.load(d, data_file="f", num_records=5000), descriptors * 5)
        )
    assert loaded == bitmaps * 5
    assert storage.calls["read_range"] <= 200 + 8  # entries, plus at most one header per thread


# --- corruption: each its own error, located --------------------------------------------


def _expect(
    error: type[DeletionVectorError], make_storage: StorageFactory, root: Path, **load: Any
) -> DeletionVectorError:
    with pytest.raises(error) as info:
        _load(make_storage, root, **load)
    message = str(info.value)
    assert SMALL_DV_FILE in message
    assert f"data file {SMALL_DATA_FILE}" in message
    assert info.value.data_file == SMALL_DATA_FILE
    assert info.value.dv_file == f"{root}/{SMALL_DV_FILE}"
    return info.value


def test_flipped_crc_byte(table: Path, make_storage: StorageFactory) -> None:
    _patch(table / SMALL_DV_FILE, 1 + 4 + 36, b"\x00")  # first CRC byte is 0x2a
    error = _expect(DVChecksumError, make_storage, table)
    assert error.expected == "0x00671846"
    assert error.actual == "0x2a671846"


def test_flipped_bitmap_byte(table: Path, make_storage: StorageFactory) -> None:
    _patch(table / SMALL_DV_FILE, 30, b"\x77")
    _expect(DVChecksumError, make_storage, table)


def test_truncated_file(table: Path, make_storage: StorageFactory) -> None:
    path = table / SMALL_DV_FILE
    path.write_bytes(path.read_bytes()[:-1])
    error = _expect(DVRangeError, make_storage, table)
    assert "44 bytes" in str(error)


def test_empty_file(table: Path, make_storage: StorageFactory) -> None:
    (table / SMALL_DV_FILE).write_bytes(b"")
    _expect(DVRangeError, make_storage, table)


def test_offset_zero(table: Path, make_storage: StorageFactory) -> None:
    descriptor = DeletionVectorDescriptor("u", SMALL_DV.path_or_inline_dv, None, 36, 2)
    _expect(DVRangeError, make_storage, table, descriptor=descriptor)


def test_wrong_magic_with_valid_crc(table: Path, make_storage: StorageFactory) -> None:
    path = table / SMALL_DV_FILE
    payload = struct.pack("<I", codec.MAGIC ^ 1) + path.read_bytes()[9:41]
    _patch(path, 5, payload + struct.pack(">I", zlib.crc32(payload)))
    error = _expect(DVMagicError, make_storage, table)
    assert (error.expected, error.actual) == (codec.MAGIC, codec.MAGIC ^ 1)


def test_unsupported_version(table: Path, make_storage: StorageFactory) -> None:
    _patch(table / SMALL_DV_FILE, 0, b"\x02")
    error = _expect(DVVersionError, make_storage, table)
    assert (error.expected, error.actual) == (1, 2)


def test_size_in_bytes_off_by_one(table: Path, make_storage: StorageFactory) -> None:
    descriptor = DeletionVectorDescriptor("u", SMALL_DV.path_or_inline_dv, 1, 35, 2)
    error = _expect(DVSizeMismatchError, make_storage, table, descriptor=descriptor)
    assert (error.expected, error.actual) == (35, 36)


def test_size_in_bytes_past_end(table: Path, make_storage: StorageFactory) -> None:
    descriptor = DeletionVectorDescriptor("u", SMALL_DV.path_or_inline_dv, 1, 37, 2)
    _expect(DVRangeError, make_storage, table, descriptor=descriptor)


def test_wrong_cardinality(table: Path, make_storage: StorageFactory) -> None:
    descriptor = DeletionVectorDescriptor("u", SMALL_DV.path_or_inline_dv, 1, 36, 3)
    error = _expect(DVCardinalityError, make_storage, table, descriptor=descriptor)
    assert (error.expected, error.actual) == (3, 2)


def test_num_records_too_small(table: Path, make_storage: StorageFactory) -> None:
    error = _expect(DVRowIndexError, make_storage, table, num_records=9)
    assert error.actual == 9


def test_missing_file(table: Path, make_storage: StorageFactory) -> None:
    (table / SMALL_DV_FILE).unlink()
    error = _expect(DVFileMissingError, make_storage, table)
    assert isinstance(error.__cause__, FileMissingError)


def test_inline_errors_name_the_data_file(table: Path, make_storage: StorageFactory) -> None:
    descriptor = DeletionVectorDescriptor("i", "not z85!!!", None, 8, 1)
    with pytest.raises(DVEncodingError) as info:
        _load(make_storage, table, descriptor)
    assert info.value.data_file == SMALL_DATA_FILE
    assert SMALL_DATA_FILE in str(info.value)


def test_golden_bad_dv_file_missing() -> None:
    """The golden table whose DV files have a test-only prefix the protocol path lacks."""
    table = GOLDEN / "bad" / "dv-file-missing"
    adds = [a for a in _replay(table, None).values() if a.get("deletionVector")]
    assert adds
    store = DVStore(LocalStorage(table))
    for add in adds:
        descriptor = DeletionVectorDescriptor.from_json(add["deletionVector"])
        with pytest.raises(DVFileMissingError) as info:
            store.load(descriptor, data_file=add["path"], num_records=None)
        assert f"{table}/{descriptor.relative_path()}" in str(info.value)
        assert add["path"] in str(info.value)


# --- oracle: deltalake (delta-rs / delta-kernel-rs) -------------------------------------

ORACLE_CASES = [
    ("table-with-dv-small", None),
    ("with-short-dv", None),
    ("basic-dv-no-checkpoint", None),
    ("basic-dv-with-checkpoint", None),
    ("dv-partitioned-with-checkpoint/delta", None),
    ("dv-with-columnmapping/delta", None),
    ("log-replay-dv-key-cases/delta", None),
    ("cdf-table-with-dv", 3),
    ("cdf-table-with-dv", 4),
    ("cdf-table-with-dv", 5),
    ("cdf-table-with-cdc-and-dvs", None),
    ("compacted-log-files-table", None),
]


def _replay(table: Path, version: int | None) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Active add actions keyed by (path, DV uniqueId), from the JSON commits only.

    Every golden table keeps all its commits, so this tiny replay needs no checkpoint.
    """
    active: dict[tuple[str, str | None], dict[str, Any]] = {}
    commits = sorted(p for p in (table / "_delta_log").glob("*.json") if p.stem.isdigit())
    for commit in commits:
        if version is not None and int(commit.stem) > version:
            break
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            for kind in ("remove", "add"):
                if kind in action:
                    file = action[kind]
                    raw = file.get("deletionVector")
                    key = (
                        file["path"],
                        DeletionVectorDescriptor.from_json(raw).unique_id if raw else None,
                    )
                    if kind == "add":
                        active[key] = file
                    else:
                        active.pop(key, None)
    return active


def _ours(table: Path, version: int | None) -> dict[str, list[int]]:
    store = DVStore(LocalStorage(table))
    out: dict[str, list[int]] = {}
    for (path, _), add in _replay(table, version).items():
        if add.get("deletionVector"):
            descriptor = DeletionVectorDescriptor.from_json(add["deletionVector"])
            num_records = json.loads(add["stats"])["numRecords"] if add.get("stats") else None
            rows = store.load(descriptor, data_file=path, num_records=num_records)
            out[os.path.normpath(table / unquote(path))] = list(rows)
    return {k: v for k, v in out.items() if v}


def _oracle(table: Path, version: int | None) -> dict[str, list[int]]:
    deltalake = pytest.importorskip("deltalake")
    delta_table = deltalake.DeltaTable(str(table), version=version)
    batch = delta_table.deletion_vectors().read_all()
    out: dict[str, list[int]] = {}
    uris = batch.column("filepath").to_pylist()
    masks = batch.column("selection_vector").to_pylist()
    for uri, keep in zip(uris, masks, strict=True):
        deleted = [i for i, kept in enumerate(keep) if not kept]
        out[os.path.normpath(unquote(urlparse(uri).path))] = deleted
    return {k: v for k, v in out.items() if v}


@pytest.mark.parametrize(("name", "version"), ORACLE_CASES, ids=lambda c: str(c))
def test_agrees_with_deltalake(name: str, version: int | None) -> None:
    table = GOLDEN / name
    ours = _ours(table, version)
    assert ours, "the case should have deletion vectors"
    assert ours == _oracle(table, version)
