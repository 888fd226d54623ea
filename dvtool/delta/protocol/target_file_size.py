"""The target size of a table's data files: what compaction packs files up to, and so the
size below which a file counts as small.

One definition for compaction (`dvtool optimize`, `dvtool maintain`) and the health gate
`inspect --check max-small-files`: the table property `delta.targetFileSize` (bytes or units,
e.g. `134217728` or `128mb`, read by `dvtool.byte_size`), else 256 MiB; a value of 0 or
less means the default. A value that is not a size is a UsageError naming the property.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvtool.byte_size import parse_byte_size
from dvtool.errors import UsageError

DEFAULT_TARGET_SIZE = 256 * 1024 * 1024
TARGET_SIZE_PROPERTY = "delta.targetFileSize"


def target_file_size(configuration: Mapping[str, str]) -> int:
    """The table's target file size in bytes (`delta.targetFileSize`, else 256 MiB)."""
    configured = configuration.get(TARGET_SIZE_PROPERTY)
    if not configured:
        return DEFAULT_TARGET_SIZE
    try:
        size = parse_byte_size(configured)
    except ValueError as e:
        raise UsageError(
            f"the table property {TARGET_SIZE_PROPERTY}: {e}",
            hint="Pass --target-size SIZE, or set the property to a size such as 128mb.",
        ) from None
    return size if size > 0 else DEFAULT_TARGET_SIZE
