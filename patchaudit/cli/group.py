"""The click group behind `patchaudit`; commands are imported only when they run (see COMMANDS)."""

from __future__ import annotations

import importlib

import click

from patchaudit import __version__
from patchaudit.cli import COMMANDS
from patchaudit.cli.examples import examples


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """patchaudit's version, and the versions of what decides its verdicts: the rule pack, the errata."""
    if not value or ctx.resilient_parsing:
        return
    from patchaudit.check import errata
    from patchaudit.hazards import load_rules, pack_version
    from patchaudit.models.configrules import catalog

    rules = load_rules()
    shipped = errata.shipped()
    click.echo(f"patchaudit {__version__}")
    click.echo(f"rule pack {pack_version(rules)[:16]} ({len(rules)} code rules, {len(catalog())} config rules)")
    wheels = len({item.wheel for item in shipped})
    click.echo(f"errata {errata.digest()} ({wheels} wheels, {len(shipped)} members)")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=examples(""))
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show the version, the rule pack's and the shipped errata's, and exit.",
)
def cli() -> None:
    """Verify an installed Python environment against what its distributions shipped.

    Shell completion is click's own: eval "$(_PATCHAUDIT_COMPLETE=bash_source patchaudit)" in ~/.bashrc
    (zsh: zsh_source; fish: fish_source).
    """
