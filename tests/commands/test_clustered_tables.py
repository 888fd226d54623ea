"""dvtool on liquid-clustered tables (PROTOCOL.md "Clustered Table" and "Domain Metadata").

The table is `clustered_table` of tests/writers.py, as Delta Spark writes it: writer features
`clustering` + `domainMetadata`, a `delta.clustering` domain naming `id`, two files clustered
by OPTIMIZE (`clusteringProvider: liquid`, each with a DV) and one unclustered file. Checked
after every command, with the independent readers of tests/oracles.py (and polars, deltalake):

- the rows are exact, and the protocol keeps `clustering` and `domainMetadata`;
- the `delta.clustering` domain is unchanged: dvtool never writes a domainMetadata action for
  it, and its checkpoints hold it, so a reader that starts from a checkpoint (the JSON commits
  before it cleaned up) still sees it;
- every file dvtool writes has min/max/nullCount for the clustering columns, even when
  `delta.dataSkippingNumIndexedCols` / `delta.dataSkippingStatsColumns` leave them out
  ("Writers must write out ... per-column statistics for clustering columns");
- `clusteringProvider` is set only where the file is clustered: a 1:1 purge keeps its input's
  (same rows, same order), compaction and copy-on-write delete output have none.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dvtool.delta.log.reader import open_log
from tests.commands.other_writers import (
    check_stats,
    committing,
    deltalake_rows,
    dvtool,
    live_adds,
    new_adds,
)
from tests.oracles import (
    canon,
    commit_actions,
    commit_versions,
    domain_metadata,
    latest_protocol,
    raw_rows,
    read_dv,
    replay_json,
)
from tests.writers import (
    CLUSTERED_FIELDS,
    DELTA_SPARK_ENGINE,
    DELTA_SPARK_SPARK,
    DeltaLog,
    clustered_data,
    clustered_rows,
    clustered_table,
    compact_json,
    delta_stats,
    metadata_action,
    mtime_ms,
    protocol,
    write_spark_parquet,
)
from tests.writers import domain_metadata as domain_action

Row = dict[str, Any]
CLUSTERING = "delta.clustering"
FEATURES = {"clustering", "domainMetadata"}
PURGE = ("optimize", "--purge")
COMPACT = ("optimize", "--target-size", str(10**6))  # far above these files: all merge
COW = ("delete", "--where", "id IN (5, 16)", "--mode", "cow")  # a liquid file and the other


# -- helpers ------------------------------------------------------------------------------------


def expected(*gone: int) -> list[Row]:
    return [r for r in clustered_rows() if r["id"] not in gone]


def check_rows(path: Path, rows: Sequence[Row]) -> None:
    want = canon(rows)
    assert canon(raw_rows(path)) == want
    assert canon(pl.read_delta(str(path)).to_dicts()) == want
    assert deltalake_rows(path) == want


def clustering_columns(domain: dict[str, Any]) -> list[str]:
    """Top-level clustering columns of a `delta.clustering` domain (Delta Spark's nested form
    `[["id"]]`, or PROTOCOL.md's flat names)."""
    columns = json.loads(domain["configuration"])["clusteringColumns"]
    return [c[0] if isinstance(c, list) else c for c in columns]


def check_clustered(path: Path, domain: dict[str, Any], since: int) -> None:
    """The table is still clustered as before: same domain, features kept, and the commits
    after `since` hold no domainMetadata action (this table has no other domain to write)."""
    assert domain_metadata(path) == {CLUSTERING: domain}
    body = latest_protocol(path)
    assert body["minWriterVersion"] == 7 and set(body["writerFeatures"]) >= FEATURES
    for version in commit_versions(path):
        if version > since:
            assert not any("domainMetadata" in a for a in commit_actions(path, version))


def stat_value(value: Any) -> Any:
    """A parquet value as Delta's JSON stats hold it: timestamps (UTC, INT96 ones read naive)
    in milliseconds with a `Z`, strings cut to 32 characters."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value[:32] if isinstance(value, str) else value


def check_clustering_stats(
    path: Path, add: dict[str, Any], columns: Sequence[str], stats_columns: set[str] | None = None
) -> None:
    """The add's stats hold min, max and nullCount of each clustering column as its file holds
    them (read with pyarrow, all physical rows: a DV never narrows stats); `stats_columns`, if
    given, is exactly the set of columns with min/max."""
    stats = json.loads(add["stats"])
    data = pq.read_table(path / add["path"])
    assert stats["numRecords"] == data.num_rows
    for name in columns:
        bounds = pc.min_max(data.column(name)).as_py()
        assert stats["minValues"][name] == stat_value(bounds["min"]), name
        assert stats["maxValues"][name] == stat_value(bounds["max"]), name
        assert stats["nullCount"][name] == data.column(name).null_count, name
    if stats_columns is not None:
        assert set(stats["minValues"]) == set(stats["maxValues"]) == stats_columns


def providers(adds: Sequence[dict[str, Any]]) -> list[str | None]:
    return sorted((a.get("clusteringProvider") for a in adds), key=str)


def set_properties(
    path: Path, properties: dict[str, str], extra: Sequence[dict[str, Any]] = ()
) -> None:
    """Commit a metaData action with `properties` added, as Delta Spark's ALTER TABLE ... SET
    TBLPROPERTIES writes it (PROTOCOL.md "Change Metadata": the whole action, same id), and
    the `extra` actions."""
    metadata = copy.deepcopy(replay_json(path)[0])
    metadata["configuration"].update(properties)
    version = max(commit_versions(path)) + 1
    info = {
        "timestamp": int(time.time() * 1000),
        "operation": "SET TBLPROPERTIES",
        "operationParameters": {"properties": compact_json(properties)},
        "readVersion": version - 1,
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": DELTA_SPARK_ENGINE,
        "txnId": str(uuid.uuid4()),
    }
    actions = [{"commitInfo": info}, {"metaData": metadata}, *extra]
    lines = [compact_json(a) for a in actions]
    (path / "_delta_log" / f"{version:020d}.json").write_text("".join(f"{x}\n" for x in lines))


# -- 1., 3., 5. every command ---------------------------------------------------------------------

# (dvtool command and options, ids it deletes, versions it commits, providers of its new files)
Case = tuple[tuple[str, ...], tuple[int, ...], int, list[str | None]]
CASES: dict[str, Case] = {
    "inspect": (("inspect", "--json", "--files"), (), 0, []),
    "enable": (("enable",), (), 0, []),  # DVs are on already: nothing to commit
    # DV delete re-adds the same paths with a DV and their own provider (as Delta Spark's
    # commit 4 of the fixture does): no new file
    "delete-dv": (("delete", "--where", "id IN (5, 16)"), (5, 16), 1, []),
    # Delta Spark sets `clusteringProvider` only in OPTIMIZE's clustering strategy (its
    # `tagAddFile`); DELETE/UPDATE/MERGE rewrites go through the plain file writer and claim
    # no clustering. PROTOCOL.md: the provider is set "when a clustering implementation
    # clusters files", and a row-dropping rewrite clusters nothing. README: only a 1:1 purge.
    "delete-cow": (COW, (5, 16), 1, [None, None]),
    # REORG PURGE: one output per input, same rows in the same order: still clustered
    "purge": (PURGE, (), 1, ["liquid", "liquid"]),
    # bin-packing three files (two clustered, one not) into one: not clustered by anyone
    "compaction": (COMPACT, (), 1, [None]),
    "vacuum-dry-run": (("vacuum", "--dry-run"), (), 0, []),
    "vacuum": (("vacuum", "--retain", "0h", "--force"), (), 2, []),  # VACUUM START and END
    "generate-manifest": (("generate-manifest", "--purge-first"), (), 1, ["liquid", "liquid"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_command_on_a_clustered_table(tmp_path: Path, case: str) -> None:
    args, gone, commits, new_providers = CASES[case]
    path = clustered_table(tmp_path / "t")
    domain = domain_metadata(path)[CLUSTERING]
    columns = clustering_columns(domain)
    assert columns == ["id"]
    check_rows(path, expected())
    before = {a["path"]: a for a in live_adds(path)}
    last = max(commit_versions(path))

    output = dvtool(path, *args)
    assert max(commit_versions(path)) == last + commits, output
    check_rows(path, expected(*gone))
    check_clustered(path, domain, last)
    added = new_adds(path, set(before))
    assert providers(added) == new_providers
    for add in live_adds(path):
        if add["path"] in before:  # kept or re-added with a DV: its own provider
            assert add.get("clusteringProvider") == before[add["path"]].get("clusteringProvider")
        check_clustering_stats(path, add, columns)
    for add in added:
        assert "deletionVector" not in add
        check_stats(path, add)  # every column, exact, from the file itself
    if case == "inspect":
        report = json.loads(output)
        assert report["logical_rows"] == len(raw_rows(path))
        assert set(report["writer_features"]) >= FEATURES
    elif case == "delete-dv":
        assert {a["path"] for a in live_adds(path)} == set(before)
        deleted: set[int] = set()
        for add in live_adds(path):  # each DV: the old rows plus the new matches
            ids = pq.read_table(path / add["path"]).column("id").to_pylist()
            deleted |= {ids[i] for i in read_dv(path, add["deletionVector"])}
        assert deleted == {2, 11, 5, 16}
    elif case == "generate-manifest":
        (manifest,) = (path / "_symlink_format_manifest").rglob("manifest")
        listed = {line.rsplit("/", 1)[1] for line in manifest.read_text().splitlines()}
        assert listed == {a["path"] for a in live_adds(path)}
    elif case == "vacuum":
        live = {p.name for p in path.glob("*.parquet")}
        assert live == {a["path"] for a in live_adds(path)}, "only live files remain"


def test_a_sequence_of_commands_keeps_the_table_clustered(tmp_path: Path) -> None:
    """Each command reads what the previous one wrote: DV delete, purge (the unclustered
    file's rewrite stays unclustered), copy-on-write delete, compaction, vacuum."""
    path = clustered_table(tmp_path / "t")
    domain = domain_metadata(path)[CLUSTERING]
    last = max(commit_versions(path))
    gone: tuple[int, ...] = ()
    steps: list[tuple[tuple[str, ...], tuple[int, ...], list[str | None]]] = [
        (("delete", "--where", "id = 16"), (16,), []),
        (PURGE, (), [None, "liquid", "liquid"]),  # all three files had a DV
        (("delete", "--where", "id = 9", "--mode", "cow"), (9,), [None]),
        (COMPACT, (), [None]),
    ]
    for args, deleted, new_providers in steps:
        before = {a["path"] for a in live_adds(path)}
        committing(path, *args)
        gone += deleted
        assert providers(new_adds(path, before)) == new_providers, args
        check_rows(path, expected(*gone))
        for add in new_adds(path, before):
            check_stats(path, add)
    dvtool(path, "vacuum", "--retain", "0h", "--force")
    check_rows(path, expected(*gone))
    check_clustered(path, domain, last)


# -- 2. statistics of the clustering columns ------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "clustering", "stats_columns"),
    [
        ({"delta.dataSkippingNumIndexedCols": "0"}, None, {"id"}),
        ({"delta.dataSkippingStatsColumns": "amount"}, None, {"amount", "id"}),
        # the list wins over the count, as in Delta
        (
            {"delta.dataSkippingNumIndexedCols": "1", "delta.dataSkippingStatsColumns": "ts"},
            None,
            {"ts", "id"},
        ),
        # re-clustered (ALTER TABLE ... CLUSTER BY (category, ts)): string and timestamp
        ({"delta.dataSkippingNumIndexedCols": "0"}, ["category", "ts"], {"category", "ts"}),
    ],
    ids=["num-indexed-0", "stats-columns", "both", "cluster-by-category-ts"],
)
@pytest.mark.parametrize("args", [PURGE, COMPACT, COW], ids=["purge", "compaction", "cow"])
def test_clustering_columns_always_get_statistics(
    tmp_path: Path,
    properties: dict[str, str],
    clustering: list[str] | None,
    stats_columns: set[str],
    args: tuple[str, ...],
) -> None:
    """The properties leave the clustering columns out of the stats columns; a clustered
    table's new files must still describe them. (Delta Spark checks at CREATE TABLE and
    CLUSTER BY that clustering columns are stats columns; a table changed afterwards, or by
    another writer, may still lack them.)"""
    path = clustered_table(tmp_path / "t")
    extra = []
    if clustering is not None:
        columns = {"clusteringColumns": [[c] for c in clustering], "domainName": CLUSTERING}
        extra.append(domain_action(CLUSTERING, columns))
    set_properties(path, properties, extra)
    domain = domain_metadata(path)[CLUSTERING]
    assert clustering_columns(domain) == (clustering or ["id"])
    before = {a["path"] for a in live_adds(path)}
    last = max(commit_versions(path))
    committing(path, *args)
    gone = (5, 16) if args == COW else ()
    check_rows(path, expected(*gone))
    check_clustered(path, domain, last)
    added = new_adds(path, before)
    assert added
    for add in added:
        check_clustering_stats(path, add, clustering_columns(domain), stats_columns)
        assert set(json.loads(add["stats"])["nullCount"]) == stats_columns


# -- 4. checkpoints ----------------------------------------------------------------------------


def checkpoint_rows(path: Path, version: int) -> list[dict[str, Any]]:
    """The rows of the classic checkpoint of `version`, read with pyarrow alone."""
    name = f"{version:020d}.checkpoint.parquet"
    return list(pq.read_table(path / "_delta_log" / name).to_pylist())


def check_checkpoint(path: Path, version: int, domain: dict[str, Any]) -> list[str | None]:
    """The checkpoint holds the domain once, as committed, and the clustered protocol; returns
    the `clusteringProvider`s of its adds."""
    rows = checkpoint_rows(path, version)
    domains = [r["domainMetadata"] for r in rows if r.get("domainMetadata")]
    assert domains == [domain]
    (body,) = [r["protocol"] for r in rows if r.get("protocol")]
    assert body["minWriterVersion"] == 7 and set(body["writerFeatures"]) >= FEATURES
    last = json.loads((path / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == version
    return providers([r["add"] for r in rows if r.get("add")])


def test_checkpoints_keep_the_clustering_domain(tmp_path: Path) -> None:
    path = clustered_table(tmp_path / "t")
    domain = domain_metadata(path)[CLUSTERING]
    set_properties(path, {"delta.checkpointInterval": "1"})  # version 6
    committing(path, "delete", "--where", "id = 5")  # version 7, checkpointed
    assert check_checkpoint(path, 7, domain) == providers(live_adds(path))

    # Metadata cleanup: with the commits up to the checkpoint gone, the domain is only in the
    # checkpoint. dvtool must read it from there and write it into the next checkpoint.
    pruned = tmp_path / "pruned"
    shutil.copytree(path, pruned)
    for version in range(8):
        (pruned / "_delta_log" / f"{version:020d}.json").unlink()
    fresh = open_log(str(pruned)).snapshot()  # reads checkpoint 7, no commit before it
    assert fresh.domains[CLUSTERING].configuration == domain["configuration"]
    for table in (path, pruned):
        dvtool(table, *PURGE)
        assert (table / "_delta_log" / f"{8:020d}.json").exists()
        assert check_checkpoint(table, 8, domain) == [None, "liquid", "liquid"]
        snapshot = open_log(str(table)).snapshot()  # a fresh reader, from checkpoint 8
        assert snapshot.version == 8
        assert {k: v.configuration for k, v in snapshot.domains.items()} == {
            CLUSTERING: domain["configuration"]
        }
        assert canon(pl.read_delta(str(table)).to_dicts()) == canon(expected(5))
        assert deltalake_rows(table) == canon(expected(5))
    assert providers(live_adds(path)) == [None, "liquid", "liquid"]
    check_rows(path, expected(5))
    check_clustered(path, domain, 5)


# -- 5. enable on a clustered table without deletion vectors --------------------------------------


def clustered_table_without_dvs(path: Path) -> Path:
    """One clustered file (ids of `clustered_rows`, `clusteringProvider: liquid`) in a table
    with protocol 1/7, writer features [domainMetadata, clustering] and no DV property."""
    log = DeltaLog(path)
    data = clustered_data(clustered_rows())
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    size = write_spark_parquet(path / name, data, spark_version=DELTA_SPARK_SPARK, int96=True)
    add = {"path": name, "partitionValues": {}, "size": size}
    add.update(modificationTime=mtime_ms(path / name), dataChange=True)
    add.update(stats=delta_stats(data, CLUSTERED_FIELDS, tight_bounds=None))
    add["clusteringProvider"] = "liquid"
    configuration = {"clusteringColumns": [["id"]], "domainName": CLUSTERING}
    log.commit(
        [
            protocol([], ["domainMetadata", "clustering"]),
            metadata_action(CLUSTERED_FIELDS, created_time=log.now()),
            domain_action(CLUSTERING, configuration),
            {"add": add},
        ]
    )
    return path


def test_enable_keeps_the_clustering_features(tmp_path: Path) -> None:
    path = clustered_table_without_dvs(tmp_path / "t")
    domain = domain_metadata(path)[CLUSTERING]
    check_rows(path, clustered_rows())
    committing(path, "enable")
    body = latest_protocol(path)
    assert (body["minReaderVersion"], body["minWriterVersion"]) == (3, 7)
    assert body["readerFeatures"] == ["deletionVectors"]
    assert set(body["writerFeatures"]) == FEATURES | {"deletionVectors"}
    assert replay_json(path)[0]["configuration"]["delta.enableDeletionVectors"] == "true"
    check_clustered(path, domain, 0)
    committing(path, "delete", "--where", "id = 7")  # a DV now; the file keeps its provider
    (add,) = live_adds(path)
    assert "deletionVector" in add and add["clusteringProvider"] == "liquid"
    committing(path, *PURGE)
    (add,) = live_adds(path)
    assert "deletionVector" not in add and add["clusteringProvider"] == "liquid"
    check_stats(path, add)
    check_rows(path, expected(7))
    check_clustered(path, domain, 0)
