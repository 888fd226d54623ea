"""Hostile and broken input: every case of cases.py is refused cleanly, and the inputs that
look hostile but are valid are read correctly.

For each refused case, each command must exit with the code of the error class (never 0,
never 70, the internal-error code), name the offending file or argument, print no
traceback, and leave the case directory (the table and `outside/` beside it) byte-for-byte
unchanged. Vacuum's own corpus of paths outside the root is tests/commands/
test_vacuum_safety.py; here paths are checked for the commands that read, rewrite or
remove files (inspect, delete, optimize, downgrade, generate-manifest).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
import s3fs
from click.testing import CliRunner, Result

from dvtool.cli import INTERNAL_ERROR_EXIT, cli
from tests.hostile.cases import (
    CASES,
    DELETE_VERSION,
    HostileCase,
    Scene,
    build_base_table,
    commit_name,
)
from tests.oracles import canon, copy_golden, raw_rows, tree_hashes
from tests.s3_server import S3Server

WIDE = {"COLUMNS": "2000"}  # no wrapping of long names in rendered tables


def run_cli(*argv: str) -> Result:
    return CliRunner(env=WIDE).invoke(cli, list(argv))


def inspect_json(table: Path, *options: str) -> dict[str, Any]:
    result = run_cli("inspect", str(table), "--json", *options)
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.fixture(scope="session")
def base_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus's base table, built once; cases work on copies."""
    return build_base_table(tmp_path_factory.mktemp("hostile-base"))


@pytest.fixture
def moto_endpoint(s3_server: S3Server) -> str:
    """The endpoint of the session's moto S3 server on 127.0.0.1 (tests/s3_server.py)."""
    return s3_server.endpoint


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials anywhere botocore looks, no instance metadata (which would leave
    127.0.0.1), and one attempt per request so unreachable endpoints fail fast."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    # As in a fresh dvtool process: no S3 filesystem cached (with credentials) by other tests.
    s3fs.S3FileSystem.clear_instance_cache()


def _scene(case: HostileCase, base: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Scene:
    root = tmp_path / "case"
    root.mkdir()
    if case.golden is not None:
        table = copy_golden(case.golden, root)
    else:
        table = root / "table"
        shutil.copytree(base, table)
    scene = Scene(root, table)
    if case.s3:
        scene.closed_port = _free_port()
        if any("{endpoint}" in arg for argv in case.refused for arg in argv):
            scene.endpoint = request.getfixturevalue("moto_endpoint")
    return scene


def _assert_refused(result: Result, case: HostileCase, names: tuple[str, ...]) -> None:
    output = result.output
    assert result.exit_code == case.exit_code, output
    assert result.exit_code not in (0, INTERNAL_ERROR_EXIT), output
    assert "Traceback" not in output and "internal error" not in output, output
    assert result.exception is None or isinstance(result.exception, SystemExit), output
    for name in names:
        assert name in output, f"{name!r} is not named in: {output}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_input_is_refused(
    case: HostileCase,
    base_table: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if case.s3:
        _no_aws_credentials(monkeypatch, tmp_path)
    scene = _scene(case, base_table, tmp_path, request)
    names = case.build(scene)
    before = tree_hashes(scene.root)
    values = scene.values()
    for argv in case.refused:
        _assert_refused(run_cli(*(arg.format(**values) for arg in argv)), case, names)
    for argv in case.still_reads:
        result = run_cli(*(arg.format(**values) for arg in argv))
        assert result.exit_code == 0, result.output
    assert tree_hashes(scene.root) == before


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 45
    assert len({c.id for c in CASES}) == len(CASES)


# -- hostile-looking input that is valid and must be read correctly --------------------------


@pytest.mark.parametrize(
    "hint",
    [b'{"version":44,"size":3}', b'{"version":99,"size":3}', b"\0\0\0garbage"],
    ids=["missing-checkpoint", "beyond-latest-version", "garbage"],
)
def test_stale_last_checkpoint_falls_back_to_listing(tmp_path: Path, hint: bytes) -> None:
    """`_last_checkpoint` is only a hint: pointing at a checkpoint that does not exist, or
    unreadable, it must not fail the read or change the result (PROTOCOL.md, Last
    Checkpoint File). Every commit is still there, so the raw JSON replay is the oracle."""
    table = copy_golden("basic-dv-with-checkpoint", tmp_path)
    (table / "_delta_log" / "_last_checkpoint").write_bytes(hint)
    before = tree_hashes(table)
    doc = inspect_json(table)
    assert doc["version"] == 46
    assert doc["logical_rows"] == len(raw_rows(table)) == 454
    assert tree_hashes(table) == before


def test_multipart_checkpoint_missing_a_part_is_skipped(tmp_path: Path) -> None:
    """A multi-part checkpoint with a part missing is incomplete and must be ignored
    (PROTOCOL.md, Checkpoints); the commits it would replace are all present, so the table
    is rebuilt from them. (With those commits cleaned up too, the read fails naming the
    missing part: case `log-multipart-checkpoint-missing-part`.)"""
    table = copy_golden("v1-multi-part-partitioned-struct-stats-only", tmp_path)
    log = table / "_delta_log"
    (log / "00000000000000000005.checkpoint.0000000002.0000000003.parquet").unlink()
    doc = inspect_json(table)
    assert doc["version"] == 5
    assert doc["logical_rows"] == len(raw_rows(table)) == 5


def _set_checkpoint_interval(scene: Scene, interval: int) -> None:
    actions = scene.actions(3)
    for action in actions:
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.checkpointInterval"] = str(interval)
    scene.write_actions(3, actions)


def test_unknown_fields_and_action_types_are_preserved(base_table: Path, tmp_path: Path) -> None:
    """Unknown fields and action types must be ignored by readers, never rejected
    (PROTOCOL.md, Protocol Evolution). dvtool also keeps unknown add/remove fields: in the
    adds it writes back, and in the checkpoints it writes (typed columns inside the `add`
    struct, read here with pyarrow), so that the fields survive a checkpoint. Unknown action
    types stay in the commits that hold them; like Delta Spark, dvtool does not copy them
    into checkpoints (nothing in the protocol may depend on them)."""
    table = tmp_path / "table"
    shutil.copytree(base_table, table)
    scene = Scene(tmp_path, table)
    _set_checkpoint_interval(scene, 5)
    actions = scene.actions(DELETE_VERSION)
    for action in actions:
        if "add" in action:
            action["add"]["futureField"] = {"nested": [1, 2]}
            action["add"]["futureFlag"] = True
        if "remove" in action:
            action["remove"]["futureRemoveField"] = "r"
    actions.append({"futureAction": {"payload": "x"}})
    scene.write_actions(DELETE_VERSION, actions)
    expected = [r for r in raw_rows(table) if r["id"] not in (1, 22)]

    assert run_cli("delete", str(table), "--where", "id = 1").exit_code == 0
    adds = [a["add"] for a in scene.actions(5) if "add" in a]
    assert adds and all(a["futureField"] == {"nested": [1, 2]} for a in adds)
    checkpoint = pq.read_table(table / "_delta_log" / "00000000000000000005.checkpoint.parquet")
    rows = [r for r in checkpoint.column("add").to_pylist() if r is not None]
    assert len(rows) == 3
    assert all(r["futureField"] == {"nested": [1, 2]} and r["futureFlag"] for r in rows)

    # Version 6 is read from that checkpoint: the re-added file keeps the fields.
    assert run_cli("delete", str(table), "--where", "id = 22").exit_code == 0
    (add,) = [a["add"] for a in scene.actions(6) if "add" in a]
    assert add["futureField"] == {"nested": [1, 2]} and add["futureFlag"] is True
    assert canon(pl.read_delta(str(table)).to_dicts()) == canon(expected)


def test_add_with_dv_but_no_num_records(base_table: Path, tmp_path: Path) -> None:
    """PROTOCOL.md (Deletion Vectors, Per-file Statistics): a file with a DV must have an
    accurate `numRecords`; here every add of the DV commit lacks it, which delta-rs refuses
    to read at all. Decision: dvtool never guesses a row count, it reads the parquet footer,
    which is the count `numRecords` must equal. `inspect` still works, reporting log-only
    counts as inexact (`--count-rows` makes them exact); `--verify` reports each such file
    (`num-records`, exit 1); `delete` validates the DV against the footer count and writes
    `numRecords` into the add it commits; `optimize --purge` rewrites the files with full
    stats, after which other readers (polars) accept the table again."""
    table = tmp_path / "table"
    shutil.copytree(base_table, table)
    scene = Scene(tmp_path, table)
    actions = scene.actions(DELETE_VERSION)
    for action in actions:
        if "add" in action:
            stats = json.loads(action["add"]["stats"])
            del stats["numRecords"]
            action["add"]["stats"] = json.dumps(stats)
    scene.write_actions(DELETE_VERSION, actions)
    oracle = raw_rows(table)

    counted = inspect_json(table, "--count-rows")
    assert counted["row_counts_exact"] is True
    assert counted["physical_rows"] == 30 and counted["logical_rows"] == len(oracle) == 26
    assert inspect_json(table)["row_counts_exact"] is False
    verify = run_cli("inspect", str(table), "--verify", "--json")
    assert verify.exit_code == 6, verify.output
    problems = json.loads(verify.stdout)["verify"]["problems"]
    assert sorted(p["kind"] for p in problems) == ["num-records"] * 3

    assert run_cli("delete", str(table), "--where", "id = 21").exit_code == 0
    (add,) = [a["add"] for a in scene.actions(DELETE_VERSION + 1) if "add" in a]
    assert json.loads(add["stats"])["numRecords"] == 10
    expected = canon(r for r in oracle if r["id"] != 21)
    assert canon(raw_rows(table)) == expected
    assert run_cli("optimize", str(table), "--purge").exit_code == 0
    assert canon(pl.read_delta(str(table)).to_dicts()) == expected
    assert inspect_json(table)["files_with_dvs"] == 0


def test_commit_cut_at_a_line_boundary_reads_as_the_shorter_commit(
    base_table: Path, tmp_path: Path
) -> None:
    """Decision on torn commits. A commit cut exactly after a newline is a valid, shorter
    commit: its lines are independent JSON objects and the protocol has no end marker or
    action count. Delta relies on the storage's atomic visibility instead (the LogStore
    contract: a commit is never visible half-written; delta-io/delta LogStore docs), and
    neither Delta Spark nor delta-kernel-rs can tell such a cut apart from a commit written
    that way. dvtool reads it as they do (polars, through delta-kernel-rs, is the oracle
    here), and refuses every torn commit that is detectable: an empty file, a last line cut
    inside its JSON, NUL bytes, undecodable bytes (cases `log-*` in cases.py)."""
    table = tmp_path / "table"
    shutil.copytree(base_table, table)
    commit = table / "_delta_log" / commit_name(DELETE_VERSION)
    lines = commit.read_bytes().splitlines(keepends=True)
    assert b'"add"' in lines[-1]
    commit.write_bytes(b"".join(lines[:-1]))
    doc = inspect_json(table)
    polars_rows = pl.read_delta(str(table)).to_dicts()
    assert doc["logical_rows"] == len(polars_rows) == len(raw_rows(table))
    assert doc["num_files"] == 2


def test_hostile_remove_paths_are_never_acted_on(base_table: Path, tmp_path: Path) -> None:
    """Tombstones (`remove`) with control characters, backslashes and paths that climb out
    of the root name files no command here acts on: delete and purge succeed, inspect
    counts the tombstones, and the files they name outside the root stay untouched. (That
    vacuum never deletes them is tests/commands/vacuum/test_vacuum_safety.py.)"""
    table = tmp_path / "table"
    shutil.copytree(base_table, table)
    scene = Scene(tmp_path, table)
    victims = [scene.outside / "victim.parquet", scene.outside / "victim\x07.parquet"]
    for victim in victims:
        victim.write_bytes(b"precious")
    hostile = ["../outside/victim.parquet", "../outside/victim\x07.parquet"]
    hostile += ["..\\outside\\victim.parquet", "%2E%2E/outside/victim.parquet"]
    hostile += [str(victims[0]), "c\x1b[2J.parquet"]
    now = int(time.time() * 1000)
    removes = [
        {"remove": {"path": p, "deletionTimestamp": now, "dataChange": True}} for p in hostile
    ]
    scene.write_actions(DELETE_VERSION + 1, removes)
    outside_before = tree_hashes(scene.outside)

    assert inspect_json(table)["num_tombstones"] >= len(hostile)
    assert run_cli("delete", str(table), "--where", "id = 21").exit_code == 0
    assert run_cli("optimize", str(table), "--purge").exit_code == 0
    assert tree_hashes(scene.outside) == outside_before
    assert sorted(r["id"] for r in pl.read_delta(str(table)).to_dicts()) == sorted(
        r["id"] for r in raw_rows(base_table) if r["id"] != 21
    )


def test_retention_reaching_before_1970_keeps_everything(base_table: Path, tmp_path: Path) -> None:
    """A huge but finite --retain is valid: the cutoff is clamped to the epoch, so nothing
    is old enough to delete (it used to overflow the date conversion: exit 70)."""
    table = tmp_path / "table"
    shutil.copytree(base_table, table)
    before = tree_hashes(table)
    retain = "99999999999999999999d"
    result = run_cli("vacuum", str(table), "--retain", retain, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["num_files"] == 0 and doc["cutoff_ms"] == 0
    assert tree_hashes(table) == before
