"""`dvtool maintain` on Paimon tables without a JVM: the loop, its settings and its report.

The lake: a Delta table (deltalake), an Iceberg v2 path table of one append (pyiceberg
through dvtool's commits) and, in a `shop.db` folder as Paimon's filesystem catalog
places it, a Paimon table before its first commit (`schema/schema-0`, the spec's
example, tests/paimon/test_paimon_table.py) holding what failed writes leave two days
back: a manifest no snapshot lists, temporary snapshot and changelog files, a stray in
`snapshot/`; and what must stay: the `LATEST` and `EARLIEST` hints (as old) and a fresh
temporary snapshot file. Paimon's own view of these rules is tested against its Java
cleaner in tests/reference/test_paimon_vacuum.py and test_paimon_maintain.py.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dvtool
from dvtool.commands.inspect.checks import CheckOutcome
from dvtool.commands.maintain.command import MaintainRequest, run_maintain
from dvtool.commands.maintain.paimon_health import PaimonHealth
from dvtool.commands.vacuum.delete import FailedDelete
from tests.cli_helpers import all_output, run, run_wide
from tests.iceberg.commit_tables import new_path_table, rows, through_dvtool
from tests.oracles import tree_hashes
from tests.paimon.test_paimon_table import SCHEMA
from tests.s3_server import S3Server

STEPS = ["inspect", "purge", "compaction", "checkpoint", "vacuum", "log-cleanup"]
OLD = {
    "manifest/manifest-00000000-stray-0",
    "snapshot/.snapshot-1.0b8f5c4e-1d7a-4c3e-9a2b-5f6e7d8c9b0a.tmp",
    "snapshot/notes.txt",
    "changelog/.changelog-1.5e4d3c2b-1a0f-4e9d-8c7b-6a5f4e3d2c1b.tmp",
}
KEPT_OLD = {"snapshot/LATEST", "snapshot/EARLIEST"}
FRESH = "snapshot/.snapshot-2.9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d.tmp"


def _write(path: Path, text: str, age_s: float = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))


def _paimon(root: Path, options: dict[str, str] | None = None) -> Path:
    """The Paimon table of the module docstring (its schema's options updated)."""
    schema = json.loads(SCHEMA)
    schema["options"].update(options or {})
    _write(root / "schema" / "schema-0", json.dumps(schema))
    for relative in OLD | KEPT_OLD:
        _write(root / relative, "1" if relative in KEPT_OLD else "stray", age_s=2 * 86400)
    _write(root / FRESH, "being renamed")
    return root


def _lake(root: Path) -> tuple[Path, Path, Path]:
    delta = root / "delta_t"
    write_deltalake(str(delta), pa.table({"id": pa.array(range(10), pa.int64())}))
    ice = root / "ice"
    through_dvtool(new_path_table(str(ice), 2)).append(rows(0, 10))
    return delta, ice, _paimon(root / "shop.db" / "orders")


def _json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _table(doc: dict[str, Any], location: Path) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in doc["tables"] if t["location"] == str(location))
    return found


def _actions(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["step"]: a for a in table["actions"]}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_maintain_a_prefix_with_delta_iceberg_and_paimon_tables(tmp_path: Path) -> None:
    delta, ice, paimon = _lake(tmp_path / "lake")
    hashes = tree_hashes(tmp_path / "lake")
    plan = _json("maintain", tmp_path / "lake", "-r", "--dry-run")
    assert tree_hashes(tmp_path / "lake") == hashes
    assert _table(plan, delta)["format"] == "delta" and _table(plan, ice)["format"] == "iceberg"
    assert "inspect" not in _actions(_table(plan, ice))
    table = _table(plan, paimon)
    assert table["format"] == "paimon" and table["status"] == "ok"
    assert table["recommendation"] is None and table["plan"]["read_version"] == 0
    actions = _actions(table)
    assert [a["step"] for a in table["actions"]] == STEPS
    assert actions["inspect"]["status"] == "done"
    assert actions["inspect"]["result"]["compaction_due"] is False
    for step in ("purge", "compaction", "checkpoint"):
        assert actions[step]["status"] == "not-applicable"
        assert "Paimon's writers own compaction" in actions[step]["detail"]
    assert "snapshot expiry is Paimon's own" in actions["log-cleanup"]["detail"]
    assert actions["vacuum"]["status"] == "planned"
    assert {f["path"] for f in actions["vacuum"]["result"]["files"]} == OLD

    shown = run_wide("maintain", tmp_path / "lake", "-r")
    assert shown.exit_code == 0, all_output(shown)
    assert "inspect" in shown.stdout and "healthy" in shown.stdout
    assert f"{paimon}: vacuum: deleted 4 files" in shown.stdout
    assert _files(paimon) == {"schema/schema-0", FRESH, *KEPT_OLD}

    again = _json("maintain", paimon)
    assert _actions(again["tables"][0])["vacuum"]["status"] == "nothing-to-do"
    assert _files(paimon) == {"schema/schema-0", FRESH, *KEPT_OLD}


def test_a_paimon_table_under_an_s3_prefix(s3_server: S3Server, tmp_path: Path) -> None:
    """Found under the prefix and inspected; its strays were uploaded just now, younger
    than a day: the vacuum keeps them (maintain never shortens the retention)."""
    _paimon(tmp_path / "lake" / "shop.db" / "orders")
    uri = s3_server.upload(tmp_path / "lake", "maintain-paimon/lake")
    doc = _json("maintain", uri, "-r", *s3_server.cli_options())
    [table] = doc["tables"]
    assert table["location"] == f"{uri}/shop.db/orders" and table["format"] == "paimon"
    actions = _actions(table)
    assert actions["inspect"]["status"] == "done"
    assert actions["vacuum"]["status"] == "nothing-to-do"
    keys = s3_server.keys("maintain-paimon/lake/shop.db/orders")
    assert set(keys) == {"schema/schema-0", FRESH, *KEPT_OLD, *OLD}


def test_settings_from_flags_and_table_options(tmp_path: Path) -> None:
    options = {
        "dvtool.maintain.purgeRatio": "0.5",
        "target-file-size": "64 mb",
        "num-sorted-run.compaction-trigger": "3",
    }
    paimon = _paimon(tmp_path / "orders", options)
    table = _json("maintain", paimon, "--dry-run", "--retain", "1h")["tables"][0]
    settings = table["plan"]["settings"]
    assert settings["purge_ratio"] == {
        "value": 0.5,
        "source": "property",
        "name": "dvtool.maintain.purgeRatio",
    }
    assert settings["target_size"]["value"] == 64 * 1024 * 1024
    assert settings["target_size"]["source"] == "property"
    assert settings["retention_ms"] == {"value": 86_400_000, "source": "default", "name": None}
    checks = {c["name"]: c for c in _actions(table)["inspect"]["result"]["checks"]}
    assert checks["max-deleted-ratio"]["limit"] == 0.5
    assert checks["max-level0-files"]["limit"] == 3

    flags = ("--purge-ratio", "0.1", "--target-size", "1MB", "--retain", "3d")
    table = _json("maintain", paimon, "--dry-run", *flags)["tables"][0]
    settings = table["plan"]["settings"]
    assert settings["purge_ratio"]["value"] == 0.1
    assert settings["target_size"] == {"value": 1024 * 1024, "source": "flag", "name": None}
    assert settings["retention_ms"]["value"] == 3 * 86_400_000
    assert _actions(table)["vacuum"]["status"] == "nothing-to-do"  # 2 days old: kept


def test_a_purge_ratio_option_that_is_no_ratio_fails_the_table(tmp_path: Path) -> None:
    paimon = _paimon(tmp_path / "orders", {"dvtool.maintain.purgeRatio": "lots"})
    table = _json("maintain", paimon, code=2)["tables"][0]
    assert table["format"] == "paimon" and table["status"] == "failed"
    assert "dvtool.maintain.purgeRatio" in table["error"]["message"]


def test_a_table_with_a_branch_without_schema_is_inspected_not_vacuumed(tmp_path: Path) -> None:
    """Paimon's orphan clean aborts on a branch without schema: vacuum is not applicable
    (branches with schemas are vacuumed: tests/reference/test_paimon_branches.py)."""
    paimon = _paimon(tmp_path / "orders")
    (paimon / "branch" / "branch-dev" / "snapshot").mkdir(parents=True)
    table = _json("maintain", paimon)["tables"][0]
    vacuum = _actions(table)["vacuum"]
    assert table["status"] == "ok" and vacuum["status"] == "not-applicable"
    assert "branches dev have no schema" in vacuum["detail"]
    assert _actions(table)["inspect"]["status"] == "done"
    assert _files(paimon) >= OLD


def test_deletes_that_fail_fail_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paimon = _paimon(tmp_path / "orders")

    def failing(_storage: Any, files: Any, _progress: Any) -> tuple[list[Any], list[Any]]:
        return [], [FailedDelete(f.path, "permission denied") for f in files]

    monkeypatch.setattr("dvtool.commands.vacuum.paimon.delete_files", failing)
    result = run_maintain([str(paimon)], MaintainRequest())
    table = result.tables[0]
    assert table.kind == "storage" and result.exit_code == table.exit_code
    vacuum = next(a for a in table.actions if a.step == "vacuum")
    assert vacuum.status == "failed" and "could not delete 4 files" in vacuum.detail
    assert vacuum.result is not None and len(vacuum.result["failed"]) == 4
    assert next(a for a in table.actions if a.step == "log-cleanup").status == "not-applicable"


def test_the_time_budget_and_the_python_api(tmp_path: Path) -> None:
    paimon = _paimon(tmp_path / "orders")
    ticks = iter([0.0, 0.0, 0.0, 100.0, 100.0, 100.0, 100.0])
    result = run_maintain(
        [str(paimon)], MaintainRequest(time_budget_ms=1_000), clock=lambda: next(ticks, 100.0)
    )
    statuses = {a.step: a.status for a in result.tables[0].actions}
    assert statuses["vacuum"] == "skipped" and result.tables[0].status == "partial"
    api = dvtool.maintain(paimon, dry_run=True)
    assert api.exit_code == 0 and api.tables[0].format == "paimon"
    assert api.to_json()["tables"][0]["recommendation"] is None


def _check(name: str, limit: float, actual: float) -> CheckOutcome:
    return CheckOutcome(name, limit, actual, actual <= limit)


def test_the_recommendation_names_what_failed_and_how() -> None:
    checks = [
        _check("max-deleted-ratio", 0.2, 0.315),
        _check("max-level0-files", 5, 2),
        _check("max-small-files", 4, 9),
    ]
    health = PaimonHealth(cast(Any, None), checks, [], "shop.orders")
    assert health.compaction_due
    assert health.detail() == (
        "run Paimon's full compaction: deleted ratio: 31.5% (above 20%); "
        "small files: 9 (above 4, one per bucket)"
    )
    recommendation = health.recommendation()
    assert recommendation is not None
    assert recommendation["action"] == "paimon-full-compaction"
    assert [c["name"] for c in recommendation["checks"]] == ["max-deleted-ratio", "max-small-files"]
    assert (
        "CALL sys.compact(table => 'shop.orders', compact_strategy => 'full')"
        in (recommendation["how"])
    )
    healthy = PaimonHealth(cast(Any, None), checks[1:2], [], "orders")
    assert healthy.recommendation() is None
    assert healthy.detail().startswith("no full compaction due: level-0 files")
