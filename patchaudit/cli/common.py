"""What every command shares: target options, error mapping to exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from patchaudit.errors import ExitCode, PatchAuditError
from patchaudit.report import FAIL_ON_CHOICES

F = TypeVar("F", bound=Callable[..., Any])


def target_options(func: F) -> F:
    """--python / --path: which environment to look at (default: the one running patchaudit)."""
    func = click.option(
        "--path",
        "site_path",
        type=click.Path(path_type=Path),
        help="A site-packages directory to audit.",
    )(func)
    func = click.option(
        "--python",
        "python",
        type=click.Path(path_type=Path),
        help="Interpreter of the environment to audit (default: patchaudit's own).",
    )(func)
    return func


def target_group(*, root: bool = True, pid: bool = False, image: bool = False) -> Callable[[F], F]:
    """The target group every command that reads an environment takes, declared once: --python,
    --path, and (where the command can read a tree or an image) --root, --pid, --image."""

    def apply(func: F) -> F:
        if image:
            func = image_option(func)
        if pid:
            func = pid_option(func)
        if root:
            func = root_option(func)
        return target_options(func)

    return apply


def image_option(func: F) -> F:
    """--image REF: an image read layer by layer from its blobs, nothing extracted, nothing run."""
    return click.option(
        "--image",
        metavar="REF",
        help="Read an image layer by layer, nothing extracted or run: oci:DIR[:TAG], oci-archive:FILE[:TAG],"
        " docker-archive:FILE[:REF].",
    )(func)


ROOT_KEY = "patchaudit.root"


def root_option(func: F) -> F:
    """--root DIR: audit a whole tree (an unpacked image, /proc/PID/root) as if it were `/`."""
    return click.option(
        "--root",
        type=click.Path(path_type=Path, file_okay=False),
        metavar="DIR",
        expose_value=False,
        is_eager=True,
        callback=_remember_root,
        help="Audit the tree at DIR as if it were / (an unpacked image, /proc/PID/root); nothing in it is run.",
    )(func)


def _remember_root(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.meta[ROOT_KEY] = value


def pid_option(func: F) -> F:
    """--pid PID: audit the environment a process runs from, through its root (`/proc/PID/root`)."""
    return click.option(
        "--pid",
        type=click.IntRange(1),
        expose_value=False,
        is_eager=True,
        callback=_remember_pid,
        help="Audit the tree process PID sees as / (a container's), through /proc/PID/root; nothing is run.",
    )(func)


def _remember_pid(ctx: click.Context, _param: click.Parameter, value: int | None) -> None:
    if value is not None:
        if ROOT_KEY in ctx.meta:
            raise click.UsageError("give --root or --pid, not both")
        ctx.meta[ROOT_KEY] = Path(f"/proc/{value}/root")


def refuse_image_option(func: F) -> F:
    """--image on a command that writes: refused, whatever else was asked (an image is never written)."""
    return click.option(
        "--image",
        expose_value=False,
        is_eager=True,
        callback=_refuse_image,
        help="Refused: an image is never written (unpack it and give the rootfs with --root).",
    )(func)


def _refuse_image(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        raise PatchAuditError(
            f"{ctx.info_name} never writes into an image ({value}): an image's layers are read-only",
            hint="unpack it (umoci unpack) and give the rootfs with --root",
        )


def given_root() -> Path | None:
    """The --root of the command being run, if any."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(ROOT_KEY) if ctx is not None else None


def run(group: click.Group, argv: list[str] | None) -> Any:
    """Run the group; map PatchAuditError to one line and exit 2, bugs to exit 3."""
    try:
        rv = group.main(args=argv, prog_name="patchaudit", standalone_mode=False)
    except BaseException as exc:
        from patchaudit.workers import stopping

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
    pending = interrupted_runs(env)
    if pending:
        from patchaudit.revert.recovery import interrupted_message

        click.echo(f"patchaudit: {interrupted_message(env, pending)}", err=True)
    return env


def _resolve(python: Path | None, site_path: Path | None) -> Any:
    from patchaudit import environment

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


def interrupted_runs(env: Any) -> list[str]:
    """Run ids of reverts a kill interrupted in `env` (names only: nothing is read or changed)."""
    if not (env.state_dir / "journal").exists():
        return []
    from patchaudit.revert.recovery import pending_runs

    return pending_runs(env)


def open_for_change(python: Path | None, site_path: Path | None) -> tuple[Any, list[Any], tuple[str, ...]]:
    """Resolve the target for a command that writes (revert, quarantine restore): finish or roll back an
    interrupted revert first. Returns (env, its distributions, its editable installs' project roots)."""
    from patchaudit import environment, vcs

    env = _resolve(python, site_path)
    every = environment.distributions(env)
    roots = vcs.project_roots(every)
    if interrupted_runs(env):
        from patchaudit import revert

        for message in revert.recover(env, roots=roots):
            click.echo(f"patchaudit: {message}", err=True)
    return env, every, roots


def target_args(python: Path | None, site_path: Path | None) -> str:
    """The target options again, as a hint that runs as printed from any directory: absolute, quoted."""
    import os
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
    import os

    from patchaudit import vcs
    from patchaudit.ownership import read_record
    from patchaudit.record import parse_record

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


def wheelhouse_option(func: F) -> F:
    """--wheelhouse DIR (repeatable): local wheels to take pristine bytes from."""
    return click.option(
        "--wheelhouse",
        multiple=True,
        type=click.Path(path_type=Path, file_okay=False),
        help="Directory of wheels to take pristine bytes from (also PATCHAUDIT_WHEELHOUSE).",
    )(func)


def timeout_option(default_help: str, default: float | None = None) -> Callable[[F], F]:
    """`--timeout SECONDS`: a positive, finite number (click's FloatRange lets NaN through)."""

    def check(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        from patchaudit.deadline import check_timeout

        if value is None:
            return None
        try:
            return check_timeout(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return click.option(
        "--timeout",
        type=float,
        default=default,
        callback=check,
        metavar="SECONDS",
        help=f"Give up after SECONDS and fail closed, naming what was running ({default_help}).",
    )


def fail_on_option(func: F) -> F:
    return click.option(
        "--fail-on",
        type=click.Choice(FAIL_ON_CHOICES),
        help="Lowest finding severity that makes the exit code 1 (default: high; the gate: its policy's,"
        " else high); drift always does.",
    )(func)


def severity_or_none(value: str | None) -> Any:
    """The --fail-on threshold: None when told `none`; high when not told."""
    from patchaudit.report import Severity

    if value is None:
        return Severity.HIGH
    return None if value == "none" else Severity(value)


def format_option(*choices: str, default: str = "human") -> Callable[[F], F]:
    """--format: how the command writes its output (each command offers the formats its output has)."""
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=default, show_default=True, help="Output format."
    )


def out_option(func: F) -> F:
    return click.option("--out", type=click.Path(path_type=Path), help="Write the output to FILE instead of stdout.")(
        func
    )


def no_cache_option(func: F) -> F:
    return click.option(
        "--no-cache", is_flag=True, help="Verify from scratch: neither read nor write patchaudit's caches."
    )(func)


def cache_dir_option(func: F) -> F:
    return click.option(
        "--cache-dir",
        type=click.Path(path_type=Path, file_okay=False),
        help="Keep patchaudit's caches below DIR (one directory per environment), e.g. for a read-only target.",
    )(func)


def workers_option(func: F) -> F:
    return click.option(
        "--workers",
        type=click.IntRange(1, 256),
        help="Worker processes (default: the policy's `workers` where a policy is read, else every CPU this"
        " process may use).",
    )(func)


def yes_option(func: F) -> F:
    return click.option("--yes", "-y", is_flag=True, help="Do not ask; needed when stdin is not a terminal.")(func)


def dry_run_option(func: F) -> F:
    return click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")(func)


def policy_option(func: F) -> F:
    return click.option(
        "--policy", type=click.Path(path_type=Path, dir_okay=False), help="Policy TOML (or a pyproject.toml)."
    )(func)


def baseline_option(func: F) -> F:
    return click.option(
        "--baseline", type=click.Path(path_type=Path, dir_okay=False), help="Hold to this baseline file."
    )(func)


def rules_option(func: F) -> F:
    return click.option(
        "--rules",
        "rule_dirs",
        multiple=True,
        type=click.Path(path_type=Path, file_okay=False),
        help="A directory of user rules to add to the built-in pack (repeatable).",
    )(func)


def write_output(text: str, out: Path | None) -> None:
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        out.write_bytes(text.encode("utf-8", "surrogateescape"))  # a file name's bytes as they were
    except OSError as exc:
        from patchaudit.errors import PatchAuditError

        raise PatchAuditError(f"cannot write {out}: {exc.strerror}") from None


def serve_option(func: F) -> F:
    """--serve MODEL: which drift runs for the model served (a model directory or a hub cache repo id)."""
    return click.option(
        "--serve",
        metavar="MODEL",
        help="Say what runs for MODEL: a model directory, a repo id in the hub cache, unit:NAME (the model a"
        " systemd unit's ExecStart= serves) or auto (the gate's own unit; for ps, each server's command line).",
    )(func)


_RENAMED = "patchaudit.renamed:"


class Renamed(click.Option):
    """An old spelling kept for one release: hidden from --help, one line on stderr when used, its value
    handed to the option that replaced it (`new`)."""

    def __init__(self, *args: Any, new: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new = new


def renamed(old: str, new: str, dest: str, **attrs: Any) -> Callable[[F], F]:
    """Keep `old` working for one release as a spelling of `new` (whose parameter is `dest`); the new
    option takes it with `callback=from_renamed`."""

    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None:
            return
        click.echo(f"patchaudit: {old} is deprecated and goes in the next release; use {new}", err=True)
        if ctx.get_parameter_source(dest) is click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError(f"give {new} once, not also as {old}")
        ctx.meta[_RENAMED + dest] = value

    return click.option(
        old, f"renamed_{dest}", cls=Renamed, new=new, hidden=True, expose_value=False, callback=callback, **attrs
    )


def from_renamed(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The value of an option, or of its old spelling when only that was given (see `renamed`)."""
    old = ctx.meta.get(_RENAMED + str(param.name))
    if old is None:
        return value
    if ctx.get_parameter_source(str(param.name)) is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(f"give {param.opts[0]} once, not also in its old spelling")
    return old


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
