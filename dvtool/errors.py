"""The errors dvtool reports to users, and the exit code of each kind.

Every error a user can cause or meet (bad arguments, a missing table, a corrupt log or
deletion vector, an unsupported table feature) is a `DvtoolError`. The CLI prints its message
(two lines: what is wrong and where, then what to do) and exits with `exit_code`, without a
traceback; with `--json` it also prints `{"error": {"code", "kind", "message", "hint"}}`.
Anything else that escapes a command is a bug and is reported as an internal error.

The raise site knows best what to do and gives the hint where it can; an error raised
without one gets its class's `fallback_hint` from the CLI (`with_fallback_hint`), so no
error reaches a user without a "what to do". Those name the command and the table the user
typed, which only the CLI knows.

`EXIT_CODES` is the one table of exit codes (README.md's "Exit codes" shows it): each kind
of error has its own, so a CI job can tell "run it again" from "fix the table".

This module does no IO, so the protocol core may raise these errors too.
"""

from __future__ import annotations

from collections.abc import Iterable

# kind -> (exit code, what it means). The classes below name their kind.
EXIT_CODES: dict[str, tuple[int, str]] = {
    "ok": (0, "success (for inspect --check and --verify: every gate held, no problem found)"),
    "error": (1, "a failure of no kind below (e.g. a Spark job failed)"),
    "usage": (2, "invalid arguments or options, including a --where dvtool cannot use"),
    "check-failed": (3, "an inspect --check gate did not hold"),
    "conflict": (4, "a concurrent commit conflicts; nothing was committed, run it again"),
    "not-found": (5, "no Delta table at the path, or a file the command needs is missing"),
    "integrity": (
        6,
        "the log, a deletion vector or a data file is corrupt (or holds a value its column's "
        "type cannot hold exactly), or inspect --verify found problems",
    ),
    "refused": (7, "refused by a safety rule: retention, waiting period, a table feature"),
    "storage": (8, "storage or credentials: a read, listing or write failed"),
    "internal": (70, "internal error: a bug in dvtool, please report it (-v shows the traceback)"),
    "interrupted": (
        130,
        "interrupted (Ctrl-C, SIGINT) before a commit; no commit is ever half-written",
    ),
    "terminated": (143, "stopped by SIGTERM (a CI cancellation) before a commit, as SIGINT"),
    "broken-pipe": (
        141,
        "the reader of stdout went away (| head): output stopped; what was done stands",
    ),
}


def exit_code_of(kind: str) -> int:
    """The exit code of an error kind of `EXIT_CODES`."""
    return EXIT_CODES[kind][0]


# The kinds of EXIT_CODES from worst to mildest, for a command that sums up several outcomes
# in one exit code (`dvtool maintain`: the worst of its tables'): a bug, then what needs a
# person to repair the table or its storage, then what they must decide or correct, then
# what running again fixes.
SEVERITY: tuple[str, ...] = (
    "broken-pipe",
    "terminated",
    "interrupted",
    "internal",
    "integrity",
    "storage",
    "not-found",
    "refused",
    "usage",
    "error",
    "conflict",
    "check-failed",
    "ok",
)


def worst_kind(kinds: Iterable[str]) -> str:
    """The worst of `kinds` by `SEVERITY`; "ok" when there are none."""
    return min(kinds, key=SEVERITY.index, default="ok")


def exception_text(error: BaseException) -> str:
    """What went wrong in `error`, for a message: a KeyError as the field it did not find.

    `str(KeyError("id"))` is `'id'`, already quoted, so a message that quotes it again shows
    `''id''`; and a bare quoted name does not say that the field is missing.
    """
    if isinstance(error, KeyError) and len(error.args) == 1:
        return f"missing field {error.args[0]!r}"
    return str(error)


# What to do about damage to a table (a missing data file, a corrupt deletion vector):
# `inspect --verify` finds all of it, and the files or the table's state must be brought back.
DAMAGE_HINT = (
    "The table is damaged: `dvtool inspect {table} --verify` lists every damaged file; "
    "restore them from a backup, or restore the table to a version before the damage "
    "(`dvtool restore {table} --version N`)."
)


class DvtoolError(Exception):
    """An error with a message meant for the user, its kind and the process exit code."""

    kind = "error"
    exit_code = exit_code_of(kind)
    # What to do, for an error raised without a hint; `{command}` and `{table}` are filled in
    # by `with_fallback_hint` (e.g. `dvtool optimize` and the TABLE argument).
    fallback_hint = "Run the command again with -v to see more."

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.exit_code = exit_code_of(cls.kind)

    def with_fallback_hint(
        self, command: str = "dvtool COMMAND", table: str = "TABLE"
    ) -> DvtoolError:
        """Give the error its class's `fallback_hint` if it has no hint; returns self.

        `command` and `table` are what the user typed (`dvtool delete`, the table path).
        """
        if not self.hint:
            self.hint = self.fallback_hint.format(command=command, table=table)
        return self

    def to_json(self) -> dict[str, object]:
        """The `error` object of `--json` output."""
        return {
            "code": self.exit_code,
            "kind": self.kind,
            "message": self.message,
            "hint": self.hint,
        }

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n{self.hint}"
        return self.message


class UsageError(DvtoolError):
    """A command-line argument or option value is invalid."""

    kind = "usage"
    fallback_hint = "See `{command} --help` for its arguments and options."


class StorageError(DvtoolError):
    """The storage layer could not read, list or write a file."""

    kind = "storage"
    fallback_hint = (
        "Check that the storage is reachable and that these credentials may read and write "
        "{table}, then run the command again."
    )


class CommitOutcomeUnknownError(StorageError):
    """A commit was sent but neither its success nor its failure could be confirmed.

    The files the commit names must then be kept: the log may reference them.
    """


class FileMissingError(StorageError):
    """A file the operation needs does not exist."""

    kind = "not-found"
    fallback_hint = (
        "Check the path; if the table's log names the file, the table is damaged: "
        "`dvtool inspect {table} --verify` lists the missing files."
    )

    def __init__(self, location: str, message: str | None = None, hint: str | None = None) -> None:
        super().__init__(message or f"file not found: {location}", hint)
        self.location = location


class TableNotFoundError(DvtoolError):
    """The location holds no Delta table (no `_delta_log` with a commit or checkpoint)."""

    kind = "not-found"
    fallback_hint = "Check the table path (it must be the directory that holds _delta_log)."


class LogError(DvtoolError):
    """The Delta log is malformed, incomplete or inconsistent."""

    kind = "integrity"
    fallback_hint = (
        "The table's log is damaged: restore the named log file from a backup (or have the "
        "writer that wrote it repair it); dvtool does not change a table it cannot read."
    )


class DataFileError(DvtoolError):
    """A data file the log names is not a valid parquet file (corrupt or truncated)."""

    kind = "integrity"
    fallback_hint = DAMAGE_HINT


class UnrepresentableValueError(DvtoolError):
    """A data file holds a value that the table's type of its column cannot hold exactly: a
    timestamp with nanoseconds below a microsecond, or beyond the range of the table's unit;
    a decimal with more digits or a finer scale than the column's; an integer out of range.

    Kind "integrity", not a refusal: the file does not conform to the table's schema, so what
    its value "is" depends on the reader (one floors, another truncates, a third wraps), and
    no flag or retry makes it right. dvtool reads and rewrites data only when every value
    converts exactly (a rewrite never changes a value); the file has to be repaired first.
    The message names the file and the column.
    """

    kind = "integrity"


class VersionNotFoundError(LogError):
    """The version or timestamp asked for is not in the table's history (not corruption)."""

    kind = "not-found"
    fallback_hint = "`dvtool inspect {table} --history` lists the versions the log holds."


class UnsupportedFeatureError(DvtoolError):
    """The table needs a protocol feature dvtool does not implement."""

    kind = "refused"
    fallback_hint = (
        "Maintain this table with an engine that implements the feature (Delta Spark, "
        'delta-rs); README "Table features" lists what dvtool supports.'
    )


class DeletionVectorError(DvtoolError):
    """A deletion vector could not be read or failed validation.

    The codec raises these without knowing where the bytes came from; the DV store adds the
    DV file and the data file it belongs to with `locate()` before the error reaches the user.
    """

    kind = "integrity"
    problem = "invalid deletion vector"
    fallback_hint = DAMAGE_HINT

    def __init__(
        self,
        detail: str = "",
        *,
        expected: object = None,
        actual: object = None,
        dv_file: str | None = None,
        data_file: str | None = None,
    ) -> None:
        self.detail = detail
        self.expected = expected
        self.actual = actual
        self.dv_file = dv_file
        self.data_file = data_file
        super().__init__(self._render())

    def locate(self, dv_file: str | None, data_file: str | None) -> DeletionVectorError:
        """Attach the DV file and data file this error belongs to; returns self."""
        self.dv_file = dv_file
        self.data_file = data_file
        self.message = self._render()
        self.args = (self.message,)
        return self

    def _render(self) -> str:
        parts = [self.problem]
        if self.detail:
            parts[0] += f" ({self.detail})"
        if self.expected is not None or self.actual is not None:
            parts.append(f"expected {self.expected}, found {self.actual}")
        if self.dv_file:
            parts.append(f"DV file {self.dv_file}")
        if self.data_file:
            parts.append(f"data file {self.data_file}")
        return ": ".join(parts[:1]) + ("; " + "; ".join(parts[1:]) if parts[1:] else "")


class DVFileMissingError(DeletionVectorError):
    problem = "deletion vector file is missing"


class DVVersionError(DeletionVectorError):
    problem = "unsupported deletion vector file format version"


class DVRangeError(DeletionVectorError):
    problem = "deletion vector lies outside its file"


class DVSizeMismatchError(DeletionVectorError):
    problem = "deletion vector size does not match its descriptor"


class DVMagicError(DeletionVectorError):
    problem = "deletion vector has a wrong magic number"


class DVChecksumError(DeletionVectorError):
    problem = "deletion vector checksum mismatch"


class DVCardinalityError(DeletionVectorError):
    problem = "deletion vector cardinality does not match its descriptor"


class DVRowIndexError(DeletionVectorError):
    problem = "deletion vector marks rows beyond the end of its data file"


class DVEncodingError(DeletionVectorError):
    problem = "deletion vector bytes are malformed"


class PredicateError(DvtoolError):
    """A `--where` predicate cannot be parsed, names unknown columns, or has a type error."""

    kind = "usage"
    fallback_hint = (
        "Fix the --where predicate: Spark SQL over the table's columns "
        "(`dvtool inspect {table}` lists them)."
    )


class InvalidInputError(PredicateError):
    """A `--where` cast met a string it cannot read, where ANSI Spark fails the query with
    CAST_INVALID_INPUT (`name > 5` reads the string column `name` as a BIGINT; 'abc' is
    none). `where` says where the value is: a file, a partition value (dvtool.predicate.ansi).
    """

    def __init__(self, column: str, value: str, target: str, where: str | None = None) -> None:
        shown = f" in {where}" if where else ""
        super().__init__(
            f"--where reads column {column} as {target}, but its value {value!r}{shown} is not "
            f"a valid {target} (Spark fails the query with CAST_INVALID_INPUT)",
            hint=f"compare {column} with a string literal ('5', not 5), or cast explicitly "
            f"with try_cast({column} AS {target}), which reads invalid values as NULL",
        )
        self.column = column
        self.value = value
        self.target = target
        self.where = where

    def located(self, location: str) -> InvalidInputError:
        """The same error, naming the file the value is in (or whose partition value it is)."""
        where = f"{self.where} of {location}" if self.where else location
        return InvalidInputError(self.column, self.value, self.target, where)


class CommitConflictError(DvtoolError):
    """A concurrent commit conflicts with this transaction and retrying cannot resolve it.

    Its own exit code, so that a job can tell "run it again" from a real failure: nothing of
    the transaction was committed.
    """

    kind = "conflict"
    fallback_hint = "Run the command again: it plans from the table's new version."


class WriteRefusedError(DvtoolError):
    """The table must not be written by this command (a feature, a property, the backend)."""

    kind = "refused"
    fallback_hint = 'README "Table features" says what dvtool may do to such a table.'
