"""A small Avro container writer for the Paimon tests: files under a given writer schema
(Paimon's own, copied from a file it wrote), uncompressed.

The tests rewrite a copy of a Paimon table's manifests with one field changed (a corrupt
copy for `--verify`), and build Avro files with named type references for the reader's
unit tests. Avro's binary encoding (the Avro specification): zig-zag varints for int and
long, length-prefixed bytes and strings, records as their fields in order, arrays and maps
as counted blocks ending with 0, unions as the branch index then the value (here: `null`
for None, else the first other branch the value fits).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

MAGIC = b"Obj\x01"


def write_avro(schema: Any, records: list[dict[str, Any]]) -> bytes:
    """An Avro container file of `records` under `schema` (a parsed Avro schema)."""
    named: dict[str, Any] = {}
    body = bytearray()
    for record in records:
        _write(body, schema, record, named)
    sync = os.urandom(16)
    out = bytearray(MAGIC)
    meta = {"avro.schema": json.dumps(schema).encode(), "avro.codec": b"null"}
    out += _long(len(meta))
    for key, value in meta.items():
        out += _bytes(key.encode()) + _bytes(value)
    out += _long(0) + sync
    if records:
        out += _long(len(records)) + _long(len(body)) + body + sync
    return bytes(out)


def schema_of(data: bytes) -> Any:
    """The writer schema in an Avro file's header (a file Paimon wrote)."""
    pos = len(MAGIC)
    count, pos = _read_long(data, pos)
    for _ in range(abs(count)):
        klen, pos = _read_long(data, pos)
        key = data[pos : pos + klen].decode()
        pos += klen
        vlen, pos = _read_long(data, pos)
        if key == "avro.schema":
            return json.loads(data[pos : pos + vlen])
        pos += vlen
    raise ValueError("no avro.schema in the header")


def _write(out: bytearray, schema: Any, value: Any, named: dict[str, Any]) -> None:
    if isinstance(schema, list):
        _write_union(out, schema, value, named)
        return
    if isinstance(schema, str):
        if schema in named:
            _write(out, named[schema], value, named)
            return
        schema = {"type": schema}
    kind = schema["type"]
    if isinstance(kind, (dict, list)):
        _write(out, kind, value, named)
    elif kind == "record":
        named[schema["name"]] = schema
        for f in schema["fields"]:
            _write(out, f["type"], value.get(f["name"]), named)
    elif kind == "array":
        if value:
            out += _long(len(value))
            for item in value:
                _write(out, schema["items"], item, named)
        out += _long(0)
    elif kind == "map":
        if value:
            out += _long(len(value))
            for k, v in value.items():
                out += _bytes(k.encode())
                _write(out, schema["values"], v, named)
        out += _long(0)
    else:
        out += _primitive(kind, value)


def _write_union(out: bytearray, branches: list[Any], value: Any, named: dict[str, Any]) -> None:
    for index, branch in enumerate(branches):
        if (value is None) == (branch == "null"):
            out += _long(index)
            _write(out, branch, value, named)
            return
    raise ValueError(f"no branch of {branches} for {value!r}")


def _primitive(kind: str, value: Any) -> bytes:
    if kind == "null":
        return b""
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind in ("int", "long"):
        return _long(int(value))
    if kind == "float":
        return struct.pack("<f", value)
    if kind == "double":
        return struct.pack("<d", value)
    if kind == "string":
        return _bytes(str(value).encode())
    if kind == "bytes":
        return _bytes(bytes(value))
    raise ValueError(f"unsupported Avro type {kind}")


def _long(n: int) -> bytes:
    zigzag = (n << 1) ^ (n >> 63)
    out = bytearray()
    while zigzag & ~0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _bytes(data: bytes) -> bytes:
    return _long(len(data)) + data


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
