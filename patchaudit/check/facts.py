"""Packaging facts: files that differ from their RECORD line for a reason that is not a patch.

- `overwritten`: several distributions own one path and the file equals another owner's RECORD line
  (the later install won). The loser reports it, naming the winner.
- `regenerated`: a `.pyc` that RECORD lists was rewritten by the installer's compile step; it is a valid
  compile of the verified source beside it, for the Python its file name is for.
- `record-mismatch` needs the wheel itself and is decided with the pristine sources (see audit).

Only files that already disagree with their RECORD are looked at: a clean file costs nothing here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from patchaudit.check import bytecode
from patchaudit.report import Drift, DriftState, Finding, Severity

# Another owner's view of a path: (its "name version", its RECORD hash for the path or None)
OtherOwners = Callable[[str], Sequence[tuple[str, str | None]]]


def classify(
    location: str,
    drift: Sequence[Drift],
    *,
    others: OtherOwners,
    verified_sources: Callable[[str], bool],
) -> tuple[list[Drift], list[Drift]]:
    """Split `drift` into (still drift, packaging facts).

    `others(path)` names the other distributions whose RECORD lists `path`; `verified_sources(path)`
    says whether this distribution's RECORD lists `path` and the file is not itself drifted.
    """
    kept: list[Drift] = []
    facts: list[Drift] = []
    for item in drift:
        if item.state is not DriftState.MODIFIED or item.actual is None or item.path.startswith(("/", "../")):
            kept.append(item)
            continue
        fact = _overwritten(item, others(item.path)) or _regenerated(location, item, verified_sources)
        if fact is not None:
            facts.append(fact)
            continue
        kept.append(_with_co_owners(item, others(item.path)))
    return kept, facts


def _overwritten(item: Drift, owners: Sequence[tuple[str, str | None]]) -> Drift | None:
    for owner, recorded in owners:
        if recorded is not None and recorded == item.actual:
            note = f"also installed by {owner}, whose file this is (installed later)"
            return dataclasses.replace(item, state=DriftState.OVERWRITTEN, winner=owner, note=note)
    return None


def _with_co_owners(item: Drift, owners: Sequence[tuple[str, str | None]]) -> Drift:
    """A patch of a shared path stays drift; say who else ships the path."""
    if not owners:
        return item
    names = tuple(owner for owner, _ in owners)
    note = f"also installed by {', '.join(names)}; equals no owner's RECORD line"
    return dataclasses.replace(item, co_owners=names, note=f"{item.note}; {note}" if item.note else note)


def _regenerated(location: str, item: Drift, verified_sources: Callable[[str], bool]) -> Drift | None:
    name = bytecode.parse_pyc_path(item.path)
    if name is None or not verified_sources(name.source):
        return None
    reason = bytecode.regenerated(location, item.path)
    if reason is None:
        return None
    return dataclasses.replace(item, state=DriftState.REGENERATED, note=reason)


def findings(facts: Sequence[Drift], overrides: dict[str, Severity] | None = None) -> tuple[Finding, ...]:
    """One finding per fact, `info` unless the policy's severity table raises it (keyed by the state)."""
    overrides = overrides or {}
    out = []
    for fact in facts:
        severity = overrides.get(fact.state.value, Severity.INFO)
        out.append(
            Finding(
                rule=fact.state.value,
                severity=severity,
                path=fact.path,
                line=0,
                message=message(fact),
                # the file differs from RECORD: a policy that raises the fact's severity makes it fail
                in_change=True,
            )
        )
    return tuple(out)


def message(fact: Drift) -> str:
    if fact.state is DriftState.OVERWRITTEN:
        return f"installed by {fact.winner}: the file is that distribution's, not a patch"
    if fact.state is DriftState.RECORD_MISMATCH:
        return f"the installed bytes equal the wheel's ({fact.wheel}); that wheel's RECORD is wrong about them"
    return fact.note or "bytecode recompiled by the installer"
