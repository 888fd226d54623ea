"""Delta Spark reads what dvtool writes, and goes on writing it (issue 24).

For each table shape of `delta_checks.SHAPES` (partitioned + change data feed; clustering +
column mapping `name` + row tracking; column mapping `id` + type widening + V2 checkpoints,
which Delta Spark writes with sidecars) Delta Spark creates the table (deletion vectors off) and one
story runs on it: every dvtool writing command in turn (enable, delete with DVs, purge,
delete copy-on-write, compaction, restore, maintain, downgrade, vacuum, checkpoint with log
cleanup), with Delta Spark writes between them (DELETE, REORG ... APPLY (PURGE), UPDATE,
MERGE, OPTIMIZE, RESTORE, VACUUM), so each command meets files, DVs and log entries both
engines wrote. After each dvtool command:

1. Delta Spark, polars and deltalake read the oracle's rows (tests/oracles.py), which are
   the rows computed in Python for the story so far;
2. `VERSION AS OF n` (Delta Spark, deltalake) reads every retained version not read yet
   (every retained one again after a command that deletes log entries or files) as the
   oracle does at that version: the versions of Delta Spark's own writes are read there too;
3. on row-tracking tables `_metadata.row_id` / `row_commit_version` are the oracle's stable
   values (PROTOCOL.md's reader rules), and the rows a command keeps keep them;
4. DESCRIBE HISTORY lists dvtool's commits with their operations (once, before the log
   cleanup deletes the early ones);
5. each Delta Spark write succeeds, leaves the rows computed in Python (read by the oracle,
   polars and deltalake, then by Delta Spark at the next dvtool command's checks) and
   `dvtool inspect --verify` clean;
6. on change-data-feed tables, `table_changes_by_path` of each dvtool commit returns exactly
   the rows it deleted, as deletes (nothing for rewrites and metadata changes).

After dvtool's log cleanup, a version whose checkpoint and commit are left but which is
older than delta.deletedFileRetentionDuration is refused by Delta Spark, as Delta documents.

One story per shape, not one table per (shape, command): each Delta Spark statement costs
about a second on a 2-core machine. A step's failure names the step.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.engines.jvm_engines import JvmError, JvmSession
from tests.oracles import canon
from tests.reference.delta_checks import (
    ROWS,
    SHAPES,
    Row,
    Shape,
    Timeline,
    change_data,
    check_history,
    check_other_readers,
    check_reads,
    create_table,
    dvtool,
    python_row,
    select_rows,
    table_ref,
    verify_clean,
)

Change = Callable[[list[Row]], list[Row]]
MERGE_IDS = range(ROWS - 5, ROWS + 5)


def without(modulus: int) -> Change:
    """Rows without those whose id % 10 is `modulus` (a DELETE)."""
    return lambda rows: [r for r in rows if r["id"] % 10 != modulus]


def renamed(modulus: int) -> Change:
    """Rows whose id % 10 is `modulus` get `-u` appended to their name (an UPDATE)."""
    return lambda rows: [
        {**r, "name": r["name"] + "-u"} if r["id"] % 10 == modulus else r for r in rows
    ]


def merged(rows: list[Row]) -> list[Row]:
    """MERGE of the ids MERGE_IDS: matched rows get small = -1, the others are inserted."""
    present = {r["id"] for r in rows}
    out = [{**r, "small": -1} if r["id"] in MERGE_IDS else r for r in rows]
    return out + [python_row(i) for i in MERGE_IDS if i not in present]


def same(rows: list[Row]) -> list[Row]:
    return rows


@dataclass
class Story:
    """One table's story: the Python rows expected after each version, the timeline of
    what the oracle reads, and the steps done so far (named in failures)."""

    engine: JvmSession
    shape: Shape
    timeline: Timeline
    expected: dict[int, list[Row]] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.timeline.path

    @property
    def t(self) -> str:
        return table_ref(self.path)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Name the story's step in any failure inside it."""
        self.steps.append(name)
        try:
            yield
        except Exception as e:
            raise AssertionError(f"{self.shape.name}, step {name!r} failed: {e}") from e

    def settle(self, rows: list[Row]) -> list[int]:
        """Record the new versions; each holds `rows` (Python) by the oracle."""
        new = self.timeline.record()
        for version in new:
            self.expected[version] = rows
            assert canon(self.timeline.logical(version)) == canon(rows), f"oracle at {version}"
        return new

    def write(self, statement: str, change: Change) -> None:
        """Check 5: a Delta Spark write leaves the rows computed in Python from the rows
        before (by the oracle, polars and deltalake; Delta Spark reads this version at the
        next dvtool command's checks) and `inspect --verify` clean."""
        with self.step(statement.split()[0]):
            rows = change(self.expected[self.timeline.latest])
            self.engine.sql(statement.format(t=self.t))
            assert self.settle(rows), "Delta Spark must commit"
            check_other_readers(self.timeline)
            verify_clean(self.path)

    def dvtool(
        self, name: str, args: list[str], change: Change, *, destructive: bool = False
    ) -> list[int]:
        """A dvtool command, then checks 1-3 and 6 on the versions not read yet (after a
        `destructive` command, which deletes files or log entries, also the oldest version
        left); returns its versions."""
        with self.step(name):
            before = self.timeline.latest
            rows = change(self.expected[before])
            dvtool(*args)
            new = self.settle(rows)
            # Every command commits here but checkpoint, which writes a checkpoint instead.
            assert new if name != "checkpoint" else self.has_checkpoint(before), "no commit"
            if self.shape.row_tracking and name != "restore":
                self.check_row_ids_kept(before)
            retained = self.timeline.retained()
            versions = [v for v in retained if v not in self.timeline.checked]
            if destructive and retained and retained[0] not in versions:
                versions.insert(0, retained[0])
            check_reads(self.engine, self.timeline, versions)
            if self.shape.change_data_feed and new and name != "restore":
                self.check_change_data(new, before)
            return new

    def has_checkpoint(self, version: int) -> bool:
        """A checkpoint of `version` is in the log (classic or UUID-named)."""
        return any((self.path / "_delta_log").glob(f"{version:020d}.checkpoint*"))

    def check_row_ids_kept(self, before: int) -> None:
        """Check 3: rows the command kept keep their stable row id and commit version."""

        def ids(version: int) -> dict[Any, tuple[Any, Any]]:
            rows = self.timeline.rows[version]
            return {r["id"]: (r["_row_id"], r["_row_commit_version"]) for r in rows}

        old, now = ids(before), ids(self.timeline.latest)
        assert {i: now[i] for i in now if i in old} == {i: old[i] for i in now if i in old}

    def check_change_data(self, new: list[int], before: int) -> None:
        """Check 6: the change data of the command's commits is exactly the rows it deleted."""
        kept = {r["id"] for r in self.expected[self.timeline.latest]}
        deleted = [r for r in self.expected[before] if r["id"] not in kept]
        changes = change_data(self.engine, self.path, new[0], new[-1])
        assert {c["_change_type"] for c in changes} <= {"delete"}, changes
        logical = [{k: v for k, v in c.items() if not k.startswith("_")} for c in changes]
        assert canon(logical) == canon(deleted)


@pytest.fixture(scope="module", autouse=True)
def small_jobs(delta_spark: JvmSession) -> Iterator[None]:
    """Settings for tiny tables on 2 cores: the log replay of each snapshot (every `VERSION
    AS OF` builds one) in one partition, about a third faster; VACUUM's listing in 2 tasks.
    The session's settings are restored for the other modules."""
    settings = {
        "spark.databricks.delta.snapshotPartitions": "1",
        # VACUUM lists the table in this many tasks: 10000 by default, a minute on 2 cores.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    }
    before = {key: delta_spark.rows(f"SET {key}")[0]["value"] for key in settings}
    for key, value in settings.items():
        delta_spark.sql(f"SET {key}={value}")
    yield
    for key, value in before.items():
        delta_spark.sql(f"SET {key}={value}")


def backdate_log(path: Path, upto: int, days: int = 31) -> None:
    """Make the log entries of versions up to `upto` (commits, checksums, checkpoints, and
    the sidecars written by then) `days` old, beyond the default log retention (30 days):
    dvtool's log cleanup then deletes those before the newest such checkpoint. `upto` is
    downgrade's last version: its checkpointProtection lets the log before it go only all
    at once, up to a checkpoint at or after it (downgrade writes one)."""
    log = path / "_delta_log"
    entries = [p for p in log.iterdir() if p.name[:20].isdigit() and int(p.name[:20]) <= upto]
    newest = max(p.stat().st_mtime for p in entries)
    sidecars = log / "_sidecars"
    if sidecars.is_dir():
        entries += [p for p in sidecars.iterdir() if p.stat().st_mtime <= newest]
    old = time.time() - days * 24 * 3600
    for entry in entries:
        os.utime(entry, (old, old))


def check_refused_as_too_old(spark: JvmSession, story: Story, version: int) -> None:
    """Delta Spark refuses `VERSION AS OF` a version older than the deleted-file retention,
    though its checkpoint and commit are in the log (Delta's documented rule)."""
    assert story.timeline.too_old(version) and version in story.timeline.loadable()
    with pytest.raises(JvmError) as refused:
        spark.rows(f"SELECT * FROM {story.t} VERSION AS OF {version}")
    assert "TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION" in str(refused.value)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_delta_spark_reads_and_writes_after_dvtool(
    shape: Shape, delta_spark: JvmSession, tmp_path: Path
) -> None:
    path = tmp_path / "table"
    story = Story(delta_spark, shape, Timeline(path, tmp_path / "scratch", shape.row_tracking))
    with story.step("create"):
        rows = create_table(delta_spark, path, shape)
        story.timeline.record()
        story.expected[story.timeline.latest] = rows
        assert canon(story.timeline.logical(story.timeline.latest)) == canon(rows)
    table = str(path)
    story.dvtool("enable", ["enable", table], same)
    assert "SET TBLPROPERTIES" in story.timeline.operations.values()
    story.write("DELETE FROM {t} WHERE id % 10 = 3", without(3))
    dv_delete = story.dvtool(
        "delete-dv", ["delete", table, "--where", "id % 10 = 1", "--mode", "dv"], without(1)
    )
    story.write("REORG TABLE {t} APPLY (PURGE)", same)
    story.write("UPDATE {t} SET name = concat(name, '-u') WHERE id % 10 = 4", renamed(4))
    story.dvtool("purge", ["optimize", table, "--purge"], same)
    story.write(
        f"MERGE INTO {{t}} AS t USING ({select_rows(MERGE_IDS.start, MERGE_IDS.stop)}) AS s"
        " ON t.id = s.id WHEN MATCHED THEN UPDATE SET small = -1 WHEN NOT MATCHED THEN INSERT *",
        merged,
    )
    (cow_delete,) = story.dvtool(
        "delete-cow", ["delete", table, "--where", "id % 10 = 2", "--mode", "cow"], without(2)
    )
    story.dvtool("compaction", ["optimize", table, "--target-size", "1GiB"], same)
    restored = story.dvtool(
        "restore",
        ["restore", table, "--version", str(cow_delete)],
        lambda _: story.expected[cow_delete],
    )
    assert canon(story.timeline.rows[restored[-1]]) == canon(story.timeline.rows[cow_delete])
    story.write("OPTIMIZE {t}", same)
    target = dv_delete[-1]
    story.write(f"RESTORE TABLE {{t}} TO VERSION AS OF {target}", lambda _: story.expected[target])
    story.dvtool(
        "maintain", ["maintain", table, "--purge-ratio", "0", "--checkpoint-interval", "1"], same
    )
    story.write("DELETE FROM {t} WHERE id % 10 = 6", without(6))
    downgraded = story.dvtool("downgrade", ["downgrade", table], same)
    detail = delta_spark.rows(f"DESCRIBE DETAIL {story.t}")[0]
    assert "deletionVectors" not in detail["tableFeatures"]
    story.dvtool("vacuum", ["vacuum", table, "--retain", "0h", "--force"], same, destructive=True)
    check_history(delta_spark, story.timeline)
    story.write("DELETE FROM {t} WHERE id % 10 = 8", without(8))
    backdate_log(path, downgraded[-1])
    story.dvtool("checkpoint", ["checkpoint", table], same, destructive=True)
    check_refused_as_too_old(delta_spark, story, downgraded[-1])
    story.write("VACUUM {t} RETAIN 0 HOURS", same)
    with story.step("final reads"):
        # Every version was read by Delta Spark when it was made; after the last vacuum and
        # cleanup, the oldest version left and any not read yet are read again.
        retained = story.timeline.retained()
        unread = [v for v in retained if v not in story.timeline.checked]
        check_reads(delta_spark, story.timeline, sorted({*retained[:1], *unread}))
