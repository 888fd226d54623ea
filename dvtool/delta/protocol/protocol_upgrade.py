"""Changing a protocol: adding a feature, and dropping features with normalised versions.

`with_feature` upgrades a protocol to explicit feature lists (3/7) that also support a feature
(what `dvtool enable` commits). `without_features`/`normalized_protocol` compute the protocol
after dropping features, with the lowest versions that still describe the remaining ones, as
Delta normalises it (what `dvtool downgrade` commits).
"""

from __future__ import annotations

from collections.abc import Iterable

from dvtool.delta.protocol.actions import Protocol
from dvtool.delta.protocol.features import READER_WRITER_FEATURES, reader_features, writer_features


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
