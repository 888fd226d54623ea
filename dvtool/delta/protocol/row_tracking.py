"""Row tracking (PROTOCOL.md "Row Tracking"): fresh row IDs and commit versions for the files a
commit adds, the high-water mark, and the hidden columns that preserve stable ones.

- **Supported** (`rowTracking` writer feature) and not suspended
  (`delta.rowTrackingSuspended` is not true): every `add` a writer commits carries a
  `baseRowId` above the high-water mark (the `delta.rowTracking` domain) and a
  `defaultRowCommitVersion` equal to the commit's version; the commit raises the mark.
  Re-committed adds (a file re-added with a new DV) keep the values of the add they replace.
- **Enabled** (also `delta.enableRowTracking=true`): rewrites preserve each copied row's
  stable row ID and commit version in the hidden materialized columns named by
  `delta.rowTracking.materializedRowIdColumnName` / `...RowCommitVersionColumnName`: the
  value the row had (its materialized value, else `baseRowId + row index` /
  `defaultRowCommitVersion` of its old file).

`assign_fresh_row_ids` is applied when the commit's version is known, so a commit retried at a
later version (after other writers committed) is recomputed against the new mark; conflict
checking treats the `delta.rowTracking` domain accordingly (dvtool.delta.protocol.conflicts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dvtool.delta.protocol.actions import DomainMetadata, Protocol
from dvtool.delta.protocol.features import configuration_flag
from dvtool.errors import LogError

DOMAIN = "delta.rowTracking"
ENABLED_KEY = "delta.enableRowTracking"
SUSPENDED_KEY = "delta.rowTrackingSuspended"
ROW_ID_COLUMN_KEY = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_COLUMN_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"
PRESERVED_TAG = "delta.rowTracking.preserved"
NO_HIGH_WATER_MARK = -1


def assigns_row_ids(protocol: Protocol, configuration: Mapping[str, str]) -> bool:
    """Whether writers must assign fresh row IDs: supported and not suspended."""
    features = protocol.writer_features or ()
    return "rowTracking" in features and not configuration_flag(configuration, SUSPENDED_KEY)


@dataclass(frozen=True)
class MaterializedColumns:
    """The hidden data-file columns that hold preserved stable row IDs and commit versions."""

    row_id: str
    commit_version: str


def materialized_columns(
    protocol: Protocol, configuration: Mapping[str, str]
) -> MaterializedColumns | None:
    """The hidden columns rewrites must write, when row tracking is enabled; else None.

    LogError when row tracking is enabled without the column names, which the protocol
    requires before `delta.enableRowTracking` may be set.
    """
    enabled = configuration_flag(configuration, ENABLED_KEY)
    if not assigns_row_ids(protocol, configuration) or not enabled:
        return None
    row_id = configuration.get(ROW_ID_COLUMN_KEY)
    version = configuration.get(COMMIT_VERSION_COLUMN_KEY)
    if not row_id or not version:
        raise LogError(
            f"row tracking is enabled ({ENABLED_KEY}=true) but the table configuration lacks "
            f"{ROW_ID_COLUMN_KEY} or {COMMIT_VERSION_COLUMN_KEY}"
        )
    return MaterializedColumns(row_id, version)


def high_water_mark(domains: Mapping[str, DomainMetadata]) -> int:
    """`rowIdHighWaterMark` of the `delta.rowTracking` domain; -1 when none was assigned."""
    domain = domains.get(DOMAIN)
    if domain is None or domain.removed:
        return NO_HIGH_WATER_MARK
    return _mark_of(domain.configuration)


def _mark_of(configuration: str) -> int:
    try:
        value = json.loads(configuration)["rowIdHighWaterMark"]
    except (ValueError, KeyError, TypeError):
        raise LogError(
            f"the {DOMAIN} domain has no valid rowIdHighWaterMark: {configuration!r}"
        ) from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise LogError(f"the {DOMAIN} rowIdHighWaterMark is not an integer: {value!r}")
    return value


def winners_high_water_mark(domain_lists: Iterable[Sequence[DomainMetadata]]) -> int:
    """The highest mark the winning commits (their domainMetadata actions) set; -1 if none."""
    marks = [
        _mark_of(d.configuration)
        for domains in domain_lists
        for d in domains
        if d.domain == DOMAIN and not d.removed
    ]
    return max(marks, default=NO_HIGH_WATER_MARK)


def assign_fresh_row_ids(
    actions: Sequence[Mapping[str, Any]], version: int, mark: int
) -> list[dict[str, Any]]:
    """`actions` with fresh row IDs and commit versions for the adds that lack them.

    Each such add gets `baseRowId = mark + 1` (then the mark moves past its `numRecords`)
    and `defaultRowCommitVersion = version`; adds that carry them (re-committed files) keep
    theirs. When a fresh ID was assigned, the `delta.rowTracking` domain with the new mark
    is appended (replacing one already in `actions`). Raises ValueError for an add without
    `numRecords` in its stats: its rows could not be counted.
    """
    out: list[dict[str, Any]] = []
    new_mark = mark
    for action in actions:
        if "domainMetadata" in action and action["domainMetadata"].get("domain") == DOMAIN:
            continue
        add = action.get("add")
        if isinstance(add, Mapping):
            body = dict(add)
            if body.get("baseRowId") is None:
                body["baseRowId"] = new_mark + 1
                new_mark += _num_records(body)
            if body.get("defaultRowCommitVersion") is None:
                body["defaultRowCommitVersion"] = version
            out.append({"add": body})
        else:
            out.append(dict(action))
    if new_mark != mark:
        out.append(domain_action(new_mark))
    return out


def _num_records(add: Mapping[str, Any]) -> int:
    try:
        count = json.loads(add.get("stats") or "{}")["numRecords"]
    except (ValueError, KeyError, TypeError):
        count = None
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"add {add.get('path')} has no numRecords: fresh row IDs need it")
    return count


def domain_action(mark: int) -> dict[str, Any]:
    """The `domainMetadata` action that records `mark` as the high-water mark."""
    configuration = json.dumps({"rowIdHighWaterMark": mark}, separators=(",", ":"))
    return {"domainMetadata": {"domain": DOMAIN, "configuration": configuration, "removed": False}}
