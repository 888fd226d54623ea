"""Shared test oracles: the golden tables and decoders written independently of dvtool.

- `copy_golden`: a writable copy of a golden table.
- A raw reader that shares no code with dvtool: `replay_json` replays the JSON commits by
  (path, DV id), `read_dv` decodes DVs (Z85 inline or DV files, CRC, magic) with pyroaring,
  `raw_rows` reads the live parquet files with pyarrow and drops the deleted rows.
- `canon` compares rows from different readers; `tree_hashes` fingerprints a directory.

The golden tables (`../shared/golden`, beside the repository) are read-only; CI always has
them, so tests that need them fail, never skip, when they are missing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
import shutil
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

GOLDEN = (Path(__file__).resolve().parents[1] / ".." / "shared" / "golden").resolve()
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
COMMIT = re.compile(r"^(\d{20})\.json$")
DV_MAGIC = 1681511377
UTC = dt.timezone.utc
Row = dict[str, Any]


def copy_golden(name: str, dest: Path) -> Path:
    """A writable copy of golden table `name` under `dest` (the originals are read-only)."""
    source = GOLDEN / name
    if not source.is_dir():
        raise AssertionError(f"golden table {source} is missing (CI provides ../shared/golden)")
    target = dest / name.replace("/", "__")
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def z85_uuid(text: str) -> str:
    """The UUID a 20-character Z85 `pathOrInlineDv` encodes (decoded here, not by dvtool)."""
    raw = b""
    for i in range(0, 20, 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + _Z85.index(ch)
        raw += struct.pack(">I", value)
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def dv_file(table: Path, dv: dict[str, Any]) -> Path:
    """The DV file of a `u` descriptor, derived as PROTOCOL.md says."""
    prefix, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
    return table / prefix / f"deletion_vector_{z85_uuid(encoded)}.bin"


def _canon_value(value: Any) -> Any:
    if isinstance(value, dict):
        if all(v is None for v in value.values()):
            return None  # a NULL struct, as some readers return it
        return tuple(sorted((k, _canon_value(v)) for k, v in value.items()))
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def canon(rows: Iterable[Row], columns: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of (column, value), independent of column order and types."""
    out = []
    for row in rows:
        names = sorted(columns or row)
        out.append(tuple((k, _canon_value(row[k])) for k in names))
    return sorted(out, key=repr)


def commit_versions(path: Path) -> list[int]:
    """The versions of the JSON commits in `_delta_log`, ascending."""
    return sorted(int(m[1]) for f in os.listdir(path / "_delta_log") if (m := COMMIT.match(f)))


def commit_actions(path: Path, version: int) -> list[dict[str, Any]]:
    """The actions of commit `version`, parsed line by line."""
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def tree_hashes(path: Path) -> dict[str, str]:
    """Every file under `path` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def z85_decode(text: str) -> bytes:
    """Z85 as Delta Spark writes it (zero-padded groups) or as the Rust `z85` crate does (a
    last group of k '#' then 5 - k digits holding the last 4 - k bytes)."""
    out = b""
    for i in range(0, len(text), 5):
        group = text[i : i + 5]
        pad = len(group) - len(group.lstrip("#"))
        value = 0
        for ch in group[pad:]:
            value = value * 85 + _Z85.index(ch)
        out += value.to_bytes(4 - pad, "big")
    return out


def read_dv(table: Path, dv: dict[str, Any]) -> set[int]:
    """The row indexes of a DV descriptor, decoded as PROTOCOL.md says (pyroaring bitmaps)."""
    kind = dv["storageType"]
    if kind == "i":
        raw = z85_decode(dv["pathOrInlineDv"])[: dv["sizeInBytes"]]
    else:
        location = dv_file(table, dv) if kind == "u" else Path(unquote(dv["pathOrInlineDv"]))
        data = location.read_bytes()
        assert data[0] == 1, "DV file format version"
        offset = dv.get("offset") or 0
        (size,) = struct.unpack(">I", data[offset : offset + 4])
        assert size == dv["sizeInBytes"]
        raw = data[offset + 4 : offset + 4 + size]
        (crc,) = struct.unpack(">I", data[offset + 4 + size : offset + 8 + size])
        assert crc == zlib.crc32(raw)
    assert struct.unpack("<I", raw[:4])[0] == DV_MAGIC
    rows = set(BitMap64.deserialize(raw[4:]))
    assert len(rows) == dv["cardinality"]
    return rows


def dv_key(dv: dict[str, Any] | None) -> str | None:
    """A DV descriptor's identity in log replay (storage type, path or inline bytes, offset)."""
    if not dv:
        return None
    return f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"


def replay_json(path: Path) -> tuple[dict[str, Any], dict[tuple[str, str | None], dict[str, Any]]]:
    """(latest metaData, live adds by (path, DV id)) from the JSON commits alone."""
    metadata: dict[str, Any] = {}
    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for version in commit_versions(path):
        for action in commit_actions(path, version):
            if "metaData" in action:
                metadata = action["metaData"]
            elif "add" in action:
                add = action["add"]
                live[(unquote(add["path"]), dv_key(add.get("deletionVector")))] = add
            elif "remove" in action:
                rm = action["remove"]
                live.pop((unquote(rm["path"]), dv_key(rm.get("deletionVector"))), None)
    return metadata, live


_PARTITION_TYPES: dict[str, Callable[[str], Any]] = {
    "integer": int,
    "long": int,
    "short": int,
    "byte": int,
    "string": str,
    "date": dt.date.fromisoformat,
}


def _as_utc(table: pa.Table, types: dict[str, Any]) -> pa.Table:
    """Delta `timestamp` columns are UTC instants; Spark's INT96 files read as naive ns."""
    for i, f in enumerate(table.schema):
        if types.get(f.name) == "timestamp" and pa.types.is_timestamp(f.type) and not f.type.tz:
            column = table.column(i).cast(pa.timestamp("us", tz="UTC"))
            table = table.set_column(i, pa.field(f.name, column.type), column)
    return table


def file_rows(path: Path, metadata: dict[str, Any], action: dict[str, Any]) -> list[Row]:
    """The rows by logical name that one add (or remove) body holds: its parquet file read
    with pyarrow, minus the rows of its DV, plus its partition values."""
    schema = json.loads(metadata["schemaString"])
    mode = metadata.get("configuration", {}).get("delta.columnMapping.mode", "none")
    logical = {}
    types = {}
    for f in schema["fields"]:
        physical = f["name"]
        if mode != "none":
            physical = f["metadata"]["delta.columnMapping.physicalName"]
        logical[physical] = f["name"]
        types[physical] = f["type"]
    table = _as_utc(pq.read_table(path / unquote(action["path"])), types)
    dv = action.get("deletionVector")
    deleted = read_dv(path, dv) if dv else set()
    out: list[Row] = []
    for index, record in enumerate(table.to_pylist()):
        if index in deleted:
            continue
        row = {logical[k]: v for k, v in record.items() if k in logical}
        for physical, value in (action.get("partitionValues") or {}).items():
            parse = _PARTITION_TYPES[types[physical]]
            row[logical[physical]] = None if value in (None, "") else parse(value)
        out.append(row)
    return out


def raw_rows(path: Path) -> list[Row]:
    """Rows by logical name: replayed JSON log + pyarrow parquet + pyroaring DVs."""
    metadata, live = replay_json(path)
    return [row for add in live.values() for row in file_rows(path, metadata, add)]
