"""Building the actions of a commit: commitInfo, file actions from canonical rows, encoding.

Pure functions, no IO. A commit is a list of action objects (`{"add": {...}}`, ...) that
`encode_commit` turns into the bytes of `_delta_log/<version>.json`: one compact JSON object
per line, each line `\\n`-terminated, commitInfo first.

File actions come back out of the canonical add/remove tables of
`dvtool.delta.protocol.file_actions`
exactly as the log had them: nulls dropped, maps restored from key/value pair lists, DV
descriptors without a null `offset`, and the fields dvtool does not model (kept as
`extraFields` JSON text) merged back in. Row by row (`add_action_from_row`, `remove_for_add`)
or, for the thousands of files of one commit, column by column from a table
(`add_actions_from_table`, `remove_actions_for_adds`): the same actions, a fraction of the
per-file cost.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvtool.delta.protocol.actions import Metadata, Protocol, file_action_key
from dvtool.delta.protocol.features import writer_features
from dvtool.delta.protocol.file_actions import ADD_SCHEMA, DV_TYPE, EXTRA_FIELD, REMOVE_SCHEMA
from dvtool.delta.protocol.paths import CanonicalRoot

if TYPE_CHECKING:  # the tables only: this module converts no Python value to arrow
    import pyarrow as pa

JSON = dict[str, Any]


def _version() -> str:
    """dvtool's version (the core may not import the `dvtool` package itself)."""
    try:
        return importlib.metadata.version("dvtool")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "unknown"


ENGINE_INFO = f"dvtool/{_version()}"
ICT_PROPERTY = "delta.enableInCommitTimestamps"

_ADD_FIELDS = tuple(f.name for f in ADD_SCHEMA if f.name != EXTRA_FIELD[0])
_REMOVE_FIELDS = tuple(f.name for f in REMOVE_SCHEMA if f.name != EXTRA_FIELD[0])
_MAP_FIELDS = frozenset({"partitionValues", "tags"})
_DV_FIELDS = tuple(f.name for f in DV_TYPE)


# -- commitInfo -----------------------------------------------------------------------------


def commit_info(
    operation: str,
    parameters: Mapping[str, Any],
    metrics: Mapping[str, Any],
    read_version: int | None,
    txn_id: str,
    timestamp_ms: int,
    is_blind_append: bool,
    isolation_level: str = "Serializable",
    engine_info: str = ENGINE_INFO,
    in_commit_timestamp: int | None = None,
    tags: Mapping[str, str] | None = None,
) -> JSON:
    """The `{"commitInfo": {...}}` action, with the fields and encodings Delta Spark writes.

    `operationParameters` values are strings: a string stays as is, null stays null, anything
    else is JSON-encoded (a predicate list becomes `'["(id > 5)"]'`, a bool `'true'`).
    `operationMetrics` values are strings too. With an in-commit timestamp, `inCommitTimestamp`
    is set and `timestamp` equals it, as Delta does; the action must then be the first one of
    the commit (`encode_commit` checks that).
    """
    body: JSON = {}
    if in_commit_timestamp is not None:
        body["inCommitTimestamp"] = int(in_commit_timestamp)
        timestamp_ms = int(in_commit_timestamp)
    body["timestamp"] = int(timestamp_ms)
    body["operation"] = operation
    body["operationParameters"] = {k: _encode_parameter(v) for k, v in parameters.items()}
    if read_version is not None:
        body["readVersion"] = int(read_version)
    body["isolationLevel"] = isolation_level
    body["isBlindAppend"] = bool(is_blind_append)
    body["operationMetrics"] = {k: _encode_metric(v) for k, v in metrics.items()}
    body["engineInfo"] = engine_info
    body["txnId"] = txn_id
    if tags:
        body["tags"] = dict(tags)
    return {"commitInfo": body}


def _encode_parameter(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _encode_metric(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, (int, float)) else json.dumps(value)


def in_commit_timestamps_enabled(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether commits must carry `inCommitTimestamp` (feature supported and property true)."""
    enabled = str(metadata.configuration.get(ICT_PROPERTY, "false")).strip().lower() == "true"
    return enabled and "inCommitTimestamp" in writer_features(protocol)


def next_in_commit_timestamp(now_ms: int, previous_ict: int | None) -> int:
    """The in-commit timestamp of a commit: max(now, previous commit's ICT + 1)."""
    if previous_ict is None:
        return int(now_ms)
    return max(int(now_ms), int(previous_ict) + 1)


def with_in_commit_timestamp(actions: Sequence[Mapping[str, Any]], ict: int) -> list[JSON]:
    """`actions` with the first action's commitInfo `inCommitTimestamp`/`timestamp` set to `ict`.

    Used when a commit is retried at a later version: the rest of the commit stays valid, but
    its in-commit timestamp must exceed the new predecessor's.
    """
    out = [dict(a) for a in actions]
    if not out or "commitInfo" not in out[0]:
        raise ValueError("an in-commit timestamp needs commitInfo as the first action")
    body = dict(out[0]["commitInfo"])
    rest = {k: v for k, v in body.items() if k != "inCommitTimestamp"}
    new_body: JSON = {"inCommitTimestamp": int(ict)}
    new_body.update(rest)
    new_body["timestamp"] = int(ict)
    out[0] = {"commitInfo": new_body}
    return out


def commit_info_of(actions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The commitInfo body of a commit's actions, or None."""
    for action in actions:
        if "commitInfo" in action:
            info = action["commitInfo"]
            return info if isinstance(info, Mapping) else None
    return None


# -- encoding -------------------------------------------------------------------------------

# One encoder for every action of every commit: `json.dumps` with options builds a new
# JSONEncoder per call (about a fifth of the time of encoding a file action). Same output.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_commit(actions: Iterable[Mapping[str, Any]], *, root: str | None = None) -> bytes:
    """The bytes of a commit file: one compact JSON object per line, each `\\n`-terminated.

    Checks the rules of a valid commit first (ValueError: a bug in the caller): each action is
    a single-key object; commitInfo, if present, comes first and appears once (required
    first when it carries an in-commit timestamp); at most one protocol and one metaData;
    at most one add and one remove per path, never an add and a remove of the same
    (path, DV) key (PROTOCOL.md, "Delta Log Entries"); at most one txn per appId; no NaN.
    With `root` (the table root), paths are compared by their canonical keys
    (`dvtool.delta.protocol.paths`), so two spellings of one file count as one path.
    """
    actions = list(actions)
    check_commit(actions, root=root)
    return ("\n".join(map(_ENCODER.encode, actions)) + "\n").encode("utf-8")


def check_commit(actions: Sequence[Mapping[str, Any]], *, root: str | None = None) -> None:
    """Raise ValueError if `actions` is not a valid commit (see `encode_commit`).

    One pass over the actions; the (path, DV) keys that decide whether an add and a remove
    name the same logical file are built only for the paths both an add and a remove name
    (a purge's new files never share a path with its removes: no key is built at all).
    """
    if not actions:
        raise ValueError("a commit needs at least one action")
    key = (lambda path: path) if root is None else CanonicalRoot.parse(root).key
    counts: dict[str, int] = {}
    adds: dict[str, Mapping[str, Any]] = {}
    removes: dict[str, Mapping[str, Any]] = {}
    app_ids: set[str] = set()
    for index, action in enumerate(actions):
        if not isinstance(action, Mapping) or len(action) != 1:
            raise ValueError(f"action {index} is not a single-key action object: {action!r}")
        ((kind, body),) = action.items()
        if not isinstance(body, Mapping):
            raise ValueError(f"action {index} ('{kind}') is not an object")
        if kind == "add" or kind == "remove":
            path = body.get("path")
            if not isinstance(path, str) or not path:
                raise ValueError(f"{kind} action {index} has no path")
            seen = adds if kind == "add" else removes
            path_key = key(path)
            if path_key in seen:
                raise ValueError(f"a commit may hold one {kind} per path; {path} appears twice")
            seen[path_key] = body
            continue
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "commitInfo" and index != 0:
            raise ValueError("commitInfo must be the first action of a commit")
        if kind == "txn":
            app_id = str(body.get("appId"))
            if app_id in app_ids:
                raise ValueError(f"a commit may hold one txn per appId; {app_id} appears twice")
            app_ids.add(app_id)
    for kind in ("commitInfo", "protocol", "metaData"):
        if counts.get(kind, 0) > 1:
            raise ValueError(f"a commit may hold at most one {kind} action")
    _check_add_remove_keys(adds, removes)


def _check_add_remove_keys(
    adds: Mapping[str, Mapping[str, Any]], removes: Mapping[str, Mapping[str, Any]]
) -> None:
    """ValueError if an add and a remove (keyed by path key) name the same (path, DV)."""
    both = []
    for path_key in adds.keys() & removes.keys():
        added = file_action_key(path_key, adds[path_key].get("deletionVector"))
        if added == file_action_key(path_key, removes[path_key].get("deletionVector")):
            both.append(added)
    if both:
        path, dv = min(both, key=str)
        raise ValueError(
            f"a commit must not add and remove the same logical file ({path}, DV {dv}); "
            "to update its metadata, add it again without removing it"
        )


# -- file actions from canonical rows -------------------------------------------------------


def add_action_from_row(row: Mapping[str, Any], *, data_change: bool | None = None) -> JSON:
    """The `{"add": {...}}` action of one canonical add row (`ADD_SCHEMA`, e.g. `to_pylist()`).

    Columns outside the canonical layout (such as a snapshot's `numRecords`) are ignored.
    `data_change` overrides the row's `dataChange` (checkpoints store false).
    """
    body = _body_from_row(row, _ADD_FIELDS)
    body.setdefault("partitionValues", {})
    if data_change is not None:
        body["dataChange"] = data_change
    return {"add": _ordered(body, _ADD_FIELDS)}


def remove_action_from_row(row: Mapping[str, Any], *, data_change: bool | None = None) -> JSON:
    """The `{"remove": {...}}` action of one canonical remove row (`REMOVE_SCHEMA`)."""
    body = _body_from_row(row, _REMOVE_FIELDS)
    if data_change is not None:
        body["dataChange"] = data_change
    return {"remove": _ordered(body, _REMOVE_FIELDS)}


def remove_for_add(
    add: Mapping[str, Any], deletion_timestamp: int, *, data_change: bool = True
) -> JSON:
    """The `{"remove": {...}}` action that removes the logical file of an add body or row.

    As Delta's `AddFile.removeWithTimestamp`: same path and DV (the logical file's key),
    `extendedFileMetadata` true with `partitionValues` and `size`, and the add's stats, tags
    and row tracking fields. Fields dvtool does not model are not copied (they describe the
    add, not the removal).
    """
    inner = add.get("add")
    source = inner if len(add) == 1 and isinstance(inner, Mapping) else add
    body = _body_from_row(source, _ADD_FIELDS)
    out: JSON = {"path": body["path"], "deletionTimestamp": int(deletion_timestamp)}
    out["dataChange"] = data_change
    out["extendedFileMetadata"] = True
    out["partitionValues"] = dict(body.get("partitionValues") or {})
    if body.get("size") is not None:
        out["size"] = body["size"]
    for name in ("stats", "tags", "deletionVector", "baseRowId", "defaultRowCommitVersion"):
        if body.get(name) is not None:
            out[name] = body[name]
    return {"remove": out}


def _body_from_row(row: Mapping[str, Any], fields: Sequence[str]) -> JSON:
    body: JSON = {}
    for name in fields:
        value = row.get(name)
        if value is None:
            continue
        if name in _MAP_FIELDS:
            value = _restore_map(value)
        elif name == "deletionVector":
            value = dv_descriptor(value)
        body[name] = value
    extra = row.get(EXTRA_FIELD[0])
    if extra:
        try:
            decoded = json.loads(extra)
        except ValueError as e:
            raise ValueError(f"extraFields of {row.get('path')} is not JSON: {e}") from None
        if isinstance(decoded, Mapping):
            for key, value in decoded.items():
                body.setdefault(key, value)
    return body


def _restore_map(value: Any) -> dict[str, Any]:
    """A map value from arrow (`[(k, v), ...]`) or JSON (`{k: v}`), null values kept."""
    if isinstance(value, Mapping):
        return dict(value)
    return {k: v for k, v in value}


def dv_descriptor(value: Mapping[str, Any]) -> JSON:
    """A DV descriptor as the log spells it: the protocol's fields, null `offset` omitted."""
    out: JSON = {}
    for name in _DV_FIELDS:
        v = value.get(name)
        if v is not None:
            out[name] = v
    for name, v in value.items():  # e.g. maxRowIndex from a JSON descriptor
        if name not in out and name not in _DV_FIELDS and v is not None:
            out[name] = v
    return out


def _ordered(body: JSON, fields: Sequence[str]) -> JSON:
    """Known fields in the protocol's order, then the others in their original order."""
    out: JSON = {name: body[name] for name in fields if name in body}
    for key, value in body.items():
        if key not in out:
            out[key] = value
    return out


# -- file actions from canonical tables, column by column -----------------------------------
#
# The same actions as the row functions above, for thousands of files at once: each column
# is converted to Python values once (`to_pylist` of a column, not a dict per row of every
# column), and the bodies are assembled from them in the protocol's field order. Rows with
# `extraFields` (rare: fields another writer added) or without a path go through the row
# functions, so every row comes out exactly as they build it.


def add_actions_from_table(table: pa.Table, *, data_change: bool | None = None) -> list[JSON]:
    """`add_action_from_row` of every row of a canonical add table (a snapshot's `files`)."""
    columns = _value_columns(table, _ADD_FIELDS)
    partitions = columns.get("partitionValues") or [None] * table.num_rows
    columns["partitionValues"] = [{} if v is None else v for v in partitions]
    if data_change is not None:
        columns["dataChange"] = [data_change] * table.num_rows
    names = [name for name in _ADD_FIELDS if name in columns]
    bodies = _bodies(names, [columns[name] for name in names], table.num_rows)
    out: list[JSON] = [{"add": body} for body in bodies]
    for index in _special_rows(table, columns):
        row = table.slice(index, 1).to_pylist()[0]
        out[index] = add_action_from_row(row, data_change=data_change)
    return out


def remove_actions_for_adds(
    table: pa.Table, deletion_timestamp: int, *, data_change: bool = True
) -> list[JSON]:
    """`remove_for_add` of every row of a canonical add table (a snapshot's `files`)."""
    columns = _value_columns(table, _REMOVE_FOR_ADD_FIELDS)
    n = table.num_rows
    paths = columns.get("path") or [None] * n
    partitions = columns.get("partitionValues") or [None] * n
    names = [name for name in _REMOVE_FOR_ADD_FIELDS[2:] if name in columns]
    rest = _bodies(names, [columns[name] for name in names], n)
    timestamp = int(deletion_timestamp)
    out: list[JSON] = []
    for path, partition, others in zip(paths, partitions, rest, strict=True):
        body: JSON = {"path": path, "deletionTimestamp": timestamp, "dataChange": data_change}
        body["extendedFileMetadata"] = True
        body["partitionValues"] = {} if partition is None else partition
        body.update(others)
        out.append({"remove": body})
    for index in _special_rows(table, columns):
        row = table.slice(index, 1).to_pylist()[0]
        out[index] = remove_for_add(row, timestamp, data_change=data_change)
    return out


# The add fields `remove_for_add` copies, in the order it writes them: path and partition
# values first (both always present), then the others when not null.
_REMOVE_FOR_ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
)


def _value_columns(table: pa.Table, fields: Sequence[str]) -> dict[str, list[Any]]:
    """The Python values of the `fields` columns of `table` holding any non-null value
    (maps as dicts, DVs as `dv_descriptor`s), plus `path` and `extraFields` when present."""
    out: dict[str, list[Any]] = {}
    present = set(table.column_names)
    for name in (*fields, "path", EXTRA_FIELD[0]):
        if name not in present or name in out:
            continue
        column = table.column(name)
        if column.null_count == len(column) and name != "path":
            continue
        values = column.to_pylist()
        if name in _MAP_FIELDS:
            values = [None if v is None else _restore_map(v) for v in values]
        elif name == "deletionVector":
            values = [None if v is None else dv_descriptor(v) for v in values]
        out[name] = values
    return out


def _bodies(names: Sequence[str], columns: Sequence[list[Any]], rows: int) -> list[JSON]:
    """One dict per row of the non-null values of `columns`, keyed by `names` in order."""
    if not names:
        return [{} for _ in range(rows)]
    return [
        {name: value for name, value in zip(names, row, strict=True) if value is not None}
        for row in zip(*columns, strict=True)
    ]


def _special_rows(table: pa.Table, columns: Mapping[str, list[Any]]) -> list[int]:
    """Rows the row functions build: with `extraFields` or without a path."""
    extras = columns.get(EXTRA_FIELD[0])
    paths = columns.get("path") or [None] * table.num_rows
    if extras is None:
        return [i for i, path in enumerate(paths) if path is None]
    return [i for i, (p, e) in enumerate(zip(paths, extras, strict=True)) if p is None or e]
