"""`patchaudit errata WHEEL...`: read off a wheel the members its own RECORD is wrong about."""

from __future__ import annotations

from pathlib import Path

import click

from patchaudit.cli.common import write_output
from patchaudit.cli.examples import examples
from patchaudit.cli.options import out_option
from patchaudit.errors import ExitCode


@click.command(epilog=examples("errata"))
@click.argument("wheels", nargs=-1, type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--list", "list_shipped", is_flag=True, help="List the errata patchaudit ships, one wheel a line.")
@out_option
def errata(wheels: tuple[Path, ...], list_shipped: bool, out: Path | None) -> int:
    """Print an errata table for each WHEEL whose RECORD disagrees with its members (--list: those shipped).

    Add the output to a file the policy's `errata` key (or `scan --errata`) names: an installed file
    whose RECORD line and bytes are the ones printed is then `record-mismatch`, naming the wheel, on a
    host that has no copy of it. A wheel whose RECORD is right prints nothing and is said so on stderr.
    """
    from patchaudit.check import errata as errata_mod

    if list_shipped:
        if wheels:
            raise click.UsageError("--list takes no WHEEL")
        by_wheel: dict[str, list[errata_mod.Erratum]] = {}
        for item in errata_mod.shipped():
            by_wheel.setdefault(item.wheel, []).append(item)
        lines = []
        for filename, items in by_wheel.items():
            paths = ", ".join(i.path for i in items)
            lines.append(f"{items[0].project} {items[0].version}: {filename}: {len(items)} member(s): {paths}\n")
        lines.append(f"{len(by_wheel)} wheels in {errata_mod.SHIPPED}\n")
        write_output("".join(lines), out)
        return ExitCode.CLEAN
    if not wheels:
        raise click.UsageError("give one or more WHEEL files, or --list for the shipped errata")
    tables = []
    for wheel in wheels:
        sha256, wrong = errata_mod.read_wheel(wheel)
        if not wrong:
            click.echo(f"patchaudit: {wheel.name}: its RECORD agrees with every member", err=True)
            continue
        tables.append(errata_mod.to_toml(wheel.name, sha256, wrong))
    write_output("\n".join(tables), out)
    return ExitCode.CLEAN
