"""`patchaudit model scan|diff|revert`: the model directory a service loads (core in patchaudit.models)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from patchaudit.cli.common import write_output
from patchaudit.cli.examples import examples
from patchaudit.cli.options import (
    F,
    dry_run_option,
    fail_on_option,
    format_option,
    from_renamed,
    no_cache_option,
    out_option,
    renamed,
    severity_or_none,
    yes_option,
)
from patchaudit.errors import ExitCode

if TYPE_CHECKING:
    from patchaudit.models.layout import ModelTarget
    from patchaudit.models.scan import ModelScan, ModelScanOptions


def _target_options(func: F) -> F:
    func = click.option(
        "--source",
        "sources",
        multiple=True,
        type=click.Path(path_type=Path, file_okay=False, exists=True),
        help="Another hub cache, repo folder, --local-dir tree or plain directory holding identical files, "
        "to take pristine bytes from; every file is used only if it hashes as recorded (repeatable).",
    )(func)
    func = click.option(
        "--hub-cache",
        type=click.Path(path_type=Path, file_okay=False),
        envvar="HF_HUB_CACHE",
        callback=from_renamed,
        help="Hugging Face hub cache holding REPO_ID (default: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub).",
    )(func)
    func = renamed("--cache-dir", "--hub-cache", "hub_cache", type=click.Path(path_type=Path, file_okay=False))(func)
    func = click.option("--revision", help="A ref (main), a commit or a commit prefix (default: every snapshot).")(func)
    return func


def _resolve(spec: str, revision: str | None, hub_cache: Path | None) -> ModelTarget:
    from patchaudit.models import layout
    from patchaudit.models.revert import recover

    target = layout.resolve(spec, revision=revision, cache_dir=hub_cache)
    if (target.state_dir / "journal").exists():
        for message in recover(target):
            click.echo(f"patchaudit: {message}", err=True)
    return target


def _scan(target: ModelTarget, options: ModelScanOptions) -> ModelScan:
    from patchaudit.models.scan import scan_model

    return scan_model(target, options)


@click.group(epilog=examples("model"))
def model() -> None:
    """Model directories: Hub cache repos, `hf download --local-dir` trees, manifest'd copies. Offline."""


@model.command(epilog=examples("model scan"))
@click.argument("targets", nargs=-1, required=True)
@_target_options
@format_option("human", "json", "sarif")
@out_option
@click.option("--deep", is_flag=True, help="Re-hash every file, ignoring the stat cache.")
@no_cache_option
@click.option(
    "--threads", type=click.IntRange(1, 256), callback=from_renamed, help="Hashing threads (default: one per core)."
)
@renamed("--workers", "--threads", "threads", type=click.IntRange(1, 256))
@click.option("-v", "--verbose", is_flag=True, help="Show expected and actual hashes.")
@fail_on_option
def scan(
    targets: tuple[str, ...],
    revision: str | None,
    hub_cache: Path | None,
    sources: tuple[Path, ...],
    fmt: str,
    out: Path | None,
    deep: bool,
    no_cache: bool,
    threads: int | None,
    verbose: bool,
    fail_on: str | None,
) -> int:
    """Verify each of TARGETS (a model directory or a repo id in the hub cache) against its own records."""
    from patchaudit.models.scan import ModelScanOptions
    from patchaudit.report import Report, Target, now_utc

    started = now_utc()
    options = ModelScanOptions(deep=deep, use_cache=not no_cache, workers=threads, sources=sources)
    resolved = [_resolve(t, revision, hub_cache) for t in targets]
    models = tuple(_scan(t, options).report for t in resolved)
    report = Report(target=Target(python=None, paths=()), distributions=(), models=models, started=started)
    if fmt == "json":
        from patchaudit.render.json import render_json

        write_output(render_json(report), out)
    elif fmt == "sarif":
        from patchaudit.render.json import dumps
        from patchaudit.render.sarif import render_sarif

        write_output(dumps(render_sarif(report, []), indent=2) + "\n", out)
    else:
        from patchaudit.render.models import model_lines

        lines = [line for m in models for line in model_lines(m, verbose=verbose)]
        write_output("\n".join(lines) + "\n", out)
    return ExitCode.PROBLEMS if report.fails(severity_or_none(fail_on)) else ExitCode.CLEAN


@model.command(epilog=examples("model diff"))
@click.argument("target")
@click.argument("paths", nargs=-1)
@_target_options
def diff(
    target: str, paths: tuple[str, ...], revision: str | None, hub_cache: Path | None, sources: tuple[Path, ...]
) -> int:
    """What changed in TARGET's files: JSON configs by key path, other text as a unified diff."""
    from patchaudit.models.configdiff import is_config
    from patchaudit.models.revert import selected
    from patchaudit.models.scan import ModelScanOptions, current_bytes
    from patchaudit.pristine.diff import unified

    found = _scan(_resolve(target, revision, hub_cache), ModelScanOptions(sources=sources))
    changes: dict[str, list[str]] = {}
    for change in found.report.changes:
        changes.setdefault(change.file, []).append(change.text())
    shown = 0
    for item in found.layout.files:
        if item.state is None or not selected(item, paths):
            continue
        shown += 1
        click.echo(f"{item.state.value} {item.path}" + (f"  ({item.note})" if item.note else ""))
        if item.path in changes:
            for text in changes[item.path]:
                click.echo(f"    {text}")
            continue
        old = found.pristine.get(item.path)
        if old is None and item.expected is not None and not is_config(item.repo_path):
            hit = found.sources.find(item.expected, 64 << 20)
            old = hit[0] if hit else None
        new = current_bytes(item, 64 << 20)
        if item.state.value == "modified" and item.path not in found.pristine and old is not None and new is not None:
            text, _binary = unified(item.path, old, new)
            click.echo(text, nl=False)
        elif item.state.value == "modified" and old is None:
            click.echo(
                "    (no pristine copy at hand offline: `patchaudit model revert` prints the command to fetch it)"
            )
    if not shown:
        click.echo("no drift")
    return ExitCode.PROBLEMS if shown else ExitCode.CLEAN


@model.command(epilog=examples("model revert"))
@click.argument("target")
@click.argument("paths", nargs=-1)
@_target_options
@dry_run_option
@yes_option
def revert(
    target: str,
    paths: tuple[str, ...],
    revision: str | None,
    hub_cache: Path | None,
    sources: tuple[Path, ...],
    dry_run: bool,
    yes: bool,
) -> int:
    """Put TARGET's drifted files (or PATHS of them) back; every replaced byte is quarantined first."""
    from patchaudit.models import revert as core
    from patchaudit.models.scan import ModelScanOptions

    resolved = _resolve(target, revision, hub_cache)
    found = _scan(resolved, ModelScanOptions(use_cache=False, sources=sources))
    made = core.plan(found, paths)
    if made.plan.actions and not dry_run:
        from patchaudit.cli.common import confirm_change

        def show() -> None:
            for action in made.plan.actions:
                click.echo(f"  {action.kind.value:<7} {action.path}")

        noun = "file" if len(made.plan.actions) == 1 else "files"
        confirm_change(f"Revert {len(made.plan.actions)} {noun} of {resolved.name}?", yes=yes, fmt="human", show=show)
    result = core.execute(resolved, made, dry_run=dry_run)
    verb = "would " if dry_run else ""
    links = {a.path for a in made.plan.actions if a.kind == "symlink"}
    for path in result.restored:
        click.echo(f"{verb}{'relink ' if path in links else 'restore'} {path}")
    for path in result.removed:
        click.echo(f"{verb}remove  {path}")
    for refusal in result.refused:
        click.echo(f"refused {refusal.path}: {refusal.reason}")
    for path in result.unverified:
        click.echo(f"NOT VERIFIED {path}: does not hash to the pristine value after the revert")
    if result.quarantine is not None:
        from patchaudit.cli.common import echo_command, target_args

        click.echo(f"quarantine: {result.quarantine}")
        echo_command("undo", f"patchaudit quarantine restore {result.run_id}{target_args(None, resolved.root)}")
    if made.commands:
        click.echo("to restore the rest, run:")
        for command in made.commands:
            click.echo(f"  {command}")
    if not (result.restored or result.removed or result.refused):
        click.echo("nothing to revert")
    return ExitCode.PROBLEMS if result.refused or result.unverified else ExitCode.CLEAN
