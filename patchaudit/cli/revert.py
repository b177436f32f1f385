"""`patchaudit revert DIST [PATH...]`: back to pristine, every replaced byte kept in a quarantine run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from patchaudit.cli.common import confirm_change, dist_paths, echo_command, open_for_change, target_args
from patchaudit.cli.examples import examples
from patchaudit.cli.options import (
    dry_run_option,
    format_option,
    no_cache_option,
    refuse_image_option,
    target_group,
    wheelhouse_option,
    yes_option,
)
from patchaudit.errors import ExitCode

if TYPE_CHECKING:
    from patchaudit.revert import Plan, Result


@click.command(epilog=examples("revert"))
@click.argument("dist", required=False)
@click.argument("paths", nargs=-1)
@target_group(root=True, pid=True)
@refuse_image_option
@wheelhouse_option
@click.option("--resume", is_flag=True, help="Finish or roll back a revert that was interrupted (DIST optional).")
@dry_run_option
@yes_option
@click.option(
    "--skip-unavailable",
    is_flag=True,
    help="Without DIST: revert the rest when some distributions cannot be (they are named; exit 1).",
)
@no_cache_option
@format_option("human", "json")
def revert(
    dist: str | None,
    paths: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    wheelhouse: tuple[Path, ...],
    resume: bool,
    dry_run: bool,
    yes: bool,
    skip_unavailable: bool,
    no_cache: bool,
    fmt: str,
) -> int:
    """Restore DIST's drifted files (or PATHs of it) from a pristine wheel, removing files it never shipped.

    Without DIST: every drifted distribution, and every startup hook no distribution owns is quarantined,
    in one run with one undo. Any revert first finishes (or rolls back) one that was interrupted;
    --resume does only that.
    """
    from patchaudit.target import environment

    env, every, roots = open_for_change(python, site_path)
    if dist is None and resume:
        return ExitCode.CLEAN
    environment.require_any(env, every)
    from patchaudit.revert.paths import refuse_unsafe_root

    refuse_unsafe_root(env)  # before anything is read to plan: root may not write this tree at all
    if dist is None:
        from patchaudit.cli.revert_env import revert_environment

        return revert_environment(
            env,
            every,
            roots,
            wheelhouse=wheelhouse,
            dry_run=dry_run,
            yes=yes,
            skip=skip_unavailable,
            use_cache=not no_cache,
            fmt=fmt,
            again=target_args(python, site_path),
        )
    (target,) = environment.select(every, [dist])[:1]
    paths = dist_paths(target, paths)
    from patchaudit.cli.plans import plan_one

    plan = plan_one(env, every, target, None, paths=paths, wheelhouse=wheelhouse)
    if not dry_run and plan.actions:
        noun = "file" if len(plan.actions) == 1 else "files"
        confirm_change(
            f"Revert {len(plan.actions)} {noun} of {plan.dist}?", yes=yes, fmt=fmt, show=lambda: _show_plan(plan)
        )
    from patchaudit import revert as core

    result = core.execute(env, plan, dry_run=dry_run, roots=roots)
    _show_result(result, fmt, target_args(python, site_path))
    if (result.restored or result.removed) and not dry_run:
        from patchaudit.cli.ps import name_stale

        name_stale(env)
    return ExitCode.PROBLEMS if result.refused or result.unverified or result.record_mismatch else ExitCode.CLEAN


def _show_plan(plan: Plan) -> None:
    for action in plan.actions:
        verb = "remove " if action.kind == "remove" else "restore"
        click.echo(f"  {verb} {action.path}")
    for refusal in plan.refused:
        click.echo(f"  refuse  {refusal.path}: {refusal.reason}")


def _show_result(result: Result, fmt: str, again: str = "") -> None:
    """The outcome; `again`: the target options, for the undo line to run as printed."""
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    verb = "would " if result.dry_run else ""
    for path in result.restored:
        click.echo(f"{verb}restore {path}")
    for path in result.removed:
        click.echo(f"{verb}remove  {path}")
    for refusal in result.refused:
        click.echo(f"refused {refusal.path}: {refusal.reason}")
    for path in result.record_mismatch:
        click.echo(f"record-mismatch {path}: installed bytes equal the wheel's; its RECORD is stale")
    for path in result.unverified:
        click.echo(f"NOT VERIFIED {path}: does not hash to the pristine value after the revert")
    if result.quarantine is not None:
        click.echo(f"quarantine: {result.quarantine}")
        echo_command("undo", f"patchaudit quarantine restore {result.run_id}{again}")
    elif not result.dry_run and not (result.restored or result.removed):
        click.echo("nothing to revert")
