"""The storage backends: which URI schemes work, and how their filesystems are made.

One table maps each scheme dvtool accepts to fsspec's protocol, the backend package that
implements it and the dvtool extra that installs it. Opening a table root checks that the
backend package is installed (saying what to install if not), turns the CLI's storage
options into the backend's keyword arguments (`storage_options`, against the parameters of
the installed backend class) and builds the filesystem; a backend that refuses the
arguments (TypeError, ValueError) is a `UsageError` naming the options, not a crash.
Whether the installed backend can create a file only if it is absent (the conditional PUT
commits rely on) is a property of the backend's version, so it is checked here too.

A local root without storage options gets `LocalFiles` (`local_files`), which needs no
fsspec: importing fsspec would be most of a small local command's start-up. With options a
local root gets fsspec's own local filesystem, which takes them (`auto_mkdir`). This is
the only module of the storage layer that imports fsspec, and only inside the functions
that open an fsspec filesystem.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from dvtool.errors import DvtoolError, StorageError, UsageError
from dvtool.storage.failures import one_line
from dvtool.storage.local_files import LocalFiles
from dvtool.storage.locations import file_uri_to_path, local_abspath
from dvtool.storage.schemes import SCHEMES, scheme_of
from dvtool.storage.storage_options import backend_parameters, resolve_storage_options

T = TypeVar("T")

# Oldest package versions whose fsspec create mode is a server-side conditional write.
_CREATE_ONLY_REQUIRES: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = {
    "s3": (("s3fs", (2024, 12, 0)), ("botocore", (1, 35, 21))),
    "gs": (("gcsfs", (2024, 12, 0)),),
    "abfs": (("adlfs", (2025, 8, 0)),),
}


@dataclass(frozen=True)
class TableFilesystem:
    """The filesystem of a table root, and the root as fsspec and the user spell it."""

    fs: Any
    """fsspec's filesystem, or for a local root without options the `LocalFiles` subset."""
    root_path: str
    """fsspec's path of the root (an absolute POSIX path on local disk)."""
    scheme: str
    """The root's scheme as given (`file` for a plain path), a key of `SCHEMES`."""
    authority: str = ""
    """The bucket or container as the root's URI spells it ("" on local disk)."""


def open_table_filesystem(uri: str, options: Mapping[str, str]) -> TableFilesystem:
    """The filesystem of the table at `uri` (a local path or a URI), with CLI options.

    UsageError for an unknown scheme or storage options the backend does not take;
    StorageError for a backend package that is not installed, a filesystem that cannot be
    set up, or an object-store URI without a bucket.
    """
    scheme = scheme_of(uri) or "file"
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise UsageError(f"unsupported storage scheme {scheme}:// in {uri}; use {known}")
    if scheme == "file":
        root = local_abspath(file_uri_to_path(uri) if scheme_of(uri) else uri)
        if not options:
            return TableFilesystem(LocalFiles(), root, "file")
        kwargs = fsspec_options("file", options)
        fs = _make_fs(uri, options, lambda: _fsspec_local_filesystem(kwargs))
        return TableFilesystem(fs, root, "file")
    _require_backend(uri, scheme)
    kwargs = fsspec_options(SCHEMES[scheme].protocol, options)
    fs, path = _make_fs(uri, options, lambda: _fsspec_url_to_fs(uri, kwargs))
    if not path.strip("/"):
        raise StorageError(f"{uri} names no bucket or container; give scheme://bucket/path")
    return TableFilesystem(fs, path.rstrip("/") or "/", scheme, urlsplit(uri).netloc)


def fsspec_options(protocol: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `protocol`'s fsspec backend for the CLI's storage options,
    checked against the installed backend class (see `storage_options`); UsageError for
    an option it does not take. The backend package must be installed."""
    if not options:
        return {}
    return resolve_storage_options(protocol, options, backend_parameters(_fsspec_class(protocol)))


def create_only_problem(protocol: str) -> str | None:
    """Why the installed backend cannot create files exclusively, or None if it can."""
    import importlib.metadata  # local: ~13 ms, and only object stores' commits need it

    for package, minimum in _CREATE_ONLY_REQUIRES.get(protocol, ()):
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return f"{package} is not installed"
        if _version_tuple(installed) < minimum:
            wanted = ".".join(map(str, minimum))
            return f"{package} {installed} is older than {wanted}"
    return None


def _require_backend(uri: str, scheme: str) -> None:
    """Import the backend package of `scheme`, or say how to install it."""
    package, extra = SCHEMES[scheme].package, SCHEMES[scheme].extra
    if package is None:
        return
    try:
        importlib.import_module(package)
    except ImportError as exc:
        raise StorageError(
            f"{uri}: {scheme}:// tables need the {package} package, which is not installed "
            f"({one_line(exc)})",
            hint=f"Install it: pip install {package}  (or: pip install 'dvtool[{extra}]')",
        ) from exc


def _fsspec_class(protocol: str) -> type:
    """fsspec's filesystem class of `protocol` (fsspec and the backend imported only now)."""
    import fsspec

    cls: type = fsspec.get_filesystem_class(protocol)
    return cls


def _fsspec_local_filesystem(kwargs: Mapping[str, Any]) -> Any:
    """fsspec's local filesystem with storage options (fsspec imported only now)."""
    import fsspec

    return fsspec.filesystem("file", **kwargs)


def _fsspec_url_to_fs(uri: str, kwargs: Mapping[str, Any]) -> tuple[Any, str]:
    """fsspec's filesystem of `uri` and fsspec's path of it (fsspec imported only now)."""
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(uri, **kwargs)
    return fs, str(path)


def _make_fs(uri: str, options: Mapping[str, Any], make: Callable[[], T]) -> T:
    """Call `make()`, turning a failure to set up the filesystem into a dvtool error: a
    UsageError naming the options if the backend refused their values (TypeError,
    ValueError; KeyError: s3fs's `key` and `username` both given), a StorageError
    otherwise."""
    try:
        return make()
    except DvtoolError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        if not options:
            raise StorageError(f"cannot open storage for {uri}: {one_line(exc)}") from exc
        keys = ", ".join(options)
        raise UsageError(
            f"cannot open storage for {uri} with --storage-option {keys}: {one_line(exc)}",
            hint='Check those options\' values (README "Storage options").',
        ) from exc
    except Exception as exc:
        raise StorageError(f"cannot open storage for {uri}: {one_line(exc)}") from exc


def _version_tuple(version: str) -> tuple[int, ...]:
    """The leading numeric parts of a version string: '2024.12.0.post1' -> (2024, 12, 0)."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])
