"""The human view: grouped by distribution and file, short enough for a screen; JSON keeps everything.

On a terminal, rich wraps long lines at spaces to the screen's width; piped or written to a file,
lines are never wrapped, so a path is never split.

Each distribution that is not clean (or has something to say) gets a line, then its files, each with
its findings. High findings are always listed; low/medium/info findings on unchanged lines, and long runs
of them in one file, are counted rather than listed unless `-v`. Packaging facts (overwritten,
record-mismatch, regenerated) are listed briefly, grouped when there are many.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from patchaudit.report import FACT_STATES, DistReport, DistStatus, Drift, DriftState, Finding, Report, Severity

_STATUS_STYLE = {DistStatus.CLEAN: "green", DistStatus.DRIFTED: "bold red", DistStatus.UNVERIFIABLE: "yellow"}
_SEVERITY_STYLE = {
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}
_STATE_STYLE = {DriftState.MODIFIED: "red", DriftState.MISSING: "yellow", DriftState.ADDED: "yellow"}
_FACT_NAMES = frozenset(s.value for s in FACT_STATES)
# Per file, more quiet (below-high) findings than this are counted, not listed, unless -v.
_LISTED_PER_FILE = 5
# Per distribution, more packaging facts than this are grouped by kind, unless -v.
_FACTS_LISTED = 3


def render_human(
    report: Report,
    console: Console,
    *,
    verbose: bool = False,
    show_suppressed: bool = False,
    quiet: bool = False,
    hazards: bool = True,
    next_steps: Sequence[str] = (),
) -> None:
    """`quiet`: only what is wrong, nothing at all when clean (like `debsums -s`); `hazards`: whether
    the rules ran (else no findings count is claimed); `next_steps`: commands to suggest on drift."""
    out = _Printer(console)
    if quiet:
        _quiet(out, report, show_suppressed)
        return
    if report.serving is not None:
        from patchaudit.render.serving import serving_lines

        for line in serving_lines(report):
            out.line(line)
    quiet_clean = not verbose and len(report.distributions) > 20
    clean = 0
    upstream: list[Finding] = []
    for dist in report.distributions:
        shown = [f for f in dist.findings if show_suppressed or not f.suppressed]
        # --all-files: findings in code that verifies against RECORD are listed apart (they never fail)
        findings = [f for f in shown if f.in_change or f.rule in _FACT_NAMES]
        upstream += [f for f in shown if not (f.in_change or f.rule in _FACT_NAMES)]
        if quiet_clean and dist.status is DistStatus.CLEAN and not dist.facts and not _loud(findings):
            clean += 1
            continue
        out.line(_dist_line(dist))
        for item in dist.unverified[: None if verbose else 10]:
            out.line(Text(f"    unverified  {printable(item.path)}: {item.reason}", style="yellow"))
        if not verbose and len(dist.unverified) > 10:
            out.line(Text(f"    ... and {len(dist.unverified) - 10} more unverified entries", style="yellow"))
        _files(out, dist.drift, findings, verbose=verbose)
        _facts(out, dist.facts, findings, verbose=verbose)
    if clean:
        out.line(Text(f"{_plural(clean, 'more distribution')} clean", style="green"))
    env_findings = [f for f in report.environment.findings if show_suppressed or not f.suppressed]
    if report.environment.drift or env_findings:
        out.line(Text("environment", style="bold"))
        _files(out, report.environment.drift, env_findings, verbose=verbose)
    if upstream:
        _upstream(out, upstream, verbose=verbose)
    out.line(Text())
    out.line(_summary_line(report, hazards=hazards))
    if next_steps and report.fails():
        out.line(Text("next: see the patch; what a revert would do (undoable):", style="dim"))
        width = console.width if console.is_terminal else None
        for step in next_steps:
            for piece in command_lines(step, width, first="  ", rest="    "):
                out.line(Text(piece, style="dim"), wrap=False)


def _quiet(out: _Printer, report: Report, show_suppressed: bool) -> None:
    """Drifted or unverifiable distributions and their files only."""
    for dist in report.distributions:
        if dist.status is DistStatus.CLEAN and not _loud(dist.findings):
            continue
        findings = [f for f in dist.findings if (show_suppressed or not f.suppressed) and f.in_change]
        out.line(_dist_line(dist))
        _files(out, dist.drift, findings, verbose=False)
    env_findings = [f for f in report.environment.findings if show_suppressed or not f.suppressed]
    if report.environment.drift or env_findings:
        out.line(Text("environment", style="bold"))
        _files(out, report.environment.drift, env_findings, verbose=False)


def _upstream(out: _Printer, findings: list[Finding], *, verbose: bool) -> None:
    """Findings in unchanged code, apart: listed with -v, else counted by rule and severity."""
    out.line(Text())
    heading = f"In code that verifies against RECORD ({_plural(len(findings), 'finding')}, not failing):"
    out.line(Text(heading, style="dim"))
    if verbose:
        for finding in sorted(findings, key=lambda f: (-f.severity.rank, f.path, f.line)):
            out.line(_finding_line(finding))
        return
    counts = Counter((f.severity, f.rule) for f in findings)
    for (severity, rule), n in sorted(counts.items(), key=lambda item: (-item[0][0].rank, -item[1], item[0][1])):
        out.line(Text(f"    {severity.value:<7}{rule} {n}", style=_SEVERITY_STYLE[severity]))
    out.line(Text("    (-v lists them)", style="dim"))


class _Printer:
    """One line at a time, never wrapped by the renderer (a path stays whole when piped)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def line(self, text: Text, *, wrap: bool = True) -> None:
        """`wrap=False`: a command to copy, whole on one line whatever the width."""
        if wrap and self.console.is_terminal:  # rich wraps at spaces, folding only a word wider than the screen
            self.console.print(text, overflow="fold")
        else:
            self.console.print(text, soft_wrap=True)


def _loud(findings: Sequence[Finding]) -> bool:
    return any(f.rule not in _FACT_NAMES or f.severity is not Severity.INFO for f in findings)


def _files(out: _Printer, drift: Sequence[Drift], findings: Sequence[Finding], *, verbose: bool) -> None:
    """Each drifted file with its findings; then files with findings that did not drift (--all-files)."""
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.rule in _FACT_NAMES:
            continue
        by_path.setdefault(finding.path, []).append(finding)
    layer = None
    # an image's drift comes grouped by the layer that made it, under that layer's history line
    ordered = sorted(drift, key=lambda d: d.layer.index if d.layer else -1) if any(d.layer for d in drift) else drift
    for item in ordered:
        if item.layer is not None and item.layer != layer:
            layer = item.layer
            step = printable(layer.created_by) if layer.created_by else "(no history)"
            out.line(Text(f"  layer {layer.index} {layer.digest[:19]}: {step}", style="bold"))
        out.line(_drift_line(item))
        _findings(out, by_path.pop(item.path, []), verbose=verbose)
    for path, rest in by_path.items():
        out.line(Text(f"  {'':<16}{printable(path)}"))
        _findings(out, rest, verbose=verbose)


def _findings(out: _Printer, findings: list[Finding], *, verbose: bool) -> None:
    findings.sort(key=lambda f: (-f.severity.rank, f.line))
    quiet = [f for f in findings if f.severity is not Severity.HIGH]
    if verbose:
        shown, counted = findings, []
    else:
        loud = [f for f in quiet if f.in_change]
        if len(loud) > _LISTED_PER_FILE:
            loud = []
        shown = [f for f in findings if f.severity is Severity.HIGH or f in loud]
        counted = [f for f in quiet if f not in loud]
    for finding in shown:
        out.line(_finding_line(finding))
    if counted:
        rules = Counter(f.rule for f in counted)
        detail = ", ".join(f"{rule} {n}" for rule, n in rules.most_common())
        where = "on unchanged lines" if all(not f.in_change for f in counted) else "in this file"
        noun = _plural(len(counted), "low/medium/info finding")
        out.line(Text(f"      {noun} {where} ({detail}; -v lists them)", style="dim"))


def _facts(out: _Printer, facts: Sequence[Drift], findings: Sequence[Finding], *, verbose: bool) -> None:
    raised = {(f.rule, f.path): f.severity for f in findings if f.rule in _FACT_NAMES}
    if verbose or len(facts) <= _FACTS_LISTED:
        for fact in facts:
            out.line(_fact_line(fact, raised.get((fact.state.value, fact.path), Severity.INFO)))
        return
    groups: dict[tuple[DriftState, str], list[Drift]] = {}
    for fact in facts:
        groups.setdefault((fact.state, fact.winner or fact.wheel or ""), []).append(fact)
    for (state, who), items in groups.items():
        top = _common_dir([f.path for f in items])
        text = Text(f"  {state.value:<16}", style="dim")
        text.append(_plural(len(items), "file") + (f" under {printable(top)}/" if top else ""))
        text.append(_fact_detail(state, who), style="dim")
        worst = max((raised.get((state.value, f.path), Severity.INFO) for f in items), key=lambda s: s.rank)
        if worst is not Severity.INFO:
            text.append(f" [{worst.value}]", style=_SEVERITY_STYLE[worst])
        text.append(" (-v lists them)", style="dim")
        out.line(text)


def _fact_line(fact: Drift, severity: Severity) -> Text:
    text = Text(f"  {fact.state.value:<16}", style="dim")
    text.append(printable(fact.path))
    text.append(_fact_detail(fact.state, fact.winner or fact.wheel or ""), style="dim")
    if fact.state is DriftState.REGENERATED and fact.note:
        text.append(f": {fact.note}", style="dim")
    if severity is not Severity.INFO:
        text.append(f" [{severity.value}]", style=_SEVERITY_STYLE[severity])
    return text


def _fact_detail(state: DriftState, who: str) -> str:
    if state is DriftState.OVERWRITTEN:
        return f", installed by {who}"
    if state is DriftState.RECORD_MISMATCH:
        return f", bytes equal {who}'s member; its RECORD is wrong"
    return ""


def _common_dir(paths: Sequence[str]) -> str:
    parts = [p.split("/")[:-1] for p in paths]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return "/".join(common)


def _dist_line(dist: DistReport) -> Text:
    text = Text()
    text.append(f"{dist.status.value:<12}", style=_STATUS_STYLE[dist.status])
    text.append(f" {dist.name} {dist.version}", style="bold")
    details = [_plural(dist.files_checked, "file") + " checked"]
    counts = Counter(d.state.value for d in (*dist.drift, *dist.facts))
    details += [f"{n} {state}" for state, n in sorted(counts.items())]
    if dist.os_package is not None:
        details.append(f"OS package {dist.os_package}, md5 only")
    elif dist.source.value != "wheel":
        details.append(dist.source.value)
    text.append("  (" + ", ".join(details) + ")", style="dim")
    return text


def _drift_line(drift: Drift) -> Text:
    text = Text()
    text.append(f"  {drift.state.value:<16}", style=_STATE_STYLE.get(drift.state, ""))
    text.append(printable(drift.path))
    detail = drift.note or ""
    if drift.nlink > 1 and "hard link" not in detail:
        detail = (detail + "; " if detail else "") + f"hard link shared by {drift.nlink} paths"
    if detail:
        text.append(f"  ({printable(detail)})", style="dim")
    if drift.reach is not None:
        from patchaudit.render.serving import reach_tag

        text.append_text(reach_tag(drift) or Text())
    return text


def _finding_line(finding: Finding) -> Text:
    text = Text("    ")
    text.append(f"{finding.severity.value:<7}", style=_SEVERITY_STYLE[finding.severity])
    text.append(f" {printable(finding.path)}:{finding.line} ")
    text.append(f"[{finding.rule}]", style="bold")
    text.append(f" {finding.message}")
    if finding.suppressed:
        text.append(" (suppressed)", style="dim")
    return text


def _summary_line(report: Report, *, hazards: bool = True) -> Text:
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
    facts = [f"{s[state.value]} {state.value}" for state in sorted(FACT_STATES) if s[state.value]]
    if facts:
        parts.append("not patches: " + ", ".join(facts))
    if hazards:
        parts.append(f"findings: {sev['high']} high, {sev['medium']} medium, {sev['low']} low")
    if s["suppressed"]:
        parts.append(f"{s['suppressed']} suppressed")
    style = "bold red" if report.fails() else "bold green"
    return Text(", ".join(parts), style=style)


def command_lines(command: str, width: int | None, *, first: str = "", rest: str = "  ") -> list[str]:
    """A shell command laid out to `width` columns (None: one line): broken between words, each
    broken line ending in a backslash, so that pasted whole it runs as one command."""
    import shlex

    words = [shlex.quote(w) for w in shlex.split(command)]
    if width is None:
        return [first + " ".join(words)]
    lines: list[str] = []
    line = first + words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = rest + word
        else:
            line += " " + word
    lines.append(line)
    return lines


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def printable(text: str) -> str:
    """A file name as a terminal can show it: undecodable bytes and control characters escaped."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
