"""The soak's checks of the log and of what the operations reported (see scripts/soak.py):
`Findings` (the mismatches by check), the log's versions, txnIds and commits against the
successful operations and the versions that interrupted ones name (`check_log`,
`check_claims`), the log cleanup (`check_log_cleanup`) and the restores' `--timestamp`
resolutions and refusals (`check_restores`).

The checks of rows, against the replay model, are in soak_expected.py, which builds on
`Findings` and `option_value` here.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soak_log import VERSIONED_NAME, LogState, commit_times, vacuum_safe
from soak_ops import LITE_MISSING_VERSION, REFUSED_VERSION, RUNNING_VACUUM_MESSAGE, OpRecord
from soak_table import Setup

# -- checking -------------------------------------------------------------------------------


@dataclass
class Findings:
    """Mismatches (wrong results) by check: `log`, `log cleanup`, `deletes`, `restores`,
    `reads`, `final`, `time travel`.

    One wrong delete or restore makes every later read and the final table differ too; the
    summary prints the count per check and the first few of each, the first one being the
    cause.
    """

    mismatches: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def expect(self, ok: bool, check: str, message: str) -> None:
        if not ok:
            self.mismatches[check].append(message)

    @property
    def count(self) -> int:
        return sum(len(m) for m in self.mismatches.values())

    def print(self) -> None:
        counts = ", ".join(f"{check} {len(m)}" for check, m in self.mismatches.items())
        print(f"mismatches: {self.count}" + (f" ({counts})" if counts else ""))
        for check, messages in self.mismatches.items():
            for m in messages[:8]:
                print(f"  [{check}] {m}")
            if len(messages) > 8:
                print(f"  [{check}] ... {len(messages) - 8} more")


EXPECTED_OPERATIONS: dict[str, tuple[str, ...]] = {
    "delete": ("DELETE",),
    "purge": ("REORG",),
    "compact": ("OPTIMIZE",),
    "vacuum": ("VACUUM START", "VACUUM END"),
    "restore": ("RESTORE",),
    # These commit nothing: a checkpoint's `version` is the version it checkpoints, the log
    # cleanup only deletes, and a restore --dry-run reports no version.
    "checkpoint": (),
    "vacuum_log": (),
    "inspect": (),
}
CLEANUP_KINDS = ("checkpoint", "vacuum_log")


def reported_versions(record: OpRecord) -> list[int]:
    """The versions a successful operation says it committed."""
    r = record.result
    if record.kind in ("delete", "restore"):
        return [r["version"]] if r.get("version") is not None else []
    if record.kind in ("purge", "compact"):
        return list(r.get("versions") or [])
    if record.kind == "vacuum":
        return [v for v in (r.get("start_version"), r.get("end_version")) if v is not None]
    return []


def claimed_versions(record: OpRecord) -> list[int]:
    """The versions an operation says are its commits: what a successful one reported, what
    an interrupted one names in its message ("after committing versions 12, 13"), the earlier
    batches an optimize whose later batch conflicted names."""
    return reported_versions(record) if record.outcome == "ok" else list(record.claimed)


# Kinds that commit once: a signal after that commit landed must not stop them (exit 0).
SINGLE_COMMIT = ("delete", "restore")


def check_claims(record: OpRecord, infos: Mapping[int, dict[str, Any]], f: Findings) -> None:
    """An operation's versions are in order and commits of its kind; an interrupted one
    names versions only where it commits more than once, and an interrupted vacuum that
    committed VACUUM START also committed VACUUM END (FAILED) before it exited."""
    versions = claimed_versions(record)
    what = f"{record.kind} {' '.join(record.args)} ({record.outcome}"
    what += f" after {record.signal})" if record.signal_sent is not None else ")"
    f.expect(versions == sorted(set(versions)), "log", f"{what} named versions {versions}")
    for v in versions:
        operation = infos.get(v, {}).get("operation") if v in infos else "no commit at all"
        f.expect(
            operation in EXPECTED_OPERATIONS[record.kind],
            "log",
            f"{what} named version {v}, whose commit is {operation!r}",
        )
    if record.kind == "vacuum" and versions:
        operations = [infos.get(v, {}).get("operation") for v in versions]
        f.expect(
            operations[:2] == ["VACUUM START", "VACUUM END"][: len(operations)],
            "log",
            f"{what} named versions {versions}: {operations}",
        )
    if record.outcome != "interrupted" or not versions:
        return
    f.expect(
        record.kind not in SINGLE_COMMIT
        and ("--batch-size" in record.args or record.kind not in ("purge", "compact")),
        "log",
        f"{what} exited {record.exit_code} after committing {versions}: a command that "
        "commits once reports a landed commit and exits 0",
    )
    if record.kind == "vacuum":
        status = (infos.get(versions[-1], {}).get("operationParameters") or {}).get("status")
        f.expect(
            len(versions) == 2 and status == "FAILED",
            "log",
            f"vacuum stopped by {record.signal} named {versions}: expected VACUUM START and "
            f"VACUUM END (status FAILED), the last one's status is {status!r}",
        )


def option_value(args: Sequence[str], option: str) -> str | None:
    return args[args.index(option) + 1] if option in args else None


def check_log(state: LogState, setup: Setup, records: Sequence[OpRecord], f: Findings) -> None:
    """Contiguous versions from the oldest commit left, unique txnIds, commits == what the
    operations reported, and only expired log entries cleaned up."""
    infos = state.infos
    versions = sorted(infos)
    if not versions:
        f.expect(False, "log", "no commit left in _delta_log")
        return
    contiguous = versions == list(range(versions[0], versions[-1] + 1))
    f.expect(contiguous, "log", f"log versions not contiguous: {versions}")
    txns = Counter(i.get("txnId") for i in infos.values() if i.get("txnId"))
    dup = [t for t, n in txns.items() if n > 1]
    f.expect(not dup, "log", f"duplicate txnId in the log: {dup[:3]}")
    claimed: dict[int, OpRecord] = {}
    for record in records:
        check_claims(record, infos, f)
        for v in claimed_versions(record):
            f.expect(v not in claimed, "log", f"version {v} claimed by two operations")
            claimed[v] = record
        if record.outcome != "ok":
            continue
        if record.kind == "restore":
            dry = "--dry-run" in record.args
            f.expect(
                record.result.get("dry_run") is dry
                and (record.result.get("version") is None) is dry,
                "log",
                f"restore {' '.join(record.args)}: dry_run {record.result.get('dry_run')}, "
                f"version {record.result.get('version')}",
            )
    for v in versions:
        f.expect(
            v <= setup.version or v in claimed,
            "log",
            f"commit {v} ({infos[v].get('operation')}) claimed by no operation (reported by "
            "none that succeeded, named by none that was interrupted)",
        )
    check_log_cleanup(state, setup, records, f)


def check_log_cleanup(
    state: LogState, setup: Setup, records: Sequence[OpRecord], f: Findings
) -> None:
    """Only expired entries went: of versions before the setup checkpoint (the newest
    checkpoint older than the log retention), and only where the setup's log was aged. The
    setup checkpoint, its commit and every later commit stay; each cleanup's cutoff
    checkpoint is no newer; every checkpoint a checkpoint operation reported is still there."""
    ckpt = setup.checkpoint
    oldest = min(state.infos)
    f.expect(
        oldest <= ckpt,
        "log cleanup",
        f"the oldest commit left is v{oldest}: v{ckpt}..v{oldest - 1} are gone, but only "
        f"versions before the setup checkpoint v{ckpt} had expired",
    )
    for name in setup.checkpoint_files:
        f.expect(name in state.listing, "log cleanup", f"the setup checkpoint {name} is gone")
    why = "before the setup checkpoint" if setup.aged else "(nothing was aged on S3)"
    for name in sorted(setup.log_names - set(state.listing)):
        m = VERSIONED_NAME.match(name)
        f.expect(
            setup.aged > 0 and m is not None and int(m[1]) < ckpt,
            "log cleanup",
            f"{name} was deleted, but only entries {why} v{ckpt} had expired",
        )
    for r in records:
        if r.kind == "vacuum" and r.outcome == "refused":
            m = LITE_MISSING_VERSION.search(r.stderr_head)
            gone = int(m[1]) if m else None
            f.expect(
                gone is not None and gone not in state.infos and gone < ckpt,
                "log cleanup",
                f"vacuum {' '.join(r.args)} refused because v{gone} is no longer in the log, "
                f"but only versions before the setup checkpoint v{ckpt} may be cleaned up",
            )
        if r.outcome != "ok" or r.kind not in CLEANUP_KINDS:
            continue
        if r.kind == "checkpoint":
            for name in r.result.get("files") or []:
                f.expect(
                    name in state.listing,
                    "log cleanup",
                    f"checkpoint file {name} (a checkpoint operation wrote or found it) is gone",
                )
        cleanup = r.result.get("log_cleanup") if r.kind == "checkpoint" else r.result
        if not cleanup:
            continue
        cut = cleanup.get("cutoff_checkpoint")
        f.expect(
            cut is None or (setup.aged > 0 and cut <= ckpt),
            "log cleanup",
            f"{r.kind}: cutoff checkpoint v{cut}, but only the setup checkpoint v{ckpt} and "
            "older ones were old enough",
        )
        verb = "planned to delete" if cleanup.get("dry_run") else "deleted"
        for entry in cleanup.get("files") or []:
            v = entry.get("version")
            f.expect(
                setup.aged > 0 and isinstance(v, int) and v < ckpt,
                "log cleanup",
                f"{r.kind} {verb} {entry.get('name')} (version {v}), but only entries {why} "
                f"v{ckpt} had expired",
            )
            f.expect(
                bool(cleanup.get("dry_run")) or entry.get("name") not in state.listing,
                "log cleanup",
                f"{r.kind} reported {entry.get('name')} deleted, but it is still there",
            )


def strictly_increasing(times: Sequence[int]) -> list[int]:
    """Commit times as Delta orders them: a time not after its predecessor's counts as the
    predecessor's + 1 ms."""
    out: list[int] = []
    for t in times:
        out.append(max(t, out[-1] + 1) if out else t)
    return out


def epoch_ms(text: str) -> int:
    moment = dt.datetime.fromisoformat(text)
    return (moment - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(
        milliseconds=1
    )


def check_restores(
    records: Sequence[OpRecord], state: LogState, retain_ms: float, f: Findings
) -> Counter[str]:
    """`--timestamp` resolved to the newest version up to the read version whose commit time
    is not after it (1 ms either way: times are truncated to ms); a refusal for vacuumed files
    came after a vacuum that could have deleted files of the target version."""
    times = commit_times(state.listing)
    versions = sorted(times)
    adjusted = dict(zip(versions, strictly_increasing([times[v] for v in versions]), strict=True))
    stats: Counter[str] = Counter()
    for r in records:
        if r.kind != "restore":
            continue
        if r.outcome == "conflict" and RUNNING_VACUUM_MESSAGE in r.stderr_head:
            stats["vacuum running"] += 1
        if r.outcome == "refused":
            m = REFUSED_VERSION.search(r.stderr_head)
            target = int(m[1]) if m else None
            f.expect(
                target is not None
                and not vacuum_safe(target, state, retain_ms, (r.started + r.seconds) * 1000),
                "restores",
                f"restore {' '.join(r.args)} refused for vacuumed files of v{target}, but no "
                "vacuum that started before it ended could have deleted them",
            )
        if r.outcome != "ok" or "--timestamp" not in r.args:
            continue
        stamp = epoch_ms(option_value(r.args, "--timestamp") or "")
        read, got = r.result.get("read_version", -1), r.result.get("restored_version")
        window = set()
        for moment in (stamp - 1, stamp, stamp + 1):
            before = [v for v in versions if v <= read and adjusted[v] <= moment]
            window.add(before[-1] if before else None)
        f.expect(
            got in window,
            "restores",
            f"restore --timestamp {stamp} (read v{read}) restored v{got}; the newest commit "
            f"at or before it is v{sorted(window, key=str)}",
        )
        stats["timestamps checked"] += 1
    return stats
