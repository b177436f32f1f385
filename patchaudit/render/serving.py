"""The head of the human view with `--serve`: what runs for the served model comes first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from patchaudit.render.human import printable
from patchaudit.report import Drift, ReachClass, Report

if TYPE_CHECKING:
    from collections.abc import Mapping

    from patchaudit.serving.procs import ServedProcess

_STYLE = {
    ReachClass.RUNS: "bold red",
    ReachClass.OTHER_MODEL: "dim",
    ReachClass.SHARED: "",
    ReachClass.UNKNOWN: "yellow",
}


def serving_lines(report: Report) -> list[Text]:
    """The served model, each drifted file that runs for it (with its chain), one line for the rest."""
    served = report.serving
    if served is None:
        return []
    archs = ", ".join(served.architectures) or "no architectures"
    where = f"{served.framework} {served.version}" if served.framework else "no serving framework"
    lines = [Text(f"serving {printable(served.model)} ({printable(archs)}) with {where}", style="bold")]
    if served.note:
        lines.append(Text(f"  reach unknown: {printable(served.note)}", style="yellow"))
    drift = [(dist.name, d) for dist in report.distributions for d in dist.drift] + [
        ("environment", d) for d in report.environment.drift
    ]
    runs = [(dist, d) for dist, d in drift if _kind(d) is ReachClass.RUNS]
    for dist, d in runs:
        lines.append(Text(f"  runs  {dist}: {printable(d.path)} ({d.state.value})", style=_STYLE[ReachClass.RUNS]))
        assert d.reach is not None
        for step in d.reach.via:
            lines.append(Text(f"          {printable(step)}", style="dim"))
        if d.reach.why:
            lines.append(Text(f"        {printable(d.reach.why)}", style="yellow"))
    if not runs:
        lines.append(Text("  no drifted file of the framework's model code runs for this model", style="green"))
    other = sum(1 for _, d in drift if _kind(d) is ReachClass.OTHER_MODEL)
    shared = sum(1 for _, d in drift if _kind(d) is ReachClass.SHARED)
    unknown = sum(1 for _, d in drift if _kind(d) is ReachClass.UNKNOWN)
    lines.append(
        Text(
            f"  {other} patched file(s) sit in other models' code (their changes never run for this model);"
            f" {shared} in shared code that runs for every model; {unknown} of unknown reach",
        )
    )
    lines.append(Text())
    return lines


def reach_tag(drift: Drift) -> Text | None:
    if drift.reach is None:
        return None
    return Text(f"  [{drift.reach.kind.value}]", style=_STYLE[drift.reach.kind])


def _kind(drift: Drift) -> ReachClass | None:
    return drift.reach.kind if drift.reach is not None else None


def served_processes_json(text: str, served: Mapping[int, ServedProcess]) -> str:
    """`ps --format json` with `serve` (model, reach of each changed file) on each server."""
    import json

    data = json.loads(text)
    for process in data["processes"]:
        found = served.get(process["pid"])
        if found is not None:
            process["serve"] = found.to_dict()
    return json.dumps(data, indent=2) + "\n"


def served_processes_lines(served: Mapping[int, ServedProcess]) -> str:
    """Per server: the model, then its changed files that run for it (with the chain), the rest counted."""
    lines: list[str] = []
    for pid, one in sorted(served.items()):
        if one.model is None:
            lines.append(f"pid {pid}: reach unknown: {printable(one.why or '')}")
            continue
        lines.append(f"pid {pid} serves {printable(one.model)}:")
        runs = [(p, r) for p, r in one.reach.items() if r.kind is ReachClass.RUNS]
        for path, reach in runs:
            lines.append(f"  runs  {printable(path)}")
            lines += [f"          {printable(step)}" for step in reach.via]
        other = sum(1 for r in one.reach.values() if r.kind is ReachClass.OTHER_MODEL)
        rest = len(one.reach) - len(runs) - other
        lines.append(f"  {other} changed file(s) in other models' code; {rest} shared or of unknown reach")
    return "".join(line + "\n" for line in lines)
