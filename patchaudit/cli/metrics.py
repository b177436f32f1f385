"""`patchaudit metrics --textfile DIR`: the gate's verdict as a node_exporter textfile."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from patchaudit.cli.common import target_options


@click.command()
@click.argument("dists", nargs=-1)
@target_options
@click.option(
    "--textfile",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="node_exporter's textfile-collector directory; patchaudit.prom is replaced there atomically.",
)
@click.option("--policy", type=click.Path(path_type=Path, dir_okay=False), help="Policy TOML (as for the gate).")
@click.option("--no-cache", is_flag=True, help="Verify from scratch; neither read nor write the caches.")
def metrics(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    textfile: Path,
    policy: Path | None,
    no_cache: bool,
) -> int:
    """Run the gate over DISTS and write its verdict for Prometheus; exit as the gate does."""
    from patchaudit.gate import GateOptions, run
    from patchaudit.render.journal import summary_line
    from patchaudit.render.prometheus import FILE_NAME, from_verdict, render_prometheus, write_textfile

    verdict = run(GateOptions(names=dists, policy=policy, python=python, site_path=site_path, use_cache=not no_cache))
    target = str(python or site_path or policy or sys.executable)
    path = write_textfile(textfile / FILE_NAME, render_prometheus(from_verdict(verdict, target=target)))
    click.echo(f"wrote {path}: {summary_line(verdict)}")
    return verdict.exit_code
