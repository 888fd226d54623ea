"""Which `*.metadata.json` is an Iceberg table's current one, when it has no catalog.

A path-based (Hadoop) table keeps `metadata/vN.metadata.json` and a `version-hint.text`
naming N (some writers write the file name itself); a table a catalog wrote keeps
`NNNNN-<uuid>.metadata.json`, numbered by the catalog's commits. Without a catalog the
current metadata is the hinted one, else the highest-numbered one; two files of the same
number (two writers racing without a catalog) are ambiguous, and the user must name one or
use the catalog. A hint that is unreadable or names a missing file is passed over for the
listing, as Iceberg Java's Hadoop tables do; a hint that lags (a commit whose hint update
was lost: Java rewrites the hint after creating `vN+1`) is walked forward while the next
`vN+1` exists, as Java's `HadoopTableOperations.refresh` does. Pure: the caller lists the
folder and reads the hint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dvtool.errors import TableNotFoundError, UsageError

METADATA_SUFFIX = ".metadata.json"
VERSION_HINT = "version-hint.text"
# vN.metadata.json (Hadoop tables), NNNNN-<uuid>.metadata.json (catalogs); compressed
# variants (`.gz.metadata.json`, `.metadata.json.gz`) keep the leading number.
_NUMBERED = re.compile(r"^(?:v(\d+)|(\d+)-[0-9a-fA-F-]+)(?:\.gz)?\.metadata\.json(?:\.gz)?$")


def metadata_number(name: str) -> int | None:
    """The version number a metadata file name carries, or None for another name."""
    match = _NUMBERED.match(name)
    if match is None:
        return None
    return int(match[1] if match[1] is not None else match[2])


def hinted_name(hint: str) -> str | None:
    """The metadata file a `version-hint.text` names (a number N or a file name); None for
    anything else, which Iceberg Java's Hadoop tables answer by listing, as we do."""
    text = hint.strip()
    if text.endswith(METADATA_SUFFIX):
        return text.rsplit("/", 1)[-1]
    return f"v{int(text)}{METADATA_SUFFIX}" if text.isdigit() else None


def current_metadata_name(names: Iterable[str], hint: str | None, where: str) -> str:
    """The current metadata file among `names` (the files of `metadata/`), by the hint or
    else the highest number; `where` names the folder in errors."""
    present = set(names)
    name = hinted_name(hint) if hint is not None else None
    if name is not None and name in present:
        return _newer_versions(name, present)
    numbered = sorted(
        ((n, name) for name in present if (n := metadata_number(name)) is not None),
        reverse=True,
    )
    if not numbered:
        raise TableNotFoundError(f"no *{METADATA_SUFFIX} in {where}")
    if len(numbered) > 1 and numbered[0][0] == numbered[1][0]:
        raise UsageError(
            f"{where} holds two metadata files numbered {numbered[0][0]} "
            f"({numbered[1][1]}, {numbered[0][1]}): name the one to use, or open the table "
            "through its catalog (--catalog)"
        )
    return numbered[0][1]


def _newer_versions(name: str, present: set[str]) -> str:
    """`vN.metadata.json` walked forward to the last `vN+1`, `vN+2`, ... present (gzip
    names too); other names as they are."""
    match = re.match(r"^v(\d+)\.", name)
    if match is None:
        return name
    version = int(match[1])
    while True:
        following = [
            f"v{version + 1}{suffix}"
            for suffix in (".metadata.json", ".gz.metadata.json", ".metadata.json.gz")
        ]
        found = [n for n in following if n in present]
        if not found:
            return name
        version, name = version + 1, found[0]
