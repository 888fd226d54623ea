"""Canonical spellings of the file paths in the Delta log, to key logical files on.

The log can name one data file in several spellings: relative to the table root or absolute,
as `file:/t/x`, `file:///t/x` or `/t/x`, with a character percent-encoded (`%20`, `%3A`) or
not. Delta Spark keys its log replay on `DeltaLog.canonicalizePath` (a Hadoop `Path` of the
URI, qualified against the table's filesystem, relative paths resolved against the root), so
an `add` in one spelling and a `remove` in another are the same file. The canonical key here:

1. A *plain* path, relative with no `%`, no `:` and no leading `/`, is its own key. Delta
   writers spell nearly every path so, and checking for it costs next to nothing.
2. Any other path is an RFC 2396 URI reference, percent-decoded exactly once (a `%25` in the
   log is a literal `%`, as `Storage.resolve` reads it):
   - a `file:` URI (`file:/x`, `file:///x`, `file://localhost/x`) is the local file `/x`;
   - a URI with another scheme keeps it (lower-cased) and its authority (`s3://bucket/x`);
   - an absolute path without a scheme is on the table's filesystem: it takes the root's
     scheme and authority (Hadoop's `makeQualified`);
   - a relative path is under the root: its key is the decoded path.
3. An absolute location under the root becomes its path relative to the root; any other
   location stays absolute, spelled `scheme:...` (local files as `file:/x`). A relative key
   that would read as a URI (`xy:z`, from `xy%3Az`) is written `./xy:z`, so that no relative
   key can equal an absolute one.

Dot segments (`.`, `..`) and doubled slashes are kept as written: Delta writers never write
them, and writing commands refuse `..` (`unsafe_path_reason`). A scheme is two or more
characters, as for `Storage.resolve` (a one-letter "scheme" reads as a drive, not a URI).

Keys are only compared with each other: the tables of a snapshot keep the paths as logged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_LOCAL_HOSTS = frozenset({"", "localhost"})


def is_plain(path: str) -> bool:
    """Whether `path` is its own canonical key: relative, no `%`, no `:`, no leading `/`."""
    return "%" not in path and ":" not in path and not path.startswith("/")


@dataclass(frozen=True)
class CanonicalRoot:
    """A table root in canonical spelling, which canonicalizes the paths logged under it.

    `prefix` is the root's absolute location with one trailing `/` (`file:/t/`,
    `s3://bucket/t/`); `qualifier` is what an absolute path without a scheme is prefixed
    with to become a location on the root's filesystem (`file:`, `s3://bucket`).
    """

    prefix: str
    qualifier: str

    @classmethod
    def parse(cls, root: str) -> CanonicalRoot:
        """The canonical form of a table root as `Storage.root` spells it, or a URI.

        A `file:` root is a URI and is percent-decoded; a plain path or another scheme's
        location is taken literally, as `Storage` takes it. A relative root (no scheme, no
        leading `/`) has no filesystem to qualify against: only relative paths fall in it.
        """
        scheme = _scheme_of(root)
        if scheme == "file":
            location, qualifier = _file_location(root), "file:"
        elif scheme is not None:
            location = scheme + root[len(scheme) :]
            qualifier = _scheme_and_authority(location, scheme)
        elif root.startswith("/"):
            location, qualifier = "file:" + root, "file:"
        else:
            location, qualifier = root, ""
        return cls(location.rstrip("/") + "/", qualifier)

    def key(self, path: str) -> str:
        """The canonical key of `path` as logged (see the module docstring)."""
        if is_plain(path):
            return path
        location = self._absolute_location(path)
        if location is None:
            return _relative_key(unquote(path))
        relative = location[len(self.prefix) :]
        if location.startswith(self.prefix) and relative and not relative.startswith("/"):
            return _relative_key(relative)
        return location

    def _absolute_location(self, path: str) -> str | None:
        """The decoded absolute location `path` names, or None for a relative path."""
        scheme = _scheme_of(path)
        if scheme == "file":
            return _file_location(path)
        if scheme is not None:
            return scheme + unquote(path[len(scheme) :])
        decoded = unquote(path)
        return self.qualifier + decoded if decoded.startswith("/") else None


def canonical_path(path: str, root: str) -> str:
    """The canonical key of `path` as logged in the table at `root` (module docstring).

    For one-off use; replay parses the root once with `CanonicalRoot.parse`.
    """
    return CanonicalRoot.parse(root).key(path)


def _relative_key(relative: str) -> str:
    """The key of a decoded path under the root; `./` keeps one like `x:y` from reading as
    the absolute location of a URI with scheme `x`."""
    return "./" + relative if _scheme_of(relative) is not None else relative


def _scheme_of(text: str) -> str | None:
    """The lower-cased URI scheme of `text`, or None (a one-letter drive is no scheme)."""
    match = _SCHEME_RE.match(text)
    if match is None or len(match.group(1)) < 2:
        return None
    return match.group(1).lower()


def _file_location(uri: str) -> str:
    """A `file:` URI as `file:/decoded/path`; a remote host stays `file://host/...`."""
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        host, slash, tail = rest[2:].partition("/")
        if host.lower() not in _LOCAL_HOSTS:
            return f"file://{host}{unquote(slash + tail)}"
        rest = slash + tail
    return "file:" + unquote(rest)


def _scheme_and_authority(location: str, scheme: str) -> str:
    """`scheme://authority` of a location (`s3://bucket`), or `scheme:` without authority."""
    rest = location[len(scheme) + 1 :]
    if not rest.startswith("//"):
        return scheme + ":"
    return f"{scheme}://{rest[2:].partition('/')[0]}"
