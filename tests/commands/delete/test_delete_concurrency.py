"""Concurrent `dvtool delete` (and `enable`) processes on one local table.

Each process is started with the spawn method, prepares everything (imports, opening the
log), then waits on a shared Barrier so the deletes really race. Afterwards the log must be
contiguous with one commit per process, and the rows polars and deltalake read must be the
original rows minus exactly the union of what every process deleted, whatever order the
commits landed in.

Heavy libraries are imported inside the functions so the spawned children start quickly.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from tests.racers import Racers

COMMIT = re.compile(r"^(\d{20})\.json$")
ROUNDS = 8


def _run_job(job: tuple[Any, ...]) -> tuple[Any, ...]:
    """Prepare `job` (imports, snapshot), return a callable that runs it."""
    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.commands.enable import run_enable
    from dvtool.delta.log.reader import open_log

    kind, table, *args = job
    log = open_log(table)
    log.snapshot()  # warm up: the race starts at the barrier

    def run() -> tuple[Any, ...]:
        if kind == "enable":
            result = run_enable(log)
            return ("ok", "enable", result.version, 1, "")
        where, mode, *delay = args
        if delay:
            time.sleep(delay[0])  # lets the other process commit first, in some rounds
        deleted = run_delete(log, DeleteRequest(where, mode))
        return ("ok", where, deleted.version, deleted.attempts, deleted.mode)

    return run  # type: ignore[return-value]


def _versions(table: Path) -> list[int]:
    names = os.listdir(table / "_delta_log")
    return sorted(int(m[1]) for f in names if (m := COMMIT.match(f)))


def _make_table(path: Path, files: int, rows_per_file: int, enable: bool = True) -> list[int]:
    import pyarrow as pa
    from deltalake import write_deltalake

    from dvtool.commands.enable import run_enable
    from dvtool.delta.log.reader import open_log

    ids = list(range(files * rows_per_file))
    for k in range(files):
        chunk = ids[k * rows_per_file : (k + 1) * rows_per_file]
        data = pa.table({"id": pa.array(chunk, pa.int64()), "v": [f"v{i}" for i in chunk]})
        write_deltalake(str(path), data, mode="append")
    if enable:
        run_enable(open_log(str(path)))
    return ids


def _read_ids(table: Path) -> tuple[list[int], list[int]]:
    """(polars ids, deltalake ids), sorted, duplicates kept."""
    import polars as pl
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    by_polars = sorted(pl.read_delta(str(table))["id"].to_list())
    result = QueryBuilder().register("t", DeltaTable(str(table))).execute("select id from t")
    by_deltalake = sorted(pa.table(result.read_all()).column("id").to_pylist())
    return by_polars, by_deltalake


def test_disjoint_concurrent_deletes_all_land(tmp_path: Path) -> None:
    table = tmp_path / "t"
    ids = _make_table(table, files=8, rows_per_file=25)
    first = _versions(table)
    assert first == list(range(first[-1] + 1))
    jobs = [("delete", str(table), f"id % 5 = {k}", "auto") for k in range(4)]

    with Racers(4, _run_job) as racers:
        results = racers.race(jobs)

    versions = _versions(table)
    assert versions == list(range(first[-1] + 5)), "one commit per process, no gaps"
    committed = sorted(r[2] for r in results)
    assert committed == list(range(first[-1] + 1, first[-1] + 5))
    assert {r[4] for r in results} == {"dv"}
    expected = [i for i in ids if i % 5 == 4]
    by_polars, by_deltalake = _read_ids(table)
    assert by_polars == expected
    assert by_deltalake == expected
    # Every commit is a DELETE that read the version before some other commit or its own.
    for version in committed:
        text = (table / "_delta_log" / f"{version:020d}.json").read_text()
        infos = [
            json.loads(line)["commitInfo"] for line in text.splitlines() if "commitInfo" in line
        ]
        assert infos and infos[0]["operation"] == "DELETE"
        assert infos[0].get("readVersion", 0) < version


def test_copy_on_write_racing_a_dv_delete_never_resurrects_rows(tmp_path: Path) -> None:
    orders = []
    with Racers(2, _run_job) as racers:
        for round_ in range(ROUNDS):
            table = tmp_path / f"t{round_}"
            ids = _make_table(table, files=2, rows_per_file=60)
            start = _versions(table)[-1]
            cow_where, dv_where = f"id % 3 = {round_ % 3}", f"id % 4 = {round_ % 4}"
            dv_delay = 0.1 * (round_ % 4 == 3)  # and a few ms in between: both orders happen
            jobs = [
                ("delete", str(table), cow_where, "cow", 0.0),
                ("delete", str(table), dv_where, "dv", dv_delay),
            ]
            if round_ % 2:
                jobs.reverse()

            results = racers.race(jobs)

            by_where = {r[1]: r for r in results}
            assert by_where[cow_where][4] == "cow" and by_where[dv_where][4] == "dv"
            assert sorted(r[2] for r in results) == [start + 1, start + 2]
            assert _versions(table) == list(range(start + 3))
            orders.append("cow first" if by_where[cow_where][2] == start + 1 else "dv first")
            expected = [i for i in ids if i % 3 != round_ % 3 and i % 4 != round_ % 4]
            by_polars, by_deltalake = _read_ids(table)
            assert by_polars == expected, (round_, results)
            assert by_deltalake == expected, (round_, results)
    # Either order may win a round; whichever does, no row comes back.
    print("commit orders:", orders)


def test_concurrent_enables_commit_once(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _make_table(table, files=2, rows_per_file=10, enable=False)
    start = _versions(table)[-1]
    with Racers(3, _run_job) as racers:
        results = racers.race([("enable", str(table))] * 3)
    assert _versions(table) == list(range(start + 2))
    assert sorted((r[2] is None, r[2]) for r in results) == [
        (False, start + 1),
        (True, None),
        (True, None),
    ]
