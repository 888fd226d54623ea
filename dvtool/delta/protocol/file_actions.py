"""The canonical pyarrow layout of `add` and `remove` actions, and its builder from JSON.

Every source of file actions (JSON commits, classic, multi-part and V2 checkpoints) is mapped
onto one layout per action kind, `ADD_SCHEMA` and `REMOVE_SCHEMA`: the fields of
`dvtool.delta.protocol.actions.ADD_FIELDS`/`REMOVE_FIELDS` typed as below, plus `extraFields`, the
fields dvtool does not model as one JSON object text per row, so they survive a rewrite.
Summaries over millions of files then are column operations.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.delta.protocol.actions import ADD_FIELDS, DV_FIELDS, EXTRA_FIELD_NAME, REMOVE_FIELDS
from dvtool.delta.protocol.paths import CanonicalRoot
from dvtool.delta.protocol.replay import KEY_SEPARATOR
from dvtool.errors import LogError

STRING_MAP = pa.map_(pa.string(), pa.string())
_SCALAR_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "int": pa.int32(),
    "boolean": pa.bool_(),
    "map": STRING_MAP,
}
DV_TYPE = pa.struct([(name, _SCALAR_TYPES[kind]) for name, kind in DV_FIELDS])
_KIND_TYPES = {**_SCALAR_TYPES, "deletionVector": DV_TYPE}
EXTRA_FIELD = (EXTRA_FIELD_NAME, pa.string())

ADD_SCHEMA = pa.schema([*((n, _KIND_TYPES[k]) for n, k in ADD_FIELDS), EXTRA_FIELD])
REMOVE_SCHEMA = pa.schema([*((n, _KIND_TYPES[k]) for n, k in REMOVE_FIELDS), EXTRA_FIELD])
_ADD_NAMES = frozenset(name for name, _ in ADD_FIELDS)
_REMOVE_NAMES = frozenset(name for name, _ in REMOVE_FIELDS)


def file_actions_table(actions: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a canonical add or remove table from JSON action objects, column by column.

    Fields no action carries become null columns without touching the actions again, which
    matters for commits of hundreds of thousands of files.
    """
    known = _ADD_NAMES if schema is ADD_SCHEMA else _REMOVE_NAMES
    present: set[str] = set().union(*actions) if actions else set()
    n = len(actions)
    columns: list[pa.Array] = []
    for f in schema:
        if f.name == EXTRA_FIELD[0]:
            columns.append(_extra_column(actions, known, present))
        elif f.name not in present:
            columns.append(pa.nulls(n, f.type))
        elif f.type == STRING_MAP:
            columns.append(_map_column(actions, f.name))
        else:
            columns.append(_scalar_column(actions, f.name, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _scalar_column(actions: Sequence[Mapping[str, Any]], name: str, typ: pa.DataType) -> pa.Array:
    values = [a.get(name) for a in actions]
    try:
        return arrow_values.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise LogError(f"file action field '{name}' has a value of the wrong type: {e}") from e


def _map_column(actions: Sequence[Mapping[str, Any]], name: str) -> pa.Array:
    values = [a.get(name) for a in actions]
    try:
        return arrow_values.array(values, STRING_MAP)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise LogError(f"file action field '{name}' is not a map of strings: {e}") from e


def _extra_column(
    actions: Sequence[Mapping[str, Any]], known: frozenset[str], present: set[str]
) -> pa.Array:
    if present <= known:
        return pa.nulls(len(actions), pa.string())
    texts = []
    for action in actions:
        extra = {k: v for k, v in action.items() if k not in known}
        texts.append(json.dumps(extra, separators=(",", ":")) if extra else None)
    return arrow_values.array(texts, pa.string())


def canonical_path_column(
    paths: pa.ChunkedArray | pa.Array, root: CanonicalRoot
) -> pa.ChunkedArray | pa.Array:
    """`root.key` of every path of a string column, vectorised.

    Plain paths, nearly all of them, are found column-wise and kept as they are; only the
    others go through Python. A column with none comes back unchanged.
    """
    needs = _needs_key(paths)
    if not pc.any(needs).as_py():
        return paths
    column = arrow_values.combined(paths)
    mask = arrow_values.combined(needs)
    keys = [root.key(p) for p in pc.filter(column, mask).to_pylist()]
    return pc.replace_with_mask(column, mask, arrow_values.array(keys, pa.string()))


def _needs_key(paths: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Which paths are not plain (`is_plain`), False for nulls, column-wise."""
    escaped = pc.match_substring(paths, "%")
    colon = pc.match_substring(paths, ":")
    absolute = pc.starts_with(paths, "/")
    return pc.fill_null(pc.or_(pc.or_(escaped, colon), absolute), arrow_values.FALSE)


def key_column(table: pa.Table, root: CanonicalRoot | None = None) -> pa.ChunkedArray:
    """`key_string` of every row of a canonical add/remove table, computed column-wise.

    With `root`, the path part is the canonical key of the path (only the rows whose path
    is not plain go through Python); without it, the path as logged.
    """
    paths = table.column("path")
    if root is not None:
        paths = canonical_path_column(paths, root)
    dv = table.column("deletionVector")
    storage = pc.struct_field(dv, "storageType")
    inline = pc.struct_field(dv, "pathOrInlineDv")
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    at, empty, sep = (arrow_values.scalar(s, pa.string()) for s in ("@", "", KEY_SEPARATOR))
    with_offset = pc.binary_join_element_wise(storage, inline, at, offset, empty)
    without_offset = pc.binary_join_element_wise(storage, inline, empty)
    uid = pc.if_else(pc.is_null(offset), without_offset, with_offset)
    with_dv = pc.binary_join_element_wise(paths, uid, sep)
    return pc.if_else(pc.is_null(dv), paths, with_dv)


def located_file_actions_table(
    actions: list[Mapping[str, Any]], sources: list[tuple[str, int, int]], schema: pa.Schema
) -> pa.Table:
    """`file_actions_table` of JSON actions; a malformed field names its log file.

    `sources` are (log file, first, end) slices of `actions`, one per log file.

    The table is built in one pass; only when that fails is each batch's slice built alone,
    to find the file that holds the bad value.
    """
    try:
        return file_actions_table(actions, schema)
    except LogError as e:
        for source, start, end in sources:
            try:
                file_actions_table(actions[start:end], schema)
            except LogError as located:
                raise LogError(f"{source}: {located.message}") from None
        raise e from None


def concat_file_tables(tables: Iterable[pa.Table], schema: pa.Schema) -> pa.Table:
    parts = [t for t in tables if t.num_rows]
    if not parts:
        return arrow_values.empty_table(schema)
    return pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
