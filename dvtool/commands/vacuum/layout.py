"""Which directories of a table `dvtool vacuum` looks in: Delta's hidden-file rules.

Vacuum never lists `_delta_log` nor hidden names (starting with `_` or `.`: other tools'
state, such as Hudi's `.hoodie/` or the manifests in `_symlink_format_manifest/`), except
`_change_data` at the top and partition directories (`<partition column>=...`, whose column
may start with `_`).

Delta UniForm tables keep their Iceberg metadata (metadata files, manifest lists, manifests,
`version-hint.text`) in `metadata/` at the root; no Delta action names those files, so
vacuum would take them for orphans. As Delta Spark's VACUUM does, that directory is hidden
too when the table is a UniForm Iceberg table: `delta.universalFormat.enabledFormats` lists
`iceberg`, or the protocol has an `icebergCompatV*` writer feature, or, in case the table's
properties were changed since, `metadata/` holds Iceberg metadata files. A partition column
named `metadata` gives `metadata=...` directories, never `metadata/` itself.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.schema import partition_physical_names
from dvtool.errors import LogError
from dvtool.storage.table_storage import Storage

DELTA_LOG_DIR = "_delta_log"
CHANGE_DATA_DIR = "_change_data"
ICEBERG_METADATA_DIR = "metadata"
UNIVERSAL_FORMATS_PROPERTY = "delta.universalFormat.enabledFormats"

# Iceberg table metadata (`v3.metadata.json`, `00001-<uuid>.metadata.json`, compressed
# `.gz.metadata.json` / `.metadata.json.gz`) and the version hint of Hadoop catalogs.
_ICEBERG_METADATA_FILE = re.compile(r"(\.metadata\.json(\.gz)?|^version-hint\.text)$")


@dataclass(frozen=True)
class VacuumLayout:
    """Which names vacuum looks at. `partition_prefixes`: `<column>=` for each partition
    column (logical and physical names); `iceberg_metadata`: `metadata/` at the root holds
    UniForm's Iceberg metadata and is hidden."""

    partition_prefixes: frozenset[str]
    iceberg_metadata: bool = False

    def descend(self, relative_dir: str) -> bool:
        """Whether vacuum lists a directory (relative to the root)."""
        if relative_dir in (DELTA_LOG_DIR, CHANGE_DATA_DIR):
            return relative_dir == CHANGE_DATA_DIR
        if relative_dir == ICEBERG_METADATA_DIR and self.iceberg_metadata:
            return False
        name = relative_dir.rpartition("/")[2]
        if not hidden(name):
            return True
        return any(name.startswith(p) for p in self.partition_prefixes)

    def listable(self, relative: str) -> bool:
        """Whether a file path (relative to the root) is one vacuum may delete."""
        parts = relative.split("/")
        if any(p in ("", ".", "..") for p in parts) or hidden(parts[-1]):
            return False
        return all(self.descend("/".join(parts[: i + 1])) for i in range(len(parts) - 1))


def hidden(name: str) -> bool:
    """Whether a file or directory name is hidden from vacuum (starts with `_` or `.`)."""
    return name.startswith(("_", "."))


def vacuum_layout(storage: Storage, snapshot: Snapshot) -> VacuumLayout:
    """The layout of the table at `snapshot`: its partition directories, and whether its
    `metadata/` directory is UniForm's Iceberg metadata."""
    return VacuumLayout(
        _partition_prefixes(snapshot),
        uniform_iceberg_enabled(snapshot.protocol, snapshot.metadata)
        or holds_iceberg_metadata(storage),
    )


def uniform_iceberg_enabled(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether the table is a UniForm Iceberg table: `iceberg` in its enabled universal
    formats (comma separated, any case), or an `icebergCompatV*` writer feature."""
    formats = metadata.configuration.get(UNIVERSAL_FORMATS_PROPERTY) or ""
    if "iceberg" in {f.strip().lower() for f in formats.split(",")}:
        return True
    features = protocol.writer_features or ()
    return any(f.lower().startswith("icebergcompatv") for f in features)


def holds_iceberg_metadata(storage: Storage) -> bool:
    """Whether `metadata/` at the root holds Iceberg metadata files (one listing)."""
    listing = storage.list_dir(storage.join(ICEBERG_METADATA_DIR))
    return any(_ICEBERG_METADATA_FILE.search(info.name) for info in listing)


def _partition_prefixes(snapshot: Snapshot) -> frozenset[str]:
    """Partition column names a directory may start with (`name=`): physical and logical."""
    names = set(snapshot.metadata.partition_columns)
    with contextlib.suppress(LogError):
        names.update(
            partition_physical_names(
                snapshot.schema, snapshot.metadata.partition_columns, snapshot.column_mapping_mode
            ).values()
        )
    return frozenset(f"{n}=" for n in names)
