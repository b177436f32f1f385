"""The hazard rules over many distributions' files at once, on worker processes.

One pool for the whole audit, not one per distribution: a distribution with a few files costs no
pool start, and the biggest ones keep every worker busy. Workers read the files themselves, so
only paths travel to them and only findings travel back. The rules run through
`hazards.check_files`, one batch at a time, exactly as they do in this process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.cpus import available_cpus
from patchaudit.hashing import pool_context, read_regular
from patchaudit.report import Finding, Severity

POOL_MIN_FILES = 16  # fewer files than this are checked in this process
TASKS_PER_WORKER = 8  # enough tasks per worker that an unlucky batch of big files does not hold the rest


@dataclass(frozen=True, kw_only=True, slots=True)
class HazardJob:
    """One distribution's files for the rules: (path relative to `location`, drifted)."""

    location: Path
    files: tuple[tuple[str, bool], ...]
    pristine: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Settings:
    rule_dirs: tuple[Path, ...]
    severity_overrides: Mapping[str, Severity]
    cache_dir: Path | None


_Task = tuple[int, Path, tuple[tuple[str, bool, bytes | None], ...]]


def _check(settings: _Settings, task: _Task) -> tuple[int, list[Finding]]:
    """Read a batch of one distribution's files and run the rules over them (in a worker)."""
    from patchaudit import hazards

    index, location, files = task
    sources = []
    for rel, drifted, before in files:
        data = read_regular(location / rel)
        if data is not None:
            sources.append(hazards.SourceFile(path=rel, installed=data, pristine=before, drifted=drifted))
    if not sources:
        return index, []
    findings = hazards.check_files(
        sources,
        rule_dirs=settings.rule_dirs,
        severity_overrides=settings.severity_overrides,
        cache_dir=settings.cache_dir,
        workers=1,
    )
    return index, findings


def check_jobs(
    jobs: Sequence[HazardJob],
    *,
    rule_dirs: Sequence[Path] = (),
    severity_overrides: Mapping[str, Severity] | None = None,
    cache_dir: Path | None = None,
    workers: int | None = None,
) -> list[list[Finding]]:
    """Findings for each job, in job order, each list sorted by path and line."""
    settings = _Settings(
        rule_dirs=tuple(rule_dirs), severity_overrides=dict(severity_overrides or {}), cache_dir=cache_dir
    )
    total = sum(len(job.files) for job in jobs)
    n_workers = max(1, min(workers or available_cpus(), total or 1))
    per_task = max(1, min(32, total // (n_workers * TASKS_PER_WORKER)))
    tasks: list[_Task] = []
    for index, job in enumerate(jobs):
        files = [(rel, drifted, job.pristine.get(rel)) for rel, drifted in job.files]
        for start in range(0, len(files), per_task):
            tasks.append((index, job.location, tuple(files[start : start + per_task])))
    results: list[list[Finding]] = [[] for _ in jobs]
    if n_workers == 1 or total < POOL_MIN_FILES:
        for task in tasks:
            index, found = _check(settings, task)
            results[index].extend(found)
        return results
    from patchaudit import hazards

    hazards.load_rules(rule_dirs)  # loaded once here: forked workers inherit the pack
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=pool_context()) as pool:
        for index, found in pool.map(_check, [settings] * len(tasks), tasks):
            results[index].extend(found)
    for found in results:
        found.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    return results
