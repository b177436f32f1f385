"""The hazard rules over many distributions' files at once, on worker processes.

One pool for the whole audit, not one per distribution: a distribution with a few files costs no
pool start, and the biggest ones keep every worker busy. Workers read the files themselves, so
only paths travel to them and only findings travel back. The rules run through
`hazards.check_files`, one batch at a time, exactly as they do in this process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped
from patchaudit.parallel.cpus import available_cpus
from patchaudit.parallel.workers import Pool
from patchaudit.report import Finding, Severity

POOL_MIN_FILES = 16  # fewer files than this are checked in this process ...
POOL_MIN_BYTES = 128 * 1024  # ... unless they hold this much source: two drifted runners take a second each
TASKS_PER_WORKER = 16  # tasks per worker: small ones at the end even out what the big ones left
MAX_TASK_FILES = 64  # files in one task at most, however small


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


_Item = tuple[int, str, bool, "bytes | None"]  # (job index, path, drifted, pristine bytes)


def _check_task(shared: tuple[_Settings, Sequence[Path]], items: Sequence[_Item]) -> list[tuple[int, list[Finding]]]:
    return _check(shared[0], shared[1], items)


def _check(settings: _Settings, locations: Sequence[Path], items: Sequence[_Item]) -> list[tuple[int, list[Finding]]]:
    """Read a batch of files and run the rules over them, one distribution at a time (in a worker)."""
    from patchaudit import hazards

    by_job: dict[int, list[hazards.SourceFile]] = {}
    for index, rel, drifted, before in items:
        try:  # a source past the cap is not parsed, nor read: its size says so first
            data = read_capped(locations[index] / rel, Cap.SOURCE)
        except UnreadableFile:
            continue
        source = hazards.SourceFile(
            path=rel, installed=data, pristine=before, drifted=drifted, location=str(locations[index])
        )
        by_job.setdefault(index, []).append(source)
    return [
        (
            index,
            hazards.check_files(
                sources,
                rule_dirs=settings.rule_dirs,
                severity_overrides=settings.severity_overrides,
                cache_dir=settings.cache_dir,
                workers=1,
            ),
        )
        for index, sources in by_job.items()
    ]


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _tasks(items: Sequence[_Item], sizes: Sequence[int], n_workers: int) -> list[list[_Item]]:
    """Cut `items` (biggest first) into runs of about `total / (workers × TASKS_PER_WORKER)` bytes."""
    share = max(1, sum(sizes) // (n_workers * TASKS_PER_WORKER))
    tasks: list[list[_Item]] = []
    task: list[_Item] = []
    used = 0
    for item, size in zip(items, sizes, strict=True):
        if task and (used + size > share or len(task) >= MAX_TASK_FILES):
            tasks.append(task)
            task, used = [], 0
        task.append(item)
        used += size
    if task:
        tasks.append(task)
    return tasks


def check_jobs(
    jobs: Sequence[HazardJob],
    *,
    rule_dirs: Sequence[Path] = (),
    severity_overrides: Mapping[str, Severity] | None = None,
    cache_dir: Path | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[list[Finding]]:
    """Findings for each job, in job order, each list sorted by path and line.

    `progress(done, total)` counts files as the rules finish them."""
    settings = _Settings(
        rule_dirs=tuple(rule_dirs), severity_overrides=dict(severity_overrides or {}), cache_dir=cache_dir
    )
    locations = [job.location for job in jobs]
    items: list[_Item] = [
        (index, rel, drifted, job.pristine.get(rel)) for index, job in enumerate(jobs) for rel, drifted in job.files
    ]
    n_workers = max(1, min(workers or available_cpus(), len(items) or 1))
    results: list[list[Finding]] = [[] for _ in jobs]
    if progress is not None:
        progress(0, len(items))
    sizes = [_size(locations[item[0]] / item[1]) for item in items] if 1 < len(items) < POOL_MIN_FILES else []
    if n_workers == 1 or (len(items) < POOL_MIN_FILES and sum(sizes) < POOL_MIN_BYTES):
        done = 0
        for start in range(0, len(items), MAX_TASK_FILES):
            for index, found in _check(settings, locations, items[start : start + MAX_TASK_FILES]):
                results[index].extend(found)
            if progress is not None:
                done = min(len(items), start + MAX_TASK_FILES)
                progress(done, len(items))
        return results
    # Biggest files first, in tasks of about equal bytes: the time a file takes grows with its size, so
    # a task of the biggest files alone would keep every other worker waiting at the end.
    sizes = sizes or [_size(locations[item[0]] / item[1]) for item in items]
    order = sorted(range(len(items)), key=lambda i: -sizes[i])
    tasks = _tasks([items[i] for i in order], [sizes[i] for i in order], n_workers)
    from patchaudit import hazards

    hazards.load_rules(rule_dirs)  # loaded once here: forked workers inherit the pack
    done = 0

    def tick(task: int, _value: object) -> None:
        nonlocal done
        done += len(tasks[task])
        if progress is not None:
            progress(done, len(items))

    with Pool(_check_task, tasks, (settings, locations), workers=n_workers, progress=tick) as pool:
        for number in range(len(tasks)):
            for index, found in pool.result(number):
                results[index].extend(found)
    for found in results:
        found.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    return results
