"""Options and parameter types the `dvtool` subcommands share.

`table_options` opens the table (TABLE plus `--storage-option`), `any_tables_options` and
`open_any_table` a Delta, Iceberg or Paimon one (plus `--catalog`, or every one under prefixes with
`--recursive`), `engine_options` turns
`--engine` and the Spark options into an engine factory, `TimestampParam` and `SizeParam`
convert ISO timestamps and byte sizes; `json_option` and `limit_option` are the output flags.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dvtool.errors import UsageError

if TYPE_CHECKING:
    from dvtool.delta.log.reader import DeltaLog
    from dvtool.engines.base import Engine
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.paimon.tables import PaimonTable

EngineFactory = Callable[[int], "Engine"]

# Where `table_options` leaves the TABLE argument as typed (`ctx.meta`, shared by the group
# and its subcommand), for the CLI's error hints (`dvtool inspect TABLE --verify`).
TABLE_META = "dvtool.table"

F = TypeVar("F", bound=Callable[..., Any])


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
            from dvtool.byte_size import parse_byte_size

            try:
                size = parse_byte_size(str(value))
            except ValueError as e:
                self.fail(str(e))
        if size < self.minimum:
            self.fail(f"{value!r} is less than {self.minimum} bytes")
        return size


class OptionHintError(click.BadParameter):
    """A bad option value whose message already says what to do: the CLI prints it as one
    line, without the usual `--help` hint."""

    hint: str | None = None


class HistoryParam(click.ParamType):  # type: ignore[type-arg]
    """`inspect --history [N]`: a number of commits, at least 1.

    Its value is optional, so `dvtool inspect --history TABLE` takes TABLE for N; the error
    then says to put TABLE first rather than that a path is not an integer.
    """

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            number = value
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                raise OptionHintError(
                    f"{value!r} is not a number of commits; put TABLE first: "
                    "dvtool inspect TABLE --history [N]",
                    ctx,
                    param,
                ) from None
        if number < 1:
            self.fail(f"{number} is not a number of commits (1 or more)", param, ctx)
        return number


def storage_options_option(fn: F) -> F:
    """`--storage-option KEY=VALUE`, repeatable; the command receives `storage_options`, the
    values as given (`parse_storage_options` makes them a dict)."""
    return click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Storage backend option: delta-rs/object_store keys (AWS_REGION, "
        "AWS_ENDPOINT_URL, GOOGLE_SERVICE_ACCOUNT, ...) or the backend's own (endpoint_url, "
        '...); see README "Storage options". Repeatable.',
    )(fn)


def parse_storage_options(values: Sequence[str]) -> dict[str, str]:
    """The `--storage-option KEY=VALUE` values as a dict; UsageError for one without `=`."""
    return _key_values(values, "--storage-option")


def table_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The TABLE argument and storage options; the command receives the opened `log`."""

    @functools.wraps(fn)
    def opened(*args: Any, table: str, storage_options: Sequence[str], **kwargs: Any) -> Any:
        from dvtool.delta.log.reader import open_log

        click.get_current_context().meta[TABLE_META] = table

        return fn(*args, log=open_log(table, parse_storage_options(storage_options)), **kwargs)

    wrapped = storage_options_option(opened)
    # A Path completes as a local path in every shell; URIs (s3://...) pass unchanged.
    return click.argument("table", type=click.Path())(wrapped)


def any_table_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """TABLE, `--storage-option` and `--catalog` for a command that writes one Delta or
    Iceberg table: the command receives `table` opened in its format (a `DeltaLog` or an
    `IcebergTable`) and `storage_options` (a dict: Iceberg data files are read with them)."""

    @functools.wraps(fn)
    def opened(
        *args: Any, table: str, storage_options: Sequence[str], catalog: str | None, **kwargs: Any
    ) -> Any:
        from dvtool.table import open_table

        click.get_current_context().meta[TABLE_META] = table
        options = parse_storage_options(storage_options)
        return fn(
            *args, table=open_table(table, options, catalog), storage_options=options, **kwargs
        )

    wrapped = click.option(
        "--catalog",
        metavar="NAME",
        help="Open TABLE (namespace.table) through this Iceberg catalog, configured as "
        "pyiceberg configures it (~/.pyiceberg.yaml, PYICEBERG_CATALOG__NAME__*).",
    )(storage_options_option(opened))
    return click.argument("table", type=click.Path())(wrapped)


def any_tables_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """TABLE (with `--recursive`, PREFIX...), `--storage-option`, `--catalog` and `-r` for a
    command that reads Delta and Iceberg tables, one or every one under prefixes. The command
    receives `targets` as typed, `storage_options` (a dict), `catalog` and `recursive`;
    `open_any_table` opens the one TABLE without `--recursive`."""

    @functools.wraps(fn)
    def parsed(*args: Any, storage_options: Sequence[str], **kwargs: Any) -> Any:
        return fn(*args, storage_options=parse_storage_options(storage_options), **kwargs)

    wrapped = click.option(
        "-r",
        "--recursive",
        is_flag=True,
        help="Every table under each PREFIX (Delta: a directory holding _delta_log; Iceberg: "
        "metadata/*.metadata.json), one row each; directories starting with _ or . are not "
        "searched. --check, --verify and --count-rows apply to each; the exit code is the "
        "worst of the tables'.",
    )(parsed)
    wrapped = click.option(
        "--catalog",
        metavar="NAME",
        help="Open TABLE (namespace.table) through this Iceberg catalog, configured as "
        "pyiceberg configures it (~/.pyiceberg.yaml, PYICEBERG_CATALOG__NAME__*).",
    )(storage_options_option(wrapped))
    # A Path completes as a local path in every shell; URIs (s3://...) pass unchanged.
    argument = click.argument(
        "targets", nargs=-1, required=True, type=click.Path(), metavar="TABLE|PREFIX..."
    )
    return argument(wrapped)


def open_any_table(
    targets: Sequence[str], storage_options: dict[str, str], catalog: str | None
) -> DeltaLog | IcebergTable | PaimonTable:
    """The one TABLE of `any_tables_options` opened in its format, Paimon too
    (`dvtool.table.open_readable_table`: detected without importing Iceberg's or Paimon's
    libraries); UsageError for more than one."""
    from dvtool.table import open_readable_table

    if len(targets) != 1:
        raise UsageError(
            f"one TABLE at a time, not {len(targets)}, unless --recursive",
            hint="Add -r (--recursive) to inspect every table under each argument.",
        )
    click.get_current_context().meta[TABLE_META] = targets[0]
    return open_readable_table(targets[0], storage_options, catalog)


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
