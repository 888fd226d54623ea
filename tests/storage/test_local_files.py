"""`LocalFiles` answers as fsspec's LocalFileSystem does, for every call dvtool makes on it.

Both filesystems are asked the same questions about the same directory tree (files, nested
and empty directories, names with spaces, `%`, `#` and non-ASCII letters, links to files, to
directories, back inside, dangling and in a loop) and must give the same entries, the same
bytes and the same exceptions. The tree is not touched between the two answers, so even the
times agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from dvtool.errors import FileMissingError, StorageError
from dvtool.storage.local_files import LocalFiles
from dvtool.storage.table_storage import Storage

NAMES = ["plain.bin", "with space.bin", "per%25cent%.bin", "hash#.bin", "ünïcödé-名前.bin"]
DATA = bytes(range(256)) * 4


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A directory tree with every kind of entry the listing and stat calls may meet."""
    root = tmp_path / "tree"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "empty dir").mkdir()
    for name in NAMES:
        (root / name).write_bytes(DATA)
        (root / "sub" / name).write_bytes(name.encode())
    (root / "sub" / "deeper" / "leaf").write_bytes(b"")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret bytes")
    (root / "link-to-file").symlink_to(outside / "secret")
    (root / "link-to-dir").symlink_to(outside, target_is_directory=True)
    (root / "link-inside").symlink_to(root / "plain.bin")
    (root / "relative-link").symlink_to("sub/deeper")
    (root / "dangling").symlink_to(tmp_path / "nothing-here")
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    return root


def _paths(tree: Path) -> list[str]:
    """Every entry of the tree, and paths that are missing or lead through a file or link."""
    found = [str(tree)] + [str(p) for p in sorted(tree.rglob("*"))]
    return [
        *found,
        str(tree) + "/",
        str(tree / "sub") + "//",
        str(tree / "missing"),
        str(tree / "missing" / "deeper"),
        str(tree / "plain.bin" / "below-a-file"),
        str(tree / "link-to-dir" / "secret"),
        str(tree / "relative-link" / "leaf"),
        str(tree / "loop-a" / "x"),
        "/",
    ]


def _outcome(call: Callable[[], Any]) -> Any:
    """What a call returns, or the type and errno of what it raises."""
    try:
        return call()
    except OSError as exc:
        return (type(exc), exc.errno)
    except Exception as exc:
        return type(exc)


def _by_name(entries: Any) -> Any:
    return sorted(entries, key=lambda e: e["name"]) if isinstance(entries, list) else entries


def test_info_matches_fsspec(tree: Path) -> None:
    ours, theirs = LocalFiles(), LocalFileSystem()
    for path in _paths(tree):
        assert _outcome(lambda p=path: ours.info(p)) == _outcome(lambda p=path: theirs.info(p)), (
            path
        )


def test_ls_matches_fsspec(tree: Path) -> None:
    ours, theirs = LocalFiles(), LocalFileSystem()
    for path in _paths(tree):
        if path == "/":
            continue  # the whole disk: entries change while it is listed
        mine = _outcome(lambda p=path: ours.ls(p, detail=True))
        expected = _outcome(lambda p=path: theirs.ls(p, detail=True))
        assert _by_name(mine) == _by_name(expected), path


def test_listing_reports_links_themselves(tree: Path) -> None:
    """In a listing a link is `other` (not followed), with its target's size; `info` follows."""
    entries = {e["name"].rpartition("/")[2]: e for e in LocalFiles().ls(str(tree))}
    assert entries["link-to-file"]["type"] == "other"
    assert entries["link-to-file"]["size"] == len(b"secret bytes")
    assert entries["dangling"]["size"] == 0
    assert entries["with space.bin"]["type"] == "file"
    assert entries["empty dir"]["type"] == "directory"
    assert LocalFiles().info(str(tree / "link-to-file"))["type"] == "file"


def test_errors_are_the_os_errors(tree: Path) -> None:
    files = LocalFiles()
    with pytest.raises(FileNotFoundError):
        files.ls(str(tree / "missing"))
    with pytest.raises(NotADirectoryError):
        files.ls(str(tree / "plain.bin" / "x"))
    with pytest.raises(FileNotFoundError):
        files.info(str(tree / "dangling"))
    with pytest.raises(IsADirectoryError):
        files.cat_file(str(tree / "sub"))
    with pytest.raises(FileNotFoundError):
        files.rm_file(str(tree / "missing"))


RANGES = [
    (None, None),
    (0, None),
    (10, None),
    (None, 10),
    (0, 0),
    (5, 17),
    (1000, 1024),
    (1000, 5000),  # past the end: a short read
    (5000, 6000),  # wholly past the end
    (-24, None),
    (-5000, None),
    (3, -3),
    (-10, -2),
    (20, 19),  # end just before start: a read of -1 bytes, so to the end (as fsspec)
    (20, 10),  # end further before start: ValueError (as fsspec)
]


@pytest.mark.parametrize(("start", "end"), RANGES)
@pytest.mark.parametrize("name", NAMES)
def test_cat_file_matches_fsspec(tree: Path, name: str, start: Any, end: Any) -> None:
    path = str(tree / name)
    ours = _outcome(lambda: LocalFiles().cat_file(path, start=start, end=end))
    assert ours == _outcome(lambda: LocalFileSystem().cat_file(path, start=start, end=end))
    if start is not None and end is not None and 0 <= start <= end:
        assert ours == DATA[start:end]


def test_cat_file_through_links_and_missing(tree: Path) -> None:
    ours, theirs = LocalFiles(), LocalFileSystem()
    for path in _paths(tree):
        assert _outcome(lambda p=path: ours.cat_file(p, start=2, end=6)) == _outcome(
            lambda p=path: theirs.cat_file(p, start=2, end=6)
        ), path


def test_open_reads_bytes_only(tree: Path) -> None:
    with LocalFiles().open(str(tree / "plain.bin")) as f:
        f.seek(256)
        assert f.read(3) == bytes([0, 1, 2])
    with pytest.raises(ValueError, match="'wb'"):
        LocalFiles().open(str(tree / "plain.bin"), "wb")


def test_rm_file_removes_the_link_not_its_target(tree: Path) -> None:
    files = LocalFiles()
    files.rm_file(str(tree / "link-to-file"))
    assert not os.path.lexists(tree / "link-to-file")
    assert (tree.parent / "outside" / "secret").exists()
    files.rm_file(str(tree / NAMES[4]))
    assert not (tree / NAMES[4]).exists()


# Storage on LocalFiles


def test_local_tables_open_without_fsspec(tmp_path: Path) -> None:
    assert isinstance(Storage.for_table(str(tmp_path))._fs, LocalFiles)
    assert isinstance(Storage.for_table(tmp_path.as_uri())._fs, LocalFiles)


def test_storage_options_keep_fsspec(tmp_path: Path) -> None:
    """fsspec's local filesystem takes options (`auto_mkdir`); LocalFiles takes none."""
    storage = Storage.for_table(str(tmp_path), {"auto_mkdir": "true"})
    assert isinstance(storage._fs, LocalFileSystem)
    assert storage._fs.auto_mkdir is True
    storage.write(storage.join("d/f"), b"x")
    assert storage.read(storage.join("d/f")) == b"x"
    assert [i.name for i in storage.list_dir(storage.join("d"))] == ["f"]


def test_memory_stays_on_fsspec() -> None:
    assert not isinstance(Storage.for_table("memory://local-files-test/t")._fs, LocalFiles)


def test_storage_answers_on_both_local_filesystems(tree: Path) -> None:
    """Listing, stat and reads of Storage give the same on LocalFiles and on fsspec's."""
    plain = Storage.for_table(str(tree))
    with_options = Storage.for_table(str(tree), {"auto_mkdir": "false"})
    assert isinstance(with_options._fs, LocalFileSystem)
    for storage in (plain, with_options):
        assert storage.read_range(storage.join(NAMES[2]), 1000, 24) == DATA[1000:]
        with pytest.raises(StorageError, match="short read"):
            storage.read_range(storage.join(NAMES[2]), 1000, 25)
        with pytest.raises(FileMissingError):
            storage.read(storage.join("missing"))
    for relative in ("", "sub", "sub/deeper", "empty dir", "missing", "plain.bin", "link-to-dir"):
        assert plain.list_dir(plain.join(relative)) == with_options.list_dir(
            with_options.join(relative)
        ), relative
    for relative in ("plain.bin", "link-to-file", "link-inside", "sub", "dangling", "missing"):
        assert plain.info(plain.join(relative)) == with_options.info(with_options.join(relative)), (
            relative
        )
