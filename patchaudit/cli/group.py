"""The click group behind `patchaudit`; commands are imported only when they run (see COMMANDS)."""

from __future__ import annotations

import importlib

import click

from patchaudit import __version__
from patchaudit.cli import COMMANDS


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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="patchaudit")
def cli() -> None:
    """Verify an installed Python environment against what its distributions shipped."""
