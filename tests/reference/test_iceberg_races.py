"""dvtool's Iceberg deletes racing each other and Iceberg Spark's writers, really concurrently.

Spawned processes (tests/racers.py) each run `dvtool delete` (the command's function, the
table opened before the race), released by one Barrier:

- through a catalog (`test_deletes_race_iceberg_spark`): two dvtool processes and, in a
  thread of the test released with them, an Iceberg Spark statement on the same table
  (format version 2 and 3, in the JdbcCatalog on SQLite of the `iceberg_sql_catalog`
  fixture, which both open by name), for several rounds, Spark's statement being in turn a
  merge-on-read DELETE, an INSERT and a `rewrite_data_files` of every file (once with
  dvtool's deletes started late, so that they planned on the files the compaction
  removes). The predicates overlap each other and Spark's DELETE (some rows match two);
- on a path table on local disk (`test_deletes_race_each_other_on_a_path_table`): three
  dvtool processes (put-if-absent of `vN.metadata.json`). Iceberg Spark does not race
  there: Iceberg Java commits a Hadoop table by checking that `vN.metadata.json` is absent
  and then renaming its file to that name, and on a local (or object store) file system
  the rename replaces a file created in between: an earlier version of this test saw
  Spark's INSERT replace the `v18.metadata.json` a dvtool delete had just created, and
  the delete was lost. Concurrent writers of other engines need a catalog.

After every round, whatever order the commits landed in:

- every dvtool run either committed its snapshot (retrying or planning again as often as
  it needed) or failed with `CommitConflictError`'s exit code;
- the rows Iceberg Spark reads, and every oracle with it (pyiceberg, DuckDB, polars), are
  the serial outcome computed here: the rows before the round minus those of every delete
  that reported success (dvtool's and Spark's), plus Spark's inserts (ids the predicates
  never match). So no delete is lost and no deleted row comes back after a compaction;
- `dvtool inspect --verify` finds nothing wrong, and on v3 no data file has two DVs
  (Iceberg Spark's `delete_files`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from tests.racers import Racers

NAMESPACE = "dvraces"
# Inserted rows have ids from here on: no predicate of the rounds matches them.
INSERTED_FROM = 1000
Row = dict[str, Any]


# -- what runs in the racing processes ------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One dvtool delete: the table (a folder, or `namespace.table` of `catalog`, which
    the process finds configured in its environment), the predicate (SQL)."""

    table: str
    where: str
    catalog: str | None = None
    delay_s: float = 0.0  # sleep after the barrier: lets Spark's statement commit first


@dataclass(frozen=True)
class Outcome:
    """What a delete did: its snapshot (None when it committed nothing) or its error."""

    job: Job
    snapshot_id: int | None = None
    deleted_rows: int = 0
    plans: int = 1
    retries: int = 0
    exit_code: int = 0
    error: str | None = None


def prepare(job: Job) -> Callable[[], Outcome]:
    """Open the table (outside the race); return the delete to run when released."""
    from dvtool.commands.delete.command import DeleteRequest
    from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage
    from dvtool.engines.arrow import ArrowEngine
    from dvtool.errors import DvtoolError
    from dvtool.iceberg.tables import open_iceberg

    table = open_iceberg(job.table, {}, job.catalog)

    def run() -> Outcome:
        time.sleep(job.delay_s)
        try:
            result = run_delete_iceberg(
                table, DeleteRequest(job.where), scan_storage(table, {}), ArrowEngine()
            )
        except DvtoolError as error:
            return Outcome(job, exit_code=error.exit_code, error=str(error))
        deleted = int(result.metrics["numDeletedRows"])
        return Outcome(job, result.snapshot_id, deleted, result.attempts, result.retries)

    return run


# -- the rounds -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """The dvtool predicates (as SQL and as Python) and Spark's statement (`{t}` the
    table; `{n}` its identifier and `{c}` its catalog, for CALLs), with the rows it
    deletes (`removes`) or inserts (`inserts`)."""

    dvtool: tuple[tuple[str, Callable[[Row], bool]], ...]
    spark: str  # "" for none
    removes: Callable[[Row], bool] | None = None
    inserts: tuple[Row, ...] = ()
    delay_s: float = 0.0  # dvtool's deletes start later (on the base they opened before)


def _mod(k: int, r: int) -> tuple[str, Callable[[Row], bool]]:
    sql = f"id % {k} = {r} AND id < {INSERTED_FROM}"
    return sql, lambda row: bool(row["id"] % k == r and row["id"] < INSERTED_FROM)


def _new_rows(first: int) -> tuple[Row, ...]:
    import datetime as dt

    return tuple(
        {"id": i, "cat": "abc"[i % 3], "d": dt.date(2024, 1, 1 + i % 4), "v": i}
        for i in range(first, first + 6)
    )


def _values(rows: tuple[Row, ...]) -> str:
    return ", ".join(f"({r['id']}, '{r['cat']}', DATE'{r['d']}', {r['v']})" for r in rows)


def _rounds() -> tuple[Round, ...]:
    first, second = _new_rows(INSERTED_FROM), _new_rows(INSERTED_FROM + 10)
    spark_delete = _mod(11, 4)
    return (
        Round(
            (_mod(6, 1), _mod(4, 1)), f"DELETE FROM {{t}} WHERE {spark_delete[0]}", spark_delete[1]
        ),
        Round(
            (_mod(6, 2), _mod(5, 2)), f"INSERT INTO {{t}} VALUES {_values(first)}", inserts=first
        ),
        Round(
            (_mod(6, 3), _mod(9, 3)),
            "CALL {c}.system.rewrite_data_files(table => '{n}', "
            "options => map('rewrite-all', 'true'))",
        ),
        # The compaction commits first (mostly): the deletes, planned on the files it
        # removed, must plan again on the new ones.
        Round(
            (_mod(6, 4), _mod(7, 3)),
            "CALL {c}.system.rewrite_data_files(table => '{n}', "
            "options => map('rewrite-all', 'true'))",
            delay_s=3.0,
        ),
        Round(
            (_mod(8, 6), _mod(6, 5)), f"DELETE FROM {{t}} WHERE {_mod(10, 5)[0]}", _mod(10, 5)[1]
        ),
        Round(
            (_mod(10, 0), _mod(3, 0)), f"INSERT INTO {{t}} VALUES {_values(second)}", inserts=second
        ),
    )


@dataclass
class SparkSide:
    """Spark's statement of a round, run in a thread of the test released with the racers."""

    ok: bool = False
    error: str | None = None


def _spark_in_thread(racers: Racers, session: Any, sql: str) -> tuple[threading.Thread, SparkSide]:
    side = SparkSide()

    def work() -> None:
        racers.release()
        try:
            session.sql(sql)
            side.ok = True
        except Exception as error:  # a conflict Spark gave up on: nothing of it landed
            side.error = str(error).splitlines()[0] if str(error) else type(error).__name__

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, side


def _play(
    session: Any,
    rounds: tuple[Round, ...],
    racers: Racers,
    jobs: Callable[[Round], list[Job]],
    spark_name: str,
    read: Callable[[], Any],
    inspect_args: list[str],
    rows: dict[int, Row],
) -> list[str]:
    """Race each round, check the outcome (see the module docstring); a line per round."""
    from dvtool.errors import CommitConflictError
    from tests.reference.iceberg_state import agreed_rows
    from tests.reference.iceberg_writes import cli_json

    seen: list[str] = []
    for number, round_ in enumerate(rounds):
        session.sql(f"REFRESH TABLE {spark_name}")
        thread, spark = (
            _spark_in_thread(racers, session, round_.spark) if round_.spark else (None, SparkSide())
        )
        started = time.monotonic()
        outcomes = racers.race(jobs(round_))
        if thread is not None:
            thread.join(timeout=120)
            assert not thread.is_alive(), "Spark's statement did not finish"
        seen.append(_summary(number, outcomes, spark, time.monotonic() - started))
        matchers = dict(round_.dvtool)
        for outcome in outcomes:
            assert outcome.error is None or outcome.exit_code == CommitConflictError.exit_code, (
                outcome
            )
            if outcome.error is None:
                # nothing left to delete (the other racer took it) commits nothing
                assert outcome.snapshot_id is not None or outcome.deleted_rows == 0, outcome
                rows = {i: r for i, r in rows.items() if not matchers[outcome.job.where](r)}
        if spark.ok and round_.removes is not None:
            rows = {i: r for i, r in rows.items() if not round_.removes(r)}
        if spark.ok:
            rows.update({r["id"]: r for r in round_.inserts})
        else:  # only a DELETE or a compaction may give up on a conflict
            assert not round_.inserts, spark.error
        expected = [rows[i] for i in sorted(rows)]
        assert agreed_rows(session, read(), spark_name) == expected, "\n".join(seen)
        doc = cli_json("inspect", *inspect_args, "--verify")
        assert doc["verify"]["problems"] == [], doc["verify"]
        _one_dv_per_data_file(session, spark_name)
    return seen


@pytest.mark.parametrize("version", [2, 3])
def test_deletes_race_iceberg_spark(
    version: int,
    iceberg_sql_catalog: Any,
    iceberg_spark: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.utils.config import Config

    from tests.reference.iceberg_catalogs import build_in_catalog
    from tests.reference.iceberg_tables import STEPS, TableSpec, expected_rows

    catalog = iceberg_sql_catalog
    for key, value in catalog.properties.items():  # for the racers too (spawned after this)
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{catalog.name.upper()}__{key.upper()}", value)
    monkeypatch.setattr("pyiceberg.catalog._ENV_CONFIG", Config())
    spec = TableSpec(f"race_v{version}", version, "cat, bucket(3, id)", STEPS)
    identifier, _ = build_in_catalog(iceberg_spark, catalog.name, spec)
    spark_name = f"{catalog.name}.{identifier}"
    rounds = tuple(
        replace(r, spark=r.spark.format(t=spark_name, n=identifier, c=catalog.name))
        for r in _rounds()
    )

    def jobs(round_: Round) -> list[Job]:
        return [Job(identifier, where, catalog.name, round_.delay_s) for where, _ in round_.dvtool]

    def read() -> Any:
        return load_catalog(catalog.name, **catalog.properties).load_table(identifier)

    rows = {r["id"]: r for r in expected_rows(spec)}
    with Racers(2, prepare, also_here=True) as racers:
        args = ["--catalog", catalog.name, identifier]
        seen = _play(iceberg_spark, rounds, racers, jobs, spark_name, read, args, rows)
    print("\n".join(seen))


def test_deletes_race_each_other_on_a_path_table(
    iceberg_tables: dict[str, Any], iceberg_spark: Any
) -> None:
    from tests.reference.iceberg_writes import copy_into_catalog

    entry = iceberg_tables["v3_part"]
    folder, spark_name = copy_into_catalog(iceberg_spark, entry, NAMESPACE, "v3_part_race")
    rounds = (
        Round((_mod(6, 1), _mod(4, 1), _mod(5, 1)), ""),
        Round((_mod(6, 2), _mod(9, 2), _mod(8, 6)), ""),
    )

    def jobs(round_: Round) -> list[Job]:
        return [Job(str(folder), where) for where, _ in round_.dvtool]

    rows = {r["id"]: r for r in entry["expected"]}
    with Racers(3, prepare) as racers:
        seen = _play(
            iceberg_spark, rounds, racers, jobs, spark_name, lambda: folder, [str(folder)], rows
        )
    print("\n".join(seen))


def _one_dv_per_data_file(session: Any, table: str) -> None:
    """No data file has two deletion vectors (none on v2 tables)."""
    live = session.rows(
        f"SELECT referenced_data_file AS target FROM {table}.delete_files "
        "WHERE file_format = 'PUFFIN'"
    )
    targets = [r["target"] for r in live]
    assert len(targets) == len(set(targets)), targets


def _summary(number: int, outcomes: list[Outcome], spark: SparkSide, seconds: float) -> str:
    dvtool = "; ".join(
        f"{o.job.where.split(' AND ')[0]}: "
        + (
            f"{o.deleted_rows} rows, plans {o.plans}, retries {o.retries}"
            if o.error is None
            else "conflict"
        )
        for o in outcomes
    )
    return f"round {number} ({seconds:.1f}s): {dvtool}; spark {'ok' if spark.ok else spark.error}"
