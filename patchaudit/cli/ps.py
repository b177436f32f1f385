"""`patchaudit ps`: which Python processes still run code that changed since they started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from patchaudit.cli.common import write_output
from patchaudit.cli.examples import examples
from patchaudit.cli.options import format_option, out_option, serve_option, target_group
from patchaudit.errors import ExitCode


@click.command(epilog=examples("ps"), short_help="Python processes that still run code changed since they started.")
@target_group(root=False)
@click.option("--unit", help="Only the processes of this systemd unit (found through its cgroup).")
@click.option("--pid", "pids", multiple=True, type=click.IntRange(1), help="Only this process (repeatable).")
@format_option("human", "json")
@out_option
@click.option("-v", "--verbose", is_flag=True, help="List processes that run what is on disk too.")
@serve_option
def ps(
    python: Path | None,
    site_path: Path | None,
    unit: str | None,
    pids: tuple[int, ...],
    fmt: str,
    out: Path | None,
    verbose: bool,
    serve: str | None,
) -> int:
    """Python processes (default: all on this host; --python/--path: those that run from that
    environment) and the changed files they still run."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.procs.assess import ProcStatus, assess
    from patchaudit.render import procs as render

    if unit is not None and pids:
        raise PatchAuditError("give --unit or --pid, not both")
    if unit is not None:
        from patchaudit.gate.systemd import unit_name

        unit = unit_name(unit)
    reports = assess(unit=unit, pids=pids)
    if python is not None or site_path is not None:
        reports = _running_from(reports, python, site_path)
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


def _running_from(reports: list[Any], python: Path | None, site_path: Path | None) -> list[Any]:
    """The processes whose site directories include one of the target environment's."""
    import os

    from patchaudit.cli.common import open_environment

    wanted = {os.path.realpath(s) for s in open_environment(python, site_path).site_dirs}
    return [r for r in reports if r.env is not None and wanted.intersection(map(os.path.realpath, r.env.site_dirs))]


def name_stale(env: Any) -> None:
    """After a revert or a restore: name the processes that still run the old code (stderr)."""
    from patchaudit.procs.assess import ProcStatus, running_from
    from patchaudit.render.procs import process_line

    for report in running_from(env.site_dirs):
        lead = "may still run the old code" if report.status is ProcStatus.MAYBE else "still running the old code"
        click.echo(f"{lead}: {process_line(report)}", err=True)
