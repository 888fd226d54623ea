"""Table features: what a protocol action requires of readers and writers.

Tables at reader version 3 / writer version 7 list their features by name; older tables imply
a fixed set by their version numbers. `reader_features`/`writer_features` return the effective
sets either way, and the `require_*` gates refuse a table that needs a feature dvtool does not
implement, naming it, before anything is read (`require_readable`) or written
(`require_writable`, per operation, which also honours `delta.appendOnly`).
`without_features`/`normalized_protocol` compute the protocol after dropping features, with
the lowest versions that still describe the remaining ones (as Delta normalises it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dvtool.core.actions import Metadata, Protocol
from dvtool.errors import UnsupportedFeatureError, WriteRefusedError

# Features implied by legacy protocol versions (PROTOCOL.md, "Table Features").
_LEGACY_WRITER: dict[int, tuple[str, ...]] = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}
_LEGACY_READER: dict[int, tuple[str, ...]] = {2: ("columnMapping",)}

# Reader features dvtool understands: it reads the log, DVs and parquet files of such tables
# exactly as the protocol requires.
READ_SUPPORTED = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
    }
)


def reader_features(protocol: Protocol) -> frozenset[str]:
    """Every reader feature the protocol requires, explicit or implied by its version."""
    if protocol.reader_features is not None:
        return frozenset(protocol.reader_features)
    implied: set[str] = set()
    for version, names in _LEGACY_READER.items():
        if protocol.min_reader_version >= version:
            implied.update(names)
    return frozenset(implied)


def writer_features(protocol: Protocol) -> frozenset[str]:
    """Every writer feature the protocol requires, explicit or implied by its version."""
    if protocol.writer_features is not None:
        return frozenset(protocol.writer_features)
    implied: set[str] = set()
    for version, names in _LEGACY_WRITER.items():
        if protocol.min_writer_version >= version:
            implied.update(names)
    return frozenset(implied)


def require_readable(protocol: Protocol, supported: frozenset[str] = READ_SUPPORTED) -> None:
    """Refuse a table whose reader protocol needs something dvtool cannot read correctly."""
    if protocol.min_reader_version > 3:
        raise UnsupportedFeatureError(
            f"the table requires reader version {protocol.min_reader_version}; "
            "dvtool reads versions 1 to 3"
        )
    missing = sorted(reader_features(protocol) - supported)
    if missing:
        raise UnsupportedFeatureError(
            f"the table uses reader feature(s) dvtool does not implement: {', '.join(missing)}",
            hint="dvtool refuses to read it rather than return wrong results.",
        )


def deletion_vectors_supported(protocol: Protocol) -> bool:
    """Whether the protocol allows deletion vectors at all (reader 3 / writer 7 feature)."""
    return "deletionVectors" in reader_features(protocol) and "deletionVectors" in writer_features(
        protocol
    )


# -- the writer gate ------------------------------------------------------------------------

# Writer features dvtool's writing commands (delete via DVs, DV purge/rewrite, vacuum, enable,
# downgrade, manifest) implement or leave intact, for every operation:
# - appendOnly: `delta.appendOnly=true` refuses operations that change data (see below);
# - invariants, checkConstraints, generatedColumns, allowColumnDefaults, identityColumns:
#   dvtool never writes new values, it only removes rows or copies rows unchanged;
# - changeDataFeed: the delete command writes the change data; columnMapping: files are
#   read and rewritten by physical name and field id; deletionVectors, timestampNtz;
# - domainMetadata: domains are preserved (never dropped, checkpoints keep them);
# - v2Checkpoint: dvtool's checkpoints follow the V2 spec on such tables;
# - vacuumProtocolCheck: this gate is the writer protocol check VACUUM must do;
# - checkpointProtection: dvtool writes commits and checkpoints but never cleans up metadata;
# - inCommitTimestamp: commits carry `inCommitTimestamp` (dvtool.core.commit).
WRITE_SUPPORTED = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "allowColumnDefaults",
        "identityColumns",
        "changeDataFeed",
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "checkpointProtection",
        "inCommitTimestamp",
    }
)

# Why dvtool refuses to write tables with these features (for the error message).
WRITE_REFUSED_REASONS: dict[str, str] = {
    "rowTracking": "dvtool does not assign base row IDs and row commit versions",
    "icebergCompatV1": "dvtool does not maintain Iceberg compatibility",
    "icebergCompatV2": "dvtool does not maintain Iceberg compatibility",
    "icebergCompatV3": "dvtool does not maintain Iceberg compatibility",
    "icebergWriterCompatV1": "dvtool does not maintain Iceberg compatibility",
    "clustering": "rewriting files of a clustered table is not implemented (DELETE only)",
    "catalogManaged": "commits must go through the table's catalog",
    "catalogOwned-preview": "commits must go through the table's catalog",
    "typeWidening": "files with widened column types are not rewritten correctly",
    "typeWidening-preview": "files with widened column types are not rewritten correctly",
    "variantType": "variant columns are not implemented",
    "variantType-preview": "variant columns are not implemented",
    "variantShredding-preview": "variant columns are not implemented",
}


@dataclass(frozen=True)
class WriteOperation:
    """What a writing command does, as far as table features and properties care.

    `changes_data`: it removes or changes rows (`dataChange=true`), which append-only tables
    forbid; rearranging rows (`dataChange=false`) is allowed. `extra_features`: writer
    features safe for this operation only.
    """

    name: str
    changes_data: bool = False
    extra_features: frozenset[str] = frozenset()


# The operations of dvtool's writing commands; add an entry for a new command.
WRITE_OPERATIONS: dict[str, WriteOperation] = {
    "DELETE": WriteOperation(
        "DELETE",
        changes_data=True,
        # Deleting rows through DVs does not change how files are clustered.
        extra_features=frozenset({"clustering"}),
    ),
    "OPTIMIZE": WriteOperation("OPTIMIZE"),
    "REORG": WriteOperation("REORG"),
    "VACUUM": WriteOperation("VACUUM"),
    "ENABLE": WriteOperation("ENABLE"),
    "DOWNGRADE": WriteOperation("DOWNGRADE"),
    "MANIFEST": WriteOperation("MANIFEST"),
}


def require_writable(
    protocol: Protocol,
    metadata: Metadata,
    operation: str,
    supported: frozenset[str] = WRITE_SUPPORTED,
) -> None:
    """Refuse to run `operation` on a table dvtool cannot write correctly.

    UnsupportedFeatureError names every unsupported reader feature (writers must read the
    table too) and writer feature, effective ones implied by legacy versions included.
    WriteRefusedError when a table property forbids the operation (`delta.appendOnly`).
    """
    op = WRITE_OPERATIONS.get(operation.upper())
    if op is None:
        known = ", ".join(sorted(WRITE_OPERATIONS))
        raise ValueError(f"unknown write operation {operation!r}; known: {known}")
    if protocol.min_reader_version > 3 or protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"the table requires reader version {protocol.min_reader_version} and writer "
            f"version {protocol.min_writer_version}; dvtool writes tables up to reader "
            "version 3 and writer version 7"
        )
    problems: list[str] = []
    missing_reader = sorted(reader_features(protocol) - READ_SUPPORTED)
    if missing_reader:
        problems.append("reader feature(s) " + ", ".join(_explain(f) for f in missing_reader))
    allowed = supported | op.extra_features
    missing_writer = sorted(writer_features(protocol) - allowed)
    if missing_writer:
        problems.append("writer feature(s) " + ", ".join(_explain(f) for f in missing_writer))
    if problems:
        raise UnsupportedFeatureError(
            f"dvtool cannot {op.name} this table: it uses {'; and '.join(problems)}",
            hint="dvtool refuses to write it rather than corrupt it; use an engine that "
            "supports these features.",
        )
    if op.changes_data and _is_true(metadata.configuration.get("delta.appendOnly")):
        raise WriteRefusedError(
            f"the table is append-only (delta.appendOnly=true): {op.name} would remove rows",
            hint="Unset the property (ALTER TABLE ... SET TBLPROPERTIES "
            "('delta.appendOnly'='false')) if rows may be deleted.",
        )


def _explain(feature: str) -> str:
    reason = WRITE_REFUSED_REASONS.get(feature)
    return f"{feature} ({reason})" if reason else f"{feature} (unknown to dvtool)"


def _is_true(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() == "true"


def with_feature(protocol: Protocol, feature: str, *, reader: bool) -> Protocol:
    """The protocol upgraded to explicit feature lists (3/7) that also support `feature`.

    Legacy versions are translated into the features they imply, so nothing the table
    supported before is lost; a reader-writer feature goes into both lists.
    """
    readers = set(reader_features(protocol))
    writers = set(writer_features(protocol)) | readers
    writers.add(feature)
    if reader:
        readers.add(feature)
    return Protocol(
        min_reader_version=3,
        min_writer_version=7,
        reader_features=tuple(sorted(readers)),
        writer_features=tuple(sorted(writers)),
        raw={},
    )


# -- protocol normalisation (dropping features) ---------------------------------------------

# The lowest (reader, writer) versions that imply each legacy feature (PROTOCOL.md, "Reader
# Version Requirements" and "Writer Version Requirements"). Every other feature needs the
# table features protocol: writer version 7, plus reader version 3 for reader-writer features.
LEGACY_FEATURE_VERSIONS: dict[str, tuple[int, int]] = {
    "appendOnly": (1, 2),
    "invariants": (1, 2),
    "checkConstraints": (1, 3),
    "changeDataFeed": (1, 4),
    "generatedColumns": (1, 4),
    "columnMapping": (2, 5),
    "identityColumns": (1, 6),
}

# Reader-writer features (PROTOCOL.md, "Valid Feature Names in Table Features" and the
# features' own sections); any other feature is writer-only unless a protocol lists it among
# its reader features.
READER_WRITER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "catalogManaged",
        "catalogOwned-preview",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding",
        "variantShredding-preview",
    }
)

# Features that need other features supported (PROTOCOL.md): a feature cannot be dropped while
# a feature that requires it is still supported.
REQUIRED_FEATURES: dict[str, frozenset[str]] = {
    "icebergCompatV1": frozenset({"columnMapping"}),
    "icebergCompatV2": frozenset({"columnMapping"}),
    "rowTracking": frozenset({"domainMetadata"}),
    "clustering": frozenset({"domainMetadata"}),
    "variantShredding": frozenset({"variantType"}),
    "variantShredding-preview": frozenset({"variantType-preview"}),
}


def _implied_by_versions(reader: int, writer: int) -> frozenset[str]:
    """The features a legacy protocol (writer < 7) implies, as Delta counts them: a legacy
    feature needs both its reader and its writer version (so 1/6 does not imply column
    mapping, which needs reader version 2)."""
    return frozenset(
        name for name, (r, w) in LEGACY_FEATURE_VERSIONS.items() if reader >= r and writer >= w
    )


def protocol_features(protocol: Protocol) -> tuple[frozenset[str], frozenset[str]]:
    """(all features, reader-writer features) of a protocol, as Delta's
    `implicitlyAndExplicitlySupportedFeatures`: the explicit lists at writer version 7, the
    features the versions imply below it."""
    if protocol.min_writer_version >= 7:
        readers = frozenset(protocol.reader_features or ())
        return readers | frozenset(protocol.writer_features or ()), readers
    implied = _implied_by_versions(protocol.min_reader_version, protocol.min_writer_version)
    return implied, implied & READER_WRITER_FEATURES


def normalized_protocol(features: Iterable[str], reader_writer: Iterable[str] = ()) -> Protocol:
    """The protocol with the lowest versions that supports exactly `features`, as Delta
    normalises a protocol after dropping a feature (`Protocol.normalized`).

    The legacy form (no feature lists) when a legacy version pair implies exactly these
    features, e.g. {appendOnly, invariants} -> 1/2 and no features -> 1/1; otherwise writer
    version 7 with `writerFeatures`, and reader version 3 with `readerFeatures` only when a
    reader-writer feature other than column mapping remains (column mapping alone is reader
    version 2, which implies it for readers). A feature is reader-writer when it is one of
    READER_WRITER_FEATURES or listed in `reader_writer` (pass the old protocol's reader
    features so that features unknown to dvtool keep their kind).
    """
    names = frozenset(features)
    rw = (frozenset(reader_writer) | READER_WRITER_FEATURES) & names
    reader, writer = 1, 1
    for name in names:
        r, w = LEGACY_FEATURE_VERSIONS.get(name, (3 if name in rw else 1, 7))
        reader, writer = max(reader, r), max(writer, w)
    if writer < 7 and _implied_by_versions(reader, writer) == names:
        return Protocol(min_reader_version=reader, min_writer_version=writer, raw={})
    return Protocol(
        min_reader_version=reader,
        min_writer_version=7,
        reader_features=tuple(sorted(rw)) if reader >= 3 else None,
        writer_features=tuple(sorted(names)),
        raw={},
    )


def without_features(
    protocol: Protocol, remove: Iterable[str], *, add: Iterable[str] = ()
) -> Protocol:
    """`protocol` without the features in `remove` and with the writer features in `add`,
    normalised (`normalized_protocol`). Legacy versions are first expanded into the features
    they imply, so dropping one legacy feature keeps the others."""
    features, readers = protocol_features(protocol)
    features = (features | frozenset(add)) - frozenset(remove)
    return normalized_protocol(features, reader_writer=readers)


def dependent_features(protocol: Protocol, feature: str) -> list[str]:
    """The features of `protocol` that require `feature` (they must be dropped first)."""
    supported = reader_features(protocol) | writer_features(protocol)
    return sorted(f for f in supported if feature in REQUIRED_FEATURES.get(f, frozenset()))
