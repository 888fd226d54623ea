"""The child process of a reference-engine session (tests/engines/jvm_engines.py).

`python -m tests.engines.jvm_worker CONF.json` starts one classic Spark session with the
engine's jars and settings from CONF.json, then answers requests, one JSON object per line
on stdin, with one JSON line each on the protocol stream (the process's original stdout;
fd 1 is pointed at stderr first, so whatever Spark or the JVM prints goes to the log):

- `{"op": "sql", "sql": S}`: runs the statement; `{"ok": true}`.
- `{"op": "arrow", "sql": S, "path": P}`: runs the query and writes its result as an Arrow
  IPC file at P; `{"ok": true, "rows": N}`.
- `{"op": "python", "code": C, "args": {...}}`: runs C with `spark`, `jvm` (py4j's view of
  the driver JVM) and `args` in scope; C sets `result` to anything JSON can hold;
  `{"ok": true, "result": R}`.

A failure answers `{"ok": false, "error": CLASS, "message": TEXT}` (for a JVM exception the
Java class and message), and the session stays up for the next request.

A child process because PySpark launches one JVM per Python process, with the jars of the
first session: a test process that already runs dvtool's own local Spark session could not
load Delta's, Iceberg's or Paimon's jars into it, and each engine needs its own settings
(Delta's catalog and Iceberg's both want `spark_catalog`).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import IO, Any


def _protocol_stream() -> IO[str]:
    """The original stdout for answers; fd 1 then points at stderr (the session's log)."""
    stream = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def _start(conf: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(conf.get("master", "local[2]")).appName(conf["name"])
    for key, value in conf["spark_conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _error(exc: BaseException) -> dict[str, Any]:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        return {
            "ok": False,
            "error": str(java.getClass().getName()),
            "message": str(java.getMessage()),
        }
    try:
        desc = getattr(exc, "desc", None) or getattr(exc, "getMessage", lambda: None)()
    except Exception:  # pyspark's getMessage asks Spark's error catalogue, which lacks the
        desc = None  # conditions of newer Delta errors; str(exc) still holds the message
    return {
        "ok": False,
        "error": type(exc).__name__,
        "message": str(desc or exc),
        "trace": traceback.format_exc(limit=8),
    }


def _answer(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op == "sql":
        spark.sql(request["sql"]).collect()
        return {"ok": True}
    if op == "arrow":
        import pyarrow as pa

        table = spark.sql(request["sql"]).toArrow()
        with pa.OSFile(request["path"], "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        return {"ok": True, "rows": table.num_rows}
    if op == "python":
        scope: dict[str, Any] = {
            "spark": spark,
            "jvm": spark.sparkContext._jvm,
            "args": request.get("args", {}),
            "result": None,
        }
        exec(request["code"], scope)
        return {"ok": True, "result": scope["result"]}
    return {"ok": False, "error": "ValueError", "message": f"unknown op {op!r}"}


def main(argv: list[str]) -> int:
    answers = _protocol_stream()
    with open(argv[0]) as f:
        conf = json.load(f)
    try:
        spark = _start(conf)
    except Exception as exc:
        answers.write(json.dumps(_error(exc)) + "\n")
        return 1
    answers.write(json.dumps({"ok": True, "ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "stop":
            break
        try:
            answer = _answer(spark, request)
        except Exception as exc:
            answer = _error(exc)
        answers.write(json.dumps(answer, default=str) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
