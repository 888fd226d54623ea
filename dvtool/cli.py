"""The `dvtool` command line: parse arguments, call a command, render its result.

The group, `-v`, error reporting and the entry point live here; the subcommands in
`dvtool.cli_commands`, their shared options in `dvtool.cli_options`. No logic lives here beyond
argument conversion. Errors a user can act on (`DvtoolError`) print
their message and exit with their code; anything else is a bug, reported as an internal error
with the traceback shown under `-v`.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click

from dvtool import __version__, interrupts
from dvtool.cli_options import TABLE_META
from dvtool.errors import DvtoolError, exit_code_of

COMPLETE_VAR = "_DVTOOL_COMPLETE"  # as dvtool.shell_completion, without importing it

INTERNAL_ERROR_EXIT = exit_code_of("internal")


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
        except click.exceptions.NoArgsIsHelpError:
            raise  # `dvtool` alone: click prints the help
        except click.UsageError as e:
            _report_usage(ctx, e)
            ctx.exit(exit_code_of("usage"))

    def invoke(self, ctx: click.Context) -> Any:
        with interrupts.command_scope():
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as e:
            stop = _interrupt_behind(e)
            if stop is None:
                return self._report_error(ctx, e)
            return self._report_error(ctx, stop)
        except KeyboardInterrupt as e:
            return self._report_error(ctx, e)

    def _report_error(self, ctx: click.Context, error: BaseException) -> Any:
        """Report `error` (its outcome is final: signals are held from here) and exit."""
        interrupts.command_finished()
        try:
            raise error
        except DvtoolError as e:
            e.with_fallback_hint(_command(ctx), _table(ctx))
            _report(ctx, str(e), e, e.to_json())
            ctx.exit(e.exit_code)
        except click.exceptions.Exit:
            raise
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            _report_usage(ctx, e)
            ctx.exit(exit_code_of("usage"))
        except (click.ClickException, click.exceptions.Abort):
            raise
        except BrokenPipeError as e:
            if not _stdout_reader_gone():
                return self._report_error(ctx, RuntimeError(f"BrokenPipeError: {e}"))
            _quiet_stdout()
            ctx.exit(exit_code_of("broken-pipe"))
        except KeyboardInterrupt as e:
            kind = "terminated" if isinstance(e, interrupts.Terminated) else "interrupted"
            message, hint = _stopped_message(e)
            _report(ctx, f"{message}\n{hint}", e, _error_json(kind, message, hint))
            ctx.exit(exit_code_of(kind))
        except Exception as e:
            message = f"internal error, please report: {type(e).__name__}: {e}"
            _report(
                ctx, message, e, _error_json("internal", message, "Run with -v for the traceback.")
            )
            ctx.exit(exit_code_of("internal"))


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (`dvtool inspect T | head -1`):
    then a BrokenPipeError is the reader's choice, not a failure of dvtool's (one from a
    socket to the storage is not this)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    if not hasattr(select, "poll"):  # Windows: a write that fails again tells it
        try:
            sys.stdout.flush()
        except OSError:
            return True
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's last flush at exit would fail again
    ("Exception ignored ... BrokenPipeError")."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _interrupt_behind(error: BaseException) -> KeyboardInterrupt | None:
    """The signal's KeyboardInterrupt that `error` wraps, if any: Python 3.11 reports one that
    arrives while a class is being created (a lazy import) as "RuntimeError: Error calling
    __set_name__", with the interrupt as its cause."""
    if isinstance(error, DvtoolError):
        return None
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


def _report_usage(ctx: click.Context, error: click.UsageError) -> None:
    """click's usage errors (a bad option value, a missing argument, an unknown option) as
    every other error: one line saying what and where, one saying what to do, exit 2.

    click's own report is a four-line block (usage, "Try --help", blank line, error). An
    error that already says what to do carries `hint = None` (`cli_options.OptionHintError`).
    """
    message = error.format_message()
    message = message[:1].lower() + message[1:]
    path = error.ctx.command_path if error.ctx is not None else _command(ctx)
    hint = getattr(error, "hint", f"See `{path} --help` for its arguments and options.")
    _report(
        ctx, f"{message}\n{hint}" if hint else message, error, _error_json("usage", message, hint)
    )


def _command(ctx: click.Context) -> str:
    """The command the user ran, e.g. `dvtool optimize` (for hints)."""
    sub = ctx.invoked_subcommand
    return f"{ctx.command_path} {sub}" if sub else ctx.command_path


def _table(ctx: click.Context) -> str:
    """The TABLE argument as the user typed it, quoted for a shell (`TABLE` if none)."""
    table = ctx.meta.get(TABLE_META)
    return shlex.quote(table) if isinstance(table, str) else "TABLE"


def _stopped_message(error: KeyboardInterrupt) -> tuple[str, str]:
    """What a signal that stopped the command left: the commits that landed before it."""
    name = interrupts.signal_name(interrupts.signum_of(error))
    landed = interrupts.landed()
    if not landed:
        return (
            f"interrupted ({name}) before committing: no commit of this run is in the table's log",
            "Files it had written were deleted, or are left for vacuum; run the command again.",
        )
    versions = ", ".join(str(v) for v in landed)
    return (
        f"interrupted ({name}) after committing version{'s' if len(landed) > 1 else ''} "
        f"{versions}; nothing after that was committed",
        "The table is valid as committed; run the command again to finish.",
    )


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
    from dvtool.render.renderer import Renderer

    Renderer(as_json=True).json({"error": error})


def _report(
    ctx: click.Context, message: str, error: BaseException, as_json: dict[str, Any]
) -> None:
    """The message on stderr (with the traceback under -v); with --json, the error object."""
    from dvtool.render.renderer import Renderer

    if _json_requested(ctx):
        _report_json(as_json)
    Renderer().error(message)
    if _verbose(ctx):
        traceback.print_exception(type(error), error, error.__traceback__)
    elif not isinstance(error, (DvtoolError, KeyboardInterrupt, click.UsageError)):
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


def _register() -> None:
    from dvtool.cli_commands import cleanup, maintain, reads, restore, rewrites

    for command in (
        reads.inspect,
        rewrites.enable,
        rewrites.delete,
        rewrites.optimize,
        cleanup.vacuum,
        cleanup.checkpoint,
        reads.generate_manifest,
        rewrites.downgrade,
        restore.restore,
        maintain.maintain,
    ):
        cli.add_command(command)


_register()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `dvtool` console script and `python -m dvtool`."""
    if COMPLETE_VAR in os.environ:  # a shell asks for completions (completions/)
        from dvtool.shell_completion import register

        register()
    with interrupts.command_scope(process_exits=True):
        try:
            cli.main(args=argv, prog_name="dvtool")
        finally:
            _flush_stdout()


def _flush_stdout() -> None:
    """Flush what the command wrote; if stdout's reader has gone, exit as `broken-pipe`."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        _quiet_stdout()
        raise SystemExit(exit_code_of("broken-pipe")) from None
    except (OSError, ValueError, AttributeError):
        pass
