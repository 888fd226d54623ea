"""`dvtool vacuum` and `maintain` on Paimon tables with branches and with external data
paths (tests/reference/paimon_branch_tables.py), against Paimon's Java cleaner and reader.

Each table is copied, every file in it dated two days back, and the strays of
test_paimon_vacuum.py planted, plus for the branched table strays in the branches' own
folders: leftovers of failed commits in `branch/branch-dev/snapshot/` and `changelog/`
(Paimon's cleaner cleans every branch's) and files where it never looks (a branch's `tag/`
and `schema/`, `branch/` itself, a `manifest/` or bucket folder inside a branch folder); for
the external-paths table an old stray in the external folder, which Paimon's cleaner
deletes and dvtool, which never deletes outside the table folder, leaves to it. Oracles:

- the dry run lists exactly what Paimon's `LocalOrphanFilesClean` (dry run, same cutoff)
  would delete inside the table folder; the real run deletes exactly those;
- afterwards Paimon's reader returns the same rows on every branch and tag (read through
  the branch's own tag manager), every file the `dev` branch alone reaches is still there,
  and `inspect --verify` passes;
- `maintain` runs the vacuum step on both tables (not `not-applicable`), with the same
  lists;
- `inspect --branch NAME` counts the rows Paimon reads on that branch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import dvtool
from dvtool.errors import UsageError
from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmSession
from tests.oracles import GOLDEN
from tests.reference.iceberg_writes import cli_json
from tests.reference.paimon_branch_tables import build_all
from tests.reference.paimon_tables import JAVA_OPEN_BY_PATH, JAVA_READ_ROWS
from tests.reference.test_paimon_vacuum import DAY_MS, PAIMON_CLEAN, _age, _files, _plant, _strays

# Runs in the engine's process: the rows and data file names Paimon reads on a branch, at
# its latest snapshot or at one of its tags (the branch's own tag manager: `scan.tag-name`
# on a branch looks in main's tags in 1.4.2).
READ = (
    JAVA_OPEN_BY_PATH
    + """
if args["branch"] != "main":
    table = table.switchToBranch(args["branch"])
if args["tag"] is None:
    snapshot = table.snapshotManager().latestSnapshot()
else:
    snapshot = table.tagManager().getOrThrow(args["tag"]).trimToSnapshot()
splits = table.newSnapshotReader().withSnapshot(snapshot).read().splits()
read = P.table.source.ReadBuilderImpl(table).newRead()
rows, files = [], set()
for split in splits:
    files.update(str(f.fileName()) for f in split.dataFiles())
"""
    + JAVA_READ_ROWS
    + """result = {"rows": sorted(rows, key=lambda r: r["id"]), "files": sorted(files)}
"""
)
BRANCH_LEFTOVERS = {
    "branch/branch-dev/snapshot/.snapshot-12.9b1e5a3c-7f2d-4e8a-b6c1-0d4f3e2a1b5c.tmp",
    "branch/branch-dev/changelog/.changelog-12.2c7d9e1f-3a5b-4c6d-8e0f-1a2b3c4d5e6f.tmp",
    "branch/branch-idle/snapshot/notes.txt",
}
BRANCH_KEPT = {
    "branch/notes.txt",
    "branch/branch-dev/tag/notes.txt",
    "branch/branch-dev/schema/notes.txt",
    "branch/branch-dev/manifest/manifest-00000000-stray-0",
    "branch/branch-dev/part=p0/bucket-0/data-00000000-stray-0.parquet",
}
EXTERNAL_STRAY = "part=p0/bucket-0/data-00000000-external-stray-0.parquet"


@pytest.fixture(scope="module")
def paimon_branch_tables(
    paimon_java: JvmSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The tables of tests/reference/paimon_branch_tables.py, built once for this module;
    tests copy a table's folder (the external folder is shared, read-only to dvtool)."""
    out = tmp_path_factory.mktemp("paimon-branch-tables")
    manifest: dict[str, Any] = json.loads(build_all(paimon_java, out).read_text())
    return manifest


def _read(session: JvmSession, root: Path, branch: str, tag: str | None) -> dict[str, Any]:
    answer: dict[str, Any] = session.python(READ, path=str(root), branch=branch, tag=tag)
    return answer


def _prepared(entry: dict[str, Any], root: Path) -> tuple[set[str], set[str]]:
    """An aged copy of the table with the strays of the module docstring; (orphans inside
    the table folder, strays that stay)."""
    shutil.copytree(entry["path"], root)
    _age(root, 2 * DAY_MS)
    if not any(p.is_dir() for p in root.rglob("bucket-*")):  # all data files external
        (root / "part=p0" / "bucket-0").mkdir(parents=True)
    orphans, kept = _strays(root)
    if (root / "branch").is_dir():
        for relative in BRANCH_LEFTOVERS | BRANCH_KEPT:
            _plant(root, relative, old=True)
        orphans |= BRANCH_LEFTOVERS
        kept |= BRANCH_KEPT
    if entry["external"]:
        _plant(Path(entry["external"]), EXTERNAL_STRAY, old=True)
    return orphans, kept


def _paimon_lists(session: JvmSession, root: Path, cutoff_ms: int) -> tuple[set[str], set[str]]:
    """What Paimon's cleaner would delete: (inside the table folder, relative; outside)."""
    found = session.python(PAIMON_CLEAN, path=str(root), older_than=cutoff_ms)
    inside = {Path(p).relative_to(root).as_posix() for p in found if Path(p).is_relative_to(root)}
    return inside, {p for p in found if not Path(p).is_relative_to(root)}


@pytest.mark.parametrize("name", ["pk_branched", "pk_external"])
def test_vacuum_deletes_what_paimons_cleaner_would_and_every_branch_reads_the_same(
    name: str, paimon_branch_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    entry = paimon_branch_tables[name]
    root = tmp_path / name
    orphans, kept = _prepared(entry, root)
    before = {(b, t): _read(paimon_java, root, b, t) for b, t, _ in entry["reads"]}
    assert [before[(b, t)]["rows"] for b, t, _ in entry["reads"]] == [r for *_, r in entry["reads"]]
    files = _files(root)

    plan = cli_json("vacuum", root, "--dry-run")
    listed = {f["path"] for f in plan["files"]}
    inside, outside = _paimon_lists(paimon_java, root, plan["cutoff_ms"])
    assert listed == inside == orphans and _files(root) == files
    external = entry["external"]
    assert outside == ({f"{external}/{EXTERNAL_STRAY}"} if external else set())
    assert plan["branches"] == (["main"] if external else ["dev", "idle", "main"])
    assert plan["external_paths_left"] == ([f"file://{external}"] if external else [])

    done = cli_json("vacuum", root)
    assert done["deleted_files"] == len(orphans) and not done["failed"]
    assert _files(root) == files - orphans and kept <= _files(root)
    if external:  # left to Paimon: outside the table folder
        assert (Path(external) / EXTERNAL_STRAY).exists()
    for (branch, tag), read in before.items():
        assert _read(paimon_java, root, branch, tag) == read
    assert cli_json("inspect", root, "--verify")["verify"]["ok"]
    assert cli_json("vacuum", root, "--dry-run")["files"] == []


def test_the_fixtures_have_what_they_claim(
    paimon_branch_tables: dict[str, Any], paimon_java: JvmSession
) -> None:
    """`dev` reaches data files no root of main does (a vacuum blind to branches would
    delete them); `dev` has its own snapshots, tags and changelogs; every data file of the
    external table lies outside it, and its schema names the external folder."""
    branched = Path(paimon_branch_tables["pk_branched"]["path"])
    main = {f for tag in (None, "t1") for f in _read(paimon_java, branched, "main", tag)["files"]}
    dev = set(_read(paimon_java, branched, "dev", None)["files"])
    assert dev - main and all(next(branched.rglob(f), None) for f in dev)
    dev_folder = branched / "branch" / "branch-dev"
    for folder, prefix in (("snapshot", "snapshot-"), ("tag", "tag-"), ("changelog", "changelog-")):
        assert list((dev_folder / folder).glob(f"{prefix}*")), folder
    assert not (dev_folder / "manifest").exists()
    outside = paimon_branch_tables["pk_external"]
    assert not list(Path(outside["path"]).rglob("data-*")) and list(
        Path(outside["external"]).rglob("data-*")
    )


def test_maintain_vacuums_them(
    paimon_branch_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    lake = tmp_path / "lake" / "fixtures.db"
    orphans = {n: _prepared(e, lake / n)[0] for n, e in paimon_branch_tables.items()}
    plan = cli_json("maintain", tmp_path / "lake", "-r", "--dry-run")
    for table in plan["tables"]:
        root = Path(table["location"])
        vacuum = next(a for a in table["actions"] if a["step"] == "vacuum")
        assert vacuum["status"] == "planned", vacuum
        listed = {f["path"] for f in vacuum["result"]["files"]}
        inside, _ = _paimon_lists(paimon_java, root, vacuum["result"]["cutoff_ms"])
        assert listed == inside == orphans[root.name]
    done = cli_json("maintain", tmp_path / "lake", "-r")
    for table in done["tables"]:
        root = Path(table["location"])
        assert table["metrics"]["vacuumed_files"] == len(orphans[root.name])
        assert not any((root / orphan).exists() for orphan in orphans[root.name])
        reads = paimon_branch_tables[root.name]["reads"]
        for branch, tag, rows in reads:
            assert _read(paimon_java, root, branch, tag)["rows"] == rows


def test_inspect_reads_each_branch_as_paimon_does(
    paimon_branch_tables: dict[str, Any], paimon_java: JvmSession
) -> None:
    """`inspect` reads main unless `--branch` names another (Paimon's `table$branch_NAME`),
    counting the rows Paimon's reader returns there; main's says which branches exist."""
    entry = paimon_branch_tables["pk_branched"]
    path = Path(entry["path"])
    main = cli_json("inspect", path)
    assert main["branch"] == "main" and main["branches"] == ["dev", "idle"]
    assert "other branches: dev, idle (inspect one with --branch NAME)" in all_output(
        run("inspect", path)
    )
    assert "branch dev\n" in all_output(run("inspect", path, "--branch", "dev"))
    assert "of branches dev, idle, main reaches" in all_output(run("vacuum", path, "--dry-run"))
    for branch, tag, rows in entry["reads"]:
        if tag is not None:
            continue
        doc = cli_json("inspect", path, "--branch", branch, "--verify")
        assert doc["branch"] == branch and doc["verify"]["ok"], doc["verify"]["problems"]
        paimon = _read(paimon_java, path, branch, None)["rows"]
        assert doc["logical_rows"] == len(rows) == len(paimon)
        assert dvtool.inspect(path, branch=branch).to_dict()["logical_rows"] == len(paimon)
    history = cli_json("inspect", path, "--branch", "idle", "--history")["history"]
    assert [h["snapshot_id"] for h in history] == [2]  # its copy of tag t1
    unknown = run("inspect", path, "--branch", "nope")
    assert unknown.exit_code == 5
    assert "no branch 'nope' (its branches: dev, idle)" in all_output(unknown)
    assert run("inspect", path, "-r", "--branch", "dev").exit_code == 2
    with pytest.raises(UsageError, match="branch applies to Paimon tables"):
        dvtool.inspect(GOLDEN / "table-with-dv-small", branch="dev")
