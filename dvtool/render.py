"""All output of dvtool goes through one renderer: rich tables and progress, or JSON.

With `--json`, stdout carries exactly one JSON document (the result's `to_json()`), so CI
scripts can pipe it to `jq`; progress and errors go to stderr. Without it, results are drawn
as rich tables. Commands never print: they return result objects that end up here.

rich is imported on first use, not with this module: JSON output never needs it, and a
command's start-up should not pay for it. The summary of `dvtool inspect` off a terminal needs
it neither: it is drawn as the same text without rich (dvtool.render_inspect.plain_summary).
What each command shows lives here; the inspect views in dvtool.render_inspect, tables in
dvtool.box_table, value formats in dvtool.render_values.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from dvtool import interrupts
from dvtool.box_table import BoxTable, Column
from dvtool.plain_console import NotPlain, escape, plain_stdout
from dvtool.render_values import format_bytes, format_protocol, format_time

if TYPE_CHECKING:  # one command runs per process: do not import the others (start-up time)
    from rich.console import Console
    from rich.progress import Progress

    from dvtool.commands.checkpoint import CheckpointResult
    from dvtool.commands.delete import DeleteResult
    from dvtool.commands.downgrade import DowngradeResult
    from dvtool.commands.enable import EnableResult
    from dvtool.commands.inspect import FileEntry, InspectResult
    from dvtool.commands.log_cleanup import LogCleanupResult
    from dvtool.commands.maintain import MaintainResult
    from dvtool.commands.manifest import ManifestResult
    from dvtool.commands.optimize import OptimizeResult
    from dvtool.commands.restore import RestoreResult
    from dvtool.commands.vacuum import VacuumResult

_LISTED_FILES = 20
# A listing aligns its columns to the widths of its first rows, then streams the rest.
_ALIGNED_ROWS = 1000


class Renderer:
    """Draws results for a terminal (rich) or as one JSON document."""

    def __init__(
        self, as_json: bool = False, console: Console | None = None, limit: int | None = 20
    ) -> None:
        """`limit`: the most rows a human listing shows (None: all); JSON lists all."""
        self.as_json = as_json
        self._console = console
        self._err: Console | None = None
        self.limit = limit

    @property
    def console(self) -> Console:
        """The rich console on stdout, made on first use (`_console`); a command that
        prints its result on it has finished (`interrupts.command_finished`)."""
        interrupts.command_finished()
        if self._console is None:
            self._console = _console(stderr=False)
        return self._console

    @property
    def err(self) -> Console:
        """The rich console on stderr (progress, errors, warnings), made on first use."""
        if self._err is None:
            self._err = _console(stderr=True)
        return self._err

    # -- generic -------------------------------------------------------------------------

    def json(self, payload: Any) -> None:
        interrupts.command_finished()
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def error(self, message: str) -> None:
        # soft_wrap: never break a message (paths, hints) into lines at the console width.
        self.err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)

    @contextmanager
    def progress(self, description: str) -> Iterator[Callable[[int], Callable[[int], None]]]:
        """Yields `start(total) -> advance(n)`; silent in JSON mode or off a terminal. The bar
        (and rich) comes with the first `start`: a command that shows none imports neither."""
        if self.as_json:
            yield lambda total: lambda n: None
            return
        with ExitStack() as stack:
            bars: list[Progress] = []

            def start(total: int) -> Callable[[int], None]:
                if not bars:
                    if not self.err.is_terminal:
                        return lambda n: None
                    bars.append(stack.enter_context(_progress_bar(description, self.err)))
                bar = bars[0]
                task = bar.add_task(description, total=total)
                return lambda n: bar.advance(task, n)

            yield start

    # -- inspect ---------------------------------------------------------------------------

    def inspect(self, result: InspectResult) -> None:
        from dvtool import render_inspect as view

        if self.as_json:
            self.json(result.to_json())
            return
        if self._plain_summary(result):
            return
        if result.summary is not None:
            view.print_summary(self.console, result.summary)
        if result.files is not None:
            total = result.summary.num_files if result.summary else len(result.files)
            self._files(result.files, total)
        if result.history is not None:
            view.print_history(self.console, result.history)
        if result.verify is not None:
            view.print_verify(self.console, result.verify)
        if result.checks is not None:
            view.print_checks(self.console, result.checks)

    def _plain_summary(self, result: InspectResult) -> bool:
        """Off a terminal, the summary alone (no --files, --history, --verify, --check) as
        the text rich would print, without importing rich; False when rich must draw."""
        from dvtool.render_inspect import plain_summary

        others = (result.files, result.history, result.verify, result.checks)
        if (
            self._console is not None
            or result.summary is None
            or any(o is not None for o in others)
        ):
            return False
        out = plain_stdout()
        if out is None:
            return False
        try:
            text = plain_summary(result.summary, _UNLIMITED_WIDTH)
        except NotPlain:
            return False
        interrupts.command_finished()
        out.write(text)
        out.flush()
        return True

    def _files(self, files: Sequence[FileEntry], total: int) -> None:
        rows = (
            (
                format_bytes(f.size),
                "?" if f.num_records is None else f"{f.num_records:,}",
                f"{f.deleted_rows:,}",
                "" if f.deleted_ratio is None else f"{f.deleted_ratio:.1%}",
                f.dv_storage or "-",
                f.path
                + "".join(f"  {k}={v}" for k, v in f.partition_values.items())
                + (f"  dv={f.dv_location}" if f.dv_location else ""),
            )
            for f in files
        )
        header = ("size", "records", "deleted", "ratio", "DV", "path  [partition]  [dv=DV file]")
        self.listing("Live files", header, rows, total, "files")

    def listing(
        self,
        title: str,
        header: Sequence[str],
        rows: Iterable[Sequence[str]],
        total: int,
        noun: str,
    ) -> None:
        """Rows as plain aligned lines, written as they come (a listing of 300,000 files
        never becomes one table in memory): every column but the last right-aligned to the
        widths of the first rows, the last as wide as it is. At most `limit` rows, then one
        line saying how many were left out. Nothing at all when there are no rows: a title
        and a header over nothing read as a plan that lost its lines."""
        if total == 0:
            return
        shown = rows if self.limit is None else itertools.islice(rows, self.limit)
        out = self.console.file
        self.console.print(f"[bold]{escape(title)}[/]")
        first = list(itertools.islice(shown, _ALIGNED_ROWS))
        widths = [max(len(r[i]) for r in [header, *first]) for i in range(len(header) - 1)]
        count = 0
        for row in itertools.chain([header], first, shown):
            cells = [cell.rjust(width) for cell, width in zip(row, widths, strict=False)]
            out.write("  ".join([*cells, row[-1]]) + "\n")
            count += 1
        left = total - (count - 1)
        if left > 0:
            self.console.print(
                f"... {left:,} more {noun}; use --json or --limit 0 to list them all"
            )

    # -- enable and delete -------------------------------------------------------------------

    def enable(self, result: EnableResult) -> None:
        if self.as_json:
            self.json(result.to_json())
        elif result.changed:
            self.console.print(f"deletion vectors enabled: committed version {result.version}")
        else:
            self.console.print(
                f"deletion vectors were already enabled (version {result.read_version})"
            )

    def delete(self, result: DeleteResult) -> None:
        if self.as_json:
            self.json(result.to_json())
            return
        c = self.console
        m = result.metrics
        if result.dry_run:
            c.print(f"[bold]dry run[/] against version {result.read_version}: nothing written")
        elif result.version is None:
            c.print(f"no rows matched at version {result.read_version}: nothing committed")
        else:
            c.print(f"committed version [bold]{result.version}[/] ({result.mode} mode)")
        if result.dry_run and result.changes:
            rows = (
                (
                    f"{ch.deleted_rows:,}",
                    "?" if ch.num_records is None else f"{ch.num_records:,}",
                    ch.action,
                    "scanned" if ch.read else "from stats",
                    ch.path,
                )
                for ch in result.changes
            )
            header = ("rows deleted", "records", "action", "read", "path")
            self.listing("Plan", header, rows, len(result.changes), "files")
        # The totals come last, after any listing, where a log's reader looks.
        c.print(
            f"files: {result.files_skipped:,} skipped, {result.files_scanned:,} scanned, "
            f"{len(result.changes):,} changed; rows deleted: {m['numDeletedRows']:,}"
        )
        if not result.dry_run and result.version is not None:
            shown = ", ".join(f"{k}={v}" for k, v in m.items() if v)
            c.print(f"metrics: {shown}", soft_wrap=True)
        for warning in (result.checkpoint_warning, result.manifest_warning):
            if warning:
                self.err.print(f"[yellow]warning:[/] {escape(warning)}")

    # -- optimize ------------------------------------------------------------------------------

    def optimize(self, result: OptimizeResult) -> None:
        if self.as_json:
            self.json(result.to_json())
            return
        c = self.console
        m = result.metrics
        what = "purge" if result.operation == "REORG" else "compaction"
        rows = sum(b.rows_dropped for b in result.bins)
        size = format_bytes(sum(b.input_bytes for b in result.bins))
        plan = (
            f"{what}: {sum(len(b.inputs) for b in result.bins):,} files ({size}) into "
            f"{len(result.bins):,} new files, dropping {rows:,} deleted rows"
        )
        if result.dry_run:
            c.print(
                f"[bold]dry run[/] against version {result.read_version} ({result.engine}): " + plan
            )
            plan_rows = (
                (
                    f"{len(b.inputs):,}",
                    format_bytes(b.input_bytes),
                    f"{b.input_rows:,}",
                    f"{b.rows_dropped:,}",
                    b.directory or "/",
                )
                for b in result.bins
            )
            header = ("inputs", "bytes", "rows", "rows dropped", "directory")
            self.listing("Plan", header, plan_rows, len(result.bins), "new files")
            c.print(plan)
        elif not result.versions:
            verb = "purge" if result.operation == "REORG" else "compact"
            c.print(f"nothing to {verb} at version {result.read_version}: nothing committed")
        else:
            versions = ", ".join(str(v) for v in result.versions)
            c.print(f"committed version(s) [bold]{versions}[/] on {result.engine}: {plan}")
            c.print(
                f"removed {m['numRemovedFiles']:,} files ({format_bytes(m['numRemovedBytes'])}), "
                f"added {m['numAddedFiles']:,} ({format_bytes(m['numAddedBytes'])}), "
                f"{m['numDeletionVectorsRemoved']:,} DVs removed",
                soft_wrap=True,
            )
        for warning in result.checkpoint_warnings:
            self.err.print(f"[yellow]warning:[/] {escape(warning)}")

    def restore(self, result: RestoreResult) -> None:
        from dvtool.render_restore import render_restore

        render_restore(self, result)

    # -- vacuum --------------------------------------------------------------------------------

    def vacuum(self, result: VacuumResult) -> None:
        from dvtool.commands.vacuum import format_duration

        if self.as_json:
            self.json(result.to_json())
            return
        c = self.console
        what = "lite vacuum" if result.lite else "vacuum"
        plan = (
            f"{what} of version {result.read_version}: {result.num_files:,} files "
            f"({format_bytes(result.num_bytes)}) not needed and last changed before "
            f"{format_time(result.cutoff_ms)} (retention {format_duration(result.retention_ms)})"
        )
        if result.lite_commits:
            first, last = result.lite_commits
            plan += f"; read commits {first} to {last}"
        if result.dry_run:
            c.print("[bold]dry run[/]: " + plan, soft_wrap=True)
            if result.files:
                rows = ((format_bytes(f.size), f.reason, f.path) for f in result.files)
                header = ("size", "reason", "path")
                self.listing("Files to delete", header, rows, len(result.files), "files")
        else:
            c.print(plan, soft_wrap=True)
            c.print(
                f"deleted {result.deleted_files:,} files "
                f"({format_bytes(result.deleted_bytes)}) and "
                f"{result.deleted_directories:,} empty directories; committed VACUUM START "
                f"(version {result.start_version}) and VACUUM END (version {result.end_version})",
                soft_wrap=True,
            )
            for failure in result.failed:
                self.err.print(
                    f"[red]not deleted:[/] {escape(failure.path)}: {escape(failure.error)}",
                    soft_wrap=True,
                )
        if result.num_ignored_log_paths:
            examples = ", ".join(escape(p.path) for p in result.ignored_log_paths[:3])
            self.err.print(
                f"[yellow]warning:[/] {result.num_ignored_log_paths:,} paths in the log are not "
                f"inside the table root and were ignored (never deleted): {examples}",
                soft_wrap=True,
            )
        for warning in result.warnings:
            self.err.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)

    def log_cleanup(self, result: LogCleanupResult) -> None:
        from dvtool import render_log  # checkpoint and vacuum --log views (dvtool.render_log)

        render_log.log_cleanup(self, result)

    def checkpoint(self, result: CheckpointResult) -> None:
        from dvtool import render_log

        render_log.checkpoint(self, result)

    # -- maintain ------------------------------------------------------------------------------

    def maintain(self, result: MaintainResult) -> None:
        from dvtool.render_maintain import render_maintain

        render_maintain(self, result)

    # -- generate-manifest and downgrade --------------------------------------------------------

    def manifest(self, result: ManifestResult) -> None:
        if self.as_json:
            self.json(result.to_json())
            return
        c = self.console
        if result.purge is not None and result.purge.versions:
            versions = ", ".join(str(v) for v in result.purge.versions)
            m = result.purge.metrics
            c.print(
                f"purged deletion vectors: committed version(s) [bold]{versions}[/] "
                f"({m['numRemovedFiles']:,} files rewritten, "
                f"{m['numDeletionVectorRowsRemoved']:,} deleted rows dropped)"
            )
        c.print(
            f"wrote {len(result.manifests):,} manifest(s) listing {result.num_files:,} files "
            f"of version [bold]{result.version}[/] under {escape(result.root)}",
            soft_wrap=True,
        )
        if result.deleted:
            c.print(f"deleted {len(result.deleted):,} stale manifest(s):")
            for location in result.deleted:
                c.print(f"  {escape(location)}", soft_wrap=True)
        for warning in result.warnings:
            self.err.print(f"[yellow]warning:[/] {escape(warning)}")

    def downgrade(self, result: DowngradeResult) -> None:
        if self.as_json:
            self.json(result.to_json())
            return
        c = self.console
        if not result.dropped_features:
            what = "deletion vectors" + (
                " or checkpointProtection" if result.truncate_history else ""
            )
            c.print(
                f"nothing to downgrade at version {result.read_version}: the table does not "
                f"support {what}"
            )
            return
        dropped = ", ".join(result.dropped_features)
        if result.dry_run:
            c.print(f"[bold]dry run[/] against version {result.read_version}: nothing written")
        elif result.version is not None:
            c.print(f"dropped {dropped}: committed version [bold]{result.version}[/]")
        else:
            c.print(f"{dropped} not dropped yet (version {result.read_version})")
        c.print(
            f"protocol {format_protocol(result.protocol_before)} -> "
            f"{format_protocol(result.protocol_after)}",
            soft_wrap=True,
        )
        columns = [Column(name, overflow="fold") for name in ("step", "version", "detail")]
        t = BoxTable("Plan" if result.dry_run else "Steps", columns)
        for step in result.steps:
            version = "" if step.version is None else str(step.version)
            t.add_row(step.action, version, escape(step.detail))
        c.print(t.to_rich())
        if result.dry_run and result.files_to_rewrite:
            paths = result.files_to_rewrite
            c.print(f"files to rewrite ({len(paths):,}):")
            for path in paths[:_LISTED_FILES]:
                c.print(f"  {escape(path)}", soft_wrap=True)
            if len(paths) > _LISTED_FILES:
                c.print(f"  ... and {len(paths) - _LISTED_FILES:,} more (--json lists all)")
        if result.deleted_log_files:
            verb = "would delete" if result.dry_run else "deleted"
            boundary = result.history_boundary
            start = f"version {boundary}" if boundary is not None else "the new boundary"
            c.print(
                f"{verb} {len(result.deleted_log_files):,} log files; history starts at {start}",
                soft_wrap=True,
            )
        for warning in result.warnings:
            self.err.print(f"[yellow]warning:[/] {escape(warning)}")


# Off a terminal (CI logs, pipes, files) lines are as wide as their content: no table is
# squeezed into an arbitrary 80 columns, no path or number broken. Rich needs some width.
_UNLIMITED_WIDTH = 1_000_000


def _console(*, stderr: bool) -> Console:
    """A console for stdout or stderr: the terminal's width and colours on a terminal;
    off one, no colour, no markup styles and no wrapping."""
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if console.is_terminal:
        return console
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=True,
        width=_UNLIMITED_WIDTH,
        color_system=None,
        no_color=True,
    )


@contextmanager
def _progress_bar(description: str, console: Console) -> Iterator[Progress]:
    from rich.progress import (  # local: only a terminal shows progress
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        yield bar
