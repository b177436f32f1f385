"""`patchaudit baseline create|check|accept` (core in patchaudit.gate.baseline)."""

from __future__ import annotations

from pathlib import Path

import click

from patchaudit.cli.common import open_environment, write_output
from patchaudit.cli.examples import examples
from patchaudit.cli.options import (
    fail_on_option,
    format_option,
    given_root,
    out_option,
    serve_option,
    severity_or_none,
    target_group,
)
from patchaudit.errors import ExitCode


@click.group(epilog=examples("baseline"))
def baseline() -> None:
    """A known-good snapshot of an environment and the record of approved patches."""


@baseline.command(epilog=examples("baseline create"))
@click.argument("dists", nargs=-1)
@target_group(root=True)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Baseline file to write (required, unless --model).",
)
@click.option("--include-drift", is_flag=True, help="Take files that already differ from RECORD in as approved.")
@click.option(
    "--model",
    type=click.Path(path_type=Path, file_okay=False),
    help="Instead: record a plain model directory's manifest (in DIR/.patchaudit/) for `model scan` and the gate.",
)
@click.option("--unit", help="Also record the steering variables this systemd unit gives its service.")
@click.option(
    "--unit-dir",
    "unit_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Read unit files from DIR instead of the system's unit directories (repeatable).",
)
def create(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    out: Path | None,
    include_drift: bool,
    model: Path | None,
    unit: str | None,
    unit_dirs: tuple[str, ...],
) -> int:
    """Snapshot DISTS (default: all) of the target environment into a baseline file."""
    from patchaudit.gate import baseline as core

    if model is not None:
        if dists or out is not None or python is not None or site_path is not None or unit is not None:
            raise click.UsageError("--model takes no distributions, --out, --python, --path or --unit")
        from patchaudit.models.manifest import create as create_manifest

        written, count = create_manifest(model)
        click.echo(f"wrote {written}: {count} files")
        return ExitCode.CLEAN
    if out is None:
        raise click.UsageError("Missing option '--out'.")
    if unit_dirs and unit is None:
        raise click.UsageError("--unit-dir needs --unit")
    if unit is not None:
        from patchaudit.gate.systemd import unit_name

        unit = unit_name(unit)
    env = open_environment(python, site_path)
    made, left_out, commit = core.create(
        env,
        out,
        names=dists,
        include_drift=include_drift,
        unit=unit,
        unit_dirs=tuple(str(Path(d).absolute()) for d in unit_dirs),
    )
    for where, drift in left_out:
        click.echo(f"patchaudit: {where or 'environment'}: {drift.state.value} {drift.path} left out of the baseline")
    files = sum(len(d.files) for d in made.distributions)
    tail = f"; committed {commit[:12]}" if commit else ""
    if made.service is not None:
        from patchaudit.render.journal import escape

        for v in made.service.variables.values():
            click.echo(f"{escape(made.service.unit)}: {v.name}={escape(v.shown)} ({v.origin.value} {escape(v.where)})")
    click.echo(f"wrote {out}: {len(made.distributions)} distributions, {files} files{tail}")
    if left_out:
        click.echo(
            f"{len(left_out)} drifted file(s) left out: accept them one by one with `patchaudit baseline accept`"
        )
    return ExitCode.CLEAN


@baseline.command(epilog=examples("baseline check"))
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("dists", nargs=-1)
@target_group(root=True)
@format_option("journal", "json", default="journal")
@out_option
@fail_on_option
def check(
    file: Path,
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    fmt: str,
    out: Path | None,
    fail_on: str | None,
) -> int:
    """Report every file that differs from the baseline FILE (target: the baseline's, unless given)."""
    from patchaudit.gate import baseline as core
    from patchaudit.gate.policy import Policy
    from patchaudit.gate.verdict import judge

    if python is None and site_path is None and given_root() is None:
        held = core.load(file)
        python = Path(held.python) if held.python else None
    env = open_environment(python, site_path)
    report = core.check_env(env, file, names=dists)

    # One verdict for every format (the exit code never depends on how the answer is printed): the
    # gate's own judgement (its default policy, failing on a high finding unless --fail-on says
    # otherwise), as `gate --baseline FILE`.
    verdict = judge(report, Policy(), severity_or_none(fail_on), baseline=str(file))
    if fmt == "json":
        from patchaudit.render.json import render_json

        write_output(render_json(report), out)
        return verdict.exit_code
    from patchaudit.render.journal import render_journal

    write_output(render_journal(verdict).replace("patchaudit gate:", "patchaudit baseline:"), out)
    return verdict.exit_code


@baseline.command(epilog=examples("baseline accept"))
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("paths", nargs=-1, required=True)
@click.option("--reason", required=True, help="Why this patch is needed (kept in the baseline and the git log).")
@click.option("--dist", "distribution", help="The distribution the file belongs to, when the path is ambiguous.")
@click.option("--by", "who", help="Who approves (default: $SUDO_USER, $USER, then git's user.name).")
@serve_option
@click.option("--force", is_flag=True, help="With --serve: accept patches that run for the model all the same.")
@target_group(root=False)
def accept(
    file: Path,
    paths: tuple[str, ...],
    reason: str,
    distribution: str | None,
    who: str | None,
    serve: str | None,
    force: bool,
    python: Path | None,
    site_path: Path | None,
) -> int:
    """Approve each of PATHS (relative to site-packages) exactly as it is now.

    With --serve, a patch in code that runs for MODEL is refused unless --force; other models' leftovers
    are accepted with their reason."""
    from patchaudit.gate import baseline as core

    if serve:
        _refuse_what_runs(file, paths, serve, force, python, site_path)
    approvals, commit = core.accept(file, paths, reason=reason, who=who, distribution=distribution)
    for a in approvals:
        click.echo(f"accepted {a.distribution or 'environment'}: {a.path} {a.previous or 'absent'} -> {a.hash}")
    if commit:
        click.echo(f"committed {commit[:12]}")
    return ExitCode.CLEAN


def _refuse_what_runs(
    file: Path, paths: tuple[str, ...], serve: str, force: bool, python: Path | None, site_path: Path | None
) -> None:
    """A patch in code the served model runs is not accepted without --force; other models' leftovers are."""
    from patchaudit.errors import BaselineError
    from patchaudit.gate import baseline as core
    from patchaudit.serving.annotate import ServeOptions, reach_of_paths

    if python is None and site_path is None:
        held = core.load(file)
        python = Path(held.python) if held.python else None
    env = open_environment(python, site_path)
    reach = reach_of_paths(env, paths, ServeOptions(model=serve))
    for path in paths:
        r = reach.get(path)
        if r is None:
            continue
        click.echo(f"{path}: reach {r.kind.value}" + (f" ({r.why})" if r.why else ""), err=True)
        if r.kind.value == "runs":
            if not force:
                raise BaselineError(
                    f"{path} runs for {serve} (via {' -> '.join(r.via)})", hint="--force accepts it all the same"
                )
            click.echo(f"{path} runs for {serve}: accepted with --force", err=True)
