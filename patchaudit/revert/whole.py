"""A revert of the whole environment: every drifted distribution and every unowned startup hook, one plan.

The plan is the plans of the distributions joined (each action names its distribution) plus the hooks
to quarantine, so one run, one journal and one undo cover it all; transaction.py carries it out as it
carries out any plan. What it leaves alone is said, with the reason: packaging facts, added files in
directories no single distribution owns, and distributions that cannot be reverted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import PatchAuditError
from patchaudit.report import DistReport, Drift, DriftState, Report
from patchaudit.revert.model import Action, ActionKind, Op, Plan, Refusal
from patchaudit.revert.paths import check_destination, dist_problem
from patchaudit.target.environment import Environment, InstalledDist

ENVIRONMENT = "environment"  # the `dist` of a run over the whole environment (its manifest, its run id)
SHARED = "added in a directory several distributions share, so no one distribution's revert removes it"
PACKAGE_HOOK = "a package directory: move it aside by hand (the quarantine keeps files, not directories)"
MISMATCH = "the installed bytes are the wheel's; its RECORD is wrong about them"
SEVERAL = "several distributions revert this path to different bytes: revert one of them by name"


@dataclass(frozen=True, kw_only=True, slots=True)
class LeftAlone:
    """A path the run does not touch, and why (a packaging fact is not a patch)."""

    path: str
    state: str
    reason: str
    dist: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"dist": self.dist, "path": self.path, "state": self.state, "reason": self.reason}


@dataclass(frozen=True, kw_only=True, slots=True)
class Unavailable:
    """A drifted distribution that cannot be reverted (no pristine source, another build, ...)."""

    dist: str
    version: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"dist": self.dist, "version": self.version, "reason": self.reason}


@dataclass(frozen=True, kw_only=True, slots=True)
class WholePlan:
    plan: Plan
    dists: tuple[tuple[str, str], ...] = ()  # (name, version) of each distribution the plan reverts
    left_alone: tuple[LeftAlone, ...] = ()
    unavailable: tuple[Unavailable, ...] = ()


def plan_environment(
    env: Environment,
    dists: Sequence[InstalledDist],
    report: Report,
    plan_one: Callable[[InstalledDist, DistReport], Plan],
) -> WholePlan:
    """Join `plan_one` of every drifted distribution of `report` (its reports in the order of `dists`)
    with the removal of every unowned startup hook; nothing is written here."""
    actions: list[Action] = []
    refused: list[Refusal] = []
    left: list[LeftAlone] = []
    unavailable: list[Unavailable] = []
    reverted: list[tuple[str, str]] = []
    origins: list[str] = []
    roots: list[str] = []
    for dist, dist_report in zip(dists, report.distributions, strict=True):
        left += [_fact(dist.name, fact) for fact in dist_report.facts]
        if not dist_report.drift:
            continue
        problem = dist_problem(dist.name, dist.version)
        if problem is not None:
            unavailable.append(Unavailable(dist=dist.name, version=dist.version, reason=problem))
            continue
        try:
            plan = plan_one(dist, dist_report)
        except PatchAuditError as exc:
            reason = str(exc) + (f" ({exc.hint})" if exc.hint else "")
            unavailable.append(Unavailable(dist=dist.name, version=dist.version, reason=reason))
            continue
        actions += [dataclasses.replace(a, dist=dist.name) for a in plan.actions]
        refused += [dataclasses.replace(r, dist=dist.name) for r in plan.refused]
        # the wheel shows these are its own bytes under a wrong RECORD line: a packaging fact, as scan says
        left += [
            LeftAlone(dist=dist.name, path=p, state=DriftState.RECORD_MISMATCH, reason=MISMATCH)
            for p in plan.record_mismatch
        ]
        if plan.actions:
            reverted.append((dist.name, dist.version))
        if plan.origin:
            origins.append(f"{dist.name}: {plan.origin}")
        roots += [r for r in plan.roots if r not in roots]
    hooks, hook_refused, shared = _hooks(env, report.environment.drift)
    actions, clashes = _without_clashes(actions)
    plan = Plan(
        op=Op.REVERT,
        dist=ENVIRONMENT,
        version="",
        actions=tuple(actions + hooks),
        refused=tuple(refused + clashes + hook_refused),
        origin="; ".join(origins) or None,
        roots=tuple(roots),
    )
    return WholePlan(
        plan=plan,
        dists=tuple(reverted),
        left_alone=tuple(left + shared),
        unavailable=tuple(unavailable),
    )


def _fact(dist: str, fact: Drift) -> LeftAlone:
    if fact.state is DriftState.OVERWRITTEN:
        reason = f"another distribution's file ({fact.winner}): several ship this path, the later install won"
    elif fact.state is DriftState.RECORD_MISMATCH:
        reason = f"the installed bytes are the wheel's ({fact.wheel}); its RECORD is wrong about them"
    elif fact.state is DriftState.REGENERATED:
        reason = "bytecode the installer compiled from the verified source"
    else:
        reason = "a packaging fact, not a patch"
    return LeftAlone(dist=dist, path=fact.path, state=fact.state, reason=reason)


def _hooks(env: Environment, drift: Sequence[Drift]) -> tuple[list[Action], list[Refusal], list[LeftAlone]]:
    """Unowned startup hooks to quarantine (removed; the quarantine keeps them), and what is left."""
    actions: list[Action] = []
    refused: list[Refusal] = []
    left: list[LeftAlone] = []
    for item in drift:
        note = item.note or ""
        if not note.startswith("startup hook"):
            left.append(LeftAlone(path=item.path, state=item.state, reason=SHARED))
            continue
        if note != "startup hook":
            refused.append(Refusal(path=item.path, reason=PACKAGE_HOOK))
            continue
        # hooks of the first site directory are named relative to it, those of the others by absolute path
        dest = Path(item.path) if Path(item.path).is_absolute() else env.site_dirs[0] / item.path
        reason = check_destination(env, dest)
        if reason is not None:
            refused.append(Refusal(path=item.path, reason=reason))
            continue
        actions.append(Action(path=item.path, dest=dest, kind=ActionKind.REMOVE, hook=True))
    return actions, refused, left


def _without_clashes(actions: list[Action]) -> tuple[list[Action], list[Refusal]]:
    """Two distributions that would write one destination (a shared path equal to neither's RECORD
    line) are both refused there: which bytes are right is for the user to say."""
    wanted: dict[Path, set[tuple[str, str | None]]] = {}
    for action in actions:
        wanted.setdefault(action.dest, set()).add((action.kind, action.digest))
    clash = {dest for dest, outcomes in wanted.items() if len(outcomes) > 1}
    kept: list[Action] = []
    seen: set[Path] = set()
    for action in actions:
        if action.dest not in clash and action.dest not in seen:  # the same bytes from two: one write
            kept.append(action)
            seen.add(action.dest)
    refused = [Refusal(path=a.path, reason=SEVERAL, dist=a.dist) for a in actions if a.dest in clash]
    return kept, refused
