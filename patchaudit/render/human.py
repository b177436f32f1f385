"""The human view: a line per distribution, a table of drifted files, the findings."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from patchaudit.report import DistReport, DistStatus, Drift, Finding, Report, Severity

_STATUS_STYLE = {DistStatus.CLEAN: "green", DistStatus.DRIFTED: "bold red", DistStatus.UNVERIFIABLE: "yellow"}
_SEVERITY_STYLE = {
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


def render_human(report: Report, console: Console, *, verbose: bool = False, show_suppressed: bool = False) -> None:
    quiet_clean = not verbose and len(report.distributions) > 20
    clean = 0
    for dist in report.distributions:
        if quiet_clean and dist.status is DistStatus.CLEAN and not dist.findings:
            clean += 1
            continue
        console.print(_dist_line(dist))
        for item in dist.unverified[:10]:
            console.print(Text(f"    unverified  {printable(item.path)}: {item.reason}", style="yellow"))
        if len(dist.unverified) > 10:
            console.print(Text(f"    ... and {len(dist.unverified) - 10} more unverified entries", style="yellow"))
    if clean:
        console.print(Text(f"{_plural(clean, 'more distribution')} clean", style="green"))

    drifted = [(d.name, x) for d in report.distributions for x in d.drift]
    drifted += [("(environment)", x) for x in report.environment.drift]
    if drifted:
        console.print(_drift_table(drifted))

    findings = [f for f in report.all_findings() if show_suppressed or not f.suppressed]
    changed = [f for f in findings if f.in_change]
    upstream = [f for f in findings if not f.in_change]
    if changed:
        console.print()
        for finding in sorted(changed, key=lambda f: (-f.severity.rank, f.path, f.line)):
            console.print(_finding_line(finding))
    if upstream:
        console.print()
        heading = f"In code that verifies against RECORD ({_plural(len(upstream), 'finding')}, not failing):"
        console.print(Text(heading, style="dim"))
        for finding in sorted(upstream, key=lambda f: (-f.severity.rank, f.path, f.line)):
            console.print(_finding_line(finding))

    console.print()
    console.print(_summary_line(report))


def _dist_line(dist: DistReport) -> Text:
    text = Text()
    text.append(f"{dist.status.value:<12}", style=_STATUS_STYLE[dist.status])
    text.append(f" {dist.name} {dist.version}", style="bold")
    details = [_plural(dist.files_checked, "file") + " checked"]
    counts: dict[str, int] = {}
    for drift in dist.drift:
        counts[drift.state.value] = counts.get(drift.state.value, 0) + 1
    details += [f"{n} {state}" for state, n in sorted(counts.items())]
    if dist.os_package is not None:
        details.append(f"OS package {dist.os_package}, md5 only")
    elif dist.source.value != "wheel":
        details.append(dist.source.value)
    text.append("  (" + ", ".join(details) + ")", style="dim")
    return text


def _drift_table(rows: list[tuple[str, Drift]]) -> Table:
    table = Table(title="Drifted files", title_justify="left", show_lines=False, expand=False)
    table.add_column("distribution")
    table.add_column("state")
    table.add_column("path", overflow="fold")
    table.add_column("detail", overflow="fold")
    for name, drift in rows:
        style = "red" if drift.state.value == "modified" else "yellow"
        detail = drift.note or ""
        if drift.nlink > 1 and "hard link" not in detail:
            detail = (detail + "; " if detail else "") + f"hard link shared by {drift.nlink} paths"
        table.add_row(name, Text(drift.state.value, style=style), printable(drift.path), printable(detail))
    return table


def _finding_line(finding: Finding) -> Text:
    text = Text()
    text.append(f"{finding.severity.value:<7}", style=_SEVERITY_STYLE[finding.severity])
    text.append(f" {printable(finding.path)}:{finding.line} ")
    text.append(f"[{finding.rule}]", style="bold")
    text.append(f" {finding.message}")
    if finding.suppressed:
        text.append(" (suppressed)", style="dim")
    return text


def _summary_line(report: Report) -> Text:
    s = report.summary()
    sev = s["findings"]
    parts = [
        _plural(s["distributions"], "distribution"),
        _plural(s["files_checked"], "file") + " checked",
        f"{s['modified']} modified",
        f"{s['missing']} missing",
        f"{s['added']} added",
    ]
    if s["unverifiable"]:
        parts.append(f"{s['unverifiable']} unverifiable")
    parts.append(f"findings: {sev['high']} high, {sev['medium']} medium, {sev['low']} low")
    if s["suppressed"]:
        parts.append(f"{s['suppressed']} suppressed")
    style = "bold red" if report.fails() else "bold green"
    return Text(", ".join(parts), style=style)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def printable(text: str) -> str:
    """A file name as a terminal can show it: undecodable bytes and control characters escaped."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
