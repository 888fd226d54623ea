"""Requests to pypaimon, run by the pypaimon environment's own Python (tests/engines/
pypaimon_env.py says why it is a separate environment): standalone, it imports nothing from
dvtool or the tests.

Reads one JSON list of requests on stdin, answers one JSON list on stdout, each
`{"ok": true, "result": ...}` or `{"ok": false, "error": CLASS, "message": ...}` (a refusal
of one request does not stop the next). Requests (`path`: a table folder, read without a
catalog, so copies of a table work):

- `create`: `{warehouse, db, name, primary_keys, partition_keys, options}`: a table
  `(id INT NOT NULL, part STRING NOT NULL, v STRING)` in a filesystem catalog; its path.
- `write`: `{path, rows}`: one batch commit of rows `{id, part, v}`.
- `delete`: `{path, ids}`: delete the rows with those ids by deletion vectors
  (`delete_by_predicate`, which pypaimon supports on data-evolution append tables).
- `read`: `{path, snapshot, arrow}`: pypaimon's read (at snapshot id `snapshot`, or the
  latest) into an Arrow IPC file `arrow`; the result: rows read, and for every data file of
  the splits its path, level, rows and deletion file (path, offset, length, cardinality).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("part", pa.string(), nullable=False),
        pa.field("v", pa.string()),
    ]
)


def create(warehouse: str, db: str, name: str, **spec: Any) -> str:
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(db, True)
    schema = Schema.from_pyarrow_schema(
        SCHEMA,
        partition_keys=spec["partition_keys"] or None,
        primary_keys=spec["primary_keys"] or None,
        options=spec["options"],
    )
    catalog.create_table(f"{db}.{name}", schema, False)
    return str(catalog.get_table(f"{db}.{name}").table_path)


def _table(path: str, snapshot: int | None = None) -> Any:
    from pypaimon.table.file_store_table import FileStoreTable

    table = FileStoreTable.from_path(path)
    return table if snapshot is None else table.copy({"scan.snapshot-id": str(snapshot)})


def write(path: str, rows: list[dict[str, Any]]) -> int:
    builder = _table(path).new_batch_write_builder()
    writer, commit = builder.new_write(), builder.new_commit()
    writer.write_arrow(pa.Table.from_pylist(rows, schema=SCHEMA))
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()
    return len(rows)


def delete(path: str, ids: list[int]) -> int:
    builder = _table(path).new_batch_write_builder()
    update = builder.new_update()
    messages = update.delete_by_predicate(update.new_predicate_builder().is_in("id", ids))
    commit = builder.new_commit()
    commit.commit(messages)
    commit.close()
    return len(messages)


def read(path: str, snapshot: int | None, arrow: str) -> dict[str, Any]:
    table = _table(path, snapshot)
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    rows = builder.new_read().to_arrow(splits)
    with pa.OSFile(arrow, "wb") as sink, pa.ipc.new_file(sink, rows.schema) as out:
        out.write_table(rows)
    files = []
    for split in splits:
        dvs = split.data_deletion_files or [None] * len(split.files)
        bucket = table.path_factory().bucket_path(tuple(split.partition.values), split.bucket)
        for meta, dv in zip(split.files, dvs, strict=True):
            files.append(
                {
                    "path": _local(meta.file_path or f"{bucket}/{meta.file_name}"),
                    "level": meta.level,
                    "rows": meta.row_count,
                    "dv": None
                    if dv is None
                    else {
                        "path": _local(dv.dv_index_path),
                        "offset": dv.offset,
                        "length": dv.length,
                        "cardinality": dv.cardinality,
                    },
                }
            )
    return {"rows": rows.num_rows, "files": files}


def _local(path: str) -> str:
    return str(path).removeprefix("file:")


OPS = {"create": create, "write": write, "delete": delete, "read": read}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    op = OPS[request.pop("op")]
    try:
        return {"ok": True, "result": op(**request)}
    except Exception as e:  # the caller decides what a refusal means
        return {"ok": False, "error": type(e).__name__, "message": str(e)}


if __name__ == "__main__":
    json.dump([answer(r) for r in json.load(sys.stdin)], sys.stdout)
