"""`patchaudit ps` output: one line per process saying what to restart, the changed files below it."""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Sequence

from patchaudit.procs.assess import ChangedFile, ChangeKind, ProcessReport, ProcStatus, counts
from patchaudit.render.journal import escape

SCHEMA = "patchaudit/ps/v1"
NAMED_IN_LINE = 3


def clock(epoch: float | None, *, now: float | None = None) -> str:
    """HH:MM today, `Mon DD HH:MM` on another day (local time, as `ps` and the journal show it)."""
    if epoch is None:
        return "?"
    when = _dt.datetime.fromtimestamp(epoch)
    today = _dt.datetime.fromtimestamp(now) if now is not None else _dt.datetime.now()
    return when.strftime("%H:%M" if when.date() == today.date() else "%b %d %H:%M")


def _short(change: ChangedFile) -> str:
    name = escape(os.path.basename(change.path))
    if change.kind is ChangeKind.REVERTED:
        return f"{name} reverted {clock(_created(change))}"
    if change.mapped and change.kind in (ChangeKind.REPLACED, ChangeKind.DELETED):
        return f"{name} {change.kind.value} while mapped"
    return f"{name} {change.kind.value}"


def _created(change: ChangedFile) -> float | None:
    if change.run_created:
        try:
            return _dt.datetime.fromisoformat(change.run_created).timestamp()
        except ValueError:
            return change.when
    return change.when


def restart_hint(report: ProcessReport) -> str:
    if report.unit and report.unit.endswith(".service"):
        return f"restart {report.unit}"
    return f"restart pid {report.pid}"


def process_line(report: ProcessReport) -> str:
    """`pid 4242 (vllm.service) started 22:15 from /srv/vllm: 3 files changed since it started (...): restart ...`"""
    label = report.container or report.unit
    who = f"pid {report.pid}" + (f" ({escape(label)})" if label else "")
    if report.status is ProcStatus.GONE:
        return f"{who}: exited"
    if report.status is ProcStatus.NOT_PYTHON:
        return f"{who}: not a Python process ({escape(report.reason or '')})"
    started = f" started {clock(report.started)}"
    if report.status is ProcStatus.UNINSPECTABLE:
        argv0 = escape(os.path.basename(report.argv[0])) if report.argv else "?"
        return f"{who} ({argv0}){started}: cannot be inspected: {escape(report.reason or 'unknown')}"
    if report.code_since is not None and report.started is not None and report.code_since < report.started:
        started += f" (forked from pid {report.ppid}, code loaded {clock(report.code_since)})"
    where = escape(report.env.prefix) if report.env and report.env.prefix else "?"
    head = f"{who}{started} from {where}"
    if report.status is ProcStatus.CURRENT:
        return f"{head}: runs what is on disk"
    n = len(report.changed)
    named = sorted(report.changed, key=lambda c: (c.kind is ChangeKind.CHANGED, not c.mapped, c.path))
    shown = ", ".join(_short(c) for c in named[:NAMED_IN_LINE])
    more = f", +{n - NAMED_IN_LINE} more" if n > NAMED_IN_LINE else ""
    noun = "file" if n == 1 else "files"
    if report.status is ProcStatus.MAYBE:
        # what it imported is not known: it may run the changed code, it may not
        what = f"{n} {noun} it may have imported changed since it started ({shown}{more})"
        return f"{head}: may run changed code: {what}: to be sure, {restart_hint(report)}"
    return f"{head}: {n} {noun} changed since it started ({shown}{more}): {restart_hint(report)}"


def detail_lines(report: ProcessReport, limit: int | None = 20) -> list[str]:
    lines = []
    for change in report.changed[:limit]:
        extra = []
        if change.mapped:
            extra.append("mapped")
        if change.distribution:
            extra.append(change.distribution)
        if change.run_id:
            extra.append(f"run {change.run_id}")
        elif change.when is not None:
            extra.append(clock(change.when))
        tail = f" ({', '.join(escape(e) for e in extra)})" if extra else ""
        lines.append(f"    {change.kind.value:<8} {escape(change.rel)}{tail}")
    if limit is not None and len(report.changed) > limit:
        lines.append(f"    ... {len(report.changed) - limit} more (--format json lists all)")
    return lines


def render_human(reports: Sequence[ProcessReport], *, verbose: bool = False) -> str:
    lines = []
    for report in reports:
        if report.status is ProcStatus.CURRENT and not verbose:
            continue
        lines.append(process_line(report))
        if report.status in (ProcStatus.STALE, ProcStatus.MAYBE):
            lines.extend(detail_lines(report, None if verbose else 20))
    tally = counts(reports)
    python = sum(v for k, v in tally.items() if k not in (ProcStatus.GONE, ProcStatus.NOT_PYTHON))
    parts = [f"{tally[s.value]} {s.value}" for s in ProcStatus if tally[s.value]]
    lines.append(f"patchaudit ps: {python} Python process{'es' if python != 1 else ''}: {', '.join(parts) or 'none'}")
    return "\n".join(lines) + "\n"


def render_json(reports: Sequence[ProcessReport]) -> str:
    data = {"schema": SCHEMA, "processes": [r.to_dict() for r in reports], "summary": dict(counts(reports))}
    return json.dumps(data, indent=2) + "\n"
