"""A delete's commit, byte for byte, against the per-file code it replaced.

`dvtool.commands.delete.write` builds the file actions of thousands of touched files at once
(one `take`, the column-wise builders of `dvtool.delta.protocol.commit`, the new stats encoded in
one C
call when they hold no non-integral number). What a commit file holds must not change by a
byte, so the reference below is the per-row code it replaced, kept verbatim: a one-row
`slice(...).to_pylist()` per file, `remove_for_add` and `add_action_from_row` per action, the
stats re-serialized value by value. Each test runs a delete on a table of a few hundred
varied files (partitions with nulls and non-ASCII values, float, decimal and string bounds,
files without float bounds, old DVs, fields of other writers) and rebuilds its commit with
the reference from the snapshot it read: only the timestamps and the ids of what it wrote
(commitInfo, DV descriptors, rewritten files, change data files) are taken from the commit.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.commands.delete.command import DeleteRequest, DeleteResult, run_delete
from dvtool.commands.delete.write import widened_stats
from dvtool.commands.enable import run_enable
from dvtool.delta.log.reader import open_log
from dvtool.delta.protocol.commit import add_action_from_row, encode_commit, remove_for_add
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor

FILES = 300
ROWS_PER_FILE = 6

# -- the reference: the per-file code the bulk path replaced ----------------------------------


class _JsonNumber(str):
    """The text of a non-integral JSON number, written back verbatim by `ref_stats_json`."""


def ref_stats(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        parsed = json.loads(text, parse_float=_JsonNumber)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def ref_stats_json(value: object) -> str:
    if isinstance(value, _JsonNumber):
        return str(value)
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}:{ref_stats_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(ref_stats_json(v) for v in value) + "]"
    return json.dumps(value)


def ref_widened(text: str | None, num_records: int) -> str:
    stats = ref_stats(text) or {}
    stats["numRecords"] = num_records
    stats["tightBounds"] = False
    return ref_stats_json(
        {"numRecords": num_records, **{k: v for k, v in stats.items() if k != "numRecords"}}
    )


def ref_add_with_dv(
    row: dict[str, Any], descriptor: DeletionVectorDescriptor, num_records: int
) -> dict[str, Any]:
    action = add_action_from_row(row, data_change=True)
    body = action["add"]
    body["deletionVector"] = descriptor.to_json()
    body["stats"] = ref_widened(body.get("stats"), num_records)
    return action


def ref_file_actions(
    files: pa.Table, result: DeleteResult, committed: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The file actions the per-file code wrote for `result`'s changes, in its order.

    `files` is the snapshot the delete read; the new DVs, the rewritten files' adds and the
    change data files are taken from `committed` (the commit's file actions), in order."""
    index = {path: i for i, path in enumerate(files.column("path").to_pylist())}
    row = {c.path: files.slice(index[c.path], 1).to_pylist()[0] for c in result.changes}
    now = next(a["remove"]["deletionTimestamp"] for a in committed if "remove" in a)
    new_dvs = {a["add"]["path"]: a["add"].get("deletionVector") for a in committed if "add" in a}
    adds = iter([a for a in committed if "add" in a])
    cdcs = iter([a for a in committed if "cdc" in a])
    cdf = any("cdc" in a for a in committed)
    out: list[dict[str, Any]] = []
    for c in result.changes:
        if c.action == "dv":
            descriptor = DeletionVectorDescriptor.from_json(new_dvs[c.path])
            out += [remove_for_add(row[c.path], now)]
            out += [ref_add_with_dv(row[c.path], descriptor, c.num_records or 0)]
    out += [remove_for_add(row[c.path], now) for c in result.changes if c.action == "remove"]
    for c in result.changes:
        if c.action == "rewrite":
            out += [remove_for_add(row[c.path], now), next(adds)]
            if cdf and c.deleted_rows:
                out.append(next(cdcs))
    out += [next(cdcs) for c in result.changes if cdf and c.action == "remove" and c.deleted_rows]
    assert next(cdcs, None) is None
    return out


def ref_result_json(result: DeleteResult) -> dict[str, Any]:
    out = {k: v for k, v in dataclasses.asdict(result).items() if k != "changes"}
    out["files"] = [dataclasses.asdict(c) for c in result.changes]
    return out


# -- the table -------------------------------------------------------------------------------


def _part(i: int) -> str | None:
    if i == 0:
        return None
    return f"p{i}" if i % 17 else f"é/ü {i}"


def _rows() -> Iterator[dict[str, Any]]:
    for f in range(FILES):
        for r in range(ROWS_PER_FILE):
            i = f * ROWS_PER_FILE + r
            yield {
                "id": i,
                # No non-integral bounds in every other file: stats the C encoder writes.
                "price": None if f % 2 else i / 7 + 0.1,
                "amount": None if f % 2 else decimal.Decimal(i * 37 - 5000).scaleb(-2),
                "name": ["café", "naïve", "plain", "東京", 'q"uote\\'][i % 5],
                "part": _part(f),
            }


SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("price", pa.float64()),
        ("amount", pa.decimal128(12, 2)),
        ("name", pa.string()),
        ("part", pa.string()),
    ]
)


def _with_other_writers_fields(table: Path) -> None:
    """Tags and a field dvtool does not model on some adds, as other writers write them."""
    commit = table / "_delta_log" / f"{0:020d}.json"
    lines = commit.read_text().splitlines()
    count = 0
    for k, line in enumerate(lines):
        action = json.loads(line)
        if "add" in action:
            count += 1
            if count % 9 == 0:
                action["add"]["tags"] = {"INSERTION_TIME": "1700000000000000", "k": "é"}
            if count % 13 == 0:
                action["add"]["futureField"] = {"nested": [1, 2.5, None], "s": "ü"}
            lines[k] = json.dumps(action, separators=(",", ":"))
    commit.write_text("\n".join(lines) + "\n")


def _table(path: Path, configuration: dict[str, str] | None = None) -> Path:
    data = pa.Table.from_pylist(list(_rows()), SCHEMA)
    write_deltalake(str(path), data, partition_by=["part"], configuration=configuration)
    _with_other_writers_fields(path)
    assert run_enable(open_log(str(path))).changed
    # Old DVs on some files, and some files gone, before the delete under test.
    first = run_delete(open_log(str(path)), DeleteRequest("id % 11 = 3 OR part = 'p5'"))
    assert first.version is not None
    return path


# Every kind of change: new DVs, updated DVs, files removed from partition values alone and
# files whose remaining rows all match.
WHERE = "id % 4 = 1 OR part IN ('p7', 'p8') OR part IS NULL OR (id >= 600 AND id < 660)"


@pytest.mark.parametrize(
    ("mode", "cdf"), [("dv", False), ("cow", False), ("cow", True)], ids=["dv", "cow", "cow-cdf"]
)
def test_commit_is_byte_identical_to_the_per_file_path(
    tmp_path: Path, mode: str, cdf: bool
) -> None:
    configuration = {"delta.enableChangeDataFeed": "true"} if cdf else None
    table = _table(tmp_path / "t", configuration)
    log = open_log(str(table))
    files = log.snapshot().files
    assert files.num_rows > 250
    result = run_delete(log, DeleteRequest(WHERE, mode))
    assert result.version is not None
    actions = {c.action for c in result.changes}
    assert actions == {"dv" if mode == "dv" else "rewrite", "remove"}
    assert any(c.had_dv for c in result.changes) and any(not c.read for c in result.changes)
    raw = (table / "_delta_log" / f"{result.version:020d}.json").read_bytes()
    lines = [json.loads(line) for line in raw.decode().splitlines()]
    expected = [lines[0], *ref_file_actions(files, result, lines[1:])]
    assert encode_commit(expected) == raw
    assert json.dumps(result.to_json()) == json.dumps(ref_result_json(result))


def test_result_json_is_the_asdict_json() -> None:
    result = DeleteResult(None, 3, True, "dv", 1, 2, [], {"numDeletedRows": 0}, 2, "warn", None)
    assert json.dumps(result.to_json()) == json.dumps(ref_result_json(result))


# -- the new stats, against the reference --------------------------------------------------


class _Raw(str):
    """A JSON number (or constant) spelled as given."""


_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.sampled_from(["1.2345678901234568e+16", "12345678901234567.81", "1E400", "-0.0", "1e5"]),
)
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=6),
    _floats.map(_Raw),
    st.sampled_from([_Raw("NaN"), _Raw("-Infinity")]),
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


def _json(value: Any, spaced: bool) -> str:
    """`value` as JSON text, `_Raw` numbers verbatim, non-ASCII unescaped."""
    sep = ", " if spaced else ","
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, dict):
        items = (
            f"{json.dumps(k, ensure_ascii=False)}: {_json(v, spaced)}" for k, v in value.items()
        )
        return "{" + sep.join(items) + "}"
    if isinstance(value, list):
        return "[" + sep.join(_json(v, spaced) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


_stats_texts = st.one_of(
    st.none(),
    st.sampled_from(["", "{", "[1, 2]", "3.5", '"x"', "{}", '{"numRecords": 4.0}']),
    st.builds(
        _json,
        st.fixed_dictionaries(
            {"numRecords": st.integers(0, 10)},
            optional={
                "minValues": st.dictionaries(st.text(max_size=4), _values, max_size=4),
                "maxValues": st.dictionaries(st.text(max_size=4), _values, max_size=4),
                "nullCount": st.dictionaries(st.text(max_size=4), st.integers(0, 9)),
                "tightBounds": st.booleans(),
            },
        ),
        st.booleans(),
    ),
    st.builds(_json, st.dictionaries(st.text(max_size=4), _values, max_size=5), st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.tuples(_stats_texts, st.integers(0, 2**40)), max_size=6))
def test_widened_stats_are_the_reference_bytes(texts: list[tuple[str | None, int]]) -> None:
    got = widened_stats([t for t, _ in texts], [n for _, n in texts])
    assert got == [ref_widened(t, n) for t, n in texts]


def test_widened_stats_keep_numbers_and_escape_as_before() -> None:
    text = '{"numRecords":3,"minValues":{"a":1.2345678901234568e+16,"s":"é"},"tightBounds":true}'
    (got,) = widened_stats([text], [3])
    assert got == ref_widened(text, 3)
    assert "1.2345678901234568e+16" in got and "\\u00e9" in got
