"""The pre-start gate: policy -> audit (-> baseline) -> one verdict, failing closed.

A warm gate does not re-verify: it keeps the last verdict together with a fingerprint of every
file the audit looked at (path, mode, size, mtime_ns, ctime_ns, inode, device) and reuses the
verdict only while that fingerprint is unchanged. ctime cannot be set from user space, so an
edit hidden with `touch -r` still changes the fingerprint and the audit runs again.

The verdict (also `baseline check`'s) is in verdict.py, what it depends on in plan.py, the cache in cache.py;
a warm gate that finds its verdict kept needs only warm.py and what it imports, no dataclass.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import ExitCode, PatchAuditError
from patchaudit.gate import warm
from patchaudit.gate.cache import Cached, VerdictCache, predicted_prefix
from patchaudit.gate.plan import FilePlan
from patchaudit.gate.verdict import (
    Verdict,
    error,
    interrupted,
    judge,
    replace,
)
from patchaudit.gate.warm import gate_key, lookup
from patchaudit.parallel.deadline import DEFAULT_GATE_TIMEOUT, deadline, phase
from patchaudit.target import cachedir

# typing costs the warm gate milliseconds; annotations are strings (PEP 563) and need it only for checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from patchaudit.gate.policy import Policy
    from patchaudit.target.environment import Environment


@dataclass(frozen=True, kw_only=True, slots=True)
class GateOptions:
    """What the command line says; anything left None comes from the policy."""

    names: tuple[str, ...] = ()
    policy: Path | None = None
    python: Path | None = None
    site_path: Path | None = None
    baseline: Path | None = None
    fail_on: str | None = None  # "high" ... "info", "none"
    fail_open: bool = False
    use_cache: bool = True
    cache_dir: Path | None = None  # --cache-dir (else the policy's cache_dir; see patchaudit.target.cachedir)
    workers: int | None = None  # None: the policy's, else every CPU this process may use
    timeout: float | None = None  # None: the policy's, else patchaudit.parallel.deadline.DEFAULT_GATE_TIMEOUT
    root: Path | None = None  # --root: a whole tree audited as if it were `/` (its caches never inside it)
    image: str | None = None  # --image: an image read layer by layer (no cache: nothing of it is on disk)
    serve: str | None = None  # the served model (else the policy's `serve`): each problem says its reach


def run(options: GateOptions) -> Verdict:
    """The whole gate; never raises. Input errors are exit 2, bugs exit 3, unless failing open."""
    start = time.perf_counter()
    fail_open = options.fail_open
    try:
        policy = _load_policy(options.policy) if options.policy is not None else None
        fail_open = fail_open or (policy is not None and policy.fail_open)
        timeout = options.timeout or (policy.timeout if policy is not None else None) or DEFAULT_GATE_TIMEOUT
        with deadline(timeout):
            verdict = _run(options, policy)
    except Exception as exc:
        verdict = failure(exc)
    return settled(verdict, fail_open, start)


def failure(exc: Exception) -> Verdict:
    """The verdict of a gate that could not judge: input errors are exit 2, bugs exit 3."""
    if isinstance(exc, PatchAuditError):
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        return Verdict(exit_code=ExitCode.USAGE, problems=(error(f"{exc}{hint}"),))
    import traceback  # fail closed on a bug, but say what it was

    where = traceback.extract_tb(exc.__traceback__)[-1]
    detail = f"internal error: {type(exc).__name__}: {exc} ({os.path.basename(where.filename)}:{where.lineno})"
    return Verdict(exit_code=ExitCode.INTERNAL, problems=(error(detail),))


def settled(verdict: Verdict, fail_open: bool, start: float) -> Verdict:
    """The verdict as the gate gives it: failing open where asked, with the seconds since `start`."""
    if verdict.exit_code in (ExitCode.USAGE, ExitCode.INTERNAL) and fail_open:
        verdict = replace(verdict, exit_code=ExitCode.CLEAN, failed_open=True)
    return replace(verdict, seconds=time.perf_counter() - start)


def _load_policy(path: Path) -> Policy:
    from patchaudit.gate.policy import load

    return load(path)


def _run(options: GateOptions, policy: Policy | None) -> Verdict:
    # Without a policy file the warm path never imports the policy (nor the report values).
    python, site_path = options.python, options.site_path
    names, fail_on, baseline = options.names, options.fail_on, options.baseline
    rule_dirs: tuple[Path, ...] = ()
    cache_base, workers, serve = options.cache_dir, options.workers, options.serve
    if policy is not None:
        serve = serve or policy.serve
        cache_base = cache_base or policy.cache_dir
        workers = workers or policy.workers
        python = python or (policy.python if site_path is None else None)
        site_path = site_path or (policy.path if options.python is None else None)
        names = names or policy.distributions
        fail_on = fail_on or ("none" if policy.fail_on is None else policy.fail_on.value)
        baseline = baseline or policy.baseline
        rule_dirs = policy.rule_dirs
    fail_on = fail_on or "high"
    if options.image is not None:
        return _image_verdict(options, policy, names, fail_on, workers)
    # The policy and baseline files are part of the fingerprint, so their content needs no place here.
    key = gate_key(options.policy, python, site_path, names, fail_on, baseline)
    prefix = predicted_prefix(python, site_path)
    if options.root is not None:
        python = site_path = None  # the tree's own site directories, never the policy's host paths
        prefix = Path(os.path.realpath(options.root))
        cache_base = cache_base or cachedir.user_cache(os.environ)
        key += repr(("root", str(prefix)))
    if policy is not None and policy.models:
        # Where a model resolves to depends on these and on the model's own files (in the fingerprint).
        env_keys = ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME")
        key += repr([(m.spec, m.revision, str(m.cache_dir)) for m in policy.models])
        key += repr([os.environ.get(k) for k in env_keys])

    serve_files: list[Path] = []
    if serve:
        from patchaudit.serving.argv import resolve_spec
        from patchaudit.serving.config import locate

        serve = resolve_spec(serve)  # `auto`: the model this gate's own unit serves (its ExecStart=)
        serve_files.append(locate(serve))  # what it names is part of the fingerprint, so the key holds it
        key += repr(("serve", serve, str(serve_files[0])))
    where = cachedir.locate(prefix, cache_base) if options.use_cache else None
    stale = key in warm.STALE  # fastgate looked and missed: no second fingerprint before the audit
    warm.STALE.discard(key)
    cache = None
    if where is not None and where.path is not None and not stale:
        cache = VerdictCache.open(where.path, key, python, site_path)
    hit = lookup(cache, workers) if cache is not None else None
    if hit is not None:
        return hit.verdict() if isinstance(hit, Cached) else hit

    from patchaudit.gate.policy import Policy
    from patchaudit.target import environment

    models = _model_targets(policy)
    phase("resolving the environment")
    env = environment.resolve(python, site_path, options.root)
    _require_distributions(env, environment.distributions(env), site_path)
    if where is not None and env.prefix != prefix:
        where = cachedir.locate(env.prefix, cache_base)
    taken = time.time_ns()
    unit_files, unit_dirs = _unit_paths(baseline)
    from patchaudit.check.errata import SHIPPED

    errata_files = (SHIPPED, *(policy.errata if policy is not None else ()))
    phase("listing the files to fingerprint")
    plan, fingerprint, newest = FilePlan.build(
        env,
        names,
        extra_files=[
            *(p for p in (options.policy, baseline) if p is not None),
            *unit_files,
            *errata_files,
            *serve_files,
        ],
        extra_roots=(*rule_dirs, _journal_dir(env), *unit_dirs, *(m.root for m in models)),
    )
    use_cache = where is not None and where.path is not None and cachedir.ensure(where.path)
    phase("verifying files")
    verdict = _verdict(
        env,
        names,
        policy or Policy(),
        fail_on,
        baseline,
        use_cache,
        models,
        workers=workers,
        cache_base=cache_base,
        serve=serve,
    )
    if use_cache and where is not None and where.path is not None:
        from patchaudit.parallel.statcache import racy_window_ns

        # a file changed within a timestamp tick of the fingerprint may change again unseen: keep no verdict
        if newest < taken - racy_window_ns(newest):
            unkept = VerdictCache.store(where.path, python, site_path, key, plan, fingerprint, verdict)
            if unkept is not None:  # a full or read-only cache: the verdict stands, the next start verifies again
                verdict = replace(verdict, notes=(*verdict.notes, f"running uncached: {unkept}"))
    elif where is not None:
        # asked for a cache and none can be written: every start verifies from scratch; say so, once
        note = where.note or f"cannot create the cache directory {where.path}"
        verdict = replace(verdict, notes=(*verdict.notes, f"running uncached: {note}"))
    return verdict


def _image_verdict(
    options: GateOptions, policy: Policy | None, names: Sequence[str], fail_on: str, workers: int | None
) -> Verdict:
    """The gate over an image: its report judged by the policy as a host's is (no baseline, no cache)."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.gate.policy import Policy
    from patchaudit.image.verify import ImageOptions, scan_image
    from patchaudit.report import Severity

    if options.python is not None or options.site_path is not None or options.root is not None:
        raise PatchAuditError("--image takes no --python, --path or --root")
    if options.baseline is not None:
        raise PatchAuditError("--image takes no --baseline yet: hold the image to a policy's approved patches")
    policy = policy or Policy()
    image_options = ImageOptions(
        names=tuple(names), hazards=policy.hazards, workers=workers, rule_dirs=policy.rule_dirs, errata=policy.errata
    )
    report = scan_image(options.image or "", image_options)
    threshold = None if fail_on == "none" else Severity(fail_on)
    return judge(report, policy, threshold)


def _model_targets(policy: Policy | None) -> list[Any]:
    """The policy's model directories, resolved (a few stats; nothing hashed); a bad one is exit 2."""
    if policy is None or not policy.models:
        return []
    from patchaudit.models.layout import resolve

    return [resolve(m.spec, revision=m.revision, cache_dir=m.cache_dir) for m in policy.models]


def _unit_paths(baseline_path: Path | None) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The unit files a baseline's service environment is read from: the verdict depends on them too."""
    if baseline_path is None:
        return (), ()
    from patchaudit.gate import baseline
    from patchaudit.procs.unitfile import find, watched_paths

    try:
        held = baseline.load(baseline_path).service
        return watched_paths(find(held.unit, held.unit_dirs)) if held is not None else ((), ())
    except PatchAuditError:
        return (), ()  # the verdict itself reports it


def _require_distributions(env: Environment, found: Sequence[Any], site_path: Path | None) -> None:
    from patchaudit.target.environment import require_any

    require_any(env, found, site_path)


def _verdict(
    env: Environment,
    names: Sequence[str],
    policy: Policy,
    fail_on: str,
    baseline_path: Path | None,
    use_cache: bool,
    models: Sequence[Any] = (),
    cache_base: Path | None = None,
    workers: int | None = None,
    serve: str | None = None,
) -> Verdict:
    import dataclasses

    from patchaudit.check.audit import ScanOptions, scan
    from patchaudit.report import Severity
    from patchaudit.revert.recovery import RESUME_COMMAND, pending_runs

    options = ScanOptions(
        names=tuple(names),
        hazards=policy.hazards,
        rule_dirs=policy.rule_dirs,
        severity_overrides=dict(policy.severity),
        use_cache=use_cache,
        cache_dir=cache_base,
        workers=workers,
        errata=policy.errata,
    )
    report = scan(env, options)
    if baseline_path is not None:
        from patchaudit.gate import baseline

        held = baseline.load(baseline_path)
        checked = baseline.check(held, report, baseline.record_paths(env, names), names)
        if policy.hazards:
            checked = baseline.with_hazards(
                checked,
                report,
                rule_dirs=policy.rule_dirs,
                severity_overrides=dict(policy.severity),
                workers=workers,
            )
        report = checked
    if models:
        from patchaudit.models.scan import ModelScanOptions, scan_model

        model_options = ModelScanOptions(use_cache=use_cache, severity_overrides=dict(policy.severity))
        report = dataclasses.replace(report, models=tuple(scan_model(m, model_options).report for m in models))
    if serve:
        from patchaudit.check.audit import cache_dir
        from patchaudit.serving.annotate import ServeOptions, annotate

        serve_options = ServeOptions(
            model=serve,
            cache_dir=cache_dir(env, options),
            workers=workers or 2,
            reach_severity=dict(policy.reach_severity),
        )
        report = annotate(report, env, serve_options)
    threshold = None if fail_on == "none" else Severity(fail_on)
    verdict = judge(report, policy, threshold, baseline=str(baseline_path) if baseline_path else None)
    pending = pending_runs(env) + [p for m in models for p in _pending_in(m.state_dir / "journal")]
    if pending:
        # Files may be half restored: say so (and how to finish it) rather than leave drift lines to puzzle over;
        # the gate reads, it never finishes a revert itself.
        where = f"--python {env.python}" if env.python else f"--path {env.site_dirs[0]}"
        problem = interrupted(pending, f"{RESUME_COMMAND} {where}")
        verdict = replace(verdict, exit_code=ExitCode.PROBLEMS, problems=(problem, *verdict.problems))
    return verdict


def _journal_dir(env: Environment) -> Path:
    return env.state_dir / "journal"


def _pending_in(journal: Path) -> list[str]:
    """Interrupted model reverts: their journals, by name (recovery itself is `model revert`'s)."""
    try:
        return sorted(n for n in os.listdir(journal) if n.endswith(".json"))
    except OSError:
        return []
