"""The two evaluations of `inspect`'s summary totals agree, and `summarize` picks the right one.

`totals_from_actions` (JSON actions as parsed, no pyarrow) and `totals_from_table` (column-wise)
are one definition evaluated twice: they are compared on every golden table and on generated
file actions with the edges of each total (missing stats, DVs of every storage type, null
fields, ratios on bucket borders and above 1). The summaries themselves are checked against
independent readers in tests/commands/inspect/test_inspect.py and tests/delta/log/test_golden.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.commands.inspect import summary as inspect_summary
from dvtool.commands.inspect.columns import totals_from_table
from dvtool.commands.inspect.summary import summarize, summed_as_json, totals_from_actions
from dvtool.delta.log.reader import CommitRecord, open_log
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.replay import ActionBatch, replay
from dvtool.errors import LogError
from tests.oracles import GOLDEN

GOLDEN_TABLES = sorted(p.name for p in GOLDEN.iterdir() if (p / "_delta_log").is_dir())
PROTOCOL = Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))
METADATA = Metadata("id", '{"type":"struct","fields":[]}', (), {})


@pytest.mark.parametrize("name", GOLDEN_TABLES)
def test_golden_tables_total_alike(name: str) -> None:
    """The file table's rows, as Python objects, sum up as the columns do."""
    try:
        snapshot = open_log(str(GOLDEN / name)).snapshot()
    except LogError:
        pytest.skip(f"{name} is a table no reader may open (its test checks the refusal)")
    rows = snapshot.files.to_pylist()
    assert totals_from_actions(rows) == totals_from_table(snapshot, None)


def _snapshot(adds: list[dict[str, Any]], removes: list[dict[str, Any]] | None = None) -> Snapshot:
    """The state of one commit `0.json` holding `adds` and `removes`."""
    batch = ActionBatch(0, PROTOCOL, METADATA, adds=adds, removes=removes or [], name="0.json")
    state = replay([batch], 0, "/t")
    return Snapshot("/t", state, CommitRecord(0, None, None))


_STATS = st.one_of(
    st.none(),
    st.integers(0, 3000).map(lambda n: json.dumps({"numRecords": n, "minValues": {}})),
    st.integers(0, 3000).map(lambda n: json.dumps({"minValues": {}, "numRecords": n})),
    st.sampled_from(["{}", "garbage", '{"numRecords":-1}', '{"numRecords":1.5}']),
)
_DV = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "storageType": st.sampled_from(["u", "i", "p", "x"]),
            "pathOrInlineDv": st.sampled_from(["ab", "cd", "ef"]),
            "sizeInBytes": st.integers(0, 2**31 - 1),
            "cardinality": st.integers(0, 4000),
        },
        optional={"offset": st.integers(1, 100)},
    ),
)


@st.composite
def _adds(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 30))
    adds = []
    for i in range(n):
        add: dict[str, Any] = {"path": f"f{i}.parquet", "dataChange": True}
        if draw(st.booleans()):
            add["size"] = draw(st.integers(0, 2**40))
        add["stats"] = draw(_STATS)
        add["deletionVector"] = draw(_DV)
        adds.append(add)
    return adds


@settings(max_examples=200, deadline=None)
@given(_adds())
def test_generated_actions_total_alike(adds: list[dict[str, Any]]) -> None:
    snapshot = _snapshot(adds)
    assert summed_as_json(snapshot)
    assert totals_from_actions(snapshot.state.live_files.actions) == totals_from_table(
        snapshot, None
    )


@pytest.mark.parametrize(
    ("cardinality", "records", "bucket"),
    [(1, 10, 1), (3, 10, 3), (9, 10, 9), (10, 10, 9), (25, 10, 9), (0, 10, 0), (1, 3, 3)],
)
def test_ratio_buckets_at_the_borders(cardinality: int, records: int, bucket: int) -> None:
    dv = {"storageType": "i", "pathOrInlineDv": "x", "sizeInBytes": 4, "cardinality": cardinality}
    stats = json.dumps({"numRecords": records})
    snapshot = _snapshot([{"path": "a", "size": 1, "stats": stats, "deletionVector": dv}])
    totals = totals_from_actions(snapshot.state.live_files.actions)
    assert totals.ratio_buckets[bucket] == 1 and sum(totals.ratio_buckets) == 1
    assert totals_from_table(snapshot, None) == totals


def test_summarize_sums_json_actions_without_the_file_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = _snapshot([{"path": "a", "size": 5, "stats": '{"numRecords":4}'}])

    def no_table(*_: object) -> None:
        raise AssertionError("the column-wise evaluation ran")

    monkeypatch.setattr(inspect_summary, "_totals_from_table", no_table)
    summary = summarize(snapshot)
    assert (summary.num_files, summary.size_bytes, summary.physical_rows) == (1, 5, 4)


@pytest.mark.parametrize(
    "field",
    [{"size": 5.0}, {"partitionValues": [["p", "1"]]}, {"tags": {"k": 1}}, {"dataChange": 1}],
    ids=["float-size", "map-as-pairs", "non-string-tag", "int-as-boolean"],
)
def test_values_that_are_not_plain_go_through_the_table(field: dict[str, Any]) -> None:
    """The table conversion decides about them (accept, as here a float size, or refuse)."""
    snapshot = _snapshot([{"path": "a", "size": 5, "stats": '{"numRecords":4}', **field}])
    assert not summed_as_json(snapshot)
    try:
        expected = totals_from_table(snapshot, None)
    except LogError as e:
        with pytest.raises(LogError, match=r"0\.json"):
            summarize(snapshot)
        assert "0.json" in str(e)
        return
    assert summarize(snapshot).num_files == expected.num_files == 1


def test_malformed_tombstone_fails_alike() -> None:
    """A bad remove is refused by the JSON evaluation too (it counts tombstones)."""
    snapshot = _snapshot([], removes=[{"path": "b", "deletionTimestamp": "yesterday"}])
    assert not summed_as_json(snapshot)
    with pytest.raises(LogError, match=r"0\.json.*deletionTimestamp"):
        summarize(snapshot)


def test_checkpointed_golden_table_is_summed_column_wise() -> None:
    snapshot = open_log(str(GOLDEN / "basic-dv-with-checkpoint")).snapshot()
    assert not snapshot.state.live_files.json_only
    assert not summed_as_json(snapshot)
