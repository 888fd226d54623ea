"""What is wrong with a log's checkpoints and its `_last_checkpoint` hint, named and explained.

A reader must tolerate a damaged checkpoint (a crashed or faulty writer, a truncated copy, a
lost part or sidecar): the log reader falls back to an older checkpoint or to the JSON
commits, which rebuild the same state. Falling back silently hides the damage, though, while
other readers (delta-rs, polars, Spark) fail on the same table. So the reader records each
checkpoint it passed over as a `DamagedCheckpoint`, and the state of `_last_checkpoint` as a
`LastCheckpointProblem`; `dvtool inspect` shows them, `inspect --verify` reports them as
problems (their `kind`), and `dvtool checkpoint` writes what replaces them.

Pure: the reader hands in file names, versions and the bytes of `_last_checkpoint`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dvtool.delta.protocol.log_files import LogFile, LogFileKind, missing_checkpoint_parts

# The kinds of damage, as `inspect --verify` names its problems (README.md, "inspect").
CHECKPOINT_UNREADABLE = "checkpoint-unreadable"
CHECKPOINT_PART_MISSING = "checkpoint-part-missing"
CHECKPOINT_SIDECAR_MISSING = "checkpoint-sidecar-missing"
LAST_CHECKPOINT_INVALID = "last-checkpoint-invalid"
LAST_CHECKPOINT_TOO_NEW = "last-checkpoint-too-new"
LAST_CHECKPOINT_DANGLING = "last-checkpoint-dangling"

# `_last_checkpoint` fields and the JSON types PROTOCOL.md ("Last Checkpoint File Schema")
# gives them; `version` is required, the others optional.
_HINT_INTEGERS = ("version", "size", "parts", "sizeInBytes", "numOfAddFiles")
_HINT_OBJECTS = ("checkpointSchema", "tags", "v2Checkpoint")


@dataclass(frozen=True)
class DamagedCheckpoint:
    """A checkpoint a reader cannot use, which the log reader passed over.

    `checkpoint` names its files (the parts of a multi-part one) under `_delta_log`; `files`
    the ones at fault (unreadable, or missing: a part, or a sidecar as `_sidecars/NAME`);
    `reason` says what is wrong with them.
    """

    version: int
    kind: str
    checkpoint: tuple[str, ...]
    files: tuple[str, ...]
    reason: str

    @property
    def message(self) -> str:
        """One sentence naming the checkpoint, the files at fault and what is wrong."""
        what = f"the checkpoint of version {self.version} ({', '.join(self.checkpoint)})"
        faulty = ", ".join(self.files)
        if self.kind == CHECKPOINT_PART_MISSING:
            return f"{what} is incomplete: part {faulty} is missing"
        if self.kind == CHECKPOINT_SIDECAR_MISSING:
            return f"{what} references sidecar {faulty}, which is missing"
        if self.files == self.checkpoint:
            return f"{what} cannot be read: {self.reason}"
        return f"{what} cannot be read: {faulty}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "kind": self.kind,
            "checkpoint": list(self.checkpoint),
            "files": list(self.files),
            "message": self.message,
        }


@dataclass(frozen=True)
class LastCheckpointProblem:
    """What is wrong with `_delta_log/_last_checkpoint`: not a hint readers can follow."""

    kind: str
    message: str
    version: int | None = None
    """The version it names (None when it names none)."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": self.version, "message": self.message}


def parse_last_checkpoint(data: bytes) -> int:
    """The checkpoint version `_last_checkpoint` names; ValueError saying why it is not a
    hint (not JSON, not an object, or a field of the wrong type)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"it is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"it holds a JSON {type(doc).__name__}, not an object")
    if "version" not in doc:
        raise ValueError("it has no 'version'")
    for key in _HINT_INTEGERS:
        value = doc.get(key)
        if key in doc and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"its '{key}' is {json.dumps(value)}, not a non-negative integer")
    for key in _HINT_OBJECTS:
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ValueError(f"its '{key}' is not an object")
    version: int = doc["version"]
    return version


def invalid_last_checkpoint(reason: str) -> LastCheckpointProblem:
    """The problem of a `_last_checkpoint` that `parse_last_checkpoint` rejected."""
    return LastCheckpointProblem(
        LAST_CHECKPOINT_INVALID, f"_delta_log/_last_checkpoint is not a valid hint: {reason}"
    )


def last_checkpoint_problem(hint: int, files: Iterable[LogFile]) -> LastCheckpointProblem | None:
    """What is wrong with a `_last_checkpoint` naming version `hint`, given the whole listing
    of `_delta_log`: a version beyond the newest commit, or one without any checkpoint file.

    A checkpoint at `hint` that is incomplete or unreadable is the checkpoint's damage, not
    the hint's (it points at the right version; a new checkpoint there mends both).
    """
    files = list(files)
    latest = max((f.version for f in files), default=-1)
    if hint > latest:
        return LastCheckpointProblem(
            LAST_CHECKPOINT_TOO_NEW,
            f"_delta_log/_last_checkpoint names version {hint}, beyond the newest commit "
            f"{latest}; readers that follow it find no checkpoint",
            hint,
        )
    if not any(f.is_checkpoint and f.version == hint for f in files):
        return LastCheckpointProblem(
            LAST_CHECKPOINT_DANGLING,
            f"_delta_log/_last_checkpoint names the checkpoint of version {hint}, which does "
            "not exist",
            hint,
        )
    return None


def incomplete_checkpoints(
    files: Iterable[LogFile], after: int | None, upto: int
) -> list[DamagedCheckpoint]:
    """The multi-part checkpoints newer than version `after` (None: any) and at most `upto`
    that miss a part: a reader passes over them (`complete_checkpoints`), newest first."""
    files = list(files)
    missing = missing_checkpoint_parts(files)
    damaged = []
    for version in sorted(missing, reverse=True):
        if version > upto or (after is not None and version <= after):
            continue
        present = sorted(
            f.name
            for f in files
            if f.kind == LogFileKind.MULTIPART_CHECKPOINT and f.version == version
        )
        damaged.append(
            DamagedCheckpoint(
                version,
                CHECKPOINT_PART_MISSING,
                tuple(sorted([*present, *missing[version]])),
                tuple(missing[version]),
                "missing",
            )
        )
    return damaged
