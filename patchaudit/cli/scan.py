"""`patchaudit scan`: report every file that differs from what its distribution shipped."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from patchaudit.cli.common import open_environment, target_args, with_reach, write_output
from patchaudit.cli.examples import examples
from patchaudit.cli.options import (
    cache_dir_option,
    fail_on_option,
    format_option,
    no_cache_option,
    out_option,
    rules_option,
    serve_option,
    severity_or_none,
    target_group,
    timeout_option,
    wheelhouse_option,
    workers_option,
)
from patchaudit.errors import ExitCode

if TYPE_CHECKING:
    from rich.progress import TaskID

    from patchaudit.check.audit import ScanOptions
    from patchaudit.image.verify import ImageOptions
    from patchaudit.report import Report
    from patchaudit.target.environment import Environment

PROGRESS_THRESHOLD = {"hashing": 2000, "rules": 200}  # files: fewer take no time worth a bar


@click.command(epilog=examples("scan"))
@click.argument("dists", nargs=-1)
@target_group(root=True, pid=True, image=True)
@format_option("human", "json", "sarif", "prometheus")
@out_option
@click.option("--no-hazards", is_flag=True, help="Skip the hazard rules; report drift only.")
@click.option("--all-files", is_flag=True, help="Run the hazard rules over every file, not only drifted ones.")
@rules_option
@click.option("--show-suppressed", is_flag=True, help="List findings silenced by '# patchaudit: ignore[...]'.")
@wheelhouse_option
@click.option("--fetch", is_flag=True, help="Also ask the package index for pristine bytes of drifted files.")
@click.option(
    "--errata",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="An errata file (`patchaudit errata WHEEL` writes one) of wheels whose RECORD is wrong (repeatable).",
)
@no_cache_option
@cache_dir_option
@workers_option
@timeout_option("exit 2; default: no limit")
@click.option("--base", help="With --image: report only what the layers above this base image changed.")
@click.option("-v", "--verbose", is_flag=True, help="List clean distributions, every finding and every packaging fact.")
@serve_option
@click.option("-q", "--quiet", is_flag=True, help="Print only what is wrong; nothing when clean.")
@fail_on_option
def scan(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    fmt: str,
    out: Path | None,
    no_hazards: bool,
    all_files: bool,
    rule_dirs: tuple[Path, ...],
    show_suppressed: bool,
    wheelhouse: tuple[Path, ...],
    fetch: bool,
    errata: tuple[Path, ...],
    no_cache: bool,
    cache_dir: Path | None,
    workers: int | None,
    image: str | None,
    base: str | None,
    verbose: bool,
    serve: str | None,
    quiet: bool,
    fail_on: str | None,
    timeout: float | None,
) -> int:
    """Verify DISTS (default: every distribution) of the target environment against their RECORDs."""
    from patchaudit.parallel.deadline import deadline

    started = time.monotonic()
    if image is not None or base is not None:
        from patchaudit.image.verify import ImageOptions

        with deadline(timeout):
            options = ImageOptions(
                names=dists,
                hazards=not no_hazards,
                base=base,
                workers=workers,
                all_files=all_files,
                rule_dirs=rule_dirs,
                wheelhouse=wheelhouse,
                errata=errata,
            )
            report = _scan_image(image, python, site_path, options)
        target = image or ""
    else:
        report, target = _scan_env(
            python,
            site_path,
            dists,
            no_hazards,
            all_files,
            rule_dirs,
            no_cache,
            cache_dir,
            workers,
            wheelhouse,
            fetch,
            errata,
            fmt,
            out,
            timeout,
            serve,
            quiet,
        )
    duration = time.monotonic() - started
    again = None  # an image is not reverted or diffed: no next steps
    if image is None and base is None:
        import shlex

        houses = "".join(f" --wheelhouse {shlex.quote(os.path.abspath(w))}" for w in wheelhouse)
        again = target_args(python, site_path) + houses
    shown = _Shown(quiet=quiet, hazards=not no_hazards, again=again)
    return _render(report, target, fmt, out, rule_dirs, verbose, show_suppressed, fail_on, duration, shown)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Shown:
    """How the human view is cut: -q, whether rules ran, the target options for the next steps."""

    quiet: bool
    hazards: bool
    again: str | None


def _scan_image(image: str | None, python: Path | None, site_path: Path | None, options: ImageOptions) -> Report:
    from patchaudit.cli.options import given_root

    if image is None:
        raise click.UsageError("--base needs --image")
    if python is not None or site_path is not None or given_root() is not None:
        raise click.UsageError("--image takes no --python, --path or --root")
    from patchaudit.image.verify import scan_image

    return scan_image(image, options)


def _scan_env(
    python: Path | None,
    site_path: Path | None,
    dists: tuple[str, ...],
    no_hazards: bool,
    all_files: bool,
    rule_dirs: tuple[Path, ...],
    no_cache: bool,
    cache_dir: Path | None,
    workers: int | None,
    wheelhouse: tuple[Path, ...],
    fetch: bool,
    errata: tuple[Path, ...],
    fmt: str,
    out: Path | None,
    timeout: float | None,
    serve: str | None,
    quiet: bool,
) -> tuple[Report, str]:
    from patchaudit.check.audit import ScanOptions
    from patchaudit.check.audit import scan as run_scan
    from patchaudit.parallel.deadline import deadline

    env = open_environment(python, site_path)
    options = ScanOptions(
        names=dists,
        hazards=not no_hazards,
        all_files=all_files,
        rule_dirs=rule_dirs,
        use_cache=not no_cache,
        cache_dir=cache_dir,
        workers=workers,
        wheelhouse=wheelhouse,
        fetch=fetch,
        errata=errata,
    )
    with deadline(timeout):
        if fmt == "human" and out is None and sys.stderr.isatty() and not quiet:
            report = _scan_with_progress(env, options)
        else:
            report = run_scan(env, options, meanwhile=lambda: _renderer(fmt))
        if serve:
            from patchaudit.check.audit import cache_dir as scan_cache_dir

            report = with_reach(report, env, serve, scan_cache_dir(env, options), workers, wheelhouse)
    pending = env.interrupted_runs()
    if pending:
        import dataclasses

        environment = dataclasses.replace(report.environment, interrupted_runs=tuple(pending))
        report = dataclasses.replace(report, environment=environment)
    return report, str(env.python or (env.site_dirs[0] if env.site_dirs else env.prefix))


def _renderer(fmt: str) -> None:
    """Import what rendering `fmt` takes (while the workers hash: see check.audit.scan)."""
    if fmt == "json":
        import patchaudit.render.json  # noqa: F401
    elif fmt == "human":
        import rich.console  # noqa: F401

        import patchaudit.render.human  # noqa: F401


def _render(
    report: Report,
    target: str,
    fmt: str,
    out: Path | None,
    rule_dirs: tuple[Path, ...],
    verbose: bool,
    show_suppressed: bool,
    fail_on: str | None,
    duration: float,
    shown: _Shown,
) -> int:
    if fmt == "json":
        from patchaudit.render.json import render_json

        write_output(render_json(report), out)
    elif fmt == "prometheus":
        from patchaudit.render.prometheus import from_report, render_prometheus

        ok = not report.fails(severity_or_none(fail_on))
        metrics = from_report(report, ok=ok, target=target, duration=duration)
        write_output(render_prometheus(metrics), out)
    elif fmt == "sarif":
        from patchaudit.hazards import load_rules
        from patchaudit.render.json import dumps
        from patchaudit.render.sarif import render_sarif

        write_output(dumps(render_sarif(report, load_rules(rule_dirs)), indent=2) + "\n", out)
    else:
        from rich.console import Console

        from patchaudit.render.human import render_human

        steps = next_steps(report, shown.again) if shown.again is not None else []

        def show(console: Console) -> None:
            render_human(
                report,
                console,
                verbose=verbose,
                show_suppressed=show_suppressed,
                quiet=shown.quiet,
                hazards=shown.hazards,
                next_steps=steps,
            )

        if out is None:
            show(Console())
        else:
            try:
                with open(out, "w") as fh:
                    show(Console(file=fh, no_color=True, width=160))
            except OSError as exc:
                from patchaudit.errors import PatchAuditError

                raise PatchAuditError(f"cannot write {out}: {exc.strerror}") from None
    return ExitCode.PROBLEMS if report.fails(severity_or_none(fail_on)) else ExitCode.CLEAN


def next_steps(report: Report, again: str) -> list[str]:
    """What to run next on drift, as `git status` says it: see the patch, put it back."""
    drifted = [d for d in report.distributions if d.drift]
    if not drifted:
        return []
    first = drifted[0].name
    which = first if len(drifted) == 1 else ""
    return [f"patchaudit diff {first}{again}", f"patchaudit revert {which + ' ' if which else ''}--dry-run{again}"]


def _scan_with_progress(env: Environment, options: ScanOptions) -> Report:
    """The scan with a bar per long phase on stderr, in the report's own unit: files."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from patchaudit.check.audit import scan as run_scan

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        auto_refresh=False,  # no refresh thread: the workers can then fork (patchaudit.parallel.workers)
    ) as progress:
        tasks: dict[str, TaskID] = {}
        shown = 0.0

        def update(phase: str, done: int, total: int | None) -> None:
            nonlocal shown
            if phase not in tasks:
                for earlier in tasks.values():
                    progress.update(earlier, visible=False)
                tasks[phase] = progress.add_task(phase, total=None, visible=False)
            task = tasks[phase]
            visible = (done if total is None else total) >= PROGRESS_THRESHOLD[phase]
            progress.update(task, completed=done, total=total, visible=visible)
            if visible and (done == total or time.monotonic() - shown >= 0.1):
                progress.refresh()
                shown = time.monotonic()

        return run_scan(env, options, progress=update)
