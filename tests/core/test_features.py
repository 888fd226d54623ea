"""Reader/writer features and the writer gate (`require_writable`)."""

from __future__ import annotations

import json

import pytest

from dvtool.core.actions import Metadata, Protocol
from dvtool.core.features import (
    READ_SUPPORTED,
    WRITE_OPERATIONS,
    WRITE_SUPPORTED,
    WriteOperation,
    dependent_features,
    normalized_protocol,
    protocol_features,
    reader_features,
    require_writable,
    without_features,
    writer_features,
)
from dvtool.errors import UnsupportedFeatureError, WriteRefusedError
from tests.conftest import GOLDEN

META = Metadata("id", '{"type":"struct","fields":[]}', (), {})
OPERATIONS = sorted(WRITE_OPERATIONS)


def protocol(*writer: str, reader: tuple[str, ...] = ("deletionVectors",)) -> Protocol:
    return Protocol(3, 7, reader, ("deletionVectors", *writer))


def meta(**configuration: str) -> Metadata:
    return Metadata("id", "{}", (), {k.replace("_", "."): v for k, v in configuration.items()})


ALLOWED = [
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
]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("feature", ALLOWED)
def test_allowed_writer_features(feature: str, operation: str) -> None:
    reader = ("deletionVectors", feature) if feature in READ_SUPPORTED else ("deletionVectors",)
    require_writable(protocol(feature, reader=reader), META, operation)


REFUSED = [
    "rowTracking",
    "icebergCompatV1",
    "icebergCompatV2",
    "icebergCompatV3",
    "catalogManaged",
    "catalogOwned-preview",
    "typeWidening",
    "typeWidening-preview",
    "variantType",
    "variantType-preview",
    "someFutureFeature",
]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("feature", REFUSED)
def test_refused_writer_features_are_named(feature: str, operation: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=feature) as info:
        require_writable(protocol(feature), META, operation)
    assert "writer feature" in str(info.value)
    assert operation in str(info.value)


def test_unknown_feature_says_unknown() -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"someFutureFeature \(unknown to dvtool\)"):
        require_writable(protocol("someFutureFeature"), META, "DELETE")


def test_reader_and_writer_side_both_named() -> None:
    proto = Protocol(
        3, 7, ("deletionVectors", "catalogManaged"), ("deletionVectors", "catalogManaged")
    )
    with pytest.raises(UnsupportedFeatureError) as info:
        require_writable(proto, META, "DELETE")
    message = str(info.value)
    assert "reader feature(s) catalogManaged" in message
    assert "writer feature(s) catalogManaged" in message


def test_every_unsupported_feature_is_named() -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        require_writable(protocol("rowTracking", "variantType", "typeWidening"), META, "REORG")
    for name in ("rowTracking", "variantType", "typeWidening"):
        assert name in str(info.value)


def test_unknown_reader_feature_refused() -> None:
    with pytest.raises(UnsupportedFeatureError, match="readerX"):
        require_writable(Protocol(3, 7, ("readerX",), ("readerX",)), META, "VACUUM")


def test_clustering_allowed_for_delete_only() -> None:
    proto = protocol("clustering", "domainMetadata")
    require_writable(proto, META, "DELETE")
    for operation in ("OPTIMIZE", "REORG", "DOWNGRADE", "ENABLE"):
        with pytest.raises(UnsupportedFeatureError, match="clustering"):
            require_writable(proto, META, operation)


def test_too_new_protocol_versions() -> None:
    with pytest.raises(UnsupportedFeatureError, match="writer version 8"):
        require_writable(Protocol(3, 8, (), ()), META, "DELETE")
    with pytest.raises(UnsupportedFeatureError, match="reader version 4"):
        require_writable(Protocol(4, 7, (), ()), META, "DELETE")


@pytest.mark.parametrize("writer_version", [1, 2, 3, 4, 5, 6])
def test_legacy_protocols_are_writable(writer_version: int) -> None:
    reader = 2 if writer_version >= 5 else 1
    require_writable(Protocol(reader, writer_version), META, "DELETE")
    assert writer_features(Protocol(1, writer_version)) <= WRITE_SUPPORTED


def test_append_only_refuses_delete_only() -> None:
    proto = protocol("appendOnly")
    append_only = meta(delta_appendOnly="true")
    with pytest.raises(WriteRefusedError, match=r"append-only.*DELETE"):
        require_writable(proto, append_only, "DELETE")
    for operation in ("OPTIMIZE", "REORG", "VACUUM", "ENABLE", "DOWNGRADE", "MANIFEST"):
        require_writable(proto, append_only, operation)  # rearranging data is allowed


def test_append_only_feature_with_property_false_is_fine() -> None:
    require_writable(protocol("appendOnly"), meta(delta_appendOnly="false"), "DELETE")
    require_writable(protocol("appendOnly"), META, "DELETE")


def test_append_only_legacy_protocol() -> None:
    with pytest.raises(WriteRefusedError):
        require_writable(Protocol(1, 2), meta(delta_appendOnly="TRUE"), "DELETE")


def test_operation_names_case_insensitive_and_unknown() -> None:
    require_writable(protocol(), META, "delete")
    with pytest.raises(ValueError, match="unknown write operation"):
        require_writable(protocol(), META, "MERGE")


def test_operations_table_is_extendable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        WRITE_OPERATIONS,
        "RESTORE",
        WriteOperation("RESTORE", changes_data=True, extra_features=frozenset({"rowTracking"})),
    )
    require_writable(protocol("rowTracking"), META, "RESTORE")
    with pytest.raises(WriteRefusedError):
        require_writable(protocol(), meta(delta_appendOnly="true"), "RESTORE")


def _golden_protocol_and_metadata(name: str) -> tuple[Protocol, Metadata]:
    proto = meta_ = None
    for path in sorted((GOLDEN / name / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "protocol" in action:
                proto = Protocol.from_json(action["protocol"])
            if "metaData" in action:
                meta_ = Metadata.from_json(action["metaData"])
    assert proto is not None and meta_ is not None
    return proto, meta_


def test_golden_table_with_append_only_feature_but_no_property() -> None:
    """The table lists `appendOnly` but never sets `delta.appendOnly`: per PROTOCOL.md
    ("Append-only Tables") the restriction applies only when the property is true."""
    proto, metadata = _golden_protocol_and_metadata("v1-multi-part-partitioned-struct-stats-only")
    assert "appendOnly" in writer_features(proto)
    assert "delta.appendOnly" not in metadata.configuration
    require_writable(proto, metadata, "DELETE")
    appended_only = Metadata.from_json(
        {**metadata.raw, "configuration": {**metadata.configuration, "delta.appendOnly": "true"}}
    )
    with pytest.raises(WriteRefusedError):
        require_writable(proto, appended_only, "DELETE")
    require_writable(proto, appended_only, "REORG")


@pytest.mark.parametrize(
    "name",
    ["basic-dv-no-checkpoint", "v2-classic-checkpoint-parquet", "cdf-column-mapping-name-mode"],
)
def test_golden_tables_are_writable(name: str) -> None:
    proto, metadata = _golden_protocol_and_metadata(name)
    require_writable(proto, metadata, "OPTIMIZE")


# -- protocol normalisation ------------------------------------------------------------------


def p(
    reader: int, writer: int, rf: list[str] | None = None, wf: list[str] | None = None
) -> Protocol:
    return Protocol(
        reader, writer, None if rf is None else tuple(rf), None if wf is None else tuple(wf)
    )


def as_json(protocol: Protocol) -> dict[str, object]:
    return protocol.to_json()


@pytest.mark.parametrize(
    ("before", "remove", "add", "after"),
    [
        # Delta Spark's DV tables: nothing else remains.
        (p(3, 7, ["deletionVectors"], ["deletionVectors"]), ["deletionVectors"], [], p(1, 1)),
        (
            p(3, 7, ["deletionVectors"], ["deletionVectors"]),
            ["deletionVectors"],
            ["checkpointProtection"],
            p(1, 7, None, ["checkpointProtection"]),
        ),
        # `dvtool enable` on a 1/2 table lists the legacy features explicitly.
        (
            p(3, 7, ["deletionVectors"], ["appendOnly", "deletionVectors", "invariants"]),
            ["deletionVectors"],
            [],
            p(1, 2),
        ),
        (
            p(3, 7, ["deletionVectors"], ["appendOnly", "deletionVectors", "invariants"]),
            ["deletionVectors"],
            ["checkpointProtection"],
            p(1, 7, None, ["appendOnly", "checkpointProtection", "invariants"]),
        ),
        # Not all of 1/4's features: the table features form, writer features only.
        (
            p(3, 7, ["deletionVectors"], ["changeDataFeed", "deletionVectors"]),
            ["deletionVectors"],
            [],
            p(1, 7, None, ["changeDataFeed"]),
        ),
        # Column mapping alone is reader version 2 (implied for readers), writer features 7.
        (
            p(3, 7, ["columnMapping", "deletionVectors"], ["columnMapping", "deletionVectors"]),
            ["deletionVectors"],
            ["checkpointProtection"],
            p(2, 7, None, ["checkpointProtection", "columnMapping"]),
        ),
        # Another reader-writer feature keeps reader version 3 with its list.
        (
            p(3, 7, ["deletionVectors", "timestampNtz"], ["deletionVectors", "timestampNtz"]),
            ["deletionVectors"],
            [],
            p(3, 7, ["timestampNtz"], ["timestampNtz"]),
        ),
        (
            p(
                3,
                7,
                ["columnMapping", "deletionVectors", "v2Checkpoint"],
                ["columnMapping", "deletionVectors", "domainMetadata", "v2Checkpoint"],
            ),
            ["deletionVectors"],
            [],
            p(
                3,
                7,
                ["columnMapping", "v2Checkpoint"],
                ["columnMapping", "domainMetadata", "v2Checkpoint"],
            ),
        ),
        # Exactly a legacy set again: back to the legacy form.
        (
            p(
                2,
                7,
                None,
                [
                    "appendOnly",
                    "changeDataFeed",
                    "checkConstraints",
                    "checkpointProtection",
                    "columnMapping",
                    "generatedColumns",
                    "invariants",
                ],
            ),
            ["checkpointProtection"],
            [],
            p(2, 5),
        ),
        # Delta's own example: removing invariants from 1/3.
        (p(1, 3), ["invariants"], [], p(1, 7, None, ["appendOnly", "checkConstraints"])),
        (p(2, 5), ["columnMapping"], [], p(1, 4)),
        (p(1, 2), [], [], p(1, 2)),
        # A reader-writer feature dvtool does not know keeps its kind.
        (
            p(3, 7, ["deletionVectors", "futureFeature"], ["deletionVectors", "futureFeature"]),
            ["deletionVectors"],
            [],
            p(3, 7, ["futureFeature"], ["futureFeature"]),
        ),
    ],
)
def test_without_features_normalises(
    before: Protocol, remove: list[str], add: list[str], after: Protocol
) -> None:
    result = without_features(before, remove, add=add)
    assert as_json(result) == as_json(after)


@pytest.mark.parametrize(
    "protocol",
    [p(1, 1), p(1, 2), p(1, 3), p(1, 4), p(2, 5), p(1, 6), p(2, 6)],
)
def test_legacy_protocols_are_already_normal(protocol: Protocol) -> None:
    features, readers = protocol_features(protocol)
    assert as_json(normalized_protocol(features, readers)) == as_json(protocol)
    assert as_json(without_features(protocol, [])) == as_json(protocol)


def test_normalised_protocol_describes_the_same_features() -> None:
    names = ["appendOnly", "columnMapping", "identityColumns", "timestampNtz", "rowTracking"]
    result = normalized_protocol(names)
    assert result.min_reader_version == 3 and result.min_writer_version == 7
    assert set(writer_features(result)) == set(names)
    assert set(reader_features(result)) == {"columnMapping", "timestampNtz"}
    assert normalized_protocol([]).to_json() == {"minReaderVersion": 1, "minWriterVersion": 1}


def test_dependent_features() -> None:
    protocol = p(3, 7, ["columnMapping"], ["columnMapping", "icebergCompatV2", "domainMetadata"])
    assert dependent_features(protocol, "columnMapping") == ["icebergCompatV2"]
    assert dependent_features(protocol, "domainMetadata") == []
    assert (
        dependent_features(p(3, 7, ["deletionVectors"], ["deletionVectors"]), "deletionVectors")
        == []
    )
