"""Paimon's Avro files (manifest lists, manifests, index manifests) decoded with pyiceberg's
Avro reader, the one dvtool reads Iceberg's manifests with.

pyiceberg resolves a file's records by Iceberg field ids, which Paimon's Avro schemas do
not carry (`{"name": "_FILE_NAME", "type": "string"}`). `decode_avro` gives the writer's
schema ids in the order its fields appear (records' fields, arrays' elements, maps' keys
and values), drops logical types (Paimon's `timestamp-millis` is read as the epoch
milliseconds it holds, which Iceberg's conversion has no type for), expands references to
named types, and reads every record as a plain dict by field name: lists for arrays, dicts
for maps, bytes, ints, strings and None as Avro holds them. The codec is the file's own
(Paimon writes `zstandard` by default; pyiceberg knows null, deflate, snappy, zstandard
and bzip2).

Errors: ValueError (not an Avro file, a schema or codec pyiceberg cannot read), EOFError
(truncated); the callers turn them into problems or `dvtool.errors` types naming the file.
"""

from __future__ import annotations

import copy
import io
import json
from typing import Any

from pyiceberg.avro.file import META_SCHEMA, AvroFile, AvroFileHeader
from pyiceberg.avro.reader import Reader
from pyiceberg.avro.resolver import construct_reader
from pyiceberg.io import InputFile, InputStream
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import IcebergType, ListType, MapType, StructType
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

AVRO_MAGIC = b"Obj\x01"
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def decode_avro(data: bytes, location: str = "<bytes>") -> list[dict[str, Any]]:
    """Every record of the Avro container file `data`, as dicts by field name."""
    if not data.startswith(AVRO_MAGIC):
        raise ValueError(f"not an Avro file: it does not start with {AVRO_MAGIC!r}")
    with _PaimonAvroFile(_BytesInput(location, data)) as reader:
        struct = reader.schema.as_struct()
        return [_as_dict(record, struct) for record in reader]


def with_field_ids(avro_schema: Any) -> Any:
    """A copy of an Avro schema with Iceberg field ids numbered in order of appearance,
    logical types dropped and named type references expanded (pure)."""
    named: dict[str, Any] = {}
    counter = [0]

    def next_id() -> int:
        counter[0] += 1
        return counter[0]

    def walk(node: Any, namespace: str) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node
            key = node if "." in node else f"{namespace}.{node}" if namespace else node
            if key not in named and node not in named:
                raise ValueError(f"Avro schema names an undefined type {node!r}")
            return walk(copy.deepcopy(named.get(key, named.get(node))), namespace)
        if isinstance(node, list):
            return [walk(branch, namespace) for branch in node]
        out = {k: v for k, v in node.items() if k != "logicalType"}
        kind = out.get("type")
        if kind == "record":
            space = out.get("namespace", namespace)
            name = out["name"]
            named[name if "." in name else f"{space}.{name}" if space else name] = node
            named.setdefault(name, node)
            out["fields"] = [
                {**f, "field-id": next_id(), "type": walk(f["type"], space)} for f in out["fields"]
            ]
        elif kind == "array":
            out["element-id"] = next_id()
            out["items"] = walk(out["items"], namespace)
        elif kind == "map":
            out["key-id"], out["value-id"] = next_id(), next_id()
            out["values"] = walk(out["values"], namespace)
        elif isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in _PRIMITIVES):
            out["type"] = walk(kind, namespace)
        return out

    return walk(avro_schema, "")


class _PaimonHeader(AvroFileHeader):
    """An Avro header whose schema is converted with `with_field_ids`."""

    def get_schema(self) -> Schema:
        text = self.meta.get("avro.schema")
        if text is None:
            raise ValueError("No schema found in Avro file headers")
        return AvroSchemaConversion().avro_to_iceberg(with_field_ids(json.loads(text)))


class _PaimonAvroFile(AvroFile[Record]):
    """pyiceberg's Avro reader with `_PaimonHeader` for the header."""

    def _read_header(self) -> AvroFileHeader:
        reader: Reader = construct_reader(META_SCHEMA, {-1: _PaimonHeader})
        header: AvroFileHeader = reader.read(self.decoder)
        return header


class _BytesInput(InputFile):
    """Bytes already read, as the `InputFile` pyiceberg's reader opens."""

    def __init__(self, location: str, data: bytes) -> None:
        super().__init__(location)
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._data)


def _as_dict(record: Any, struct: StructType) -> dict[str, Any]:
    return {f.name: _value(record[i], f.field_type) for i, f in enumerate(struct.fields)}


def _value(value: Any, kind: IcebergType) -> Any:
    if value is None:
        return None
    if isinstance(kind, StructType):
        return _as_dict(value, kind)
    if isinstance(kind, ListType):
        return [_value(v, kind.element_type) for v in value]
    if isinstance(kind, MapType):
        return {_value(k, kind.key_type): _value(v, kind.value_type) for k, v in value.items()}
    return value
