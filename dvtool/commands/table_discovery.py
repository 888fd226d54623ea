"""Which tables `dvtool maintain` and `inspect` work on: the paths they are given, or with
`--recursive` every table under them.

A Delta table is a directory holding `_delta_log`; an Iceberg table (a path table, as Hadoop
catalogs and `register_table` keep them) one holding `metadata/` with a `*.metadata.json` in
it; a Paimon table one holding `schema/` with a `schema-N` file (its `snapshot/` only
appears with the first commit). A directory with both is a Delta table (Delta's UniForm
writes Iceberg metadata beside its log; the log is the table). Under a prefix the
directories are walked breadth-first, one level at a time: each directory is listed once for
its subdirectories (`Storage.list_subdirs`, one delimited listing on object stores, so the
files beside them are listed only as far as a page of that listing holds them), and each
subdirectory is asked whether it holds `_delta_log` (`Storage.is_dir`: on S3 one HEAD and a
listing of at most one key) or else a table's metadata (a listing of its `metadata/`, then
of its `schema/`; the rule is `dvtool.table.format_of_dir`) before it is listed. A table
found is never listed or entered: neither its data files nor its partition directories nor
its log are read here, which is what makes discovery affordable on object stores with large
tables. The probes of one level run in parallel (`map_io`).

Directories whose names start with `_` or `.` are hidden (Hadoop's rule, as for vacuum) and
never entered; symbolic links are never followed. A prefix that is itself a table is that
table. A prefix that holds no table, or cannot be listed, is an error of its own: the other
prefixes are still searched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dvtool.errors import DvtoolError, TableNotFoundError
from dvtool.io_pool import map_io
from dvtool.storage.table_storage import Storage
from dvtool.table import DELTA_LOG, ICEBERG_METADATA, PAIMON_SCHEMA, format_of_dir


@dataclass(frozen=True)
class Discovery:
    """The table roots found (locations, in the order of the prefixes, each prefix's sorted,
    no table twice), and the prefixes that failed with their error."""

    tables: list[str] = field(default_factory=list)
    failed: list[tuple[str, DvtoolError]] = field(default_factory=list)


def discover_tables(
    prefixes: Sequence[str], storage_options: Mapping[str, str] | None, recursive: bool
) -> Discovery:
    """The tables to maintain: `prefixes` themselves, or with `recursive` the tables under
    each (a prefix that is a table is just that table)."""
    if not recursive:
        return Discovery(tables=list(dict.fromkeys(prefixes)))
    found: dict[str, None] = {}
    failed: list[tuple[str, DvtoolError]] = []
    for prefix in prefixes:
        try:
            tables = tables_under(Storage.for_table(prefix, dict(storage_options or {})))
        except DvtoolError as e:
            failed.append((prefix, e))
            continue
        if not tables:
            failed.append((prefix, _no_tables(prefix)))
        found.update(dict.fromkeys(tables))
    return Discovery(list(found), failed)


def tables_under(storage: Storage) -> list[str]:
    """The locations of the tables (Delta, Iceberg, Paimon) at or under the root of `storage`,
    sorted."""
    if holds_table(storage, ""):
        return [storage.root]
    found: list[str] = []
    level = [""]
    while level:
        listed = map_io(lambda d: (d, storage.list_subdirs(storage.join(d))), level)
        children = [_child(d, name) for d, names in listed for name in names if _visible(name)]
        is_table = map_io(lambda child: holds_table(storage, child), children)
        found += [c for c, table in zip(children, is_table, strict=True) if table]
        level = [c for c, table in zip(children, is_table, strict=True) if not table]
    return sorted(storage.join(relative) for relative in found)


def holds_table(storage: Storage, relative: str) -> bool:
    """Whether the directory at `relative` (under the root) is a table's root."""
    return format_of_dir(storage, relative) is not None


def _child(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def _visible(name: str) -> bool:
    """Whether a directory is entered: not hidden (`_x`, `.x`), as Hadoop readers see it."""
    return not name.startswith(("_", "."))


def _no_tables(prefix: str) -> TableNotFoundError:
    return TableNotFoundError(
        f"no table at or under {prefix}: no directory there holds {DELTA_LOG}, "
        f"Iceberg {ICEBERG_METADATA}/ or Paimon {PAIMON_SCHEMA}/",
        hint="Check the prefix; directories starting with _ or . are not searched.",
    )
