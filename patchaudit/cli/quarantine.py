"""`patchaudit quarantine list|restore RUN_ID`: see and undo revert runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from patchaudit.cli.common import open_environment, open_for_change, target_options
from patchaudit.errors import ExitCode


@click.group()
def quarantine() -> None:
    """Quarantine runs: every file a revert replaced or removed, kept so it can be put back."""


@quarantine.command("list")
@target_options
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True)
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


@quarantine.command("restore")
@click.argument("run_id")
@target_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True)
def restore(run_id: str, python: Path | None, site_path: Path | None, yes: bool, fmt: str) -> int:
    """Put back exactly what run RUN_ID replaced (itself quarantining what it replaces)."""
    from patchaudit.revert import execute, plan_undo

    env, _every, roots = open_for_change(python, site_path)
    plan = plan_undo(env, run_id, roots=roots)
    if plan.actions and not yes and sys.stdin.isatty() and fmt == "human":
        click.confirm(f"Put back {len(plan.actions)} file(s) of {plan.dist} from {run_id}?", abort=True)
    result = execute(env, plan, roots=roots)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        # a run over the whole environment: name each file's distribution (or the startup hooks)
        owner = {a.path: "startup hook " if a.hook else f"{a.dist}: " if a.dist else "" for a in plan.actions}
        for path in result.restored:
            click.echo(f"put back {owner.get(path, '')}{path}")
        for path in result.removed:
            click.echo(f"removed  {owner.get(path, '')}{path} (it did not exist before that run)")
        for refusal in result.refused:
            click.echo(f"refused {refusal.path}: {refusal.reason}")
        if result.quarantine is not None:
            click.echo(f"quarantine: {result.quarantine} (undo: patchaudit quarantine restore {result.run_id})")
    if result.restored or result.removed:
        from patchaudit.cli.ps import name_stale

        name_stale(env)
    return ExitCode.PROBLEMS if result.refused or result.unverified else ExitCode.CLEAN
