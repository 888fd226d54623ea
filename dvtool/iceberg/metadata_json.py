"""Table metadata files as Iceberg Java writes them: pyiceberg's `TableMetadata` to bytes.

pyiceberg 0.12 refuses to serialize format version 3 (`TableMetadataV3.model_dump_json`
raises NotImplementedError), so every metadata file dvtool writes is serialized here, for
v1, v2 and v3 alike, the way Iceberg Java's `TableMetadataParser.toJson` does:

- the top-level keys in Java's order: `format-version`, `table-uuid`, `location`,
  `last-sequence-number` (v2+), `last-updated-ms`, `last-column-id`, `schema` (v1: the
  current schema, for old readers), `current-schema-id`, `schemas`, `partition-spec` (v1:
  the default spec's fields), `default-spec-id`, `partition-specs`, `last-partition-id`,
  `default-sort-order-id`, `sort-orders`, `properties`, `current-snapshot-id` (-1 without a
  snapshot before v3, null from v3), `next-row-id` (v3), `refs`, `snapshots`, `statistics`,
  `partition-statistics`, `snapshot-log`, `metadata-log`; compact JSON in UTF-8;
- snapshots as Java's `SnapshotParser`: `sequence-number` (v2+), `snapshot-id`,
  `parent-snapshot-id`, `timestamp-ms`, `summary` (operation first), `manifest-list`,
  `schema-id`, and v3's row lineage `first-row-id` and `added-rows`;
- schemas without an empty `identifier-field-ids` (Java writes it only when set);
- gzip when the table property `write.metadata.compression-codec` is `gzip`, the file then
  named `*.gz.metadata.json` (`file_extension`).

pyiceberg's model ignores what it does not know (v3's `encryption-keys`, a snapshot's
`key-id`, anything newer), so writing a table back could silently drop it: `lost_fields`
compares a metadata file's own JSON with what this module writes for it, and the commit
paths refuse a table that would lose anything. Pure: no IO.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

CODEC_PROPERTY = "write.metadata.compression-codec"
METADATA_EXTENSION = ".metadata.json"
GZIP_EXTENSION = ".gz" + METADATA_EXTENSION

_SNAPSHOT_KEYS = (
    "sequence-number",
    "snapshot-id",
    "parent-snapshot-id",
    "timestamp-ms",
    "summary",
    "manifest-list",
    "schema-id",
    "first-row-id",
    "added-rows",
)
_SCHEMA_KEYS = ("type", "schema-id", "identifier-field-ids", "fields")
# Java's SchemaParser, PartitionSpecParser, SortOrderParser, SnapshotRefParser and
# StatisticsFileParser key orders.
_FIELD_KEYS = ("id", "name", "required", "type", "doc", "initial-default", "write-default")
_LIST_KEYS = ("type", "element-id", "element", "element-required")
_MAP_KEYS = ("type", "key-id", "key", "value-id", "value", "value-required")
_PARTITION_FIELD_KEYS = ("name", "transform", "source-id", "source-ids", "field-id")
_SORT_FIELD_KEYS = ("transform", "source-id", "source-ids", "direction", "null-order")
_REF_KEYS = (
    "snapshot-id",
    "type",
    "min-snapshots-to-keep",
    "max-snapshot-age-ms",
    "max-ref-age-ms",
)
_STATISTICS_KEYS = (
    "snapshot-id",
    "statistics-path",
    "file-size-in-bytes",
    "file-footer-size-in-bytes",
    "key-metadata",
    "blob-metadata",
)
_BLOB_KEYS = ("type", "snapshot-id", "sequence-number", "fields", "properties")


def codec(metadata: TableMetadata) -> str:
    """The metadata codec the table asks for: `gzip` or `none` (Java's default)."""
    value = metadata.properties.get(CODEC_PROPERTY, "none").strip().lower()
    if value not in ("gzip", "none"):
        raise ValueError(f"unknown {CODEC_PROPERTY} {value!r} (Iceberg knows gzip and none)")
    return value


def file_extension(metadata: TableMetadata) -> str:
    """The extension of the table's next metadata file: `.gz.metadata.json` for gzip."""
    return GZIP_EXTENSION if codec(metadata) == "gzip" else METADATA_EXTENSION


def metadata_bytes(metadata: TableMetadata) -> bytes:
    """The bytes of the metadata file Java would write for `metadata`, gzip-compressed when
    the table's codec says so (`mtime=0`: the same metadata gives the same bytes)."""
    data = to_json(metadata).encode("utf-8")
    return gzip.compress(data, mtime=0) if codec(metadata) == "gzip" else data


def to_json(metadata: TableMetadata) -> str:
    """The metadata's JSON text, compact, keys in Java's order."""
    return json.dumps(metadata_dict(metadata), ensure_ascii=False, separators=(",", ":"))


def metadata_dict(metadata: TableMetadata) -> dict[str, Any]:
    """The metadata as Java's `TableMetadataParser.toJson` lays it out (see the module
    docstring); ValueError for a v3 table without `next-row-id`, which v3 requires."""
    version = metadata.format_version
    # TableMetadataCommonFields.model_dump (not model_dump_json, which v3 refuses).
    dumped = metadata.model_dump(mode="json", by_alias=True, exclude_none=True)
    out: dict[str, Any] = {
        "format-version": version,
        "table-uuid": dumped["table-uuid"],
        "location": dumped["location"],
    }
    if version > 1:
        out["last-sequence-number"] = dumped["last-sequence-number"]
    out["last-updated-ms"] = dumped["last-updated-ms"]
    out["last-column-id"] = dumped["last-column-id"]
    schemas = [_schema(s) for s in dumped["schemas"]]
    if version == 1:
        out["schema"] = next(s for s in schemas if s["schema-id"] == metadata.current_schema_id)
    out["current-schema-id"] = dumped["current-schema-id"]
    out["schemas"] = schemas
    specs = [_spec(s) for s in dumped["partition-specs"]]
    if version == 1:
        default = next(s for s in specs if s["spec-id"] == metadata.default_spec_id)
        out["partition-spec"] = default["fields"]
    out["default-spec-id"] = dumped["default-spec-id"]
    out["partition-specs"] = specs
    out["last-partition-id"] = dumped.get("last-partition-id", _last_partition_id(specs))
    out["default-sort-order-id"] = dumped["default-sort-order-id"]
    out["sort-orders"] = [_sort_order(o) for o in dumped["sort-orders"]]
    out["properties"] = dumped.get("properties", {})
    out["current-snapshot-id"] = _current_snapshot_id(metadata)
    if version >= 3:
        if metadata.next_row_id is None:  # type: ignore[union-attr]
            raise ValueError("format version 3 metadata must have a next-row-id")
        out["next-row-id"] = metadata.next_row_id  # type: ignore[union-attr]
    out["refs"] = {k: _ordered(r, _REF_KEYS) for k, r in dumped.get("refs", {}).items()}
    out["snapshots"] = [_snapshot(s, version) for s in dumped.get("snapshots", [])]
    out["statistics"] = [_statistics(f) for f in dumped.get("statistics", [])]
    out["partition-statistics"] = [
        _ordered(f, _STATISTICS_KEYS) for f in dumped.get("partition-statistics", [])
    ]
    out["snapshot-log"] = [_log_entry(e, "snapshot-id") for e in dumped.get("snapshot-log", [])]
    out["metadata-log"] = [_log_entry(e, "metadata-file") for e in dumped.get("metadata-log", [])]
    return out


def _current_snapshot_id(metadata: TableMetadata) -> int | None:
    """Java's `current-snapshot-id`: the id, else -1 before v3 and null from v3 on."""
    if metadata.current_snapshot_id is not None:
        return metadata.current_snapshot_id
    return None if metadata.format_version >= 3 else -1


def _last_partition_id(specs: list[dict[str, Any]]) -> int:
    """v1 metadata may lack `last-partition-id`: the highest field id, 999 if none."""
    return max((f["field-id"] for s in specs for f in s["fields"]), default=999)


def _schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema in Java's key order, without an empty `identifier-field-ids`."""
    if not schema.get("identifier-field-ids"):
        schema = {k: v for k, v in schema.items() if k != "identifier-field-ids"}
    fields = [_field(f) for f in schema.get("fields", [])]
    return _ordered({**schema, "fields": fields}, _SCHEMA_KEYS)


def _type(value: Any) -> Any:
    """A type in Java's key order: primitives are strings, nested types objects."""
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    if kind == "struct":
        return {**value, "fields": [_field(f) for f in value.get("fields", [])]}
    if kind == "list":
        return _ordered({**value, "element": _type(value["element"])}, _LIST_KEYS)
    if kind == "map":
        typed = {**value, "key": _type(value["key"]), "value": _type(value["value"])}
        return _ordered(typed, _MAP_KEYS)
    return value


def _field(field: dict[str, Any]) -> dict[str, Any]:
    return _ordered({**field, "type": _type(field["type"])}, _FIELD_KEYS)


def _spec(spec: dict[str, Any]) -> dict[str, Any]:
    fields = [_ordered(f, _PARTITION_FIELD_KEYS) for f in spec.get("fields", [])]
    return {"spec-id": spec["spec-id"], "fields": fields}


def _sort_order(order: dict[str, Any]) -> dict[str, Any]:
    fields = [_ordered(f, _SORT_FIELD_KEYS) for f in order.get("fields", [])]
    return {"order-id": order["order-id"], "fields": fields}


def _statistics(stats: dict[str, Any]) -> dict[str, Any]:
    blobs = [_ordered(b, _BLOB_KEYS) for b in stats.get("blob-metadata", [])]
    return _ordered({**stats, "blob-metadata": blobs}, _STATISTICS_KEYS)


def _snapshot(snapshot: dict[str, Any], version: int) -> dict[str, Any]:
    """A snapshot in Java's key order (v1 has no `sequence-number`)."""
    if version == 1:
        snapshot = {k: v for k, v in snapshot.items() if k != "sequence-number"}
    return _ordered(snapshot, _SNAPSHOT_KEYS)


def _log_entry(entry: dict[str, Any], key: str) -> dict[str, Any]:
    return {"timestamp-ms": entry["timestamp-ms"], key: entry[key]}


def _ordered(values: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """`values` with the keys of `order` first, in that order, then any others."""
    out = {k: values[k] for k in order if k in values}
    out.update((k, v) for k, v in values.items() if k not in out)
    return out


# -- what a round trip through pyiceberg's model would lose ----------------------------------


def lost_fields(raw: bytes, metadata: TableMetadata) -> list[str]:
    """The fields of the metadata file `raw` (its bytes, gzip too) that writing `metadata`
    (the file parsed by pyiceberg) back would drop or change, as JSON paths
    (`encryption-keys`, `snapshots[2].key-id`); [] when nothing is lost. Fields the written
    file adds (a `statistics` list an old writer left out) are not losses."""
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    original = json.loads(raw.decode("utf-8"))
    return list(_differences(original, metadata_dict(metadata), ""))


def _differences(original: Any, written: Any, path: str) -> Iterator[str]:
    if isinstance(original, dict) and isinstance(written, dict):
        for key, value in original.items():
            where = f"{path}.{key}" if path else key
            if key not in written:
                if not _empty_default(key, value):
                    yield where
            else:
                yield from _differences(value, written[key], where)
    elif isinstance(original, list) and isinstance(written, list):
        if len(original) != len(written):
            yield path
            return
        for i, (a, b) in enumerate(zip(original, written, strict=True)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif original != written or isinstance(original, bool) != isinstance(written, bool):
        yield path


def _empty_default(key: str, value: Any) -> bool:
    """A field Java writes with its empty default, which leaving out does not change."""
    return key == "identifier-field-ids" and value == []
