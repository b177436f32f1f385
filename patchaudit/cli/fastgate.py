"""`patchaudit gate` without click: the gate runs before every service start, so its few options
are parsed here and click is never imported. Anything this parser does not know (--help, a bad
value) returns None, and the click command handles it with its usual messages and exit 2."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from patchaudit.parallel.deadline import check_timeout

VALUE_OPTIONS = {
    "--python": "python",
    "--path": "site_path",
    "--policy": "policy",
    "--baseline": "baseline",
    "--fail-on": "fail_on",
    "--cache-dir": "cache_dir",
    "--workers": "workers",
    "--timeout": "timeout",
    "--root": "root",
    "--image": "image",
    "--serve": "serve",
    "--out": "out",
}
FLAG_OPTIONS = {"--fail-open": "fail_open", "--no-cache": "no_cache"}
MAX_WORKERS = 256
# patchaudit.report.FAIL_ON_CHOICES, spelled out: the report values cost the warm gate a tenth of its imports
FAIL_ON_CHOICES = ("high", "medium", "low", "info", "none")


def parse(args: list[str]) -> tuple[list[str], dict[str, str], set[str]] | None:
    """(DISTS, option values, flags) as `patchaudit.cli.gate.gate` takes them, or None for click."""
    dists: list[str] = []
    values: dict[str, str] = {}
    flags: set[str] = set()
    rest = iter(args)
    only_args = False
    for arg in rest:
        if only_args or not arg.startswith("-") or arg == "-":
            dists.append(arg)
            continue
        if arg == "--":
            only_args = True
            continue
        name, eq, value = arg.partition("=")
        if name in FLAG_OPTIONS and not eq:
            flags.add(FLAG_OPTIONS[name])
        elif name in VALUE_OPTIONS and VALUE_OPTIONS[name] not in values:
            if not eq:
                value = next(rest, "")
            if not value:
                return None
            values[VALUE_OPTIONS[name]] = value
        else:
            return None
    if values.get("fail_on", "high") not in FAIL_ON_CHOICES:
        return None
    workers = values.get("workers", "1")
    if not (workers.isascii() and workers.isdigit() and 1 <= int(workers) <= MAX_WORKERS):
        return None
    if "timeout" in values:
        try:
            check_timeout(float(values["timeout"]))
        except ValueError:
            return None
    return dists, values, flags


def fast_gate(args: list[str]) -> int | None:
    """Run the gate and return its exit code, or None to let click take over."""
    parsed = parse(args)
    if parsed is None:
        return None
    dists, values, flags = parsed

    def path(key: str) -> Path | None:
        return Path(values[key]) if key in values else None

    if not values.keys() & {"policy", "root", "image", "serve"} and "no_cache" not in flags:
        code = _warm_gate(
            tuple(dists),
            values,
            python=path("python"),
            site_path=path("site_path"),
            baseline=path("baseline"),
            cache_dir=path("cache_dir"),
            fail_open="fail_open" in flags,
        )
        if code is not None:
            return code
    return run_gate(
        tuple(dists),
        python=path("python"),
        site_path=path("site_path"),
        policy=path("policy"),
        baseline=path("baseline"),
        fail_on=values.get("fail_on"),
        fail_open="fail_open" in flags,
        no_cache="no_cache" in flags,
        cache_dir=path("cache_dir"),
        workers=int(values["workers"]) if "workers" in values else None,
        timeout=float(values["timeout"]) if "timeout" in values else None,
        root=path("root"),
        image=values.get("image"),
        serve=values.get("serve"),
        out=path("out"),
    )


def _warm_gate(
    dists: tuple[str, ...],
    values: dict[str, str],
    *,
    python: Path | None,
    site_path: Path | None,
    baseline: Path | None,
    cache_dir: Path | None,
    fail_open: bool,
) -> int | None:
    """The exit code of a gate whose kept verdict still holds, printed as run_gate prints it; None on a miss
    (run_gate audits). Only a gate that cannot judge (its deadline passed, a bad path) imports the rest."""
    import time

    from patchaudit.gate.warm import check
    from patchaudit.parallel.deadline import DEFAULT_GATE_TIMEOUT, deadline

    start = time.perf_counter()
    try:
        with deadline(float(values["timeout"]) if "timeout" in values else DEFAULT_GATE_TIMEOUT):
            verdict = check(
                dists,
                python=python,
                site_path=site_path,
                baseline=baseline,
                fail_on=values.get("fail_on") or "high",
                cache_base=cache_dir,
                workers=int(values["workers"]) if "workers" in values else None,
            )
    except Exception as exc:
        from patchaudit.gate.core import failure, settled

        verdict = settled(failure(exc), fail_open, start)
    if verdict is None:
        return None
    from patchaudit.gate.cache import Cached
    from patchaudit.render.journal import render_journal

    if isinstance(verdict, Cached):
        verdict.seconds = time.perf_counter() - start
    elif verdict.cached:  # a kept verdict with problems: a dataclass, as the gate that kept it built it
        from patchaudit.gate.verdict import replace

        verdict = replace(verdict, seconds=time.perf_counter() - start)

    text = render_journal(verdict)
    if "out" in values:
        return _write_out(text, Path(values["out"]), verdict.exit_code)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError:
        pass  # nowhere to write: the exit code still carries the verdict
    return verdict.exit_code


def run_gate(
    dists: tuple[str, ...],
    *,
    python: Path | None,
    site_path: Path | None,
    policy: Path | None,
    baseline: Path | None,
    fail_on: str | None,
    fail_open: bool,
    no_cache: bool,
    cache_dir: Path | None = None,
    workers: int | None = None,
    fmt: str = "journal",
    timeout: float | None = None,
    root: Path | None = None,
    image: str | None = None,
    serve: str | None = None,
    out: Path | None = None,
) -> int:
    """Run the gate core, print its journal lines (or Prometheus text) to stdout (or `out`), return the
    exit code."""
    from patchaudit.gate.core import GateOptions, run
    from patchaudit.render.journal import render_journal

    verdict = run(
        GateOptions(
            names=dists,
            policy=policy,
            python=python,
            site_path=site_path,
            baseline=baseline,
            fail_on=fail_on,
            fail_open=fail_open,
            use_cache=not no_cache,
            cache_dir=cache_dir,
            workers=workers,
            timeout=timeout,
            root=root,
            image=image,
            serve=serve,
        )
    )
    for note in verdict.notes:
        with contextlib.suppress(OSError):
            sys.stderr.write(f"patchaudit: note: {note}\n")
    if fmt == "prometheus":
        from patchaudit.render.prometheus import from_verdict, render_prometheus

        target = str(image or root or python or site_path or policy or sys.executable)
        text = render_prometheus(from_verdict(verdict, target=target))
    else:
        text = render_journal(verdict)
    if out is not None:
        return _write_out(text, out, verdict.exit_code)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError:
        pass  # nowhere to write: the exit code still carries the verdict
    return verdict.exit_code


def _write_out(text: str, out: Path, code: int) -> int:
    """The verdict written to `out`; a file that cannot be written fails closed (exit 2), in one line."""
    from patchaudit.errors import ExitCode

    try:
        out.write_bytes(text.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        with contextlib.suppress(OSError):
            sys.stderr.write(f"patchaudit: error: cannot write {out}: {exc.strerror}\n")
        return ExitCode.USAGE
    return code
