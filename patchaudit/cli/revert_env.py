"""`patchaudit revert` without DIST: every drifted distribution and the unowned startup hooks, one run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from patchaudit.cli.common import confirm_change, echo_command
from patchaudit.errors import ExitCode, RevertIncomplete

if TYPE_CHECKING:
    from patchaudit.revert import LeftAlone, Result, WholePlan
    from patchaudit.target.environment import Environment, InstalledDist

FEW = 5


def revert_environment(
    env: Environment,
    every: Sequence[InstalledDist],
    roots: tuple[str, ...],
    *,
    wheelhouse: Sequence[Path],
    dry_run: bool,
    yes: bool,
    skip: bool,
    use_cache: bool,
    fmt: str,
    again: str = "",
) -> int:
    from patchaudit import revert as core
    from patchaudit.check.audit import ScanOptions, stat_cache
    from patchaudit.check.verify import verify
    from patchaudit.cli.plans import plan_one

    # the stat cache scan keeps: a file whose size, mtime, ctime and inode are unchanged is not re-hashed
    report = verify(env, every, every=every, cache=stat_cache(env, ScanOptions(use_cache=use_cache)))
    whole = core.plan_environment(
        env, every, report, lambda dist, rep: plan_one(env, every, dist, rep, wheelhouse=wheelhouse)
    )
    if whole.unavailable and not skip and not dry_run:
        if fmt == "json":
            _show(whole, None, fmt)
        for u in whole.unavailable if fmt == "human" else ():
            click.echo(f"cannot revert {u.dist} {u.version}: {u.reason}")
        names = ", ".join(u.dist for u in whole.unavailable)
        raise RevertIncomplete(
            f"{len(whole.unavailable)} drifted distribution(s) cannot be reverted ({names}); nothing was changed",
            hint="--skip-unavailable reverts the rest and exits 1, naming them",
        )
    plan = whole.plan
    if not dry_run and plan.actions:
        noun = "file" if len(plan.actions) == 1 else "files"
        confirm_change(
            f"Revert {len(plan.actions)} {noun} in one run?", yes=yes, fmt=fmt, show=lambda: _show(whole, None, fmt)
        )
    result = core.execute(env, plan, dry_run=dry_run, roots=roots)
    _show(whole, result, fmt, again)
    if (result.restored or result.removed) and not dry_run:
        from patchaudit.cli.ps import name_stale

        name_stale(env)
    problems = whole.unavailable or result.refused or result.unverified
    return ExitCode.PROBLEMS if problems else ExitCode.CLEAN


def _groups(whole: WholePlan, result: Result | None) -> list[tuple[str, list[tuple[str, str]]]]:
    """(heading, [(verb, path)]) per distribution, then the startup hooks; verbs of what happens."""
    done = None if result is None else set(result.restored) | set(result.removed)
    ahead = result is None or result.dry_run
    versions = dict(whole.dists)
    groups: dict[str, list[tuple[str, str]]] = {}
    for action in whole.plan.actions:
        if done is not None and action.path not in done:
            continue
        if action.hook:
            key, verb = "startup hooks (no distribution owns them)", "quarantine"
        else:
            key = f"{action.dist} {versions.get(action.dist or '', '')}".rstrip()
            verb = "remove" if action.kind == "remove" else "restore"
        groups.setdefault(key, []).append(((("would " if ahead and result else "") + verb), action.path))
    return list(groups.items())


def _show(whole: WholePlan, result: Result | None, fmt: str, again: str = "") -> None:
    refused = whole.plan.refused if result is None else result.refused
    if fmt == "json":
        out: dict[str, Any] = {
            "distributions": [
                {"name": name, "version": version, "files": [a.path for a in whole.plan.actions if a.dist == name]}
                for name, version in whole.dists
            ],
            "startup_hooks": [a.path for a in whole.plan.actions if a.hook],
            "left_alone": [x.to_dict() for x in whole.left_alone],
            "unavailable": [u.to_dict() for u in whole.unavailable],
            "refused": [r.to_dict() for r in refused],
        }
        if result is not None:
            out.update(result.to_dict())
            out["run_id"] = result.run_id
        click.echo(json.dumps(out, indent=2))
        return
    for heading, items in _groups(whole, result):
        click.echo(heading)
        for verb, path in items:
            click.echo(f"  {verb:<16} {path}")
    for refusal in refused:
        owner = refusal.dist or "environment"
        click.echo(f"refused {owner}: {refusal.path}: {refusal.reason}")
    _show_left_alone(whole.left_alone)
    for u in whole.unavailable:
        click.echo(f"cannot revert {u.dist} {u.version}: {u.reason}")
    if result is None:
        return
    for path in result.unverified:
        click.echo(f"NOT VERIFIED {path}: does not hash to the pristine value after the revert")
    if result.quarantine is not None:
        click.echo(f"quarantine: {result.quarantine}")
        echo_command("undo", f"patchaudit quarantine restore {result.run_id}{again}")
    elif not (result.restored or result.removed):
        click.echo("nothing to revert")


def _show_left_alone(left: Sequence[LeftAlone]) -> None:
    """One line each; more than FEW of one state are one line with a count (JSON lists them all)."""
    by_state: dict[str, list[LeftAlone]] = {}
    for item in left:
        by_state.setdefault(item.state, []).append(item)
    for state, items in by_state.items():
        if len(items) <= FEW:
            for item in items:
                click.echo(f"left alone {item.dist or 'environment'}: {item.path} ({state}): {item.reason}")
            continue
        names = ", ".join(f"{i.dist}: {i.path}" if i.dist else i.path for i in items[:3])
        why = "packaging facts, not patches (--format json lists each)"
        click.echo(f"left alone {len(items)} {state} files ({names}, ...): {why}")
