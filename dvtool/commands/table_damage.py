"""Damage a rewrite meets, said as damage: what it means for the table and what to do.

`delete` and `optimize` (and the purges of `downgrade`, `generate-manifest` and `maintain`,
which run `optimize`) read the data files and deletion vectors the log names. When one is
missing or corrupt, the storage layer and the DV store report the file (`file not found`,
`deletion vector checksum mismatch`); a user also needs to hear that the table is damaged
and how to find and repair all of it, which only the command can say: a missing file in
general may be a typo, a data file the log names that is missing is damage.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator

from dvtool.errors import DAMAGE_HINT, DeletionVectorError, FileMissingError


@contextlib.contextmanager
def explain_damage(table: str) -> Iterator[None]:
    """Re-raise a missing data file (`FileMissingError` outside `_delta_log`) as damage,
    and give a corrupt or missing DV (`DeletionVectorError`) the hint to repair it.

    `table` is the table root, named in the hint (`dvtool inspect TABLE --verify`).
    """
    hint = DAMAGE_HINT.format(table=shlex.quote(table))
    try:
        yield
    except DeletionVectorError as e:
        e.hint = e.hint or hint
        raise
    except FileMissingError as e:
        if "/_delta_log/" in e.location:
            raise  # a log file: the log reader says what that means
        raise FileMissingError(
            e.location,
            f"data file {e.location} is missing: the table's log names it, but storage "
            "has no such file",
            hint=hint,
        ) from e
