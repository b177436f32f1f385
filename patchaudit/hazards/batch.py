"""Run the pack over many files: the result cache, then a process pool for what is left."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from patchaudit.hazards.cache import cache_key, cache_read, cache_write
from patchaudit.hazards.engine import check_file, needs_parse
from patchaudit.hazards.loading import load_rules, pack_version
from patchaudit.hazards.source import SourceFile
from patchaudit.report import Finding, Severity

__all__ = ["check_files"]

# Below this many files to parse (or this many bytes), a process pool costs more than it saves.
_POOL_MIN = 24
_POOL_MIN_BYTES = 256 * 1024


def _work(rule_dirs: tuple[str, ...], file: SourceFile) -> list[Finding]:
    return check_file(file, load_rules([Path(d) for d in rule_dirs]))  # loaded once per worker process


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def check_files(
    files: Iterable[SourceFile],
    *,
    rule_dirs: Sequence[Path] = (),
    severity_overrides: Mapping[str, Severity] | None = None,
    cache_dir: Path | None = None,
    workers: int | None = None,
) -> list[Finding]:
    """Run the built-in pack plus `rule_dirs` over `files`; findings sorted by path and line."""
    rules = load_rules(rule_dirs)
    files = list(files)
    results: list[list[Finding] | None] = [None] * len(files)
    keys: list[str] = []
    if cache_dir is not None:
        version = pack_version(rules)
        for index, file in enumerate(files):
            key = cache_key(file, version)
            keys.append(key)
            results[index] = cache_read(cache_dir, key, file.path)
    todo = [i for i, r in enumerate(results) if r is None]
    n_workers = workers if workers is not None else _default_workers()
    # Which files cost a parse matters only to share them out: one worker checks them all in turn.
    heavy = [i for i in todo if needs_parse(files[i], rules)] if n_workers > 1 else []
    heavy_set = set(heavy)
    for index in todo:
        if index not in heavy_set:
            results[index] = check_file(files[index], rules)
    big = len(heavy) >= 2 and sum(len(files[i].installed) for i in heavy) >= _POOL_MIN_BYTES
    if n_workers > 1 and (len(heavy) >= _POOL_MIN or big):
        # Biggest files first, so that no worker is left with one huge file at the end.
        heavy.sort(key=lambda i: -len(files[i].installed))
        dirs = tuple(str(Path(d).resolve()) for d in rule_dirs)
        from patchaudit.parallel.workers import Pool

        with Pool(_work, [files[i] for i in heavy], dirs, workers=n_workers) as pool:
            for number, index in enumerate(heavy):
                results[index] = pool.result(number)
    else:
        for index in heavy:
            results[index] = check_file(files[index], rules)
    if cache_dir is not None:
        for index in todo:
            fresh = results[index]
            assert fresh is not None
            cache_write(cache_dir, keys[index], fresh)
    overrides = dict(severity_overrides or {})
    out: list[Finding] = []
    for per_file in results:
        assert per_file is not None
        for finding in per_file:
            if finding.rule in overrides:
                finding = _with_severity(finding, overrides[finding.rule])
            out.append(finding)
    out.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    return out


def _with_severity(finding: Finding, severity: Severity) -> Finding:
    return Finding(
        rule=finding.rule,
        severity=severity,
        path=finding.path,
        line=finding.line,
        message=finding.message,
        in_change=finding.in_change,
        column=finding.column,
        suppressed=finding.suppressed,
    )
