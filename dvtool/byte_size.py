"""Byte sizes as users and table properties spell them: `268435456`, `256MB`, `1GiB`, `512k`.

One reading for the CLI's size options and for properties such as `delta.targetFileSize`
(which Databricks documents as "size in bytes or higher units, e.g. 100mb"). As in Spark's
`byteStringAsBytes`, every unit is a power of 1024 and case does not matter: `k`/`kb`/`KiB`
are 1024 bytes, `m`/`mb`/`MiB` 1024**2, then `g`, `t`, `p`. A number without a unit is bytes.
"""

from __future__ import annotations

import re
from decimal import Decimal

_UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
# A number, then `b`, or a unit letter with an optional `b` or `ib` (`k`, `kb`, `KiB`).
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:([kmgtp])(?:i?b)?|b)?\s*", re.IGNORECASE)


def parse_byte_size(text: str) -> int:
    """The number of bytes `text` names; ValueError, saying what is accepted, if none.

    A fraction is allowed with a unit (`1.5GB`) and rounded down to whole bytes.
    """
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a size: use bytes or a unit, e.g. 268435456, 256MB, 1GiB"
        )
    number, unit = Decimal(match.group(1)), (match.group(2) or "").lower()
    if not unit and number != number.to_integral_value():
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(number * 1024 ** _UNITS[unit])
