"""The soak's summary (see scripts/soak.py): what the run did per kind of operation
(`Summary`, `summarize`) and the printed tables and lines: `print_summary`, `print_failures`,
`print_restores`, `print_log_cleanup` and `print_signals` (what the signals sent did).

Only counting and printing: the checks that can fail a run are in soak_checks.py and
soak_expected.py.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soak_checks import reported_versions
from soak_log import VERSIONED_NAME, LogState
from soak_ops import OPERATION_WEIGHTS, OpRecord
from soak_table import Setup


@dataclass
class Summary:
    """What the run did, per kind of operation."""

    runs: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    variants: Counter[str] = field(default_factory=Counter)
    replans: Counter[str] = field(default_factory=Counter)
    after_winners: Counter[str] = field(default_factory=Counter)
    winners_skipped: Counter[str] = field(default_factory=Counter)
    seconds: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    warnings: list[str] = field(default_factory=list)
    # Post-commit steps (checkpoint, log cleanup) skipped because a signal came after the
    # commit: expected, counted apart from the warnings.
    skipped_after_signal: list[str] = field(default_factory=list)


def summarize(records: Sequence[OpRecord], infos: Mapping[int, dict[str, Any]]) -> Summary:
    s = Summary()
    for r in records:
        s.runs[r.kind] += 1
        s.outcomes[(r.kind, r.outcome)] += 1
        s.seconds[r.kind].append(r.seconds)
        if r.outcome != "ok":
            continue
        s.variants.update(operation_variants(r))
        s.replans[r.kind] += int(r.result.get("attempts", 1)) - 1
        for v in reported_versions(r):
            read = infos.get(v, {}).get("readVersion")
            if isinstance(read, int) and v - read > 1:
                s.after_winners[r.kind] += 1
                s.winners_skipped[r.kind] += v - read - 1
        for w in operation_warnings(r):
            after_signal = r.signal_sent is not None and "received after the commit" in w
            (s.skipped_after_signal if after_signal else s.warnings).append(w)
    return s


def operation_variants(r: OpRecord) -> list[str]:
    """What kind of successful restore, checkpoint or log cleanup `r` was, for the summary."""
    res = r.result
    if r.kind == "restore":
        how = "--timestamp" if "--timestamp" in r.args else "--version"
        return [f"restore {how} " + ("dry run" if res.get("dry_run") else "committed")]
    if r.kind == "checkpoint":
        cleanup = res.get("log_cleanup") or {}
        return [
            "checkpoint " + ("written" if res.get("written") else "already there"),
            *(["checkpoint cleanup deleted"] * int(cleanup.get("deleted_files") or 0)),
        ]
    if r.kind == "vacuum_log":
        verb = "planned" if res.get("dry_run") else "deleted"
        return [f"vacuum --log {verb}"] * int(res.get("deleted_files") or 0)
    return []


def operation_warnings(r: OpRecord) -> list[str]:
    res = r.result
    found = [res.get("checkpoint_warning"), *(res.get("checkpoint_warnings") or [])]
    found += list(res.get("warnings") or []) if r.kind in ("vacuum", "checkpoint") else []
    found += [res.get("manifest_warning"), res.get("error") if r.kind == "vacuum_log" else None]
    return [f"{r.kind}: {w}" for w in found if w]


def print_summary(s: Summary) -> None:
    print(
        f"{'operation':<10} {'runs':>5} {'ok':>5} {'conflict':>8} {'refused':>7} {'stopped':>7} "
        f"{'failure':>7} {'re-plans':>8} {'retried':>7} {'winners':>7} {'mean s':>6} "
        f"{'max s':>6}"
    )
    for kind in OPERATION_WEIGHTS:
        secs = s.seconds.get(kind) or [0.0]
        print(
            f"{kind:<10} {s.runs[kind]:>5} {s.outcomes[(kind, 'ok')]:>5} "
            f"{s.outcomes[(kind, 'conflict')]:>8} {s.outcomes[(kind, 'refused')]:>7} "
            f"{s.outcomes[(kind, 'interrupted')]:>7} {s.outcomes[(kind, 'failure')]:>7} "
            f"{s.replans[kind]:>8} {s.after_winners[kind]:>7} {s.winners_skipped[kind]:>7} "
            f"{sum(secs) / len(secs):>6.1f} {max(secs):>6.1f}"
        )
    total = sum(s.runs.values())
    by = Counter(o for (_, o), n in s.outcomes.items() for _ in range(n))
    print(
        f"{'total':<10} {total:>5} {by['ok']:>5} {by['conflict']:>8} {by['refused']:>7} "
        f"{by['interrupted']:>7} {by['failure']:>7}"
    )
    print(
        "  re-plans: delete re-planned after a conflict (--json attempts - 1); retried: "
        "commits that landed after other writers' commits (version > readVersion + 1); "
        "winners: those other commits; refused: restores refused because files they need "
        "were vacuumed (exit 5), vacuum --lite refused because commits it needs were cleaned "
        "from the log (exit 7; a full vacuum records where the next --lite starts); "
        "stopped: exited 130/143 (or while starting) after a signal the soak sent"
    )


def print_failures(records: Sequence[OpRecord]) -> list[OpRecord]:
    failures = [r for r in records if r.outcome == "failure"]
    print(f"unexpected failures: {len(failures)}")
    for r in failures[:20]:
        print(f"  worker {r.worker} {r.kind} {' '.join(r.args)}: exit {r.exit_code}")
        for line in (r.stderr_head or "(no stderr)").splitlines():
            print(f"      {line}")
    return failures


def print_restores(summary: Summary, restores: Counter[str]) -> None:
    v = summary.variants
    print(
        f"restores: committed {v['restore --version committed']} by --version and "
        f"{v['restore --timestamp committed']} by --timestamp, dry runs "
        f"{v['restore --version dry run'] + v['restore --timestamp dry run']}; "
        f"refused (files vacuumed) {summary.outcomes[('restore', 'refused')]}; conflicts "
        f"{summary.outcomes[('restore', 'conflict')]} (of which a vacuum running "
        f"{restores['vacuum running']}); --timestamp resolutions checked "
        f"{restores['timestamps checked']}"
    )


def print_log_cleanup(summary: Summary, state: LogState, setup: Setup) -> None:
    v = summary.variants
    gone = sorted(setup.log_names - set(state.listing))
    versions = sorted(int(m[1]) for n in gone if (m := VERSIONED_NAME.match(n)))
    span = f" (versions {versions[0]}..{versions[-1]})" if versions else ""
    reported = v["checkpoint cleanup deleted"] + v["vacuum --log deleted"]
    rest = len(gone) - reported
    print(
        f"checkpoints: {v['checkpoint written']} written, {v['checkpoint already there']} "
        f"already there; log cleanup: {len(gone)} of the setup's "
        f"{len(setup.log_names)} _delta_log entries deleted{span} (its checkpoint: "
        f"v{setup.checkpoint}); reported deleted by checkpoint {v['checkpoint cleanup deleted']}, "
        f"by vacuum --log {v['vacuum --log deleted']} (dry runs listed "
        f"{v['vacuum --log planned']})"
        + (f"; {rest} by the cleanup after a checkpoint a commit wrote" if rest > 0 else "")
    )
    if not setup.aged:
        print(
            "  log not aged: S3 has no settable modification time, so nothing expired and "
            "the cleanup was only checked to delete nothing"
        )


def print_signals(records: Sequence[OpRecord], rate: float, summary: Summary) -> None:
    """The signals sent and what came of them, in all and per kind of operation."""
    drawn = [r for r in records if r.signal]
    sent = [r for r in drawn if r.signal_sent is not None]
    names = Counter(r.signal for r in sent)
    print(
        f"signals (--signals {rate:g}): {len(sent)} sent (SIGINT {names['SIGINT']}, SIGTERM "
        f"{names['SIGTERM']}); {len(drawn) - len(sent)} more drawn but the operation had "
        "already ended"
    )
    if not sent:
        return
    counts: Counter[str] = Counter()
    by_kind: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for r in sent:
        what = signal_outcome(r)
        counts[what] += 1
        by_kind[r.kind][what] += 1
    named = sum(len(r.claimed) for r in sent if r.outcome == "interrupted")
    delays = sorted(r.signal_sent or 0.0 for r in sent)
    print(
        f"  sent {statistics.median(delays):.2f} s after the start (median; max "
        f"{delays[-1]:.2f} s); outcomes:"
    )
    labels = {
        "exit 0 committed": "exit 0 and reported its commit(s), checked as any other",
        "exit 0": "exit 0, nothing to commit (a read, a no-op, a checkpoint, ...)",
        "starting": "stopped while the interpreter started (nothing done)",
        "before commit": "exit 130/143 before committing (no commit of theirs may be there)",
        "after commit": "exit 130/143 after committing (names its versions)",
    }
    for key, label in labels.items():
        extra = f", {named} versions named (checked in the log)" if key == "after commit" else ""
        print(f"    {label}: {counts[key]}{extra}")
    for key in sorted(set(counts) - set(labels)):
        print(f"    {key}: {counts[key]}")
    print(
        f"  post-commit steps skipped because the signal came after the commit: "
        f"{len(summary.skipped_after_signal)}"
    )
    short = {"exit 0 committed": "0+commit", "exit 0": "0", "starting": "starting",
             "before commit": "before", "after commit": "after"}  # fmt: skip
    per_kind = "; ".join(
        f"{kind} {sum(c.values())} ("
        + ", ".join(f"{short.get(what, what)} {n}" for what, n in sorted(c.items()))
        + ")"
        for kind, c in sorted(by_kind.items())
    )
    print(f"  by operation: {per_kind}")


def signal_outcome(r: OpRecord) -> str:
    """What an operation sent a signal did, for the summary."""
    if r.outcome == "interrupted":
        return r.stopped or "?"
    if r.outcome == "ok":
        return "exit 0 committed" if reported_versions(r) else "exit 0"
    return f"{r.outcome} (exit {r.exit_code})"
