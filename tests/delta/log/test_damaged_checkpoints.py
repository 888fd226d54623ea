"""The log reader passes over a damaged checkpoint or `_last_checkpoint`, and says so.

Each table is damaged as real tables are (`tests.damaged_tables`). The snapshot must still
hold the live files deltalake listed before the damage (or, for golden tables deltalake
cannot read, the JSON commits' replay of `tests.oracles`), read from the JSON commits or an
older checkpoint, and must record what it passed over and why.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from deltalake import DeltaTable

from dvtool.delta.log.checkpoint_writer import write_checkpoint
from dvtool.delta.log.reader import open_log
from tests.damaged_tables import (
    DAMAGE_NAMES,
    DAMAGES,
    MULTI_PART,
    NEWEST,
    V2_JSON,
    V2_PARQUET,
    checkpoint_name,
    deltalake_table,
    golden_without,
    newest_sidecar,
)
from tests.oracles import GOLDEN, replay_json

# Where each damage leaves the reader: the checkpoint it reads from (None: the JSON commits).
READ_FROM = {
    "truncated": None,
    "truncated-older-good": 3,
    "part-missing": None,
    "hint-garbage": NEWEST,
    "hint-wrong-shape": NEWEST,
    "hint-5000": NEWEST,
    "hint-dangling": NEWEST,
}


def live_paths(table: Path) -> set[str]:
    return {unquote(p) for p in open_log(str(table)).snapshot().files.column("path").to_pylist()}


@pytest.mark.parametrize("name", DAMAGE_NAMES)
def test_the_reader_records_what_it_passed_over(tmp_path: Path, name: str) -> None:
    damage = next(d for d in DAMAGES if d.name == name)
    table = deltalake_table(tmp_path / name, checkpoints=damage.checkpoints)
    expected = {str(Path(uri).relative_to(table)) for uri in DeltaTable(str(table)).file_uris()}
    damage.apply(table)

    snapshot = open_log(str(table)).snapshot()
    assert snapshot.version == NEWEST
    assert snapshot.checkpoint_version == READ_FROM[name]
    assert live_paths(table) == expected
    if damage.kind.startswith("last-checkpoint"):
        assert snapshot.damaged_checkpoints == ()
        problem = snapshot.last_checkpoint_problem
        assert problem is not None and problem.kind == damage.kind
    else:
        assert snapshot.last_checkpoint_problem is None
        [damaged] = snapshot.damaged_checkpoints
        assert damaged.version == NEWEST and damaged.kind == damage.kind
        assert damaged.files == (damage.file.removeprefix("_delta_log/"),)


def test_a_truncated_checkpoint_says_why_it_cannot_be_read(tmp_path: Path) -> None:
    damage = next(d for d in DAMAGES if d.name == "truncated")
    table = deltalake_table(tmp_path / "t")
    damage.apply(table)
    [damaged] = open_log(str(table)).snapshot().damaged_checkpoints
    assert damaged.checkpoint == (checkpoint_name(NEWEST),)
    assert "footer" in damaged.reason.lower()
    assert damaged.message.startswith(
        f"the checkpoint of version {NEWEST} ({checkpoint_name(NEWEST)}) cannot be read: "
    )


def test_older_versions_do_not_see_newer_damage(tmp_path: Path) -> None:
    damage = next(d for d in DAMAGES if d.name == "truncated")
    table = deltalake_table(tmp_path / "t")
    damage.apply(table)
    (table / "_delta_log" / "_last_checkpoint").write_bytes(b"garbage")
    snapshot = open_log(str(table)).snapshot(5)
    assert snapshot.version == 5 and snapshot.checkpoint_version is None
    assert snapshot.damaged_checkpoints == () and snapshot.last_checkpoint_problem is None


def test_golden_multi_part_checkpoint_missing_a_part(tmp_path: Path) -> None:
    part = "00000000000000000005.checkpoint.0000000002.0000000003.parquet"
    table, good = golden_without(tmp_path, MULTI_PART, part)
    snapshot = open_log(str(table)).snapshot()
    assert snapshot.checkpoint_version is None
    [damaged] = snapshot.damaged_checkpoints
    assert (damaged.version, damaged.kind, damaged.files) == (5, "checkpoint-part-missing", (part,))
    assert len(damaged.checkpoint) == 3
    assert live_paths(table) == {path for path, _ in replay_json(good)[1]}


@pytest.mark.parametrize("name", [V2_PARQUET, V2_JSON])
def test_golden_v2_checkpoint_missing_a_sidecar(tmp_path: Path, name: str) -> None:
    sidecar = newest_sidecar(GOLDEN / name)
    table, good = golden_without(tmp_path, name, sidecar)
    snapshot = open_log(str(table)).snapshot()
    assert snapshot.version == 6 and snapshot.checkpoint_version == 5
    [damaged] = snapshot.damaged_checkpoints
    assert (damaged.version, damaged.kind, damaged.files) == (
        6,
        "checkpoint-sidecar-missing",
        (sidecar,),
    )
    assert ".checkpoint." in damaged.checkpoint[0] and len(damaged.checkpoint) == 1
    assert live_paths(table) == {path for path, _ in replay_json(good)[1]}


def test_a_good_checkpoint_of_the_same_version_is_used(tmp_path: Path) -> None:
    """A damaged UUID-named checkpoint is passed over for a good classic one of its version,
    not for an older checkpoint: the reader skips files, not versions."""
    sidecar = newest_sidecar(GOLDEN / V2_PARQUET)
    table, good = golden_without(tmp_path, V2_PARQUET, "_last_checkpoint")
    write_checkpoint(open_log(str(table)), 6, None, int(time.time() * 1000))
    (table / "_delta_log" / sidecar).unlink()
    snapshot = open_log(str(table)).snapshot()
    assert snapshot.checkpoint_version == 6
    [damaged] = snapshot.damaged_checkpoints
    assert damaged.version == 6 and damaged.kind == "checkpoint-sidecar-missing"
    assert live_paths(table) == {path for path, _ in replay_json(good)[1]}
