"""The race's ledger: the expected table at every version, from the landed commits alone.

`Ledger.build(path, setup_version, initial)` reads the JSON commits in `_delta_log` after the
setup (without dvtool: plain JSON) and replays each in version order on the setup's rows:

- a Delta Spark commit is recognised by its `userMetadata` (the statement's spec, written by
  race_spark_loop.py) and applied as race_workload.apply says;
- a dvtool `DELETE` by the predicate dvtool recorded (`parse_dvtool_predicate`);
- dvtool's `REORG` (purge), `OPTIMIZE` (compaction) and `VACUUM START`/`END` change no row;
- anything else, or a gap in the versions, is a finding (`Ledger.unknown`).

`Ledger.check(version, rows, seen_absent)` compares rows read at a version with the ledger:
duplicated keys, lost deletes (a key a landed delete removed, still visible, never seen gone
since), resurrected keys (seen gone after their delete, visible again), phantom keys (never
in the ledger), vanished keys (live in the ledger, not read), lost and doubled updates (the
row's update count `n` below or above the ledger's) and other payload mismatches.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from race_workload import Rows, Spec, apply, parse_dvtool_predicate

NO_ROW_CHANGE = ("REORG", "OPTIMIZE", "VACUUM START", "VACUUM END")
FINDINGS = (
    "duplicated",
    "lost_deletes",
    "resurrected",
    "phantom",
    "vanished",
    "lost_updates",
    "doubled_updates",
    "payload_mismatch",
)


def read_commit(path: Path, version: int) -> list[dict[str, Any]]:
    """The actions of commit `version` (plain JSON lines)."""
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def commit_versions(path: Path) -> list[int]:
    """The versions of the JSON commits in `_delta_log`, ascending."""
    names = (p.name for p in (path / "_delta_log").glob("*.json"))
    return sorted(int(n[:20]) for n in names if n[:20].isdigit() and len(n) == 25)


def commit_info(actions: list[dict[str, Any]]) -> dict[str, Any]:
    """The commitInfo of a commit ({} if none)."""
    return next((a["commitInfo"] for a in actions if "commitInfo" in a), {})


def classify(info: dict[str, Any]) -> tuple[str, Spec | None]:
    """(writer, spec) of a commit: writer `spark` or `dvtool`; spec None when no row changes;
    writer `unknown` for a commit the race did not make."""
    operation = info.get("operation", "")
    if info.get("userMetadata"):
        meta = json.loads(info["userMetadata"])
        return ("spark", meta) if meta.get("race") == "spark" else ("unknown", None)
    if not str(info.get("engineInfo", "")).startswith("dvtool"):
        return "unknown", None
    if operation in NO_ROW_CHANGE:
        return "dvtool", None
    if operation == "DELETE":
        predicate = json.loads(info.get("operationParameters", {}).get("predicate", "[]"))
        spec = parse_dvtool_predicate(" ".join(predicate))
        return ("dvtool", spec) if spec else ("unknown", None)
    return "unknown", None


@dataclass
class Ledger:
    """The expected rows per version (see the module docstring)."""

    setup_version: int
    key_end: int
    states: dict[int, Rows] = field(default_factory=dict)
    deleted_at: dict[int, int] = field(default_factory=dict)  # key -> version deleting it
    ever: set[int] = field(default_factory=set)  # every key that was ever live
    landed: Counter[str] = field(default_factory=Counter)  # "writer op" -> commits
    winners: Counter[str] = field(default_factory=Counter)  # writer -> commits retried past
    effects: Counter[str] = field(default_factory=Counter)  # deleted/updated/inserted rows
    unknown: list[str] = field(default_factory=list)

    @classmethod
    def build(cls, path: Path, setup_version: int, initial: Rows, key_end: int) -> Ledger:
        """Replay the commits after `setup_version` on `initial` (the setup's rows)."""
        ledger = cls(setup_version, key_end, {setup_version: dict(initial)}, ever=set(initial))
        rows = dict(initial)
        versions = [v for v in commit_versions(path) if v > setup_version]
        expected = list(range(setup_version + 1, setup_version + 1 + len(versions)))
        if versions != expected:
            ledger.unknown.append(f"log not contiguous after v{setup_version}: {versions}")
        for version in versions:
            ledger._replay(version, read_commit(path, version), rows)
            ledger.states[version] = dict(rows)
        return ledger

    def _replay(self, version: int, actions: list[dict[str, Any]], rows: Rows) -> None:
        info = commit_info(actions)
        writer, spec = classify(info)
        if writer == "unknown":
            self.unknown.append(f"v{version}: {info.get('operation')} {info.get('engineInfo')}")
            return
        op = spec["op"] if spec else info.get("operation", "?")
        self.landed[f"{writer} {op}"] += 1
        read = info.get("readVersion")
        if isinstance(read, int) and version - read > 1:
            self.winners[writer] += version - read - 1
        if spec is None:
            return
        done = apply(spec, rows, self.key_end)
        for what, keys in done.items():
            self.effects[what] += len(keys)
        for key in done["deleted"]:
            self.deleted_at[key] = version
        self.ever.update(done["inserted"])

    @property
    def last_version(self) -> int:
        return max(self.states)

    def check(
        self, version: int, read: list[tuple[int, int, str]], seen_absent: set[int]
    ) -> Counter[str]:
        """Findings for the rows `read` at `version` (key, n, v); updates `seen_absent` with
        the deleted keys this read did not show (see the module docstring)."""
        expected = self.states[version]
        found: Counter[str] = Counter()
        counts = Counter(key for key, _, _ in read)
        found["duplicated"] = sum(1 for c in counts.values() if c > 1)
        for key, n, v in read:
            if key not in self.ever:
                found["phantom"] += 1
            elif key not in expected:
                found[self._absent_kind(key, version, seen_absent)] += 1
            elif (n, v) != expected[key]:
                want = expected[key][0]
                what = "lost_updates" if n < want else "doubled_updates" if n > want else ""
                found[what or "payload_mismatch"] += 1
        found["vanished"] = sum(1 for key in expected if key not in counts)
        gone = (k for k, at in self.deleted_at.items() if at <= version and k not in counts)
        seen_absent.update(gone)
        return found

    def _absent_kind(self, key: int, version: int, seen_absent: set[int]) -> str:
        """A key read at `version` that the ledger does not have live there: deleted by then
        (a lost delete, or resurrected if a read since its delete did not show it), or a
        phantom (inserted only later, or never)."""
        if self.deleted_at.get(key, version + 1) > version:
            return "phantom"
        return "resurrected" if key in seen_absent else "lost_deletes"
