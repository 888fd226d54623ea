"""Reader/writer features and the gate (`require_readable`, `require_writable`).

The feature x command table of README.md is checked against the gate in
tests/test_feature_matrix.py; here the gate's mechanics: naming, legacy protocols, the
property-driven rules and the golden tables' protocols.
"""

from __future__ import annotations

import json

import pytest

from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.features import (
    COMMANDS,
    READ_SUPPORTED,
    SUPPORTED,
    command,
    reader_features,
    require_readable,
    require_writable,
    writer_features,
)
from dvtool.delta.protocol.protocol_upgrade import (
    dependent_features,
    normalized_protocol,
    protocol_features,
    without_features,
)
from dvtool.delta.protocol.schema import parse_schema
from dvtool.errors import UnsupportedFeatureError, WriteRefusedError
from tests.conftest import GOLDEN

META = Metadata("id", '{"type":"struct","fields":[]}', (), {})
WRITING = sorted(name for name, c in COMMANDS.items() if c.writes)


def protocol(*writer: str, reader: tuple[str, ...] = ("deletionVectors",)) -> Protocol:
    return Protocol(3, 7, reader, ("deletionVectors", *writer))


def meta(**configuration: str) -> Metadata:
    return Metadata("id", "{}", (), {k.replace("_", "."): v for k, v in configuration.items()})


@pytest.mark.parametrize("operation", WRITING)
@pytest.mark.parametrize("feature", sorted(SUPPORTED))
def test_supported_features_need_only_their_properties(feature: str, operation: str) -> None:
    """With no table property set, no supported feature blocks any command."""
    reader = ("deletionVectors", feature) if feature in READ_SUPPORTED else ("deletionVectors",)
    require_writable(protocol(feature, reader=reader), META, operation)


@pytest.mark.parametrize("operation", WRITING)
@pytest.mark.parametrize("feature", ["catalogManaged", "catalogOwned-preview", "geospatial"])
def test_refused_features_block_every_command_and_say_why(feature: str, operation: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=feature) as info:
        require_writable(protocol(feature), META, operation)
    message = str(info.value)
    assert command(operation).name in message
    assert ("catalog" in message) or ("geometry" in message)


@pytest.mark.parametrize("feature", ["catalogManaged", "geospatial", "readerX"])
def test_refused_reader_features_block_reading(feature: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=feature):
        require_readable(Protocol(3, 7, (feature,), (feature,)))


def test_unknown_writer_feature_blocks_writes_only() -> None:
    proto = protocol("someFutureFeature")
    require_readable(proto)
    with pytest.raises(UnsupportedFeatureError, match=r"someFutureFeature \(unknown to dvtool\)"):
        require_writable(proto, META, "DELETE")


LIQUID_META = Metadata(
    "id", '{"type":"struct","fields":[]}', (), {"delta.liquid.clusteringColumns": "id"}
)


@pytest.mark.parametrize("operation", WRITING)
def test_liquid_is_read_but_never_written(operation: str) -> None:
    """`liquid`, the pre-`clustering` Databricks name, is no alias of `clustering`: Delta
    Spark does not know it (its clustering feature is `clustering`) and refuses writes, as
    delta-rs does; dvtool refuses every writing command too, saying what the feature is."""
    proto = protocol("liquid", "domainMetadata")
    require_readable(proto)
    with pytest.raises(UnsupportedFeatureError) as info:
        require_writable(proto, LIQUID_META, operation)
    message = str(info.value)
    assert "writer feature(s) liquid (the name early Databricks runtimes gave liquid" in message
    assert "unknown to dvtool" not in message
    assert "liquid" not in SUPPORTED


def test_reader_and_writer_side_both_named() -> None:
    proto = Protocol(
        3, 7, ("deletionVectors", "catalogManaged"), ("deletionVectors", "catalogManaged")
    )
    with pytest.raises(UnsupportedFeatureError) as info:
        require_writable(proto, META, "DELETE")
    message = str(info.value)
    assert "reader feature(s) catalogManaged" in message
    assert "writer feature(s) catalogManaged" in message


def test_every_blocking_feature_is_named() -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        require_writable(protocol("featureA", "featureB"), META, "REORG")
    for name in ("featureA", "featureB"):
        assert name in str(info.value)


def test_too_new_protocol_versions() -> None:
    with pytest.raises(UnsupportedFeatureError, match="writer version 8"):
        require_writable(Protocol(3, 8, (), ()), META, "DELETE")
    with pytest.raises(UnsupportedFeatureError, match="reader version 4"):
        require_writable(Protocol(4, 7, (), ()), META, "DELETE")


@pytest.mark.parametrize("writer_version", [1, 2, 3, 4, 5, 6])
def test_legacy_protocols_are_writable(writer_version: int) -> None:
    reader = 2 if writer_version >= 5 else 1
    require_writable(Protocol(reader, writer_version), META, "DELETE")
    assert writer_features(Protocol(1, writer_version)) <= SUPPORTED
    assert reader_features(Protocol(reader, writer_version)) <= READ_SUPPORTED


def test_append_only_refuses_deletes_only() -> None:
    proto = protocol("appendOnly")
    append_only = meta(delta_appendOnly="true")
    for operation in ("delete dv", "delete cow"):
        with pytest.raises(WriteRefusedError, match=r"delete .* refused: the table is append-only"):
            require_writable(proto, append_only, operation)
    for operation in WRITING:
        if not COMMANDS[operation].changes_data:
            require_writable(proto, append_only, operation)  # rearranging data is allowed


def test_append_only_feature_with_property_false_is_fine() -> None:
    require_writable(protocol("appendOnly"), meta(delta_appendOnly="false"), "DELETE")
    require_writable(protocol("appendOnly"), META, "DELETE")


def test_append_only_legacy_protocol() -> None:
    with pytest.raises(WriteRefusedError):
        require_writable(Protocol(1, 2), meta(delta_appendOnly="TRUE"), "DELETE")


@pytest.mark.parametrize(
    "key",
    [
        "delta.enableIcebergCompatV1",
        "delta.enableIcebergCompatV2",
        "delta.compatibility.symlinkFormatManifest.enabled",
    ],
)
def test_properties_that_forbid_dvs_block_enable_and_dv_deletes(key: str) -> None:
    metadata = Metadata("id", "{}", (), {key: "true"})
    for operation in ("enable", "delete dv"):
        with pytest.raises(WriteRefusedError, match=key):
            require_writable(protocol(), metadata, operation)
    for operation in ("delete cow", "purge", "compaction", "vacuum", "downgrade"):
        require_writable(protocol(), metadata, operation)


def test_hudi_uniform_blocks_enable_and_dv_deletes() -> None:
    metadata = meta(delta_universalFormat_enabledFormats="iceberg, hudi")
    with pytest.raises(WriteRefusedError, match="hudi"):
        require_writable(protocol(), metadata, "enable")
    require_writable(protocol(), meta(delta_universalFormat_enabledFormats="iceberg"), "enable")


def test_operation_names_case_insensitive_and_unknown() -> None:
    require_writable(protocol(), META, "delete")
    require_writable(protocol(), META, "Delete COW")
    with pytest.raises(ValueError, match="unknown command"):
        require_writable(protocol(), META, "MERGE")


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
    [
        "basic-dv-no-checkpoint",
        "v2-classic-checkpoint-parquet",
        "cdf-column-mapping-name-mode",
        "type-widening",
        "partitioned-with-materialize-feature",
    ],
)
def test_golden_tables_are_writable(name: str) -> None:
    proto, metadata = _golden_protocol_and_metadata(name)
    schema = parse_schema(metadata.schema_string)
    require_readable(proto, schema=schema)
    require_writable(proto, metadata, "OPTIMIZE", schema)


def test_unsupported_type_change_is_refused_naming_it() -> None:
    schema = parse_schema(
        json.dumps(
            {
                "type": "struct",
                "fields": [
                    {
                        "name": "n",
                        "type": "integer",
                        "nullable": True,
                        "metadata": {
                            "delta.typeChanges": [{"fromType": "long", "toType": "integer"}]
                        },
                    }
                ],
            }
        )
    )
    proto = Protocol(3, 7, ("typeWidening",), ("typeWidening",))
    with pytest.raises(UnsupportedFeatureError, match=r"n \(long -> integer\)"):
        require_readable(proto, schema=schema)


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
