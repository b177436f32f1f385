"""`patchaudit metrics --textfile DIR`: the gate's verdict as a node_exporter textfile."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from patchaudit.cli.examples import examples
from patchaudit.cli.options import baseline_option, given_root, no_cache_option, policy_option, target_group


@click.command(epilog=examples("metrics"))
@click.argument("dists", nargs=-1)
@target_group(root=True)
@click.option(
    "--textfile",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="node_exporter's textfile-collector directory; this target's own .prom file is replaced there atomically.",
)
@click.option(
    "--name",
    help="Name the file patchaudit_NAME.prom (default: from the target's path, one file per environment).",
)
@policy_option
@baseline_option
@no_cache_option
def metrics(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    textfile: Path,
    name: str | None,
    policy: Path | None,
    baseline: Path | None,
    no_cache: bool,
) -> int:
    """Run the gate over DISTS and write its verdict for Prometheus; exit as the gate does."""
    from patchaudit.gate.core import GateOptions, run
    from patchaudit.render.journal import summary_line
    from patchaudit.render.prometheus import (
        from_verdict,
        previous_success,
        render_prometheus,
        textfile_name,
        write_textfile,
    )

    root = given_root()
    target = str(root or python or site_path or policy or sys.executable)
    where = textfile / textfile_name(target, name)
    options = GateOptions(
        names=dists,
        policy=policy,
        python=python,
        site_path=site_path,
        baseline=baseline,
        use_cache=not no_cache,
        root=root,
    )
    verdict = run(options)
    metrics = from_verdict(verdict, target=target, last_success=previous_success(where))
    path = write_textfile(where, render_prometheus(metrics))
    click.echo(f"wrote {path}: {summary_line(verdict)}")
    return verdict.exit_code
