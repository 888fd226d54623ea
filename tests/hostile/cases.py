"""The hostile-input corpus: each case breaks a small table in one way and names the commands
that must refuse it, the exit code of the refusal and what the message must name.

Every case starts from a copy of one base table (`build_base_table`, written by deltalake,
then `dvtool enable` and `dvtool delete` through the CLI) or of a golden table:

- version 0..2: one append each, files A (ids 0-9), B (10-19) and C (20-29), 10 rows each;
- version 3: `dvtool enable`;
- version 4: `dvtool delete --where "id % 10 = 3 OR id = 15"`: a remove and an add with a DV
  for each file, the three DVs ({3}, {3, 5}, {3}) packed into one shared DV file.

A case's `build(scene)` breaks the copy and returns the strings the error message must hold
(file names, paths as dvtool quotes them, option names). The runner in
test_hostile_input.py checks, for every command of `refused`: the exit code, those strings,
no traceback, and that the case directory (the table and the `outside/` directory beside it)
is byte-for-byte unchanged; commands in `still_reads` must succeed on the same input.

Bytes are built here independently of dvtool: Z85, RoaringBitmap serialization (pyroaring),
CRC-32 (zlib) and the DV file layout come from PROTOCOL.md, not from dvtool's codec.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import click
import deltalake
import pyarrow as pa
from click.testing import CliRunner
from pyroaring import BitMap64

from dvtool.cli import cli
from dvtool.errors import (
    DeletionVectorError,
    FileMissingError,
    LogError,
    PredicateError,
    StorageError,
    TableNotFoundError,
    UsageError,
    VersionNotFoundError,
    WriteRefusedError,
)
from tests.s3_server import BUCKET

Action = dict[str, Any]
Argv = tuple[str, ...]

DV_MAGIC = 1681511377
Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
DELETE_VERSION = 4
S3_BUCKET = BUCKET  # the bucket of the moto server in tests/s3_server.py
VERIFY_FAILED = 1  # `inspect --verify` exit code when it finds problems (README, exit codes)

# -- the base table -------------------------------------------------------------------------


def build_base_table(dest: Path) -> Path:
    """Files A, B, C of 10 rows, DVs enabled, and one delete that gave each file a DV."""
    table = dest / "table"
    for first in (0, 10, 20):
        ids = list(range(first, first + 10))
        data = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
        deltalake.write_deltalake(str(table), data, mode="append")
    runner = CliRunner()
    for argv in (["enable"], ["delete", "--where", "id % 10 = 3 OR id = 15"]):
        result = runner.invoke(cli, [argv[0], str(table), *argv[1:]])
        assert result.exit_code == 0, result.output
    return table


# -- a case's directory ---------------------------------------------------------------------


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


@dataclass
class Scene:
    """One case's directory: `table/` and `outside/` beside it (where hostile paths lead)."""

    root: Path
    table: Path
    endpoint: str = ""
    closed_port: int = 0

    @property
    def outside(self) -> Path:
        path = self.root / "outside"
        path.mkdir(exist_ok=True)
        return path

    def commit(self, version: int) -> Path:
        return self.table / "_delta_log" / commit_name(version)

    def actions(self, version: int) -> list[Action]:
        text = self.commit(version).read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def write_actions(self, version: int, actions: list[Action]) -> None:
        self.commit(version).write_text("".join(json.dumps(a) + "\n" for a in actions))

    def add(self, first_id: int) -> Action:
        """The add of the delete commit for the file whose ids start at `first_id`."""
        for action in self.actions(DELETE_VERSION):
            body = action.get("add")
            if body and json.loads(body["stats"])["minValues"]["id"] == first_id:
                return dict(body)
        raise AssertionError(f"no add of the file starting at id {first_id}")

    def edit_add(self, first_id: int, edit: Callable[[Action], None]) -> None:
        """Apply `edit` to that add in the delete commit."""
        path = self.add(first_id)["path"]
        actions = self.actions(DELETE_VERSION)
        for action in actions:
            if "add" in action and action["add"]["path"] == path:
                edit(action["add"])
        self.write_actions(DELETE_VERSION, actions)

    def dv_file(self) -> Path:
        (path,) = self.table.glob("deletion_vector_*.bin")
        return path

    def values(self) -> dict[str, str]:
        """What `{name}` in a case's argv stands for."""
        return {
            "table": str(self.table),
            "root": str(self.root),
            "endpoint": self.endpoint,
            "closed_port": str(self.closed_port),
            "bucket": S3_BUCKET,
        }


@dataclass(frozen=True)
class HostileCase:
    """A broken input, the commands that must refuse it and how."""

    id: str
    build: Callable[[Scene], tuple[str, ...]]
    refused: tuple[Argv, ...]
    exit_code: int
    still_reads: tuple[Argv, ...] = ()
    golden: str | None = None
    s3: bool = False


# -- commands -------------------------------------------------------------------------------

INSPECT: Argv = ("inspect", "{table}")
VERIFY: Argv = ("inspect", "{table}", "--verify")
FILES_JSON: Argv = ("inspect", "{table}", "--files", "--json")
DELETE_C: Argv = ("delete", "{table}", "--where", "id = 21")  # touches file C only
PURGE: Argv = ("optimize", "{table}", "--purge")
VACUUM_DRY: Argv = ("vacuum", "{table}", "--retain", "0h", "--force", "--dry-run")
MANIFEST: Argv = ("generate-manifest", "{table}", "--purge-first")
DOWNGRADE_DRY: Argv = ("downgrade", "{table}", "--dry-run")
DOWNGRADE: Argv = ("downgrade", "{table}")
EVERY_COMMAND = (INSPECT, DELETE_C, PURGE, VACUUM_DRY, MANIFEST, DOWNGRADE_DRY)
READ_AND_DELETE = (INSPECT, DELETE_C)
DV_COMMANDS = (VERIFY, DELETE_C, PURGE, DOWNGRADE)
WRITERS = (DELETE_C, PURGE, DOWNGRADE)

# -- independent encoders -------------------------------------------------------------------


def z85_encode(data: bytes) -> str:
    """Z85 of `data` (a multiple of 4 bytes), as ZeroMQ RFC 32 specifies it."""
    out = []
    for (word,) in struct.iter_unpack(">I", data):
        chars = ""
        for _ in range(5):
            word, digit = divmod(word, 85)
            chars = Z85[digit] + chars
        out.append(chars)
    return "".join(out)


def bitmap_bytes(rows: list[int]) -> bytes:
    """Magic number + portable 64-bit RoaringBitmap serialization (PROTOCOL.md)."""
    return struct.pack("<I", DV_MAGIC) + BitMap64(rows).serialize()


def inline_dv(rows: list[int]) -> Action:
    """An inline ('i') descriptor, zero-padded to 4 bytes as Delta Spark writes it."""
    payload = bitmap_bytes(rows)
    padded = payload + bytes(-len(payload) % 4)
    return {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(padded),
        "sizeInBytes": len(payload),
        "cardinality": len(rows),
    }


def dv_entry(payload: bytes) -> bytes:
    """One DV file entry: big-endian size, the bitmap bytes, big-endian CRC-32."""
    return struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))


# -- log cases ------------------------------------------------------------------------------


def _log_names(version: int = DELETE_VERSION) -> tuple[str, ...]:
    return (commit_name(version),)


def zero_length_last_commit(s: Scene) -> tuple[str, ...]:
    """The newest commit is empty, as a crash between create and write leaves it."""
    s.commit(DELETE_VERSION).write_bytes(b"")
    return _log_names()


def commit_cut_mid_line(s: Scene) -> tuple[str, ...]:
    """A torn write: the commit ends in the middle of an action, later lines lost."""
    data = s.commit(DELETE_VERSION).read_bytes()
    s.commit(DELETE_VERSION).write_bytes(data[: len(data) // 2])
    return _log_names()


def last_line_incomplete(s: Scene) -> tuple[str, ...]:
    """Cut inside the last line: no trailing newline and the last line is not JSON."""
    data = s.commit(DELETE_VERSION).read_bytes().rstrip(b"\n")
    s.commit(DELETE_VERSION).write_bytes(data[:-10])
    return _log_names()


def nul_bytes(s: Scene) -> tuple[str, ...]:
    """A block of NUL bytes in the middle of the commit (a lost disk block)."""
    data = bytearray(s.commit(DELETE_VERSION).read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(16)
    s.commit(DELETE_VERSION).write_bytes(bytes(data))
    return _log_names()


def nul_padded_tail(s: Scene) -> tuple[str, ...]:
    """NUL bytes after the last line, as a file system that lost the size update leaves."""
    with s.commit(DELETE_VERSION).open("ab") as f:
        f.write(bytes(512))
    return _log_names()


def version_gap(s: Scene) -> tuple[str, ...]:
    """Commit 1 is missing between commits 0 and 2."""
    s.commit(1).unlink()
    return _log_names(1)


def malformed_json(s: Scene) -> tuple[str, ...]:
    data = s.commit(DELETE_VERSION).read_text()
    assert '"remove":{' in data
    s.commit(DELETE_VERSION).write_text(data.replace('"remove":{', '"remove":{{', 1))
    return _log_names()


def not_utf8(s: Scene) -> tuple[str, ...]:
    data = s.commit(DELETE_VERSION).read_bytes()
    s.commit(DELETE_VERSION).write_bytes(data[:50] + b"\xff\xfe" + data[50:])
    return _log_names()


def utf8_bom(s: Scene) -> tuple[str, ...]:
    """A byte order mark in front: JSON text must not start with one."""
    data = s.commit(DELETE_VERSION).read_bytes()
    s.commit(DELETE_VERSION).write_bytes(b"\xef\xbb\xbf" + data)
    return _log_names()


def action_not_object(s: Scene) -> tuple[str, ...]:
    with s.commit(DELETE_VERSION).open("a") as f:
        f.write("[1, 2]\n")
    return _log_names()


def two_protocol_actions(s: Scene) -> tuple[str, ...]:
    """The enable commit holds two protocol actions (at most one is allowed)."""
    actions = s.actions(3)
    actions.append(next(a for a in actions if "protocol" in a))
    s.write_actions(3, actions)
    return _log_names(3)


def two_actions_on_one_line(s: Scene) -> tuple[str, ...]:
    """The delete commit's commitInfo and a remove share one line: Delta Spark would read
    one of them, kernels both, so which table it stands for depends on the reader."""
    actions = s.actions(DELETE_VERSION)
    remove = next(a for a in actions if "remove" in a)
    actions.remove(remove)
    actions[0] = {**actions[0], **remove}
    s.write_actions(DELETE_VERSION, actions)
    return (*_log_names(), "line 1 holds more than one action (commitInfo, remove)")


def _edit_metadata(s: Scene, version: int, edit: Callable[[Action], None]) -> None:
    actions = s.actions(version)
    for action in actions:
        if "metaData" in action:
            edit(action["metaData"])
    s.write_actions(version, actions)


def winning_metadata_incomplete(s: Scene) -> tuple[str, ...]:
    """The newest metaData (the enable commit's) has no schemaString."""
    _edit_metadata(s, 3, lambda m: m.pop("schemaString"))
    return (*_log_names(3), "metaData action has no 'schemaString' field")


def unknown_fields_beside_actions(s: Scene) -> tuple[str, ...]:
    """Valid: unknown top-level fields beside the actions of the delete commit, and a line
    of an unknown action that is not even an object (PROTOCOL.md: readers ignore them)."""
    actions = s.actions(DELETE_VERSION)
    for action in actions:
        action["some_new_action_alongside_add_action"] = ["a", "1"]
    actions.insert(1, {"some_new_action": ["a", "1"]})
    s.write_actions(DELETE_VERSION, actions)
    return ()


def replaced_metadata_incomplete(s: Scene) -> tuple[str, ...]:
    """Valid: version 0's metaData has no schemaString, but the enable commit's replaces it."""
    _edit_metadata(s, 0, lambda m: m.pop("schemaString"))
    return ()


def liquid_writer_feature(s: Scene) -> tuple[str, ...]:
    """The protocol as early Databricks runtimes wrote liquid clustering: writer feature
    `liquid` (not Delta's `clustering`) and `delta.liquid.clusteringColumns`."""
    actions = s.actions(3)
    for action in actions:
        if "protocol" in action:
            action["protocol"]["writerFeatures"].append("liquid")
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.liquid.clusteringColumns"] = "id"
    s.write_actions(3, actions)
    return ("writer feature(s) liquid (the name early Databricks runtimes gave",)


def _append_to_delete_commit(s: Scene, action: Action) -> None:
    actions = s.actions(DELETE_VERSION)
    actions.append(action)
    s.write_actions(DELETE_VERSION, actions)


def duplicate_add_same_dv(s: Scene) -> tuple[str, ...]:
    """The same (path, DV) added twice in one commit."""
    add = s.add(20)
    _append_to_delete_commit(s, {"add": add})
    return (*_log_names(), repr(add["path"]))


def duplicate_add_other_dv(s: Scene) -> tuple[str, ...]:
    """File C added twice in one commit, with two different DVs: which rows are deleted?"""
    add = s.add(20)
    add["deletionVector"] = s.add(0)["deletionVector"]
    _append_to_delete_commit(s, {"add": add})
    return (*_log_names(), repr(add["path"]))


def duplicate_remove(s: Scene) -> tuple[str, ...]:
    """Two removes of one path in one commit."""
    remove = next(a for a in s.actions(DELETE_VERSION) if "remove" in a)
    _append_to_delete_commit(s, remove)
    return (*_log_names(), repr(remove["remove"]["path"]))


def path_live_twice(s: Scene) -> tuple[str, ...]:
    """A later commit adds file C again with another DV and never removes the earlier add:
    replay, keyed on (path, DV), keeps both live, so its rows would count twice."""
    add = s.add(20)
    add["deletionVector"] = s.add(0)["deletionVector"]
    info = {"commitInfo": {"operation": "WRITE", "timestamp": 1}}
    s.write_actions(DELETE_VERSION + 1, [info, {"add": add}])
    return (repr(add["path"]), "live more than once")


def path_live_twice_spelled_otherwise(s: Scene) -> tuple[str, ...]:
    """As `path_live_twice`, the second add naming file C by its absolute `file:` URI: the
    canonical keys (Delta's `canonicalizePath`) of the two spellings are one file."""
    add = s.add(20)
    plain = add["path"]
    add["path"] = (s.table.resolve() / unquote(plain)).as_uri()
    add["deletionVector"] = s.add(0)["deletionVector"]
    info = {"commitInfo": {"operation": "WRITE", "timestamp": 1}}
    s.write_actions(DELETE_VERSION + 1, [info, {"add": add}])
    return (repr(unquote(plain)), "live more than once")


def dv_descriptor_not_object(s: Scene) -> tuple[str, ...]:
    path = s.add(20)["path"]
    s.edit_add(20, lambda add: add.__setitem__("deletionVector", "u123"))
    return (*_log_names(), repr(path))


def field_of_wrong_type(s: Scene) -> tuple[str, ...]:
    s.edit_add(20, lambda add: add.__setitem__("size", "abc"))
    return (*_log_names(), "size")


def add_without_path(s: Scene) -> tuple[str, ...]:
    s.edit_add(20, lambda add: add.pop("path"))
    return _log_names()


def multipart_checkpoint_missing_part(s: Scene) -> tuple[str, ...]:
    """Part 2 of 3 of the only checkpoint is gone, and so are the commits it replaced."""
    log = s.table / "_delta_log"
    missing = "00000000000000000005.checkpoint.0000000002.0000000003.parquet"
    (log / missing).unlink()
    for version in range(5):
        (log / commit_name(version)).unlink()
    return (missing,)


def checkpoint_unreadable(s: Scene) -> tuple[str, ...]:
    """The newest checkpoint is cut in half and the commits before it were cleaned up."""
    log = s.table / "_delta_log"
    checkpoint = log / "00000000000000000040.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    for version in range(40):
        (log / commit_name(version)).unlink()
    return (checkpoint.name,)


# -- DV cases -------------------------------------------------------------------------------


def _patch_dv_file(s: Scene, offset: int, data: bytes) -> None:
    path = s.dv_file()
    content = bytearray(path.read_bytes())
    content[offset : offset + len(data)] = data
    path.write_bytes(bytes(content))


def _dv_names(s: Scene, first_id: int = 20) -> tuple[str, ...]:
    return (s.add(first_id)["path"], s.dv_file().name)


def dv_bad_version(s: Scene) -> tuple[str, ...]:
    _patch_dv_file(s, 0, b"\x02")
    return _dv_names(s)


def dv_bad_magic(s: Scene) -> tuple[str, ...]:
    """A wrong magic number under a CRC that matches, so the magic check itself is hit."""
    dv = s.add(20)["deletionVector"]
    payload = bytearray(bitmap_bytes([3]))
    payload[0:4] = struct.pack("<I", DV_MAGIC + 1)
    assert len(payload) == dv["sizeInBytes"]
    _patch_dv_file(s, dv["offset"], dv_entry(bytes(payload)))
    return _dv_names(s)


def dv_bitmap_garbage(s: Scene) -> tuple[str, ...]:
    """Magic and CRC right, but the bytes after the magic are no RoaringBitmap."""
    dv = s.add(20)["deletionVector"]
    payload = struct.pack("<I", DV_MAGIC) + b"\xff" * (dv["sizeInBytes"] - 4)
    _patch_dv_file(s, dv["offset"], dv_entry(payload))
    return _dv_names(s)


def dv_size_mismatch(s: Scene) -> tuple[str, ...]:
    dv = s.add(20)["deletionVector"]
    _patch_dv_file(s, dv["offset"], struct.pack(">I", dv["sizeInBytes"] + 1))
    return _dv_names(s)


def dv_checksum_mismatch(s: Scene) -> tuple[str, ...]:
    dv = s.add(20)["deletionVector"]
    position = dv["offset"] + 4 + dv["sizeInBytes"] - 1
    last = s.dv_file().read_bytes()[position]
    _patch_dv_file(s, position, bytes([last ^ 0xFF]))
    return _dv_names(s)


def dv_offset_beyond_file(s: Scene) -> tuple[str, ...]:
    names = _dv_names(s)
    s.edit_add(20, lambda add: add["deletionVector"].__setitem__("offset", 5000))
    return names


def dv_offset_at_version_byte(s: Scene) -> tuple[str, ...]:
    names = _dv_names(s)
    s.edit_add(20, lambda add: add["deletionVector"].__setitem__("offset", 0))
    return names


def dv_file_missing(s: Scene) -> tuple[str, ...]:
    names = _dv_names(s)
    s.dv_file().unlink()
    return names


def dv_file_empty(s: Scene) -> tuple[str, ...]:
    s.dv_file().write_bytes(b"")
    return _dv_names(s)


def dv_cardinality_mismatch(s: Scene) -> tuple[str, ...]:
    s.edit_add(20, lambda add: add["deletionVector"].__setitem__("cardinality", 7))
    return _dv_names(s)


def dv_row_index_beyond_num_records(s: Scene) -> tuple[str, ...]:
    """Row 50 of a 10-row file (numRecords 10 in the stats, 10 rows in the footer)."""
    s.edit_add(20, lambda add: add.__setitem__("deletionVector", inline_dv([3, 50])))
    return (s.add(20)["path"], "50")


def _edit_inline(s: Scene, edit: Callable[[Action], None]) -> tuple[str, ...]:
    dv = inline_dv([3])
    edit(dv)
    s.edit_add(20, lambda add: add.__setitem__("deletionVector", dv))
    return (s.add(20)["path"],)


def dv_inline_bad_z85(s: Scene) -> tuple[str, ...]:
    return _edit_inline(
        s, lambda dv: dv.__setitem__("pathOrInlineDv", "~" + dv["pathOrInlineDv"][1:])
    )


def dv_inline_bad_length(s: Scene) -> tuple[str, ...]:
    return _edit_inline(s, lambda dv: dv.__setitem__("pathOrInlineDv", dv["pathOrInlineDv"][:-1]))


def dv_inline_padding_without_data(s: Scene) -> tuple[str, ...]:
    """A '#'-padded last group (the Rust z85 form) with four '#': it would hold no byte."""
    return _edit_inline(
        s, lambda dv: dv.__setitem__("pathOrInlineDv", dv["pathOrInlineDv"][:-5] + "####0")
    )


def dv_inline_padding_overflow(s: Scene) -> tuple[str, ...]:
    """A '##' last group whose three digits encode more than the two bytes it may hold."""
    return _edit_inline(
        s, lambda dv: dv.__setitem__("pathOrInlineDv", dv["pathOrInlineDv"][:-5] + "##zzz")
    )


def dv_inline_padding_beyond_size(s: Scene) -> tuple[str, ...]:
    """Zero padding longer than 3 bytes: sizeInBytes says 5 bytes less than the text holds."""
    return _edit_inline(s, lambda dv: dv.__setitem__("sizeInBytes", dv["sizeInBytes"] - 5))


def dv_shared_file_one_bad_entry(s: Scene) -> tuple[str, ...]:
    """The DV file holds the DVs of A, B and C; only B's entry is corrupt. The error must
    name B, not the first data file that uses the DV file. (A delete touching only A or C
    reads only their entries and may succeed: it never needs B's DV.)"""
    dv = s.add(10)["deletionVector"]
    position = dv["offset"] + 4
    first = s.dv_file().read_bytes()[position + 8]
    _patch_dv_file(s, position + 8, bytes([first ^ 0x55]))
    return _dv_names(s, 10)


def dv_absolute_path_outside_root(s: Scene) -> tuple[str, ...]:
    """C's DV as a 'p' DV: a copy of the DV file outside the table root, named by URI."""
    copy = s.outside / "stolen-dv.bin"
    shutil.copyfile(s.dv_file(), copy)
    uri = copy.as_uri()
    s.edit_add(20, lambda add: add["deletionVector"].update(storageType="p", pathOrInlineDv=uri))
    return (repr(uri), repr(s.add(20)["path"]))


def dv_prefix_climbs_out(s: Scene) -> tuple[str, ...]:
    """A 'u' DV whose random prefix is `../outside/`: its file lies beside the table."""
    value = uuid.uuid4()
    shutil.copyfile(s.dv_file(), s.outside / f"deletion_vector_{value}.bin")
    text = "../outside/" + z85_encode(value.bytes)
    s.edit_add(20, lambda add: add["deletionVector"].__setitem__("pathOrInlineDv", text))
    return (repr(text), repr(s.add(20)["path"]))


# -- path cases -----------------------------------------------------------------------------


def _repath_c(s: Scene, path_in_log: str, new_location: Path | None) -> tuple[str, ...]:
    """Give file C `path_in_log` in every commit, and move its bytes to `new_location`."""
    old = s.add(20)["path"]
    for version in range(DELETE_VERSION + 1):
        actions = s.actions(version)
        for action in actions:
            body = action.get("add") or action.get("remove")
            if body and body["path"] == old:
                body["path"] = path_in_log
        s.write_actions(version, actions)
    if new_location is not None:
        new_location.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(s.table / old, new_location)
    else:
        (s.table / old).unlink()
    return (repr(path_in_log),)


def path_dotdot(s: Scene) -> tuple[str, ...]:
    return _repath_c(s, "../outside/c.parquet", s.outside / "c.parquet")


def path_absolute(s: Scene) -> tuple[str, ...]:
    target = s.outside / "c.parquet"
    return _repath_c(s, str(target), target)


def path_file_uri_outside(s: Scene) -> tuple[str, ...]:
    target = s.outside / "c.parquet"
    return _repath_c(s, target.as_uri(), target)


def path_other_bucket(s: Scene) -> tuple[str, ...]:
    return _repath_c(s, "s3://other-bucket/c.parquet", None)


def path_file_etc(s: Scene) -> tuple[str, ...]:
    return _repath_c(s, "file:///etc/passwd", None)


def path_percent_encoded_dotdot(s: Scene) -> tuple[str, ...]:
    return _repath_c(s, "%2E%2E/outside/c.parquet", s.outside / "c.parquet")


def path_control_character(s: Scene) -> tuple[str, ...]:
    return _repath_c(s, "c\x1b[2J.parquet", s.table / "c\x1b[2J.parquet")


def path_percent_encoded_newline(s: Scene) -> tuple[str, ...]:
    return _repath_c(s, "c%0A.parquet", s.table / "c\n.parquet")


def path_backslash(s: Scene) -> tuple[str, ...]:
    """On POSIX a plain file name inside the root; on Windows a way out of it."""
    name = "..\\outside\\c.parquet"
    return _repath_c(s, name, s.table / name)


def path_symlink_outside(s: Scene) -> tuple[str, ...]:
    """`linkdir` inside the table is a symbolic link to a directory beside it."""
    linked = s.outside / "linked"
    linked.mkdir()
    (s.table / "linkdir").symlink_to(linked, target_is_directory=True)
    return _repath_c(s, "linkdir/c.parquet", linked / "c.parquet")


# -- argument cases -------------------------------------------------------------------------


def unchanged(*names: str) -> Callable[[Scene], tuple[str, ...]]:
    """A build step that leaves the table alone: the arguments are what is wrong."""
    return lambda s: names


def table_missing(s: Scene) -> tuple[str, ...]:
    return (str(s.root / "no-such-table"),)


def restore_data_file_vacuumed(s: Scene) -> tuple[str, ...]:
    """File A, which a restore to version 3 re-adds (without its DV), was deleted (as a
    vacuum deletes what no version in the retention needs)."""
    path = str(s.add(0)["path"])
    (s.table / unquote(path)).unlink()
    return ("restore to version 3", "vacuumed", path)


# -- log cleanup (vacuum --log) ---------------------------------------------------------------

OLD_S = 1_000_000_000  # 2001: older than any log retention
FUTURE_S = 32_503_680_000  # 3000
VACUUM_LOG: Argv = ("vacuum", "{table}", "--log")
VACUUM_LOG_DRY: Argv = ("vacuum", "{table}", "--log", "--dry-run", "--json")


def _date_log(s: Scene, seconds: float = OLD_S) -> None:
    """Every file of `_delta_log` last modified at `seconds` (epoch): long expired."""
    for path in (s.table / "_delta_log").rglob("*"):
        if path.is_file():
            os.utime(path, (seconds, seconds))


def _log_property(key: str, value: str, feature: str | None = None) -> Callable[[Scene], Any]:
    """A build step: the enable commit (version 3) sets `key` (with writer `feature`), and
    the whole log is expired, so only the unreadable property keeps the cleanup from it."""

    def build(s: Scene) -> tuple[str, ...]:
        actions = s.actions(3)
        for action in actions:
            if "metaData" in action:
                action["metaData"]["configuration"][key] = value
            if "protocol" in action and feature:
                action["protocol"]["writerFeatures"].append(feature)
        s.write_actions(3, actions)
        _date_log(s)
        return (key, value)

    return build


def garbage_in_expired_log(s: Scene) -> tuple[str, ...]:
    """Files that are no log entries, some named almost like one, in a log whose every
    entry has expired (the golden table has checkpoints: the cleanup has a cutoff)."""
    log = s.table / "_delta_log"
    for name in (
        "00000000000000000001.json.bak",
        "0000000000000000001.json",
        "00000000000000000001.checkpoint.parquet.tmp",
        "00000000000000000003.00000000000000000001.compacted.json",
        ".00000000000000000001.json.swp",
        "notes.txt",
    ):
        (log / name).write_bytes(b"garbage")
    (log / "00000000000000000002.checkpoint.parquet").write_bytes(b"not parquet")
    _date_log(s)
    return ()


def expired_multipart_checkpoint_missing_part(s: Scene) -> tuple[str, ...]:
    """The only checkpoint (multi-part, version 5) lacks a part: no cutoff checkpoint."""
    log = s.table / "_delta_log"
    (log / "00000000000000000005.checkpoint.0000000002.0000000003.parquet").unlink()
    _date_log(s)
    return ()


def expired_log_cutoff_checkpoint_cut(s: Scene) -> tuple[str, ...]:
    """Everything expired, but the newest checkpoint (the cutoff) is cut in half."""
    checkpoint = s.table / "_delta_log" / "00000000000000000040.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    _date_log(s)
    return ()


def future_dated_log(s: Scene) -> tuple[str, ...]:
    _date_log(s, FUTURE_S)
    return ()


def _c(
    case_id: str,
    build: Callable[[Scene], tuple[str, ...]],
    refused: tuple[Argv, ...],
    exit_code: int,
    **kwargs: Any,
) -> HostileCase:
    return HostileCase(case_id, build, refused, exit_code, **kwargs)


LOG = LogError.exit_code
DV = DeletionVectorError.exit_code
REFUSED = WriteRefusedError.exit_code
USAGE = UsageError.exit_code
CLICK_USAGE = click.UsageError.exit_code
SPARK_CONF = ("optimize", "{table}", "--purge", "--spark-conf", "foo")

LOG_CASES = [
    _c("log-zero-length-last-commit", zero_length_last_commit, EVERY_COMMAND, LOG),
    _c("log-commit-cut-mid-line", commit_cut_mid_line, EVERY_COMMAND, LOG),
    _c("log-last-line-incomplete", last_line_incomplete, READ_AND_DELETE, LOG),
    _c("log-nul-bytes", nul_bytes, READ_AND_DELETE, LOG),
    _c("log-nul-padded-tail", nul_padded_tail, READ_AND_DELETE, LOG),
    _c("log-version-gap", version_gap, EVERY_COMMAND, LOG),
    _c("log-malformed-json", malformed_json, READ_AND_DELETE, LOG),
    _c("log-not-utf8", not_utf8, READ_AND_DELETE, LOG),
    _c("log-utf8-bom", utf8_bom, READ_AND_DELETE, LOG),
    _c("log-action-not-an-object", action_not_object, READ_AND_DELETE, LOG),
    _c("log-two-protocol-actions", two_protocol_actions, READ_AND_DELETE, LOG),
    _c("log-two-actions-on-one-line", two_actions_on_one_line, READ_AND_DELETE, LOG),
    _c("log-winning-metadata-incomplete", winning_metadata_incomplete, EVERY_COMMAND, LOG),
    _c(
        "log-unknown-fields-beside-actions",
        unknown_fields_beside_actions,
        (),
        0,
        still_reads=(VERIFY, FILES_JSON, VACUUM_DRY, DOWNGRADE_DRY),
    ),
    _c(
        "log-replaced-metadata-incomplete",
        replaced_metadata_incomplete,
        (),
        0,
        still_reads=(VERIFY, FILES_JSON, VACUUM_DRY, DOWNGRADE_DRY),
    ),
    _c(
        "feature-liquid",
        liquid_writer_feature,
        (*WRITERS, VACUUM_DRY, MANIFEST),
        REFUSED,
        still_reads=(VERIFY, FILES_JSON),
    ),
    _c("log-duplicate-add-same-dv", duplicate_add_same_dv, (INSPECT, DELETE_C, PURGE), LOG),
    _c("log-duplicate-add-other-dv", duplicate_add_other_dv, (INSPECT, DELETE_C, PURGE), LOG),
    _c("log-duplicate-remove", duplicate_remove, READ_AND_DELETE, LOG),
    _c("log-path-live-twice", path_live_twice, (DELETE_C, PURGE), LOG, still_reads=(INSPECT,)),
    _c(
        "log-path-live-twice-spelled-otherwise",
        path_live_twice_spelled_otherwise,
        (DELETE_C, PURGE),
        LOG,
        still_reads=(INSPECT,),
    ),
    _c("log-dv-descriptor-not-an-object", dv_descriptor_not_object, READ_AND_DELETE, LOG),
    _c("log-field-of-wrong-type", field_of_wrong_type, READ_AND_DELETE, LOG),
    _c("log-add-without-path", add_without_path, READ_AND_DELETE, LOG),
    _c(
        "log-multipart-checkpoint-missing-part",
        multipart_checkpoint_missing_part,
        (INSPECT, ("vacuum", "{table}", "--dry-run")),
        LOG,
        golden="v1-multi-part-partitioned-struct-stats-only",
    ),
    _c(
        "log-checkpoint-unreadable",
        checkpoint_unreadable,
        (INSPECT, ("delete", "{table}", "--where", "value = 'x'")),
        LOG,
        golden="basic-dv-with-checkpoint",
    ),
]

DV_CASES = [
    _c("dv-bad-version", dv_bad_version, DV_COMMANDS, DV),
    _c("dv-bad-magic", dv_bad_magic, DV_COMMANDS, DV),
    _c("dv-bitmap-garbage", dv_bitmap_garbage, DV_COMMANDS, DV),
    _c("dv-size-mismatch", dv_size_mismatch, DV_COMMANDS, DV),
    _c("dv-checksum-mismatch", dv_checksum_mismatch, DV_COMMANDS, DV),
    _c("dv-offset-beyond-file", dv_offset_beyond_file, DV_COMMANDS, DV),
    _c("dv-offset-at-version-byte", dv_offset_at_version_byte, DV_COMMANDS, DV),
    _c("dv-file-missing", dv_file_missing, DV_COMMANDS, DV),
    _c("dv-file-empty", dv_file_empty, DV_COMMANDS, DV),
    _c("dv-cardinality-mismatch", dv_cardinality_mismatch, DV_COMMANDS, DV),
    _c("dv-row-index-beyond-num-records", dv_row_index_beyond_num_records, DV_COMMANDS, DV),
    _c("dv-inline-bad-z85", dv_inline_bad_z85, DV_COMMANDS, DV),
    _c("dv-inline-bad-length", dv_inline_bad_length, DV_COMMANDS, DV),
    _c("dv-inline-padding-without-data", dv_inline_padding_without_data, DV_COMMANDS, DV),
    _c("dv-inline-padding-overflow", dv_inline_padding_overflow, DV_COMMANDS, DV),
    _c("dv-inline-padding-beyond-size", dv_inline_padding_beyond_size, DV_COMMANDS, DV),
    _c(
        "dv-shared-file-one-bad-entry",
        dv_shared_file_one_bad_entry,
        (VERIFY, PURGE, DOWNGRADE),
        DV,
    ),
    _c(
        "dv-absolute-path-outside-root",
        dv_absolute_path_outside_root,
        WRITERS,
        REFUSED,
        still_reads=(VERIFY,),
    ),
    _c(
        "dv-prefix-climbs-out-of-root",
        dv_prefix_climbs_out,
        WRITERS,
        REFUSED,
        still_reads=(VERIFY,),
    ),
]

PATH_CASES = [
    _c(f"path-{name}", build, WRITERS, REFUSED, still_reads=(FILES_JSON,))
    for name, build in [
        ("dotdot", path_dotdot),
        ("absolute-outside-root", path_absolute),
        ("file-uri-outside-root", path_file_uri_outside),
        ("other-bucket", path_other_bucket),
        ("file-etc-passwd", path_file_etc),
        ("percent-encoded-dotdot", path_percent_encoded_dotdot),
        ("control-characters", path_control_character),
        ("percent-encoded-newline", path_percent_encoded_newline),
        ("backslashes", path_backslash),
        ("symlink-out-of-root", path_symlink_outside),
    ]
]

S3_TABLE = "s3://{bucket}/table"
ARGUMENT_CASES = [
    _c(
        "arg-retain-unknown-unit",
        unchanged("--retain", "7x"),
        (("vacuum", "{table}", "--retain", "7x"),),
        USAGE,
    ),
    _c(
        "arg-retain-negative",
        unchanged("--retain", "-1h"),
        (("vacuum", "{table}", "--retain", "-1h"),),
        USAGE,
    ),
    _c(
        "arg-retain-too-long",
        unchanged("--retain"),
        (("vacuum", "{table}", "--retain", "9" * 400 + "d", "--dry-run"),),
        USAGE,
    ),
    _c(
        "arg-ratio-negative",
        unchanged("--min-deleted-ratio", "-0.1"),
        (("optimize", "{table}", "--purge", "--min-deleted-ratio", "-0.1"),),
        USAGE,
    ),
    _c(
        "arg-ratio-above-one",
        unchanged("--min-deleted-ratio", "1.5"),
        (("optimize", "{table}", "--purge", "--min-deleted-ratio", "1.5"),),
        USAGE,
    ),
    _c(
        "arg-ratio-nan",
        unchanged("--min-deleted-ratio", "nan"),
        (("optimize", "{table}", "--purge", "--min-deleted-ratio", "nan"),),
        USAGE,
    ),
    _c(
        "arg-where-unparsable",
        unchanged("--where", "id = = 3"),
        (("delete", "{table}", "--where", "id = = 3"),),
        PredicateError.exit_code,
    ),
    _c(
        "arg-where-unknown-column",
        unchanged("nope", "id, name"),
        (("delete", "{table}", "--where", "nope = 3"),),
        PredicateError.exit_code,
    ),
    _c(
        "arg-where-not-boolean",
        unchanged("id", "bigint"),
        (("delete", "{table}", "--where", "id"),),
        PredicateError.exit_code,
    ),
    _c(
        "arg-optimize-where-not-partition",
        unchanged("--where"),
        (("optimize", "{table}", "--where", "id = 1"),),
        USAGE,
    ),
    _c(
        "arg-table-does-not-exist",
        table_missing,
        (("inspect", "{root}/no-such-table"), ("delete", "{root}/no-such-table", "--where", "1=1")),
        TableNotFoundError.exit_code,
    ),
    _c(
        "arg-engine-unknown",
        unchanged("--engine", "turbo"),
        (("optimize", "{table}", "--purge", "--engine", "turbo"),),
        CLICK_USAGE,
    ),
    _c("arg-spark-conf-not-key-value", unchanged("--spark-conf", "foo"), (SPARK_CONF,), USAGE),
    _c(
        "arg-storage-option-not-key-value",
        unchanged("--storage-option", "noequals"),
        (("inspect", "{table}", "--storage-option", "noequals"),),
        USAGE,
    ),
    _c(
        "arg-check-not-name-limit",
        unchanged("--check", "foo"),
        (("inspect", "{table}", "--check", "foo"),),
        USAGE,
    ),
    _c(
        "arg-s3-endpoint-closed-port",
        unchanged(f"s3://{S3_BUCKET}/table"),
        (
            (
                "inspect",
                S3_TABLE,
                "--storage-option",
                "endpoint_url=http://127.0.0.1:{closed_port}",
                "--storage-option",
                "key=unused",
                "--storage-option",
                "secret=unused",
            ),
        ),
        StorageError.exit_code,
        s3=True,
    ),
    _c(
        "arg-s3-missing-credentials",
        unchanged(f"s3://{S3_BUCKET}/table", "credentials"),
        (
            ("inspect", S3_TABLE, "--storage-option", "endpoint_url={endpoint}"),
            (
                "delete",
                S3_TABLE,
                "--where",
                "id = 1",
                "--storage-option",
                "endpoint_url={endpoint}",
            ),
        ),
        StorageError.exit_code,
        s3=True,
    ),
]

NOT_FOUND = VersionNotFoundError.exit_code
RESTORE_CASES = [
    _c(
        "restore-version-beyond-latest",
        unchanged("version 99 does not exist", f"latest version is {DELETE_VERSION}"),
        (("restore", "{table}", "--version", "99"),),
        NOT_FOUND,
    ),
    _c(
        "restore-current-version",
        unchanged("nothing to restore", f"--version {DELETE_VERSION}"),
        (("restore", "{table}", "--version", str(DELETE_VERSION)),),
        USAGE,
    ),
    _c(
        "restore-without-a-target",
        unchanged("--version", "--timestamp"),
        (("restore", "{table}"), ("restore", "{table}", "--dry-run")),
        USAGE,
    ),
    _c(
        "restore-version-and-timestamp",
        unchanged("exactly one of --version and --timestamp"),
        (("restore", "{table}", "--version", "1", "--timestamp", "2024-01-01"),),
        USAGE,
    ),
    _c(
        "restore-negative-version",
        unchanged("--version"),
        (("restore", "{table}", "--version", "-1"),),
        CLICK_USAGE,
    ),
    _c(
        "restore-timestamp-not-iso-8601",
        unchanged("--timestamp", "ISO 8601"),
        (("restore", "{table}", "--timestamp", "yesterday"),),
        CLICK_USAGE,
    ),
    _c(
        "restore-timestamp-before-the-first-commit",
        unchanged("before the earliest available version"),
        (("restore", "{table}", "--timestamp", "2000-01-01"),),
        NOT_FOUND,
    ),
    _c(
        "restore-table-does-not-exist",
        table_missing,
        (("restore", "{root}/no-such-table", "--version", "0"),),
        TableNotFoundError.exit_code,
    ),
    _c(
        "restore-data-file-vacuumed",
        restore_data_file_vacuumed,
        (
            ("restore", "{table}", "--version", "3"),
            ("restore", "{table}", "--version", "3", "--dry-run", "--json"),
        ),
        FileMissingError.exit_code,
    ),
]

# Unreadable cleanup properties are refused; hostile logs the cleanup must leave as they are
# (`vacuum --log` then deletes nothing, which the runner's unchanged-tree check proves).
LOG_CLEANUP_CASES = [
    _c(
        "log-cleanup-retention-not-an-interval",
        _log_property("delta.logRetentionDuration", "forever"),
        (VACUUM_LOG, VACUUM_LOG_DRY),
        REFUSED,
        still_reads=(INSPECT,),
    ),
    _c(
        "log-cleanup-flag-not-a-boolean",
        _log_property("delta.enableExpiredLogCleanup", "sometimes"),
        (VACUUM_LOG, VACUUM_LOG_DRY),
        REFUSED,
    ),
    _c(
        "log-cleanup-protected-version-not-a-number",
        _log_property(
            "delta.requireCheckpointProtectionBeforeVersion", "v7", "checkpointProtection"
        ),
        (VACUUM_LOG,),
        REFUSED,
    ),
    _c(
        "log-cleanup-garbage-files",
        garbage_in_expired_log,
        (),
        0,
        still_reads=(VACUUM_LOG_DRY, INSPECT),
        golden="basic-dv-with-checkpoint",
    ),
    _c(
        "log-cleanup-checkpoint-part-missing",
        expired_multipart_checkpoint_missing_part,
        (),
        0,
        still_reads=(VACUUM_LOG, INSPECT),
        golden="v1-multi-part-partitioned-struct-stats-only",
    ),
    _c(
        "log-cleanup-cutoff-checkpoint-cut",
        expired_log_cutoff_checkpoint_cut,
        (),
        0,
        still_reads=(VACUUM_LOG, INSPECT),
        golden="basic-dv-with-checkpoint",
    ),
    _c(
        "log-cleanup-future-dated",
        future_dated_log,
        (),
        0,
        still_reads=(VACUUM_LOG,),
        golden="basic-dv-with-checkpoint",
    ),
]

CASES: list[HostileCase] = [
    *LOG_CASES,
    *DV_CASES,
    *PATH_CASES,
    *ARGUMENT_CASES,
    *RESTORE_CASES,
    *LOG_CLEANUP_CASES,
]
