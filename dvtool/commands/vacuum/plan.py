"""The deletion plan of `dvtool vacuum`: each file it deletes, with its size and the reason.

The reasons are the categories a user sees in the dry-run list and the JSON document:
data files no log action names (orphans), data files of expired tombstones, DV files no
action names, change data files past retention, and temp files of writers that died.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

ORPHAN_DATA = "orphan data file"
EXPIRED_TOMBSTONE = "expired tombstone"
ORPHAN_DV = "orphan DV file"
EXPIRED_CHANGE_DATA = "expired change data"
STALE_TEMP_FILE = "stale temp file"

# DV files as Delta writers name them (`deletion_vector_<uuid>.bin`): an unnamed one is an
# orphan DV file rather than an orphan data file.
DV_FILE_NAME = re.compile(
    r"^deletion_vector_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.bin$"
)

# dvtool's own temp files (`Storage`, data file writes): a process killed mid-write leaves one.
TEMP_FILE_NAME = re.compile(r"^\.tmp-[0-9a-f]{32}\.dvtool$")


@dataclass(frozen=True)
class VacuumFile:
    """One file to delete: its path under the table root (as on storage), size and reason."""

    path: str
    size: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
