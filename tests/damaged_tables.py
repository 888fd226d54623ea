"""Tables whose checkpoints or `_last_checkpoint` are damaged as real tables get damaged.

Each damage starts from a table written by another writer (deltalake, with its own
`create_checkpoint()`), or a golden table written by Delta Spark, and breaks it the way a
crash, a truncated copy or a lost object does: the newest checkpoint cut in half, a part of
a multi-part checkpoint or a V2 sidecar deleted, `_last_checkpoint` overwritten with garbage
or with a version the log never reached. `DAMAGES` names them for the tests of the log
reader, `inspect` and `checkpoint`; `expected_rows` reads the undamaged copy with deltalake,
the oracle of what every reader must read again once dvtool has mended the table.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from tests.oracles import copy_golden

Row = tuple[object, ...]
COMMITS = 8
NEWEST = COMMITS - 1


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def deltalake_table(path: Path, *, checkpoints: tuple[int, ...] = (NEWEST,)) -> Path:
    """COMMITS appends of ten rows by deltalake, with deltalake's checkpoint after each
    version of `checkpoints` (the last one is `_last_checkpoint`'s)."""
    for v in range(COMMITS):
        ids = list(range(v * 10, v * 10 + 10))
        data = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{v}"] * 10)})
        write_deltalake(str(path), data, mode="append")
        if v in checkpoints:
            DeltaTable(str(path)).create_checkpoint()
    return path


def truncate(path: Path) -> None:
    """Cut a file in half, as an interrupted copy or upload leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def split_checkpoint(table: Path, version: int, parts: int = 2) -> list[Path]:
    """Turn the classic checkpoint of `version` into a multi-part one (the same rows over
    `parts` files, as old Delta Spark writers did), and point `_last_checkpoint` at it."""
    log = table / "_delta_log"
    classic = log / checkpoint_name(version)
    rows = pq.read_table(classic)
    step = -(-rows.num_rows // parts)
    paths = []
    for n in range(parts):
        path = log / f"{version:020d}.checkpoint.{n + 1:010d}.{parts:010d}.parquet"
        pq.write_table(rows.slice(n * step, step), path)
        paths.append(path)
    classic.unlink()
    hint = {"version": version, "size": rows.num_rows, "parts": parts}
    (log / "_last_checkpoint").write_text(json.dumps(hint))
    return paths


def deltalake_rows(table: Path) -> list[Row]:
    data = DeltaTable(str(table)).to_pyarrow_table()
    return sorted(zip(*(c.to_pylist() for c in data.columns), strict=True))


def polars_rows(table: Path) -> list[Row]:
    return sorted(pl.read_delta(str(table)).rows())


@dataclass(frozen=True)
class Damage:
    """One way to damage a deltalake table: `apply` breaks it, `kind` is the problem
    `inspect --verify` must report, `file` the file it must name (under the table root)."""

    name: str
    kind: str
    file: str
    apply: Callable[[Path], None]
    checkpoints: tuple[int, ...] = (NEWEST,)


def _truncate_newest(table: Path) -> None:
    truncate(table / "_delta_log" / checkpoint_name(NEWEST))


def _lose_part(table: Path) -> None:
    split_checkpoint(table, NEWEST)[1].unlink()


def _hint(text: bytes) -> Callable[[Path], None]:
    def write(table: Path) -> None:
        (table / "_delta_log" / "_last_checkpoint").write_bytes(text)

    return write


LAST_CHECKPOINT = "_delta_log/_last_checkpoint"
DAMAGES = (
    Damage(
        "truncated",
        "checkpoint-unreadable",
        f"_delta_log/{checkpoint_name(NEWEST)}",
        _truncate_newest,
    ),
    Damage(
        "truncated-older-good",
        "checkpoint-unreadable",
        f"_delta_log/{checkpoint_name(NEWEST)}",
        _truncate_newest,
        checkpoints=(3, NEWEST),
    ),
    Damage(
        "part-missing",
        "checkpoint-part-missing",
        f"_delta_log/{NEWEST:020d}.checkpoint.0000000002.0000000002.parquet",
        _lose_part,
    ),
    Damage("hint-garbage", "last-checkpoint-invalid", LAST_CHECKPOINT, _hint(b"\x00{garbage")),
    Damage("hint-wrong-shape", "last-checkpoint-invalid", LAST_CHECKPOINT, _hint(b'{"size": 10}')),
    Damage(
        "hint-5000",
        "last-checkpoint-too-new",
        LAST_CHECKPOINT,
        _hint(b'{"version":5000,"size":10}'),
    ),
    Damage(
        "hint-dangling",
        "last-checkpoint-dangling",
        LAST_CHECKPOINT,
        _hint(b'{"version":3,"size":10}'),
    ),
)
DAMAGE_NAMES = [d.name for d in DAMAGES]


def damaged_table(tmp_path: Path, damage: Damage) -> tuple[Path, list[Row]]:
    """A deltalake table broken by `damage`, and its rows as deltalake read them before."""
    table = deltalake_table(tmp_path / damage.name, checkpoints=damage.checkpoints)
    expected = deltalake_rows(table)
    damage.apply(table)
    return table, expected


# -- golden tables (Delta Spark) --------------------------------------------------------------

MULTI_PART = "v1-multi-part-partitioned-struct-stats-only"
V2_PARQUET = "v2-checkpoints-parquet-with-sidecars"
V2_JSON = "v2-checkpoints-json-with-sidecars"


def golden_without(tmp_path: Path, name: str, relative: str) -> tuple[Path, Path]:
    """A copy of golden table `name` with the file `relative` (under `_delta_log`) deleted,
    and an undamaged copy beside it."""
    damaged = copy_golden(name, tmp_path / "damaged")
    good = copy_golden(name, tmp_path / "good")
    (damaged / "_delta_log" / relative).unlink()
    return damaged, good


def newest_sidecar(table: Path) -> str:
    """`_sidecars/NAME` of a sidecar of the newest checkpoint of a golden V2 table."""
    names = sorted(p.name for p in (table / "_delta_log" / "_sidecars").glob("*.parquet"))
    return f"_sidecars/{names[-1]}"


def copy_tree(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest)
    return dest
