"""`patchaudit gate`: the pre-start check, quiet and fail-closed (core in patchaudit.gate)."""

from __future__ import annotations

from pathlib import Path

import click

from patchaudit.cli.examples import examples
from patchaudit.cli.fastgate import run_gate
from patchaudit.cli.options import (
    baseline_option,
    cache_dir_option,
    fail_on_option,
    format_option,
    given_root,
    no_cache_option,
    out_option,
    policy_option,
    serve_option,
    target_group,
    timeout_option,
    workers_option,
)


@click.command(epilog=examples("gate"))
@click.argument("dists", nargs=-1)
@target_group(root=True, image=True)
@policy_option
@baseline_option
@fail_on_option
@click.option("--fail-open", is_flag=True, help="Let an internal error or unreadable input pass (exit 0).")
@no_cache_option
@cache_dir_option
@format_option("journal", "prometheus", default="journal")
@out_option
@workers_option
@timeout_option("default: the policy's, else 120")
@serve_option
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
    out: Path | None,
    timeout: float | None,
    image: str | None,
    serve: str | None,
) -> int:
    """Verify DISTS (default: the policy's, else all) before a service starts; exit 0 only when clean.

    What is not given on the command line comes from the policy (`fail_on`, `workers`, `timeout`, `serve`).
    """
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
        out=out,
    )
