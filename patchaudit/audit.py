"""One audit of an environment: verify, then run the hazard rules over what changed."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit import environment
from patchaudit.environment import Environment, InstalledDist
from patchaudit.hashing import StatCache
from patchaudit.report import DistReport, DriftState, Report, Severity
from patchaudit.verify import verify

STAT_CACHE_NAME = "stat-v1.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanOptions:
    names: tuple[str, ...] = ()
    hazards: bool = True
    all_files: bool = False
    rule_dirs: tuple[Path, ...] = ()
    severity_overrides: Mapping[str, Severity] = field(default_factory=dict)
    use_cache: bool = True
    workers: int | None = None


def cache_dir(env: Environment) -> Path:
    return env.state_dir / "cache"


def stat_cache(env: Environment, options: ScanOptions) -> StatCache | None:
    if not options.use_cache:
        return None
    return StatCache(cache_dir(env) / STAT_CACHE_NAME)


def scan(
    env: Environment,
    options: ScanOptions,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Verify the selected distributions and, unless told not to, run the hazard rules."""
    every = environment.distributions(env)
    chosen = environment.select(every, options.names)
    report = verify(
        env,
        chosen,
        every=every,
        cache=stat_cache(env, options),
        workers=options.workers,
        progress=progress,
    )
    if options.hazards:
        report = _with_hazards(env, report, chosen, options)
    return report


def _with_hazards(env: Environment, report: Report, chosen: Sequence[InstalledDist], options: ScanOptions) -> Report:
    dists: list[DistReport] = []
    for dist, installed in zip(report.distributions, chosen, strict=True):
        location = Path(dist.location)
        files: list[tuple[str, bytes, bool]] = []
        drifted = {d.path for d in dist.drift if d.state is not DriftState.MISSING and d.path.endswith(".py")}
        for rel in sorted(drifted):
            data = _read_regular(location, rel)
            if data is not None:
                files.append((rel, data, True))
        if options.all_files:
            for rel in _python_files(installed) - drifted:
                data = _read_regular(location, rel)
                if data is not None:
                    files.append((rel, data, False))
        if not files:
            dists.append(dist)
            continue
        from patchaudit import hazards

        findings = hazards.check_files(
            [hazards.SourceFile(path=p, installed=b, pristine=None, drifted=d) for p, b, d in files],
            rule_dirs=options.rule_dirs,
            severity_overrides=options.severity_overrides,
            cache_dir=cache_dir(env) / "hazards" if options.use_cache else None,
            workers=options.workers,
        )
        dists.append(dataclasses.replace(dist, findings=dist.findings + tuple(findings)))
    return dataclasses.replace(report, distributions=tuple(dists))


def _python_files(dist: InstalledDist) -> set[str]:
    """Every .py file the distribution's RECORD lists inside its location."""
    from patchaudit.record import parse_record

    if dist.record_path is None or not dist.record_path.exists():
        return set()
    record = parse_record(dist.record_path.read_bytes())
    return {
        e.path
        for e in record.entries
        if e.path.endswith(".py") and not e.path.startswith("..") and not os.path.isabs(e.path)
    }


def _read_regular(location: Path, rel: str) -> bytes | None:
    path = location / rel
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)
