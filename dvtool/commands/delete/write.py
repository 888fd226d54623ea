"""Step 3 of `dvtool delete`: the file actions of its commit and the data files it writes.

A delete touches up to thousands of files (a streaming table's small files), so the actions
are built for all of them at once: one `take` of the touched rows of the snapshot's file
table, then the column-wise builders of `dvtool.delta.protocol.commit` (`remove_actions_for_adds`,
`add_actions_from_table`), which give exactly the actions of the row functions
(`remove_for_add`, `add_action_from_row`) at a fraction of the per-file cost.

- DV mode: per file, the remove of the old (path, DV) and the add of the path with the new
  DV, its `stats` re-serialized with `numRecords` first and `tightBounds: false` (the new
  DV makes the bounds loose), every number written back exactly as it was.
- Files whose rows are all deleted: the remove only.
- Copy-on-write (`_rewrite_files`): the engine rewrites each file without its deleted rows;
  with the change data feed on, the deleted rows also go to `_change_data` files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyroaring import BitMap64

from dvtool import faults
from dvtool.arrays import arrow_values
from dvtool.deletion_vectors.codec import bitmap_rows
from dvtool.delta.dvstore import DVStore, WrittenDVFile
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.commit import add_actions_from_table, remove_actions_for_adds
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.engines.base import Engine, RewriteBin, RewriteInput, TableLayout
from dvtool.engines.rewrite import write_change_data
from dvtool.storage.table_storage import Storage

JSON = dict[str, Any]


@dataclass
class Touched:
    """A file the delete changes: its row in the snapshot's file table and the rows deleted."""

    index: int
    new_rows: BitMap64  # rows the predicate matched that no DV deleted yet
    old_rows: BitMap64 | None  # rows its current DV deletes, None without one
    num_records: int
    read: bool  # False when the plan decided from partition values or stats alone

    def merged(self) -> BitMap64:
        """Every row deleted after the delete: the old DV's and the new matches."""
        merged = BitMap64(self.new_rows)
        if self.old_rows is not None:
            merged |= self.old_rows
        return merged


@dataclass(frozen=True)
class Rewritten:
    """What the copy-on-write rewrite added to the commit (Delta's DELETE metrics)."""

    added_files: int = 0
    added_bytes: int = 0
    copied_rows: int = 0
    change_files: int = 0


def write_files(
    storage: Storage,
    snapshot: Snapshot,
    by_action: Mapping[str, Sequence[Touched]],
    store: DVStore,
    engine: Engine,
    written: list[str],
    now: int,
) -> tuple[list[JSON], list[WrittenDVFile], Rewritten]:
    """Write the DV file(s) and data files of a delete; the file actions of its commit.

    `by_action` holds the touched files by `FileChange.action` (`dv`, `remove`, `rewrite`).
    The actions come in a fixed order (the per-file code's, so that a commit's bytes did not
    change): each DV file's remove and re-add, the whole files' removes, each rewritten
    file's actions, the change data of removed files. Every location written is added to
    `written` as soon as it exists (for cleanup).
    """
    files = snapshot.files
    bitmaps = [t.merged() for t in by_action["dv"]]
    prefix = _random_prefix_length(snapshot)
    descriptors, dv_files = store.write(bitmaps, prefix_length=prefix) if bitmaps else ([], [])
    written += [f.location for f in dv_files]
    actions = _dv_actions(files, by_action["dv"], descriptors, now)
    actions += _remove_actions(files, by_action["remove"], now)
    if not by_action["rewrite"]:
        return actions, dv_files, Rewritten()
    layout = TableLayout.of(storage, snapshot)
    configuration = snapshot.metadata.configuration
    rewritten = _rewrite_files(
        layout, configuration, files, by_action["rewrite"], engine, actions, written, now
    )
    if rewritten.change_files:
        more = _removed_change_data(layout, files, by_action["remove"], actions, written)
        rewritten = replace(rewritten, change_files=rewritten.change_files + more)
    return actions, dv_files, rewritten


def _random_prefix_length(snapshot: Snapshot) -> int:
    """The length of the random directory DV files go under (0: none), from the table's
    `delta.randomizeFilePrefixes` / `delta.randomPrefixLength`."""
    config = snapshot.metadata.configuration
    if config.get("delta.randomizeFilePrefixes", "").lower() != "true":
        return 0
    try:
        return max(1, int(config.get("delta.randomPrefixLength", "2")))
    except ValueError:
        return 2


def _touched_rows(files: pa.Table, touched: Sequence[Touched]) -> pa.Table:
    """The rows of the snapshot's file table `files` of the touched files, in their order."""
    indexes = arrow_values.array([t.index for t in touched], pa.int64())
    return files.take(indexes)


def _dv_actions(
    files: pa.Table,
    touched: Sequence[Touched],
    descriptors: Sequence[DeletionVectorDescriptor],
    now: int,
) -> list[JSON]:
    """Per touched file, in order, its remove and its re-add with the new DV (`descriptors`)."""
    if not touched:
        return []
    rows = _touched_rows(files, touched)
    removes = remove_actions_for_adds(rows, now)
    adds = add_actions_from_table(rows, data_change=True)
    stats = widened_stats([a["add"].get("stats") for a in adds], [t.num_records for t in touched])
    out: list[JSON] = []
    for remove, add, descriptor, text in zip(removes, adds, descriptors, stats, strict=True):
        body = add["add"]
        body["deletionVector"] = descriptor.to_json()
        body["stats"] = text
        out += (remove, add)
    return out


def _remove_actions(files: pa.Table, touched: Sequence[Touched], now: int) -> list[JSON]:
    """The removes of the touched files (those whose every row the delete deletes)."""
    if not touched:
        return []
    return remove_actions_for_adds(_touched_rows(files, touched), now)


# -- stats of the re-added files -------------------------------------------------------------


class _JsonNumber(str):
    """The text of a non-integral JSON number, written back verbatim by `_stats_json`."""


# Compact, ASCII-escaped: what `_stats_json` writes for values without a `_JsonNumber`.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def widened_stats(texts: Sequence[str | None], records: Sequence[int]) -> list[str]:
    """The `stats` of re-added files: `numRecords` first, `tightBounds` false, the rest kept.

    Missing or unreadable stats become `{"numRecords":N,"tightBounds":false}`. Non-integral
    numbers keep their exact text (see `_stats_json`); stats without any (most: integer and
    string bounds) are encoded in one C call, which writes the same bytes.
    """
    floats: list[str] = []  # the non-integral numbers of the stats being parsed

    def verbatim(text: str) -> _JsonNumber:
        floats.append(text)
        return _JsonNumber(text)

    decoder = json.JSONDecoder(parse_float=verbatim)
    out = []
    for text, n in zip(texts, records, strict=True):
        floats.clear()
        stats = _parsed(decoder, text)
        stats["numRecords"] = n
        stats["tightBounds"] = False
        widened = {"numRecords": n, **{k: v for k, v in stats.items() if k != "numRecords"}}
        out.append(_stats_json(widened) if floats else _COMPACT.encode(widened))
    return out


def _parsed(decoder: json.JSONDecoder, text: str | None) -> dict[str, Any]:
    """The stats object of `text`; empty when missing, unreadable or not an object."""
    if not text:
        return {}
    try:
        parsed = decoder.decode(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _stats_json(value: object) -> str:
    """Compact JSON in which numbers parsed as `_JsonNumber` keep their exact text.

    Converting them to float or Decimal and back would change them: a float rounds exact
    decimal bounds (12345678901234567.81 becomes 12345678901234568), and a Decimal turns a
    rounded double such as 1.2345678901234568e+16 into an integer that readers then take
    as exact. Either way a min rounded up or a max rounded down makes readers (and later
    deletes) skip files that hold matching rows, or remove whole files wrongly.
    """
    if isinstance(value, _JsonNumber):
        return str(value)
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}:{_stats_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_stats_json(v) for v in value) + "]"
    return json.dumps(value)


# -- copy-on-write ---------------------------------------------------------------------------


def _rewrite_files(
    layout: TableLayout,
    configuration: Mapping[str, str],
    files: pa.Table,
    touched: Sequence[Touched],
    engine: Engine,
    actions: list[JSON],
    written: list[str],
    now: int,
) -> Rewritten:
    """Copy-on-write: the engine rewrites each touched file without its deleted rows.

    Appends per file its remove, its new file's add (none when no row is left) and, with the
    change data feed on, the `cdc` action of its deleted rows (written in-process: they are
    the few rows the delete matched); the locations written go to `written` as they are.
    """
    cdf = configuration.get("delta.enableChangeDataFeed", "").lower() == "true"
    rows = _touched_rows(files, touched)
    add_rows = rows.to_pylist()
    removes = remove_actions_for_adds(rows, now)
    bins = [_rewrite_bin(layout, row, t.merged()) for t, row in zip(touched, add_rows, strict=True)]
    outputs = engine.rewrite(layout, configuration, bins)
    written.extend(out.location for out in outputs if out is not None)
    faults.reached("data-files-written")
    added = added_bytes = copied = change_files = 0
    for t, add_row, remove, out in zip(touched, add_rows, removes, outputs, strict=True):
        actions.append(remove)
        if out is not None:
            # No `clusteringProvider`: PROTOCOL.md sets it only "when a clustering
            # implementation clusters files", and Delta Spark's DELETE rewrites (plain file
            # writes) claim none; it used to be copied from the input here.
            actions.append(out.add_action(dict(add_row["partitionValues"] or []), data_change=True))
            added += 1
            added_bytes += out.size
            copied += out.num_records
        if cdf and len(t.new_rows):
            actions.append(_change_data(layout, add_row, t, written))
            change_files += 1
    return Rewritten(added, added_bytes, copied, change_files)


def _rewrite_bin(layout: TableLayout, add_row: dict[str, Any], drop: BitMap64) -> RewriteBin:
    storage = layout.storage
    location = storage.resolve(add_row["path"])
    relative = storage.relative_to_root(location) or ""
    directory = relative.rsplit("/", 1)[0] if "/" in relative else ""
    partitions = dict(add_row["partitionValues"] or [])
    source = RewriteInput(
        add_row["path"],
        location,
        bitmap_rows(drop),
        add_row.get("baseRowId"),
        add_row.get("defaultRowCommitVersion"),
    )
    return RewriteBin((source,), directory, partitions)


def _removed_change_data(
    layout: TableLayout,
    files: pa.Table,
    removed: Sequence[Touched],
    actions: list[JSON],
    written: list[str],
) -> int:
    """Change data for the files removed whole, when the commit carries change data anyway.

    A change data feed reader takes the `cdc` files of a commit that has any as its whole
    change set, so the rows of files removed without a rewrite must be written there too.
    (A commit without `cdc` files needs none: readers derive the deleted rows from its
    removed files and their DVs.)
    """
    removed = [t for t in removed if len(t.new_rows)]
    if not removed:
        return 0
    add_rows = _touched_rows(files, removed).to_pylist()
    for t, add_row in zip(removed, add_rows, strict=True):
        actions.append(_change_data(layout, add_row, t, written))
    return len(removed)


def _change_data(
    layout: TableLayout, add_row: dict[str, Any], t: Touched, written: list[str]
) -> JSON:
    """Write the newly deleted rows of `t` as change data; its `cdc` action."""
    action, location = write_change_data(layout, add_row, bitmap_rows(t.new_rows))
    written.append(location)
    return action
