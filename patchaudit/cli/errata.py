"""`patchaudit errata WHEEL...`: read off a wheel the members its own RECORD is wrong about."""

from __future__ import annotations

from pathlib import Path

import click

from patchaudit.errors import ExitCode


@click.command()
@click.argument("wheels", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False, exists=True))
def errata(wheels: tuple[Path, ...]) -> int:
    """Print an errata table for each WHEEL whose RECORD disagrees with its members.

    Add the output to a file the policy's `errata` key (or `scan --errata`) names: an installed file
    whose RECORD line and bytes are the ones printed is then `record-mismatch`, naming the wheel, on a
    host that has no copy of it. A wheel whose RECORD is right prints nothing and is said so on stderr.
    """
    from patchaudit import errata as errata_mod

    tables = []
    for wheel in wheels:
        sha256, wrong = errata_mod.read_wheel(wheel)
        if not wrong:
            click.echo(f"patchaudit: {wheel.name}: its RECORD agrees with every member", err=True)
            continue
        tables.append(errata_mod.to_toml(wheel.name, sha256, wrong))
    click.echo("\n".join(tables), nl=False)
    return ExitCode.CLEAN
