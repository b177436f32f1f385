"""What every command shares: opening the target, errors mapped to exit codes, asking before a change,
writing output (the options themselves are declared in patchaudit.cli.options)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from patchaudit.cli.options import given_root
from patchaudit.errors import ExitCode, PatchAuditError


def run(group: click.Group, argv: list[str] | None) -> Any:
    """Run the group; map PatchAuditError to one line and exit 2, bugs to exit 3."""
    try:
        rv = group.main(args=argv, prog_name="patchaudit", standalone_mode=False)
    except BaseException as exc:
        from patchaudit.parallel.children import stopping

        if stopping() is not None or isinstance(exc, KeyboardInterrupt):
            # a signal unwinds whatever it interrupted (click's Abort, an import, a worker's end):
            # patchaudit.cli.main says so and exits 130/143
            raise KeyboardInterrupt from None
        _fail(exc)
    sys.exit(rv if isinstance(rv, int) and ExitCode.CLEAN <= rv <= ExitCode.INTERNAL else ExitCode.CLEAN)


def _error(message: str) -> None:
    """An error is one line for logs and pipes; on a terminal it wraps between words to its width."""
    if sys.stderr.isatty():
        import shutil
        import textwrap

        width = shutil.get_terminal_size().columns
        message = textwrap.fill(message, width, break_long_words=False, break_on_hyphens=False, subsequent_indent="  ")
    click.echo(message, err=True)


def _fail(exc: BaseException) -> None:
    """Exit with the code and the one line `exc` calls for."""
    if isinstance(exc, PatchAuditError):
        message = f"patchaudit: error: {exc}"
        if exc.hint:
            message += f" (hint: {exc.hint})"
        _error(message)
        sys.exit(ExitCode.USAGE)
    if isinstance(exc, click.exceptions.Abort):
        click.echo("patchaudit: aborted", err=True)
        sys.exit(ExitCode.USAGE)
    if isinstance(exc, click.UsageError):  # one line, as every other error
        where = exc.ctx.command_path if exc.ctx is not None else "patchaudit"
        _error(f"patchaudit: error: {exc.format_message()} (hint: {where} --help)")
        sys.exit(ExitCode.USAGE)
    if isinstance(exc, click.ClickException):
        _error(f"patchaudit: error: {exc.format_message()}")
        sys.exit(ExitCode.USAGE)
    if isinstance(exc, click.exceptions.Exit):
        sys.exit(exc.exit_code)
    if isinstance(exc, BrokenPipeError):
        sys.exit(ExitCode.PROBLEMS)
    if not isinstance(exc, Exception):
        raise exc
    import traceback

    traceback.print_exception(exc)
    click.echo("patchaudit: internal error (this is a bug)", err=True)
    sys.exit(ExitCode.INTERNAL)


def open_environment(python: Path | None, site_path: Path | None) -> Any:
    """Resolve the target, read-only: a revert that was killed half-way is reported on stderr, never touched."""
    env = _resolve(python, site_path)
    pending = env.interrupted_runs()
    if pending:
        from patchaudit.revert.recovery import interrupted_message

        click.echo(f"patchaudit: {interrupted_message(env, pending)}", err=True)
    return env


def _resolve(python: Path | None, site_path: Path | None) -> Any:
    from patchaudit.target import environment

    root = given_root()
    env = environment.resolve(python, site_path, root)
    if root is not None:
        return env
    if env.not_executed is not None:
        click.echo(
            f"patchaudit: layout read from pyvenv.cfg and the directory tree; {env.python} was not run"
            f" as root because {env.not_executed}",
            err=True,
        )
    return env


def open_for_change(python: Path | None, site_path: Path | None) -> tuple[Any, list[Any], tuple[str, ...]]:
    """Resolve the target for a command that writes (revert, quarantine restore): finish or roll back an
    interrupted revert first. Returns (env, its distributions, its editable installs' project roots)."""
    from patchaudit.check import vcs
    from patchaudit.target import environment

    env = _resolve(python, site_path)
    every = environment.distributions(env)
    roots = vcs.project_roots(every)
    if env.interrupted_runs():
        from patchaudit import revert

        for message in revert.recover(env, roots=roots):
            click.echo(f"patchaudit: {message}", err=True)
    return env, every, roots


def target_args(python: Path | None, site_path: Path | None) -> str:
    """The target options again, as a hint that runs as printed from any directory: absolute, quoted."""
    import shlex

    if python is not None:
        return f" --python {shlex.quote(os.path.abspath(python))}"
    if site_path is not None:
        return f" --path {shlex.quote(os.path.abspath(site_path))}"
    root = given_root()
    if root is not None:
        return f" --root {shlex.quote(os.path.abspath(root))}"
    return ""


def echo_command(label: str, command: str) -> None:
    """`label: command`, the command laid out to the terminal's width (backslash-continued, so that
    it still runs pasted whole); one line when not on a terminal."""
    import shutil

    from patchaudit.render.human import command_lines

    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    for line in command_lines(command, width, first=f"{label}: ", rest=" " * (len(label) + 4)):
        click.echo(line)


def confirm_change(question: str, *, yes: bool, fmt: str, show: Callable[[], None] | None = None) -> None:
    """Ask before a command changes files (`show` lists them first); without a terminal to ask on,
    refuse unless told --yes, as apt-get does: an answer piped in is not a consent."""
    if yes:
        return
    if fmt == "human" and sys.stdin.isatty():
        if show is not None:
            show()
        click.confirm(question, abort=True)
        return
    raise PatchAuditError(
        "this changes files and there is no terminal to ask on; nothing was changed",
        hint="add -y/--yes to go ahead, or --dry-run to see what would change",
    )


def dist_paths(dist: Any, paths: tuple[str, ...]) -> tuple[str, ...]:
    """PATHs as a shell user types them (absolute, relative to the current directory, or relative to
    the site directory as RECORD writes them), each as RECORD writes it; one that the distribution
    neither lists nor holds is an error: no such file in DIST. For an editable install from a git
    checkout, paths are the project's, and git says what is there."""
    from patchaudit.check import vcs
    from patchaudit.check.ownership import read_record
    from patchaudit.target.record import parse_record

    if not paths:
        return paths
    co = vcs.checkout(dist)
    location = os.path.abspath(co.project if co is not None else dist.location)
    raw = read_record(dist) if co is None else None
    listed = {os.path.normpath(e.path) for e in parse_record(raw).entries} if raw else set()
    out: list[str] = []
    for typed in paths:
        rel = typed
        here = os.path.abspath(typed)
        if os.path.isabs(typed) or os.path.lexists(typed):
            if os.path.commonpath([here, location]) == location:
                rel = os.path.relpath(here, location)
            elif os.path.isabs(typed):
                raise PatchAuditError(f"{typed} is not in {dist.name}'s directory {location}")
        rel = os.path.normpath(rel)
        if co is None and rel not in listed and not os.path.lexists(os.path.join(location, rel)):
            raise PatchAuditError(f"no such file in {dist.name}: {typed}")
        out.append(rel.replace(os.sep, "/"))
    return tuple(out)


def write_output(text: str, out: Path | None) -> None:
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        out.write_bytes(text.encode("utf-8", "surrogateescape"))  # a file name's bytes as they were
    except OSError as exc:
        from patchaudit.errors import PatchAuditError

        raise PatchAuditError(f"cannot write {out}: {exc.strerror}") from None


def with_reach(
    report: Any,
    env: Any,
    serve: str | None,
    cache_dir: Path | None,
    workers: int | None,
    wheelhouse: tuple[Path, ...] = (),
) -> Any:
    """`report` annotated with each file's reach for the served model (unchanged without --serve)."""
    if not serve:
        return report
    from patchaudit.serving.annotate import ServeOptions, annotate
    from patchaudit.serving.argv import resolve_spec

    model = resolve_spec(serve)
    options = ServeOptions(model=model, cache_dir=cache_dir, workers=workers or 2, wheelhouse=wheelhouse)
    return annotate(report, env, options)
