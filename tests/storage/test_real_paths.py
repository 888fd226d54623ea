"""`RealPaths` resolves like `os.path.realpath`, at about one `lstat` per path.

The same instance is asked about every path of a tree full of links (to directories and
files, outside and back inside, relative ones with `..`, chains, loops, dangling ones, a
link in the root's own path), in several orders, since what it remembers must never change
an answer; and the `lstat` calls of thousands of files are counted.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from dvtool.storage.locations import path_under
from dvtool.storage.real_paths import RealPaths


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """`real/t` is the table, reached as `alias/t` through a link; links of every kind."""
    real = tmp_path / "real"
    table = real / "t"
    (table / "part=1" / "deep").mkdir(parents=True)
    (table / "data").mkdir()
    outside = tmp_path / "outside"
    (outside / "nested").mkdir(parents=True)
    for f in ("a.parquet", "part=1/b.parquet", "part=1/deep/c.parquet", "data/d.bin"):
        (table / f).write_bytes(b"x")
    (outside / "nested" / "secret").write_bytes(b"s")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    (table / "out-dir").symlink_to(outside, target_is_directory=True)
    (table / "out-file").symlink_to(outside / "nested" / "secret")
    (table / "back-inside").symlink_to(table / "part=1", target_is_directory=True)
    (table / "relative-up").symlink_to("../../outside/nested")
    (table / "relative-in").symlink_to("part=1/../data")
    (table / "chain-1").symlink_to(table / "chain-2")
    (table / "chain-2").symlink_to(table / "out-dir")
    (table / "loop-1").symlink_to(table / "loop-2")
    (table / "loop-2").symlink_to(table / "loop-1")
    (table / "dangling").symlink_to(tmp_path / "nowhere")
    (table / "data" / "to-root").symlink_to(table, target_is_directory=True)
    return tmp_path


def _paths(tmp_path: Path) -> list[str]:
    paths = []
    for base in (tmp_path / "real" / "t", tmp_path / "alias" / "t"):
        paths.append(str(base))
        for below in sorted(base.rglob("*")):
            paths.append(str(below))
        for name in (
            "missing.parquet",
            "missing-dir/x.parquet",
            "a.parquet/below-a-file",
            "out-dir/nested/secret",
            "out-dir/nested/missing",
            "relative-up/secret",
            "relative-in/d.bin",
            "chain-1/nested/secret",
            "loop-1/x",
            "loop-1/x/y",
            "dangling/x",
            "back-inside/b.parquet",
            "data/to-root/a.parquet",
            "data/to-root/out-dir/nested/secret",
        ):
            paths.append(str(base / name))
    paths += [str(tmp_path / "outside" / "nested" / "secret"), str(tmp_path), "/"]
    return paths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_answers_as_realpath(tree: Path, seed: int) -> None:
    paths = _paths(tree)
    random.Random(seed).shuffle(paths)
    for root in (tree / "real" / "t", tree / "alias" / "t"):
        real_paths = RealPaths(str(root))
        real_root = os.path.realpath(root)
        for path in paths:
            expected = os.path.realpath(path)
            assert real_paths.real_path(path) == expected, path
            assert real_paths.under_root(path) == path_under(expected, real_root), path


def test_what_leads_out_and_what_stays_in(tree: Path) -> None:
    table = tree / "alias" / "t"
    real_paths = RealPaths(str(table))
    assert real_paths.under_root(str(table)) == ""
    assert real_paths.under_root(str(table / "part=1" / "b.parquet")) == "part=1/b.parquet"
    assert real_paths.under_root(str(table / "back-inside" / "b.parquet")) == "part=1/b.parquet"
    assert real_paths.under_root(str(table / "relative-in" / "d.bin")) == "data/d.bin"
    assert real_paths.under_root(str(table / "missing.parquet")) == "missing.parquet"
    for outside in ("out-dir/nested/secret", "out-file", "relative-up/secret", "chain-1/x"):
        assert real_paths.under_root(str(table / outside)) is None, outside
    assert real_paths.under_root(str(tree / "real" / "t" / "a.parquet")) == "a.parquet"


def _counting_lstat(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every `os.lstat` (which `os.path.realpath` calls too)."""
    calls: list[str] = []
    real_lstat = os.lstat

    def lstat(path: str, *args: object, **kwargs: object) -> os.stat_result:
        calls.append(path)
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    return calls


def test_about_one_lstat_per_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 files in one directory and 500 in directories of their own: one `lstat` per
    file and per directory, plus the root's components once."""
    table = tmp_path / "t"
    (table / "flat").mkdir(parents=True)
    files = [table / "flat" / f"f-{i}.parquet" for i in range(2000)]
    files += [table / f"batch={i}" / "g.parquet" for i in range(500)]
    for f in files:
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(b"")
    real_paths = RealPaths(str(table))
    calls = _counting_lstat(monkeypatch)
    assert all(real_paths.under_root(str(f)) is not None for f in files)
    depth = len(table.parts)
    assert len(calls) <= len(files) + 501 + depth
    assert len(calls) == len(set(calls))  # nothing asked twice


def test_links_cost_a_realpath_and_stay_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that is itself a link is resolved from scratch; the others stay one lstat."""
    table = tmp_path / "t"
    table.mkdir()
    (tmp_path / "outside").write_bytes(b"")
    for i in range(100):
        (table / f"f-{i}").write_bytes(b"")
    (table / "f-50").unlink()
    (table / "f-50").symlink_to(tmp_path / "outside")
    real_paths = RealPaths(str(table))
    calls = _counting_lstat(monkeypatch)
    answers = [real_paths.under_root(str(table / f"f-{i}")) for i in range(100)]
    assert answers == [None if i == 50 else f"f-{i}" for i in range(100)]
    # one per file, the root's components once, the link's path and its target's again
    assert len(calls) <= 100 + 3 * len(table.parts)
