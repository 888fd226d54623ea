"""Vacuum must never delete anything outside the table root, whatever the log says.

A sandbox directory next to the table holds victim files. Commits written by hand name them
through every spelling that could reach them: `..` segments, absolute paths, `file://` URIs,
percent-encoded `%2E%2E`, other schemes, DV prefixes with `..`, absolute-path ('p') DVs, and
paths through symbolic links inside the table that point into the sandbox. After every
vacuum (full and `--lite`, dry run and real, retention 0) each victim must still exist with
the same bytes and every link must still be there; vacuum reports the bad paths as ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dvtool.commands.vacuum.command as vacuum_module
from dvtool.commands.vacuum.command import VacuumRequest, VacuumResult, run_vacuum
from dvtool.delta.log.reader import open_log
from tests.oracles import copy_golden

HOUR_S = 3600
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85_uuid(value: uuid.UUID) -> str:
    """The 20-character Z85 text of a UUID (encoded here, independently of dvtool)."""
    out = ""
    for (word,) in struct.iter_unpack(">I", value.bytes):
        chars = ""
        for _ in range(5):
            word, digit = divmod(word, 85)
            chars = _Z85[digit] + chars
        out += chars
    return out


def _hashes(root: Path) -> dict[str, str]:
    """Every file and link under `root` (links not followed): bytes hash or link target."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link -> " + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _age(root: Path, seconds: float) -> None:
    moment = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if d != "_delta_log"]
        for name in filenames:
            os.utime(Path(dirpath) / name, (moment, moment), follow_symlinks=False)


class Scene:
    """A DV table and a sandbox beside it, with commits naming the sandbox's files."""

    def __init__(self, tmp_path: Path) -> None:
        self.table = copy_golden("table-with-dv-small", tmp_path / "tables")
        self.sandbox = self.table.parent / "outside"
        self.sandbox.mkdir()
        (self.sandbox / "linked").mkdir()
        self.victims: dict[str, Path] = {}
        self.log_paths: list[str] = []

    def victim(self, name: str) -> Path:
        path = self.sandbox / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"precious {name}".encode() * 10)
        self.victims[name] = path
        return path

    def dv(self, prefix: str) -> tuple[dict[str, Any], str]:
        """A 'u' DV descriptor with `prefix`, and its derived file name."""
        value = uuid.uuid4()
        descriptor = {
            "storageType": "u",
            "pathOrInlineDv": prefix + _z85_uuid(value),
            "offset": 1,
            "sizeInBytes": 34,
            "cardinality": 1,
        }
        return descriptor, f"deletion_vector_{value}.bin"


def _add(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "path": path,
        "partitionValues": {},
        "size": 10,
        "modificationTime": 1,
        "dataChange": True,
    }
    if dv is not None:
        body["deletionVector"] = dv
    return {"add": body}


def _remove(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"path": path, "deletionTimestamp": 1000, "dataChange": True}
    if dv is not None:
        body["deletionVector"] = dv
    return {"remove": body}


def _write_commit(table: Path, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CRAFTED"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    (table / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    s = Scene(tmp_path)
    t, box = s.table, s.sandbox
    adds: list[dict[str, Any]] = []
    removes: list[dict[str, Any]] = []
    # Every spelling, once as a live add and once as an expired remove (a --lite candidate).
    for kind, bucket in (("add", adds), ("rm", removes)):
        make = _add if kind == "add" else _remove
        s.victim(f"{kind}-dotdot.parquet")
        bucket.append(make(f"../outside/{kind}-dotdot.parquet"))
        s.victim(f"{kind}-deep-dotdot.parquet")
        bucket.append(make(f"sub/../../outside/{kind}-deep-dotdot.parquet"))
        s.victim(f"{kind}-absolute.parquet")
        bucket.append(make(str(box / f"{kind}-absolute.parquet")))
        s.victim(f"{kind}-uri.parquet")
        bucket.append(make((box / f"{kind}-uri.parquet").as_uri()))
        s.victim(f"{kind}-pct.parquet")
        bucket.append(make(f"%2E%2E/outside/{kind}-pct.parquet"))
        s.victim(f"{kind}-pct-slash.parquet")
        bucket.append(make(f"..%2Foutside%2F{kind}-pct-slash.parquet"))
        bucket.append(make(f"s3://bucket/{kind}-x.parquet"))
        bucket.append(make(f"file://otherhost/{kind}-x.parquet"))
        # A 'u' DV whose prefix climbs out of the root.
        dv, name = s.dv("../outside/")
        s.victim(name)
        bucket.append(make(f"{kind}-with-dv.parquet", dv))
        # An absolute-path DV in the sandbox.
        s.victim(f"{kind}-p-dv.bin")
        p_dv = {
            "storageType": "p",
            "pathOrInlineDv": (box / f"{kind}-p-dv.bin").as_uri(),
            "offset": 1,
            "sizeInBytes": 34,
            "cardinality": 1,
        }
        bucket.append(make(f"{kind}-with-p-dv.parquet", p_dv))
        # Through the symbolic links inside the table.
        s.victim(f"linked/{kind}-via-link.parquet")
        bucket.append(make(f"linkdir/{kind}-via-link.parquet"))
        dv, name = s.dv("linkdir/")
        s.victim(f"linked/{name}")
        bucket.append(make(f"{kind}-with-linked-dv.parquet", dv))
    s.victim("linked/never-named.parquet")
    s.victim("file-target.parquet")
    (t / "linkdir").symlink_to(box / "linked", target_is_directory=True)
    (t / "linkfile.parquet").symlink_to(box / "file-target.parquet")
    removes.append(_remove("linkfile.parquet"))
    _write_commit(t, 2, adds)
    _write_commit(t, 3, removes)
    s.log_paths = [
        next(iter(a.values()))["path"] for a in adds + removes if "://bucket" not in str(a)
    ]
    _age(t, 2 * HOUR_S)
    _age(box, 2 * HOUR_S)
    yield s


def _assert_sandbox_intact(s: Scene, before: dict[str, str]) -> None:
    assert _hashes(s.sandbox) == before
    for name, path in s.victims.items():
        assert path.is_file(), name
    assert (s.table / "linkdir").is_symlink()
    assert (s.table / "linkfile.parquet").is_symlink()


def _run(s: Scene, **kwargs: Any) -> VacuumResult:
    now_ms = int(time.time() * 1000) + 2000
    return run_vacuum(open_log(str(s.table)), VacuumRequest(**kwargs), None, now_ms)


@pytest.mark.parametrize("lite", [False, True], ids=["full", "lite"])
def test_nothing_outside_the_root_is_deleted(scene: Scene, lite: bool) -> None:
    before = _hashes(scene.sandbox)
    live_data = "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
    live_dv = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    (scene.table / "stray.parquet").write_bytes(b"orphan inside the root")
    os.utime(scene.table / "stray.parquet", (1, 1))

    dry = _run(scene, retain_ms=0, force=True, lite=lite, dry_run=True)
    _assert_sandbox_intact(scene, before)
    for f in dry.files:
        assert not f.path.startswith(("..", "/", "linkdir")), f.path
        assert f.path != "linkfile.parquet"
    ignored = {p.path for p in dry.ignored_log_paths}
    assert "../outside/add-dotdot.parquet" in ignored
    assert "%2E%2E/outside/add-pct.parquet" in ignored
    assert str(scene.sandbox / "add-absolute.parquet") in ignored
    assert "s3://bucket/add-x.parquet" in ignored
    assert any("otherhost" in p for p in ignored)
    if lite:
        assert "../outside/rm-dotdot.parquet" in ignored
        assert "sub/../../outside/rm-deep-dotdot.parquet" in ignored
    for p in dry.ignored_log_paths:
        assert p.reason

    real = _run(scene, retain_ms=0, force=True, lite=lite)
    _assert_sandbox_intact(scene, before)
    assert {f.path for f in real.files} == {f.path for f in dry.files}
    assert not real.failed
    assert (scene.table / live_data).is_file() and (scene.table / live_dv).is_file()
    assert (scene.table / "stray.parquet").exists() is lite
    # Once more, with the directory listing and the log both revisited.
    _run(scene, retain_ms=0, force=True)
    _run(scene, retain_ms=0, force=True, lite=True)
    _assert_sandbox_intact(scene, before)


def test_absolute_path_dv_inside_the_root_is_never_deleted(tmp_path: Path) -> None:
    table = copy_golden("table-with-dv-small", tmp_path)
    inside = table / "p-dvs" / "mine.bin"
    inside.parent.mkdir()
    inside.write_bytes(b"an absolute-path DV file")
    dv = {
        "storageType": "p",
        "pathOrInlineDv": inside.as_uri(),
        "offset": 1,
        "sizeInBytes": 20,
        "cardinality": 1,
    }
    # Only an expired tombstone names it.
    _write_commit(table, 2, [_remove("gone.parquet", dv)])
    _age(table, 2 * HOUR_S)
    for lite in (False, True):
        result = run_vacuum(
            open_log(str(table)),
            VacuumRequest(retain_ms=0, force=True, lite=lite),
            None,
            int(time.time() * 1000) + 2000,
        )
        assert "p-dvs/mine.bin" not in {f.path for f in result.files}
        assert inside.is_file()


def test_directory_swapped_for_a_link_after_listing(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list is computed, then a directory of the table is replaced by a link to the
    sandbox holding a file of the same name: the delete-time check refuses it."""
    orphans = scene.table / "orphans"
    orphans.mkdir()
    (orphans / "old.parquet").write_bytes(b"orphan")
    os.utime(orphans / "old.parquet", (1, 1))
    swapped = scene.sandbox / "swapped"
    swapped.mkdir()
    (swapped / "old.parquet").write_bytes(b"must survive")
    before = _hashes(scene.sandbox)
    original = vacuum_module._commit_start

    def swap_then_start(*args: Any, **kwargs: Any) -> Any:
        orphans.rename(scene.table / "orphans-moved")
        orphans.symlink_to(swapped, target_is_directory=True)
        return original(*args, **kwargs)

    monkeypatch.setattr(vacuum_module, "_commit_start", swap_then_start)
    result = _run(scene, retain_ms=0, force=True)
    assert "orphans/old.parquet" in {f.path for f in result.files}
    assert [f.path for f in result.failed] == ["orphans/old.parquet"]
    assert "outside the table root" in result.failed[0].error
    _assert_sandbox_intact(scene, before)
    assert (swapped / "old.parquet").read_bytes() == b"must survive"


def test_symlinked_table_root_still_protects_the_sandbox(scene: Scene, tmp_path: Path) -> None:
    before = _hashes(scene.sandbox)
    link = tmp_path / "root-link"
    link.symlink_to(scene.table, target_is_directory=True)
    for lite in (False, True):
        run_vacuum(
            open_log(str(link)),
            VacuumRequest(retain_ms=0, force=True, lite=lite),
            None,
            int(time.time() * 1000) + 2000,
        )
        _assert_sandbox_intact(scene, before)
    assert (
        scene.table / "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
    ).exists()
