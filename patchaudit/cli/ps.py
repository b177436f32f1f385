"""`patchaudit ps`: which Python processes still run code that changed since they started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from patchaudit.cli.common import write_output
from patchaudit.errors import ExitCode


@click.command()
@click.option("--unit", help="Only the processes of this systemd unit (found through its cgroup).")
@click.option("--pid", "pids", multiple=True, type=click.IntRange(1), help="Only this process (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), help="Write the report to FILE instead of stdout.")
@click.option("-v", "--verbose", is_flag=True, help="List processes that run what is on disk too.")
@click.option(
    "--serve",
    metavar="MODEL",
    help="Say which changed files run for the model served: `auto` reads it from each server's command line.",
)
def ps(unit: str | None, pids: tuple[int, ...], fmt: str, out: Path | None, verbose: bool, serve: str | None) -> int:
    """Python processes (default: all on this host) and the changed files they still run."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.procs.assess import ProcStatus, assess
    from patchaudit.render import procs as render

    if unit is not None and pids:
        raise PatchAuditError("give --unit or --pid, not both")
    if unit is not None:
        from patchaudit.systemd import unit_name

        unit = unit_name(unit)
    reports = assess(unit=unit, pids=pids)
    text = render.render_json(reports) if fmt == "json" else render.render_human(reports, verbose=verbose or bool(pids))
    if serve:
        from patchaudit.render.serving import served_processes_json, served_processes_lines
        from patchaudit.serving.procs import serve_processes

        served = serve_processes(reports, serve)
        text = served_processes_json(text, served) if fmt == "json" else text + served_processes_lines(served)
    write_output(text, out)
    failing = {ProcStatus.STALE, ProcStatus.MAYBE}  # a process that may run changed code is not vouched for
    if unit is not None or pids:
        failing.add(ProcStatus.UNINSPECTABLE)  # a named process that cannot be read cannot be vouched for
    return ExitCode.PROBLEMS if any(r.status in failing for r in reports) else ExitCode.CLEAN


def name_stale(env: Any) -> None:
    """After a revert or a restore: name the processes that still run the old code (stderr)."""
    from patchaudit.procs.assess import ProcStatus, running_from
    from patchaudit.render.procs import process_line

    for report in running_from(env.site_dirs):
        lead = "may still run the old code" if report.status is ProcStatus.MAYBE else "still running the old code"
        click.echo(f"{lead}: {process_line(report)}", err=True)
