"""Commands that read a table: `inspect` and `generate-manifest`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from dvtool.cli_options import (
    EngineFactory,
    HistoryParam,
    TimestampParam,
    any_tables_options,
    engine_options,
    json_option,
    limit_option,
    open_any_table,
    table_options,
)

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from dvtool.commands.inspect.command import InspectRequest
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.paimon.tables import PaimonTable
    from dvtool.render.renderer import Renderer


@click.command()
@any_tables_options
@click.option(
    "--version",
    "version",
    type=click.IntRange(min=0),
    help="Read this version (Iceberg, Paimon: this snapshot id).",
)
@click.option(
    "--timestamp",
    type=TimestampParam(),
    help="Read the version as of this time (Iceberg, Paimon: the snapshot current then).",
)
@click.option(
    "--branch",
    metavar="NAME",
    help="Read this branch of a Paimon table (its table$branch_NAME; default main).",
)
@click.option("--files", is_flag=True, help="List the live files with their DVs (see --limit).")
@click.option(
    "--history",
    type=HistoryParam(),
    is_flag=False,
    flag_value=20,
    default=None,
    metavar="[N]",
    help="Show the last N commits (default 20).",
)
@click.option(
    "--verify", is_flag=True, help="Read every DV and data file footer; exit 6 on problems."
)
@click.option(
    "--check",
    "checks",
    multiple=True,
    metavar="NAME=LIMIT",
    shell_complete=lambda ctx, param, incomplete: _complete_checks(incomplete),
    help="CI gate, e.g. max-deleted-ratio=0.2; exit 3 when any fails. Repeatable. max-* "
    "gates hold when the value is at most LIMIT: max-deleted-ratio, max-deleted-rows, "
    "max-dv-files, max-files-with-dvs, max-inline-dvs, max-files, max-files-without-stats, "
    "max-small-files (files below the compaction target size, delta.targetFileSize or "
    "256 MiB), max-log-files (commits a reader replays after the newest checkpoint; a "
    "checkpoint resets it). min-avg-file-size=SIZE (256MB, 1GiB) holds when the average "
    "file size is at least SIZE. Iceberg tables also: max-delete-files-per-data-file, "
    "max-equality-delete-files, max-dangling-deletes. Paimon tables also: max-level0-files "
    "(level-0 files deletion-vector readers do not read until Paimon compacts).",
)
@click.option(
    "--count-rows",
    is_flag=True,
    help="Read parquet footers of files whose stats lack numRecords, for exact row counts "
    "(Iceberg: apply equality deletes).",
)
@json_option
@limit_option
def inspect(
    targets: Sequence[str],
    storage_options: dict[str, str],
    catalog: str | None,
    recursive: bool,
    version: int | None,
    timestamp: int | None,
    branch: str | None,
    files: bool,
    history: int | None,
    verify: bool,
    checks: Sequence[str],
    count_rows: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """Show a table (Delta, Iceberg or Paimon), its files, its deletes and their health; with
    --recursive, every table under prefixes, one row each (for CI over a whole lake).

    Exit code: 3 when a --check gate fails, 6 when --verify finds problems; with
    --recursive, the worst of the tables' (internal 70, integrity 6, storage 8, not-found 5,
    usage 2, check-failed 3).
    """
    import dataclasses  # here, not at import: `dvtool --help` imports this module

    from dvtool.commands.inspect.command import InspectRequest, parse_check, run_inspect
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.errors import UsageError
    from dvtool.paimon.tables import PaimonTable
    from dvtool.render.renderer import Renderer

    request = InspectRequest(
        version=version,
        timestamp_ms=timestamp,
        files=files,
        history=history,
        verify=verify,
        count_rows=count_rows,
        files_limit=None if as_json else limit,
    )
    renderer = Renderer(as_json, limit=limit)
    if recursive and branch is not None:
        raise UsageError("--branch reads one Paimon table, not with --recursive")
    if recursive:
        _inspect_tables(targets, request, checks, storage_options, catalog, renderer)
        return
    table = open_any_table(targets, storage_options, catalog)
    if isinstance(table, PaimonTable):
        table = table if branch is None else table.open_branch(branch)
        _inspect_paimon(table, request, checks, renderer)
        return
    if branch is not None:
        raise UsageError("--branch applies to Paimon tables (their branch/branch-NAME folders)")
    if not isinstance(table, DeltaLog):
        _inspect_iceberg(table, request, checks, renderer)
        return
    request = dataclasses.replace(request, checks=tuple(parse_check(c) for c in checks))
    with renderer.progress("verifying") as progress:
        result = run_inspect(table, request, progress)
    renderer.inspect(result)
    click.get_current_context().exit(result.exit_code)


def _inspect_iceberg(
    table: IcebergTable, request: InspectRequest, checks: Sequence[str], renderer: Renderer
) -> None:
    import dataclasses

    from dvtool.commands.inspect.iceberg import run_inspect_iceberg
    from dvtool.commands.inspect.iceberg_checks import parse_iceberg_check

    request = dataclasses.replace(request, checks=tuple(map(parse_iceberg_check, checks)))
    with renderer.progress("verifying") as progress:
        result = run_inspect_iceberg(table, request, progress)
    renderer.inspect_iceberg(result)
    click.get_current_context().exit(result.exit_code)


def _inspect_paimon(
    table: PaimonTable, request: InspectRequest, checks: Sequence[str], renderer: Renderer
) -> None:
    import dataclasses

    from dvtool.commands.inspect.paimon import run_inspect_paimon
    from dvtool.commands.inspect.paimon_checks import parse_paimon_check

    request = dataclasses.replace(request, checks=tuple(map(parse_paimon_check, checks)))
    with renderer.progress("verifying") as progress:
        result = run_inspect_paimon(table, request, progress)
    renderer.inspect_paimon(result)
    click.get_current_context().exit(result.exit_code)


def _inspect_tables(
    prefixes: Sequence[str],
    request: InspectRequest,
    checks: Sequence[str],
    storage_options: dict[str, str],
    catalog: str | None,
    renderer: Renderer,
) -> None:
    """`inspect --recursive`: every table under `prefixes`, named relative to the prefix."""
    import traceback

    from dvtool.commands.inspect.tables import check_recursive_request, run_inspect_tables
    from dvtool.errors import UsageError
    from dvtool.render.values import as_given, relative_location

    check_recursive_request(request)
    if catalog is not None:
        raise UsageError(
            "--catalog cannot be used with --recursive: a catalog names one table",
            hint="Give the prefixes of path tables, or inspect the catalog's table alone.",
        )
    with renderer.progress("inspecting") as progress:
        result = run_inspect_tables(
            prefixes,
            checks=checks,
            verify=request.verify,
            count_rows=request.count_rows,
            storage_options=storage_options,
            progress=progress,
        )
    named = as_given(prefixes)
    if len(prefixes) == 1:
        renderer.inspect_tables(
            result,
            lambda loc: relative_location(named(loc), prefixes[0]),
            f"Tables under {prefixes[0]}",
        )
    else:
        renderer.inspect_tables(result, named)
    ctx = click.get_current_context()
    if (ctx.find_root().obj or {}).get("verbose"):
        for table in result.tables:
            if table.exception is not None:
                e = table.exception
                traceback.print_exception(type(e), e, e.__traceback__)
    ctx.exit(result.exit_code)


def _complete_checks(incomplete: str) -> list[CompletionItem]:
    """`--check <TAB>`: the gate names that start with what is typed, each with the `=`
    its limit follows (imported only when a shell asks)."""
    from click.shell_completion import CompletionItem

    from dvtool.commands.inspect.checks import CHECK_NAMES
    from dvtool.commands.inspect.iceberg_checks import ICEBERG_ONLY_CHECK_NAMES
    from dvtool.commands.inspect.paimon_checks import PAIMON_ONLY_CHECK_NAMES

    names = sorted({*CHECK_NAMES, *ICEBERG_ONLY_CHECK_NAMES, *PAIMON_ONLY_CHECK_NAMES})
    return [CompletionItem(f"{name}=") for name in names if name.startswith(incomplete)]


@click.command("generate-manifest")
@table_options
@click.option(
    "--purge-first",
    is_flag=True,
    help="Purge deletion vectors first (rewrite files with DVs), then write the manifests.",
)
@engine_options
@json_option
def generate_manifest(
    log: DeltaLog,
    purge_first: bool,
    engine_for: EngineFactory,
    as_json: bool,
) -> None:
    """Write symlink manifests (_symlink_format_manifest) for Presto, Trino and Athena."""
    from dvtool.commands.manifest import run_generate_manifest
    from dvtool.render.renderer import Renderer

    renderer = Renderer(as_json)
    with renderer.progress("purging") as progress:
        result = run_generate_manifest(log, purge_first, engine_for, progress)
    renderer.manifest(result)
