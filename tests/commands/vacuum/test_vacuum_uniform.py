"""Vacuum never deletes the Iceberg metadata of a Delta UniForm table.

UniForm tables keep Iceberg metadata (`*.metadata.json`, manifest lists `snap-*.avro`,
manifests `*-m0.avro`, `version-hint.text`) in `metadata/` at the table root. No Delta action
names those files, so without a rule vacuum would take them for orphans. The tables here are
written by hand from PROTOCOL.md's actions (protocol with `icebergCompatV2`, column mapping in
name mode, `delta.universalFormat.enabledFormats`), every file is made older than any
retention, and vacuum runs with retention 0 (forced): full and `--lite`, dry run and real,
through `run_vacuum` and through the CLI. The metadata files must survive untouched while an
orphaned data file and an expired tombstone's file are deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from dvtool.cli import cli
from dvtool.commands.vacuum.command import (
    EXPIRED_TOMBSTONE,
    ORPHAN_DATA,
    VacuumRequest,
    VacuumResult,
    run_vacuum,
)
from dvtool.delta.log.reader import open_log

OLD_S = 1_000_000_000  # 2001-09-09: older than any retention
ICEBERG_CONFIG = {
    "delta.universalFormat.enabledFormats": "iceberg",
    "delta.enableIcebergCompatV2": "true",
}
# (logical name, Delta type, column mapping id, physical name)
COLUMNS = [
    ("id", "long", 1, "col-5f422f40-de70-45b2-88ab-1d5c90e94db1"),
    ("name", "string", 2, "col-2f0e2b8a-6d2e-4f4a-9d0c-7a1f7f5f3c11"),
]
SNAPSHOT_ID = 4_512_309_174_802_417_263


# -- the table ---------------------------------------------------------------------------------


def _schema_string() -> str:
    fields = [
        {
            "name": name,
            "type": kind,
            "nullable": True,
            "metadata": {
                "delta.columnMapping.id": field_id,
                "delta.columnMapping.physicalName": physical,
            },
        }
        for name, kind, field_id, physical in COLUMNS
    ]
    return json.dumps({"type": "struct", "fields": fields})


def _data_file(table: Path, first_id: int) -> dict[str, Any]:
    """A parquet file with physical column names and field ids; its add action."""
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    schema = pa.schema(
        [
            pa.field(COLUMNS[0][3], pa.int64(), metadata={"PARQUET:field_id": "1"}),
            pa.field(COLUMNS[1][3], pa.string(), metadata={"PARQUET:field_id": "2"}),
        ]
    )
    ids = list(range(first_id, first_id + 3))
    pq.write_table(pa.table([ids, [f"row {i}" for i in ids]], schema=schema), table / name)
    stats = {"numRecords": 3, "minValues": {COLUMNS[0][3]: ids[0]}, "nullCount": {}}
    return {
        "path": name,
        "partitionValues": {},
        "size": (table / name).stat().st_size,
        "modificationTime": OLD_S * 1000,
        "dataChange": True,
        "stats": json.dumps(stats),
    }


def _commit(table: Path, version: int, actions: Sequence[dict[str, Any]]) -> None:
    """Write commit `version`, committed (file time and commitInfo) at OLD_S + version."""
    moment = OLD_S + version
    info = {"commitInfo": {"timestamp": moment * 1000, "operation": "WRITE"}}
    path = table / "_delta_log" / f"{version:020d}.json"
    path.write_text("".join(json.dumps(a) + "\n" for a in [info, *actions]))
    os.utime(path, (moment, moment))


def _write_table(
    table: Path,
    configuration: dict[str, str],
    writer_features: Sequence[str] = ("columnMapping", "icebergCompatV2"),
) -> tuple[str, str]:
    """A column-mapped table of two commits: file A added, then replaced by file B.
    Returns (A, B): A is an expired tombstone, B is live."""
    (table / "_delta_log").mkdir(parents=True)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["columnMapping"],
        "writerFeatures": list(writer_features),
    }
    config = {
        "delta.columnMapping.mode": "name",
        "delta.columnMapping.maxColumnId": str(len(COLUMNS)),
        **configuration,
    }
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": _schema_string(),
        "partitionColumns": [],
        "configuration": config,
        "createdTime": OLD_S * 1000,
    }
    first = _data_file(table, 0)
    _commit(table, 0, [{"protocol": protocol}, {"metaData": metadata}, {"add": first}])
    second = _data_file(table, 3)
    remove = {
        "path": first["path"],
        "deletionTimestamp": (OLD_S + 1) * 1000,
        "dataChange": True,
        "size": first["size"],
    }
    _commit(table, 1, [{"remove": remove}, {"add": second}])
    return first["path"], second["path"]


def _iceberg_metadata(table: Path, names: Sequence[str]) -> dict[str, str]:
    """Iceberg metadata files as UniForm's converter writes them under `metadata/`; returns
    their hashes by path. `names` picks the kinds: json, hint, snap, manifest."""
    folder = table / "metadata"
    folder.mkdir()
    files: dict[str, bytes] = {}
    for n, kind in enumerate(names):
        if kind == "json":
            doc = {
                "format-version": 2,
                "table-uuid": str(uuid.uuid4()),
                "location": table.as_uri(),
                "current-snapshot-id": SNAPSHOT_ID,
                "properties": {"delta-version": "1", "delta-timestamp": str(OLD_S * 1000)},
            }
            files[f"{n:05d}-{uuid.uuid4()}.metadata.json"] = json.dumps(doc).encode()
        elif kind == "hint":
            files["version-hint.text"] = b"1"
        elif kind == "snap":
            files[f"snap-{SNAPSHOT_ID}-1-{uuid.uuid4()}.avro"] = b"Obj\x01manifest list"
        else:
            files[f"{uuid.uuid4()}-m0.avro"] = b"Obj\x01manifest"
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return _hashes(folder)


def _hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _orphan(table: Path, relative: str) -> None:
    path = table / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1 written by a job that failed before committing PAR1")


def _remove_metadata_file(table: Path, relative: str) -> None:
    """Commit 2: a remove naming a file under `metadata/` (as a confused writer might)."""
    remove = {"path": relative, "deletionTimestamp": (OLD_S + 2) * 1000, "dataChange": True}
    _commit(table, 2, [{"remove": remove}])


def _age_data(table: Path) -> None:
    """Make every file outside `_delta_log` (metadata/ included) older than any retention."""
    for dirpath, dirnames, filenames in os.walk(table):
        dirnames[:] = [d for d in dirnames if d != "_delta_log"]
        for name in filenames:
            os.utime(Path(dirpath) / name, (OLD_S, OLD_S))


def _vacuum(table: Path, *, lite: bool = False, dry_run: bool = False) -> VacuumResult:
    request = VacuumRequest(retain_ms=0, force=True, lite=lite, dry_run=dry_run)
    return run_vacuum(open_log(str(table)), request)


def _cli(*args: str | Path) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(cli, [str(a) for a in args])


ALL_KINDS = ("json", "json", "hint", "snap", "manifest")


@pytest.fixture
def uniform(tmp_path: Path) -> tuple[Path, dict[str, str], str, str]:
    """A UniForm Iceberg table (icebergCompatV2) with its Iceberg metadata, an orphaned data
    file and an expired tombstone, everything old: (table, metadata hashes, tombstone, live)."""
    table = tmp_path / "uniform"
    tombstone, live = _write_table(table, ICEBERG_CONFIG)
    metadata = _iceberg_metadata(table, ALL_KINDS)
    _orphan(table, "part-00099-orphan.c000.snappy.parquet")
    _age_data(table)
    return table, metadata, tombstone, live


# -- full vacuum -------------------------------------------------------------------------------


def test_full_vacuum_keeps_iceberg_metadata(
    uniform: tuple[Path, dict[str, str], str, str],
) -> None:
    table, metadata, tombstone, live = uniform
    dry = _vacuum(table, dry_run=True)
    planned = {f.path: f.reason for f in dry.files}
    assert planned == {
        "part-00099-orphan.c000.snappy.parquet": ORPHAN_DATA,
        tombstone: EXPIRED_TOMBSTONE,
    }
    assert _hashes(table / "metadata") == metadata

    result = _vacuum(table)
    assert {f.path for f in result.files} == set(planned)
    assert result.deleted_files == 2 and not result.failed
    assert not (table / tombstone).exists()
    assert not (table / "part-00099-orphan.c000.snappy.parquet").exists()
    assert (table / live).is_file()
    assert _hashes(table / "metadata") == metadata


def test_empty_and_nested_metadata_directories_stay(
    uniform: tuple[Path, dict[str, str], str, str],
) -> None:
    """Nothing under `metadata/` is listed: not its subdirectories, not an empty one."""
    table, metadata, _, _ = uniform
    (table / "metadata" / "empty").mkdir()
    _orphan(table, "metadata/data/00000-0-orphan.parquet")
    os.utime(table / "metadata" / "data" / "00000-0-orphan.parquet", (OLD_S, OLD_S))
    for folder in ("metadata/empty", "metadata/data"):
        os.utime(table / folder, (OLD_S, OLD_S))
    result = _vacuum(table)
    assert not any(f.path.startswith("metadata/") for f in result.files)
    assert (table / "metadata" / "empty").is_dir()
    assert (table / "metadata" / "data" / "00000-0-orphan.parquet").is_file()
    assert set(metadata) <= set(_hashes(table / "metadata"))


def test_a_partition_directory_named_metadata_is_still_vacuumed(
    uniform: tuple[Path, dict[str, str], str, str],
) -> None:
    """Only `metadata/` itself is Iceberg's: `metadata=...` directories (a partition column
    named `metadata`) hold data as usual."""
    table, metadata, _, _ = uniform
    _orphan(table, "metadata=1/part-00000-a.parquet")
    os.utime(table / "metadata=1" / "part-00000-a.parquet", (OLD_S, OLD_S))
    result = _vacuum(table)
    assert "metadata=1/part-00000-a.parquet" in {f.path for f in result.files}
    assert not (table / "metadata=1").exists()
    assert _hashes(table / "metadata") == metadata


# Each rule alone protects `metadata/`: (table properties, writer features, files there).
DETECTIONS = {
    "enabled-formats-listing-iceberg": (
        {"delta.universalFormat.enabledFormats": " delta, ICEBERG "},
        ("columnMapping",),
        ("snap", "manifest"),
    ),
    "iceberg-compat-v1-feature": ({}, ("columnMapping", "icebergCompatV1"), ("snap", "manifest")),
    "iceberg-compat-v3-feature": ({}, ("columnMapping", "icebergCompatV3"), ("snap", "manifest")),
    "metadata-json-file": ({}, ("columnMapping",), ("json", "snap", "manifest")),
    "version-hint-file": ({}, ("columnMapping",), ("hint", "manifest")),
}


@pytest.mark.parametrize("detection", DETECTIONS.values(), ids=list(DETECTIONS))
@pytest.mark.parametrize("lite", [False, True], ids=["full", "lite"])
def test_each_rule_alone_protects_metadata(
    tmp_path: Path,
    detection: tuple[dict[str, str], tuple[str, ...], tuple[str, ...]],
    lite: bool,
) -> None:
    """With `--lite`, a remove names a metadata file: only the rule keeps it."""
    configuration, features, kinds = detection
    table = tmp_path / "t"
    tombstone, _ = _write_table(table, configuration, features)
    metadata = _iceberg_metadata(table, kinds)
    _remove_metadata_file(table, sorted(metadata)[0])
    _age_data(table)
    for dry_run in (True, False):
        result = _vacuum(table, lite=lite, dry_run=dry_run)
        assert [f.path for f in result.files] == [tombstone]
    assert _hashes(table / "metadata") == metadata


def test_metadata_without_iceberg_files_on_a_plain_table_is_vacuumed(tmp_path: Path) -> None:
    """Not UniForm and no Iceberg metadata files: `metadata/` is an ordinary directory."""
    table = tmp_path / "plain"
    _write_table(table, {"delta.universalFormat.enabledFormats": "hudi"}, ("columnMapping",))
    _orphan(table, "metadata/part-00000-orphan.parquet")
    _age_data(table)
    result = _vacuum(table)
    assert "metadata/part-00000-orphan.parquet" in {f.path for f in result.files}
    assert not (table / "metadata" / "part-00000-orphan.parquet").exists()


# -- lite vacuum -------------------------------------------------------------------------------


def test_lite_vacuum_keeps_iceberg_metadata_even_when_a_remove_names_it(
    uniform: tuple[Path, dict[str, str], str, str],
) -> None:
    table, metadata, tombstone, live = uniform
    manifest = next(p for p in metadata if p.endswith("-m0.avro"))
    _remove_metadata_file(table, manifest)
    dry = _vacuum(table, lite=True, dry_run=True)
    assert [f.path for f in dry.files] == [tombstone]
    result = _vacuum(table, lite=True)
    assert [f.path for f in result.files] == [tombstone] and result.deleted_files == 1
    assert result.lite_commits == (0, 2)
    assert not (table / tombstone).exists() and (table / live).is_file()
    # Lite reads the log only: the orphan is left for a full vacuum.
    assert (table / "part-00099-orphan.c000.snappy.parquet").is_file()
    assert _hashes(table / "metadata") == metadata


def test_lite_vacuum_deletes_a_removed_file_under_metadata_of_a_plain_table(
    tmp_path: Path,
) -> None:
    """The contrast: without UniForm or Iceberg files, the same remove's file goes."""
    table = tmp_path / "plain"
    _write_table(table, {}, ("columnMapping",))
    _orphan(table, "metadata/part-00000-removed.parquet")
    _remove_metadata_file(table, "metadata/part-00000-removed.parquet")
    _age_data(table)
    result = _vacuum(table, lite=True)
    assert "metadata/part-00000-removed.parquet" in {f.path for f in result.files}
    assert not (table / "metadata" / "part-00000-removed.parquet").exists()


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [(), ("--lite",)], ids=["full", "lite"])
def test_cli_vacuum_keeps_iceberg_metadata(
    uniform: tuple[Path, dict[str, str], str, str], mode: tuple[str, ...]
) -> None:
    table, metadata, tombstone, live = uniform
    _remove_metadata_file(table, sorted(metadata)[0])
    refused = _cli("vacuum", table, "--retain", "0h", *mode)
    assert refused.exit_code == 7 and "--force" in refused.output
    argv: tuple[str | Path, ...] = ("vacuum", table, "--retain", "0h", "--force", *mode)
    dry = _cli(*argv, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    planned = {f["path"] for f in json.loads(dry.output)["files"]}
    expected = {tombstone} if mode else {tombstone, "part-00099-orphan.c000.snappy.parquet"}
    assert planned == expected
    text = _cli(*argv, "--dry-run")
    assert text.exit_code == 0 and "metadata/" not in text.output
    real = _cli(*argv, "--json")
    assert real.exit_code == 0, real.output
    doc = json.loads(real.output)
    assert {f["path"] for f in doc["files"]} == planned and doc["failed"] == []
    assert not any((table / p).exists() for p in planned)
    assert (table / live).is_file()
    assert _hashes(table / "metadata") == metadata
