"""README.md's table features x commands table is the rule: every cell is checked here against
the gate (`dvtool.delta.protocol.features`), so documentation and code cannot drift apart.

A cell `yes` means the feature does not block the command on a table without special
properties; `yes (n)` the same, with footnote n naming a table property under which the
gate refuses (checked here for the footnotes that are property rules); `no` means the
gate refuses the command, naming the feature. What each supported cell does when the command
runs is tested against independent readers in the command tests (tests/commands/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.features import (
    COMMANDS,
    READ_SUPPORTED,
    require_readable,
    require_writable,
)
from dvtool.errors import UnsupportedFeatureError, WriteRefusedError

README = Path(__file__).resolve().parents[1] / "README.md"
UNKNOWN = "any other (unknown) feature"
# Footnotes that are property rules: (property, value, commands the property blocks).
PROPERTY_FOOTNOTES = {
    "1": {"delta.appendOnly": "true"},
    "5": {"delta.enableIcebergCompatV2": "true", "delta.enableIcebergCompatV1": "true"},
}


def _matrix() -> tuple[list[str], dict[str, dict[str, str]]]:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| feature | inspect"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return header[1:], rows


COLUMNS, ROWS = _matrix()
CELLS = [
    pytest.param(feature, column, cell, id=f"{feature}-{column}")
    for names, row in ROWS.items()
    for feature in (["someFutureFeature"] if names == UNKNOWN else names.split(", "))
    for column, cell in row.items()
]


def test_the_table_has_every_command_as_a_column() -> None:
    assert list(COMMANDS) == COLUMNS


def test_the_table_covers_the_features_the_issue_names() -> None:
    listed = {f for names in ROWS for f in names.split(", ")}
    for feature in (
        "rowTracking",
        "clustering",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantShredding",
        "icebergCompatV1",
        "icebergCompatV2",
        "icebergCompatV3",
        "icebergWriterCompatV1",
        "collations",
        "catalogManaged",
        "catalogOwned-preview",
        "geospatial",
        "materializePartitionColumns",
        "columnMapping",
    ):
        assert feature in listed, feature


def _protocol(feature: str) -> Protocol:
    reader = ("deletionVectors", feature) if _is_reader(feature) else ("deletionVectors",)
    return Protocol(3, 7, reader, ("deletionVectors", feature))


def _is_reader(feature: str) -> bool:
    return feature in READ_SUPPORTED or feature in {
        "catalogManaged",
        "catalogOwned-preview",
        "geospatial",
    }


def _metadata(configuration: dict[str, str] | None = None) -> Metadata:
    return Metadata("id", '{"type":"struct","fields":[]}', (), configuration or {})


def _allowed(feature: str, column: str, configuration: dict[str, str] | None = None) -> bool:
    protocol = _protocol(feature)
    try:
        if COMMANDS[column].writes:
            require_writable(protocol, _metadata(configuration), column)
        else:
            require_readable(protocol)
    except (UnsupportedFeatureError, WriteRefusedError):
        return False
    return True


@pytest.mark.parametrize(("feature", "column", "cell"), CELLS)
def test_cell_matches_the_gate(feature: str, column: str, cell: str) -> None:
    expected = cell.startswith("yes")
    if feature == "someFutureFeature" and column == "inspect":
        assert cell.startswith("no if a reader feature, else yes")
        assert _allowed(feature, column)  # a writer-only feature does not block reading
        with pytest.raises(UnsupportedFeatureError, match="readerX"):
            require_readable(Protocol(3, 7, ("readerX",), ("readerX",)))
        return
    assert _allowed(feature, column) is expected, cell
    footnote = re.search(r"\((\d)\)", cell)
    if footnote and footnote.group(1) in PROPERTY_FOOTNOTES:
        for key, value in PROPERTY_FOOTNOTES[footnote.group(1)].items():
            assert not _allowed(feature, column, {key: value}), (key, cell)


@pytest.mark.parametrize(("feature", "column", "cell"), [c for c in CELLS if c.values[2] == "no"])
def test_refusals_name_the_feature_and_why(feature: str, column: str, cell: str) -> None:
    protocol = _protocol(feature)
    with pytest.raises(UnsupportedFeatureError) as info:
        if COMMANDS[column].writes:
            require_writable(protocol, _metadata(), column)
        else:
            require_readable(protocol)
    message = str(info.value)
    assert feature in message
    assert "(" in message  # the reason follows the feature name
