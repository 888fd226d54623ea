"""`dvtool inspect` on Paimon tables, against Paimon's own reader (the `paimon_java` session).

For every fixture table (tests/reference/paimon_tables.py: primary-key tables with 32- and
64-bit DVs, partitioned and not, one with expired snapshots and an orphan, an append table
with DVs) and, for `pk_dv`, every snapshot: the logical rows dvtool counts from metadata
are the rows Paimon's reader returns, the files it counts as read are the files of Paimon's
splits, its deleted rows the sum of the cardinalities Paimon reports, and the level-0 files
it calls pending the files Paimon's DV read leaves out. Every DV decodes (shared codec) to
the positions Paimon's `DeletionVector.read` reports and re-encodes to the bytes Paimon
wrote. `--verify` passes on every snapshot of every table and names each kind of damage
in a corrupt copy; where Paimon's reader fails on the damage too, that is checked, and
where it does not (a wrong CRC: Paimon skips it), dvtool still finds it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dvtool.deletion_vectors.paimon import decode_paimon_dv, encode_deletion_file, encode_paimon_dv
from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmError, JvmSession
from tests.reference.iceberg_writes import cli_json
from tests.reference.paimon_state import TableCopy, paimon_scan
from tests.reference.paimon_tables import SPECS, copy_table
from tests.reference.test_paimon_index_kinds import HASH_DAMAGES
from tests.s3_server import S3Server

NAMES = [spec.name for spec in SPECS]


@pytest.fixture(scope="module")
def scans(paimon_tables: dict[str, Any], paimon_java: JvmSession) -> dict[str, Any]:
    """Paimon's read of every fixture table at its latest snapshot."""
    return {name: paimon_scan(paimon_java, entry["path"]) for name, entry in paimon_tables.items()}


def _agrees(doc: dict[str, Any], scan: dict[str, Any], root: str) -> None:
    """dvtool's summary against Paimon's read of the same snapshot."""
    assert doc["format"] == "paimon" and doc["row_counts_exact"]
    assert doc["logical_rows"] == scan["rows"]
    files = scan["files"]
    assert doc["physical_rows"] == sum(f["rows"] for f in files)
    assert doc["deleted_rows"] == sum(f["dv"]["cardinality"] for f in files if f["dv"])
    assert doc["files_with_dvs"] == doc["deletion_vectors"] == sum(bool(f["dv"]) for f in files)
    read = {f"{root}/{f['path']}" for f in doc["files"] if f["visible"]}
    assert read == {f["path"] for f in files}
    assert doc["pending_level0_files"] == doc["num_files"] - len(files)
    assert all(f["level"] == 0 for f in doc["files"] if not f["visible"])


@pytest.mark.parametrize("name", NAMES)
def test_inspect_counts_what_paimon_reads(
    name: str, paimon_tables: dict[str, Any], scans: dict[str, Any]
) -> None:
    entry = paimon_tables[name]
    doc = cli_json("inspect", entry["path"], "--files")
    assert scans[name]["rows"] == len(entry["expected"])
    _agrees(doc, scans[name], entry["path"])
    assert doc["table_kind"] == ("append" if name == "append_dv" else "primary-key")
    assert doc["bitmap64"] == (name == "pk_dv_bitmap64") and doc["deletion_vectors_enabled"]


def test_every_snapshot_and_time_travel_agree_with_paimon(
    paimon_tables: dict[str, Any], paimon_java: JvmSession
) -> None:
    path = paimon_tables["pk_dv"]["path"]
    history = cli_json("inspect", path, "--history")["history"]
    assert [h["snapshot_id"] for h in history] == sorted(
        (int(p.name.split("-")[1]) for p in Path(path, "snapshot").glob("snapshot-*")),
        reverse=True,
    )
    for h in history:
        doc = cli_json("inspect", path, "--version", str(h["snapshot_id"]), "--files")
        _agrees(doc, paimon_scan(paimon_java, path, h["snapshot_id"]), path)
        assert doc["commit_kind"] == h["commit_kind"]
        at = cli_json("inspect", path, "--timestamp", _iso(h["timestamp"]))
        assert at["snapshot_id"] >= h["snapshot_id"]  # commits within one millisecond
        assert at["commit_timestamp"] == h["timestamp"]
    assert any(
        cli_json("inspect", path, "--version", str(h["snapshot_id"]))["pending_level0_files"]
        for h in history
    ), "no snapshot with level-0 files: the fixture changed"


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()


@pytest.mark.parametrize("name", NAMES)
def test_the_codec_reads_every_dv_as_paimon_and_writes_its_bytes(
    name: str, scans: dict[str, Any]
) -> None:
    dvs = [f["dv"] for f in scans[name]["files"] if f["dv"]]
    assert dvs
    for dv in dvs:
        data = Path(dv["path"]).read_bytes()
        decoded = decode_paimon_dv(data, dv["offset"], dv["length"])
        assert list(decoded.rows) == dv["positions"]
        framed, length = encode_paimon_dv(decoded.rows, decoded.bitmap64)
        assert length == dv["length"]
        assert data[dv["offset"] : dv["offset"] + len(framed)] == framed


def test_verify_passes_on_every_snapshot(paimon_tables: dict[str, Any]) -> None:
    for entry in paimon_tables.values():
        for h in cli_json("inspect", entry["path"], "--history")["history"]:
            doc = cli_json("inspect", entry["path"], "--version", str(h["snapshot_id"]), "--verify")
            assert doc["verify"]["ok"], doc["verify"]["problems"]
            assert doc["verify"]["dvs_checked"] == doc["deletion_vectors"]


def test_a_table_on_object_storage_reads_as_on_disk(
    paimon_tables: dict[str, Any], s3_server: S3Server
) -> None:
    """The same table uploaded to the S3 emulator: the same summary, files and verify
    report through the storage options (paths are relative to the table)."""
    local = paimon_tables["pk_dv"]["path"]
    uri = s3_server.upload(Path(local), "paimon/pk_dv")
    on_disk = cli_json("inspect", local, "--files", "--verify")
    on_s3 = cli_json("inspect", uri, *s3_server.cli_options(), "--files", "--verify")
    assert on_s3["verify"]["ok"] and on_s3["verify"] == on_disk["verify"]
    assert on_s3["files"] == on_disk["files"]
    for doc in (on_disk, on_s3):
        doc.pop("location"), doc.pop("files"), doc.pop("verify")
    assert on_s3 == on_disk


def test_dvs_without_a_recorded_cardinality_are_counted(
    paimon_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    """Index manifests of Paimon before 0.9 record no `_CARDINALITY`: dvtool counts the
    DVs in their deletion files, and the counts stay exact and Paimon's."""
    copy = TableCopy(copy_table(paimon_tables["pk_dv"], tmp_path / "pk_dv"))

    def forget(records: list[dict[str, Any]]) -> None:
        for r in records:
            for dv in r["_DELETIONS_VECTORS_RANGES"] or ():
                dv["_CARDINALITY"] = None

    copy.rewrite(copy.snapshot["indexManifest"], forget)
    doc = cli_json("inspect", copy.root, "--files", "--verify")
    assert doc["verify"]["ok"] and doc["deleted_rows"] > 0
    scan = paimon_scan(paimon_java, copy.root)
    assert all(f["dv"]["cardinality"] is None for f in scan["files"] if f["dv"])
    for f in scan["files"]:
        f["dv"] = f["dv"] and {**f["dv"], "cardinality": len(f["dv"]["positions"])}
    _agrees(doc, scan, str(copy.root))


def test_the_text_view_fits_80_columns(paimon_tables: dict[str, Any]) -> None:
    for entry in paimon_tables.values():
        result = run("inspect", entry["path"], "--files", "--history", "--verify")
        assert result.exit_code == 0, all_output(result)
        assert "no problems" in result.stdout and "LSM levels" in result.stdout
        assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_expired_table_and_checks(paimon_tables: dict[str, Any]) -> None:
    expired = paimon_tables["pk_dv_expired"]["path"]
    [only] = cli_json("inspect", expired, "--history")["history"]
    missing = run("inspect", expired, "--version", str(only["snapshot_id"] - 1))
    assert missing.exit_code == 5 and "no snapshot" in all_output(missing)
    path = paimon_tables["pk_dv"]["path"]
    pending = next(
        doc
        for h in cli_json("inspect", path, "--history")["history"]
        if (doc := cli_json("inspect", path, "--version", str(h["snapshot_id"])))[
            "pending_level0_files"
        ]
    )
    at = ("inspect", path, "--version", str(pending["snapshot_id"]))
    limit = pending["pending_level0_files"]
    assert run(*at, "--check", f"max-level0-files={limit}").exit_code == 0
    assert run(*at, "--check", f"max-level0-files={limit - 1}").exit_code == 3
    ratio = pending["deleted_rows"] / pending["physical_rows"]
    assert run(*at, "--check", f"max-deleted-ratio={ratio}").exit_code == 0
    assert run(*at, "--check", f"max-deleted-ratio={ratio * 0.99}").exit_code == 3
    refused = run(*at, "--check", "max-log-files=1")
    assert refused.exit_code == 2 and "no meaning for a Paimon table" in all_output(refused)


def test_recursive_inspect_and_other_commands(paimon_tables: dict[str, Any]) -> None:
    warehouse = Path(paimon_tables["pk_dv"]["path"]).parent
    doc = cli_json("inspect", warehouse, "--recursive", "--verify", "--check", "max-files=100")
    found = {Path(t["location"]).name: t for t in doc["tables"]}
    assert set(found) == set(NAMES)
    for name, table in found.items():
        assert table["format"] == "paimon" and table["status"] == "ok"
        assert table["summary"]["logical_rows"] == len(paimon_tables[name]["expected"])
    refused = run("optimize", paimon_tables["pk_dv"]["path"], "--dry-run")
    assert refused.exit_code == 2 and "Paimon table" in all_output(refused)


def test_the_python_api(paimon_tables: dict[str, Any], scans: dict[str, Any]) -> None:
    import dvtool
    from dvtool.commands.inspect.paimon import PaimonInspectResult

    path = paimon_tables["pk_dv_bitmap64"]["path"]
    result = dvtool.inspect(path, files=True, verify=True, checks={"max-level0-files": 0})
    assert isinstance(result, PaimonInspectResult) and result.exit_code == 0
    _agrees(result.to_json(), scans["pk_dv_bitmap64"], path)
    lake = dvtool.inspect_tables(str(Path(path).parent), checks={"max-deleted-ratio": 0.01})
    assert lake.exit_code == 3 and {t.format for t in lake.tables} == {"paimon"}


# -- corrupt copies ----------------------------------------------------------------------------


def _flip(path: Path, at: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= mask
    path.write_bytes(bytes(data))


def _dv_byte(at: Callable[[dict[str, Any]], int], mask: int = 0x01) -> Callable[[TableCopy], None]:
    """Flip a byte of the first DV, at an offset `at(range)` from its start."""

    def corrupt(copy: TableCopy) -> None:
        path, dv = copy.deletion_file()
        _flip(path, dv["f1"] + at(dv), mask)

    return corrupt


def _bad_bitmap(copy: TableCopy) -> None:
    """A cookie Roaring does not know, with size and CRC still right."""
    path, dv = copy.deletion_file()
    data = bytearray(path.read_bytes())
    start, (size,) = dv["f1"], struct.unpack_from(">I", data, dv["f1"])
    data[start + 8 : start + 12] = struct.pack("<I", 99)
    struct.pack_into(">I", data, start + 4 + size, zlib.crc32(data[start + 4 : start + 4 + size]))
    path.write_bytes(bytes(data))


def _position_beyond_the_file(copy: TableCopy) -> None:
    """Rewrite the first deletion file with one more position, the data file's row count."""
    path, _ = copy.deletion_file()
    data = path.read_bytes()
    entry = copy.index_entries()[0]
    ranges = entry["_DELETIONS_VECTORS_RANGES"]
    dvs = [decode_paimon_dv(data, r["f1"], r["f2"]) for r in ranges]
    manifest, index = copy.live_add(ranges[0]["f0"])
    rows = copy.records(manifest)[index]["_FILE"]["_ROW_COUNT"]
    dvs[0].rows.add(rows)
    new, placed = encode_deletion_file([d.rows for d in dvs], dvs[0].bitmap64)
    path.write_bytes(new)

    def edit(r: dict[str, Any]) -> None:
        r["_FILE_SIZE"] = len(new)
        for dv, (offset, length), d in zip(
            r["_DELETIONS_VECTORS_RANGES"], placed, dvs, strict=True
        ):
            dv["f1"], dv["f2"], dv["_CARDINALITY"] = offset, length, len(d.rows)

    copy.edit_index(edit)


def _first_dv(edit: Callable[[dict[str, Any]], None]) -> Callable[[TableCopy], None]:
    return lambda copy: copy.edit_index(lambda r: edit(r["_DELETIONS_VECTORS_RANGES"][0]))


def _dv_data_file(copy: TableCopy) -> str:
    return str(copy.index_entries()[0]["_DELETIONS_VECTORS_RANGES"][0]["f0"])


def _data_file_field(field: str) -> Callable[[TableCopy], None]:
    def corrupt(copy: TableCopy) -> None:
        copy.edit_data_file(_dv_data_file(copy), lambda f: f.update({field: f[field] + 1}))

    return corrupt


def _remove_data_file(copy: TableCopy) -> None:
    next(copy.root.glob(f"**/{_dv_data_file(copy)}")).unlink()


def _truncate(which: Callable[[TableCopy], Path]) -> Callable[[TableCopy], None]:
    def corrupt(copy: TableCopy) -> None:
        path = which(copy)
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])

    return corrupt


def _repeat_entry(kind: int, rename: str | None) -> Callable[[TableCopy], None]:
    """Append a copy of the live ADD of a DV'd file to its manifest, of `kind`, renamed."""

    def corrupt(copy: TableCopy) -> None:
        manifest, index = copy.live_add(_dv_data_file(copy))

        def edit(records: list[dict[str, Any]]) -> None:
            again = {**records[index], "_KIND": kind, "_FILE": dict(records[index]["_FILE"])}
            if rename:
                again["_FILE"]["_FILE_NAME"] = rename
            records.append(again)

        copy.rewrite(manifest, edit)

    return corrupt


def _damaged_footer(copy: TableCopy) -> None:
    """The Parquet footer's length field of a DV'd data file overwritten (size unchanged)."""
    path = next(copy.root.glob(f"**/{_dv_data_file(copy)}"))
    data = bytearray(path.read_bytes())
    data[-8:-4] = b"\xff\xff\xff\x7f"
    path.write_bytes(bytes(data))


def _second_dv(copy: TableCopy) -> None:
    """A second deletion file holding a DV of a data file that already has one."""
    path, _ = copy.deletion_file()
    twin = path.with_name(path.name.replace("index-", "index-twin-"))
    twin.write_bytes(path.read_bytes())

    def edit(records: list[dict[str, Any]]) -> None:
        first = next(r for r in records if r["_DELETIONS_VECTORS_RANGES"])
        records.append({**first, "_FILE_NAME": twin.name})

    copy.rewrite(copy.snapshot["indexManifest"], edit)


def _unmatched_index_delete(copy: TableCopy) -> None:
    def edit(records: list[dict[str, Any]]) -> None:
        records.append({**records[0], "_KIND": 1, "_FILE_NAME": "index-never-added-0"})

    copy.rewrite(copy.snapshot["indexManifest"], edit)


@dataclass(frozen=True)
class Damage:
    table: str
    corrupt: Callable[[TableCopy], None]
    kinds: frozenset[str]
    paimon_fails: bool = False
    """Whether Paimon's own read of the copy fails too."""


DAMAGES = {
    "dv-length": Damage("pk_dv", _dv_byte(lambda r: 3), frozenset({"dv-length"}), True),
    "dv-length-64": Damage("pk_dv_bitmap64", _dv_byte(lambda r: 3), frozenset({"dv-length"}), True),
    "dv-magic": Damage("pk_dv", _dv_byte(lambda r: 4, 0xFF), frozenset({"dv-magic"}), True),
    "dv-magic-64": Damage(
        "pk_dv_bitmap64", _dv_byte(lambda r: 7, 0xFF), frozenset({"dv-magic"}), True
    ),
    # Paimon's reader skips the CRC: only dvtool sees this one.
    "dv-checksum": Damage("pk_dv", _dv_byte(lambda r: 4 + r["f2"]), frozenset({"dv-checksum"})),
    "dv-checksum-64": Damage(
        "pk_dv_bitmap64", _dv_byte(lambda r: r["f2"] - 1), frozenset({"dv-checksum"})
    ),
    "dv-bitmap": Damage("pk_dv", _bad_bitmap, frozenset({"dv-bitmap"}), True),
    "dv-cardinality": Damage(
        "pk_dv",
        _first_dv(lambda dv: dv.update({"_CARDINALITY": dv["_CARDINALITY"] + 1})),
        frozenset({"dv-cardinality"}),
    ),
    "dv-range": Damage(
        "pk_dv", _first_dv(lambda dv: dv.update({"f1": 10_000})), frozenset({"dv-range"}), True
    ),
    "dv-dangling": Damage(
        "pk_dv",
        _first_dv(lambda dv: dv.update({"f0": "data-never-written-0.parquet"})),
        frozenset({"dv-dangling"}),
    ),
    "dv-row-index": Damage("append_dv", _position_beyond_the_file, frozenset({"dv-row-index"})),
    "deletion-file-missing": Damage(
        "pk_dv",
        lambda copy: copy.deletion_file()[0].unlink(),
        frozenset({"deletion-file-missing"}),
        True,
    ),
    "deletion-file-size": Damage(
        "pk_dv",
        lambda copy: copy.edit_index(lambda r: r.update({"_FILE_SIZE": r["_FILE_SIZE"] + 1})),
        frozenset({"deletion-file-size"}),
    ),
    "deletion-file-version": Damage(
        "pk_dv",
        lambda copy: _flip(copy.deletion_file()[0], 0, 0x03),
        frozenset({"deletion-file-version"}),
    ),
    "deletion-file-row-count": Damage(
        "pk_dv",
        lambda copy: copy.edit_index(lambda r: r.update({"_ROW_COUNT": r["_ROW_COUNT"] + 1})),
        frozenset({"deletion-file-row-count"}),
    ),
    "data-file-missing": Damage("pk_dv", _remove_data_file, frozenset({"data-file-missing"}), True),
    "data-file-size": Damage(
        "pk_dv", _data_file_field("_FILE_SIZE"), frozenset({"data-file-size"})
    ),
    "data-file-row-count": Damage(
        "pk_dv", _data_file_field("_ROW_COUNT"), frozenset({"data-file-row-count"})
    ),
    "index-manifest-unreadable": Damage(
        "pk_dv",
        _truncate(lambda copy: copy.manifest(copy.snapshot["indexManifest"])),
        frozenset({"index-manifest-unreadable"}),
        True,
    ),
    "manifest-delete-unmatched": Damage(
        "pk_dv",
        _repeat_entry(1, "data-never-added-0.parquet"),
        frozenset({"manifest-delete-unmatched"}),
    ),
    "file-duplicate": Damage("pk_dv", _repeat_entry(0, None), frozenset({"file-duplicate"})),
    "data-file-unreadable": Damage(
        "pk_dv", _damaged_footer, frozenset({"data-file-unreadable"}), True
    ),
    "dv-duplicate": Damage("pk_dv", _second_dv, frozenset({"dv-duplicate"})),
    "index-delete-unmatched": Damage(
        "pk_dv", _unmatched_index_delete, frozenset({"index-delete-unmatched"})
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_verify_names_each_damage(
    case: str, paimon_tables: dict[str, Any], paimon_java: JvmSession, tmp_path: Path
) -> None:
    damage = DAMAGES[case]
    copy = TableCopy(copy_table(paimon_tables[damage.table], tmp_path / damage.table))
    damage.corrupt(copy)
    problems = cli_json("inspect", copy.root, "--verify", code=6)["verify"]["problems"]
    assert {p["kind"] for p in problems} == damage.kinds, problems
    if damage.paimon_fails:
        with pytest.raises(JvmError):
            paimon_scan(paimon_java, copy.root)


@pytest.mark.parametrize("which", ["manifest", "manifest-list"])
def test_an_unreadable_manifest_is_named(
    which: str, paimon_tables: dict[str, Any], tmp_path: Path
) -> None:
    copy = TableCopy(copy_table(paimon_tables["pk_dv"], tmp_path / "pk_dv"))
    if which == "manifest":
        _truncate(lambda c: c.manifest(c.data_manifests()[0]))(copy)
    else:
        _truncate(lambda c: c.manifest(c.snapshot["deltaManifestList"]))(copy)
    doc = cli_json("inspect", copy.root, "--verify", code=6)
    kinds = {p["kind"] for p in doc["verify"]["problems"]}
    # What the lost files added is unknown: later deletes of those files do not match, and
    # DVs of them have no live file.
    assert f"{which}-unreadable" in kinds
    assert kinds <= {f"{which}-unreadable", "manifest-delete-unmatched", "dv-dangling"}
    plain = run("inspect", copy.root)
    assert plain.exit_code == 6
    assert f"cannot read the Paimon {which.replace('-', ' ')}" in all_output(plain)


def test_every_problem_kind_is_tested() -> None:
    """Each kind `--verify` reports has a corrupt copy: above, in test_paimon_index_kinds.py
    (hash indexes; an unreadable one: a directory in its place) and in
    test_paimon_partitions.py (an unreadable deletion file: a directory in its place)."""
    from dvtool.paimon.verify import PROBLEM_KINDS

    tested = {kind for damage in DAMAGES.values() for kind in damage.kinds}
    tested |= {"manifest-unreadable", "manifest-list-unreadable", *HASH_DAMAGES}
    tested |= {"deletion-file-unreadable", "hash-index-unreadable"}
    assert tested == set(PROBLEM_KINDS)
