"""The in-process engine: pyarrow on a thread pool, no JVM.

A scan (`find_matches`) runs `dvtool.engines.arrow_scan.FileScan` over groups of files on the
thread pool: row-group skipping by statistics, the predicate's columns read and conformed to
the table's schema, filtered in acero plans shared by the small files of a group.

A rewrite (purge, compaction, copy-on-write delete) runs `dvtool.engines.rewrite.write_bin`
per bin on the thread pool (a format's own writes, `run_writes`, run there too); the
fsyncs of new local files run off the writer threads
(`dvtool.data_files.BackgroundSync`) and are awaited before the files are returned.
`dvtool.predicate` (sqlglot, acero) is imported only when a scan runs. Nothing here imports
pandas: the predicate is evaluated with `Predicate.filter`, not `Table.filter(expression)`,
whose `pyarrow.acero` would import it (see dvtool.predicate.arrow).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from dvtool.data_files import (
    BackgroundSync,
    WrittenFile,
)
from dvtool.engines.arrow_scan import FileScan, scan_groups
from dvtool.engines.base import (
    Item,
    Progress,
    Result,
    RewriteBin,
    ScanFile,
    TableLayout,
)
from dvtool.engines.rewrite import write_bin
from dvtool.io_pool import map_io

if TYPE_CHECKING:  # imported where a scan runs: its sqlglot costs ~0.05 s at start-up
    from dvtool.predicate import Predicate


class ArrowEngine:
    """Scans data files with pyarrow in this process."""

    name = "arrow"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or max(2, os.cpu_count() or 2)

    def find_matches(
        self,
        table: TableLayout,
        files: Sequence[ScanFile],
        predicate: Predicate,
        progress: Progress | None = None,
    ) -> list[BitMap64]:
        scan = FileScan(table, predicate)

        def one(group: Sequence[ScanFile]) -> list[BitMap64]:
            rows = scan.matches(group)
            if progress:
                progress(len(group))
            return rows

        groups = scan_groups(files, self.threads)
        return [rows for group in map_io(one, groups, threads=self.threads) for rows in group]

    def rewrite(
        self,
        table: TableLayout,
        configuration: Mapping[str, str],
        bins: Sequence[RewriteBin],
        progress: Progress | None = None,
    ) -> list[WrittenFile | None]:
        """One new file per bin; if any bin fails, the files of the others are deleted.

        The files are durable when this returns (the caller commits them next): the writer
        threads hand each local file's fsyncs to a `BackgroundSync`, which runs them while
        the next bins are written, and this waits for all of them before returning.
        """
        done: list[WrittenFile] = []
        lock = threading.Lock()

        # One sync thread per writer, at most 4: fsyncs cost kernel CPU too, and on 2 cores
        # more threads measured no faster.
        with BackgroundSync(threads=min(self.threads, 4)) as sync:

            def one(rewrite_bin: RewriteBin) -> WrittenFile | None:
                written = write_bin(table, configuration, rewrite_bin, sync)
                if written is not None:
                    with lock:
                        done.append(written)
                if progress:
                    progress(1)
                return written

            try:
                outputs = map_io(one, bins, threads=self.threads)
                sync.wait()
                return outputs
            except BaseException:
                # map_io returns only once every bin has finished, so `done` is complete.
                sync.close()  # no fsync runs on a file about to be deleted
                with lock:
                    locations = [w.location for w in done]
                with contextlib.suppress(Exception):  # the original error is the one to report
                    table.storage.delete_many(locations)
                raise

    def run_writes(
        self,
        write: Callable[[Item], Result],
        items: Sequence[Item],
        progress: Progress | None = None,
    ) -> list[Result]:
        """`write(item)` per item on the thread pool, results in order (`Engine.run_writes`:
        on a failure, the pool finishes the other items before the error is raised)."""

        def one(item: Item) -> Result:
            result = write(item)
            if progress:
                progress(1)
            return result

        return map_io(one, items, threads=self.threads)
