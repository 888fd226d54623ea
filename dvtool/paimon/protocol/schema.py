"""A Paimon table schema (`schema/schema-N`, JSON; `schema.md`), without any IO.

The fields (id, name, type string), partition and primary keys, and the options dvtool
reads: `bucket` (N fixed buckets; -1 dynamic for a primary-key table, unaware for an append
table; -2 postponed), `deletion-vectors.enabled`, `deletion-vectors.bitmap64`,
`target-file-size`, `partition.default-name` and `partition.legacy-name`. Defaults are
Paimon's (`CoreOptions`); a version-1 schema without `bucket` has one bucket, as the spec's
compatibility note says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dvtool.byte_size import parse_byte_size
from dvtool.errors import LogError

SCHEMA_PREFIX = "schema-"
DV_ENABLED = "deletion-vectors.enabled"
DV_BITMAP64 = "deletion-vectors.bitmap64"
BUCKET = "bucket"
TARGET_FILE_SIZE = "target-file-size"
DEFAULT_PARTITION_NAME = "partition.default-name"
LEGACY_PARTITION_NAME = "partition.legacy-name"
DATA_FILE_PATH_DIRECTORY = "data-file.path-directory"
"""The folder under the table that holds the partition and bucket folders (default: none)."""
DYNAMIC_BUCKET = -1
POSTPONE_BUCKET = -2
# CoreOptions.TARGET_FILE_SIZE: 128 MiB for primary-key tables, 256 MiB for append tables.
PK_TARGET_FILE_SIZE = 128 * 1024 * 1024
APPEND_TARGET_FILE_SIZE = 256 * 1024 * 1024

_SCHEMA_FILE = re.compile(r"^schema-(\d+)$")


def schema_id_of(name: str) -> int | None:
    """The id a `schema-N` file name carries, None for another name."""
    match = _SCHEMA_FILE.match(name)
    return int(match[1]) if match else None


@dataclass(frozen=True)
class DataField:
    """One column: its id, name and Paimon type string (`INT NOT NULL`, `STRING`)."""

    id: int
    name: str
    type: str

    @property
    def nullable(self) -> bool:
        return not self.type.upper().endswith("NOT NULL")

    @property
    def base_type(self) -> str:
        """The type without `NOT NULL` and parameters, upper case (`VARCHAR(3)` -> VARCHAR)."""
        text = self.type.upper().removesuffix("NOT NULL").strip()
        return text.split("(", 1)[0].strip()


@dataclass(frozen=True)
class TableSchema:
    """One schema version of a Paimon table."""

    id: int
    version: int
    fields: tuple[DataField, ...]
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: Mapping[str, str]
    time_millis: int | None

    @classmethod
    def from_json(cls, text: str | bytes) -> TableSchema:
        """Parse a schema file; LogError when it is not one."""
        try:
            raw = json.loads(text)
            fields = tuple(_field(f) for f in raw["fields"])
            options = {str(k): str(v) for k, v in (raw.get("options") or {}).items()}
            schema = cls(
                id=int(raw["id"]),
                version=int(raw.get("version", 1)),
                fields=fields,
                partition_keys=tuple(str(k) for k in raw.get("partitionKeys") or ()),
                primary_keys=tuple(str(k) for k in raw.get("primaryKeys") or ()),
                options=options,
                time_millis=_optional_int(raw.get("timeMillis")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise LogError(f"not a Paimon schema file: {e}") from None
        if schema.version <= 1 and BUCKET not in options:
            schema = cls(**{**schema.__dict__, "options": {**options, BUCKET: "1"}})
        return schema

    @property
    def has_primary_key(self) -> bool:
        return bool(self.primary_keys)

    @property
    def kind(self) -> str:
        """`primary-key` or `append`."""
        return "primary-key" if self.has_primary_key else "append"

    @property
    def bucket(self) -> int:
        """The `bucket` option: N fixed buckets, -1 dynamic or unaware, -2 postponed."""
        return _int_option(self.options, BUCKET, DYNAMIC_BUCKET)

    @property
    def deletion_vectors(self) -> bool:
        return _bool_option(self.options, DV_ENABLED)

    @property
    def bitmap64(self) -> bool:
        return _bool_option(self.options, DV_BITMAP64)

    @property
    def data_directory(self) -> str:
        """The folder (relative to the table, "" for the table folder) that holds the
        partition and bucket folders: `data-file.path-directory`."""
        return self.options.get(DATA_FILE_PATH_DIRECTORY, "").strip().strip("/")

    @property
    def target_file_size(self) -> int | None:
        """`target-file-size` in bytes (Paimon's default by table kind); None when it is
        set to something that is no size."""
        value = self.options.get(TARGET_FILE_SIZE)
        if value is None:
            return PK_TARGET_FILE_SIZE if self.has_primary_key else APPEND_TARGET_FILE_SIZE
        try:
            size = parse_byte_size(value)
        except ValueError:
            return None
        return size if size > 0 else None

    def field(self, name: str) -> DataField:
        """The column named `name`; LogError when the schema has none."""
        for f in self.fields:
            if f.name == name:
                return f
        raise LogError(f"the Paimon schema {self.id} has no column {name!r}")

    def partition_fields(self) -> tuple[DataField, ...]:
        return tuple(self.field(k) for k in self.partition_keys)


def _field(raw: Mapping[str, Any]) -> DataField:
    kind = raw["type"]
    if not isinstance(kind, str):  # nested types are JSON objects; their name is enough here
        kind = str(kind.get("type", "ROW")) if isinstance(kind, Mapping) else str(kind)
    return DataField(int(raw["id"]), str(raw["name"]), kind)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _bool_option(options: Mapping[str, str], key: str) -> bool:
    return options.get(key, "false").strip().lower() == "true"


def _int_option(options: Mapping[str, str], key: str, default: int) -> int:
    value = options.get(key)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise LogError(f"the Paimon table option {key} is not a number: {value!r}") from None
