"""`ps --serve`: for each running server, which of its changed files run for the model it serves."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.errors import PatchAuditError
from patchaudit.report import Reach


@dataclass(frozen=True, kw_only=True, slots=True)
class ServedProcess:
    pid: int
    model: str | None  # None: its command line names none (and `why` says so)
    reach: dict[str, Reach] = field(default_factory=dict)  # changed file (absolute path) -> reach
    why: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "reach": {path: r.to_dict() for path, r in self.reach.items()},
            "why": self.why,
        }


def serve_processes(reports: Sequence[object], spec: str) -> dict[int, ServedProcess]:
    """`spec` "auto": each process's own model (its argv); else the model `spec` names, for every process."""
    from patchaudit.procs.assess import ProcessReport

    out: dict[int, ServedProcess] = {}
    for report in reports:
        assert isinstance(report, ProcessReport)
        if report.env is None or not report.env.site_dirs or not report.changed:
            continue
        try:
            out[report.pid] = _one(report, spec)
        except PatchAuditError as exc:
            out[report.pid] = ServedProcess(pid=report.pid, model=None, why=str(exc))
    return out


def _one(report: object, spec: str) -> ServedProcess:
    from patchaudit.procs.assess import ProcessReport
    from patchaudit.procs.proc import read
    from patchaudit.serving.annotate import ServeOptions, reach_of_paths
    from patchaudit.serving.argv import model_from_argv
    from patchaudit.target.environment import from_path

    assert isinstance(report, ProcessReport) and report.env is not None
    hub: Path | None = None
    if spec == "auto":
        model = model_from_argv(report.argv)
        if model is None:
            return ServedProcess(pid=report.pid, model=None, why="its command line names no model")
        proc = read(report.pid)
        cwd = proc.cwd()
        if not os.path.isabs(model) and cwd and os.path.isdir(os.path.join(cwd, model)):
            model = os.path.join(cwd, model)  # as the server resolved it, from its own working directory
        hub = _hub_cache(proc.getenv)
    else:
        model = spec
    site = report.env.site_dirs[0]
    env = from_path(Path(site))
    rels = {c.rel: c.path for c in report.changed if c.site_dir == site}
    reach = reach_of_paths(env, list(rels), ServeOptions(model=model, hub_cache=hub))
    return ServedProcess(pid=report.pid, model=model, reach={rels[p]: r for p, r in reach.items()})


def _hub_cache(getenv: object) -> Path | None:
    """The hub cache the process itself would read (HF_HUB_CACHE, HF_HOME/hub), when it sets one."""
    assert callable(getenv)
    value = getenv("HF_HUB_CACHE")
    if value:
        return Path(value)
    home = getenv("HF_HOME")
    return Path(home) / "hub" if home else None
