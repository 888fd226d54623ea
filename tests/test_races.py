"""Writers racing on one table, in separate processes, on local disk and on S3 (moto).

Three spawned processes (tests/racers.py) run `delete`, `optimize --purge` and `vacuum` at the
same moment, released by a Barrier: deletes with disjoint and with overlapping predicates,
deletes racing a purge, purges racing purges, a vacuum racing deletes. The S3 backend is the
session's moto server (tests/s3_server.py), whose conditional PUTs are atomic as on S3; the
processes get its endpoint and credentials with their job.

After every race, whatever order the commits landed in:
- the log is contiguous (0..N, no gap, no duplicate); the new versions are exactly those the
  processes report, each claimed once, with the operation of the process that claims it and
  distinct `txnId`s;
- a process either committed (retrying or re-planning as often as it needed) or stopped with
  a `CommitConflictError` whose message is one or two lines;
- the rows polars and deltalake read equal the serial outcome computed here: the original
  rows minus those of every delete that succeeded, so no deleted row comes back after a purge;
- no writer left a file behind: every data and DV file on storage is named by the log.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.racers import Racers
from tests.s3_server import S3Server

COMMIT = re.compile(r"^(\d{20})\.json$")
PROCESSES = 3
RETENTION_S = 5
OPERATIONS = {"delete": ("DELETE",), "purge": ("REORG",), "vacuum": ("VACUUM START", "VACUUM END")}


# -- what runs in the racing processes ------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One command for one process: `kind` is delete, purge or vacuum; `where` for deletes."""

    kind: str
    uri: str
    options: dict[str, str]
    where: str = ""
    delay_s: float = 0.0  # sleep after the barrier: lets the other commands commit first


@dataclass(frozen=True)
class Outcome:
    """What a process did: the versions it committed, or the error that stopped it."""

    job: Job
    versions: tuple[int, ...] = ()
    attempts: int = 1
    error: str | None = None
    error_type: str | None = None
    conflict: bool = False


def prepare(job: Job) -> Callable[[], Outcome]:
    """Open the log (outside the race), return the command to run when released."""
    from dvtool.delta.log.reader import open_log

    log = open_log(job.uri, job.options)
    log.snapshot()

    def run() -> Outcome:
        from dvtool.errors import CommitConflictError, DvtoolError

        time.sleep(job.delay_s)
        try:
            return _run(job, log)
        except DvtoolError as e:
            conflict = isinstance(e, CommitConflictError)
            return Outcome(job, error=str(e), error_type=type(e).__name__, conflict=conflict)

    return run


def _run(job: Job, log: Any) -> Outcome:
    """Run the command of `job` on the opened `log`; DvtoolErrors propagate."""
    from dvtool.commands.delete.command import DeleteRequest, run_delete
    from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
    from dvtool.commands.vacuum.command import VacuumRequest, run_vacuum
    from dvtool.engines.arrow import ArrowEngine

    if job.kind == "delete":
        deleted = run_delete(log, DeleteRequest(job.where))
        versions = () if deleted.version is None else (deleted.version,)
        return Outcome(job, versions, deleted.attempts)
    if job.kind == "purge":
        purged = run_optimize(log, OptimizeRequest(purge=True), lambda _: ArrowEngine())
        return Outcome(job, tuple(purged.versions))
    vacuumed = run_vacuum(log, VacuumRequest())
    assert vacuumed.start_version is not None and vacuumed.end_version is not None
    return Outcome(job, (vacuumed.start_version, vacuumed.end_version))


# -- tables on either backend ---------------------------------------------------------------


@dataclass
class RaceTable:
    """A table on local disk (`s3` None) or under `prefix` on the moto server."""

    uri: str
    ids: list[int]
    s3: S3Server | None = None
    prefix: str = ""
    deleted: set[int] = field(default_factory=set)
    mark: int = 0  # requests the S3 server had answered when the race started

    @property
    def options(self) -> dict[str, str]:
        """dvtool's storage options for this table: what a racing process needs to open it."""
        return self.s3.storage_options() if self.s3 else {}

    def job(self, kind: str, where: str = "", delay_s: float = 0.0) -> Job:
        """A command on this table for one racing process."""
        return Job(kind, self.uri, self.options, where, delay_s)

    def names(self, under: str = "") -> list[str]:
        """Every file under the table (or its directory `under`), relative to it."""
        if self.s3:
            return self.s3.keys(f"{self.prefix}/{under}".rstrip("/"))
        base = Path(self.uri) / under
        return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())

    def versions(self) -> list[int]:
        """The versions of the JSON commits on storage, ascending (duplicates impossible)."""
        return sorted(int(m[1]) for name in self.names("_delta_log") if (m := COMMIT.match(name)))

    def commit(self, version: int) -> list[dict[str, Any]]:
        """The actions of commit `version`, read straight from storage."""
        name = f"_delta_log/{version:020d}.json"
        if self.s3:
            body = self.s3.client().get_object(Bucket=self.s3.bucket, Key=f"{self.prefix}/{name}")
            text = body["Body"].read().decode()
        else:
            text = (Path(self.uri) / name).read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def read_ids(self) -> list[int]:
        """The `id`s polars and deltalake read, sorted; the two must agree."""
        import polars as pl
        import pyarrow as pa
        from deltalake import DeltaTable, QueryBuilder

        options = self.s3.delta_options() if self.s3 else None
        by_polars = sorted(pl.read_delta(self.uri, storage_options=options)["id"].to_list())
        table = DeltaTable(self.uri, storage_options=options)
        reader = QueryBuilder().register("t", table).execute("select id from t")
        by_deltalake = sorted(pa.table(reader.read_all()).column("id").to_pylist())
        assert by_polars == by_deltalake
        return by_polars


def mod(m: int, r: int) -> tuple[str, Callable[[int], bool]]:
    """A delete predicate as SQL and as the Python function the expected rows use."""
    return f"id % {m} = {r}", lambda i: i % m == r


def below(n: int) -> tuple[str, Callable[[int], bool]]:
    """`id < n` as SQL and as Python."""
    return f"id < {n}", lambda i: i < n


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest) -> S3Server | None:
    """None for local disk, else the session's moto server."""
    if request.param == "local":
        return None
    server: S3Server = request.getfixturevalue("s3_server")
    return server


@pytest.fixture(scope="module")
def racers() -> Iterator[Racers]:
    """One pool of processes for every race of this module, on both backends."""
    with Racers(PROCESSES, prepare) as pool:
        yield pool


@pytest.fixture
def make_table(
    backend: S3Server | None, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[..., RaceTable]:
    """`make_table(name, dv_where=None, purge=False, **deltalake options)`: 3 files of 40
    rows with DVs enabled, written and prepared on local disk, then uploaded for S3."""

    def make(
        name: str,
        dv_where: tuple[str, Callable[[int], bool]] | None = None,
        purge: bool = False,
        **kwargs: Any,
    ) -> RaceTable:
        import pyarrow as pa
        from deltalake import write_deltalake

        from dvtool.commands.delete.command import DeleteRequest, run_delete
        from dvtool.commands.enable import run_enable
        from dvtool.commands.optimize.command import OptimizeRequest, run_optimize
        from dvtool.delta.log.reader import open_log
        from dvtool.engines.arrow import ArrowEngine

        local = tmp_path / name
        ids = list(range(120))
        for k in range(3):
            chunk = pa.array(ids[k * 40 : (k + 1) * 40], pa.int64())
            write_deltalake(str(local), pa.table({"id": chunk}), mode="append", **kwargs)
        run_enable(open_log(str(local)))
        deleted: set[int] = set()
        if dv_where is not None:
            run_delete(open_log(str(local)), DeleteRequest(dv_where[0]))
            deleted = {i for i in ids if dv_where[1](i)}
        if purge:
            run_optimize(open_log(str(local)), OptimizeRequest(purge=True), lambda _: ArrowEngine())
        if backend is None:
            return RaceTable(str(local), ids, deleted=deleted)
        # No brackets in keys: delta-kernel percent-encodes them and then misses the files.
        prefix = f"races/{re.sub(r'[^A-Za-z0-9_-]', '-', request.node.name)}/{name}"
        return RaceTable(backend.upload(local, prefix), ids, backend, prefix, deleted)

    return make


# -- the checks every race ends with --------------------------------------------------------


def check_race(
    table: RaceTable,
    start: int,
    outcomes: list[Outcome],
    predicates: dict[str, Callable[[int], bool]],
) -> list[int]:
    """The checks of the module docstring; returns the expected (and read) ids."""
    versions = table.versions()
    assert versions == list(range(len(versions))), f"gap or duplicate: {versions}"
    claimed = [v for o in outcomes for v in o.versions]
    assert sorted(claimed) == list(range(start + 1, versions[-1] + 1)), (versions, outcomes)
    txn_ids = []
    for outcome in outcomes:
        for version in outcome.versions:
            infos = [a["commitInfo"] for a in table.commit(version) if "commitInfo" in a]
            assert len(infos) == 1 and infos[0]["operation"] in OPERATIONS[outcome.job.kind]
            txn_ids.append(infos[0]["txnId"])
    assert len(set(txn_ids)) == len(txn_ids)
    for outcome in outcomes:
        if outcome.error is not None:
            assert outcome.conflict, outcome
            assert 0 < len(outcome.error.strip().splitlines()) <= 2, outcome.error
    succeeded = [
        predicates[o.job.where] for o in outcomes if o.job.kind == "delete" and not o.error
    ]
    gone = table.deleted | {i for i in table.ids for matches in succeeded if matches(i)}
    expected = [i for i in table.ids if i not in gone]
    assert table.read_ids() == expected, outcomes
    check_no_orphans(table)
    if table.s3:
        check_conditional_puts(table, outcomes, versions[-1] - start)
    return expected


def check_conditional_puts(table: RaceTable, outcomes: list[Outcome], commits: int) -> None:
    """On S3 every commit was a conditional PUT, one succeeded per new version, and S3
    refused (412) at least one PUT for each lost race that made a process re-plan or stop."""
    assert table.s3 is not None
    log = f"{table.prefix}/_delta_log/"
    puts = [
        r
        for r in table.s3.requests()[table.mark :]
        if r.method == "PUT" and r.key.startswith(log) and COMMIT.match(r.key[len(log) :])
    ]
    assert all(r.if_none_match == "*" for r in puts), puts
    assert sum(r.status == 200 for r in puts) == commits
    lost = sum(o.attempts - 1 + o.conflict for o in outcomes)
    assert sum(r.status == 412 for r in puts) >= lost, (puts, outcomes)


def check_no_orphans(table: RaceTable) -> None:
    """Every data and DV file on storage is named by some commit: losers cleaned up."""
    from tests.oracles import z85_uuid

    named = set()
    for version in table.versions():
        for action in table.commit(version):
            body = action.get("add") or action.get("remove") or {}
            if "path" in body:
                named.add(body["path"])
            dv = body.get("deletionVector")
            if dv and dv["storageType"] == "u":
                folder, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
                dv_name = f"deletion_vector_{z85_uuid(encoded)}.bin"
                named.add(f"{folder}/{dv_name}" if folder else dv_name)
    stored = {n for n in table.names() if not n.startswith("_delta_log/")}
    assert stored <= named, f"files no commit names: {sorted(stored - named)}"


def live_files(table: RaceTable) -> set[str]:
    """The paths of the live data files, replayed from the JSON commits."""
    live: set[str] = set()
    for version in table.versions():
        for action in table.commit(version):
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
    return live


def race(racers: Racers, table: RaceTable, jobs: list[Job]) -> tuple[int, list[Outcome]]:
    """Run the jobs at once; (the version before the race, the outcomes)."""
    start = table.versions()[-1]
    if table.s3:
        table.mark = len(table.s3.requests())
    outcomes: list[Outcome] = racers.race(jobs)
    return start, outcomes


# -- the races ------------------------------------------------------------------------------


def test_disjoint_deletes_all_commit(racers: Racers, make_table: Callable[..., RaceTable]) -> None:
    table = make_table("t")
    predicates = dict(mod(4, r) for r in range(3))
    start, outcomes = race(racers, table, [table.job("delete", w) for w in predicates])

    assert all(o.error is None and len(o.versions) == 1 for o in outcomes), outcomes
    expected = check_race(table, start, outcomes, predicates)
    assert expected == [i for i in table.ids if i % 4 == 3]


@pytest.mark.parametrize("round_", range(2))
def test_overlapping_deletes_delete_each_row_once(
    racers: Racers, make_table: Callable[..., RaceTable], round_: int
) -> None:
    table = make_table("t")
    predicates = dict([mod(2, round_), mod(3, round_), below(40 + 20 * round_)])
    start, outcomes = race(racers, table, [table.job("delete", w) for w in predicates])

    expected = check_race(table, start, outcomes, predicates)
    deleted_rows = [
        int(info["operationMetrics"]["numDeletedRows"])
        for o in outcomes
        for v in o.versions
        for info in [a["commitInfo"] for a in table.commit(v) if "commitInfo" in a]
    ]
    assert sum(deleted_rows) == len(table.ids) - len(expected), "a row counted twice"
    print("attempts:", [(o.job.where, o.attempts, o.error_type) for o in outcomes])


@pytest.mark.parametrize("round_", range(2))
def test_deletes_racing_a_purge_never_resurrect_rows(
    racers: Racers, make_table: Callable[..., RaceTable], round_: int
) -> None:
    table = make_table("t", dv_where=mod(7, 0))
    predicates = dict([mod(5, round_), mod(5, round_ + 1)])
    delay_s = 0.5 * round_  # the purge (slower) commits first in some rounds
    jobs = [table.job("delete", w, delay_s) for w in predicates]
    jobs.insert(round_, table.job("purge"))
    start, outcomes = race(racers, table, jobs)

    check_race(table, start, outcomes, predicates)
    assert any(o.versions for o in outcomes)
    print("outcomes:", [(o.job.kind, o.versions, o.attempts, o.error) for o in outcomes])


def test_racing_purges_commit_one_rewrite(
    racers: Racers, make_table: Callable[..., RaceTable]
) -> None:
    table = make_table("t", dv_where=mod(3, 1))
    start, outcomes = race(racers, table, [table.job("purge")] * PROCESSES)

    check_race(table, start, outcomes, {})
    assert sum(len(o.versions) for o in outcomes) == 1, outcomes
    added = [a["add"] for a in table.commit(start + 1) if "add" in a]
    assert added and not any(a.get("deletionVector") for a in added)


def test_vacuum_racing_deletes_keeps_every_file_they_commit(
    racers: Racers, make_table: Callable[..., RaceTable]
) -> None:
    """Files the purge removed before the race are past the table's retention of a few
    seconds; the deletes write DV files during the race, which vacuum must not take."""
    retention = {"delta.deletedFileRetentionDuration": f"interval {RETENTION_S} seconds"}
    table = make_table("t", dv_where=mod(7, 0), purge=True, configuration=retention)
    live = live_files(table)
    garbage = {n for n in table.names() if not n.startswith("_delta_log/")} - live
    assert len(garbage) == 4  # the 3 files the purge rewrote and their DV file
    time.sleep(RETENTION_S + 1.5)  # S3 keeps modification times to the second
    predicates = dict([mod(5, 0), mod(5, 1)])
    jobs = [table.job("vacuum"), *(table.job("delete", w) for w in predicates)]
    start, outcomes = race(racers, table, jobs)

    assert all(o.error is None for o in outcomes), outcomes
    check_race(table, start, outcomes, predicates)
    stored = set(table.names())
    assert live <= stored and not garbage & stored
    dv_files = [n for n in stored if os.path.basename(n).startswith("deletion_vector_")]
    assert len(dv_files) == 2  # one per racing delete
