"""`patchaudit diff DIST [PATH...]`: the patches, as a unified diff `patch -p0` re-applies."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from patchaudit.cli.common import dist_paths, open_environment
from patchaudit.cli.examples import examples
from patchaudit.cli.options import serve_option, target_group, wheelhouse_option
from patchaudit.errors import ExitCode


@click.command(epilog=examples("diff"))
@click.argument("dist")
@click.argument("paths", nargs=-1)
@target_group(root=True, image=True)
@wheelhouse_option
@click.option("--color/--no-color", default=None, help="Colour the diff (default: only on a terminal).")
@serve_option
def diff(
    dist: str,
    paths: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    wheelhouse: tuple[Path, ...],
    color: bool | None,
    image: str | None,
    serve: str | None,
) -> int:
    """Show what changed in DIST (or in PATHs of it): pristine -> installed, paths relative to site-packages."""
    if image is not None:
        from patchaudit.image.verify import ImageOptions, diff_image

        options = ImageOptions(names=(dist,), hazards=False, wheelhouse=wheelhouse)
        return _show(diff_image(image, options, paths), color)
    from patchaudit.check import vcs
    from patchaudit.check.verify import verify
    from patchaudit.pristine.diff import diff_dist
    from patchaudit.target import environment

    env = open_environment(python, site_path)
    every = environment.distributions(env)
    environment.require_any(env, every)
    (target,) = environment.select(every, [dist])[:1]
    paths = dist_paths(target, paths)
    text = vcs.working_tree_diff(target, paths)
    if text is None:
        (report,) = verify(env, [target], every=every).distributions
        diffs = diff_dist(env, target, report, paths=paths, wheelhouse=wheelhouse)
        if serve:
            diffs = _by_reach(env, report, diffs, serve)
        text = "".join(d.text for d in diffs)
        shown = {
            os.path.normpath(p).replace(os.sep, "/") for p in [d.path for d in report.drift] + [d.path for d in diffs]
        }
        for path in paths:
            if os.path.normpath(path).replace(os.sep, "/") not in shown:
                click.echo(f"patchaudit: {path}: not drifted", err=True)
    return _show(text, color)


def _show(text: str, color: bool | None) -> int:
    if color is None:
        color = sys.stdout.isatty()
    if color and text:
        from rich.console import Console
        from rich.syntax import Syntax

        Console(force_terminal=True, soft_wrap=True).print(Syntax(text, "diff", theme="ansi_dark"))
    else:
        out = sys.stdout.buffer
        out.write(text.encode("utf-8", "surrogateescape"))
        out.flush()
    return ExitCode.PROBLEMS if text else ExitCode.CLEAN


def _by_reach(env: Any, report: Any, diffs: list[Any], serve: str) -> list[Any]:
    """The diffs of files that run for the served model first; each file's reach on stderr."""
    from patchaudit.cli.common import with_reach
    from patchaudit.report import Report, Target

    annotated = with_reach(
        Report(target=Target(python=None, paths=()), distributions=(report,)), env, serve, None, None
    )
    reach = {d.path: d.reach for d in annotated.distributions[0].drift}
    order = {"runs": 0, "unknown": 1, "shared": 2, "other-model": 3}
    diffs = sorted(diffs, key=lambda d: order.get(reach[d.path].kind.value if reach.get(d.path) else "", 1))
    for d in diffs:
        r = reach.get(d.path)
        if r is not None:
            via = f" via {' -> '.join(r.via)}" if r.via and r.kind.value == "runs" else ""
            click.echo(f"patchaudit: {d.path}: {r.kind.value}{via}", err=True)
    return diffs
