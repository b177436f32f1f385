"""`patchaudit systemd install`: wire the gate into a service (core in patchaudit.systemd)."""

from __future__ import annotations

from pathlib import Path

import click

from patchaudit.errors import ExitCode


@click.group()
def systemd() -> None:
    """Run the gate before a systemd service starts."""


@systemd.command()
@click.argument("unit")
@click.option("--policy", required=True, type=click.Path(path_type=Path, dir_okay=False), help="Policy TOML.")
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("/"),
    show_default=True,
    help="Install below this root instead of /.",
)
@click.option("--warn-only", is_flag=True, help="Log problems but let the service start (ExecStartPre=-...).")
def install(unit: str, policy: Path, root: Path, warn_only: bool) -> int:
    """Write UNIT.d/patchaudit.conf so that `patchaudit gate --policy FILE` runs before UNIT starts."""
    from patchaudit.systemd import install as install_drop_in
    from patchaudit.systemd import unit_name

    path = install_drop_in(unit, policy=policy, root=root, warn_only=warn_only)
    click.echo(f"wrote {path}")
    if root == Path("/"):
        click.echo(f"next: systemctl daemon-reload && systemctl restart {unit_name(unit)}")
    return ExitCode.CLEAN
