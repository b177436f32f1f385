"""Baselines: a known-good snapshot of an environment, and the record of patches approved into it.

A baseline holds the hash every file *should* have. `check` compares the environment's current
hashes (taken from a verify report) with the baseline's, so a rewritten RECORD hides nothing.
`accept` approves one patch at a time; in a git repository each approval is a commit.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchaudit.errors import BaselineError, BaselineNotFound, UnsafePath
from patchaudit.fs.atomic import atomic_write
from patchaudit.fs.beneath import read_below
from patchaudit.fs.safefs import Cap, UnreadableFile, Why, parse_json, read_capped
from patchaudit.report import DistReport, Drift, DriftState, EnvironmentReport, Report, Severity

if TYPE_CHECKING:
    from patchaudit.procs.serviceenv import ServiceEnv
    from patchaudit.target.environment import Environment

SCHEMA = "patchaudit/baseline/v1"
ABSENT = "absent"
# What a file that exists but has no digest (a symlink, an unreadable file) stands for while hashes
# are compared: never None, which means "absent", and never equal to any baseline hash.
UNHASHABLE = "unhashable"
CUSTOMIZE_MODULES = ("sitecustomize.py", "usercustomize.py")


@dataclass(frozen=True, kw_only=True, slots=True)
class Approval:
    """One approved patch: which file, the hash it was approved at, why, by whom, when."""

    path: str
    hash: str  # digest of the approved content, or ABSENT when the approval is a removal
    previous: str | None
    reason: str
    by: str
    at: str
    distribution: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "distribution": self.distribution,
            "path": self.path,
            "hash": self.hash,
            "previous": self.previous,
            "reason": self.reason,
            "by": self.by,
            "at": self.at,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class DistSnapshot:
    name: str
    version: str
    location: str
    files: Mapping[str, str]  # path relative to location -> "algo=digest"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "location": self.location,
            "files": dict(sorted(self.files.items())),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Baseline:
    created: str
    python: str | None
    paths: tuple[str, ...]
    distributions: tuple[DistSnapshot, ...]
    hooks: Mapping[str, str] = field(default_factory=dict)  # unowned startup hook -> digest
    approved: tuple[Approval, ...] = ()
    service: ServiceEnv | None = None  # a systemd unit's steering variables (baseline create --unit)

    def find(self, name: str) -> DistSnapshot | None:
        key = _canon(name)
        return next((d for d in self.distributions if _canon(d.name) == key), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "created": self.created,
            "target": {"python": self.python, "paths": list(self.paths)},
            "distributions": [d.to_dict() for d in self.distributions],
            "environment": {
                "hooks": dict(sorted(self.hooks.items())),
                **({"service": self.service.to_dict()} if self.service else {}),
            },
            "approved": [a.to_dict() for a in self.approved],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "baseline") -> Baseline:
        """Validate a parsed baseline; every problem is collected before one BaselineError."""
        problems: list[str] = []
        if not isinstance(data, dict):
            raise BaselineError(f"{source}: not a JSON object")
        if data.get("schema") != SCHEMA:
            raise BaselineError(f"{source}: schema is {data.get('schema')!r}, expected {SCHEMA!r}")
        known = {"schema", "created", "target", "distributions", "environment", "approved"}
        problems += [f"unknown key {k!r}" for k in data if k not in known]
        target = data.get("target") or {}
        dists: list[DistSnapshot] = []
        for n, item in enumerate(data.get("distributions") or [], start=1):
            try:
                files = item["files"]
                if not isinstance(files, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in files.items()
                ):
                    raise TypeError
                dists.append(
                    DistSnapshot(
                        name=str(item["name"]),
                        version=str(item["version"]),
                        location=str(item["location"]),
                        files=files,
                    )
                )
            except (KeyError, TypeError):
                problems.append(f"distributions[{n}] needs name, version, location and files (path -> hash)")
        hooks = (data.get("environment") or {}).get("hooks") or {}
        service = None
        raw_service = (data.get("environment") or {}).get("service")
        if raw_service is not None:
            from patchaudit.procs.serviceenv import ServiceEnv

            try:
                service = ServiceEnv.from_dict(raw_service, source=source)
            except BaselineError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
        if not isinstance(hooks, dict):
            problems.append("environment.hooks must map a hook file name to its hash")
            hooks = {}
        approved: list[Approval] = []
        for n, item in enumerate(data.get("approved") or [], start=1):
            try:
                approved.append(
                    Approval(
                        distribution=item.get("distribution"),
                        path=str(item["path"]),
                        hash=str(item["hash"]),
                        previous=item.get("previous"),
                        reason=str(item["reason"]),
                        by=str(item["by"]),
                        at=str(item["at"]),
                    )
                )
            except (KeyError, TypeError, AttributeError):
                problems.append(f"approved[{n}] needs path, hash, reason, by and at")
        if problems:
            raise BaselineError(f"{source}: " + "; ".join(problems))
        return cls(
            created=str(data.get("created", "")),
            python=target.get("python"),
            paths=tuple(target.get("paths") or ()),
            distributions=tuple(dists),
            hooks=hooks,
            approved=tuple(approved),
            service=service,
        )


def load(path: Path) -> Baseline:
    try:
        raw = read_capped(path, Cap.JSON, follow=True)
    except UnreadableFile as exc:
        if exc.why is Why.MISSING:
            raise BaselineNotFound(
                f"baseline {path} does not exist", hint="create it with `patchaudit baseline create --out FILE`"
            ) from None
        raise BaselineError(f"cannot read baseline {exc}") from None
    try:
        data = parse_json(raw)
    except ValueError as exc:
        raise BaselineError(f"{path}: not JSON: {exc}") from None
    return Baseline.from_dict(data, source=str(path))


def save(baseline: Baseline, path: Path) -> None:
    """Write atomically, with sorted keys, so that a diff between two versions shows only what changed."""
    text = json.dumps(baseline.to_dict(), indent=1) + "\n"
    try:
        atomic_write(path, text)
    except OSError as exc:
        raise BaselineError(f"cannot write baseline {path}: {exc.strerror or exc}") from None


# --- snapshot and check: both read a verify report, never hash files their own way ---


def _current_hashes(dist: DistReport, record_path: Path | None) -> dict[str, str | None]:
    """Every file's current hash: RECORD's for files the report found clean, the report's for the rest."""
    current: dict[str, str | None] = {}
    if record_path is not None:
        from patchaudit.target.record import parse_record

        try:
            record = parse_record(read_below(record_path, Cap.RECORD))
        except UnreadableFile:
            record = None
        if record is not None:
            for entry in record.entries:
                if entry.hash is not None and entry.hash.trusted:
                    current[_norm(entry.path)] = str(entry.hash)
    for drift in dist.drift:
        key = _norm(drift.path)
        if drift.state is DriftState.MISSING:
            current[key] = None
        else:
            current[key] = drift.actual or _unhashable(drift.note)
    return current


def _unhashable(why: str | None) -> str:
    return f"{UNHASHABLE} ({why or 'not a regular file'})"


def _is_digest(value: str | None) -> bool:
    """A real "algo=digest" (what a baseline may hold), not ABSENT nor an unhashable marker."""
    return value is not None and "=" in value and not value.startswith((UNHASHABLE, "unreadable"))


def snapshot(
    report: Report,
    record_paths: Mapping[str, Path | None],
    *,
    include_drift: bool,
    who: str,
) -> tuple[Baseline, list[tuple[str | None, Drift]]]:
    """A baseline from a verify report; returns it with the drift it left out (or approved, if told)."""
    now = _now()
    dists: list[DistSnapshot] = []
    approvals: list[Approval] = []
    left_out: list[tuple[str | None, Drift]] = []
    for dist in report.distributions:
        current = _current_hashes(dist, record_paths.get(dist.name))
        files: dict[str, str] = {}
        expected_by_path = {_norm(d.path): d for d in dist.drift}
        for path, digest in current.items():
            drift = expected_by_path.get(path)
            if drift is not None and (not include_drift or (digest is not None and not _is_digest(digest))):
                # A symlink or unreadable file is never approved wholesale: it stays drift.
                left_out.append((dist.name, drift))
                if drift.expected is not None:
                    files[path] = drift.expected
                continue
            if drift is not None:
                approvals.append(_creation_approval(dist.name, drift, who, now))
            if digest is not None:
                files[path] = digest
        dists.append(DistSnapshot(name=dist.name, version=dist.version, location=dist.location, files=files))
    hooks: dict[str, str] = {}
    for drift in report.environment.drift:
        if include_drift and drift.actual is not None and _is_digest(drift.actual):
            hooks[drift.path] = drift.actual
            approvals.append(_creation_approval(None, drift, who, now))
        else:
            left_out.append((None, drift))
    baseline = Baseline(
        created=now,
        python=report.target.python,
        paths=report.target.paths,
        distributions=tuple(dists),
        hooks=hooks,
        approved=tuple(approvals),
    )
    return baseline, left_out


def _creation_approval(dist: str | None, drift: Drift, who: str, now: str) -> Approval:
    return Approval(
        distribution=dist,
        path=drift.path,
        hash=drift.actual or ABSENT,
        previous=drift.expected,
        reason="present when the baseline was created (--include-drift)",
        by=who,
        at=now,
    )


def check(
    baseline: Baseline,
    report: Report,
    record_paths: Mapping[str, Path | None],
    names: Sequence[str] = (),
) -> Report:
    """The report restated against the baseline: drift is what differs from the baseline's hashes.

    Every distribution of the baseline (those in `names`, when given) is held to it: one the report
    does not cover is no longer installed, and is reported with its files, not skipped.
    """
    dists: list[DistReport] = []
    covered = {_canon(d.name) for d in report.distributions}
    wanted = {_canon(n) for n in names}
    for held in baseline.distributions:
        key = _canon(held.name)
        if key in covered or (wanted and key not in wanted):
            continue
        covered.add(key)
        dists.append(_gone(held))
    for dist in report.distributions:
        snap = baseline.find(dist.name)
        if snap is None:
            drift: tuple[Drift, ...] = (
                Drift(path=f"{dist.name} {dist.version}", state=DriftState.ADDED, note="distribution not in baseline"),
            )
        elif snap.version != dist.version:
            drift = (
                Drift(
                    path=f"{dist.name} {dist.version}",
                    state=DriftState.MODIFIED,
                    note=f"version changed: the baseline has {snap.version}",
                ),
            )
        else:
            drift = tuple(_compare(snap, dist, _current_hashes(dist, record_paths.get(dist.name))))
            drift = tuple(_since_approval(baseline, dist.name, d) for d in drift)
        changed = {d.path for d in drift}
        findings = tuple(f for f in dist.findings if f.path in changed)
        dists.append(dataclasses.replace(dist, drift=drift, findings=findings))
    env_drift = tuple(
        d for d in report.environment.drift if not _is_digest(d.actual) or baseline.hooks.get(d.path) != d.actual
    )
    kept = {d.path for d in env_drift}
    env_findings = tuple(f for f in report.environment.findings if f.path in kept or f.severity.value == "info")
    variables = report.environment.variables
    if baseline.service is not None:
        from patchaudit.procs.serviceenv import compare

        variables += compare(baseline.service, report.target.paths)
    return dataclasses.replace(
        report,
        distributions=tuple(dists),
        environment=EnvironmentReport(drift=env_drift, findings=env_findings, variables=variables),
    )


def _since_approval(baseline: Baseline, dist: str | None, drift: Drift) -> Drift:
    """A file approved once and changed again says so, naming the approval it no longer matches."""
    key = _canon(dist) if dist else None
    found = [
        a
        for a in baseline.approved
        if a.path == drift.path and (a.distribution is None or key is None or _canon(a.distribution) == key)
    ]
    if not found:
        return drift
    last = found[-1]
    said = f"changed since its approval (reason: {last.reason}; by {last.by} at {last.at})"
    return dataclasses.replace(drift, note=f"{drift.note}; {said}" if drift.note else said)


def with_hazards(
    checked: Report,
    scanned: Report,
    *,
    rule_dirs: Sequence[Path] = (),
    severity_overrides: Mapping[str, Severity] | None = None,
    workers: int | None = None,
) -> Report:
    """The hazard rules over every change against the baseline that the scan did not already judge.

    The scan runs the rules on what differs from RECORD; a change hidden by a rewritten RECORD, or any
    other file that differs only from the baseline, is judged here, so nothing unapproved passes unread.
    There are no pristine bytes to compare with: every finding in such a file counts as a change.
    """
    from patchaudit.check.audit import hazards_over

    judged = {d.name: {x.path for x in d.drift} for d in scanned.distributions}
    unjudged = {
        dist.name: [
            d.path
            for d in dist.drift
            if d.state is not DriftState.MISSING and d.path.endswith(".py") and d.path not in judged.get(dist.name, ())
        ]
        for dist in checked.distributions
    }
    return hazards_over(
        checked, unjudged, rule_dirs=rule_dirs, severity_overrides=severity_overrides or {}, workers=workers
    )


def _gone(snap: DistSnapshot) -> DistReport:
    """A baselined distribution that is no longer installed: it, and every file of it that changed."""
    from patchaudit.report import Source

    empty = DistReport(name=snap.name, version=snap.version, location=snap.location, source=Source.WHEEL)
    files = tuple(_compare(snap, empty, {}))
    note = "distribution in the baseline is not installed"
    head = Drift(path=f"{snap.name} {snap.version}", state=DriftState.MISSING, note=note)
    return dataclasses.replace(empty, drift=(head, *files), files_checked=len(snap.files), verifiable=False)


def _compare(snap: DistSnapshot, dist: DistReport, current: dict[str, str | None]) -> Iterable[Drift]:
    notes = {_norm(d.path): d for d in dist.drift}
    for path, expected in sorted(snap.files.items()):
        # When RECORD no longer lists a file, look at the file itself rather than trust the rewritten RECORD.
        actual = current[path] if path in current else _hash(Path(dist.location), path)
        if actual == expected:
            continue
        if actual is None:
            yield Drift(path=path, state=DriftState.MISSING, expected=expected)
        else:
            seen = notes.get(path)
            yield Drift(
                path=path,
                state=DriftState.MODIFIED,
                expected=expected,
                actual=actual if _is_digest(actual) else None,
                nlink=seen.nlink if seen else 1,
                note=seen.note if seen else (None if _is_digest(actual) else actual),
            )
    for path, actual in sorted(current.items()):
        if path not in snap.files and actual is not None:
            seen = notes.get(path)
            note = seen.note if seen else (None if _is_digest(actual) else actual)
            yield Drift(path=path, state=DriftState.ADDED, actual=actual if _is_digest(actual) else None, note=note)


def _hash(location: Path, rel: str) -> str | None:
    from patchaudit.parallel.hashing import hash_file

    state = hash_file(str(location / rel))
    if state.missing:
        return None
    return state.digest or f"unreadable ({state.error or state.symlink or 'not a regular file'})"


def record_paths(env: Environment, names: Sequence[str] = ()) -> dict[str, Path | None]:
    """Distribution name -> its RECORD, for the distributions a report covers."""
    from patchaudit.target import environment

    every = environment.distributions(env)
    environment.require_any(env, every)
    chosen = environment.select(every, names)
    return {d.name: d.record_path for d in chosen}


def create(
    env: Environment,
    out: Path,
    *,
    names: Sequence[str] = (),
    include_drift: bool = False,
    who: str | None = None,
    unit: str | None = None,
    unit_dirs: Sequence[str] = (),
) -> tuple[Baseline, list[tuple[str | None, Drift]], str | None]:
    """Snapshot the environment into `out`; returns the baseline, the drift left out, the git commit.
    With `unit`, the unit's steering variables are recorded too (unit files, hooks, live process)."""
    from patchaudit.check.audit import ScanOptions, scan

    service = None
    if unit is not None:
        from patchaudit.procs.serviceenv import collect, live_process

        sites = [str(s) for s in env.site_dirs]
        service = collect(unit, unit_dirs=unit_dirs, site_dirs=sites, process=live_process(unit))
    report = scan(env, ScanOptions(names=tuple(names), hazards=False))
    who = who or who_approves(out.parent)
    baseline, left_out = snapshot(report, record_paths(env, names), include_drift=include_drift, who=who)
    baseline = dataclasses.replace(baseline, service=service)
    save(baseline, out)
    listed = ", ".join(f"{d.name} {d.version}" for d in baseline.distributions[:5])
    more = len(baseline.distributions) - 5
    subject = f"Create baseline of {listed}" + (f" and {more} more" if more > 0 else "")
    body = f"\nFiles: {sum(len(d.files) for d in baseline.distributions)}\nCreated-by: {who}\n"
    if left_out:
        body += f"Drift left out (to accept one by one): {len(left_out)}\n"
    return baseline, left_out, commit(out, subject + "\n" + body, who)


def check_env(env: Environment, path: Path, *, names: Sequence[str] = (), hazards: bool = True) -> Report:
    """Verify the environment and restate the result against the baseline at `path`, with the hazard
    rules over every change (as the gate judges it with `--baseline`)."""
    from patchaudit.check.audit import ScanOptions, scan
    from patchaudit.report import Target
    from patchaudit.target import environment

    baseline = load(path)
    names = tuple(names) or tuple(d.name for d in baseline.distributions)
    # A baselined distribution that is gone is drift (check reports it), not an input error; a name
    # neither installed nor in the baseline still is one (scan says so).
    installed = {_canon(d.name) for d in environment.distributions(env)}
    present = tuple(n for n in names if _canon(n) in installed or baseline.find(n) is None)
    if present:
        report = scan(env, ScanOptions(names=present, hazards=hazards))
    else:
        report = Report(target=Target(python=env.python, paths=tuple(str(p) for p in env.site_dirs)), distributions=())
    checked = check(baseline, report, record_paths(env, present) if present else {}, names)
    return with_hazards(checked, report) if hazards else checked


# --- accept: one patch at a time, with a reason and a name ---


def who_approves(repo_dir: Path | None = None) -> str:
    """The person behind this run: the sudo caller, else the login user, else git's user.name."""
    for var in ("SUDO_USER", "USER", "LOGNAME"):
        value = os.environ.get(var)
        if value:
            return value
    return _git_config("user.name", repo_dir) or "unknown"


def accept(
    path: Path,
    items: Sequence[str],
    *,
    reason: str,
    who: str | None = None,
    distribution: str | None = None,
) -> tuple[list[Approval], str | None]:
    """Approve each file in `items` as it is now; returns the approvals and the git commit, if any."""
    if not reason.strip():
        raise BaselineError("an approval needs a reason", hint='--reason "why this patch is needed"')
    if not items:
        raise BaselineError("name the files to approve, one by one")
    baseline = load(path)
    who = who or who_approves(path.parent)
    now = _now()
    files = {d.name: dict(d.files) for d in baseline.distributions}
    hooks = dict(baseline.hooks)
    approvals: list[Approval] = []
    for item in items:
        rel = _safe_rel(item)
        owner = _owner(baseline, rel, distribution)
        if owner is None:
            location = _hook_location(baseline, rel)
            actual = _hash(location, rel)
            previous = hooks.get(rel)
        else:
            location = Path(owner.location)
            actual = _hash(location, rel)
            previous = files[owner.name].get(rel)
        if (location / rel).is_dir():
            raise BaselineError(f"{rel} is a directory: approve files one by one")
        if actual is not None and not actual.startswith("sha"):
            raise BaselineError(f"{rel}: {actual}")
        if actual is None and previous is None:
            raise BaselineError(
                f"{rel} is not in the environment (no such file in {location}) nor in the baseline: "
                "nothing drifted to accept",
                hint="give the path of a drifted file, relative to site-packages, as `baseline check` prints it",
            )
        if actual == previous:
            raise BaselineError(f"{rel} already matches the baseline; nothing to accept")
        target = hooks if owner is None else files[owner.name]
        if actual is None:
            target.pop(rel, None)
        else:
            target[rel] = actual
        approvals.append(
            Approval(
                distribution=owner.name if owner else None,
                path=rel,
                hash=actual or ABSENT,
                previous=previous,
                reason=reason.strip(),
                by=who,
                at=now,
            )
        )
    updated = dataclasses.replace(
        baseline,
        distributions=tuple(dataclasses.replace(d, files=files[d.name]) for d in baseline.distributions),
        hooks=hooks,
        approved=baseline.approved + tuple(approvals),
    )
    save(updated, path)
    return approvals, commit(path, _accept_message(approvals), who)


def _accept_message(approvals: Sequence[Approval]) -> str:
    first = approvals[0]
    where = f" ({first.distribution})" if first.distribution else ""
    subject = f"Accept patch to {first.path}{where}"
    if len(approvals) > 1:
        subject = f"Accept patches to {len(approvals)} files"
    lines = [subject, "", f"Reason: {first.reason}", f"Approved-by: {first.by}", ""]
    for a in approvals:
        lines.append(f"{a.distribution or '<environment>'}: {a.path} {a.previous or ABSENT} -> {a.hash}")
    return "\n".join(lines) + "\n"


def commit(path: Path, message: str, who: str) -> str | None:
    """Commit the baseline file when it lives in a git work tree; the log is the audit trail."""
    try:
        import git
    except ImportError:  # pragma: no cover - gitpython is a dependency
        return None
    try:
        repo = git.Repo(path.parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if repo.bare or repo.working_tree_dir is None:
        return None
    rel = os.path.relpath(path.absolute(), repo.working_tree_dir)
    email = _git_config("user.email", path.parent) or f"{who}@localhost"
    name = _git_config("user.name", path.parent) or who
    author = git.Actor(who, email if name == who else f"{who}@localhost")
    committer = git.Actor(name, email)
    try:
        repo.index.add([rel])
        made = repo.index.commit(message, author=author, committer=committer)
    except git.GitError as exc:
        raise BaselineError(f"baseline written, but the git commit failed: {exc}") from None
    return made.hexsha


def _git_config(key: str, where: Path | None) -> str | None:
    try:
        import git

        repo = git.Repo(where, search_parent_directories=True) if where else None
        reader = repo.config_reader() if repo else git.GitConfigParser(read_only=True)
        section, option = key.split(".")
        value = reader.get_value(section, option, default="")
    except Exception:
        return None
    return str(value) or None


def _owner(baseline: Baseline, rel: str, distribution: str | None) -> DistSnapshot | None:
    """The snapshot a file belongs to: the one that lists it, else the one owning its directory."""
    candidates = list(baseline.distributions)
    if distribution is not None:
        snap = baseline.find(distribution)
        if snap is None:
            raise BaselineError(f"{distribution} is not in the baseline")
        return snap
    listing = [d for d in candidates if rel in d.files]
    if len(listing) == 1:
        return listing[0]
    if len(listing) > 1:
        raise BaselineError(f"{rel} is listed by {len(listing)} distributions", hint="--dist NAME")
    if "/" not in rel and (rel.endswith(".pth") or rel in CUSTOMIZE_MODULES):
        return None
    parts = rel.split("/")[:-1]
    while parts:
        prefix = "/".join(parts) + "/"
        owners = [d for d in candidates if any(p.startswith(prefix) for p in d.files)]
        if len(owners) == 1:
            return owners[0]
        if len(owners) > 1:
            raise BaselineError(f"{rel} lies in a directory shared by several distributions", hint="--dist NAME")
        parts.pop()
    raise BaselineError(f"no distribution in the baseline owns {rel}", hint="--dist NAME")


def _hook_location(baseline: Baseline, rel: str) -> Path:
    for p in baseline.paths:
        if (Path(p) / rel).exists() or rel in baseline.hooks:
            return Path(p)
    if baseline.paths:
        return Path(baseline.paths[0])
    raise BaselineError("the baseline records no site directory")


def _safe_rel(item: str) -> str:
    rel = posixpath.normpath(item.replace(os.sep, "/"))
    if rel.startswith("../") or rel == ".." or posixpath.isabs(rel) or rel == ".":
        raise UnsafePath(f"{item}: give a path relative to site-packages, as RECORD writes it")
    return rel


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/"))


def _canon(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
