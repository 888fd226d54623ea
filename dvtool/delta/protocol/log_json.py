"""Parse newline-delimited JSON log files: commits, log compactions, V2 JSON checkpoints.

Parsing is strict about what is corrupt: a line that is not a JSON object, or a file cut
before its final newline, is a corrupt log and is reported with the file name, never read as a
shorter table. It is tolerant of what is merely new: PROTOCOL.md ("Protocol Evolution") says
readers must ignore fields they do not know, so a key of a line that names no action dvtool
knows (`ACTION_KINDS`) is ignored, whether it stands alone (a new action type) or beside a
known action (Delta's evolvability tests write `{"commitInfo": {...}, "some_new_action": [..]}`).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dvtool.delta.protocol.actions import DomainMetadata, Txn
from dvtool.delta.protocol.replay import ActionBatch
from dvtool.errors import LogError, exception_text

# The action types of PROTOCOL.md ("Actions"), keys of a log line; any other key is a field
# dvtool does not know and is ignored.
ACTION_KINDS = frozenset(
    {
        "add",
        "remove",
        "metaData",
        "protocol",
        "txn",
        "domainMetadata",
        "commitInfo",
        "cdc",
        "sidecar",
        "checkpointMetadata",
    }
)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building many small dicts: it would rescan them repeatedly.

    Log replay allocates one dict per action and keeps them; no cycles are created, so the
    collector has nothing to find. Not reentrant-safe across threads: parse on one thread.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_actions(data: bytes, name: str) -> list[dict[str, Any]]:
    """Decode every line of a log file into its action object.

    A commit is written atomically, so every line is a complete JSON object; an empty file, a
    file cut inside a line and undecodable lines are corruption and raise LogError naming `name`.
    The lines are decoded as one JSON array (one call into the C decoder instead of one per
    action); only when that fails is the file decoded line by line to find the bad line.
    Either way the result holds single-key objects: a line of one key as it is (an unknown
    action type is for the caller to ignore), a line of several keys as its one known action,
    or nothing when it has none (`_known_actions`).
    """
    try:
        lines = [line for line in data.decode("utf-8").split("\n") if line.strip()]
    except UnicodeDecodeError as e:
        raise LogError(f"log file {name} is not UTF-8 text: {e}") from None
    if not lines:
        raise LogError(
            f"log file {name} is empty",
            hint="A commit is never empty; the file was truncated. Restore it from a backup.",
        )
    with gc_paused():
        try:
            decoded: Any = json.loads("[" + ",".join(lines) + "]")
        except ValueError:
            decoded = None
    actions: list[Any] | None = decoded if isinstance(decoded, list) else None
    if actions is None or len(actions) != len(lines):
        actions = [_parse_line(line, number, name) for number, line in enumerate(lines, 1)]
    for action in actions:
        # The common case, one key per line, is taken as it is: an unknown single key is an
        # action type batch_from_actions ignores.
        if type(action) is not dict or len(action) != 1:
            return _known_actions(actions, name)
    return actions


def _known_actions(actions: list[Any], name: str) -> list[dict[str, Any]]:
    """`actions` as single-key objects: the known action of each line, unknown keys dropped.

    A line that is not an object is corrupt. A line whose keys name no known action (or only
    null ones, as a writer that serializes every action column leaves them) holds nothing
    dvtool reads and is skipped. A line holding two known actions is refused: Delta Spark
    reads a line as one action (its SingleAction keeps one of them), the kernels read every
    action column, so which table state it stands for depends on the reader.
    """
    out: list[dict[str, Any]] = []
    for number, action in enumerate(actions, start=1):
        if not isinstance(action, dict):
            raise LogError(
                f"log file {name} line {number} is not a JSON object",
                hint="The file was damaged; it cannot be read as a Delta log file.",
            )
        if len(action) == 1:
            out.append(action)
            continue
        known = [kind for kind, body in action.items() if kind in ACTION_KINDS and body is not None]
        if len(known) > 1:
            raise LogError(
                f"log file {name} line {number} holds more than one action "
                f"({', '.join(known)}); a line holds one action",
                hint="Readers disagree on which of them counts; the file was damaged or "
                "written by a faulty writer. Restore it from a backup.",
            )
        if known:
            out.append({known[0]: action[known[0]]})
    return out


def _parse_line(line: str, number: int, name: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as e:
        raise LogError(
            f"log file {name} is corrupt at line {number}: {e}",
            hint="The file was cut or damaged; it cannot be read as a Delta commit.",
        ) from None


def batch_from_actions(actions: list[dict[str, Any]], version: int, name: str) -> ActionBatch:
    """Sort decoded actions into an ActionBatch; unknown action types are ignored."""
    batch = ActionBatch(version, name=name)
    for action in actions:
        ((kind, body),) = action.items()
        if kind not in ACTION_KINDS or body is None:
            continue  # an action type dvtool does not know, or an absent (null) action
        if not isinstance(body, dict):
            raise LogError(f"log file {name}: '{kind}' action is not an object")
        _add_action(batch, kind, body, name)
    return batch


def _add_action(batch: ActionBatch, kind: str, body: dict[str, Any], name: str) -> None:
    if kind == "add":
        batch.adds.append(body)
    elif kind == "remove":
        batch.removes.append(body)
    elif kind == "protocol":
        # Kept as logged: only the protocol and metaData that win the replay must be
        # complete, and the replay checks them (`Replayer.finish`).
        _only_once(batch.protocol, kind, name)
        batch.protocol = body
    elif kind == "metaData":
        _only_once(batch.metadata, kind, name)
        batch.metadata = body
    elif kind == "txn":
        batch.txns.append(_parse(Txn.from_json, body, kind, name))
    elif kind == "domainMetadata":
        batch.domains.append(_parse(DomainMetadata.from_json, body, kind, name))
    elif kind == "commitInfo":
        batch.commit_info = body
    elif kind == "sidecar":
        batch.sidecars.append(body)


def _only_once(existing: object, kind: str, name: str) -> None:
    if existing is not None:
        raise LogError(f"log file {name} holds more than one '{kind}' action")


def _parse(parser: Any, body: dict[str, Any], kind: str, name: str) -> Any:
    try:
        return parser(body)
    except (KeyError, TypeError, ValueError) as e:
        raise LogError(
            f"log file {name}: malformed '{kind}' action ({exception_text(e)})"
        ) from None


def parse_commit(
    data: bytes, version: int, name: str, *, single_version: bool = True
) -> ActionBatch:
    """Parse one commit (`single_version`) or log compaction file into an ActionBatch.

    A commit must name each path in at most one add and one remove (see
    `check_one_action_per_path`); a log compaction spans versions, so it may hold several
    removes of one path with different DVs.
    """
    batch = batch_from_actions(parse_actions(data, name), version, name)
    if single_version:
        check_one_action_per_path(batch, name)
    return batch


def check_one_action_per_path(batch: ActionBatch, name: str) -> None:
    """Refuse a commit with two adds (or two removes) of one path.

    PROTOCOL.md (Action Reconciliation): actions of a commit are not ordered, so a valid
    version holds at most one file action of each type per path, whatever its DV. Two adds
    of one path would make the data file live twice, or leave it ambiguous which DV applies.
    """
    for kind, actions in (("add", batch.adds), ("remove", batch.removes)):
        paths = [action.get("path") for action in actions]
        try:
            if len(set(paths)) == len(paths):
                continue
        except TypeError:
            continue  # an unhashable path: replay reports the malformed action
        raise LogError(
            f"log file {name} holds more than one '{kind}' of data file "
            f"{_first_duplicate(paths)!r}",
            hint="A commit may add and remove each path at most once; this commit is "
            "invalid. Restore it from a backup.",
        )


def _first_duplicate(values: list[Any]) -> Any:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def first_commit_info(data: bytes) -> dict[str, Any] | None:
    """The commitInfo of a commit, read without decoding its other actions when possible."""
    for line in data.split(b"\n"):
        if b'"commitInfo"' in line:
            try:
                action = json.loads(line)
            except ValueError:
                return None
            info = action.get("commitInfo") if isinstance(action, dict) else None
            return info if isinstance(info, dict) else None
    return None
