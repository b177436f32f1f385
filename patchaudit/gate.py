"""The pre-start gate: policy -> audit (-> baseline) -> one verdict, failing closed.

A warm gate does not re-verify: it keeps the last verdict together with a fingerprint of every
file the audit looked at (path, mode, size, mtime_ns, ctime_ns, inode, device) and reuses the
verdict only while that fingerprint is unchanged. ctime cannot be set from user space, so an
edit hidden with `touch -r` still changes the fingerprint and the audit runs again.

This module keeps its imports light: the warm path must cost a fraction of `pip show`.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit import __version__
from patchaudit.errors import PatchAuditError

# typing costs the warm gate milliseconds; annotations are strings (PEP 563) and need it only for checkers.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from patchaudit.environment import Environment
    from patchaudit.policy import Policy
    from patchaudit.report import DistReport, Drift, Finding, Report, Severity

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_INPUT = 2
EXIT_INTERNAL = 3

CACHE_NAME = "gate-v1.json"
CACHE_VERSION = 1
CACHE_KEEP = 8
# A file changed within this long before the fingerprint was taken may change again inside one
# timestamp tick without its ctime moving; such a verdict is not kept.
RACY_NS = 50_000_000
RACY_COARSE_NS = 2_000_000_000


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """One reason the gate fails, as one journal line."""

    kind: str  # modified | missing | added | finding | unverifiable | error
    where: str  # distribution name, or "environment"
    path: str
    detail: str = ""

    def to_list(self) -> list[str]:
        return [self.kind, self.where, self.path, self.detail]


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    exit_code: int
    problems: tuple[Problem, ...] = ()
    distributions: int = 0
    files_checked: int = 0
    approved: int = 0
    baseline: str | None = None
    cached: bool = False
    failed_open: bool = False
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK


def run(options: GateOptions) -> Verdict:
    """The whole gate; never raises. Input errors are exit 2, bugs exit 3, unless failing open."""
    start = time.perf_counter()
    fail_open = options.fail_open
    try:
        policy = _load_policy(options.policy) if options.policy is not None else None
        fail_open = fail_open or (policy is not None and policy.fail_open)
        verdict = _run(options, policy)
    except PatchAuditError as exc:
        hint = f" (hint: {exc.hint})" if exc.hint else ""
        verdict = Verdict(exit_code=EXIT_INPUT, problems=(_error(f"{exc}{hint}"),))
    except Exception as exc:  # fail closed on a bug, but say what it was
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1]
        detail = f"internal error: {type(exc).__name__}: {exc} ({os.path.basename(where.filename)}:{where.lineno})"
        verdict = Verdict(exit_code=EXIT_INTERNAL, problems=(_error(detail),))
    if verdict.exit_code in (EXIT_INPUT, EXIT_INTERNAL) and fail_open:
        verdict = _replace(verdict, exit_code=EXIT_OK, failed_open=True)
    return _replace(verdict, seconds=time.perf_counter() - start)


def _error(message: str) -> Problem:
    return Problem(kind="error", where="gate", path="-", detail=message)


def _replace(verdict: Verdict, **changes: Any) -> Verdict:
    import dataclasses

    return dataclasses.replace(verdict, **changes)


def _load_policy(path: Path) -> Policy:
    from patchaudit.policy import load

    return load(path)


def _run(options: GateOptions, policy: Policy | None) -> Verdict:
    # Without a policy file the warm path never imports the policy (nor the report values).
    python, site_path = options.python, options.site_path
    names, fail_on, baseline = options.names, options.fail_on, options.baseline
    rule_dirs: tuple[Path, ...] = ()
    if policy is not None:
        python = python or (policy.python if site_path is None else None)
        site_path = site_path or (policy.path if options.python is None else None)
        names = names or policy.distributions
        fail_on = fail_on or ("none" if policy.fail_on is None else policy.fail_on.value)
        baseline = baseline or policy.baseline
        rule_dirs = policy.rule_dirs
    fail_on = fail_on or "high"
    # The policy and baseline files are part of the fingerprint, so their content needs no place here.
    key = repr((__version__, str(options.policy), str(python), str(site_path), list(names), fail_on, str(baseline)))

    cache = _VerdictCache.open(python, site_path) if options.use_cache else None
    if cache is not None:
        hit = cache.lookup(key)
        if hit is not None:
            return hit

    from patchaudit import environment
    from patchaudit.policy import Policy

    env = environment.resolve(python, site_path)
    _require_distributions(env, environment.distributions(env), site_path)
    taken = time.time_ns()
    plan, fingerprint, newest = _Plan.build(
        env,
        names,
        extra_files=[p for p in (options.policy, baseline) if p is not None],
        extra_roots=(*rule_dirs, _journal_dir(env)),
    )
    verdict = _verdict(env, names, policy or Policy(), fail_on, baseline, options.use_cache)
    if options.use_cache:
        racy = RACY_COARSE_NS if newest % 1_000_000_000 == 0 else RACY_NS
        if newest < taken - racy:
            _VerdictCache.store(env, python, site_path, key, plan, fingerprint, verdict)
    return verdict


def _require_distributions(env: Environment, found: Sequence[Any], site_path: Path | None) -> None:
    """A gate pointed at a directory holding no distribution has nothing to vouch for: refuse, before
    anything (a cache, a journal) is written there."""
    if found:
        return
    from patchaudit.errors import EnvironmentNotFound

    if site_path is not None:
        raise EnvironmentNotFound(f"no distributions in {site_path}: is this the site-packages directory?")
    where = ", ".join(str(s) for s in env.site_dirs)
    raise EnvironmentNotFound(f"no distributions in {where}: is this the right interpreter?")


def _verdict(
    env: Environment,
    names: Sequence[str],
    policy: Policy,
    fail_on: str,
    baseline_path: Path | None,
    use_cache: bool,
) -> Verdict:
    from patchaudit.audit import ScanOptions, scan
    from patchaudit.report import Severity

    options = ScanOptions(
        names=tuple(names),
        hazards=policy.hazards,
        rule_dirs=policy.rule_dirs,
        severity_overrides=dict(policy.severity),
        use_cache=use_cache,
    )
    report = scan(env, options)
    if baseline_path is not None:
        from patchaudit import baseline

        held = baseline.load(baseline_path)
        report = baseline.check(held, report, baseline.record_paths(env, names), names)
    threshold = None if fail_on == "none" else Severity(fail_on)
    verdict = judge(report, policy, threshold, baseline=str(baseline_path) if baseline_path else None)
    pending = _pending_reverts(env)
    if pending:
        # Files may be half restored: say so rather than leave only drift lines to puzzle over.
        problem = Problem(
            kind="interrupted-revert",
            where="environment",
            path=pending[0],
            detail="a revert was interrupted; `patchaudit scan` on this env finishes or rolls it back",
        )
        verdict = _replace(verdict, exit_code=EXIT_PROBLEMS, problems=(problem, *verdict.problems))
    return verdict


def _journal_dir(env: Environment) -> Path:
    return env.state_dir / "journal"


def _pending_reverts(env: Environment) -> list[str]:
    try:
        return sorted(n for n in os.listdir(_journal_dir(env)) if n.endswith(".json"))
    except OSError:
        return []


def judge(report: Report, policy: Policy, fail_on: Severity | None, *, baseline: str | None = None) -> Verdict:
    """Apply the policy to a report: approved patches pass, everything else is a problem."""
    from patchaudit.report import DistStatus, DriftState

    problems: list[Problem] = []
    approved = 0
    sections: list[tuple[str, tuple[Drift, ...], tuple[Finding, ...], DistReport | None]]
    sections = [(d.name, d.drift, d.findings, d) for d in report.distributions]
    sections.append(("environment", report.environment.drift, report.environment.findings, None))
    for where, drift, findings, dist in sections:
        owner = None if dist is None else dist.name
        approved_paths: set[str] = set()
        for d in drift:
            actual = None if d.state is DriftState.MISSING else d.actual
            if any(a.covers(owner, d.path, actual) for a in policy.approved):
                approved += 1
                approved_paths.add(d.path)
                continue
            problems.append(Problem(kind=d.state.value, where=where, path=d.path, detail=_drift_detail(d)))
        if fail_on is not None:
            for f in findings:
                if f.suppressed or not f.in_change or f.path in approved_paths or not f.severity.at_least(fail_on):
                    continue  # upstream code that verifies against RECORD never fails the gate
                detail = f"{f.severity.value} {f.rule}: {f.message}"
                problems.append(Problem(kind="finding", where=where, path=f"{f.path}:{f.line}", detail=detail))
        if dist is not None and policy.fail_unverifiable and dist.status is DistStatus.UNVERIFIABLE:
            reasons = dist.unverified
            first = reasons[0].reason if reasons else "nothing to verify against"
            more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
            problems.append(Problem(kind="unverifiable", where=where, path=dist.version, detail=first + more))
    return Verdict(
        exit_code=EXIT_PROBLEMS if problems else EXIT_OK,
        problems=tuple(problems),
        distributions=len(report.distributions),
        files_checked=sum(d.files_checked for d in report.distributions),
        approved=approved,
        baseline=baseline,
    )


def _drift_detail(d: Any) -> str:
    parts = []
    if d.expected or d.actual:
        parts.append(f"expected {d.expected or '-'} got {d.actual or '-'}")
    if d.note:
        parts.append(d.note)
    return "; ".join(parts)


# --- the fingerprint: everything the audit reads, by stat ---


@dataclass(frozen=True, kw_only=True, slots=True)
class _Plan:
    """Which paths the audit reads: site dirs (top level), walked trees, and single files."""

    site_dirs: tuple[str, ...]
    roots: tuple[str, ...]
    files: tuple[str, ...]

    @classmethod
    def build(
        cls, env: Environment, names: Sequence[str], *, extra_files: Sequence[Path], extra_roots: Sequence[Path]
    ) -> tuple[_Plan, int, int]:
        """The plan for these distributions, with its fingerprint and newest timestamp, in one walk."""
        from patchaudit import environment
        from patchaudit.record import parse_record
        from patchaudit.report import Source

        chosen = environment.select(environment.distributions(env), names)
        roots: set[str] = set()
        record_paths: set[str] = set()
        for dist in chosen:
            location = str(dist.location)
            roots.add(str(dist.meta_dir))
            if dist.source in (Source.EDITABLE, Source.VCS):
                # verify reads the git checkout such an install runs from (working tree and .git).
                from patchaudit import vcs

                co = vcs.checkout(dist)
                if co is not None:
                    roots.add(str(co.root))
            if dist.record_path is None:
                continue
            try:
                record = parse_record(dist.record_path.read_bytes())
            except OSError:
                continue
            for entry in record.entries:
                record_paths.add(os.path.normpath(os.path.join(location, entry.path)))
                first, sep, _ = posixpath.normpath(entry.path.replace("\\", "/")).partition("/")
                if sep and first not in ("", "..", "__pycache__") and not os.path.isabs(entry.path):
                    roots.add(os.path.join(location, first))
        package = Path(__file__).resolve().parent
        # patchaudit's own code and built-in rules (`_rules` in a wheel, `<checkout>/rules` otherwise).
        tools = [str(package)]
        if not (package / "_rules").is_dir() and (package.parent / "rules").is_dir():
            tools.append(str(package.parent / "rules"))
        tools += [str(p.absolute()) for p in extra_roots]
        plan = cls(site_dirs=tuple(str(s) for s in env.site_dirs), roots=tuple(sorted(roots)) + tuple(tools), files=())
        # RECORD entries that the walk does not reach (scripts in bin/, files below a symlinked
        # directory) are stat'ed one by one.
        seen: set[str] = set()
        rows = plan._tree_rows(seen)
        files = tuple(sorted(record_paths - seen)) + tuple(str(p.absolute()) for p in extra_files)
        rows.extend(_row(p) for p in files)
        fingerprint, newest = _digest(rows)
        return cls(site_dirs=plan.site_dirs, roots=plan.roots, files=files), fingerprint, newest

    def to_dict(self) -> dict[str, Any]:
        return {"site_dirs": list(self.site_dirs), "roots": list(self.roots), "files": list(self.files)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _Plan:
        return cls(site_dirs=tuple(data["site_dirs"]), roots=tuple(data["roots"]), files=tuple(data["files"]))

    def fingerprint(self) -> tuple[int, int]:
        """(fingerprint of every stat the audit depends on, newest mtime/ctime seen in ns)."""
        rows = self._tree_rows(None)
        rows.extend(_row(p) for p in self.files)
        return _digest(rows)

    def _tree_rows(self, seen: set[str] | None) -> list[tuple[int, ...]]:
        rows: list[tuple[int, ...]] = []
        for site in self.site_dirs:
            rows.append(_row(site))
            try:
                with os.scandir(site) as it:
                    entries = list(it)
            except OSError:
                continue
            for entry in entries:
                rows.append(_entry_row(entry))
                if entry.name.endswith((".dist-info", ".egg-info")):
                    for member in ("RECORD", "METADATA", "PKG-INFO", "direct_url.json"):
                        rows.append(_row(os.path.join(entry.path, member)))
        _walk_rows(self.roots, rows, seen)
        return rows


def _digest(rows: list[tuple[int, ...]]) -> tuple[int, int]:
    """Rows hold only integers, whose hash() is the same in every process (no hash seed), so the
    fingerprint needs neither hashlib nor names: a directory's own mtime/ctime row changes whenever
    an entry in it is added, removed or renamed. Rows follow directory order, which is stable while
    a directory is unchanged; a new order costs one audit, never a stale verdict."""
    return hash(tuple(rows)), max((max(r[2], r[3]) for r in rows if len(r) > 3), default=0)


def _row(path: str) -> tuple[int, ...]:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return (exc.errno or 0,)
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _entry_row(entry: os.DirEntry[str]) -> tuple[int, ...]:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError as exc:
        return (exc.errno or 0,)
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _walk_rows(roots: Sequence[str], rows: list[tuple[int, ...]], seen: set[str] | None) -> None:
    """Append a row for every entry below each root; symlinked directories are not entered."""
    for root in roots:
        rows.append(_row(root))
        stack = [root]
        while stack:
            current = stack.pop()
            try:
                with os.scandir(current) as it:
                    entries = list(it)
            except OSError as exc:
                rows.append((exc.errno or 0,))
                continue
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    rows.append((exc.errno or 0,))
                    continue
                rows.append((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                if seen is not None:
                    seen.add(entry.path)


# --- the verdict cache, beside the environment's stat cache ---


def _predicted_prefix(python: Path | None, site_path: Path | None) -> Path | None:
    """Where the environment's prefix most likely is, without running its interpreter."""
    if site_path is not None:
        site = site_path.absolute()
        parts = site.parts
        if len(parts) >= 3 and parts[-2].startswith("python") and parts[-3] in ("lib", "lib64"):
            return site.parents[2]
        return site.parent if parts[-1] in ("site-packages", "dist-packages") else site
    exe = (python if python is not None else Path(sys.executable)).absolute()
    if exe.is_dir():
        exe = exe / "bin" / "python"
    for d in (exe.parent, exe.parent.parent):
        if (d / "pyvenv.cfg").is_file():
            return d
    return exe.parent.parent


def _resolution_stat(python: Path | None, site_path: Path | None) -> list[Any]:
    """What the resolved environment depends on: the interpreter (and its pyvenv.cfg) or the site dir."""
    paths = [str(site_path.absolute())] if site_path is not None else []
    if site_path is None:
        exe = (python if python is not None else Path(sys.executable)).absolute()
        paths = [str(exe), str(exe.parent / "pyvenv.cfg"), str(exe.parent.parent / "pyvenv.cfg")]
    rows: list[Any] = [list(_row(p)) for p in paths]
    if site_path is None:
        rows.append(list(_row(os.path.realpath(paths[0]))))
    return rows


class _VerdictCache:
    def __init__(self, path: Path, data: dict[str, Any], python: Path | None, site_path: Path | None) -> None:
        self.path = path
        self.data = data
        self.python = python
        self.site_path = site_path

    @classmethod
    def open(cls, python: Path | None, site_path: Path | None) -> _VerdictCache | None:
        prefix = _predicted_prefix(python, site_path)
        if prefix is None:
            return None
        path = prefix / ".patchaudit" / "cache" / CACHE_NAME
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return None
        return cls(path, data, python, site_path)

    def lookup(self, key: str) -> Verdict | None:
        entry = self.data.get("entries", {}).get(key)
        if not isinstance(entry, dict):
            return None
        try:
            if entry["resolved"] != _resolution_stat(self.python, self.site_path):
                return None
            plan = _Plan.from_dict(entry["plan"])
            fingerprint, _ = plan.fingerprint()
            if fingerprint != entry["fingerprint"]:
                return None
            return _verdict_from_dict(entry["verdict"])
        except (KeyError, TypeError, ValueError):
            return None

    @staticmethod
    def store(
        env: Environment,
        python: Path | None,
        site_path: Path | None,
        key: str,
        plan: _Plan,
        fingerprint: int,
        verdict: Verdict,
    ) -> None:
        """Keep the verdict; a cache that cannot be written is simply not kept."""
        path = env.state_dir / "cache" / CACHE_NAME
        try:
            data = json.loads(path.read_bytes())
            entries = data["entries"] if data.get("version") == CACHE_VERSION else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            entries = {}
        entries.pop(key, None)
        while len(entries) >= CACHE_KEEP:
            entries.pop(next(iter(entries)))
        entries[key] = {
            "resolved": _resolution_stat(python, site_path),
            "plan": plan.to_dict(),
            "fingerprint": fingerprint,
            "verdict": _verdict_to_dict(verdict),
        }
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": entries}, separators=(",", ":")))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)


def _verdict_to_dict(v: Verdict) -> dict[str, Any]:
    return {
        "exit_code": v.exit_code,
        "problems": [p.to_list() for p in v.problems],
        "distributions": v.distributions,
        "files_checked": v.files_checked,
        "approved": v.approved,
        "baseline": v.baseline,
    }


def _verdict_from_dict(d: dict[str, Any]) -> Verdict:
    problems = tuple(Problem(kind=k, where=w, path=p, detail=t) for k, w, p, t in d["problems"])
    code = int(d["exit_code"])
    if code not in (EXIT_OK, EXIT_PROBLEMS):
        raise ValueError(code)
    if int(d["distributions"]) < 1:  # kept by an older gate that let an empty directory pass
        raise ValueError(d["distributions"])
    return Verdict(
        exit_code=code,
        problems=problems,
        distributions=int(d["distributions"]),
        files_checked=int(d["files_checked"]),
        approved=int(d["approved"]),
        baseline=d.get("baseline"),
        cached=True,
    )
