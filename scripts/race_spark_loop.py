"""Delta Spark's side of the race: run inside the reference engine's process.

scripts/race_delta_spark.py sends this file's text as one `JvmSession.python` request,
followed by `result = spark_loop(spark, args)`: until `args["seconds"]` have passed, it draws a
statement (race_workload.draw_spark), tags it with its spec as the commit's `userMetadata`
(`spark.databricks.delta.commitInfo.userMetadata`, so the ledger knows what a landed commit
did) and runs it. Delta does not retry a DML statement that lost a conflict: the loop counts
the exception (by Java class) and draws the next statement, with a new `seq`, so a spec
lands at most once. Any other failure is recorded with its message. One request keeps the
whole loop in the JVM's process: no round trip per statement.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from typing import Any

CONFLICTS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "MetadataChangedException",
    "ProtocolChangedException",
)
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def java_class(exc: BaseException) -> str:
    """The Java class of a PySpark error (its py4j origin), else the Python class."""
    origin = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    if origin is not None:
        try:
            return str(origin.getClass().getName())
        except Exception:  # a dead py4j object: fall back to Python's name
            pass
    return type(exc).__name__


def spark_loop(spark: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Run statements until the deadline; the counts as JSON (see the module docstring)."""
    sys.path.insert(0, args["scripts"])
    from race_workload import draw_spark, spark_sql

    rng = random.Random(args["seed"])
    table = f"delta.`{args['path']}`"
    out: dict[str, Any] = {"tried": Counter(), "landed": Counter(), "conflicts": Counter()}
    out["errors"] = []
    deadline = time.monotonic() + args["seconds"]
    seq = args.get("first_seq", 1)
    while time.monotonic() < deadline:
        spec = draw_spark(rng, seq, args["weights"])
        seq += 1
        out["tried"][spec["op"]] += 1
        spark.conf.set(USER_METADATA, json.dumps({"race": "spark", **spec}))
        try:
            spark.sql(spark_sql(spec, table, args["key_end"])).collect()
            out["landed"][spec["op"]] += 1
        except Exception as exc:  # every failure is counted or reported
            name = java_class(exc).rsplit(".", 1)[-1]
            if name in CONFLICTS:
                out["conflicts"][name] += 1
            else:
                out["errors"].append(f"{spec}: {name}: {str(exc)[:300]}")
        time.sleep(rng.uniform(0, args.get("pause_s", 0.0)))
    spark.conf.unset(USER_METADATA)
    return {k: dict(v) if isinstance(v, Counter) else v for k, v in out.items()}
