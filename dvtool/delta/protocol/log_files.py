"""Names of files in `_delta_log` and the choice of files that make up a snapshot.

A snapshot of version v is built from the newest complete checkpoint at or below v, then the
commits after it up to v (some of which may be covered by log compaction files). This module
only reasons about names and versions; reading the files is the log reader's job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from dvtool.errors import LogError, VersionNotFoundError

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_UUID = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")
_COMPACTION = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


class LogFileKind(Enum):
    COMMIT = "commit"
    CLASSIC_CHECKPOINT = "classic checkpoint"
    MULTIPART_CHECKPOINT = "multi-part checkpoint"
    UUID_CHECKPOINT = "uuid checkpoint"
    COMPACTION = "log compaction"


@dataclass(frozen=True)
class LogFile:
    """One recognised file of `_delta_log`.

    `version` is the (end) version the file describes; `start_version` differs from it only
    for log compaction files. `part`/`parts` are set for multi-part checkpoints.
    """

    name: str
    kind: LogFileKind
    version: int
    start_version: int
    size: int = 0
    modification_time_ms: int | None = None
    part: int = 1
    parts: int = 1

    @property
    def is_checkpoint(self) -> bool:
        return self.kind in (
            LogFileKind.CLASSIC_CHECKPOINT,
            LogFileKind.MULTIPART_CHECKPOINT,
            LogFileKind.UUID_CHECKPOINT,
        )


def commit_name(version: int) -> str:
    """The file name of the JSON commit for `version`."""
    return f"{version:020d}.json"


def parse_log_name(
    name: str, size: int = 0, modification_time_ms: int | None = None
) -> LogFile | None:
    """Recognise a `_delta_log` file name; None for anything else (crc files, temp files)."""
    if m := _COMMIT.match(name):
        v = int(m[1])
        return LogFile(name, LogFileKind.COMMIT, v, v, size, modification_time_ms)
    if m := _CLASSIC.match(name):
        v = int(m[1])
        return LogFile(name, LogFileKind.CLASSIC_CHECKPOINT, v, v, size, modification_time_ms)
    if m := _MULTIPART.match(name):
        v, part, parts = int(m[1]), int(m[2]), int(m[3])
        kind = LogFileKind.MULTIPART_CHECKPOINT
        return LogFile(name, kind, v, v, size, modification_time_ms, part, parts)
    if m := _UUID.match(name):
        v = int(m[1])
        return LogFile(name, LogFileKind.UUID_CHECKPOINT, v, v, size, modification_time_ms)
    if m := _COMPACTION.match(name):
        start, end = int(m[1]), int(m[2])
        if end <= start:
            return None
        return LogFile(name, LogFileKind.COMPACTION, end, start, size, modification_time_ms)
    return None


@dataclass(frozen=True)
class LogSegment:
    """The files to replay for one snapshot version.

    `checkpoint` holds the parts of the chosen checkpoint (empty when replay starts at 0);
    `deltas` are commit and compaction files after it, oldest first, covering every version
    in (checkpoint version, version] exactly once.
    """

    version: int
    checkpoint: tuple[LogFile, ...] = ()
    deltas: tuple[LogFile, ...] = ()
    commits: tuple[LogFile, ...] = field(default=(), compare=False)

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint[0].version if self.checkpoint else None


def complete_checkpoints(files: Iterable[LogFile]) -> dict[int, tuple[LogFile, ...]]:
    """Complete checkpoints by version; multi-part checkpoints with missing parts are dropped.

    When a version has several complete checkpoints, prefer UUID-named over classic over
    multi-part (any is valid; a single file is cheaper to read).
    """
    by_version: dict[int, dict[str, list[LogFile]]] = {}
    for f in files:
        if not f.is_checkpoint:
            continue
        key = f.kind.value if f.kind != LogFileKind.MULTIPART_CHECKPOINT else f"mp{f.parts}"
        by_version.setdefault(f.version, {}).setdefault(key, []).append(f)
    chosen: dict[int, tuple[LogFile, ...]] = {}
    for version, groups in by_version.items():
        for key in (LogFileKind.UUID_CHECKPOINT.value, LogFileKind.CLASSIC_CHECKPOINT.value):
            if key in groups:
                chosen[version] = (sorted(groups[key], key=lambda f: f.name)[0],)
                break
        else:
            for parts in groups.values():
                numbers = {p.part for p in parts}
                if numbers == set(range(1, parts[0].parts + 1)):
                    chosen[version] = tuple(sorted(parts, key=lambda f: f.part))
                    break
    return chosen


def plan_segment(
    files: Sequence[LogFile],
    version: int | None = None,
    skip_checkpoints: Iterable[int] = (),
) -> LogSegment:
    """Choose the checkpoint and deltas that rebuild `version` (latest when None).

    `skip_checkpoints` lists checkpoint versions that turned out unreadable, so the caller can
    fall back to an older checkpoint or to replay from version 0.
    """
    commits = sorted((f for f in files if f.kind == LogFileKind.COMMIT), key=lambda f: f.version)
    checkpoints = complete_checkpoints(files)
    for v in skip_checkpoints:
        checkpoints.pop(v, None)
    latest = _latest_version(commits, checkpoints)
    if version is None:
        version = latest
    elif version > latest:
        raise VersionNotFoundError(
            f"version {version} does not exist; the latest version is {latest}",
            hint="Pass a --version between the oldest available version and the latest.",
        )
    usable = [v for v in checkpoints if v <= version]
    cp_version = max(usable) if usable else None
    start = 0 if cp_version is None else cp_version + 1
    needed = [c for c in commits if start <= c.version <= version]
    try:
        _check_contiguous(needed, start, version, cp_version)
    except LogError as e:
        raise _with_incomplete_checkpoint(e, files, start, version) from None
    deltas = _use_compactions(files, needed, start, version)
    cp = checkpoints[cp_version] if cp_version is not None else ()
    return LogSegment(version, cp, tuple(deltas), tuple(needed))


def _latest_version(commits: list[LogFile], checkpoints: dict[int, tuple[LogFile, ...]]) -> int:
    candidates = [c.version for c in commits] + list(checkpoints)
    if not candidates:
        raise LogError("the _delta_log holds no commit or checkpoint")
    return max(candidates)


def missing_checkpoint_parts(files: Iterable[LogFile]) -> dict[int, list[str]]:
    """The file names missing from each incomplete multi-part checkpoint, by version."""
    parts: dict[tuple[int, int], set[int]] = {}
    for f in files:
        if f.kind == LogFileKind.MULTIPART_CHECKPOINT:
            parts.setdefault((f.version, f.parts), set()).add(f.part)
    missing: dict[int, list[str]] = {}
    for (version, total), present in sorted(parts.items()):
        absent = [n for n in range(1, total + 1) if n not in present]
        if absent:
            missing.setdefault(version, []).extend(
                f"{version:020d}.checkpoint.{n:010d}.{total:010d}.parquet" for n in absent
            )
    return missing


def _with_incomplete_checkpoint(
    error: LogError, files: Sequence[LogFile], start: int, version: int
) -> LogError:
    """`error` (commits missing) naming the part files of a multi-part checkpoint in the
    range that would have covered them: a lost part is the likelier root cause."""
    incomplete = {
        v: names for v, names in missing_checkpoint_parts(files).items() if start <= v <= version
    }
    if not incomplete:
        return error
    v = max(incomplete)
    names = ", ".join(incomplete[v])
    return LogError(
        f"{error.message}; the multi-part checkpoint of version {v}, which would cover them, "
        f"is incomplete (missing {names})",
        hint="Restore the missing checkpoint part (or the commits before it).",
    )


def _check_contiguous(
    commits: list[LogFile], start: int, version: int, cp_version: int | None
) -> None:
    expected = start
    for c in commits:
        if c.version != expected:
            raise LogError(
                f"the Delta log has a gap: commit {expected:020d}.json is missing "
                f"(found {c.name} next)",
                hint="The log is incomplete; restore the missing commit file.",
            )
        expected += 1
    if expected != version + 1:
        what = f"after checkpoint {cp_version}" if cp_version is not None else "from version 0"
        raise LogError(
            f"cannot rebuild version {version}: commits {expected}..{version} {what} are missing"
        )


def _use_compactions(
    files: Sequence[LogFile], commits: list[LogFile], start: int, version: int
) -> list[LogFile]:
    """Replace runs of commits by log compaction files, greedily taking the widest first."""
    compactions = sorted(
        (
            f
            for f in files
            if f.kind == LogFileKind.COMPACTION
            and start <= f.start_version
            and f.version <= version
        ),
        key=lambda f: (f.start_version, -f.version),
    )
    by_version = {c.version: c for c in commits}
    result: list[LogFile] = []
    v = start
    while v <= version:
        best = next((f for f in compactions if f.start_version == v), None)
        if best is not None:
            result.append(best)
            v = best.version + 1
        else:
            result.append(by_version[v])
            v += 1
    return result


def monotonic_times(times: Iterable[int | None]) -> list[int]:
    """Modification times made strictly increasing (a time not after its predecessor's
    counts as the predecessor's + 1 ms), as Delta orders commits; unknown times count as 0."""
    out: list[int] = []
    previous = -1
    for t in times:
        previous = max(t or 0, previous + 1)
        out.append(previous)
    return out
