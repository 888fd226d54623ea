"""Shared test oracles: the golden tables and decoders written independently of dvtool.

The golden tables (`../shared/golden`, beside the repository) are read-only; CI always has
them, so tests that need them fail, never skip, when they are missing.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

GOLDEN = (Path(__file__).resolve().parents[1] / ".." / "shared" / "golden").resolve()
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def copy_golden(name: str, dest: Path) -> Path:
    """A writable copy of golden table `name` under `dest` (the originals are read-only)."""
    source = GOLDEN / name
    if not source.is_dir():
        raise AssertionError(f"golden table {source} is missing (CI provides ../shared/golden)")
    target = dest / name.replace("/", "__")
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def z85_uuid(text: str) -> str:
    """The UUID a 20-character Z85 `pathOrInlineDv` encodes (decoded here, not by dvtool)."""
    raw = b""
    for i in range(0, 20, 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + _Z85.index(ch)
        raw += struct.pack(">I", value)
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def dv_file(table: Path, dv: dict[str, Any]) -> Path:
    """The DV file of a `u` descriptor, derived as PROTOCOL.md says."""
    prefix, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
    return table / prefix / f"deletion_vector_{z85_uuid(encoded)}.bin"
