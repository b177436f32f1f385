"""The one grammar of the command line: every option more than one command takes is declared here,
once, so that a name means the same thing everywhere (tests/test_cli_grammar.py holds it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from patchaudit.errors import PatchAuditError
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
        from patchaudit.parallel.deadline import check_timeout

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
