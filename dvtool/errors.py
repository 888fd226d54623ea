"""The errors dvtool reports to users, and the exit code of each kind.

Every error a user can cause or meet (bad arguments, a missing table, a corrupt log or
deletion vector, an unsupported table feature) is a `DvtoolError`. The CLI prints its message
(one or two lines: what is wrong, where, what to do) and exits with `exit_code`, without a
traceback; with `--json` it also prints `{"error": {"code", "kind", "message", "hint"}}`.
Anything else that escapes a command is a bug and is reported as an internal error.

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
    "integrity": (6, "the log or a deletion vector is corrupt, or inspect --verify found problems"),
    "refused": (7, "refused by a safety rule: retention, waiting period, a table feature"),
    "storage": (8, "storage or credentials: a read, listing or write failed"),
    "internal": (70, "internal error: a bug in dvtool, please report it (-v shows the traceback)"),
    "interrupted": (
        130,
        "interrupted (Ctrl-C, SIGINT) before a commit; no commit is ever half-written",
    ),
    "terminated": (143, "stopped by SIGTERM (a CI cancellation) before a commit, as SIGINT"),
}


def exit_code_of(kind: str) -> int:
    """The exit code of an error kind of `EXIT_CODES`."""
    return EXIT_CODES[kind][0]


# The kinds of EXIT_CODES from worst to mildest, for a command that sums up several outcomes
# in one exit code (`dvtool maintain`: the worst of its tables'): a bug, then what needs a
# person to repair the table or its storage, then what they must decide or correct, then
# what running again fixes.
SEVERITY: tuple[str, ...] = (
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


class DvtoolError(Exception):
    """An error with a message meant for the user, its kind and the process exit code."""

    kind = "error"
    exit_code = exit_code_of(kind)

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.exit_code = exit_code_of(cls.kind)

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


class StorageError(DvtoolError):
    """The storage layer could not read, list or write a file."""

    kind = "storage"


class CommitOutcomeUnknownError(StorageError):
    """A commit was sent but neither its success nor its failure could be confirmed.

    The files the commit names must then be kept: the log may reference them.
    """


class FileMissingError(StorageError):
    """A file the operation needs does not exist."""

    kind = "not-found"

    def __init__(self, location: str, message: str | None = None) -> None:
        super().__init__(message or f"file not found: {location}")
        self.location = location


class TableNotFoundError(DvtoolError):
    """The location holds no Delta table (no `_delta_log` with a commit or checkpoint)."""

    kind = "not-found"


class LogError(DvtoolError):
    """The Delta log is malformed, incomplete or inconsistent."""

    kind = "integrity"


class DataFileError(DvtoolError):
    """A data file the log names is not a valid parquet file (corrupt or truncated)."""

    kind = "integrity"


class VersionNotFoundError(LogError):
    """The version or timestamp asked for is not in the table's history (not corruption)."""

    kind = "not-found"


class UnsupportedFeatureError(DvtoolError):
    """The table needs a protocol feature dvtool does not implement."""

    kind = "refused"


class DeletionVectorError(DvtoolError):
    """A deletion vector could not be read or failed validation.

    The codec raises these without knowing where the bytes came from; the DV store adds the
    DV file and the data file it belongs to with `locate()` before the error reaches the user.
    """

    kind = "integrity"
    problem = "invalid deletion vector"

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


class CheckFailedError(DvtoolError):
    """A `--check` gate did not hold; CI scripts key on exit code 3."""

    kind = "check-failed"


class PredicateError(DvtoolError):
    """A `--where` predicate cannot be parsed, names unknown columns, or has a type error."""

    kind = "usage"


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


class WriteRefusedError(DvtoolError):
    """The table must not be written by this command (a feature, a property, the backend)."""

    kind = "refused"
