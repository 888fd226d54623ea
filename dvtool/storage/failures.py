"""Backend failures: translated into dvtool's errors, and the transient ones retried.

The backends (fsspec, s3fs, gcsfs, adlfs, their HTTP clients, pyarrow) raise their own
exception types. `Storage` promises a `FileMissingError` for a missing file and a one-line
`StorageError` naming the location for any other storage failure, while a dvtool bug still
surfaces as itself; and it retries a call that failed only because the store was busy or
the network hiccuped. Both rules are here, apart from the operations they guard.

A failure a user must fix (a read-only file system, no permission, a full disk) says so
in words and what to do (`storage_error`), naming the file dvtool meant to read or write,
never the temp file a local write goes through (`.tmp-<uuid>.dvtool`, an implementation
detail that the OS error names). A path whose parent is a file (ENOTDIR) is a missing file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from dvtool.errors import DvtoolError, FileMissingError, StorageError

# Exceptions from these packages are backend failures, not dvtool bugs.
_BACKEND_PACKAGES = frozenset(
    {"botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "google", "adlfs", "azure"}
    | {"fsspec", "pyarrow", "requests", "urllib3"}
)
ATTEMPTS = 4
RETRY_DELAY_S = 0.05
# OSError numbers of failures worth retrying: the store was busy (S3 409 conflicting
# conditional write, 503 SlowDown: EBUSY in s3fs), a 5xx (EREMOTEIO), a timeout or a reset.
_RETRYABLE_ERRNOS = frozenset(
    {errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET, errno.EREMOTEIO}
)
T = TypeVar("T")

# errno -> what to do, for the failures a user must fix; `{directory}` is the target's
# directory, `{verb}` "read" or "write". Object stores report access denied as
# PermissionError (EACCES).
_USER_FIXES: dict[int, str] = {
    errno.EROFS: "Run dvtool where it can write {directory} (a read-write mount), or copy the "
    "table to storage it can write.",
    errno.EACCES: "Give this user (or these credentials) {verb} access to {directory}, or run "
    "dvtool as a user that has it.",
    errno.EPERM: "Give this user {verb} access to {directory} (immutable files too: lsattr, "
    "chattr -i), or run dvtool as a user that has it.",
    errno.ENOSPC: "Free space on the file system that holds {directory}, then run the command "
    "again.",
    errno.EDQUOT: "Free space or raise the quota on the file system that holds {directory}, "
    "then run the command again.",
}


def call_with_retries(
    location: str,
    action: str,
    call: Callable[[], T],
    *,
    missing: bool = True,
    on_retry: Callable[[], None],
) -> T:
    """Run a backend call with its errors translated (see `backend_errors`).

    Failures worth retrying (timeouts, resets, a busy store, 5xx) are retried with
    exponential backoff, up to `ATTEMPTS` calls in all; `on_retry` is called before each
    retry.
    """
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with backend_errors(location, action, missing=missing):
                return call()
        except StorageError as exc:
            if attempt == ATTEMPTS or not is_retryable(exc.__cause__):
                raise
            on_retry()
            time.sleep(RETRY_DELAY_S * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


@contextlib.contextmanager
def backend_errors(location: str, action: str, *, missing: bool = True) -> Iterator[None]:
    """Translate backend exceptions: missing file -> FileMissingError, others -> StorageError.

    With `missing=False` a FileNotFoundError (a missing bucket or parent) is a StorageError.
    Exceptions that do not come from a backend (bugs) pass through unchanged.
    """
    try:
        yield
    except DvtoolError:
        raise
    except (FileNotFoundError, NotADirectoryError) as exc:
        if missing:
            raise FileMissingError(location) from exc
        raise storage_error(action, location, exc) from exc
    except Exception as exc:
        if not is_backend_error(exc):
            raise
        raise storage_error(action, location, exc) from exc


def storage_error(
    action: str, location: str, exc: BaseException, what: str | None = None
) -> StorageError:
    """The `StorageError` for a failed backend call: what failed (`what`, by default
    `cannot {action} {location}`), why on one line (`Read-only file system (errno 30)`),
    and what to do when the user must fix it.

    An OSError with an errno is told by its errno's words, without the file name the OS
    adds: for a local write that is the temp file, not the file the user knows.
    """
    message = f"{what or f'cannot {action} {location}'}: {_os_reason(exc)}"
    hint = _USER_FIXES.get(exc.errno) if isinstance(exc, OSError) and exc.errno else None
    if hint is None:
        return StorageError(message)
    verb = "read" if action.startswith(("read", "open", "list", "stat")) else "write"
    directory = location.rstrip("/").rpartition("/")[0] or location
    return StorageError(message, hint=hint.format(verb=verb, directory=directory))


def _os_reason(exc: BaseException) -> str:
    """An OSError's errno in words (`Read-only file system (errno 30)`, without the file
    names the OS or pyarrow add), or the exception's one-line message."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code is not None and code in errno.errorcode:
        words = exc.strerror if isinstance(exc, OSError) else None
        # pyarrow's strerror quotes the path and more ("Failed to open local file '/x'.
        # Detail: [errno 30] ..."): then the errno's own words.
        if not words or "'" in words:
            words = os.strerror(code)
        return f"{words} (errno {code})"
    return one_line(exc)


def is_backend_error(exc: BaseException) -> bool:
    """Whether an exception reports a storage failure rather than a bug."""
    if isinstance(exc, OSError):
        return True
    return any(cls.__module__.partition(".")[0] in _BACKEND_PACKAGES for cls in type(exc).__mro__)


def one_line(exc: BaseException) -> str:
    """The exception's message on one line (its type name if it has none)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def is_retryable(exc: BaseException | None) -> bool:
    """Whether a backend failure may pass if the call is simply made again."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    return isinstance(exc, OSError) and exc.errno in _RETRYABLE_ERRNOS
