"""Paimon tables partitioned by every kind of column, and tables of ORC and Avro data files,
against Paimon's Java code (the `paimon_java` session).

- Partition folders: for values of every type a partition column may have, Paimon's own
  `BinaryRow` bytes (as manifests hold them) and the folder Paimon's
  `InternalRowPartitionComputer` and `PartitionPathUtils` name for them, with
  `partition.legacy-name` true and false; dvtool decodes the bytes and names the same
  folder, or refuses where Paimon's name cannot be known (a BINARY value's Java identity,
  a local-time-zone timestamp printed in the writer's time zone).
- The tables of tests/reference/paimon_partition_tables.py: `inspect --verify` finds every
  data file where Paimon's reader does (its splits' bucket folders), counts the rows
  Paimon reads, and finds no problem; ORC and Avro data files' rows are counted from their
  own metadata, and corrupt copies are reported with the problem kinds of Parquet files.
- A deletion file that cannot be read (a directory where the file should be): a
  `--verify` problem, and an error of plain `inspect` where it must count DVs' rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dvtool.errors import UnsupportedFeatureError
from dvtool.paimon.protocol.binary_row import BINARIES, PaimonType
from dvtool.paimon.protocol.partitions import DEFAULT_PARTITION, decode_binary_row, partition_path
from dvtool.paimon.protocol.schema import DataField
from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmSession
from tests.reference import paimon_partition_tables
from tests.reference.iceberg_writes import cli_json
from tests.reference.paimon_state import TableCopy, paimon_scan
from tests.reference.paimon_tables import copy_table
from tests.s3_server import S3Server

NAMES = [spec.name for spec in paimon_partition_tables.SPECS]


@pytest.fixture(scope="module")
def partition_tables(
    paimon_java: JvmSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The tables of paimon_partition_tables, built once per module: read-only."""
    out = tmp_path_factory.mktemp("paimon-partition-tables")
    manifest: dict[str, Any] = json.loads(
        paimon_partition_tables.build_all(paimon_java, out).read_text()
    )
    return manifest


# Values by type, as text Paimon's `TypeUtils.castFromString` reads. Not 1.0E23: Java 18 and
# older print that double as 9.999999999999999E22 (dvtool prints Java 19's shortest digits).
ASCII = [f"a{chr(c)}b" for c in range(1, 128)]
CASES: dict[str, list[str | None]] = {
    "BOOLEAN": ["true", "false"],
    "TINYINT": ["-128", "0", "127"],
    "SMALLINT": ["-32768", "7"],
    "INT": ["-2147483648", "42", None],
    "BIGINT": ["-9223372036854775808", "9223372036854775807"],
    "FLOAT": [
        "1.5",
        "-0.1",
        "0.3",
        "1.0E10",
        "3.4028235E38",
        "1.4E-45",
        "0.001",
        "9.999E-4",
        "9999999",
        "1.0E7",
        "123456.79",
        "NaN",
        "Infinity",
        "-0.0",
        "16777216",
    ],
    "DOUBLE": [
        "3.141592653589793",
        "1.0E-5",
        "-2.0E20",
        "4.9E-324",
        "1.7976931348623157E308",
        "0.1",
        "100",
        "1234567.0",
        "12345678.9",
        "-Infinity",
        "0.002",
        "2.5E-3",
    ],
    "DECIMAL(10, 2)": ["-12.50", "0.00", "123.45", "99999999.99"],
    "DECIMAL(18, 4)": ["12345678901234.5678", "-0.0001"],
    "DECIMAL(19, 0)": ["1234567890123456789", "-1"],
    "DECIMAL(38, 10)": ["12345678901234567890.0123456789", "-1.5", "0"],
    "CHAR(4)": ["ab", "x#?", "    "],
    "VARCHAR(40)": [
        "",
        "   ",
        "\u00a0",
        "\u2003",
        "\x85",
        "\u3000",
        "\x1c",
        "ü ñ",
        "日本",
        "😀",
        "a string longer than seven bytes",
    ],
    "STRING": ASCII,
    "VARBINARY(32)": ["abc", "a/b:c=d", "a long binary value", ""],
    "BINARY(3)": ["xyz"],
    "BYTES": ["bytes beyond seven"],
    "DATE": ["2024-05-14", "1969-12-31", "0001-01-01", "9999-12-31", "1582-10-04"],
    "TIME(0)": ["10:15:30"],
    "TIME(3)": ["10:15:30.5", "00:00:00", "23:59:59.999", "10:15:30.05"],
    "TIMESTAMP(0)": ["2024-05-14 10:15:30", "1960-01-01 00:00:00"],
    "TIMESTAMP(3)": ["2024-05-14 10:15:30.123", "2024-05-14 00:00:00", "1969-12-31 23:59:59.999"],
    "TIMESTAMP(6)": ["2024-05-14 10:15:30.123456", "2024-05-14 10:15:30.1", "1900-01-01 00:00:00"],
    "TIMESTAMP(9)": [
        "2024-05-14 10:15:30.123456789",
        "2024-05-14 10:15:00",
        "1960-01-01 00:00:00.000001",
        "2024-05-14 10:15:30.120000",
    ],
    "TIMESTAMP(3) WITH LOCAL TIME ZONE": ["2024-05-14 10:15:30.123"],
    "TIMESTAMP(9) WITH LOCAL TIME ZONE": ["2024-05-14 10:15:30.123456789", "2024-05-14 10:15:00"],
}

# Runs in the engine's process: each value's serialized BinaryRow (as a manifest's
# `_PARTITION` holds it) and the folder Paimon names for it, legacy names and not.
FOLDERS = """
P = jvm.org.apache.paimon
names = spark.sparkContext._gateway.new_array(jvm.java.lang.String, 1)
names[0] = "c"
out = []
for type_text, texts in args["cases"].items():
    row_type = P.types.RowType.builder().field(
        "c", P.types.DataTypeJsonParser.parseAtomicTypeSQLString(type_text)).build()
    for text in texts:
        spec = jvm.java.util.LinkedHashMap()
        spec.put("c", args["null"] if text is None else text)
        row = P.utils.InternalRowPartitionComputer.convertSpecToInternalRow(
            spec, row_type, args["null"])
        binary = P.data.serializer.InternalRowSerializer(row_type).toBinaryRow(row).copy()
        entry = {"type": type_text, "value": text,
                 "bytes": bytes(P.utils.SerializationUtils.serializeBinaryRow(binary)).hex()}
        for legacy in (True, False):
            computer = P.utils.InternalRowPartitionComputer(
                args["default"], row_type, names, legacy)
            values = computer.generatePartValues(binary)
            key = "legacy" if legacy else "cast"
            entry[key] = P.utils.PartitionPathUtils.generatePartitionPath(values)
        out.append(entry)
result = out
"""


def _refused(kind: PaimonType, legacy: bool) -> bool:
    return (kind.root in BINARIES and legacy) or (kind.root == "TIMESTAMP_LTZ" and not legacy)


def test_partition_folders_as_paimon_names_them(paimon_java: JvmSession) -> None:
    folders = paimon_java.python(FOLDERS, cases=CASES, null="__NULL__", default=DEFAULT_PARTITION)
    assert len(folders) == sum(len(v) for v in CASES.values())
    for case in folders:
        field = DataField(0, "c", case["type"])
        [value] = decode_binary_row(bytes.fromhex(case["bytes"]), [field])
        kind = PaimonType.parse(case["type"])
        for legacy, key in ((True, "legacy"), (False, "cast")):
            where = f"{case['type']} {case['value']!r} legacy={legacy}"
            if _refused(kind, legacy) and value is not None:
                with pytest.raises(UnsupportedFeatureError, match=f"'c' of type {kind.root}"):
                    partition_path(["c"], [value], legacy_name=legacy, types=[kind])
                continue
            ours = partition_path(["c"], [value], legacy_name=legacy, types=[kind])
            assert ours + "/" == case[key], where


@pytest.mark.parametrize("name", NAMES)
def test_inspect_finds_every_file_where_paimon_reads_it(
    name: str, partition_tables: dict[str, Any], paimon_java: JvmSession
) -> None:
    entry = partition_tables[name]
    scan = paimon_scan(paimon_java, entry["path"])
    doc = cli_json("inspect", entry["path"], "--files", "--verify")
    assert doc["verify"]["ok"], doc["verify"]["problems"]
    assert doc["verify"]["files_checked"] == doc["num_files"] > 0
    assert doc["logical_rows"] == scan["rows"] == entry["expected_rows"]
    assert doc["physical_rows"] == sum(f["rows"] for f in scan["files"])
    assert doc["deleted_rows"] == sum(f["dv"]["cardinality"] for f in scan["files"] if f["dv"])
    read = {f"{entry['path']}/{f['path']}" for f in doc["files"] if f["visible"]}
    assert read == {f["path"] for f in scan["files"]}
    if "DV" in name.upper() or name in ("numbers", "times_legacy", "times_cast"):
        assert doc["files_with_dvs"] > 0, "no DVs: the fixture changed"


def test_tables_on_object_storage_read_as_on_disk(
    partition_tables: dict[str, Any], s3_server: S3Server
) -> None:
    """ORC and Avro data files, and partition folders with escapes, spaces and non-ASCII
    characters in their names, read from the S3 emulator as from disk."""
    for name in ("orc_dv", "avro_dv", "strings", "times_cast"):
        local = partition_tables[name]["path"]
        uri = s3_server.upload(Path(local), f"paimon/{name}")
        on_disk = cli_json("inspect", local, "--files", "--verify")
        on_s3 = cli_json("inspect", uri, *s3_server.cli_options(), "--files", "--verify")
        assert on_s3["verify"]["ok"] and on_s3["verify"] == on_disk["verify"], name
        assert on_s3["files"] == on_disk["files"], name


def _schema_option(copy: Path, key: str, value: str) -> None:
    """Set a table option in the copy's latest schema file."""
    schema = max(copy.glob("schema/schema-*"), key=lambda p: int(p.name.split("-")[1]))
    doc = json.loads(schema.read_text())
    doc["options"][key] = value
    schema.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("name", "legacy", "column", "kind"),
    [("binary_cast", "true", "bin", "VARBINARY"), ("times_legacy", "false", "lz", "TIMESTAMP_LTZ")],
)
def test_folders_paimon_names_unrecoverably_are_refused(
    name: str,
    legacy: str,
    column: str,
    kind: str,
    partition_tables: dict[str, Any],
    tmp_path: Path,
) -> None:
    copy = copy_table(partition_tables[name], tmp_path / name)
    _schema_option(copy, "partition.legacy-name", legacy)
    result = run("inspect", str(copy))
    assert result.exit_code == 7, all_output(result)
    first, second = result.stderr.strip().splitlines()[-2:]
    assert f"partition column '{column}' of type {kind}" in first and "legacy-name" in first
    assert "Paimon" in second


# -- ORC and Avro data files ------------------------------------------------------------------


def _data_file(copy: TableCopy, suffix: str) -> Path:
    """A live data file: the one the first DV is of."""
    name = copy.index_entries()[0]["_DELETIONS_VECTORS_RANGES"][0]["f0"]
    assert name.endswith(f".{suffix}")
    return next(copy.root.glob(f"part=*/bucket-*/{name}"))


@pytest.mark.parametrize("name", ["orc_dv", "avro_dv"])
def test_orc_and_avro_damage_is_found(
    name: str, partition_tables: dict[str, Any], tmp_path: Path
) -> None:
    suffix = name.split("_")[0]
    truncated = TableCopy(copy_table(partition_tables[name], tmp_path / "t"))
    path = _data_file(truncated, suffix)
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    problems = cli_json("inspect", truncated.root, "--verify", code=6)["verify"]["problems"]
    kinds = {p["kind"] for p in problems}
    assert kinds == {"data-file-size", "data-file-unreadable"}, problems
    unreadable = next(p for p in problems if p["kind"] == "data-file-unreadable")
    assert f"cannot count the rows of {suffix} file" in unreadable["message"]
    assert unreadable["data_file"].endswith(path.name)

    counted = TableCopy(copy_table(partition_tables[name], tmp_path / "c"))
    name_of = _data_file(counted, suffix).name
    counted.edit_data_file(name_of, lambda f: f.update({"_ROW_COUNT": f["_ROW_COUNT"] + 1}))
    problems = cli_json("inspect", counted.root, "--verify", code=6)["verify"]["problems"]
    assert [p["kind"] for p in problems] == ["data-file-row-count"], problems
    assert problems[0]["data_file"].endswith(name_of)


# -- a deletion file that cannot be read -------------------------------------------------------


def test_an_unreadable_deletion_file_is_a_problem(
    partition_tables: dict[str, Any], tmp_path: Path
) -> None:
    copy = TableCopy(copy_table(partition_tables["numbers"], tmp_path / "t"))
    path, _ = copy.deletion_file()
    path.unlink()
    path.mkdir()
    doc = cli_json("inspect", copy.root, "--verify", code=6)
    [problem] = doc["verify"]["problems"]
    assert problem["kind"] == "deletion-file-unreadable", problem
    assert problem["deletion_file"] == f"index/{path.name}"
    assert problem["message"].startswith(f"cannot read index/{path.name}: ")
    assert "\n" not in problem["message"]
    text = run("inspect", str(copy.root), "--verify")
    assert text.exit_code == 6, all_output(text)
    assert "deletion-file-unreadable" in text.stdout
    assert run("inspect", str(copy.root)).exit_code == 0  # the index manifest has the counts


def test_an_unreadable_deletion_file_inspect_must_count_from_fails(
    partition_tables: dict[str, Any], tmp_path: Path
) -> None:
    """DVs without a recorded cardinality (older Paimon) are counted from their deletion
    file: one that cannot be read is a storage error (exit 8) naming it, in two lines."""
    copy = TableCopy(copy_table(partition_tables["numbers"], tmp_path / "t"))

    def forget(entry: dict[str, Any]) -> None:
        for dv in entry["_DELETIONS_VECTORS_RANGES"]:
            dv["_CARDINALITY"] = None

    copy.edit_index(forget)
    path, _ = copy.deletion_file()
    path.unlink()
    path.mkdir()
    result = run("inspect", str(copy.root))
    assert result.exit_code == 8, all_output(result)
    message, hint = result.stderr.strip().splitlines()
    assert message.startswith(f"error: cannot read the deletion file index/{path.name} ")
    assert f"dvtool inspect {copy.root} --verify" in hint
