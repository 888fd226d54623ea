"""Put-if-absent, the one atomic operation Delta commits need, chosen per backend.

Exactly one of several racing writers may create a commit file. Each backend gets there
differently: local disk links a temp file to the final name (see `local_disk`), memory://
uses fsspec's create mode under a process-wide lock, and object stores use fsspec's create
mode, which recent backend packages send as a conditional PUT. When the backend cannot
create exclusively, committing is refused unless the user accepted unsafe single-writer
commits; this module picks the strategy and enforces that rule.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from dvtool.errors import StorageError
from dvtool.storage import local_disk
from dvtool.storage.backends import create_only_problem

_MEMORY_LOCK = threading.Lock()


def exclusive_create(
    fs: Any,
    protocol: str,
    location: str,
    path: str,
    *,
    unsafe_single_writer: bool,
    holds_exactly: Callable[[bytes], bool],
) -> Callable[[bytes], bool]:
    """This backend's create-if-absent of `path`: True if it created the file, False if not.

    `holds_exactly(data)` tells whether the existing file has exactly `data`: a conditional
    PUT retried after its reply was lost finds our own object, which counts as created.
    Raises StorageError (now or when called) if the backend cannot create files exclusively
    and `unsafe_single_writer` is false.
    """
    refuse_unsafe = functools.partial(_refuse_unsafe, location, allowed=unsafe_single_writer)
    if protocol == "file":
        return functools.partial(local_disk.create_if_absent, path, refuse_unsafe=refuse_unsafe)
    if protocol == "memory":

        def create_in_memory(data: bytes) -> bool:
            with _MEMORY_LOCK:
                return _create_only(fs, path, data)

        return create_in_memory
    problem = create_only_problem(protocol)
    if problem is not None:
        refuse_unsafe(problem)
        return functools.partial(_unsafe_put_if_absent, fs, path)

    def conditional_put(data: bytes) -> bool:
        # The backend may retry a PUT whose reply it lost and then find our own object.
        return _create_only(fs, path, data) or holds_exactly(data)

    return conditional_put


def _create_only(fs: Any, path: str, data: bytes) -> bool:
    """fsspec's exclusive create; True if created, False if the file exists."""
    try:
        fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    return True


def _unsafe_put_if_absent(fs: Any, path: str, data: bytes) -> bool:
    """Exists-check then write: correct only while no one else writes the table."""
    if fs.exists(path):
        return False
    fs.pipe_file(path, data)
    return True


def _refuse_unsafe(location: str, problem: str, *, allowed: bool) -> None:
    """Raise unless the user accepted unsafe single-writer commits (`allowed`)."""
    if not allowed:
        raise StorageError(
            f"cannot commit safely to {location}: the backend cannot create files "
            f"exclusively ({problem})",
            hint="Upgrade the backend package (s3fs 2024.12+ with botocore 1.35.21+, "
            "gcsfs 2024.12+, adlfs 2025.8+): dvtool commits only with conditional writes.",
        )
