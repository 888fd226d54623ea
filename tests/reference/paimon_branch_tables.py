"""Paimon tables with branches and with external data paths, written by Paimon's Java API.

Schema `(id INT, part STRING, v STRING)`, primary key `(id, part)`, `PARTITIONED BY part`, `bucket`
2, `deletion-vectors.enabled`, `changelog-producer` `lookup` (so every commit's compaction
writes DVs and changelog files), as in tests/reference/paimon_tables.py and
paimon_index_tables.py:

- `pk_branched`: main commits `BATCHES[0]` and is tagged `t1`; commits `BATCHES[1]`;
  branches `dev` and `idle` are created from tag `t1` (Paimon copies the tag file to the
  branch's `snapshot/` and `tag/`, and the schemas); `dev` commits `DEV_BATCHES[0]` and
  `[1]`, expires its snapshots down to the latest keeping ten changelogs (decoupled
  changelogs in `branch/branch-dev/changelog/`), is tagged `dt` there and commits
  `DEV_BATCHES[2]`; main commits `BATCHES[2]` and expires likewise (`changelog/`). Every
  file `dev` wrote lies in the table's own `manifest/`, `index/` and bucket folders (a
  branch has its own snapshot, tag, changelog and schema folders, never its own data or
  manifests) and no root of main reaches it; `idle` reaches only what tag `t1` does.
  (`dt` is created after the branch's expiry: Paimon 1.4.2's expiry on a branch deletes
  the manifest lists of the branch's own tags, so a tag before it would be unreadable.)
- `pk_external`: the same options plus `data-file.external-paths` (a folder beside the
  warehouse, outside the table) with the `round-robin` strategy: the three `BATCHES`
  write their data files there; snapshots expired down to the latest.

Each manifest entry has the table's path, the external folder (`external`, or None), and
the rows each branch and tag reads (`reads`: a list of `[branch, tag or None, rows]`).
Fixture: `paimon_branch_tables` (tests/reference/test_paimon_branches.py), built once per
module with the `paimon_java` session. By hand: `python -m
tests.reference.paimon_branch_tables OUT_DIR`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.engines.jvm_engines import PAIMON_JAVA, JvmSession, builder_main
from tests.reference.paimon_tables import (
    BATCHES,
    DB,
    JAVA_CREATE_TABLE,
    Change,
    TableSpec,
    expected_rows,
    part_of,
    write_manifest,
)

DEV_BATCHES: tuple[tuple[Change, ...], ...] = (
    tuple(("+I", i, part_of(i), f"d{i}") for i in range(0, 80, 2))
    + tuple(("-D", i, part_of(i), None) for i in range(3, 60, 9)),
    tuple(("+I", i, part_of(i), f"e{i}") for i in range(1, 80, 7)),
    tuple(("+I", i, part_of(i), f"f{i}") for i in range(5, 90, 5)),
)
OPTIONS = {
    "deletion-vectors.enabled": "true",
    "bucket": "2",
    "changelog-producer": "lookup",
}
BRANCH, IDLE, MAIN_TAG, BRANCH_TAG = "dev", "idle", "t1", "dt"

# Runs in the engine's process: create the table, then args["steps"] in order, each one of
# ["commit", branch, batch], ["tag", branch, name], ["branch", name, from tag],
# ["expire", branch].
WRITE = (
    JAVA_CREATE_TABLE
    + """

def on(branch):
    table = catalog.getTable(ident)
    return table if branch == "main" else table.switchToBranch(branch)

def expire(table):
    zero, day = jvm.java.time.Duration.ZERO, jvm.java.time.Duration.ofDays(1)
    config = P.options.ExpireConfig.builder().snapshotRetainMax(1).snapshotRetainMin(1)
    config = config.snapshotTimeRetain(zero).changelogRetainMax(10).changelogRetainMin(10)
    table.newExpireSnapshots().config(config.changelogTimeRetain(day).build()).expire()

for step in args["steps"]:
    if step[0] == "commit":
        commit_batch(on(step[1]), step[2])
    elif step[0] == "tag":
        table = on(step[1])
        table.createTag(step[2], table.snapshotManager().latestSnapshotId())
    elif step[0] == "branch":
        on("main").createBranch(step[1], step[2])
    else:
        expire(on(step[1]))
result = str(catalog.getTable(ident).location())
"""
)


def _rows(*batches: tuple[Change, ...]) -> list[dict[str, Any]]:
    return expected_rows(TableSpec("rows", ("id", "part"), (), {}, batches=batches))


def _branched_steps() -> list[list[Any]]:
    dev = [["commit", BRANCH, list(b)] for b in DEV_BATCHES[:2]]
    return [
        ["commit", "main", list(BATCHES[0])],
        ["tag", "main", MAIN_TAG],
        ["commit", "main", list(BATCHES[1])],
        ["branch", BRANCH, MAIN_TAG],
        ["branch", IDLE, MAIN_TAG],
        *dev,
        ["expire", BRANCH],
        ["tag", BRANCH, BRANCH_TAG],
        ["commit", BRANCH, list(DEV_BATCHES[2])],
        ["commit", "main", list(BATCHES[2])],
        ["expire", "main"],
    ]


def _branched_reads() -> list[list[Any]]:
    """[branch, tag, rows] of every branch and tag of `pk_branched`."""
    first = _rows(BATCHES[0])
    return [
        ["main", None, _rows(*BATCHES)],
        ["main", MAIN_TAG, first],
        [BRANCH, None, _rows(BATCHES[0], *DEV_BATCHES)],
        [BRANCH, MAIN_TAG, first],
        [BRANCH, BRANCH_TAG, _rows(BATCHES[0], *DEV_BATCHES[:2])],
        [IDLE, None, first],
        [IDLE, MAIN_TAG, first],
    ]


def _build(
    session: JvmSession, warehouse: Path, name: str, options: dict[str, str], steps: list[Any]
) -> Path:
    location = session.python(
        WRITE,
        warehouse=str(warehouse),
        tmp=str(session.workdir / "paimon-io"),
        db=DB,
        name=name,
        primary_keys=["id", "part"],
        partition_keys=["part"],
        options=options,
        steps=steps,
    )
    return Path(location.removeprefix("file:"))


def build_all(session: JvmSession, out: Path) -> Path:
    """Build both tables under OUT/paimon-branch (the external folder OUT/paimon-external);
    write and return the manifest's path."""
    warehouse, external = out / "paimon-branch", out / "paimon-external"
    external.mkdir(parents=True, exist_ok=True)
    branched = _build(session, warehouse, "pk_branched", OPTIONS, _branched_steps())
    external_options = {
        **OPTIONS,
        "data-file.external-paths": f"file://{external}",
        "data-file.external-paths.strategy": "round-robin",
    }
    steps = [["commit", "main", list(b)] for b in BATCHES] + [["expire", "main"]]
    outside = _build(session, warehouse, "pk_external", external_options, steps)
    manifest = {
        "pk_branched": {"path": str(branched), "external": None, "reads": _branched_reads()},
        "pk_external": {
            "path": str(outside),
            "external": str(external),
            "reads": [["main", None, _rows(*BATCHES)]],
        },
    }
    return write_manifest(out / "paimon-branch-manifest.json", manifest)


def main(argv: list[str]) -> int:
    return builder_main(argv, "tests.reference.paimon_branch_tables", PAIMON_JAVA, build_all)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
