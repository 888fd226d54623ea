"""`dvtool maintain`: purge, compact, checkpoint, vacuum and clean up the log of many tables
(Iceberg tables: purge, rewrite delete files, compact, vacuum)."""

from __future__ import annotations

import traceback
from collections.abc import Sequence

import click

from dvtool.cli_options import (
    EngineFactory,
    SizeParam,
    engine_options,
    json_option,
    parse_storage_options,
    storage_options_option,
)


@click.command()
@click.argument("targets", nargs=-1, required=True, type=click.Path(), metavar="TABLE_OR_PREFIX...")
@storage_options_option
@click.option(
    "-r",
    "--recursive",
    is_flag=True,
    help="Maintain every table under each prefix (Delta: a directory holding _delta_log; "
    "Iceberg: metadata/*.metadata.json; Paimon: schema/schema-N); directories starting with _ "
    "or . are not searched.",
)
@click.option(
    "--catalog",
    metavar="NAME",
    help="The TABLEs are Iceberg tables of this catalog (namespace.table), configured as "
    "pyiceberg configures it (~/.pyiceberg.yaml, PYICEBERG_CATALOG__NAME__*).",
)
@click.option("--dry-run", is_flag=True, help="Print each table's plan; write nothing.")
@click.option(
    "--purge-ratio",
    type=click.FloatRange(0, 1),
    metavar="R",
    help="Purge files deleting at least this share of their rows (default: table property "
    "dvtool.maintain.purgeRatio, else 0.2; Paimon: the deleted ratio above which a full "
    "compaction is recommended).",
)
@click.option(
    "--target-size",
    type=SizeParam(minimum=1),
    metavar="SIZE",
    help="Compact files below this size: bytes, 256MB, 1GiB (default: delta.targetFileSize, "
    "else 256 MiB; Iceberg: write.target-file-size-bytes, else 512 MiB; Paimon: the small "
    "file size, default target-file-size).",
)
@click.option(
    "--checkpoint-interval",
    type=click.IntRange(min=1),
    metavar="N",
    help="Write a checkpoint when N commits follow the last one (default: "
    "delta.checkpointInterval, else 10).",
)
@click.option(
    "--retain",
    metavar="DURATION",
    help="Vacuum retention, only to lengthen the table's delta.deletedFileRetentionDuration "
    "(Iceberg: history.expire.max-snapshot-age-ms; Paimon: the orphan file age, 1 day; a "
    "shorter one is ignored): 168h, 30d.",
)
@click.option(
    "--time-budget",
    metavar="DURATION",
    help="Start no new step or table once DURATION has passed (30m, 2h); what is left is "
    "reported as skipped.",
)
@engine_options
@json_option
def maintain(
    targets: Sequence[str],
    storage_options: Sequence[str],
    recursive: bool,
    catalog: str | None,
    dry_run: bool,
    purge_ratio: float | None,
    target_size: int | None,
    checkpoint_interval: int | None,
    retain: str | None,
    time_budget: str | None,
    engine_for: EngineFactory,
    as_json: bool,
) -> None:
    """Purge, compact, checkpoint, vacuum and clean up the log of tables (for cron).

    Iceberg tables: purge, rewrite delete files, compact and vacuum (expire snapshots,
    delete the files only they reach and orphan files). Paimon tables: inspect (recommends
    Paimon's full compaction when the deleted ratio, level-0 files or small files call for
    it) and vacuum (orphan files, leftovers of failed commits).

    Exit code: the worst of the tables' (internal 70, integrity 6, storage 8, not-found 5,
    refused 7, usage 2, error 1, conflict 4; 0 when all succeeded or were skipped).
    """
    from dvtool.commands.maintain.command import (
        MaintainRequest,
        parse_option_duration,
        run_maintain,
    )
    from dvtool.render.renderer import Renderer
    from dvtool.render.values import as_given

    request = MaintainRequest(
        purge_ratio=purge_ratio,
        target_size=target_size,
        checkpoint_interval=checkpoint_interval,
        retain_ms=parse_option_duration(retain, "--retain") if retain is not None else None,
        dry_run=dry_run,
        time_budget_ms=(
            parse_option_duration(time_budget, "--time-budget") if time_budget is not None else None
        ),
    )
    renderer = Renderer(as_json)
    with renderer.progress("maintaining") as progress:
        result = run_maintain(
            targets,
            request,
            recursive=recursive,
            storage_options=parse_storage_options(storage_options),
            engine_for=engine_for,
            progress=progress,
            catalog=catalog,
        )
    renderer.maintain(result, as_given(targets))
    ctx = click.get_current_context()
    if (ctx.find_root().obj or {}).get("verbose"):
        for table in result.tables:
            if table.exception is not None:
                e = table.exception
                traceback.print_exception(type(e), e, e.__traceback__)
    ctx.exit(result.exit_code)
