"""The `patchaudit` command: a lazy click group, so each command imports only what it needs."""

from __future__ import annotations

import importlib
from typing import Any

import click

from patchaudit import __version__

# command name -> "module:attribute"; a command's module is imported only when it runs.
COMMANDS: dict[str, str] = {
    "scan": "patchaudit.cli.scan:scan",
    "gate": "patchaudit.cli.gate:gate",
    "baseline": "patchaudit.cli.baseline:baseline",
    "systemd": "patchaudit.cli.systemd:systemd",
    "diff": "patchaudit.cli.diff:diff",
    "revert": "patchaudit.cli.revert:revert",
    "quarantine": "patchaudit.cli.quarantine:quarantine",
}


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


def main(argv: list[str] | None = None) -> Any:
    from patchaudit.cli.common import run

    return run(cli, argv)
