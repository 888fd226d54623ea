"""`dvtool inspect` on tables whose checkpoint or `_last_checkpoint` is damaged.

The summary (human and `--json`) names the damaged checkpoint and what the state was read
from instead; `--verify` reports each as a problem naming the file (exit 6); the `--check`
gates and `maintain` still run. The damages are those of `tests.damaged_tables`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import all_output, run, run_wide
from tests.damaged_tables import (
    DAMAGE_NAMES,
    DAMAGES,
    MULTI_PART,
    NEWEST,
    V2_JSON,
    V2_PARQUET,
    damaged_table,
    golden_without,
    newest_sidecar,
    polars_rows,
)
from tests.oracles import GOLDEN

# What the summary's log row says, and the words of the warning under it.
WORDS = {
    "truncated": (
        f"checkpoint at version {NEWEST} damaged, {NEWEST + 1} commits replayed from JSON",
        "checkpoint.parquet) cannot be read",
        "read from the JSON commits instead",
    ),
    "truncated-older-good": (
        f"checkpoint at version {NEWEST} damaged, read from version 3 + {NEWEST - 3} commits",
        "checkpoint.parquet) cannot be read",
        "read from the checkpoint of version 3",
    ),
    "part-missing": (
        f"checkpoint at version {NEWEST} damaged, {NEWEST + 1} commits replayed from JSON",
        f"is incomplete: part {NEWEST:020d}.checkpoint.0000000002.0000000002.parquet is missing",
        "read from the JSON commits instead",
    ),
    "hint-garbage": (
        f"checkpoint at version {NEWEST}, 0 commits after it",
        "_delta_log/_last_checkpoint is not a valid hint: it is not JSON",
        "listed the whole log instead",
    ),
    "hint-wrong-shape": (
        f"checkpoint at version {NEWEST}, 0 commits after it",
        "_delta_log/_last_checkpoint is not a valid hint: it has no 'version'",
        "listed the whole log instead",
    ),
    "hint-5000": (
        f"checkpoint at version {NEWEST}, 0 commits after it",
        f"names version 5000, beyond the newest commit {NEWEST}",
        "listed the whole log instead",
    ),
    "hint-dangling": (
        f"checkpoint at version {NEWEST}, 0 commits after it",
        "names the checkpoint of version 3, which does not exist",
        "listed the whole log instead",
    ),
}


@pytest.mark.parametrize("name", DAMAGE_NAMES)
def test_inspect_names_the_damage_and_what_it_read_instead(tmp_path: Path, name: str) -> None:
    damage = next(d for d in DAMAGES if d.name == name)
    table, expected = damaged_table(tmp_path, damage)
    row, problem, instead = WORDS[name]

    human = run_wide("inspect", table)
    assert human.exit_code == 0, all_output(human)
    [log_row] = [line for line in human.stdout.splitlines() if "│ log " in line]
    assert row in log_row
    [warning] = [line for line in human.stdout.splitlines() if line.startswith("warning:")]
    assert problem in warning and instead in warning and "dvtool checkpoint" in warning

    doc = json.loads(run("inspect", table, "--json").stdout)
    assert doc["logical_rows"] == len(expected)
    assert any(problem in w and instead in w for w in doc["log_warnings"])
    if damage.kind.startswith("last-checkpoint"):
        assert doc["damaged_checkpoints"] == []
        assert doc["last_checkpoint_problem"]["kind"] == damage.kind
    else:
        assert doc["last_checkpoint_problem"] is None
        [damaged] = doc["damaged_checkpoints"]
        assert damaged["version"] == NEWEST and damaged["kind"] == damage.kind
        assert [f"_delta_log/{f}" for f in damaged["files"]] == [damage.file]
        assert problem in damaged["message"]


@pytest.mark.parametrize("name", DAMAGE_NAMES)
def test_verify_reports_the_damage_naming_the_file(tmp_path: Path, name: str) -> None:
    damage = next(d for d in DAMAGES if d.name == name)
    table, _ = damaged_table(tmp_path, damage)
    result = run("inspect", table, "--verify", "--json")
    assert result.exit_code == 6, all_output(result)
    verify = json.loads(result.stdout)["verify"]
    assert not verify["ok"] and verify["files_checked"] == NEWEST + 1
    [problem] = verify["problems"]
    assert problem["kind"] == damage.kind and problem["log_file"] == damage.file
    assert problem["data_file"] is None and problem["dv_file"] is None
    assert WORDS[name][1] in problem["message"]

    human = run_wide("inspect", table, "--verify")
    assert human.exit_code == 6
    assert "1 problem" in human.stdout
    assert f"{damage.kind} " in human.stdout and WORDS[name][1] in human.stdout


@pytest.mark.parametrize("name", ["truncated", "part-missing", "hint-5000"])
def test_check_gates_and_maintain_run_on_a_damaged_table(tmp_path: Path, name: str) -> None:
    damage = next(d for d in DAMAGES if d.name == name)
    table, expected = damaged_table(tmp_path, damage)
    replayed = NEWEST + 1 if damage.kind.startswith("checkpoint") else 0
    passed = run("inspect", table, "--check", f"max-log-files={replayed}", "--json")
    assert passed.exit_code == 0, all_output(passed)
    [check] = json.loads(passed.stdout)["checks"]
    assert check["actual"] == replayed and check["passed"]
    if replayed:
        assert run("inspect", table, "--check", "max-log-files=1").exit_code == 3

    # maintain plans the checkpoint at once (the interval is far away) to mend the damage.
    planned = run("maintain", table, "--dry-run", "--checkpoint-interval", "100", "--json")
    assert planned.exit_code == 0, all_output(planned)
    [outcome] = json.loads(planned.stdout)["tables"]
    [step] = [a for a in outcome["actions"] if a["step"] == "checkpoint"]
    assert step["status"] == "planned" and "to mend:" in step["detail"]
    # ... and writes it, after which other readers read the table again, and so does
    # dvtool's verify (a damaged checkpoint older than the newest good one is not read).
    done = run("maintain", table, "--checkpoint-interval", "100", "--json")
    assert done.exit_code == 0, all_output(done)
    [outcome] = json.loads(done.stdout)["tables"]
    [step] = [a for a in outcome["actions"] if a["step"] == "checkpoint"]
    # (After the compaction's commit, the checkpoint is of a newer version than the damage.)
    assert step["status"] == "done" and step["result"]["written"]
    assert polars_rows(table) == expected
    assert run("inspect", table, "--verify").exit_code == 0


def test_golden_multi_part_checkpoint_missing_a_part(tmp_path: Path) -> None:
    part = "00000000000000000005.checkpoint.0000000002.0000000003.parquet"
    table, _ = golden_without(tmp_path, MULTI_PART, part)
    human = run_wide("inspect", table)
    assert "checkpoint at version 5 damaged, 6 commits replayed from JSON" in human.stdout
    result = run("inspect", table, "--verify", "--json")
    assert result.exit_code == 6
    [problem] = json.loads(result.stdout)["verify"]["problems"]
    assert problem["kind"] == "checkpoint-part-missing"
    assert problem["log_file"] == f"_delta_log/{part}"


@pytest.mark.parametrize("name", [V2_PARQUET, V2_JSON])
def test_golden_v2_checkpoint_missing_a_sidecar(tmp_path: Path, name: str) -> None:
    sidecar = newest_sidecar(GOLDEN / name)
    table, _ = golden_without(tmp_path, name, sidecar)
    human = run_wide("inspect", table)
    assert "checkpoint at version 6 damaged, read from version 5 + 1 commit" in human.stdout
    assert f"references sidecar {sidecar}, which is missing" in human.stdout
    result = run("inspect", table, "--verify", "--json")
    assert result.exit_code == 6
    [problem] = json.loads(result.stdout)["verify"]["problems"]
    assert problem["kind"] == "checkpoint-sidecar-missing"
    assert problem["log_file"] == f"_delta_log/{sidecar}"
