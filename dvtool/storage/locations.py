"""Locations and the path forms of the Delta log: parsing, joining and percent-coding.

A location is what `Storage` takes and returns (an absolute POSIX path on local disk,
`scheme://bucket/key` elsewhere); the log holds RFC 2396 URIs, relative or absolute. These
pure string functions turn one into the other, so that the rules for schemes, `file:` URIs
and decoding exactly once live in one place and need no filesystem to test.
"""

from __future__ import annotations

import os
import string
import unicodedata
from collections.abc import Callable
from urllib.parse import quote, unquote

from dvtool.errors import StorageError
from dvtool.storage.schemes import scheme_of

# What Hadoop's Path.toUri leaves unencoded in a path (java.net.URI's legal path chars).
_LOG_SAFE = frozenset(string.ascii_letters + string.digits + "-_.!~*'()" + ",;:$&+=" + "/@")
_LOG_QUOTED_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cs"})


def file_uri_to_path(uri: str) -> str:
    """The local absolute path of a `file:` URI (`file:/x`, `file:///x`, `file://localhost/x`)."""
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            raise StorageError(f"{uri}: file URIs with a host ({host}) are not supported")
        rest = slash + path
    if not rest.startswith("/"):
        raise StorageError(f"{uri}: a file URI needs an absolute path")
    return local_abspath(unquote(rest))


def local_abspath(path: str) -> str:
    """An absolute, normalized POSIX path (no symlinks resolved)."""
    return os.path.abspath(os.path.expanduser(path)).replace(os.sep, "/")


def join_location(root: str, relative: str) -> str:
    """The location of `relative` (a `/`-separated path) under the location `root`."""
    relative = relative.lstrip("/")
    if not relative:
        return root
    return root + relative if root.endswith("/") else f"{root}/{relative}"


def path_under(path: str, root: str) -> str | None:
    """The `/`-separated path of `path` under `root` ("" for the root), or None."""
    if path == root:
        return ""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def resolve_log_path(path_in_log: str, join_to_root: Callable[[str], str]) -> str:
    """The location of a path from the Delta log: a URI, percent-decoded exactly once.

    Relative paths are joined to the root with `join_to_root`; absolute URIs are kept
    (`file:` URIs become local paths); absolute POSIX paths are kept.
    """
    scheme = scheme_of(path_in_log)
    if scheme == "file":
        return file_uri_to_path(path_in_log)
    decoded = unquote(path_in_log)
    if scheme is not None or decoded.startswith("/"):
        return decoded
    return join_to_root(decoded)


def encode_for_log(relative: str) -> str:
    """`relative` percent-encoded for the Delta log the way Delta Spark writes paths.

    Characters java.net.URI allows in a path stay (letters, digits, `-_.!~*'()`,
    `,;:$&+=`, `/`, `@`, and non-ASCII letters); everything else, `%` and space included,
    becomes UTF-8 `%XX`. A `:` before the first `/` is encoded too, so the result never
    reads as a URI scheme.
    """
    head, sep, tail = relative.partition("/")
    return _encode_segment(head).replace(":", "%3A") + sep + _encode_segment(tail)


def _encode_segment(text: str) -> str:
    """Percent-encode what java.net.URI would quote in a path."""
    return "".join(ch if _log_safe(ch) else quote(ch, safe="") for ch in text)


def _log_safe(ch: str) -> bool:
    """Whether Hadoop's Path.toUri leaves `ch` as is."""
    if ch in _LOG_SAFE:
        return True
    return ord(ch) > 127 and unicodedata.category(ch) not in _LOG_QUOTED_CATEGORIES
