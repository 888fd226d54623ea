"""`require_inside_root` on thousands of files: refused exactly as when checked one by one.

The check resolves symbolic links in bulk (`Storage.real_relative_paths`: the root and each
directory once). These tests build a table directory with good files, files under a
directory that is a link to outside the table, linked files, links back inside and the
paths of hostile logs (`..`, absolute paths and URIs elsewhere, control characters, the root
itself), and check that every bad file is refused wherever it stands among good ones, that
each path gets the reason it gets on its own, and what the check costs in `lstat` calls.
(A link swapped while the check runs is out of scope.)
"""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from dvtool.delta.log.table_root import outside_reason, require_inside_root
from dvtool.delta.protocol import z85
from dvtool.errors import WriteRefusedError
from dvtool.storage.table_storage import Storage

GOOD = 300


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """`t` with good files at the top and in partition directories, plus links:
    `linkdir` -> a directory outside, `linkfile` -> a file outside, `back` -> `t/part=0`."""
    root = tmp_path / "t"
    outside = tmp_path / "outside"
    outside.mkdir()
    for i in range(GOOD):
        path = root / (f"part={i % 7}/f-{i}.parquet" if i % 3 else f"f-{i}.parquet")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        (outside / f"f-{i}.parquet").write_bytes(b"")
    (outside / "secret").write_bytes(b"")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "linkfile.parquet").symlink_to(outside / "secret")
    (root / "back").symlink_to(root / "part=0", target_is_directory=True)
    return root


def _row(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"path": path, "deletionVector": dv}


def _uuid_dv(prefix: str = "") -> dict[str, Any]:
    """A DV stored in `<prefix>/deletion_vector_<uuid>.bin` under the root."""
    return {
        "storageType": "u",
        "pathOrInlineDv": prefix + z85.uuid_to_z85(uuid.uuid4()),
        "offset": 1,
        "sizeInBytes": 40,
        "cardinality": 3,
    }


def _path_dv(location: str) -> dict[str, Any]:
    return {
        "storageType": "p",
        "pathOrInlineDv": location,
        "offset": 1,
        "sizeInBytes": 40,
        "cardinality": 3,
    }


def _good_rows(root: Path) -> list[dict[str, Any]]:
    rows = []
    for i in range(GOOD):
        path = f"part={i % 7}/f-{i}.parquet" if i % 3 else f"f-{i}.parquet"
        dv = _uuid_dv("ab" if i % 2 else "") if i % 5 else _path_dv((root / path).as_uri())
        rows.append(_row(path, dv))
    rows.append(_row("back/f-3.parquet", _uuid_dv()))  # a link back inside: allowed
    rows.append(_row(str(root / "part=1" / "f-1.parquet")))  # absolute, inside
    return rows


def test_good_files_pass(table: Path) -> None:
    require_inside_root(Storage.for_table(str(table)), _good_rows(table), "DELETE")


def test_every_file_under_a_linked_directory_is_refused(table: Path) -> None:
    """Each file under `linkdir` (a link to outside), placed anywhere among good files,
    alone or after others under it, is refused and named."""
    storage = Storage.for_table(str(table))
    good = _good_rows(table)
    rng = random.Random(7)
    for i in range(0, GOOD, 10):
        bad = f"linkdir/f-{i}.parquet"
        at = rng.randrange(len(good) + 1)
        rows = [*good[:at], _row(bad), *good[at:]]
        with pytest.raises(WriteRefusedError) as caught:
            require_inside_root(storage, rows, "DELETE")
        assert repr(bad) in caught.value.message
        assert "symbolic link" in caught.value.message
    many_bad = [_row(f"linkdir/f-{i}.parquet") for i in range(GOOD)]
    mixed = [row for pair in zip(good[:GOOD], many_bad, strict=True) for row in pair]
    with pytest.raises(WriteRefusedError, match=r"data file 'linkdir/f-0\.parquet'"):
        require_inside_root(storage, mixed, "DELETE")


def test_dv_files_under_a_linked_directory_are_refused(table: Path) -> None:
    storage = Storage.for_table(str(table))
    good = _good_rows(table)
    for dv in (_uuid_dv("linkdir"), _path_dv(str(table / "linkdir" / "secret"))):
        rows = [*good[:100], _row("f-0.parquet", dv), *good[100:]]
        with pytest.raises(WriteRefusedError, match=r"deletion vector.*symbolic link"):
            require_inside_root(storage, rows, "REORG")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("linkfile.parquet", "symbolic link"),
        ("../outside/f-1.parquet", "'..' segment"),
        ("%2E%2E/outside/f-1.parquet", "'..' segment"),
        ("{outside}/f-1.parquet", "outside the table root"),
        ("file://{outside}/f-1.parquet", "outside the table root"),
        ("s3://bucket/f-1.parquet", "outside the table root"),
        ("f-1%0A.parquet", "control characters"),
        ("{root}", "the table root itself"),
        ("", "the table root itself"),
    ],
)
def test_hostile_paths_among_good_ones(table: Path, path: str, reason: str) -> None:
    storage = Storage.for_table(str(table))
    bad = path.format(root=table, outside=table.parent / "outside")
    rows = [*_good_rows(table), _row(bad)]
    with pytest.raises(WriteRefusedError) as caught:
        require_inside_root(storage, rows, "DELETE")
    assert reason in caught.value.message
    assert repr(bad) in caught.value.message


def _assorted_paths(root: Path) -> list[str]:
    outside = root.parent / "outside"
    paths = [str(row["path"]) for row in _good_rows(root)]
    paths += [f"linkdir/f-{i}.parquet" for i in range(0, GOOD, 7)]
    paths += [
        "linkfile.parquet",
        "linkdir",
        "back",
        "back/f-0.parquet",
        "missing/x.parquet",
        "f-0.parquet/below",
        "../outside/f-1.parquet",
        "%2E%2E/outside/f-1.parquet",
        str(outside / "f-1.parquet"),
        (outside / "f-1.parquet").as_uri(),
        str(root / "linkdir" / "secret"),
        str(root),
        "",
        "s3://bucket/x",
        "a%20b/c%25d.parquet",
    ]
    return paths


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("through_link", [False, True])
def test_bulk_reasons_are_the_one_by_one_reasons(
    table: Path, tmp_path: Path, seed: int, through_link: bool
) -> None:
    """One shared resolver gives every path the reason a fresh check gives it, in any order,
    also for a root opened through a link to it."""
    root = table
    if through_link:
        root = tmp_path / "alias"
        root.symlink_to(table, target_is_directory=True)
    storage = Storage.for_table(str(root))
    paths = _assorted_paths(root)
    random.Random(seed).shuffle(paths)
    shared = storage.real_relative_paths()
    for path in paths:
        assert outside_reason(storage, path, shared) == outside_reason(storage, path), path


# Besides one lstat per data file and DV file, a check resolves once: the root's components,
# the 7 partition directories and `ab` (one each), and the link `back` from scratch (its path
# and its target's, two roots' worth of components).
_ONCE_PER_CHECK = 3


def _count_lstat(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every `os.lstat` (which `os.path.realpath` calls too)."""
    calls: list[str] = []
    real_lstat = os.lstat

    def lstat(path: str, *args: Any, **kwargs: Any) -> os.stat_result:
        calls.append(path)
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    return calls


def test_about_one_lstat_per_file(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = Storage.for_table(str(table))
    rows = _good_rows(table)
    calls = _count_lstat(monkeypatch)
    require_inside_root(storage, rows, "DELETE")
    files = len(rows) + sum(1 for r in rows if r["deletionVector"])
    assert len(calls) <= files + _ONCE_PER_CHECK * len(table.parts) + 10
