"""The `dvtool` command line: parse arguments, call a command, render its result.

No logic lives here beyond argument conversion. Errors a user can act on (`DvtoolError`) print
their message and exit with their code; anything else is a bug, reported as an internal error
with the traceback shown under `-v`.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dvtool import __version__
from dvtool.errors import DvtoolError, UsageError, exit_code_of

COMPLETE_VAR = "_DVTOOL_COMPLETE"  # as dvtool.shell_completion, without importing it

if TYPE_CHECKING:
    from dvtool.engines.base import Engine
    from dvtool.log.reader import DeltaLog

EngineFactory = Callable[[int], "Engine"]

F = TypeVar("F", bound=Callable[..., Any])
INTERNAL_ERROR_EXIT = exit_code_of("internal")


class TimestampParam(click.ParamType):  # type: ignore[type-arg]
    """An ISO 8601 date or date-time; naive values are UTC. Converted to epoch milliseconds."""

    name = "timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().replace("Z", "+00:00")
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 timestamp (e.g. 2024-05-01T12:00:00Z)")
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        return int(moment.timestamp() * 1000)


class SizeParam(click.ParamType):  # type: ignore[type-arg]
    """A byte size: 268435456, 256MB, 1GiB, 512k (units are powers of 1024, as in Spark)."""

    name = "size"

    def __init__(self, minimum: int = 0) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            size = value
        else:
            from dvtool.core.byte_size import parse_byte_size

            try:
                size = parse_byte_size(str(value))
            except ValueError as e:
                self.fail(str(e))
        if size < self.minimum:
            self.fail(f"{value!r} is less than {self.minimum} bytes")
        return size


def _storage_options(values: Sequence[str]) -> dict[str, str]:
    return _key_values(values, "--storage-option")


def table_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The TABLE argument and storage options; the command receives the opened `log`."""

    @functools.wraps(fn)
    def opened(*args: Any, table: str, storage_options: Sequence[str], **kwargs: Any) -> Any:
        from dvtool.log.reader import open_log

        return fn(*args, log=open_log(table, _storage_options(storage_options)), **kwargs)

    wrapped = click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Storage backend option: delta-rs/object_store keys (AWS_REGION, "
        "AWS_ENDPOINT_URL, GOOGLE_SERVICE_ACCOUNT, ...) or the backend's own (endpoint_url, "
        '...); see README "Storage options". Repeatable.',
    )(opened)
    # A Path completes as a local path in every shell; URIs (s3://...) pass unchanged.
    return click.argument("table", type=click.Path())(wrapped)


def engine_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--engine and the Spark options; the command receives `engine_for(bytes) -> Engine`."""

    @functools.wraps(fn)
    def chosen(
        *args: Any,
        engine: str,
        spark_master: str | None,
        spark_remote: str | None,
        spark_conf: Sequence[str],
        spark_threshold: int,
        **kwargs: Any,
    ) -> Any:
        factory = _engine_factory(engine, spark_master, spark_remote, spark_conf, spark_threshold)
        return fn(*args, engine_for=factory, **kwargs)

    options = [
        click.option(
            "--engine",
            type=click.Choice(["auto", "arrow", "spark"]),
            default="auto",
            show_default=True,
            help="arrow: in-process pyarrow; spark: PySpark; auto: spark when a master or "
            "remote is configured or the data exceeds --spark-threshold.",
        ),
        click.option(
            "--spark-master", metavar="URL", help="Spark master (env DVTOOL_SPARK_MASTER)."
        ),
        click.option(
            "--spark-remote",
            metavar="sc://HOST:PORT",
            help="Spark Connect (env DVTOOL_SPARK_REMOTE).",
        ),
        click.option(
            "--spark-conf",
            multiple=True,
            metavar="KEY=VALUE",
            help="Spark configuration. Repeatable.",
        ),
        click.option(
            "--spark-threshold",
            type=SizeParam(),
            default="1GiB",
            show_default=True,
            metavar="SIZE",
            help="With --engine auto, use Spark above this much data (bytes, 512MB, 2GiB).",
        ),
    ]
    wrapped: Callable[..., Any] = chosen
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


def _engine_factory(
    engine: str,
    spark_master: str | None,
    spark_remote: str | None,
    spark_conf: Sequence[str],
    spark_threshold: int,
) -> EngineFactory:
    from dvtool.engines import SparkSettings, choose_engine

    ctx = click.get_current_context(silent=True)
    root = ctx.find_root().obj if ctx else None
    settings = SparkSettings.from_options(
        spark_master,
        spark_remote,
        _key_values(spark_conf, "--spark-conf"),
        verbose=bool(root and root.get("verbose")),
    )
    return lambda size: choose_engine(engine, settings, size, spark_threshold)


def _key_values(values: Sequence[str], option: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"invalid {option} {item!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(fn)


def limit_option(fn: F) -> F:
    """`--limit N`: the most rows a human listing shows; the command receives `limit`
    (None for all)."""
    return click.option(
        "--limit",
        type=click.IntRange(min=0),
        default=20,
        show_default=True,
        callback=lambda _ctx, _param, value: value or None,
        metavar="N",
        help="Human output lists at most N files, then says how many more (0: all). "
        "--json always lists all.",
    )(fn)


class DvtoolGroup(click.Group):
    """Runs subcommands and turns errors into messages, exit codes and JSON error objects.

    Every subcommand also takes `-v`, so it works before or after the command name.
    """

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.params.append(
            click.Option(
                ["-v", "--verbose"],
                is_flag=True,
                expose_value=False,
                callback=_set_verbose,
                help="Show tracebacks and Spark's log (also before the command name).",
            )
        )
        super().add_command(cmd, name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["dvtool.argv"] = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            if _json_requested(ctx):
                _report_json(_error_json("usage", e.format_message(), None))
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DvtoolError as e:
            _report(ctx, str(e), e, e.to_json())
            ctx.exit(e.exit_code)
        except click.exceptions.Exit:
            raise
        except click.UsageError as e:
            if _json_requested(ctx):
                _report_json(_error_json("usage", e.format_message(), None))
            raise
        except (click.ClickException, click.exceptions.Abort):
            raise
        except KeyboardInterrupt as e:
            message = "interrupted; nothing half-written is left in the log"
            _report(ctx, message, e, _error_json("interrupted", message, None))
            ctx.exit(exit_code_of("interrupted"))
        except Exception as e:
            message = f"internal error, please report: {type(e).__name__}: {e}"
            _report(
                ctx, message, e, _error_json("internal", message, "Run with -v for the traceback.")
            )
            ctx.exit(exit_code_of("internal"))


def _set_verbose(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_root().ensure_object(dict)["verbose"] = True


def _verbose(ctx: click.Context) -> bool:
    return bool((ctx.find_root().obj or {}).get("verbose"))


def _json_requested(ctx: click.Context) -> bool:
    """Whether the command line asks for JSON (`--json` before any `--`)."""
    argv: list[str] = ctx.meta.get("dvtool.argv", [])
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def _error_json(kind: str, message: str, hint: str | None) -> dict[str, Any]:
    return {"code": exit_code_of(kind), "kind": kind, "message": message, "hint": hint}


def _report_json(error: dict[str, Any]) -> None:
    from dvtool.render import Renderer

    Renderer(as_json=True).json({"error": error})


def _report(
    ctx: click.Context, message: str, error: BaseException, as_json: dict[str, Any]
) -> None:
    """The message on stderr (with the traceback under -v); with --json, the error object."""
    from dvtool.render import Renderer

    if _json_requested(ctx):
        _report_json(as_json)
    Renderer().error(message)
    if _verbose(ctx):
        traceback.print_exception(type(error), error, error.__traceback__)
    elif not isinstance(error, (DvtoolError, KeyboardInterrupt)):
        click.echo("Run with -v for the traceback.", err=True)


@click.group(cls=DvtoolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-v", "--verbose", is_flag=True, help="Show tracebacks and Spark's log (also after COMMAND)."
)
@click.version_option(__version__, prog_name="dvtool")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Maintain Delta Lake tables that use deletion vectors."""
    obj = ctx.ensure_object(dict)
    obj["verbose"] = verbose or obj.get("verbose", False)


@cli.command()
@table_options
@click.option("--version", "version", type=click.IntRange(min=0), help="Read this version.")
@click.option("--timestamp", type=TimestampParam(), help="Read the version as of this time.")
@click.option("--files", is_flag=True, help="List the live files with their DVs (see --limit).")
@click.option(
    "--history",
    type=click.IntRange(min=1),
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
    help="CI gate, e.g. max-deleted-ratio=0.2; exit 3 when any fails. Repeatable.",
)
@click.option(
    "--count-rows",
    is_flag=True,
    help="Read parquet footers of files whose stats lack numRecords, for exact row counts.",
)
@json_option
@limit_option
def inspect(
    log: DeltaLog,
    version: int | None,
    timestamp: int | None,
    files: bool,
    history: int | None,
    verify: bool,
    checks: Sequence[str],
    count_rows: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """Show a table, its files, its deletion vectors and their health."""
    from dvtool.commands.inspect import InspectRequest, parse_check, run_inspect
    from dvtool.render import Renderer

    request = InspectRequest(
        version=version,
        timestamp_ms=timestamp,
        files=files,
        history=history,
        verify=verify,
        checks=tuple(parse_check(c) for c in checks),
        count_rows=count_rows,
        files_limit=None if as_json else limit,
    )
    renderer = Renderer(as_json, limit=limit)
    with renderer.progress("verifying") as progress:
        result = run_inspect(log, request, progress)
    renderer.inspect(result)
    click.get_current_context().exit(result.exit_code)


@cli.command()
@table_options
@json_option
def enable(log: DeltaLog, as_json: bool) -> None:
    """Turn deletion vectors on (protocol 3/7 and delta.enableDeletionVectors=true)."""
    from dvtool.commands.enable import run_enable
    from dvtool.render import Renderer

    result = run_enable(log)
    Renderer(as_json).enable(result)


@cli.command()
@table_options
@click.option("--where", "where", required=True, metavar="SQL", help="Spark SQL boolean predicate.")
@click.option(
    "--mode",
    type=click.Choice(["auto", "dv", "cow"]),
    default="auto",
    show_default=True,
    help="dv: write deletion vectors; cow: rewrite files; auto: dv when the table enables DVs.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@engine_options
@json_option
@limit_option
def delete(
    log: DeltaLog,
    where: str,
    mode: str,
    dry_run: bool,
    engine_for: EngineFactory,
    as_json: bool,
    limit: int | None,
) -> None:
    """Delete the rows matching --where (merge-on-read with deletion vectors)."""
    from dvtool.commands.delete import DeleteRequest, run_delete
    from dvtool.render import Renderer

    renderer = Renderer(as_json, limit=limit)
    with renderer.progress("scanning") as progress:
        result = run_delete(
            log,
            DeleteRequest(where, mode, dry_run),
            progress=progress,
            engine_for=engine_for,
        )
    renderer.delete(result)


@cli.command()
@table_options
@click.option("--purge", is_flag=True, help="Rewrite files with DVs without their deleted rows.")
@click.option(
    "--min-deleted-ratio",
    type=float,
    metavar="R",
    help="With --purge: only files whose deleted ratio is at least R (0..1).",
)
@click.option(
    "--target-size",
    type=SizeParam(minimum=1),
    metavar="SIZE",
    help="Compaction target file size: bytes, 256MB, 1GiB (default: delta.targetFileSize, "
    "else 256 MiB).",
)
@click.option(
    "--where", "where", metavar="SQL", help="Restrict to partitions (partition columns only)."
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option(
    "--batch-size",
    type=int,
    metavar="N",
    help="Commit every N output files (one transaction each).",
)
@engine_options
@json_option
@limit_option
def optimize(
    log: DeltaLog,
    purge: bool,
    min_deleted_ratio: float | None,
    target_size: int | None,
    where: str | None,
    dry_run: bool,
    batch_size: int | None,
    engine_for: EngineFactory,
    as_json: bool,
    limit: int | None,
) -> None:
    """Purge DVs by rewriting files (--purge), or compact small files."""
    from dvtool.commands.optimize import OptimizeRequest, run_optimize
    from dvtool.render import Renderer

    renderer = Renderer(as_json, limit=limit)
    request = OptimizeRequest(purge, min_deleted_ratio, target_size, where, dry_run, batch_size)
    with renderer.progress("rewriting") as progress:
        result = run_optimize(log, request, engine_for, progress)
    renderer.optimize(result)


@cli.command()
@table_options
@click.option(
    "--retain",
    metavar="DURATION",
    help="Keep files removed less than DURATION ago: 168h, 7d, 30m, 0h. "
    "Default: the table's delta.deletedFileRetentionDuration (7 days).",
)
@click.option(
    "--dry-run", is_flag=True, help="List the files to delete (path, size, why); delete nothing."
)
@click.option(
    "--lite",
    is_flag=True,
    help="Take candidates from the log (files removed since the last vacuum) instead of "
    "listing the table directory.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Allow --retain shorter than the table's retention. Dangerous: readers of older "
    "versions (time travel) and writers that have not committed yet may lose files.",
)
@json_option
@limit_option
def vacuum(
    log: DeltaLog,
    retain: str | None,
    dry_run: bool,
    lite: bool,
    force: bool,
    as_json: bool,
    limit: int | None,
) -> None:
    """Delete files the table no longer needs (data, DV and change data files)."""
    from dvtool.commands.vacuum import VacuumRequest, parse_duration, run_vacuum
    from dvtool.render import Renderer

    retain_ms = parse_duration(retain) if retain is not None else None
    renderer = Renderer(as_json, limit=limit)
    with renderer.progress("deleting") as progress:
        result = run_vacuum(log, VacuumRequest(retain_ms, dry_run, lite, force), progress)
    renderer.vacuum(result)
    if result.failed:
        click.get_current_context().exit(exit_code_of("storage"))


@cli.command("generate-manifest")
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
    from dvtool.render import Renderer

    renderer = Renderer(as_json)
    with renderer.progress("purging") as progress:
        result = run_generate_manifest(log, purge_first, engine_for, progress)
    renderer.manifest(result)


@cli.command()
@table_options
@click.option(
    "--truncate-history",
    is_flag=True,
    help="Also delete the log before a checkpoint taken after the purge and drop "
    "checkpointProtection, so that writers without DV support can write the table.",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --truncate-history: truncate even if that checkpoint is younger than "
    "delta.dropFeatureTruncateHistory.retentionDuration (24 hours).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@engine_options
@json_option
def downgrade(
    log: DeltaLog,
    truncate_history: bool,
    force: bool,
    dry_run: bool,
    engine_for: EngineFactory,
    as_json: bool,
) -> None:
    """Drop deletion vectors (the deletionVectors table feature) from a table."""
    from dvtool.commands.downgrade import HistoryRetentionError, run_downgrade
    from dvtool.render import Renderer

    renderer = Renderer(as_json)
    with renderer.progress("rewriting") as progress:
        try:
            result = run_downgrade(
                log, truncate_history, dry_run, force, engine_for, progress=progress
            )
        except HistoryRetentionError as e:
            if as_json:
                renderer.downgrade(e.partial)  # what was committed, then the error (exit 1)
            raise
    renderer.downgrade(result)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `dvtool` console script and `python -m dvtool`."""
    if COMPLETE_VAR in os.environ:  # a shell asks for completions (completions/)
        from dvtool.shell_completion import register

        register()
    cli.main(args=argv, prog_name="dvtool")
