"""One model audit: layout scan (hashes), safetensors headers, config diffs by key, config rules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.models import hubcache, localdir, manifest
from patchaudit.models.configdiff import diff_config, is_config, key_line
from patchaudit.models.configrules import SAFETENSORS_RULE, rule_for
from patchaudit.models.digests import stat_cache_path
from patchaudit.models.layout import LayoutScan, ModelKind, ModelTarget, Tracked
from patchaudit.models.pristine import Sources
from patchaudit.models.safetensors import check_header
from patchaudit.parallel.hashing import read_regular
from patchaudit.parallel.statcache import StatCache
from patchaudit.report import ConfigChange, Drift, DriftState, Finding, ModelReport, Severity

CONFIG_LIMIT = 8 << 20


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelScanOptions:
    deep: bool = False  # re-hash everything, ignoring the stat cache
    use_cache: bool = True
    workers: int | None = None
    sources: tuple[Path, ...] = ()
    severity_overrides: Mapping[str, Severity] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelScan:
    report: ModelReport
    layout: LayoutScan
    sources: Sources
    pristine: dict[str, bytes]  # report path -> pristine bytes found for a modified config


def layout_scan(target: ModelTarget, options: ModelScanOptions) -> tuple[LayoutScan, dict[str, str]]:
    """The layout's verdict per file (and a manifest's kept configs)."""
    cache = StatCache(stat_cache_path(target.root)) if options.use_cache and not options.deep else None
    configs: dict[str, str] = {}
    if target.kind is ModelKind.HUB_CACHE:
        scanned = hubcache.scan(target, cache=cache, workers=options.workers)
    elif target.kind is ModelKind.LOCAL_DIR:
        scanned = localdir.scan(target, cache=cache, workers=options.workers)
    else:
        scanned = manifest.scan(target, cache=cache, workers=options.workers)
        configs = manifest.load(target.root).configs
    if cache is not None:
        cache.save()
    return scanned, configs


def scan_model(target: ModelTarget, options: ModelScanOptions = ModelScanOptions()) -> ModelScan:
    scanned, configs = layout_scan(target, options)
    sources = Sources(target, options.sources, configs)
    drift: list[Drift] = []
    findings: list[Finding] = []
    changes: list[ConfigChange] = []
    notes = list(scanned.notes)
    pristine: dict[str, bytes] = {}
    overrides = options.severity_overrides
    for item in scanned.files:
        if item.state is not None:
            drift.append(
                Drift(
                    path=item.path,
                    state=item.state,
                    expected=str(item.expected) if item.expected else None,
                    actual=str(item.actual) if item.actual else None,
                    note=item.note,
                )
            )
        if item.repo_path.endswith(".safetensors") and item.content is not None:
            problem = check_header(item.content)
            if problem is not None:
                rule = SAFETENSORS_RULE
                findings.append(
                    Finding(
                        rule=rule.ID,
                        severity=overrides.get(rule.ID, rule.SEVERITY),
                        path=item.path,
                        line=1,
                        message=f"{problem}",
                    )
                )
        if item.state is DriftState.MODIFIED and is_config(item.repo_path):
            found = _config_changes(item, sources)
            if found is None:
                notes.append(f"{item.path}: no pristine copy at hand, so no key diff (see `patchaudit model revert`)")
                continue
            old, new, file_changes = found
            pristine[item.path] = old
            changes.extend(file_changes)
            for change in file_changes:
                rule = rule_for(change)
                findings.append(
                    Finding(
                        rule=rule.ID,
                        severity=overrides.get(rule.ID, rule.SEVERITY),
                        path=item.path,
                        line=key_line(new if change.change != "removed" else old, change.key),
                        message=change.text(),
                    )
                )
    for odd in scanned.problems:
        drift.append(
            Drift(
                path=odd.path,
                state=odd.state,
                expected=str(odd.expected) if odd.expected else None,
                actual=str(odd.actual) if odd.actual else None,
                note=odd.note,
            )
        )
    report = ModelReport(
        name=target.name,
        kind=target.kind.value,
        location=str(target.root),
        revisions=scanned.commits,
        drift=tuple(drift),
        findings=tuple(findings),
        changes=tuple(changes),
        notes=tuple(notes),
        files_checked=sum(1 for f in scanned.files if f.state is not DriftState.MISSING),
    )
    return ModelScan(report=report, layout=scanned, sources=sources, pristine=pristine)


def current_bytes(item: Tracked, limit: int = CONFIG_LIMIT) -> bytes | None:
    return read_regular(item.content, limit) if item.content is not None else None


def _config_changes(item: Tracked, sources: Sources) -> tuple[bytes, bytes, list[ConfigChange]] | None:
    if item.expected is None:
        return None
    new = current_bytes(item)
    found = sources.find(item.expected, CONFIG_LIMIT)
    if new is None or found is None:
        return None
    old = found[0]
    changes = diff_config(item.repo_path, old, new)
    if changes is None:
        return None
    return old, new, [ConfigChange(file=item.path, key=c.key, change=c.change, old=c.old, new=c.new) for c in changes]
