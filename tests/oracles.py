"""Shared test oracles: the golden tables and decoders written independently of dvtool.

- `copy_golden`: a writable copy of a golden table.
- A raw reader that shares no code with dvtool: `replay_json` replays the JSON commits by
  (path, DV id), `read_dv` decodes DVs (Z85 inline or DV files, CRC, magic) with pyroaring,
  `raw_rows` / `file_rows` read the live parquet files with pyarrow and drop the deleted
  rows. Rows follow the latest schema exactly: columns resolved by field id (column mapping
  `id`), physical name (`name`) or name; values converted to the current, possibly widened
  type (PROTOCOL.md "Type Widening", also inside structs, arrays and maps; unsupported
  `delta.typeChanges` fail); columns missing from a file are None; partition values parsed
  from the log win over a copy materialized in the file; hidden columns are left out;
  `variant` columns are the raw parquet struct (shredded or not), decoded on demand by
  `variant_from_parquet` / `variant_decode`.
- Row tracking: `row_tracking_rows` adds the stable `_row_id` / `_row_commit_version` by
  PROTOCOL.md's reader rules; `row_id_high_water_mark` and `domain_metadata` replay domains.
- `canon` compares rows from different readers; `tree_hashes` fingerprints a directory.

The golden tables (`../shared/golden`, beside the repository) are read-only; CI always has
them, so tests that need them fail, never skip, when they are missing.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import math
import os
import re
import shutil
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

# The golden tables: $DVTOOL_GOLDEN, else ../shared/golden beside the repository (CI's layout).
GOLDEN_ENV = "DVTOOL_GOLDEN"
GOLDEN = Path(
    os.environ.get(GOLDEN_ENV) or Path(__file__).resolve().parents[1] / ".." / "shared" / "golden"
).resolve()
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
    text: str = dv["pathOrInlineDv"]
    prefix, encoded = text[:-20], text[-20:]
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


def latest_protocol(path: Path) -> dict[str, Any]:
    """The newest protocol action of the JSON commits in the log."""
    found: dict[str, Any] = {}
    for version in commit_versions(path):
        for action in commit_actions(path, version):
            found = action.get("protocol", found)
    return found


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


# -- schema, type widening and values ----------------------------------------------------------
#
# A data file holds the types of the schema it was written with; the latest schema may since
# have widened them (PROTOCOL.md "Type Widening") or renamed/dropped/added columns (Column
# Mapping). The reader below walks the latest Delta schema, finds each field in the parquet
# file (by field id, physical name or name) and converts each Python value to the field's
# current type, recursively through structs, arrays and maps.

Convert = Callable[[Any], Any]
_INTEGERS = ("byte", "short", "integer", "long")
# Integral digits a decimal needs to hold every value of an integer type (Spark's
# DecimalType.forType): Delta Spark accepts int -> decimal(p, s) when p - s covers them.
_INTEGER_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_WIDE = decimal.Context(prec=200)
_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(Z|[+-]\d{2}:?\d{2})?$"
)


def decimal_type(name: Any) -> tuple[int, int] | None:
    """(precision, scale) of a Delta `decimal(p,s)` type name, else None."""
    match = _DECIMAL.match(name) if isinstance(name, str) else None
    return (int(match[1]), int(match[2])) if match else None


def widening_supported(from_type: Any, to_type: Any) -> bool:
    """Whether PROTOCOL.md "Type Widening" allows changing `from_type` into `to_type`.

    Integer -> decimal follows Delta Spark (the decimal must keep at least 3 / 5 / 10 / 20
    integral digits for byte / short / int / long): the protocol's `Decimal(10 + k1, k2)`
    for byte and short is a sufficient, narrower form, and real tables (the golden
    type-widening table: byte -> decimal(4,1)) use Spark's rule."""
    if from_type == to_type:
        return True
    if from_type in _INTEGERS and to_type in _INTEGERS:
        return _INTEGERS.index(from_type) < _INTEGERS.index(to_type)
    if to_type == "double":
        return from_type in ("float", "byte", "short", "integer")
    if from_type == "date":
        return bool(to_type == "timestamp_ntz")
    target = decimal_type(to_type)
    if target is None:
        return False
    precision, scale = target
    source = decimal_type(from_type)
    if source is not None:
        return precision - source[0] >= scale - source[1] >= 0  # k1 >= k2 >= 0
    digits = _INTEGER_DIGITS.get(from_type) if isinstance(from_type, str) else None
    return digits is not None and precision - scale >= digits


def _nested_fields(data_type: Any) -> Iterable[dict[str, Any]]:
    """Every struct field inside a Delta type, at any depth (through arrays and maps)."""
    if not isinstance(data_type, dict):
        return
    kind = data_type.get("type")
    if kind == "struct":
        for field in data_type["fields"]:
            yield field
            yield from _nested_fields(field["type"])
    elif kind == "array":
        yield from _nested_fields(data_type["elementType"])
    elif kind == "map":
        yield from _nested_fields(data_type["keyType"])
        yield from _nested_fields(data_type["valueType"])


def check_type_changes(schema: dict[str, Any]) -> None:
    """Fail on an unsupported entry of any field's `delta.typeChanges`, as PROTOCOL.md
    "Reader Requirements for Type Widening" requires of readers."""
    for field in _nested_fields(schema):
        for change in (field.get("metadata") or {}).get("delta.typeChanges", []):
            if not widening_supported(change.get("fromType"), change.get("toType")):
                raise ValueError(f"unsupported type change of {field['name']!r}: {change}")


def mapping_mode(metadata: dict[str, Any]) -> str:
    """`delta.columnMapping.mode` of a metaData action (`none` when absent)."""
    return str((metadata.get("configuration") or {}).get("delta.columnMapping.mode", "none"))


def physical_name(field: dict[str, Any], mode: str) -> str:
    """The name a field has in data files, partition values and stats."""
    if mode in ("name", "id"):
        return str(field["metadata"].get("delta.columnMapping.physicalName", field["name"]))
    return str(field["name"])


def parquet_field_id(field: pa.Field) -> int | None:
    """The parquet `field_id` pyarrow exposes as `PARQUET:field_id` field metadata."""
    raw = (field.metadata or {}).get(b"PARQUET:field_id")
    return int(raw) if raw is not None else None


def _source_field(
    field: dict[str, Any], children: Sequence[pa.Field], mode: str
) -> pa.Field | None:
    """The parquet field holding Delta field `field` among `children` (one struct level).

    `id` mode resolves by field id; a file without any field id (written before the table
    was given ids) falls back to the physical name. PROTOCOL.md lets readers refuse such
    files or return nulls instead: this oracle follows what the tests need from converted
    tables. Ids missing from a file that has ids read as null."""
    if mode == "id":
        by_id = {i: child for child in children if (i := parquet_field_id(child)) is not None}
        if by_id:
            column_id = (field.get("metadata") or {}).get("delta.columnMapping.id")
            return by_id.get(int(column_id)) if column_id is not None else None
    name = physical_name(field, mode)
    return next((child for child in children if child.name == name), None)


def _plain_datetime(value: dt.datetime) -> dt.datetime:
    """A `datetime.datetime` (pyarrow gives `pandas.Timestamp` for nanosecond columns)."""
    to_pydatetime = getattr(value, "to_pydatetime", None)
    return to_pydatetime() if type(value) is not dt.datetime and to_pydatetime else value


def _to_timestamp_ntz(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _plain_datetime(value)
    if isinstance(value, dt.date):  # date -> timestamp_ntz widening: midnight
        return dt.datetime(value.year, value.month, value.day)
    return value


def _to_timestamp(value: Any) -> Any:
    """Delta `timestamp` values are UTC instants; naive ones (Spark's INT96) are UTC."""
    if not isinstance(value, dt.datetime):
        return value
    value = _plain_datetime(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _to_decimal(scale: int) -> Convert:
    exponent = decimal.Decimal(1).scaleb(-scale)

    def convert(value: Any) -> Any:
        return decimal.Decimal(value).quantize(exponent, context=_WIDE)

    return convert


def _primitive_converter(name: str) -> Convert:
    """The conversion of a file value to Delta primitive type `name` (type widening)."""
    if name in _INTEGERS:
        return int
    if name == "double":
        return float  # float32 values are exact in a double: 3.4f -> 3.4000000953674316
    if name == "timestamp_ntz":
        return _to_timestamp_ntz
    if name == "timestamp":
        return _to_timestamp
    parsed = decimal_type(name)
    if parsed is not None:
        return _to_decimal(parsed[1])
    return _identity


def _identity(value: Any) -> Any:
    return value


def _is_list(arrow_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
        or pa.types.is_list_view(arrow_type)
        or pa.types.is_large_list_view(arrow_type)
    )


StructPlan = list[tuple[str, str | None, Convert]]


def _struct_plan(
    fields: Sequence[dict[str, Any]], children: Sequence[pa.Field], mode: str
) -> StructPlan:
    """(logical name, parquet name or None when absent, value conversion) per Delta field."""
    plan: StructPlan = []
    for field in fields:
        source = _source_field(field, children, mode)
        if source is None:
            plan.append((field["name"], None, _identity))
        else:
            plan.append((field["name"], source.name, _converter(field["type"], source.type, mode)))
    return plan


def _apply_plan(plan: StructPlan, record: dict[str, Any]) -> Row:
    return {
        name: None if source is None or record.get(source) is None else convert(record[source])
        for name, source, convert in plan
    }


def _converter(delta_type: Any, arrow_type: pa.DataType, mode: str) -> Convert:
    """The conversion of a value read as `arrow_type` to Delta type `delta_type` (the value
    is never None here). `variant` is passed through as read: the raw struct
    {value, metadata} or, when shredded, {metadata, value, typed_value} (the alternate
    reader behaviour PROTOCOL.md "Reader Requirements for Variant Data Type" allows)."""
    if isinstance(delta_type, str):
        return _identity if delta_type == "variant" else _primitive_converter(delta_type)
    kind = delta_type.get("type")
    if kind == "struct" and pa.types.is_struct(arrow_type):
        children = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        plan = _struct_plan(delta_type["fields"], children, mode)
        return lambda value: _apply_plan(plan, value)
    if kind == "array" and _is_list(arrow_type):
        element = _converter(delta_type["elementType"], arrow_type.value_type, mode)
        return lambda value: [None if v is None else element(v) for v in value]
    if kind == "map" and pa.types.is_map(arrow_type):
        key = _converter(delta_type["keyType"], arrow_type.key_type, mode)
        item = _converter(delta_type["valueType"], arrow_type.item_type, mode)
        return lambda value: [(key(k), None if v is None else item(v)) for k, v in value]
    return _identity


# -- partition values ---------------------------------------------------------------------------


def _parse_timestamp(text: str, *, utc: bool) -> dt.datetime:
    """`{year}-{month}-{day} {hour}:{minute}:{second}[.{fraction}]` or ISO 8601 with `Z` or an
    offset. Without a zone the writer's time zone is meant; this oracle takes UTC."""
    match = _TIMESTAMP.match(text.strip())
    if not match:
        raise ValueError(f"not a partition timestamp: {text!r}")
    fraction = (match[7] or "").ljust(6, "0")[:6]
    year, month, day, hour, minute, second = (int(match[i]) for i in range(1, 7))
    value = dt.datetime(year, month, day, hour, minute, second, int(fraction))
    zone = match[8]
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        value = value.replace(tzinfo=dt.timezone(sign * offset))
    elif zone == "Z" or utc:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC) if utc else value.replace(tzinfo=None)


def _parse_boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(f"not a partition boolean: {text!r}")
    return text.lower() == "true"


_PARTITION_TYPES: dict[str, Callable[[str], Any]] = {
    "integer": int,
    "long": int,
    "short": int,
    "byte": int,
    "string": str,
    "date": dt.date.fromisoformat,
    "boolean": _parse_boolean,
    "double": float,  # also "NaN", "Infinity", "-Infinity" as Spark writes them
    "float": float,
    "timestamp": lambda text: _parse_timestamp(text, utc=True),
    "timestamp_ntz": lambda text: _parse_timestamp(text, utc=False),
    "binary": lambda text: text.encode("utf-8"),
}


def parse_partition_value(value: str | None, delta_type: Any) -> Any:
    """A serialized partition value (PROTOCOL.md "Partition Value Serialization") as a value of
    `delta_type`, the column's current type; None and "" are null."""
    if value is None or value == "":
        return None
    parsed = decimal_type(delta_type)
    if parsed is not None:
        return _to_decimal(parsed[1])(decimal.Decimal(value))
    if not isinstance(delta_type, str) or delta_type not in _PARTITION_TYPES:
        raise ValueError(f"unsupported partition column type {delta_type!r}")
    return _PARTITION_TYPES[delta_type](value)


# -- rows of data files -------------------------------------------------------------------------


def _file_records(
    path: Path, metadata: dict[str, Any], action: dict[str, Any], hidden: Sequence[str] = ()
) -> list[tuple[int, Row, dict[str, Any]]]:
    """(physical row index, logical row, values of the `hidden` parquet columns) of each row
    of one add/remove body that its DV does not delete.

    Logical rows have exactly the columns of the latest schema: values converted to the
    current types, columns missing from the file as None, partition columns from the
    action's `partitionValues` (which win over a copy materialized in the file; a remove
    without partition values falls back to the file), hidden columns (row tracking) left out.
    """
    schema = json.loads(metadata["schemaString"])
    check_type_changes(schema)
    mode = mapping_mode(metadata)
    fields = schema["fields"]
    partition_columns = set(metadata.get("partitionColumns") or [])
    values = action.get("partitionValues") or {}
    fixed: Row = {}
    for field in fields:
        key = physical_name(field, mode)
        if field["name"] in partition_columns and key in values:
            fixed[field["name"]] = parse_partition_value(values[key], field["type"])
    with pq.ParquetFile(
        path / unquote(action["path"]), coerce_int96_timestamp_unit="us"
    ) as parquet:
        plan = _struct_plan(fields, list(parquet.schema_arrow), mode)
        records = parquet.read().to_pylist()
    dv = action.get("deletionVector")
    deleted = read_dv(path, dv) if dv else set()
    out = []
    for index, record in enumerate(records):
        if index in deleted:
            continue
        row = _apply_plan(plan, record)
        row.update(fixed)
        out.append((index, row, {name: record.get(name) for name in hidden}))
    return out


def file_rows(path: Path, metadata: dict[str, Any], action: dict[str, Any]) -> list[Row]:
    """The rows by logical name that one add (or remove) body holds: its parquet file read
    with pyarrow (columns resolved per the column mapping mode, values widened to the latest
    schema's types), minus the rows of its DV, plus its partition values."""
    return [row for _, row, _ in _file_records(path, metadata, action)]


def raw_rows(path: Path) -> list[Row]:
    """Rows by logical name: replayed JSON log + pyarrow parquet + pyroaring DVs."""
    metadata, live = replay_json(path)
    return [row for add in live.values() for row in file_rows(path, metadata, add)]


# -- row tracking -------------------------------------------------------------------------------

ROW_ID_KEY = "delta.rowTracking.materializedRowIdColumnName"
ROW_VERSION_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"


def row_tracking_rows(path: Path) -> list[Row]:
    """Every live row (DVs applied) with its logical columns plus `_row_id` (the stable Row
    ID) and `_row_commit_version` (the stable Row Commit Version), by the reader rules of
    PROTOCOL.md "Reader Requirements for Row Tracking": the materialized column named in
    metaData.configuration when the file has it and the row's value is not null, else
    `baseRowId` + the row's physical index in the file / the add's
    `defaultRowCommitVersion` (None when the add has no such field). The materialized
    columns themselves never appear among the logical columns."""
    metadata, live = replay_json(path)
    configuration = metadata.get("configuration") or {}
    id_column = configuration.get(ROW_ID_KEY)
    version_column = configuration.get(ROW_VERSION_KEY)
    hidden = [name for name in (id_column, version_column) if name]
    out: list[Row] = []
    for add in live.values():
        base = add.get("baseRowId")
        default_version = add.get("defaultRowCommitVersion")
        for index, row, extra in _file_records(path, metadata, add, hidden):
            row_id = extra.get(id_column) if id_column else None
            version = extra.get(version_column) if version_column else None
            row["_row_id"] = (
                row_id if row_id is not None else (None if base is None else base + index)
            )
            row["_row_commit_version"] = version if version is not None else default_version
            out.append(row)
    return out


def domain_metadata(path: Path) -> dict[str, dict[str, Any]]:
    """The live `domainMetadata` actions by domain after replaying the JSON commits (a
    `removed: true` action deletes its domain)."""
    domains: dict[str, dict[str, Any]] = {}
    for version in commit_versions(path):
        for action in commit_actions(path, version):
            if "domainMetadata" in action:
                domain = action["domainMetadata"]
                if domain.get("removed"):
                    domains.pop(domain["domain"], None)
                else:
                    domains[domain["domain"]] = domain
    return domains


def row_id_high_water_mark(path: Path) -> int | None:
    """`rowIdHighWaterMark` of the latest `delta.rowTracking` domain (None when absent)."""
    domain = domain_metadata(path).get("delta.rowTracking")
    if domain is None:
        return None
    return int(json.loads(domain["configuration"])["rowIdHighWaterMark"])


# -- variant binary encoding (Parquet VariantEncoding.md / VariantShredding.md) -----------------

_MISSING = object()


def _variant_dictionary(metadata: bytes) -> list[str]:
    """The strings of a Variant metadata: header (version 1, sorted flag, offset size),
    dictionary size, size + 1 offsets, then the UTF-8 bytes."""
    header = metadata[0]
    if header & 0x0F != 1:
        raise ValueError(f"unsupported variant metadata version {header & 0x0F}")
    width = ((header >> 6) & 0x3) + 1
    size = int.from_bytes(metadata[1 : 1 + width], "little")
    offsets = [
        int.from_bytes(metadata[1 + width * (i + 1) : 1 + width * (i + 2)], "little")
        for i in range(size + 1)
    ]
    start = 1 + width * (size + 2)
    return [metadata[start + offsets[i] : start + offsets[i + 1]].decode() for i in range(size)]


def _variant_primitive(type_id: int, data: bytes) -> Any:
    def integer(n: int) -> int:
        return int.from_bytes(data[:n], "little", signed=True)

    def decimal_value(n: int) -> decimal.Decimal:
        return decimal.Decimal(int.from_bytes(data[1 : 1 + n], "little", signed=True)).scaleb(
            -data[0], context=_WIDE
        )

    epoch = dt.datetime(1970, 1, 1)
    if type_id in (0, 1, 2):
        return (None, True, False)[type_id]
    decoders: dict[int, Callable[[], Any]] = {
        3: lambda: integer(1),
        4: lambda: integer(2),
        5: lambda: integer(4),
        6: lambda: integer(8),
        7: lambda: struct.unpack("<d", data[:8])[0],
        8: lambda: decimal_value(4),
        9: lambda: decimal_value(8),
        10: lambda: decimal_value(16),
        11: lambda: dt.date(1970, 1, 1) + dt.timedelta(days=integer(4)),
        12: lambda: (epoch + dt.timedelta(microseconds=integer(8))).replace(tzinfo=UTC),
        13: lambda: epoch + dt.timedelta(microseconds=integer(8)),
        14: lambda: struct.unpack("<f", data[:4])[0],
        15: lambda: bytes(data[4 : 4 + int.from_bytes(data[:4], "little")]),
        16: lambda: data[4 : 4 + int.from_bytes(data[:4], "little")].decode(),
        17: lambda: (epoch + dt.timedelta(microseconds=integer(8))).time(),
        18: lambda: (epoch + dt.timedelta(microseconds=integer(8) // 1000)).replace(tzinfo=UTC),
        19: lambda: epoch + dt.timedelta(microseconds=integer(8) // 1000),
        20: lambda: str(uuid.UUID(bytes=bytes(data[:16]))),
    }
    if type_id not in decoders:
        raise ValueError(f"unknown variant primitive type {type_id}")
    return decoders[type_id]()


def _variant_value(names: list[str], value: bytes) -> Any:
    basic, header = value[0] & 0x3, value[0] >> 2
    if basic == 0:
        return _variant_primitive(header, value[1:])
    if basic == 1:  # short string
        return value[1 : 1 + header].decode()
    offset_width = (header & 0x3) + 1
    if basic == 2:  # object
        id_width = ((header >> 2) & 0x3) + 1
        large = (header >> 4) & 1
    else:  # array
        id_width = 0
        large = (header >> 2) & 1
    count_width = 4 if large else 1
    count = int.from_bytes(value[1 : 1 + count_width], "little")
    position = 1 + count_width
    ids = []
    for _ in range(count if basic == 2 else 0):
        ids.append(int.from_bytes(value[position : position + id_width], "little"))
        position += id_width
    offsets = []
    for _ in range(count + 1):
        offsets.append(int.from_bytes(value[position : position + offset_width], "little"))
        position += offset_width
    items = [_variant_value(names, value[position + offsets[i] :]) for i in range(count)]
    if basic == 3:
        return items
    return {names[i]: item for i, item in zip(ids, items, strict=True)}


def variant_decode(metadata: bytes, value: bytes) -> Any:
    """The Python value of an unshredded Variant (metadata, value): objects as dicts, arrays
    as lists, decimals as Decimal, dates / timestamps as date / datetime, variant null as
    None."""
    return _variant_value(_variant_dictionary(metadata), value)


def _unshred(names: list[str], group: dict[str, Any] | None) -> Any:
    """One shredded group {value, typed_value} (VariantShredding.md): `value` alone, the
    typed value alone (an object's fields are groups again, an array's elements too), or
    both for a partially shredded object (typed fields merged into the residual object);
    both null is a missing object field."""
    if group is None:
        return _MISSING
    raw, typed = group.get("value"), group.get("typed_value")
    if typed is None:
        return _MISSING if raw is None else _variant_value(names, raw)
    if isinstance(typed, dict):
        out = {} if raw is None else _variant_value(names, raw)
        if not isinstance(out, dict):
            raise ValueError("a shredded object with a non-object residual value")
        for key, child in typed.items():
            item = _unshred(names, child)
            if item is not _MISSING:
                out[key] = item
        return dict(sorted(out.items()))
    if isinstance(typed, list):
        return [_unshred(names, element) for element in typed]
    return typed


def variant_from_parquet(record: dict[str, Any] | None) -> Any:
    """The Python value of a variant column as read from parquet (None for a SQL NULL):
    unshredded {metadata, value} or shredded {metadata, value, typed_value}."""
    if record is None:
        return None
    names = _variant_dictionary(record["metadata"])
    result = _unshred(names, record)
    return None if result is _MISSING else result
