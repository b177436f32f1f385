"""The gate's policy: a TOML file (or `[tool.patchaudit]` in a pyproject.toml), validated into values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchaudit.errors import InvalidPolicy
from patchaudit.fs.safefs import Cap, UnreadableFile, parse_toml, read_capped
from patchaudit.report import FAIL_ON_CHOICES, Severity

POLICY_KEYS = frozenset(
    {
        "python",
        "path",
        "distributions",
        "fail_on",
        "fail_open",
        "fail_unverifiable",
        "fail_os_packages",
        "hazards",
        "rule_dirs",
        "severity",
        "baseline",
        "approved",
        "workers",
        "timeout",
        "models",
        "cache_dir",
        "errata",
        "serve",
    }
)
# `[severity.reach]`: a finding's severity by whether its file runs for the served model (`serve`)
REACH_CLASSES = ("runs", "other-model", "shared", "unknown")
MODEL_KEYS = frozenset({"path", "repo", "revision", "cache_dir"})
APPROVED_KEYS = frozenset({"path", "hash", "reason", "distribution", "by"})
# An approved patch that deletes a file says so with this instead of a digest.
ABSENT = "absent"


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovedPatch:
    """One file allowed to differ from what its distribution shipped, exactly as it is now."""

    path: str
    hash: str  # "sha256=..." of the patched file, or ABSENT for a file that was removed
    reason: str
    distribution: str | None = None
    by: str | None = None

    def covers(self, distribution: str | None, path: str, actual: str | None) -> bool:
        """Whether this approval covers `path` of `distribution` with content `actual` (None: absent)."""
        if self.path != path:
            return False
        if self.distribution is not None and distribution is not None:
            from packaging.utils import canonicalize_name

            if canonicalize_name(self.distribution) != canonicalize_name(distribution):
                return False
        return self.hash == (actual if actual is not None else ABSENT)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A model directory the gate checks: a path, or a repo id in a hub cache; optionally one revision."""

    spec: str  # a path (absolute once validated) or a repo id
    revision: str | None = None
    cache_dir: Path | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """What the gate guards, and what makes it fail."""

    source: Path | None = None
    python: Path | None = None
    path: Path | None = None
    distributions: tuple[str, ...] = ()
    fail_on: Severity | None = Severity.HIGH
    fail_open: bool = False
    fail_unverifiable: bool = True
    fail_os_packages: bool = False  # OS-packaged distributions (md5 only) count as unverifiable
    hazards: bool = True
    rule_dirs: tuple[Path, ...] = ()
    severity: Mapping[str, Severity] = field(default_factory=dict)
    baseline: Path | None = None
    approved: tuple[ApprovedPatch, ...] = ()
    workers: int | None = None  # None: every CPU this process may use
    timeout: float | None = None  # the gate's deadline in seconds (None: patchaudit.parallel.deadline's default)
    models: tuple[ModelSpec, ...] = ()
    cache_dir: Path | None = None  # where the gate keeps its caches (see patchaudit.target.cachedir)
    # wheels known to ship a wrong RECORD, beyond patchaudit's own (patchaudit.check.errata)
    errata: tuple[Path, ...] = ()
    serve: str | None = None  # the model served: a directory or a repo id (patchaudit.serving)
    reach_severity: Mapping[str, Severity] = field(default_factory=dict)  # reach class -> severity

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: Path | None = None) -> Policy:
        """Validate a parsed policy; every problem is collected before one InvalidPolicy is raised."""
        where = str(source) if source is not None else "policy"
        base = source.parent if source is not None else Path.cwd()
        problems: list[str] = []

        def bad(message: str) -> None:
            problems.append(message)

        for key in data:
            if key not in POLICY_KEYS:
                bad(f"unknown key {key!r}")

        def string(key: str) -> str | None:
            value = data.get(key)
            if value is None:
                return None
            if not isinstance(value, str) or not value:
                bad(f"{key!r} must be a non-empty string")
                return None
            return value

        def boolean(key: str, default: bool) -> bool:
            value = data.get(key, default)
            if not isinstance(value, bool):
                bad(f"{key!r} must be true or false")
                return default
            return value

        def path_of(value: str) -> Path:
            p = Path(value).expanduser()
            return p if p.is_absolute() else base / p

        python = string("python")
        site_path = string("path")
        if python is not None and site_path is not None:
            bad("give 'python' or 'path', not both")

        dists = data.get("distributions", [])
        if not isinstance(dists, list) or not all(isinstance(d, str) and d for d in dists):
            bad("'distributions' must be a list of distribution names")
            dists = []

        fail_on: Severity | None = Severity.HIGH
        raw_fail_on = data.get("fail_on", "high")
        if raw_fail_on not in FAIL_ON_CHOICES:
            bad(f"'fail_on' must be one of {', '.join(FAIL_ON_CHOICES)}, not {raw_fail_on!r}")
        else:
            fail_on = None if raw_fail_on == "none" else Severity(raw_fail_on)

        rule_dirs = data.get("rule_dirs", [])
        if not isinstance(rule_dirs, list) or not all(isinstance(d, str) and d for d in rule_dirs):
            bad("'rule_dirs' must be a list of directories")
            rule_dirs = []
        errata = data.get("errata", [])
        if not isinstance(errata, list) or not all(isinstance(e, str) and e for e in errata):
            bad("'errata' must be a list of errata files")
            errata = []

        severity: dict[str, Severity] = {}
        reach_severity: dict[str, Severity] = {}
        raw_severity = data.get("severity", {})
        if not isinstance(raw_severity, dict):
            bad("'severity' must be a table of rule-id = severity")
        else:
            for rule, value in raw_severity.items():
                if rule == "reach" and isinstance(value, dict):
                    for kind, level in value.items():
                        if kind not in REACH_CLASSES or level not in tuple(Severity):
                            bad(f"severity.reach.{kind} must be a reach ({', '.join(REACH_CLASSES)}) = a severity")
                        else:
                            reach_severity[kind] = Severity(level)
                elif value not in tuple(Severity):
                    bad(f"severity.{rule} must be one of {', '.join(Severity)}, not {value!r}")
                else:
                    severity[rule] = Severity(value)

        approved: list[ApprovedPatch] = []
        raw_approved = data.get("approved", [])
        if not isinstance(raw_approved, list):
            bad("'approved' must be an array of tables ([[approved]])")
            raw_approved = []
        for n, item in enumerate(raw_approved, start=1):
            entry = _approved(item, n, bad)
            if entry is not None:
                approved.append(entry)

        timeout = data.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < float("inf"))
        ):
            bad(f"'timeout' must be a positive number of seconds, not {timeout!r}")
            timeout = None
        workers = data.get("workers")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            bad(f"'workers' must be a whole number of at least 1, not {workers!r}")
            workers = None
        models: list[ModelSpec] = []
        raw_models = data.get("models", [])
        if not isinstance(raw_models, list):
            bad("'models' must be a list of paths, repo ids or tables {path|repo, revision, cache_dir}")
            raw_models = []
        for n, item in enumerate(raw_models, start=1):
            spec = _model(item, n, bad, path_of)
            if spec is not None:
                models.append(spec)

        baseline = string("baseline")
        cache_dir = string("cache_dir")
        serve = string("serve")
        if serve is not None and serve.startswith((".", "~")):
            serve = str(path_of(serve))
        policy = cls(
            source=source,
            python=path_of(python) if python else None,
            path=path_of(site_path) if site_path else None,
            distributions=tuple(dists),
            fail_on=fail_on,
            fail_open=boolean("fail_open", False),
            fail_unverifiable=boolean("fail_unverifiable", True),
            fail_os_packages=boolean("fail_os_packages", False),
            hazards=boolean("hazards", True),
            rule_dirs=tuple(path_of(d) for d in rule_dirs),
            severity=severity,
            baseline=path_of(baseline) if baseline else None,
            approved=tuple(approved),
            workers=workers,
            timeout=float(timeout) if timeout is not None else None,
            models=tuple(models),
            cache_dir=path_of(cache_dir) if cache_dir else None,
            errata=tuple(path_of(e) for e in errata),
            serve=serve,
            reach_severity=reach_severity,
        )
        if problems:
            raise InvalidPolicy(f"{where}: " + "; ".join(problems))
        return policy


def _model(item: Any, n: int, bad: Any, path_of: Any) -> ModelSpec | None:
    """A string is a path when it starts with `/`, `.` or `~` (relative to the policy file), else a repo id."""
    if isinstance(item, str) and item:
        item = {"path": item} if item.startswith(("/", ".", "~")) else {"repo": item}
    if not isinstance(item, dict):
        bad(f"models[{n}] must be a path, a repo id or a table")
        return None
    unknown = [k for k in item if k not in MODEL_KEYS]
    for key in unknown:
        bad(f"unknown key {key!r} in models[{n}]")
    values = {k: item.get(k) for k in MODEL_KEYS}
    if any(v is not None and (not isinstance(v, str) or not v) for v in values.values()):
        bad(f"models[{n}]: every value must be a non-empty string")
        return None
    if (values["path"] is None) == (values["repo"] is None):
        bad(f"models[{n}] needs exactly one of 'path' or 'repo'")
        return None
    if unknown:
        return None
    spec = str(path_of(values["path"])) if values["path"] else str(values["repo"])
    return ModelSpec(
        spec=spec,
        revision=values["revision"],
        cache_dir=path_of(values["cache_dir"]) if values["cache_dir"] else None,
    )


def _approved(item: Any, n: int, bad: Any) -> ApprovedPatch | None:
    if not isinstance(item, dict):
        bad(f"approved[{n}] must be a table")
        return None
    ok = True
    for key in item:
        if key not in APPROVED_KEYS:
            bad(f"unknown key {key!r} in approved[{n}]")
            ok = False
    for key in ("path", "hash", "reason"):
        if not isinstance(item.get(key), str) or not item[key]:
            bad(f"approved[{n}].{key} is required (a non-empty string)")
            ok = False
    for key in ("distribution", "by"):
        if key in item and not isinstance(item[key], str):
            bad(f"approved[{n}].{key} must be a string")
            ok = False
    if not ok:
        return None
    digest = item["hash"]
    if digest != ABSENT and "=" not in digest:
        bad(f"approved[{n}].hash must be 'algorithm=digest' as RECORD writes it, or {ABSENT!r}")
        return None
    return ApprovedPatch(
        path=item["path"],
        hash=digest,
        reason=item["reason"],
        distribution=item.get("distribution"),
        by=item.get("by"),
    )


def load(path: Path) -> Policy:
    """Read a policy file; a pyproject.toml contributes its `[tool.patchaudit]` table."""
    try:
        raw = read_capped(path, Cap.SMALL, follow=True)
    except UnreadableFile as exc:
        raise InvalidPolicy(f"cannot read policy {exc}") from None
    try:
        data = parse_toml(raw)
    except ValueError as exc:
        raise InvalidPolicy(f"{path}: not valid TOML: {exc}") from None
    if path.name == "pyproject.toml" or "tool" in data:
        tool = data.get("tool", {})
        table = tool.get("patchaudit") if isinstance(tool, dict) else None
        if not isinstance(table, dict):
            raise InvalidPolicy(f"{path}: no [tool.patchaudit] table")
        data = table
    return Policy.from_dict(data, source=path.absolute())
