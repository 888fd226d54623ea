"""`dvtool vacuum` on Paimon tables: orphan files, against Paimon's own cleaner.

Each fixture table is copied, every file in it dated two days back, and strays planted:
old ones in every folder Paimon's `remove_orphan_files` lists (`manifest/`, `index/`,
`statistics/`, a bucket folder), old ones where it never looks (the table root, `schema/`,
`tag/`, `consumer/`, a partition folder above its buckets), fresh ones in a bucket folder
and `snapshot/`, and the leftovers of failed commits (temporary snapshot, changelog and
manifest files, a stray in `snapshot/`; the `EARLIEST` and `LATEST` hints are as old). The
files dvtool's dry run lists are the files Paimon's `LocalOrphanFilesClean` (dry run, the
same cutoff) would delete, the expired table's leftover orphan among them; the real run
deletes exactly those, and afterwards Paimon's reader returns the same rows at every kept
snapshot and `inspect --verify` passes on each. A branch without a schema (Paimon's cleaner
aborts on it too), a retention under a day without `--force`, and Delta's or Iceberg's
options are refused (tables with branches and external data paths:
test_paimon_branches.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from dvtool.errors import UsageError
from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_writes import cli_json
from tests.reference.paimon_state import paimon_scan
from tests.reference.paimon_tables import SPECS, copy_table
from tests.s3_server import S3Server

NAMES = [spec.name for spec in SPECS]
DAY_MS = 24 * 3600 * 1000
# What failed commits leave: temporary files of snapshots, changelogs and manifests (Paimon
# writes `.NAME.UUID.tmp` and renames it), and a stray in snapshot/.
COMMIT_LEFTOVERS = {
    "snapshot/.snapshot-9.7d0c7c7e-6b53-4f0e-9d51-3b7f44a2e0aa.tmp",
    "snapshot/notes.txt",
    "changelog/.changelog-9.4be1a4de-9b0c-4d0a-8a55-0f7f4e1d6c11.tmp",
    "manifest/.manifest-00000000-stray-9.0c5d8f2e-2f4e-4c5e-9b7e-6c1c1f6a5d22.tmp",
}
FRESH_LEFTOVER = "snapshot/.snapshot-10.f3b5a0f1-8c7e-4a55-a0b4-5d1c7e2e9f33.tmp"

PAIMON_CLEAN = """
P = jvm.org.apache.paimon
table = P.table.FileStoreTableFactory.create(
    P.fs.local.LocalFileIO.create(), P.fs.Path(args["path"]))
found = P.operation.LocalOrphanFilesClean(table, args["older_than"], True).clean()
result = sorted(str(p).removeprefix("file:") for p in found.getDeletedFilesPath())
"""


def _age(root: Path, ms: int) -> None:
    """Date every file under `root` `ms` back."""
    then = time.time() - ms / 1000
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def _plant(root: Path, relative: str, old: bool) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"stray")
    if old:
        then = time.time() - 2 * DAY_MS / 1000
        os.utime(path, (then, then))
    return path


def _strays(root: Path) -> tuple[set[str], set[str]]:
    """Plant the strays of the module docstring; (those that are orphans, those that are not)."""
    bucket = next(p for p in root.rglob("bucket-*") if p.is_dir())
    inside = bucket.relative_to(root).as_posix()
    orphans = {
        "manifest/manifest-00000000-stray-0",
        "index/index-00000000-stray-0",
        "statistics/stat-00000000-stray-0",
        f"{inside}/data-00000000-stray-0.parquet",
        *COMMIT_LEFTOVERS,
    }
    kept = {"stray.txt", "schema/notes.txt", "tag/notes.txt", "consumer/notes.txt"}
    if bucket.parent != root:  # a partition folder above the buckets
        kept.add(f"{bucket.parent.relative_to(root).as_posix()}/data-00000000-stray-1.parquet")
    for relative in orphans | kept:
        _plant(root, relative, old=True)
    fresh = {f"{inside}/data-00000000-fresh-0.parquet", FRESH_LEFTOVER}
    for relative in fresh:
        _plant(root, relative, old=False)
    return orphans, kept | fresh


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", NAMES)
def test_vacuum_deletes_what_paimons_cleaner_would_and_the_table_reads_the_same(
    name: str, paimon_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    entry = paimon_tables[name]
    root = copy_table(entry, tmp_path / name)
    _age(root, 2 * DAY_MS)
    orphans, kept = _strays(root)
    if entry["orphan"]:
        orphans.add(Path(entry["orphan"]).relative_to(entry["path"]).as_posix())
    history = cli_json("inspect", root, "--history")["history"]
    before = {h["snapshot_id"]: paimon_scan(paimon_java, root, h["snapshot_id"]) for h in history}
    files = _files(root)

    plan = cli_json("vacuum", root, "--dry-run")
    listed = {f["path"] for f in plan["files"]}
    older_than = plan["cutoff_ms"]
    paimon = paimon_java.python(PAIMON_CLEAN, path=str(root), older_than=older_than)
    assert listed == {Path(p).relative_to(root).as_posix() for p in paimon}
    assert listed == orphans and _files(root) == files

    done = cli_json("vacuum", root)
    assert done["deleted_files"] == len(orphans) and not done["failed"]
    assert _files(root) == files - orphans and kept <= _files(root)
    for snapshot_id, scan in before.items():
        assert paimon_scan(paimon_java, root, snapshot_id)["rows"] == scan["rows"]
        verify = cli_json("inspect", root, "--version", str(snapshot_id), "--verify")["verify"]
        assert verify["ok"], verify["problems"]
    assert cli_json("vacuum", root, "--dry-run")["files"] == []


def test_what_vacuum_refuses(paimon_tables: dict[str, Any], tmp_path: Path) -> None:
    root = copy_table(paimon_tables["pk_dv"], tmp_path / "pk_dv")
    short = run("vacuum", root, "--retain", "1h")
    assert short.exit_code == 7 and "shorter than a day" in all_output(short)
    assert run("vacuum", root, "--retain", "1h", "--force", "--dry-run").exit_code == 0
    for option in (["--lite"], ["--log"], ["--retain-last", "2"]):
        refused = run("vacuum", root, *option)
        assert refused.exit_code == 2 and "Paimon" in all_output(refused)
    import dvtool

    result = dvtool.vacuum(root, retain="2d", dry_run=True)
    assert result.to_json()["format"] == "paimon" and result.files == []
    with pytest.raises(UsageError):
        dvtool.vacuum(root, retain_last=3)
    (root / "branch" / "branch-dev" / "snapshot").mkdir(parents=True)
    branches = run("vacuum", root, "--dry-run")
    assert branches.exit_code == 7 and "branches dev have no schema" in all_output(branches)


PREFIX = "paimon-vacuum/pk_dv_expired/"


def test_vacuum_on_object_storage(paimon_tables: dict[str, Any], s3_server: S3Server) -> None:
    """The expired table on the S3 emulator (every file uploaded just now: `--retain 0h
    --force`): its leftover orphan is listed and deleted, and the table verifies."""
    entry = paimon_tables["pk_dv_expired"]
    uri = s3_server.upload(Path(entry["path"]), PREFIX)
    options = s3_server.cli_options()
    orphan = Path(entry["orphan"]).relative_to(entry["path"]).as_posix()
    plan = cli_json("vacuum", uri, *options, "--retain", "0h", "--force", "--dry-run")
    assert [f["path"] for f in plan["files"]] == [orphan]
    done = cli_json("vacuum", uri, *options, "--retain", "0h", "--force")
    assert done["deleted_files"] == 1 and not done["failed"]
    keys = {k.removeprefix(PREFIX) for k in s3_server.keys(PREFIX)}
    assert orphan not in keys and len(keys) == len(_files(Path(entry["path"]))) - 1
    assert cli_json("inspect", uri, *options, "--verify")["verify"]["ok"]
