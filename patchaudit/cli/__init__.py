"""The `patchaudit` command: a lazy click group, so each command imports only what it needs."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # no typing import: `patchaudit gate` pays for every module on its path
if TYPE_CHECKING:
    from typing import Any

# command name -> "module:attribute"; a command's module is imported only when it runs.
COMMANDS: dict[str, str] = {
    "scan": "patchaudit.cli.scan:scan",
    "gate": "patchaudit.cli.gate:gate",
    "baseline": "patchaudit.cli.baseline:baseline",
    "systemd": "patchaudit.cli.systemd:systemd",
    "diff": "patchaudit.cli.diff:diff",
    "revert": "patchaudit.cli.revert:revert",
    "quarantine": "patchaudit.cli.quarantine:quarantine",
    "rules": "patchaudit.cli.rules:rules",
    "model": "patchaudit.cli.model:model",
    "ps": "patchaudit.cli.ps:ps",
    "metrics": "patchaudit.cli.metrics:metrics",
    "cluster": "patchaudit.cli.cluster:cluster",
    "errata": "patchaudit.cli.errata:errata",
}


def main(argv: list[str] | None = None) -> Any:
    args = sys.argv[1:] if argv is None else argv
    # The gate runs before every service start: it parses its few options without click.
    if args[:1] == ["gate"]:
        from patchaudit.cli.fastgate import fast_gate

        code = fast_gate(list(args[1:]))
        if code is not None:
            sys.exit(code)
    from patchaudit.cli.common import run
    from patchaudit.cli.group import cli

    return run(cli, argv)


def __getattr__(name: str) -> Any:
    # The click group lives in group.py so that importing this package does not import click.
    if name in ("cli", "LazyGroup"):
        from patchaudit.cli import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
