"""The `patchaudit` command: a lazy click group, so each command imports only what it needs."""

from __future__ import annotations

import contextlib
import sys

TYPE_CHECKING = False  # no typing import: `patchaudit gate` pays for every module on its path
if TYPE_CHECKING:
    from typing import Any

# command name -> "module:attribute"; a command's module is imported only when it runs.
COMMANDS: dict[str, str] = {
    "scan": "patchaudit.cli.scan:scan",
    "gate": "patchaudit.cli.gate:gate",
    "baseline": "patchaudit.cli.baseline:baseline",
    "systemd": "patchaudit.cli.systemd:systemd",
    "diff": "patchaudit.cli.diff:diff",
    "revert": "patchaudit.cli.revert:revert",
    "quarantine": "patchaudit.cli.quarantine:quarantine",
    "rules": "patchaudit.cli.rules:rules",
    "model": "patchaudit.cli.model:model",
    "ps": "patchaudit.cli.ps:ps",
    "metrics": "patchaudit.cli.metrics:metrics",
    "cluster": "patchaudit.cli.cluster:cluster",
    "errata": "patchaudit.cli.errata:errata",
}


def main(argv: list[str] | None = None) -> Any:
    args = sys.argv[1:] if argv is None else argv
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM):  # until the workers' own handler is in place
        signal.signal(signum, _early_stop)
    from patchaudit.parallel.children import Interrupted, on_signals, stopping

    on_signals()  # SIGINT/SIGTERM: every worker killed and reaped, exit 130/143 (patchaudit.parallel.children)
    try:
        result = _main(args, argv)
    except Interrupted as exc:
        _stop(exc.code)
    except SystemExit as exc:
        code = stopping()
        if code is not None:
            _stop(code)
        _settle(exc.code)
    except BaseException:
        code = stopping()
        if code is None:
            raise
        _stop(code)  # a signal came while something else unwound: the signal decides the code
    _settle(result)


def _settle(result: object) -> None:
    """End the process with `result` as sys.exit would, keeping the signal contract to the last instant.

    An interpreter shutting down gives SIGINT and SIGTERM back their defaults before it exits, so a stop
    that lands then would end the process by the signal (exit -15) instead of 143. The stops are blocked
    here instead, the exit handlers run, and a stop still pending decides the code."""
    import atexit
    import os
    import signal

    stops = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    if result is None:
        code = 0
    elif isinstance(result, int):
        code = result & 0xFF
    else:
        code = 1
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"{result}\n")
    atexit._run_exitfuncs()
    _flush()
    from patchaudit.parallel.children import reap_all

    reap_all()  # an exit leaves no child to init, which in a container may never reap it
    pending = signal.sigpending() & stops
    if pending:
        signum = min(pending)
        _say_interrupted()
        code = 128 + signum
    os._exit(code)


def _stop(code: int) -> None:
    """End at once after a signal: the workers are already gone, and an interpreter shutting down
    gives SIGINT and SIGTERM back their defaults, so a second signal would end it by the signal."""
    import os

    from patchaudit.parallel.children import reap_all

    reap_all()  # killed already: reaped here, not left to init
    _say_interrupted()
    _flush()
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _early_stop(signum: int, _frame: object) -> None:
    """A signal before any worker or file was touched: nothing to unwind."""
    import os

    _say_interrupted()
    os._exit(128 + signum)


def _say_interrupted() -> None:
    try:
        sys.stderr.write("patchaudit: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _main(args: list[str], argv: list[str] | None) -> Any:
    # `patchaudit gate [...] -- CMD ARGS...`: after a pass the gate becomes CMD (exec: same PID).
    command: list[str] | None = None
    if args[:1] == ["gate"] and "--" in args:
        cut = args.index("--")
        args, command = list(args[:cut]), list(args[cut + 1 :])
        argv = args
    # The gate runs before every service start: it parses its few options without click.
    if args[:1] == ["gate"]:
        import gc

        gc.disable()  # a warm gate allocates ~100k stat rows and exits: collections would only cost time
        from patchaudit.cli.fastgate import fast_gate

        code = fast_gate(list(args[1:]))
        if code is not None:
            _gate_done(code, command)
    if args[:1] == ["scan"]:
        _probe_ahead(args[1:])
    from patchaudit.cli.common import run
    from patchaudit.cli.group import cli

    if command is None:
        return run(cli, argv)
    try:
        run(cli, argv)
    except SystemExit as exc:
        _gate_done(exc.code if isinstance(exc.code, int) else 2, command)
    return None


# Options of `scan` that read the target without running its interpreter (or print help instead)
_NOT_RUN = frozenset({"--path", "--root", "--pid", "--image", "--help"})


def _probe_ahead(args: list[str]) -> None:
    """`scan` asks its interpreter (--python, else patchaudit's own) where its environment lives: that
    interpreter is started now (target.environment.probe_ahead), and starts up while click and the
    scan's modules load here. Not with an option that reads the target another way."""
    from pathlib import Path

    python = sys.executable
    for i, arg in enumerate(args):
        if arg == "--":  # what follows is arguments, not options
            break
        name, eq, value = arg.partition("=")
        if name in _NOT_RUN:
            return
        if name == "--python":
            python = value if eq else (args[i + 1] if i + 1 < len(args) else "")
    if python:
        from patchaudit.target.environment import probe_ahead

        probe_ahead(Path(python))


def _gate_done(code: int, command: list[str] | None) -> None:
    """Exit with the gate's code; or, after a pass with a command, become that command (fail closed)."""
    if command is None or code != 0:
        if command is not None:
            sys.stderr.write(f"patchaudit gate: not starting {command[0] if command else 'anything'} (exit {code})\n")
        sys.exit(code)
    if not command:
        sys.stderr.write("patchaudit: error: nothing to run after `--`\n")
        sys.exit(2)
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)  # the server's PID, signals and exit status are the gate's own
    except OSError as exc:
        sys.stderr.write(f"patchaudit: error: cannot run {command[0]}: {exc.strerror}\n")
        sys.exit(2)


def __getattr__(name: str) -> Any:
    # The click group lives in group.py so that importing this package does not import click.
    if name in ("cli", "LazyGroup"):
        from patchaudit.cli import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
