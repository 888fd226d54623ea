"""The errors dvtool reports to users.

Every error a user can cause or meet (bad arguments, a missing table, a corrupt log or
deletion vector, an unsupported table feature) is a `DvtoolError`. The CLI prints its message
(one or two lines: what is wrong, where, what to do) and exits with `exit_code`, without a
traceback. Anything else that escapes a command is a bug and is reported as an internal error.

This module does no IO, so the protocol core may raise these errors too.
"""

from __future__ import annotations


class DvtoolError(Exception):
    """An error with a message meant for the user and a process exit code."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n{self.hint}"
        return self.message


class UsageError(DvtoolError):
    """A command-line argument or option value is invalid."""

    exit_code = 2


class StorageError(DvtoolError):
    """The storage layer could not read, list or write a file."""


class CommitOutcomeUnknownError(StorageError):
    """A commit was sent but neither its success nor its failure could be confirmed.

    The files the commit names must then be kept: the log may reference them.
    """


class FileMissingError(StorageError):
    """A file the operation needs does not exist."""

    def __init__(self, location: str, message: str | None = None) -> None:
        super().__init__(message or f"file not found: {location}")
        self.location = location


class TableNotFoundError(DvtoolError):
    """The location holds no Delta table (no `_delta_log` with a commit or checkpoint)."""


class LogError(DvtoolError):
    """The Delta log is malformed, incomplete or inconsistent."""


class UnsupportedFeatureError(DvtoolError):
    """The table needs a protocol feature dvtool does not implement."""


class DeletionVectorError(DvtoolError):
    """A deletion vector could not be read or failed validation.

    The codec raises these without knowing where the bytes came from; the DV store adds the
    DV file and the data file it belongs to with `locate()` before the error reaches the user.
    """

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

    exit_code = 3


class PredicateError(DvtoolError):
    """A `--where` predicate cannot be parsed, names unknown columns, or has a type error."""


class CommitConflictError(DvtoolError):
    """A concurrent commit conflicts with this transaction and retrying cannot resolve it.

    Its own exit code, so that a job can tell "run it again" from a real failure: nothing of
    the transaction was committed.
    """

    exit_code = 4


class WriteRefusedError(DvtoolError):
    """The table must not be written by this command (a feature, a property, the backend)."""
