"""Table features: what a protocol action requires of readers and writers.

Tables at reader version 3 / writer version 7 list their features by name; older tables imply
a fixed set by their version numbers. `reader_features`/`writer_features` return the effective
sets either way, and the `require_*` gates refuse a table that needs a feature dvtool does not
implement, naming it, before anything is read or written.
"""

from __future__ import annotations

from dvtool.core.actions import Protocol
from dvtool.errors import UnsupportedFeatureError

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
