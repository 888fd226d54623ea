"""Table features, and the gate that decides which dvtool command may run on a table.

Tables at reader version 3 / writer version 7 list their features by name; older tables imply
a fixed set by their version numbers. `reader_features`/`writer_features` return the effective
sets either way.

The rule (PROTOCOL.md "Table Features"): **a feature blocks only the commands it
constrains**. `COMMANDS` names dvtool's commands as the README's feature table does, and
`feature_refusal(feature, command, metadata)` says why a feature blocks a command, or None:

- features dvtool implements for every command (`SUPPORTED`) block nothing; some depend on a
  table property (`delta.appendOnly=true` blocks deleting rows; an active Iceberg
  compatibility or Hudi UniForm forbids deletion vectors);
- features whose commits must go through a catalog, or whose data types dvtool does not
  know, block every command, reading included (`REFUSED`);
- writer features dvtool knows of but cannot honour (`WRITE_REFUSED`: `liquid`, the
  pre-`clustering` Databricks name) block every writing command, saying what they are;
- any other feature is unknown: unknown reader features block everything, unknown writer
  features every writing command.

`require_readable` and `require_writable` raise the refusal, naming every blocking feature and
why, before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.schema import StructType
from dvtool.delta.protocol.type_widening import require_supported_type_changes
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


def deletion_vectors_supported(protocol: Protocol) -> bool:
    """Whether the protocol allows deletion vectors at all (reader 3 / writer 7 feature)."""
    return "deletionVectors" in reader_features(protocol) and "deletionVectors" in writer_features(
        protocol
    )


# -- commands --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A dvtool command as far as table features care.

    `name` is its column in the README's feature table; `writes`: it commits or writes files;
    `changes_data`: it removes rows (`dataChange=true`), which append-only tables forbid;
    `rewrites`: it writes new data files; `writes_dvs`: it writes deletion vectors.
    """

    name: str
    writes: bool = True
    changes_data: bool = False
    rewrites: bool = False
    writes_dvs: bool = False


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("inspect", writes=False),
        Command("enable"),
        Command("delete dv", changes_data=True, writes_dvs=True),
        Command("delete cow", changes_data=True, rewrites=True),
        Command("purge", rewrites=True),
        Command("compaction", rewrites=True),
        Command("vacuum"),
        Command("generate-manifest"),
        Command("downgrade", rewrites=True),
        Command("restore", changes_data=True),
    )
}
# Operation names the commands used before the table above (commitInfo operations).
_ALIASES = {
    "DELETE": "delete dv",
    "REORG": "purge",
    "OPTIMIZE": "compaction",
    "MANIFEST": "generate-manifest",
}


def command(name: str) -> Command:
    """The command called `name` (a README column or an operation name, any case)."""
    key = _ALIASES.get(name.upper(), name.lower())
    if key not in COMMANDS:
        known = ", ".join(COMMANDS)
        raise ValueError(f"unknown command {name!r}; known: {known}")
    return COMMANDS[key]


# -- the rules -------------------------------------------------------------------------------

# Features dvtool implements for every command, each as PROTOCOL.md requires:
# - appendOnly: `delta.appendOnly=true` refuses deleting rows (rearranging is allowed);
# - invariants, checkConstraints, generatedColumns, allowColumnDefaults, identityColumns:
#   dvtool writes no new values, it removes rows or copies them unchanged;
# - changeDataFeed: deletes write change data; rewrites are dataChange=false;
# - columnMapping: files are read by field id (id mode) or physical name, written with both;
# - deletionVectors, timestampNtz, v2Checkpoint, vacuumProtocolCheck, inCommitTimestamp;
# - domainMetadata: domains are kept (checkpoints carry them, commits never drop them);
# - checkpointProtection: dvtool never cleans up metadata before the protected version;
# - clustering: rewrites keep stats of clustering columns, `clusteringProvider` only 1:1;
# - typeWidening: files from before a change are read as the current type, rewrites write
#   it, and widened columns are not skipped on by min/max;
# - variantType, variantShredding: variant columns are copied as the files hold them, with
#   nullCount statistics only; a --where on one is refused;
# - collations: string comparisons on collated columns are refused in --where;
# - rowTracking: DV deletes keep baseRowId/defaultRowCommitVersion; rewrites write the
#   materialized row ids and commit versions and assign fresh ones above the high-water mark;
# - materializePartitionColumns: rewrites write partition values into the files;
# - icebergCompatV1/V2/V3, icebergWriterCompatV1: rewrites materialize partition columns,
#   write field ids and numRecords; deletion vectors are refused while V1/V2 is enabled.
SUPPORTED = frozenset(
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
        "clustering",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding",
        "variantShredding-preview",
        "collations",
        "collations-preview",
        "rowTracking",
        "materializePartitionColumns",
        "icebergCompatV1",
        "icebergCompatV2",
        "icebergCompatV3",
        "icebergWriterCompatV1",
        "icebergWriterCompatV3",
    }
)
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
        "collations",
        "collations-preview",
        "geospatial",
    }
)
# Reader features dvtool reads exactly: the log, DVs and data files of such tables.
READ_SUPPORTED = SUPPORTED & READER_WRITER_FEATURES

_CATALOG = (
    "its commits must go through the table's catalog (PROTOCOL.md 'Catalog-managed tables'), "
    "and the catalog may hold commits the file system does not show yet"
)
# Features that block every command, with why.
REFUSED: dict[str, str] = {
    "catalogManaged": _CATALOG,
    "catalogOwned-preview": _CATALOG,
    "geospatial": "its geometry and geography column types are unknown to dvtool",
}
# Writer features dvtool knows of but cannot honour: they block every writing command (as any
# unknown writer feature does), with a reason that says what they are. Reading is unaffected.
#
# liquid: the writer feature early Databricks runtimes listed for liquid clustering (with the
# table property `delta.liquid.clusteringColumns` and a `delta.liquid` domain), before Delta
# defined the `clustering` feature (PROTOCOL.md "Clustered Table"). It is not an alias of
# `clustering`: Delta Spark's TableFeature.allSupportedFeaturesMap has no `liquid` (its
# ClusteringTableFeature is named `clustering`; "liquid" is only the clusteringProvider value
# ClusteredTableUtils gives clustered files), so Delta Spark refuses to write such a table as
# an unsupported writer feature, and delta-rs (deltalake) refuses it as an unknown one. Its
# write rules were never published, so dvtool refuses too rather than guess them; readers
# (Delta Spark, deltalake, polars, dvtool inspect) read the table, as for any writer feature.
WRITE_REFUSED: dict[str, str] = {
    "liquid": "the name early Databricks runtimes gave liquid clustering; Delta Lake never "
    "defined it and Delta Spark and delta-rs refuse to write such a table too, so its write "
    "rules are unknown",
}


def feature_refusal(feature: str, cmd: Command, metadata: Metadata) -> str | None:
    """Why `feature` blocks `cmd` on a table with `metadata`, or None when it does not."""
    if feature in REFUSED:
        return REFUSED[feature]
    if feature not in SUPPORTED:
        return WRITE_REFUSED.get(feature, "unknown to dvtool") if cmd.writes else None
    config = metadata.configuration
    if feature == "appendOnly" and cmd.changes_data and _is_true(config.get("delta.appendOnly")):
        return "the table is append-only (delta.appendOnly=true)"
    return None


# Table properties under which Delta forbids deletion vectors: `enable` and DV deletes refuse.
DV_FORBIDDING_PROPERTIES: dict[str, str] = {
    "delta.enableIcebergCompatV1": "icebergCompatV1 requires that deletion vectors are not "
    "supported",
    "delta.enableIcebergCompatV2": "icebergCompatV2 requires that deletion vectors are not active",
    "delta.compatibility.symlinkFormatManifest.enabled": "incremental symlink manifests "
    "cannot express deleted rows",
}


def table_refusal(cmd: Command, metadata: Metadata) -> str | None:
    """Why a table property (not a feature) blocks `cmd`, or None: the properties that forbid
    deletion vectors, and Hudi UniForm, block `enable` and DV deletes."""
    if not (cmd.writes_dvs or cmd.name == "enable"):
        return None
    config = metadata.configuration
    for key, why in DV_FORBIDDING_PROPERTIES.items():
        if _is_true(config.get(key)):
            return f"{key}=true: {why}"
    formats = str(config.get("delta.universalFormat.enabledFormats", ""))
    if "hudi" in (f.strip().lower() for f in formats.split(",")):
        return (
            "delta.universalFormat.enabledFormats contains hudi: Hudi UniForm forbids "
            "deletion vectors"
        )
    return None


# -- the gates -------------------------------------------------------------------------------


def require_readable(
    protocol: Protocol, supported: frozenset[str] = READ_SUPPORTED, schema: StructType | None = None
) -> None:
    """Refuse a table whose reader protocol needs something dvtool cannot read correctly;
    with `schema`, also one that records a type change dvtool cannot convert."""
    if protocol.min_reader_version > 3:
        raise UnsupportedFeatureError(
            f"the table requires reader version {protocol.min_reader_version}; "
            "dvtool reads versions 1 to 3"
        )
    missing = sorted(reader_features(protocol) - supported)
    if missing:
        reasons = ", ".join(_explain(f, REFUSED.get(f, "unknown to dvtool")) for f in missing)
        raise UnsupportedFeatureError(
            f"the table uses reader feature(s) dvtool cannot read: {reasons}",
            hint="dvtool refuses to read it rather than return wrong results.",
        )
    if schema is not None and reader_features(protocol) & {"typeWidening", "typeWidening-preview"}:
        require_supported_type_changes(schema)


def require_writable(
    protocol: Protocol, metadata: Metadata, operation: str, schema: StructType | None = None
) -> None:
    """Refuse to run `operation` (a `COMMANDS` name or operation name) on the table.

    UnsupportedFeatureError names every reader feature dvtool cannot read and every feature
    that blocks the command, with why; WriteRefusedError when only table properties block it
    (`delta.appendOnly`, an active Iceberg compatibility, Hudi UniForm).
    """
    cmd = command(operation)
    if protocol.min_reader_version > 3 or protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"the table requires reader version {protocol.min_reader_version} and writer "
            f"version {protocol.min_writer_version}; dvtool writes tables up to reader "
            "version 3 and writer version 7"
        )
    problems: list[str] = []
    missing_reader = sorted(reader_features(protocol) - READ_SUPPORTED)
    if missing_reader:
        problems.append(
            "reader feature(s) "
            + ", ".join(_explain(f, REFUSED.get(f, "unknown to dvtool")) for f in missing_reader)
        )
    refusals = _refusals(writer_features(protocol), cmd, metadata)
    unsupported = {f: why for f, why in refusals.items() if not _property_rule(f)}
    if unsupported:
        problems.append(
            "writer feature(s) " + ", ".join(_explain(f, w) for f, w in unsupported.items())
        )
    if problems:
        raise UnsupportedFeatureError(
            f"dvtool cannot run {cmd.name} on this table: it uses {'; and '.join(problems)}",
            hint="dvtool refuses to write it rather than corrupt it; use an engine that "
            "supports these features.",
        )
    if schema is not None:
        require_readable(protocol, schema=schema)
    rules = [why for f, why in refusals.items() if _property_rule(f)]
    table = table_refusal(cmd, metadata)
    if table:
        rules.append(table)
    if rules:
        raise WriteRefusedError(
            f"{cmd.name} refused: {'; '.join(rules)}", hint=_property_hint(rules[0])
        )


def _property_rule(feature: str) -> bool:
    """Whether `feature`'s refusals come from table properties (not from the feature)."""
    return feature in SUPPORTED


def _refusals(features: frozenset[str], cmd: Command, metadata: Metadata) -> dict[str, str]:
    out = {}
    for feature in sorted(features):
        why = feature_refusal(feature, cmd, metadata)
        if why is not None:
            out[feature] = why
    return out


def _property_hint(reason: str) -> str:
    # dvtool never changes table properties: what it can do, or who else must act.
    if "append-only" in reason:
        return (
            "dvtool deletes no rows from an append-only table (optimize, vacuum and checkpoint "
            "still work); if rows may be deleted, the table's owner must set "
            "delta.appendOnly=false with their engine (Spark, delta-rs)."
        )
    return (
        "Delete with --mode cow (rewrites files instead of writing deletion vectors), or have "
        "the table's owner unset the property with their engine if the table no longer needs it."
    )


def _explain(feature: str, reason: str) -> str:
    return f"{feature} ({reason})"


def _is_true(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() == "true"


def configuration_flag(configuration: Mapping[str, str], key: str) -> bool:
    """Whether table property `key` is `true` (case-insensitive, surrounding spaces ignored)."""
    return _is_true(configuration.get(key))
