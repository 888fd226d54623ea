"""Which columns of a data file get Delta statistics (Delta Spark's `StatisticsCollection`).

- `delta.dataSkippingNumIndexedCols` (default 32): the first N leaf columns of the data
  schema (partition columns are not in data files, so they do not count), in schema order,
  where each field of a struct counts as a leaf and an array or map counts as one leaf;
  negative means all columns. Or
- `delta.dataSkippingStatsColumns`: exactly the named columns (a struct names all its leaves),
  Spark SQL multi-part identifiers (`parse_column_list`) of logical names, matched
  case-insensitively and mapped to physical names (`physical_column_paths`).

`select_leaves` gives the selected leaves and their arrow types; `StatsCollector`
(`dvtool.delta.protocol.stats_collect`) collects statistics for exactly those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa

from dvtool.delta.protocol.schema import StructType
from dvtool.errors import LogError

__all__ = [
    "DEFAULT_NUM_INDEXED_COLS",
    "NUM_INDEXED_COLS_KEY",
    "OPAQUE",
    "STATS_COLUMNS_KEY",
    "IndexedColumns",
    "leaf_paths",
    "parse_column_list",
    "physical_column_paths",
    "select_leaves",
    "stats_columns_spec",
    "with_required_columns",
]

NUM_INDEXED_COLS_KEY = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"
DEFAULT_NUM_INDEXED_COLS = 32

IndexedColumns = int | Sequence[str | Sequence[str]]

OPAQUE = pa.null()  # the leaf type of an opaque column: statistics kind "none"


def select_leaves(
    schema: pa.Schema, indexed_columns: IndexedColumns, opaque: frozenset[str] = frozenset()
) -> list[tuple[tuple[str, ...], pa.DataType]]:
    """The selected leaves of `schema`, `(path, arrow type)` in schema order; the columns
    named in `opaque` count as one leaf each, of type `OPAQUE` (no min/max)."""
    if isinstance(indexed_columns, bool):
        raise TypeError("indexed_columns must be an int or a list of column paths")
    if opaque:
        # One leaf of no statistics kind per opaque column: nullCount only.
        schema = pa.schema([pa.field(f.name, OPAQUE) if f.name in opaque else f for f in schema])
    if isinstance(indexed_columns, int):
        limit = None if indexed_columns < 0 else indexed_columns
        out: list[tuple[tuple[str, ...], pa.DataType]] = []
        _first_leaves(list(schema), (), limit, out)
        return out
    wanted = [_as_path(p) for p in indexed_columns]
    return _filter_leaves(list(schema), (), wanted)


def leaf_paths(schema: pa.Schema, indexed_columns: IndexedColumns) -> list[tuple[str, ...]]:
    """The leaf column paths `indexed_columns` selects in `schema` (see StatsCollector)."""
    return [path for path, _ in select_leaves(schema, indexed_columns)]


def with_required_columns(
    spec: IndexedColumns, schema: pa.Schema, required: Sequence[tuple[str, ...]]
) -> IndexedColumns:
    """`spec` widened so that the `required` physical paths get statistics too (clustering
    columns must have them, PROTOCOL.md "Clustered Table"); `spec` itself when it already
    covers them."""
    selected = leaf_paths(schema, spec)
    covered = set(selected)
    missing = [
        path for path in required if not any(leaf[: len(path)] == tuple(path) for leaf in covered)
    ]
    if not missing:
        return spec
    return [*selected, *(tuple(p) for p in missing)]


def _first_leaves(
    fields: list[pa.Field],
    prefix: tuple[str, ...],
    limit: int | None,
    out: list[tuple[tuple[str, ...], pa.DataType]],
) -> None:
    for f in fields:
        if limit is not None and len(out) >= limit:
            return
        if pa.types.is_struct(f.type):
            _first_leaves(list(f.type), (*prefix, f.name), limit, out)
        else:
            out.append(((*prefix, f.name), f.type))


def _filter_leaves(
    fields: list[pa.Field], prefix: tuple[str, ...], wanted: list[tuple[str, ...]]
) -> list[tuple[tuple[str, ...], pa.DataType]]:
    """The leaves named by `wanted` (paths relative to `fields`), in schema order."""
    out: list[tuple[tuple[str, ...], pa.DataType]] = []
    names = {f.name for f in fields}
    for f in fields:
        here = [p for p in wanted if _name_matches(p[0], f.name, names)]
        if not here:
            continue
        path = (*prefix, f.name)
        if any(len(p) == 1 for p in here):
            if pa.types.is_struct(f.type):
                _first_leaves(list(f.type), path, None, out)
            else:
                out.append((path, f.type))
        elif pa.types.is_struct(f.type):
            out.extend(_filter_leaves(list(f.type), path, [p[1:] for p in here]))
    return out


def _name_matches(wanted: str, name: str, names: set[str]) -> bool:
    """Exact match, or case-insensitive when no field has exactly the wanted name."""
    if wanted == name:
        return True
    return wanted not in names and wanted.lower() == name.lower()


def _as_path(path: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(path, str):
        parsed = parse_column_list(path)
        if len(parsed) != 1:
            raise ValueError(f"{path!r} is not one column path")
        return parsed[0]
    result = tuple(path)
    if not result:
        raise ValueError("empty column path")
    return result


def parse_column_list(text: str) -> list[tuple[str, ...]]:
    """Spark's comma-separated multi-part identifiers: `a, b.c, `x.y`.z` -> paths.

    Backticks quote a name (a doubled backtick is a literal one); whitespace around names is
    ignored. Raises LogError on malformed text (an unclosed backtick, an empty name).
    """
    if not text.strip():
        return []
    paths: list[tuple[str, ...]] = []
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == "`":
            name, i = _quoted_name(text, i)
        else:
            start = i
            while i < n and text[i] not in ".,`":
                i += 1
            name = text[start:i].strip()
            if not name or any(ch.isspace() for ch in name):
                raise LogError(f"bad column list {text!r}: bad column name {name!r}")
        parts.append(name)
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            paths.append(tuple(parts))
            return paths
        if text[i] == ".":
            i += 1
        elif text[i] == ",":
            paths.append(tuple(parts))
            parts = []
            i += 1
        else:
            raise LogError(f"bad column list {text!r} at position {i}")


def _quoted_name(text: str, i: int) -> tuple[str, int]:
    out = []
    i += 1
    while i < len(text):
        if text[i] == "`":
            if i + 1 < len(text) and text[i + 1] == "`":
                out.append("`")
                i += 2
                continue
            return "".join(out), i + 1
        out.append(text[i])
        i += 1
    raise LogError(f"bad column list {text!r}: unclosed backtick")


def physical_column_paths(
    schema: StructType, logical_paths: Iterable[Sequence[str]], mode: str
) -> list[tuple[str, ...]]:
    """Logical column paths (matched case-insensitively, like Delta) as physical paths.

    Paths that name no column of `schema`, or go through a non-struct, are skipped.
    """
    out = []
    for path in logical_paths:
        physical: list[str] = []
        current: StructType | None = schema
        for name in path:
            f = current.get(name) if current is not None else None
            if f is None:
                break
            physical.append(f.physical_name(mode))
            current = f.type if isinstance(f.type, StructType) else None
        else:
            out.append(tuple(physical))
    return out


def stats_columns_spec(
    configuration: Mapping[str, str], schema: StructType, mode: str
) -> int | list[tuple[str, ...]]:
    """What `StatsCollector(indexed_columns=...)` takes for a table's configuration.

    `delta.dataSkippingStatsColumns` (logical names, mapped to physical paths) when set,
    else `delta.dataSkippingNumIndexedCols` (default 32).
    """
    columns = configuration.get(STATS_COLUMNS_KEY)
    if columns is not None:
        return physical_column_paths(schema, parse_column_list(columns), mode)
    text = configuration.get(NUM_INDEXED_COLS_KEY)
    if text is None:
        return DEFAULT_NUM_INDEXED_COLS
    try:
        return int(text.strip())
    except ValueError:
        raise LogError(f"{NUM_INDEXED_COLS_KEY} is not an integer: {text!r}") from None
