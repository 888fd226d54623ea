"""The race's workload (scripts/race_delta_spark.py): its statements as SQL and as Python.

Every statement of the race is drawn from a small spec (a dict that JSON can hold), rendered
to SQL for the engine that runs it, and given its meaning in plain Python over the rows
`{key: (n, v)}` (`apply`), so the ledger (race_ledger.py) can replay the landed commits:

- `delete` {m, r, nmin}: `DELETE ... WHERE key % m = r AND n >= nmin` (Delta Spark), or the
  same predicate given to `dvtool delete`;
- `update` {m, r, seq}: `UPDATE ... SET n = n + 1, v = concat(v, '.u<seq>') WHERE key % m
  = r`: `n` counts the updates a row received and `v` lists them, so a lost or doubled
  update shows in both;
- `merge` {m, r, fresh, k, seq}: source keys `key % m = r` below the initial key range's
  end, plus `k` fresh keys from `fresh`; matched rows with n >= MERGE_DELETE_N are deleted,
  other matched rows bumped as by an update (`.m<seq>`), unmatched fresh keys inserted with
  n = 0, v = 'i<seq>' (unmatched old keys are not re-inserted: a deleted key stays deleted).

Predicates on `key % m` hit rows of every data file (the keys are spread over the files), so
Delta Spark and dvtool read and rewrite the same files and really conflict. Delta Spark's
statements carry their spec as the commit's `userMetadata`; dvtool's deletes are recognised
by the predicate dvtool records in the commit (`parse_dvtool_predicate`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

Rows = dict[int, tuple[int, str]]  # key -> (n, v)
Spec = dict[str, Any]

FRESH_BASE = 1_000_000_000  # merged-in keys: FRESH_BASE + seq * FRESH_STRIDE + j
FRESH_STRIDE = 1_000
MERGE_DELETE_N = 3
SPARK_MODULI = {"delete": (53, 59, 61), "update": (5, 7, 11), "merge": (13, 17)}
DVTOOL_MODULI = (41, 43, 47)


def draw_spark(rng: random.Random, seq: int, weights: Mapping[str, float]) -> Spec:
    """A random Delta Spark statement spec; `seq` makes its effects unique."""
    op = rng.choices(list(weights), weights=list(weights.values()))[0]
    m = rng.choice(SPARK_MODULI[op])
    spec: Spec = {"op": op, "m": m, "r": rng.randrange(m), "seq": seq}
    if op == "delete":
        spec["nmin"] = rng.choice((0, 1, 2))
    if op == "merge":
        spec["fresh"] = FRESH_BASE + seq * FRESH_STRIDE
        spec["k"] = rng.randint(5, 40)
    return spec


def draw_dvtool_delete(rng: random.Random) -> Spec:
    """A random dvtool delete spec."""
    m = rng.choice(DVTOOL_MODULI)
    return {"op": "delete", "m": m, "r": rng.randrange(m), "nmin": rng.choice((0, 1, 2))}


def where_sql(spec: Spec) -> str:
    """The delete predicate of `spec` as Spark SQL (both engines parse it)."""
    base = f"key % {spec['m']} = {spec['r']}"
    return f"{base} AND n >= {spec['nmin']}" if spec.get("nmin") else base


def spark_sql(spec: Spec, table: str, key_end: int) -> str:
    """The Delta Spark statement of `spec` on `table` (e.g. delta.`/path`)."""
    op, seq = spec["op"], spec["seq"]
    if op == "delete":
        return f"DELETE FROM {table} WHERE {where_sql(spec)}"
    if op == "update":
        return (
            f"UPDATE {table} SET n = n + 1, v = concat(v, '.u{seq}') "
            f"WHERE key % {spec['m']} = {spec['r']}"
        )
    source = (
        f"SELECT id AS key FROM range(0, {key_end}) WHERE id % {spec['m']} = {spec['r']} "
        f"UNION ALL SELECT id AS key FROM range({spec['fresh']}, {spec['fresh'] + spec['k']})"
    )
    return (
        f"MERGE INTO {table} t USING ({source}) s ON t.key = s.key "
        f"WHEN MATCHED AND t.n >= {MERGE_DELETE_N} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET n = t.n + 1, v = concat(t.v, '.m{seq}') "
        f"WHEN NOT MATCHED AND s.key >= {FRESH_BASE} THEN INSERT (key, n, v) "
        f"VALUES (s.key, 0, 'i{seq}')"
    )


_DVTOOL_MOD = re.compile(r"try_mod\(`key`, CAST\((\d+) AS BIGINT\)\) = CAST\((\d+) AS BIGINT\)")
_DVTOOL_NMIN = re.compile(r"`n` >= (\d+)\)")


def parse_dvtool_predicate(text: str) -> Spec | None:
    """The delete spec of the predicate dvtool recorded in its commit, None if not ours."""
    mod = _DVTOOL_MOD.search(text)
    if mod is None:
        return None
    nmin = _DVTOOL_NMIN.search(text)
    spec: Spec = {"op": "delete", "m": int(mod[1]), "r": int(mod[2])}
    spec["nmin"] = int(nmin[1]) if nmin else 0
    return spec


def _merge_source(spec: Spec, key_end: int) -> list[int]:
    m, r = spec["m"], spec["r"]
    old = range(r, key_end, m)
    return [*old, *range(spec["fresh"], spec["fresh"] + spec["k"])]


def apply(spec: Spec, rows: Rows, key_end: int) -> dict[str, list[int]]:
    """Apply `spec` to `rows` in place; the keys it deleted, updated and inserted."""
    m, r = spec["m"], spec["r"]
    done: dict[str, list[int]] = {"deleted": [], "updated": [], "inserted": []}
    if spec["op"] == "delete":
        nmin = spec.get("nmin", 0)
        done["deleted"] = [k for k, (n, _) in rows.items() if k % m == r and n >= nmin]
        for k in done["deleted"]:
            del rows[k]
    elif spec["op"] == "update":
        for k, (n, v) in rows.items():
            if k % m == r:
                rows[k] = (n + 1, f"{v}.u{spec['seq']}")
                done["updated"].append(k)
    else:
        _apply_merge(spec, rows, key_end, done)
    return done


def _apply_merge(spec: Spec, rows: Rows, key_end: int, done: dict[str, list[int]]) -> None:
    for k in _merge_source(spec, key_end):
        if k in rows:
            n, v = rows[k]
            if n >= MERGE_DELETE_N:
                del rows[k]
                done["deleted"].append(k)
            else:
                rows[k] = (n + 1, f"{v}.m{spec['seq']}")
                done["updated"].append(k)
        elif k >= FRESH_BASE:
            rows[k] = (0, f"i{spec['seq']}")
            done["inserted"].append(k)
