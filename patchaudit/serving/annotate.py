"""A report annotated with reach for the served model: its config, the framework's registry, the walk.

Drift still fails whatever its reach; a policy may set findings' severities by reach. The walk is
cached by the framework's RECORD, the drift and the model; the import graph by RECORD (graph.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from patchaudit.fs.beneath import read_below
from patchaudit.report import (
    DistReport,
    Drift,
    DriftState,
    EnvironmentReport,
    Finding,
    Reach,
    ReachClass,
    Report,
    Serving,
    Severity,
    Target,
)
from patchaudit.serving.config import ServedModel
from patchaudit.serving.config import read as read_model
from patchaudit.serving.graph import Graph, build
from patchaudit.serving.hf import HfModel
from patchaudit.serving.hf import resolve as hf_resolve
from patchaudit.serving.loaded import Names, loaded_names
from patchaudit.serving.names import NameReach
from patchaudit.serving.reach import Classifier, Walk, model_roots, walk, why_unknown
from patchaudit.serving.registry import Registry, read_sglang, read_vllm
from patchaudit.target.environment import Environment, InstalledDist

FRAMEWORKS = ("vllm", "sglang")
GRAPH_CACHE = "serving-graph-{name}-v1.json"
WALK_CACHE = "serving-walk-{name}-{model}-v1.json"  # one per served model
CACHE_VERSION = 4
TRANSFORMERS_BACKEND = "vllm.model_executor.models.transformers"  # vLLM's Transformers backend


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ServeOptions:
    model: str
    cache_dir: Path | None = None  # where the graph cache goes (None: uncached)
    workers: int = 1
    reach_severity: Mapping[str, Severity] = dataclasses.field(default_factory=dict)
    hub_cache: Path | None = None
    wheelhouse: tuple[Path, ...] = ()  # where pristine bytes of a changed model file may be found


def annotate(report: Report, env: Environment, options: ServeOptions) -> Report:
    """`report` with a reach on every drift entry and finding, and what was served in `report.serving`."""
    model = read_model(options.model, cache_dir=options.hub_cache)
    framework = _installed(env, FRAMEWORKS)
    transformers = _installed(env, ("transformers",))
    if framework is None:
        if transformers is not None:  # served by transformers itself
            alone = _hf_model(model, None, transformers, Walk())
            serving = Serving(
                model=model.spec, config=str(model.config), framework="transformers",
                version=transformers.version, architectures=model.architectures, note=alone.why,
            )  # fmt: skip
            return _apply(report, None, None, alone, Walk(), model, alone.why, options, serving)
        missing = "no serving framework (" + ", ".join(FRAMEWORKS) + ") is installed"
        return _apply(report, None, None, None, Walk(), model, missing, options)
    dist_report = next((d for d in report.distributions if canonicalize_name(d.name) == framework.key), None)
    steps, roots, why, registry_where, names = _walk(env, framework, dist_report, model, options)
    classifier = Classifier(walk=steps, model_roots=roots, unknown_why=why, names=names)
    hf = _hf_model(model, registry_where, transformers, steps) if transformers is not None else None
    serving = Serving(
        model=model.spec,
        config=str(model.config),
        framework=framework.name,
        version=framework.version,
        architectures=model.architectures,
        resolved=steps.resolved,
        unresolved=steps.unresolved,
        note=why,
    )
    return _apply(report, framework, classifier, hf, steps, model, why, options, serving)


def _hf_model(
    model: ServedModel, backend: Mapping[str, str] | None, transformers: InstalledDist, steps: Walk
) -> HfModel:
    """The transformers model built for the served architectures: where the registry maps one to the
    Transformers backend (`backend`: arch -> its registry step), where it lacks one, or with no framework."""
    for arch in model.architectures:
        if backend is None or arch in steps.unresolved:
            found = hf_resolve(str(transformers.location), arch)
        elif arch in backend:
            found = hf_resolve(str(transformers.location), arch, (backend[arch],))
        else:
            continue
        if found.path is not None or backend is None:
            return found
    return HfModel(path=None)


def reach_of_paths(env: Environment, paths: Sequence[str], options: ServeOptions) -> dict[str, Reach]:
    """The reach of each path (relative to site-packages), the framework verified first so that its
    drifted files are read as they are: what `baseline accept` asks before approving a patch."""
    from patchaudit.check.verify import verify
    from patchaudit.target.environment import distributions

    framework = _installed(env, FRAMEWORKS)
    every = distributions(env)
    chosen = [d for d in every if framework is not None and d.key == framework.key]
    report = (
        verify(env, chosen, every=every, workers=options.workers)
        if chosen
        else Report(target=Target(python=None, paths=()), distributions=())
    )
    owned = _record_paths(chosen[0]) if chosen else []
    tops = {p.split("/", 1)[0] for p in owned if "/" in p and not p.startswith((".", "/"))}
    seen = {x.path for d in report.distributions for x in d.drift}
    extra = [Drift(path=p, state=DriftState.MODIFIED) for p in paths if p not in seen]
    mine = tuple(
        dataclasses.replace(d, drift=(*d.drift, *(x for x in extra if x.path.split("/", 1)[0] in tops)))
        for d in report.distributions
    )
    environment = EnvironmentReport(drift=tuple(x for x in extra if x.path.split("/", 1)[0] not in tops))
    annotated = annotate(dataclasses.replace(report, distributions=mine, environment=environment), env, options)
    found = {x.path: x.reach for d in annotated.distributions for x in d.drift}
    found |= {x.path: x.reach for x in annotated.environment.drift}
    return {p: r for p in paths if (r := found.get(p)) is not None}


def _record_paths(dist: InstalledDist) -> list[str]:
    from patchaudit.fs.safefs import Cap
    from patchaudit.target.record import record_paths

    return record_paths(read_below(dist.record_path, Cap.RECORD)) if dist.record_path is not None else []


def _installed(env: Environment, names: Sequence[str]) -> InstalledDist | None:
    """The first of `names` installed in `env` (its dist-info found by name; nothing else is read)."""
    import os

    for name in names:
        for site in env.site_dirs:
            try:
                entries = os.listdir(site)
            except OSError:
                continue
            for entry in sorted(entries):
                stem, _, version = entry.removesuffix(".dist-info").partition("-")
                if entry.endswith(".dist-info") and canonicalize_name(stem) == name and version:
                    meta = site / entry
                    return InstalledDist(name=name, version=version, location=site, meta_dir=meta)
    return None


def _walk(
    env: Environment, framework: InstalledDist, dist: DistReport | None, model: ServedModel, options: ServeOptions
) -> tuple[Walk, tuple[str, ...], str | None, dict[str, str], Names]:
    """The walk from the model's architectures, from the cache when RECORD, the drift and the model agree;
    with the architectures the registry maps to the Transformers backend (arch -> the registry's line), and
    the names that run of each changed model file that shared code loads."""
    from patchaudit.fs.safefs import Cap

    record_path = framework.record_path
    record = read_below(record_path, Cap.RECORD) if record_path is not None else b""
    drift = [] if dist is None else sorted((d.path, d.state.value, d.actual or "") for d in dist.drift)
    import os

    from patchaudit.pristine.wheelhouse import ENV_VAR

    sources = (options.wheelhouse, os.environ.get(ENV_VAR))  # where pristine bytes were looked for
    key = hashlib.sha256(
        repr(
            (CACHE_VERSION, framework.version, dist is None, drift, model.architectures, model.nested, sources)
        ).encode()
        + record
    ).hexdigest()
    served = hashlib.sha256(repr((model.architectures, model.nested)).encode()).hexdigest()[:16]
    name = WALK_CACHE.format(name=framework.key, model=served)
    cache = options.cache_dir / name if options.cache_dir is not None else None
    if cache is not None and record and dist is not None:
        hit = _load_walk(cache, key)
        if hit is not None:
            return hit
    graph = _graph(framework, dist, record, options)
    if framework.key == "vllm":
        registry = read_vllm(framework.location, framework.version)
    else:
        registry = read_sglang(framework.location, framework.version, list(graph.modules.values()))
    roots = model_roots(registry, graph)
    steps = walk(model, registry, graph, roots)
    why = why_unknown(model, registry, steps, graph)
    backend = {
        arch: f"{found.where} {arch} -> {found.module}"
        for arch in model.architectures
        if (found := registry.entries.get(arch)) is not None and found.module == TRANSFORMERS_BACKEND
    }
    names = loaded_names(env, framework, dist, graph, steps, roots, options.wheelhouse) if dist is not None else {}
    if cache is not None and record and dist is not None:
        entry = {
            "walk": steps.to_dict(), "roots": list(roots), "why": why, "backend": backend,
            "names": {p: [n.to_list(), list(c) if c is not None else None] for p, (n, c) in names.items()},
        }  # fmt: skip
        _store(cache, {"version": CACHE_VERSION, "walks": {key: entry}})
    return steps, roots, why, backend, names


def _load_walk(cache: Path, key: str) -> tuple[Walk, tuple[str, ...], str | None, dict[str, str], Names] | None:
    data = _read_cache(cache).get(key)
    if not isinstance(data, dict):
        return None
    try:
        roots, why = data.get("roots"), data.get("why")
        if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
            return None
        if why is not None and not isinstance(why, str):
            return None
        backend = data.get("backend")
        if not isinstance(backend, dict) or not all(isinstance(v, str) for v in backend.values()):
            return None
        return Walk.from_dict(data.get("walk")), tuple(roots), why, backend, _names_from(data.get("names"))
    except ValueError:
        return None


def _names_from(data: object) -> Names:
    """Typed back from a cache file; anything malformed raises ValueError."""
    if not isinstance(data, dict):
        raise ValueError("names")
    out: Names = {}
    for path, item in data.items():
        if not (isinstance(item, list) and len(item) == 2):
            raise ValueError("names")
        changed = item[1]
        if changed is not None and not (isinstance(changed, list) and all(type(n) is int for n in changed)):
            raise ValueError("names")
        out[path] = (NameReach.from_list(item[0]), tuple(changed) if changed is not None else None)
    return out


def _read_cache(cache: Path) -> dict[str, object]:
    from patchaudit.fs.safefs import Cap, UnreadableFile, parse_json, read_capped

    try:
        data = parse_json(read_capped(cache, Cap.JSON))
    except (UnreadableFile, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not isinstance(data.get("walks"), dict):
        return {}
    return data["walks"]


def _store(cache: Path, data: dict[str, object]) -> None:
    from patchaudit.fs.atomic import atomic_write

    with contextlib.suppress(OSError):  # a cache that cannot be written costs time, never a verdict
        atomic_write(cache, json.dumps(data, separators=(",", ":")), mode=0o600, durable=False)


def _graph(framework: InstalledDist, dist: DistReport | None, record: bytes, options: ServeOptions) -> Graph:
    from patchaudit.target.record import parse_record

    paths = [e.path for e in parse_record(record).entries] if record else []
    if dist is None:
        changed = paths  # not verified in this run: no file can be taken as RECORD says
    else:
        changed = [d.path for d in dist.drift]
        paths += [d.path for d in dist.drift if d.state is DriftState.ADDED]
    cache = options.cache_dir / GRAPH_CACHE.format(name=framework.key) if options.cache_dir is not None else None
    return build(
        framework.location,
        paths,
        changed=changed,
        record=record,
        cache_file=cache,
        workers=options.workers,
        keep=frozenset({"transformers"}),  # vLLM's models import transformers' modeling code too
    )


def _apply(
    report: Report,
    framework: InstalledDist | None,
    classifier: Classifier | None,
    hf: HfModel | None,
    steps: Walk,
    model: ServedModel,
    why: str | None,
    options: ServeOptions,
    serving: Serving | None = None,
) -> Report:
    def reach_of(dist: str | None, path: str, line: int | None = None) -> Reach:
        key = canonicalize_name(dist) if dist is not None else None
        if hf is not None and key == "transformers":
            return hf.reach_of(path, steps.imported)
        if classifier is None:
            return Reach(kind=ReachClass.SHARED) if hf is not None else Reach(kind=ReachClass.UNKNOWN, why=why)
        if framework is None or key != framework.key:
            return Reach(kind=ReachClass.SHARED)
        return classifier.of(path, line)

    def finding(dist: str | None, f: Finding) -> Finding:
        reach = reach_of(dist, f.path, f.line)
        severity = options.reach_severity.get(reach.kind.value, f.severity)
        return dataclasses.replace(f, reach=reach, severity=severity)

    dists = tuple(
        dataclasses.replace(
            d,
            drift=tuple(dataclasses.replace(x, reach=reach_of(d.name, x.path)) for x in d.drift),
            findings=tuple(finding(d.name, f) for f in d.findings),
        )
        for d in report.distributions
    )
    env_report = dataclasses.replace(
        report.environment,
        drift=tuple(dataclasses.replace(x, reach=reach_of(None, x.path)) for x in report.environment.drift),
        findings=tuple(finding(None, f) for f in report.environment.findings),
    )
    if serving is None:
        serving = Serving(
            model=model.spec, config=str(model.config), framework=None, version=None,
            architectures=model.architectures, note=why,
        )  # fmt: skip
    return dataclasses.replace(report, distributions=dists, environment=env_report, serving=serving)


__all__ = ["Registry", "ServeOptions", "annotate", "reach_of_paths"]
