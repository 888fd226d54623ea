"""Shared steps of the Delta Spark read-back tests (issue 24): tables made by Delta Spark in
the shapes users make them, dvtool run on them through its CLI, and the checks that Delta
Spark reads what dvtool wrote.

Expected rows never come from Delta Spark: each version's come from the independent reader
of tests/oracles.py (`raw_rows`, `row_tracking_rows`) run on a shadow of the table whose log
stops at that version (`Timeline`), and tests compare those with rows computed in Python.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from tests.cli_helpers import run
from tests.commands.other_writers import deltalake_rows
from tests.engines.jvm_engines import JvmSession
from tests.oracles import (
    COMMIT,
    canon,
    commit_actions,
    commit_versions,
    dv_file,
    latest_protocol,
    raw_rows,
    replay_json,
    row_tracking_rows,
)

Row = dict[str, Any]
ROWS = 300
# Delta Spark refuses `VERSION AS OF` a version committed longer ago than the table's
# delta.deletedFileRetentionDuration (default 7 days; DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_
# DELETED_FILE_RETENTION_DURATION), even when its log and files are all there.
TIME_TRAVEL_RETENTION_S = 7 * 24 * 3600
COLUMNS = "id BIGINT, part STRING, small INT, day DATE, name STRING"
# Classic, multi-part and UUID-named (V2) checkpoints.
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d+\.\d+|\.[0-9a-f-]{36})?\.(parquet|json)$")


# -- table shapes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A table as Delta Spark users create it: the clause after the columns (PARTITIONED
    BY, CLUSTER BY), table properties, and statements run after the first insert (ALTER
    COLUMN TYPE for type widening)."""

    name: str
    clause: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    after_first_insert: tuple[str, ...] = ()

    @property
    def row_tracking(self) -> bool:
        return self.properties.get("delta.enableRowTracking") == "true"

    @property
    def change_data_feed(self) -> bool:
        return self.properties.get("delta.enableChangeDataFeed") == "true"


# Each shape combines features users combine, so that every feature meets every command in
# three tables (each Delta Spark statement costs about a second on a 2-core machine).
SHAPES = (
    Shape(
        "partitioned-cdf",
        clause="PARTITIONED BY (part)",
        properties={"delta.enableChangeDataFeed": "true"},
    ),
    Shape(
        "clustering-column-mapping-name-row-tracking",
        clause="CLUSTER BY (id)",
        properties={"delta.columnMapping.mode": "name", "delta.enableRowTracking": "true"},
    ),
    Shape(
        "column-mapping-id-type-widening-v2-checkpoints",
        properties={
            "delta.columnMapping.mode": "id",
            "delta.enableTypeWidening": "true",
            "delta.checkpointPolicy": "v2",
            "delta.checkpointInterval": "2",
        },
        after_first_insert=("ALTER TABLE {t} ALTER COLUMN small TYPE BIGINT",),
    ),
)


def table_ref(path: Path) -> str:
    return f"delta.`{path}`"


def select_rows(start: int, stop: int, files: int = 1) -> str:
    """The rows with ids in [start, stop), in `files` Spark partitions (as many files per
    partition value); every column derives from the id, as in `python_row`."""
    return (
        f"SELECT id, concat('p', CAST(id % 2 AS STRING)) AS part, CAST(id % 7 AS INT) AS small,"
        f" date_add(DATE'2024-01-01', CAST(id % 5 AS INT)) AS day,"
        f" concat('n', CAST(id AS STRING)) AS name FROM range({start}, {stop}, 1, {files})"
    )


def python_row(row_id: int) -> Row:
    """`select_rows`'s row for one id, computed in Python."""
    return {
        "id": row_id,
        "part": f"p{row_id % 2}",
        "small": row_id % 7,
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=row_id % 5),
        "name": f"n{row_id}",
    }


def create_table(spark: JvmSession, path: Path, shape: Shape) -> list[Row]:
    """The shape's table made by Delta Spark, deletion vectors off (dvtool `enable` turns
    them on): ROWS rows in three files per partition value, inserted at once or, when the
    shape alters the table after a first insert (type widening), one file before and two
    after. Returns the rows (Python)."""
    properties = {"delta.enableDeletionVectors": "false", **shape.properties}
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    t = table_ref(path)
    spark.sql(f"CREATE TABLE {t} ({COLUMNS}) USING delta {shape.clause} TBLPROPERTIES ({listed})")
    if shape.after_first_insert:
        spark.sql(f"INSERT INTO {t} {select_rows(0, ROWS // 3)}")
        for statement in shape.after_first_insert:
            spark.sql(statement.format(t=t))
        spark.sql(f"INSERT INTO {t} {select_rows(ROWS // 3, ROWS, 2)}")
    else:
        spark.sql(f"INSERT INTO {t} {select_rows(0, ROWS, 3)}")
    return [python_row(i) for i in range(ROWS)]


# -- dvtool ------------------------------------------------------------------------------------


def dvtool(*args: str | Path) -> str:
    """`dvtool ARGS` in-process through the CLI; it must succeed."""
    result = run(*args)
    assert result.exit_code == 0, result.stdout + result.stderr
    return result.stdout


def verify_clean(path: Path) -> None:
    """`dvtool inspect --verify` finds no problem (exit 0)."""
    dvtool("inspect", path, "--verify")


# -- versions and their rows -------------------------------------------------------------------


def _shadow(path: Path, log: Path, version: int, where: Path) -> Path:
    """A table at `where` whose log holds the JSON commits in `log` up to `version` and
    whose other entries link to `path`'s: the oracle reads it as `path` at `version`."""
    if where.exists():
        shutil.rmtree(where)
    (where / "_delta_log").mkdir(parents=True)
    for entry in path.iterdir():
        if entry.name != "_delta_log":
            (where / entry.name).symlink_to(entry)
    for name in os.listdir(log):
        if int(name[:20]) <= version:
            (where / "_delta_log" / name).symlink_to(log / name)
    return where


def _needed_files(path: Path) -> set[str]:
    """The data and DV files (relative to the table) the replayed version reads."""
    _, live = replay_json(path)
    needed = set()
    for add in live.values():
        needed.add(unquote(add["path"]))
        dv = add.get("deletionVector")
        if dv and dv["storageType"] == "u":
            needed.add(str(dv_file(Path(), dv)))
    return needed


@dataclass
class Timeline:
    """Each version of one table with its rows by the oracle (with `_row_id` and
    `_row_commit_version` on row-tracking tables), the files it reads and its commit's
    operation. `record` copies each new JSON commit to `scratch/log` first, so versions
    stay known after a log cleanup deletes their commits."""

    path: Path
    scratch: Path
    row_tracking: bool
    rows: dict[int, list[Row]] = field(default_factory=dict)
    files: dict[int, set[str]] = field(default_factory=dict)
    operations: dict[int, str] = field(default_factory=dict)
    checked: set[int] = field(default_factory=set)

    @property
    def mirror(self) -> Path:
        return self.scratch / "log"

    @property
    def latest(self) -> int:
        return max(self.rows)

    def record(self) -> list[int]:
        """Record every version not yet known; returns the new versions."""
        self.mirror.mkdir(parents=True, exist_ok=True)
        new = [v for v in commit_versions(self.path) if v not in self.rows]
        for version in new:
            name = f"{version:020d}.json"
            shutil.copyfile(self.path / "_delta_log" / name, self.mirror / name)
        for version in new:
            shadow = _shadow(self.path, self.mirror, version, self.scratch / "shadow")
            self.rows[version] = (row_tracking_rows if self.row_tracking else raw_rows)(shadow)
            self.files[version] = _needed_files(shadow)
            (info,) = (
                a["commitInfo"] for a in commit_actions(shadow, version) if "commitInfo" in a
            )
            self.operations[version] = info["operation"]
        return new

    def logical(self, version: int) -> list[Row]:
        """The version's rows without the row tracking columns."""
        hidden = ("_row_id", "_row_commit_version")
        return [{k: v for k, v in r.items() if k not in hidden} for r in self.rows[version]]

    def retained(self) -> list[int]:
        """The versions a reader can still load: a checkpoint at or before the version and
        every commit after it are in the log, and every file the version reads exists;
        for Delta Spark also committed less than TIME_TRAVEL_RETENTION_S ago (`too_old`)."""
        return [v for v in self.loadable() if not self.too_old(v)]

    def too_old(self, version: int) -> bool:
        """Committed (commit file modified) before Delta Spark's time travel retention."""
        commit = self.path / "_delta_log" / f"{version:020d}.json"
        return commit.exists() and commit.stat().st_mtime < time.time() - TIME_TRAVEL_RETENTION_S

    def loadable(self) -> list[int]:
        """The versions whose log (a checkpoint, then commits) and files are all there."""
        names = os.listdir(self.path / "_delta_log")
        commits = {int(m[1]) for n in names if (m := COMMIT.match(n))}
        checkpoints = {int(m[1]) for n in names if (m := _CHECKPOINT.match(n))}
        out = []
        loadable = False
        for version in sorted(self.rows):
            loadable = version in checkpoints or (version in commits and (loadable or version == 0))
            if loadable and all((self.path / f).exists() for f in self.files[version]):
                out.append(version)
        return out


# -- checks ------------------------------------------------------------------------------------


def check_reads(spark: JvmSession, timeline: Timeline, versions: Sequence[int]) -> None:
    """Checks 1-3 in one Delta Spark query: the current table and `VERSION AS OF n` for
    each of `versions` read the oracle's rows (on row-tracking tables with
    `_metadata.row_id` / `row_commit_version` equal to the oracle's stable values);
    polars and deltalake read the current rows, deltalake each version too."""
    t = table_ref(timeline.path)
    extra = (
        ", _metadata.row_id AS _row_id, _metadata.row_commit_version AS _row_commit_version"
        if timeline.row_tracking
        else ""
    )
    parts = [f"SELECT -1 AS _version, *{extra} FROM {t}"]
    parts += [f"SELECT {v} AS _version, *{extra} FROM {t} VERSION AS OF {v}" for v in versions]
    got: dict[int, list[Row]] = {v: [] for v in (-1, *versions)}
    for row in spark.rows(" UNION ALL ".join(parts)):
        got[row.pop("_version")].append(row)
    assert canon(got[-1]) == canon(timeline.rows[timeline.latest]), "Delta Spark, current"
    check_other_readers(timeline)
    for version in versions:
        assert canon(got[version]) == canon(timeline.rows[version]), f"Delta Spark at {version}"
        lake = refused_or_read(
            functools.partial(deltalake_version, timeline.path, version), timeline.path, DELTALAKE
        )
        assert lake is None or lake == canon(timeline.logical(version)), version
    timeline.checked.update(versions)


@dataclass(frozen=True)
class Reader:
    """Another reader and the reader features it refuses, naming them (its documented
    limits: such a table is refused, never misread)."""

    name: str
    unsupported: frozenset[str]


POLARS = Reader("polars", frozenset({"columnMapping", "typeWidening", "v2Checkpoint"}))
DELTALAKE = Reader("deltalake", frozenset({"typeWidening"}))


def refused_or_read(read: Callable[[], Any], path: Path, reader: Reader) -> Any:
    """`read()`, or None when `reader` refuses the table naming a reader feature it does
    not support. A refusal is checked: the table must have such a feature, the error must
    name it, and a table with one must be refused."""
    protocol = latest_protocol(path)
    features = set(protocol.get("readerFeatures") or [])
    if protocol.get("minReaderVersion") == 2:  # legacy protocol: column mapping, unnamed
        features.add("columnMapping")
    blocked = features & reader.unsupported
    try:
        result = read()
    except Exception as e:
        assert blocked, f"{reader.name} refused the table: {e}"
        said = str(e).lower().replace(" ", "")
        assert any(f.lower() in said for f in blocked), e
        return None
    assert not blocked, f"{reader.name} read a table with {blocked}, which it refuses"
    return result


def polars_rows(path: Path) -> list[Row]:
    rows: list[Row] = pl.read_delta(str(path)).to_dicts()
    return rows


def deltalake_version(path: Path, version: int) -> list[tuple[Any, ...]]:
    """deltalake's rows of `version`, as `deltalake_rows` reads the latest."""
    table = DeltaTable(str(path), version=version)
    result = QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all()
    return canon(pa.table(result).to_pylist())


def check_other_readers(timeline: Timeline) -> None:
    """Check 1 for polars and deltalake: the current rows are the oracle's (or the reader
    refuses the table as it documents, see `refused_or_read`)."""
    want = canon(timeline.logical(timeline.latest))
    polars = refused_or_read(lambda: polars_rows(timeline.path), timeline.path, POLARS)
    assert polars is None or canon(polars) == want, "polars"
    lake = refused_or_read(lambda: deltalake_rows(timeline.path), timeline.path, DELTALAKE)
    assert lake is None or lake == want, "deltalake"


def check_history(spark: JvmSession, timeline: Timeline) -> None:
    """Check 4: DESCRIBE HISTORY lists each commit still in the log with the operation its
    commitInfo (dvtool's or Delta Spark's) names."""
    log = timeline.path / "_delta_log"
    present = {v for v in timeline.operations if (log / f"{v:020d}.json").exists()}
    history = spark.rows(f"DESCRIBE HISTORY {table_ref(timeline.path)}")
    got = {row["version"]: row["operation"] for row in history}
    assert got == {v: timeline.operations[v] for v in present}


def change_data(spark: JvmSession, path: Path, first: int, last: int) -> list[Row]:
    """Delta Spark's change data of versions first..last (`table_changes_by_path`)."""
    return spark.rows(f"SELECT * FROM table_changes_by_path('{path}', {first}, {last})")
