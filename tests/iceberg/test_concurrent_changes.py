"""`ConcurrentChanges.position_deletes_on`: which deletes another writer added may apply to the
data files a commit writes deletes for (the v3 one-DV-per-file rule of delete and
optimize --rewrite-deletes; their end-to-end races are tests/reference/test_iceberg_concurrency.py).
"""

from __future__ import annotations

from dvtool.iceberg.concurrent_changes import ConcurrentChanges
from dvtool.iceberg.delete_index import DeleteContent, DeleteFileEntry

A, B, C = "s3://t/data/a.parquet", "s3://t/data/b.parquet", "s3://t/data/c.parquet"


def delete(content: DeleteContent, **fields: object) -> DeleteFileEntry:
    return DeleteFileEntry("d", content, 0, (), 3, 1, **fields)  # type: ignore[arg-type]


def applies(entry: DeleteFileEntry, paths: set[str]) -> bool:
    return bool(ConcurrentChanges(snapshots=[1], added_deletes=[entry]).position_deletes_on(paths))


def test_a_dv_applies_to_its_referenced_data_file_only() -> None:
    dv = delete(DeleteContent.DELETION_VECTOR, referenced_data_file=B)
    assert applies(dv, {A, B})
    assert not applies(dv, {A, C})


def test_a_position_delete_file_applies_within_its_path_bounds() -> None:
    spanning = delete(DeleteContent.POSITION, path_bounds=(A, B))
    assert applies(spanning, {B})
    assert not applies(spanning, {C})
    assert applies(delete(DeleteContent.POSITION, path_bounds=(C, C)), {C})


def test_a_position_delete_file_without_bounds_may_apply_to_any_file() -> None:
    assert applies(delete(DeleteContent.POSITION), {C})


def test_equality_deletes_never_clash_by_position() -> None:
    assert not applies(delete(DeleteContent.EQUALITY, equality_ids=(1,)), {A, B, C})
