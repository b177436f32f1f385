"""`patchaudit cluster scan|gate`: every node of a Ray cluster audited where it runs, then compared."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from patchaudit.cli.common import write_output
from patchaudit.cli.examples import examples
from patchaudit.cli.options import (
    fail_on_option,
    format_option,
    out_option,
    policy_option,
    target_group,
    timeout_option,
)
from patchaudit.errors import ExitCode

if TYPE_CHECKING:
    from patchaudit.cluster.driver import ClusterResult, NodeResult


@click.group(epilog=examples("cluster"))
def cluster() -> None:
    """Audit every node of a Ray cluster (needs `pip install 'patchaudit[ray]'`).

    --python, --path and --policy name paths on every node; a node without an answer by --timeout fails
    the run."""


def _cluster_options(func):  # type: ignore[no-untyped-def]
    func = format_option("human", "json")(func)
    func = out_option(func)
    func = fail_on_option(func)
    func = timeout_option("default: 120", default=120)(func)
    func = policy_option(func)
    func = click.option("--address", default="auto", show_default=True, help="Ray cluster: auto or HOST:PORT.")(func)
    func = target_group(root=False)(func)
    func = click.argument("dists", nargs=-1)(func)
    return func


def _node_args(
    dists: tuple[str, ...], python: Path | None, site_path: Path | None, policy: Path | None, fail_on: str | None
) -> list[str]:
    args = list(dists)
    if python is not None:
        args += ["--python", str(python)]
    if site_path is not None:
        args += ["--path", str(site_path)]
    if policy is not None:
        args += ["--policy", str(policy)]
    if fail_on is not None:
        args += ["--fail-on", fail_on]
    return args


def _run(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    address: str,
    policy: Path | None,
    timeout: float,
    fail_on: str | None,
) -> ClusterResult:
    import signal

    from patchaudit.cluster.driver import ClusterTimeout, run

    def interrupted(signum: int, _frame: object) -> None:
        raise _Interrupted(signum)

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run(address, _node_args(dists, python, site_path, policy, fail_on), timeout=timeout)
    except ClusterTimeout as exc:
        _hard_exit(f"patchaudit: error: {exc}", ExitCode.USAGE)
    except _Interrupted as exc:
        _hard_exit(f"patchaudit: interrupted ({signal.Signals(exc.signum).name})", 128 + exc.signum)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Interrupted(BaseException):
    """SIGINT or SIGTERM while the cluster run is under way."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _hard_exit(message: str | None, code: int) -> NoReturn:
    """End the process now: Ray's threads, blocked in native code, and its exit hook may never return."""
    import os

    if message:
        click.echo(message, err=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _node_line(node: NodeResult) -> str:
    from patchaudit.render.journal import escape

    if node.status != "answered":
        return f"node {node.label}: {node.status}: {escape(node.error or '')}"
    data = node.data or {}
    summary = (data.get("report") or {}).get("summary", {})
    facts = f"{summary.get('distributions', 0)} distributions, {summary.get('files_checked', 0)} files"
    problems = (data.get("verdict") or {}).get("problems", [])
    if not problems:
        return f"node {node.label}: clean: {facts}"
    counts: dict[str, int] = {}
    for p in problems:
        counts[p[0]] = counts.get(p[0], 0) + 1
    what = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    return f"node {node.label}: FAIL: {what}; {facts}"


def _problem_lines(node: NodeResult) -> list[str]:
    from patchaudit.render.journal import escape

    lines = []
    for kind, where, path, detail, *_ in (node.data or {}).get("verdict", {}).get("problems", []):
        tail = f" ({escape(detail)})" if detail else ""
        lines.append(f"node {node.label}: {escape(where)}: {escape(kind)} {escape(path)}{tail}")
    return lines


def _render(result: ClusterResult, *, quiet: bool) -> str:
    from patchaudit.render.journal import escape

    lines: list[str] = []
    for node in result.nodes:
        if not quiet or node.status != "answered":
            lines.append(_node_line(node))
        lines += _problem_lines(node) if (quiet or node.exit_code) else []
    for o in result.outliers:
        lines.append(f"node {o.node}: {escape(o.message)}")
    lines += [f"note: {n}" for n in result.notes]
    s = result.summary()
    word = "ok" if result.ok else "FAIL"
    parts = [f"{s['nodes']} nodes", f"{s['answered']} answered"]
    if s["failing"]:
        parts.append(f"{s['failing']} failing")
    if s["unanswered"]:
        parts.append(f"{s['unanswered']} without answer")
    if s["outliers"]:
        parts.append(f"{s['outliers']} difference{'s' if s['outliers'] != 1 else ''} between nodes")
    lines.append(f"patchaudit cluster: {word}: {', '.join(parts)}; {result.seconds:.1f}s")
    return "\n".join(lines) + "\n"


def _finish(result: ClusterResult, fmt: str, out: Path | None, *, quiet: bool) -> int:
    if fmt == "json":
        write_output(json.dumps(result.to_dict(), indent=2) + "\n", out)
    else:
        write_output(_render(result, quiet=quiet), out)
    code = ExitCode.CLEAN if result.ok else ExitCode.PROBLEMS
    if result.detached:
        _hard_exit(None, code)
    return code


@cluster.command("scan", epilog=examples("cluster scan"))
@_cluster_options
def scan_cmd(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    address: str,
    policy: Path | None,
    timeout: float,
    fail_on: str | None,
    out: Path | None,
    fmt: str,
) -> int:
    """One line per node and every difference between nodes; exit 0 only when all agree and are clean."""
    return _finish(_run(dists, python, site_path, address, policy, timeout, fail_on), fmt, out, quiet=False)


@cluster.command("gate", epilog=examples("cluster gate"))
@_cluster_options
def gate_cmd(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    address: str,
    policy: Path | None,
    timeout: float,
    fail_on: str | None,
    out: Path | None,
    fmt: str,
) -> int:
    """The gate on every node: problem lines and a summary; a node without an answer fails it."""
    return _finish(_run(dists, python, site_path, address, policy, timeout, fail_on), fmt, out, quiet=True)


@cluster.command("node", hidden=True)
@click.argument("dists", nargs=-1)
@target_group(root=False)
@policy_option
@fail_on_option
@click.option("--detail", multiple=True, help="Distributions whose per-file hashes to include.")
def node_cmd(
    dists: tuple[str, ...],
    python: Path | None,
    site_path: Path | None,
    policy: Path | None,
    fail_on: str | None,
    detail: tuple[str, ...],
) -> int:
    """This node's share of a cluster run, as JSON (what each Ray task runs)."""
    from patchaudit.cluster.node import node_report

    data = node_report(
        python=python, site_path=site_path, names=dists, policy_path=policy, detail=detail, fail_on=fail_on
    )
    sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")
    return ExitCode.CLEAN if data["verdict"]["exit_code"] == ExitCode.CLEAN else ExitCode.PROBLEMS
