"""`patchaudit systemd install`: wire the gate into a service (core in patchaudit.gate.systemd)."""

from __future__ import annotations

from pathlib import Path

import click

from patchaudit.cli.examples import examples
from patchaudit.errors import ExitCode


@click.group(epilog=examples("systemd"))
def systemd() -> None:
    """Run the gate before a systemd service starts."""


@systemd.command(epilog=examples("systemd install"))
@click.argument("unit")
@click.option(
    "--policy",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Policy TOML (or a pyproject.toml).",
)
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("/"),
    show_default=True,
    help="Install below this root instead of /.",
)
@click.option("--warn-only", is_flag=True, help="Log problems but let the service start (ExecStartPre=-...).")
@click.option("--timer", is_flag=True, help="Also write a timer that refreshes a node_exporter textfile.")
@click.option(
    "--textfile",
    type=click.Path(path_type=Path, file_okay=False),
    help="Textfile-collector directory for --timer (default: /var/lib/prometheus/node-exporter).",
)
@click.option("--interval", default="5min", show_default=True, help="How often the timer refreshes the metrics.")
def install(
    unit: str, policy: Path, root: Path, warn_only: bool, timer: bool, textfile: Path | None, interval: str
) -> int:
    """Write UNIT.d/patchaudit.conf so that `patchaudit gate --policy FILE` runs before UNIT starts."""
    from patchaudit.gate.systemd import METRICS_TEXTFILE_DIR, install_timer, unit_name
    from patchaudit.gate.systemd import install as install_drop_in

    path = install_drop_in(unit, policy=policy, root=root, warn_only=warn_only)
    click.echo(f"wrote {path}")
    timers: list[Path] = []
    if timer:
        timers = install_timer(
            unit, policy=policy, root=root, textfile=textfile or METRICS_TEXTFILE_DIR, interval=interval
        )
        for written in timers:
            click.echo(f"wrote {written}")
    _next(root, [f"systemctl restart {unit_name(unit)}"] + [f"systemctl enable --now {t.name}" for t in timers[-1:]])
    return ExitCode.CLEAN


def _next(root: Path, then: list[str]) -> None:
    """What to run next, one command a line (each runs as printed)."""
    if root == Path("/"):
        click.echo("next: systemctl daemon-reload")
        indent = "      "
    else:
        click.echo(f"next, on the system that boots from {root}:")
        click.echo("  systemctl daemon-reload")
        indent = "  "
    for command in then:
        click.echo(indent + command)


@systemd.command(epilog=examples("systemd uninstall"))
@click.argument("unit")
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("/"),
    show_default=True,
    help="Remove below this root instead of /.",
)
def uninstall(unit: str, root: Path) -> int:
    """Remove exactly what `systemd install UNIT` wrote (the drop-in, the metrics timer)."""
    from patchaudit.gate.systemd import uninstall as remove
    from patchaudit.gate.systemd import unit_name

    removed = remove(unit, root=root)
    for path in removed:
        click.echo(f"removed {path}")
    if not removed:
        click.echo(f"nothing of patchaudit's for {unit_name(unit)} below {root}")
        return ExitCode.CLEAN
    _next(root, [f"systemctl restart {unit_name(unit)}"])
    return ExitCode.CLEAN
