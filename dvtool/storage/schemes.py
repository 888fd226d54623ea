"""The URI schemes of table locations, in one table: what each means to fsspec, to pyarrow's
filesystems (Spark executors), to Hadoop (Spark's own reads), and what to install for it.

Every spelling a user may write is a key of `SCHEMES` (`s3a://` is S3 as Hadoop users write
it, `gcs://` Google Cloud Storage as fsspec also calls it, `abfss://` and `az://` Azure Data
Lake Storage Gen2); its `Scheme` names the canonical fsspec protocol (which is also dvtool's
`Storage.protocol` and the key of the storage option rules), the backend package and dvtool
extra that provide it, and the Hadoop scheme Spark reads it with (None: Spark cannot, as for
`memory://`, which lives in one process). `HADOOP_ONLY` holds the spellings Hadoop may
report for files that no user names a table with (`s3n://`). Pure: no IO, no imports of the
backends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Scheme:
    """What one URI scheme of a table location means to each backend."""

    protocol: str
    """The canonical fsspec protocol (`s3`, `gs`, `abfs`, `file`, `memory`)."""
    package: str | None
    """The fsspec backend package it needs (None: built into fsspec/dvtool)."""
    extra: str | None
    """The dvtool extra that installs that package."""
    hadoop: str | None
    """The Hadoop scheme Spark reads it with (None: Spark cannot reach it)."""
    label: str
    """How messages name tables of this protocol (`s3://`, `local`)."""
    backend: str
    """How messages name its backend (`s3fs`, `fsspec's LocalFileSystem`)."""


_FILE = Scheme("file", None, None, "file", "local", "fsspec's LocalFileSystem")
_MEMORY = Scheme("memory", None, None, None, "memory://", "fsspec's MemoryFileSystem")
_S3 = Scheme("s3", "s3fs", "s3", "s3a", "s3://", "s3fs")
_GCS = Scheme("gs", "gcsfs", "gcs", "gs", "gs://", "gcsfs")
_AZURE = Scheme("abfs", "adlfs", "azure", "abfss", "abfs://", "adlfs")

SCHEMES: dict[str, Scheme] = {
    "file": _FILE,
    "memory": _MEMORY,
    "s3": _S3,
    "s3a": _S3,
    "gs": _GCS,
    "gcs": _GCS,
    "abfs": _AZURE,
    "abfss": _AZURE,
    "az": _AZURE,
}
HADOOP_ONLY: dict[str, str] = {"s3n": "s3a"}
"""Spellings Hadoop reports that are no table scheme of dvtool's -> their Hadoop scheme."""

BY_PROTOCOL: dict[str, Scheme] = {s.protocol: s for s in SCHEMES.values()}

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)


def split_scheme(text: str) -> tuple[str, str] | None:
    """The lower-cased URI scheme of `text` and what follows its colon, or None (a path;
    a one-letter drive is no scheme)."""
    match = _SCHEME_RE.match(text)
    if match is None or len(match.group(1)) < 2:
        return None
    return match.group(1).lower(), match.group(2)


def scheme_of(text: str) -> str | None:
    """The lower-cased URI scheme of `text`, or None (a one-letter drive is no scheme)."""
    split = split_scheme(text)
    return None if split is None else split[0]


def hadoop_scheme(scheme: str) -> str | None:
    """The Hadoop scheme of a (lower-cased) URI scheme; None if Spark cannot reach it, or
    the scheme itself for one dvtool does not know."""
    known = SCHEMES.get(scheme)
    if known is not None:
        return known.hadoop
    return HADOOP_ONLY.get(scheme, scheme)
