"""dvtool locations as the Hadoop paths Spark reads, and the strings Spark reports back.

Only scans need this (rewrites read and write through dvtool's storage layer on the
executors). Pure string code: no pyspark, no IO. dvtool locations become Hadoop paths:

    /abs/path (local)                -> file:///abs/path  (raw: no percent-encoding)
    s3://bucket/key, s3a://...       -> s3a://bucket/key
    gs://bucket/key, gcs://...       -> gs://bucket/key
    abfs[s]://container@account.dfs.core.windows.net/p -> abfss://container@account.../p
    abfs[s]:// or az://container/p   -> abfss://container@<account_name>.dfs.core.windows.net/p
                                        (`account_name` from the storage options)
    memory://...                     -> refused (Spark cannot see this process's memory)

Hadoop paths are not URIs: characters such as space, `%` or `#` are passed as they are.
Spark would expand glob characters (`{}[]*?\\`), so classic sessions read with the
`__globPaths__=false` option; Spark Connect 4.x does not honour that option (its server
hands option keys on lower-cased), so there every glob character is escaped with a
backslash instead (`glob_escaped`; a path holding both a glob character and `:` cannot be
read through Connect: Hadoop's globber rejects it).

Spark reports files back as URI strings, percent-encoded (`file:/tmp/a%20b/x` for
`/tmp/a b/x`) and in two spellings of local paths (`inputFiles()` gives `file:///...`,
`_metadata.file_path` gives `file:/...`). So the engine asks Spark which files it will read
(`inputFiles()`), matches each to a location by comparing `spark_path_key`s -
percent-decoded, canonical forms (scheme aliases folded, `file:` slashes collapsed, Unicode
NFC) - and joins on the exact strings Spark reports, in both `file:` spellings
(`spellings`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from dvtool.errors import UsageError
from dvtool.storage.schemes import hadoop_scheme, split_scheme

_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")


def hadoop_path(location: str, options: Mapping[str, Any] | None = None) -> str:
    """The Hadoop path Spark reads for a dvtool location (see the module docstring)."""
    split = split_scheme(location)
    if split is None:
        if not location.startswith("/"):
            raise UsageError(f"the Spark engine needs absolute locations, not {location}")
        return "file://" + location
    scheme, rest = split
    hadoop = hadoop_scheme(scheme)
    if hadoop == "file":
        return "file:///" + rest.lstrip("/")
    if hadoop is None or not rest.startswith("//"):
        raise UsageError(f"the Spark engine cannot read {scheme}:// tables ({location})")
    rest = rest[2:]
    if hadoop in ("s3a", "gs"):
        return f"{hadoop}://{rest}"
    if hadoop == "abfss":
        authority, slash, path = rest.partition("/")
        if "@" not in authority:
            from dvtool.storage.storage_options import resolve_storage_options

            # Any spelling of the account (AZURE_STORAGE_ACCOUNT_NAME, account_name, ...).
            account = resolve_storage_options("abfs", options or {}).get("account_name")
            if not account:
                raise UsageError(
                    f"the Spark engine reads {location} as abfss://{authority}@ACCOUNT"
                    ".dfs.core.windows.net/...; give the account with "
                    "--storage-option account_name=ACCOUNT or use that form of URI"
                )
            authority = f"{authority}@{account}.dfs.core.windows.net"
        return f"abfss://{authority}{slash}{path}"
    raise UsageError(f"the Spark engine cannot read {scheme}:// tables ({location})")


def glob_escaped(path: str) -> str:
    """`path` with every glob character backslash-escaped (for Spark Connect, which expands
    globs in the paths it reads)."""
    return _GLOB_CHARS.sub(r"\\\1", path)


def spark_path_key(path: str, *, encoded: bool = True) -> str:
    """A canonical form of a path as Spark reports it (`encoded`) or a raw Hadoop path.

    Percent-decoded (reported paths are URI strings), scheme aliases folded
    (s3 -> s3a, gcs -> gs, abfs/az -> abfss), `file:` slashes collapsed, Unicode NFC.
    """
    text = unquote(path) if encoded else path
    split = split_scheme(text)
    if split is None:
        text = "file:/" + text.lstrip("/")
    else:
        scheme, rest = split
        if scheme == "file":
            rest = rest.lstrip("/")
            if rest.startswith("localhost/"):
                rest = rest[len("localhost/") :]
            text = "file:/" + rest
        else:
            text = f"{hadoop_scheme(scheme) or scheme}:{rest}"
    return unicodedata.normalize("NFC", text)


def spellings(reported: str) -> list[str]:
    """The exact strings Spark may use for one file: `file:///x` and `file:/x` are both seen."""
    out = [reported]
    if reported.startswith("file:///"):
        out.append("file:/" + reported[len("file:///") :])
    elif reported.startswith("file:/") and not reported.startswith("file://"):
        out.append("file:///" + reported[len("file:/") :])
    return out
