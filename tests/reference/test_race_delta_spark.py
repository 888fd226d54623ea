"""dvtool racing Delta Spark on one table: the CI-sized run of scripts/race_delta_spark.py.

The same code as the script, with small numbers: a 2,000-row table in 3 files with deletion
vectors and row tracking (so row ids are checked too: unique, kept by every rewrite), Delta
Spark's DELETE/UPDATE/MERGE loop against dvtool's delete, purge, compaction and vacuum for
14 s (dvtool idle in the last 4 s of every 9 s).
The ledger of the landed commits must match every sampled version and the final table
(Delta Spark, deltalake and polars agree): 0 lost deletes, 0 resurrected or phantom rows, 0
duplicated keys, no update lost or doubled; and the race must really have raced, with at
least one conflict detected on some side.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.engines.jvm_engines import JvmSession

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def race_module() -> object:
    """scripts/race_delta_spark.py, imported with its sibling modules on the path."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import race_delta_spark

    return race_delta_spark


def test_race_against_delta_spark(
    delta_spark: JvmSession, race_module: object, tmp_path: Path
) -> None:
    race = race_module
    cfg = race.RaceConfig(  # type: ignore[attr-defined]
        tmp_path / "table",
        seconds=14,
        rows=2_000,
        files=3,
        row_tracking=True,
        seed=7,
        vacuum_retain="20s",
        sample_every=2.0,
    )
    cfg.cycle_s, cfg.quiet_s, cfg.travel = 9.0, 4.0, 3
    result = race.run_race(cfg, delta_spark)  # type: ignore[attr-defined]
    report = race.summary(result)  # type: ignore[attr-defined]
    for finding in ("duplicated", "lost_deletes", "resurrected", "phantom", "vanished"):
        assert result.findings[finding] == 0, report
    assert result.findings["lost_updates"] == result.findings["doubled_updates"] == 0, report
    assert result.findings["payload_mismatch"] == 0, report
    assert not result.problems, report
    assert result.conflicts > 0, report
    assert sum(result.ledger.landed.values()) > 0, report


def test_the_ledger_flags_what_it_should(race_module: object) -> None:
    """The checker can fail: a lost delete, a resurrection, a duplicate and lost and doubled
    updates in hand-made reads are each counted (no engine involved)."""
    from race_ledger import Ledger
    from race_workload import apply

    initial = {k: (0, "r") for k in range(10)}
    ledger = Ledger(0, 10, {0: dict(initial)}, ever=set(initial))
    rows = dict(initial)
    for version, spec in enumerate(
        [
            {"op": "delete", "m": 5, "r": 1, "nmin": 0},  # v1 deletes 1 and 6
            {"op": "update", "m": 2, "r": 0, "seq": 9},  # v2 bumps 0, 2, 4, 8
        ],
        start=1,
    ):
        done = apply(spec, rows, 10)
        ledger.deleted_at.update(dict.fromkeys(done["deleted"], version))
        ledger.states[version] = dict(rows)
    good = sorted((k, n, v) for k, (n, v) in rows.items())
    seen: set[int] = set()
    assert not +ledger.check(2, good, seen)
    assert seen == {1, 6}
    bad = [*good, (6, 0, "r"), (3, 0, "r")]  # 6 back after being seen gone; 3 twice
    bad = [(k, 0, "r") if k == 0 else (k, 2, v + ".u9") if k == 2 else (k, n, v) for k, n, v in bad]
    found = ledger.check(2, bad, seen)
    assert +found == {"resurrected": 1, "duplicated": 1, "lost_updates": 1, "doubled_updates": 1}
    fresh: set[int] = set()
    assert ledger.check(1, [*ledger_rows(ledger, 1), (1, 0, "r")], fresh)["lost_deletes"] == 1


def ledger_rows(ledger: object, version: int) -> list[tuple[int, int, str]]:
    """The rows the ledger expects at `version`, as a read returns them."""
    states = ledger.states  # type: ignore[attr-defined]
    return sorted((k, n, v) for k, (n, v) in states[version].items())
