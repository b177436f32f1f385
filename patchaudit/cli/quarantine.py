"""`patchaudit quarantine list|restore RUN_ID`: see and undo revert runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from patchaudit.cli.common import confirm_change, echo_command, open_environment, open_for_change, target_args
from patchaudit.cli.examples import examples
from patchaudit.cli.options import dry_run_option, format_option, target_group, yes_option
from patchaudit.errors import ExitCode


@click.group(epilog=examples("quarantine"))
def quarantine() -> None:
    """Quarantine runs: every file a revert replaced or removed, kept so it can be put back."""


@quarantine.command("list", epilog=examples("quarantine list"))
@target_group(root=True, pid=True)
@format_option("human", "json")
def list_(python: Path | None, site_path: Path | None, fmt: str) -> int:
    """List the quarantine runs of the target environment, oldest first (read-only)."""
    from patchaudit.revert import list_runs

    runs = list_runs(open_environment(python, site_path))
    if fmt == "json":
        rows = [
            {
                "run_id": r.run_id,
                "path": str(r.path),
                "op": r.op,
                "dist": r.dist,
                "version": r.version,
                "created": r.created,
                "status": r.status,
                "files": r.files,
                "undo_of": r.undo_of,
                "dists": dict(r.dists),
            }
            for r in runs
        ]
        click.echo(json.dumps(rows, indent=2))
        return ExitCode.CLEAN
    for r in runs:
        extra = f" (undo of {r.undo_of})" if r.undo_of else ""
        if r.dists:
            extra += " [" + ", ".join(f"{name}: {n}" for name, n in r.dists) + "]"
        click.echo(f"{r.run_id}  {r.created}  {r.op:<6} {r.dist} {r.version}  {r.files} file(s)  {r.status}{extra}")
    if not runs:
        click.echo("no quarantine runs")
    return ExitCode.CLEAN


@quarantine.command("restore", epilog=examples("quarantine restore"))
@click.argument("run_id")
@target_group(root=True, pid=True)
@yes_option
@dry_run_option
@format_option("human", "json")
def restore(run_id: str, python: Path | None, site_path: Path | None, yes: bool, dry_run: bool, fmt: str) -> int:
    """Put back exactly what run RUN_ID replaced (itself quarantining what it replaces); `last` names
    the newest complete run (`quarantine list` shows them all)."""
    from patchaudit.revert import execute, plan_undo

    env, _every, roots = open_for_change(python, site_path)
    if run_id == "last":
        run_id = _last_run(env)
    plan = plan_undo(env, run_id, roots=roots)
    # a run over the whole environment: name each file's distribution (or the startup hooks)
    owner = {a.path: "startup hook " if a.hook else f"{a.dist}: " if a.dist else "" for a in plan.actions}

    def show() -> None:
        for action in plan.actions:
            verb = "remove  " if action.kind == "remove" else "put back"
            click.echo(f"  {verb} {owner.get(action.path, '')}{action.path}")

    if plan.actions and not dry_run:
        noun = "file" if len(plan.actions) == 1 else "files"
        confirm_change(
            f"Put back {len(plan.actions)} {noun} of {plan.dist} from {run_id}?", yes=yes, fmt=fmt, show=show
        )
    result = execute(env, plan, roots=roots, dry_run=dry_run)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        would = "would " if dry_run else ""
        for path in result.restored:
            click.echo(f"{would}put back {owner.get(path, '')}{path}")
        for path in result.removed:
            click.echo(f"{would}remove   {owner.get(path, '')}{path} (it did not exist before that run)")
        for refusal in result.refused:
            click.echo(f"refused {refusal.path}: {refusal.reason}")
        if result.quarantine is not None:
            click.echo(f"quarantine: {result.quarantine}")
            echo_command("undo", f"patchaudit quarantine restore {result.run_id}{target_args(python, site_path)}")
    if (result.restored or result.removed) and not dry_run:
        from patchaudit.cli.ps import name_stale

        name_stale(env)
    return ExitCode.PROBLEMS if result.refused or result.unverified else ExitCode.CLEAN


def _last_run(env: Any) -> str:
    from patchaudit.errors import RunNotFound
    from patchaudit.revert import list_runs

    done = [r for r in list_runs(env) if r.status == "complete"]
    if not done:
        raise RunNotFound("no complete quarantine run in this environment")
    return max(done, key=lambda r: (r.created, r.run_id)).run_id
