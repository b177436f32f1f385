"""`patchaudit gate`: the pre-start check, quiet and fail-closed (core in patchaudit.gate)."""

from __future__ import annotations

from pathlib import Path

import click

from patchaudit.cli.common import given_root, root_option, target_options, timeout_option
from patchaudit.cli.fastgate import run_gate
from patchaudit.report import FAIL_ON_CHOICES


@click.command()
@click.argument("dists", nargs=-1)
@target_options
@root_option
@click.option("--policy", type=click.Path(path_type=Path, dir_okay=False), help="Policy TOML (or a pyproject.toml).")
@click.option("--baseline", type=click.Path(path_type=Path, dir_okay=False), help="Hold to this baseline.")
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON_CHOICES),
    help="Lowest finding severity that fails the gate (default: the policy's, else high).",
)
@click.option("--fail-open", is_flag=True, help="Let an internal error or unreadable input pass (exit 0).")
@click.option("--no-cache", is_flag=True, help="Verify from scratch; neither read nor write the caches.")
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Keep the caches below DIR (one directory per environment), e.g. when the environment is read-only.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["journal", "prometheus"]),
    default="journal",
    show_default=True,
    help="Journal lines, or node_exporter textfile text.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    help="Worker processes (default: the policy's, else every CPU this process may use).",
)
@timeout_option("default: the policy's, else 120")
@click.option(
    "--image", help="Gate an image read layer by layer: oci:DIR[:TAG], oci-archive:FILE, docker-archive:FILE."
)
@click.option(
    "--serve",
    metavar="MODEL",
    help="Say what runs for MODEL (default: the policy's `serve`); `auto`: the model in this unit's ExecStart=.",
)
def gate(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    policy: Path | None,
    baseline: Path | None,
    fail_on: str | None,
    fail_open: bool,
    no_cache: bool,
    cache_dir: Path | None,
    workers: int | None,
    fmt: str,
    timeout: float | None,
    image: str | None,
    serve: str | None,
) -> int:
    """Verify DISTS (default: the policy's, else all) before a service starts; exit 0 only when clean."""
    return run_gate(
        dists,
        python=python,
        site_path=site_path,
        policy=policy,
        baseline=baseline,
        fail_on=fail_on,
        fail_open=fail_open,
        no_cache=no_cache,
        cache_dir=cache_dir,
        workers=workers,
        fmt=fmt,
        timeout=timeout,
        root=given_root(),
        image=image,
        serve=serve,
    )
