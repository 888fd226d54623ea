"""The soak's replay model and the checks of rows against it (see scripts/soak.py):
`Expected` replays the committed deletes and restores over the original rows (a pyroaring
bitmap of live ids per version, checking each delete's count and each restore's target), and
every read is compared with it: each `inspect` (`check_reads`), deltalake time travel
(`check_time_travel`) and the final table as polars, deltalake and the raw reader of
tests/oracles.py read it (`check_final`).

The checks of the log itself and `Findings` are in soak_checks.py.
"""

from __future__ import annotations

import os
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyroaring import BitMap, FrozenBitMap
from soak_checks import Findings, option_value
from soak_log import CHECKPOINT_NAME, LogState, vacuum_safe
from soak_ops import OpRecord, classify, head, run_dvtool
from soak_table import Row, Spec, Target, predicate_matches, predicate_sql

ROOT = Path(__file__).resolve().parent.parent
MISSING_FILE_ERROR = re.compile(r"not found|no such file", re.IGNORECASE)  # deltalake's words
# Time travel reads: the newest versions, random ones no vacuum can have touched, any random.
TIME_TRAVEL_NEWEST, TIME_TRAVEL_SAFE, TIME_TRAVEL_RANDOM = 3, 5, 4


# -- checking rows against the replay model -------------------------------------------------


class Expected:
    """The live row ids per version from the setup's on: the committed deletes and restores
    replayed in version order over the original rows. A version that changes nothing shares
    its predecessor's bitmap, so a few hundred versions take little memory."""

    def __init__(self, rows: Sequence[Row], setup_version: int) -> None:
        self.rows = rows
        self.setup_version = setup_version
        self.alive = FrozenBitMap(range(len(rows)))
        self.live_at: dict[int, FrozenBitMap] = {setup_version: self.alive}

    def count_at(self, version: int) -> int | None:
        live = self.live_at.get(version)
        return None if live is None else len(live)

    def matching(self, spec: Spec) -> BitMap:
        return BitMap(r["id"] for r in self.rows if predicate_matches(spec, r))

    def replay(
        self, records: Sequence[OpRecord], infos: Mapping[int, dict[str, Any]], f: Findings
    ) -> None:
        """Apply the deletes and restores in version order, checking each delete's deleted
        row count and each restore's target."""
        committed = [
            r for r in records if r.outcome == "ok" and r.result.get("version") is not None
        ]
        deletes = {r.result["version"]: r for r in committed if r.kind == "delete"}
        # A delete commits once, so one stopped by a signal names no version (check_log
        # flags it if it does); should one, its DELETE is replayed with its predicate.
        deletes |= {v: r for r in records if r.kind == "delete" for v in r.claimed}
        restores = {r.result["version"]: r for r in committed if r.kind == "restore"}
        noops = defaultdict(list)
        for r in records:
            if r.kind == "delete" and r.outcome == "ok" and r.result.get("version") is None:
                noops[r.result["read_version"]].append(r)
        for v in range(self.setup_version, max(infos, default=0) + 1):
            info = infos.get(v, {})
            if v in deletes:
                self._apply(v, deletes[v], info, f)
            elif v in restores or (v > self.setup_version and info.get("operation") == "RESTORE"):
                self._restore(v, restores.get(v), info, f)
            self.live_at[v] = self.alive
            for r in noops.get(v, []):
                left = self.matching(r.spec or {}) & self.alive
                f.expect(
                    not left,
                    "deletes",
                    f"delete at read version {v} committed nothing, but {len(left)} live rows "
                    f"match {predicate_sql(r.spec or {})!r}",
                )

    def _apply(self, v: int, record: OpRecord, info: dict[str, Any], f: Findings) -> None:
        spec = record.spec or {}
        hit = self.matching(spec) & self.alive
        reported = record.result.get("metrics", {}).get("numDeletedRows")
        logged = info.get("operationMetrics", {}).get("numDeletedRows")
        f.expect(
            str(logged) == str(len(hit)) and (record.outcome != "ok" or reported == len(hit)),
            "deletes",
            f"delete v{v} {predicate_sql(spec)!r} (read v{record.result.get('read_version')}): "
            f"expected {len(hit)} rows deleted, reported {reported}, logged {logged}",
        )
        self.alive = FrozenBitMap(self.alive - hit)

    def _restore(self, v: int, record: OpRecord | None, info: dict[str, Any], f: Findings) -> None:
        """The live rows become those of the target version: the version the operation
        reported (checked against what it asked and the commit's parameters), else the
        commit's operationParameters `version`."""
        params = info.get("operationParameters") or {}
        target = params.get("version") if record is None else record.result.get("restored_version")
        if record is not None:
            res = record.result
            asked = option_value(record.args, "--version")
            if asked is not None:
                f.expect(
                    target == int(asked) == params.get("version"),
                    "restores",
                    f"restore --version {asked} committed v{v}: restored_version {target}, "
                    f"commit's operationParameters {params}",
                )
            else:
                f.expect(
                    params.get("version") is None and bool(params.get("timestamp")),
                    "restores",
                    f"restore --timestamp committed v{v} with operationParameters {params}",
                )
            logged = {k: str(n) for k, n in (info.get("operationMetrics") or {}).items()}
            reported = {k: str(n) for k, n in (res.get("metrics") or {}).items()}
            f.expect(
                logged == reported,
                "restores",
                f"restore v{v}: reported metrics {reported}, logged {logged}",
            )
            f.expect(
                isinstance(target, int) and target <= res.get("read_version", -1),
                "restores",
                f"restore v{v} restored v{target}, newer than its read version "
                f"{res.get('read_version')}",
            )
        if not isinstance(target, int) or target not in self.live_at:
            f.expect(
                False,
                "restores",
                f"RESTORE v{v} restored version {target!r}, not one from the setup's "
                f"(v{self.setup_version}) to v{v - 1}: its rows are unknown",
            )
            return
        self.alive = self.live_at[target]


def check_reads(records: Sequence[OpRecord], expected: Expected, f: Findings) -> int:
    """Each successful inspect: logical rows of the version it read, verify clean."""
    checked = 0
    for r in records:
        if r.kind != "inspect" or r.outcome != "ok":
            continue
        v, res = r.result["version"], r.result
        want = expected.count_at(v)
        if res.get("row_counts_exact") and want is not None:
            f.expect(
                res["logical_rows"] == want,
                "reads",
                f"inspect of v{v}: logical_rows {res['logical_rows']}, expected {want}",
            )
            checked += 1
        verify = res.get("verify")
        if verify is not None:
            f.expect(
                bool(verify.get("ok")),
                "reads",
                f"inspect --verify of v{v}: {verify.get('problems', [])[:2]}",
            )
    return checked


def check_time_travel(
    target: Target,
    state: LogState,
    expected: Expected,
    rng: random.Random,
    retain_ms: float,
    f: Findings,
) -> Counter[str]:
    """deltalake `DeltaTable(uri, version=v)` reads exactly the live ids of v, for the newest
    versions, random ones whose files no vacuum can have deleted and random ones of all the
    log can still rebuild; a missing file is "vacuumed" when a concurrent vacuum can have
    deleted it."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    stats: Counter[str] = Counter()
    latest = max(state.infos)
    start = state.rebuildable_from()
    candidates = list(
        range(max(expected.setup_version, latest if start is None else start), latest + 1)
    )
    chosen = set(candidates[-TIME_TRAVEL_NEWEST:])
    safe = [v for v in candidates if v not in chosen and vacuum_safe(v, state, retain_ms)]
    chosen |= set(rng.sample(safe, min(TIME_TRAVEL_SAFE, len(safe))))
    chosen |= set(rng.sample(candidates, min(TIME_TRAVEL_RANDOM, len(candidates))))
    options = dict(target.reader_options) or None
    for v in sorted(chosen):
        want = expected.live_at.get(v)
        if want is None:
            continue
        safe_v = vacuum_safe(v, state, retain_ms)
        try:
            table = DeltaTable(target.uri, version=v, storage_options=options)
            query = QueryBuilder().register("t", table).execute("SELECT id FROM t")
            ids = pa.table(query).column("id").to_pylist()
        except Exception as e:  # deltalake's errors have no common useful base
            message = " ".join(str(e).split())
            if MISSING_FILE_ERROR.search(message) and not safe_v:
                stats["vacuumed"] += 1
                continue
            f.expect(
                False,
                "time travel",
                f"deltalake version={v}"
                + (" (no vacuum can have deleted its files)" if safe_v else "")
                + f": {type(e).__name__}: {message[:400]}",
            )
            continue
        got = BitMap(ids)
        f.expect(
            len(ids) == len(got) and got == want,
            "time travel",
            f"deltalake version={v}: read {len(ids)} rows ({len(ids) - len(got)} duplicates), "
            f"expected {len(want)}: {len(want - got)} missing (e.g. {list(want - got)[:3]}), "
            f"{len(got - want)} unexpected (e.g. {list(got - want)[:3]})",
        )
        stats["checked"] += 1
        stats["safe"] += safe_v
    return stats


def canonical(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A row as a comparable tuple, whatever reader produced it."""
    day = row["day"]
    return (
        row["id"],
        row["grp"],
        row["amount"],
        row["name"],
        day.isoformat() if day else None,
        row["score"],
        row["region"],
    )


def reader_rows(target: Target) -> dict[str, list[dict[str, Any]]]:
    """The table's rows as each independent reader sees them."""
    import importlib

    import polars as pl
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    options = dict(target.reader_options) or None
    out: dict[str, list[dict[str, Any]]] = {
        "polars": pl.read_delta(target.uri, storage_options=options).to_dicts(),
        # to_pyarrow_table() refuses tables with the deletionVectors reader feature; the
        # DataFusion query engine of deltalake applies DVs.
        "deltalake": pa.table(
            QueryBuilder()
            .register("t", DeltaTable(target.uri, storage_options=options))
            .execute("SELECT * FROM t")
        ).to_pylist(),
    }
    if target.local_path is not None:
        # The raw reader shares no code with dvtool: JSON log + pyarrow + pyroaring. It
        # replays the JSON commits from 0, which the log cleanup may have deleted; from the
        # newest checkpoint on, it reads what that checkpoint's adds and later commits say.
        sys.path.insert(0, str(ROOT))
        oracles = importlib.import_module("tests.oracles")
        path = target.local_path
        versions = oracles.commit_versions(path)
        if versions and versions == list(range(versions[-1] + 1)):
            out["raw (tests/oracles.py, JSON log)"] = oracles.raw_rows(path)
        from_checkpoint = raw_rows_from_checkpoint(path, oracles)
        if from_checkpoint is not None:
            version, rows = from_checkpoint
            out[f"raw (tests/oracles.py, checkpoint v{version} + JSON)"] = rows
    return out


def raw_rows_from_checkpoint(path: Path, oracles: Any) -> tuple[int, list[Row]] | None:
    """(checkpoint version, rows): the live adds of the newest classic checkpoint followed by
    every commit after it (read with pyarrow; replayed by (path, DV id) as
    `oracles.replay_json` does), each file read by `oracles.file_rows`. None without one."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    log = path / "_delta_log"
    versions = set(oracles.commit_versions(path))
    latest = max(versions, default=-1)
    found = sorted(int(m[1]) for n in os.listdir(log) if (m := CHECKPOINT_NAME.match(n)))
    usable = [c for c in found if all(v in versions for v in range(c + 1, latest + 1))]
    if not usable:
        return None
    version = usable[-1]
    table = pq.read_table(log / f"{version:020d}.checkpoint.parquet", columns=["add", "metaData"])
    metadata = next(m for m in table.column("metaData").to_pylist() if m)
    metadata["configuration"] = dict(metadata.get("configuration") or [])
    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for add in table.column("add").to_pylist():
        if not add:
            continue
        add["partitionValues"] = dict(add.get("partitionValues") or [])
        dv = add.get("deletionVector")
        add["deletionVector"] = {k: x for k, x in dv.items() if x is not None} if dv else None
        live[(unquote(add["path"]), oracles.dv_key(add["deletionVector"]))] = add
    for v in range(version + 1, latest + 1):
        for action in oracles.commit_actions(path, v):
            if "metaData" in action:
                metadata = action["metaData"]
            elif "add" in action:
                add = action["add"]
                live[(unquote(add["path"]), oracles.dv_key(add.get("deletionVector")))] = add
            elif "remove" in action:
                rm = action["remove"]
                live.pop((unquote(rm["path"]), oracles.dv_key(rm.get("deletionVector"))), None)
    return version, [row for add in live.values() for row in oracles.file_rows(path, metadata, add)]


def row_difference(want: Sequence[tuple[Any, ...]], got: Sequence[tuple[Any, ...]]) -> str:
    """How the rows a reader read differ from the expected ones, with a few examples."""
    wanted, seen = Counter(want), Counter(got)
    missing = sorted((wanted - seen).elements())
    extra = sorted((seen - wanted).elements())
    return (
        f"read {len(got)} rows, expected {len(want)}: {len(missing)} missing "
        f"(e.g. {missing[:3]}), {len(extra)} unexpected (e.g. {extra[:3]})"
    )


def check_final(
    target: Target, expected: Expected, dvtool: Sequence[str], f: Findings, when: str
) -> None:
    """Every reader sees exactly the expected rows; `inspect --verify` passes."""
    want = sorted(canonical(expected.rows[i]) for i in expected.alive)
    for name, rows in reader_rows(target).items():
        got = sorted(canonical(r) for r in rows)
        f.expect(got == want, "final", f"{when}: {name} {row_difference(want, got)}")
    code, out, err = run_dvtool(dvtool, target, "inspect", ["--verify"])
    outcome, res = classify("inspect", code, out, err)
    f.expect(
        outcome == "ok",
        "final",
        f"{when}: dvtool inspect --verify exit {code}: {head(err)} {res.get('verify')}",
    )
    if outcome == "ok":
        f.expect(
            res["logical_rows"] == len(want),
            "final",
            f"{when}: inspect logical_rows {res['logical_rows']}, expected {len(want)}",
        )
