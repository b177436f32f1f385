"""Report values (schema patchaudit/report/v1) and their JSON form."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

TYPE_CHECKING = False  # no typing import: the fast gate reads the severities from here
if TYPE_CHECKING:
    from typing import Any

SCHEMA = "patchaudit/report/v1"
SCHEMA_FILE = "report.schema.json"  # the JSON Schema of to_dict()'s output, shipped beside this module


def schema_path() -> str:
    """Where the report's JSON Schema lies in the installed package."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), SCHEMA_FILE)


def now_utc() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class DriftState(enum.StrEnum):
    MODIFIED = "modified"
    MISSING = "missing"
    ADDED = "added"
    # Packaging facts: the file is not as its RECORD says, and no patch explains it (not drift).
    OVERWRITTEN = "overwritten"  # another distribution installed the same path later; names the winner
    RECORD_MISMATCH = "record-mismatch"  # the wheel's own RECORD disagrees with its member; names the wheel
    REGENERATED = "regenerated"  # bytecode the installer recompiled from the verified source

    @property
    def is_fact(self) -> bool:
        return self in FACT_STATES


FACT_STATES = frozenset({DriftState.OVERWRITTEN, DriftState.RECORD_MISMATCH, DriftState.REGENERATED})


class Severity(enum.StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]

    def at_least(self, other: Severity) -> bool:
        return self.rank >= other.rank


_SEVERITY_RANK = {Severity.INFO: 0, Severity.LOW: 1, Severity.MEDIUM: 2, Severity.HIGH: 3}
# --fail-on and a policy's fail_on: a severity, or "none" (only drift fails)
FAIL_ON_CHOICES: tuple[str, ...] = (*(s.value for s in Severity), "none")


class DistStatus(enum.StrEnum):
    CLEAN = "clean"
    DRIFTED = "drifted"
    UNVERIFIABLE = "unverifiable"


class Source(enum.StrEnum):
    WHEEL = "wheel"
    EDITABLE = "editable"
    VCS = "vcs"
    LEGACY = "legacy"


class ReachClass(enum.StrEnum):
    """Whether a file runs for the model being served (`--serve`)."""

    RUNS = "runs"  # the served model's own code, reached from its architecture
    OTHER_MODEL = "other-model"  # another model's code in the framework's model directory
    SHARED = "shared"  # framework or library code outside the model directory: runs whatever the model
    UNKNOWN = "unknown"  # says why


@dataclass(frozen=True, kw_only=True, slots=True)
class Reach:
    kind: ReachClass
    via: tuple[str, ...] = ()  # each step "path:line what", path relative to the site directory
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.kind.value, "via": list(self.via)}
        if self.why:
            out["why"] = self.why
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Serving:
    """The model `--serve` named and how its architectures resolved in the installed framework."""

    model: str
    config: str
    framework: str | None
    version: str | None
    architectures: tuple[str, ...]
    resolved: tuple[str, ...] = ()  # "Arch -> module (path:line)"
    unresolved: tuple[str, ...] = ()
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "config": self.config,
            "framework": self.framework,
            "version": self.version,
            "architectures": list(self.architectures),
            "resolved": list(self.resolved),
            "unresolved": list(self.unresolved),
            "note": self.note,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Layer:
    """One layer of an image, as its manifest and history name it."""

    index: int  # 0 is the bottom layer
    digest: str  # the blob's digest ("sha256:...")
    created_by: str | None = None  # the history line of the step that made it (`COPY ...`, `RUN ...`)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "digest": self.digest, "created_by": self.created_by}


@dataclass(frozen=True, kw_only=True, slots=True)
class Drift:
    """One file that is not as its distribution shipped it."""

    path: str
    state: DriftState
    expected: str | None = None
    actual: str | None = None
    nlink: int = 1
    note: str | None = None
    winner: str | None = None  # overwritten: "name version" of the distribution whose file is installed
    wheel: str | None = None  # record-mismatch: the wheel whose RECORD disagrees with its own member
    co_owners: tuple[str, ...] = ()  # other distributions ("name version") whose RECORD lists this path
    layer: Layer | None = None  # an image's drift: the layer that last changed (or deleted) the file
    reach: Reach | None = None  # with --serve: does it run for the served model

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "state": self.state.value,
            "expected": self.expected,
            "actual": self.actual,
        }
        if self.nlink > 1:
            out["nlink"] = self.nlink
        if self.note:
            out["note"] = self.note
        if self.winner:
            out["winner"] = self.winner
        if self.wheel:
            out["wheel"] = self.wheel
        if self.co_owners:
            out["co_owners"] = list(self.co_owners)
        if self.layer is not None:
            out["layer"] = self.layer.to_dict()
        if self.reach is not None:
            out["reach"] = self.reach.to_dict()
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Unverified:
    """A RECORD entry that cannot be checked: weak or unknown hash, or a malformed line."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """A hazard rule's verdict on one location."""

    rule: str
    severity: Severity
    path: str
    line: int
    message: str
    in_change: bool = True
    column: int = 0
    suppressed: bool = False
    reach: Reach | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity.value,
            "path": self.path,
            "line": self.line,
            "message": self.message,
            "in_change": self.in_change,
        }
        if self.suppressed:
            out["suppressed"] = True
        if self.reach is not None:
            out["reach"] = self.reach.to_dict()
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class DistReport:
    name: str
    version: str
    location: str
    source: Source
    drift: tuple[Drift, ...] = ()
    unverified: tuple[Unverified, ...] = ()
    findings: tuple[Finding, ...] = ()
    files_checked: int = 0
    verifiable: bool = True
    facts: tuple[Drift, ...] = ()  # packaging facts (overwritten, record-mismatch, regenerated): not drift
    os_package: str | None = None  # the dpkg package that installed it, for a distribution without RECORD

    @property
    def os_packaged(self) -> bool:
        """Installed by the OS package manager and, as far as its weak hashes tell, untouched."""
        return self.os_package is not None and not self.drift

    @property
    def status(self) -> DistStatus:
        if self.drift:
            return DistStatus.DRIFTED
        if not self.verifiable or self.unverified:
            return DistStatus.UNVERIFIABLE
        return DistStatus.CLEAN

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "location": self.location,
            "source": self.source.value,
            "status": self.status.value,
            "drift": [d.to_dict() for d in (*self.drift, *self.facts)],
            "unverified": [u.to_dict() for u in self.unverified],
            "findings": [f.to_dict() for f in self.findings if not f.suppressed],
            "files_checked": self.files_checked,
        }
        if self.os_package is not None:
            out["os_package"] = {"manager": "dpkg", "name": self.os_package}
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class VariableChange:
    """A variable of a service's environment that differs from its baseline; secrets appear hashed."""

    name: str
    state: DriftState  # added | modified | missing
    unit: str | None
    expected: str | None = None  # the baseline's value (or hash), None when added
    actual: str | None = None  # the value (or hash) now, None when missing
    origin: str | None = None  # unit | drop-in | environment-file | hook | process
    where: str | None = None  # path:line of the setting now (the baseline's, when missing)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state.value,
            "unit": self.unit,
            "expected": self.expected,
            "actual": self.actual,
            "origin": self.origin,
            "where": self.where,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvironmentReport:
    """Startup hooks and files that no distribution owns; a service's environment against its baseline."""

    drift: tuple[Drift, ...] = ()
    findings: tuple[Finding, ...] = ()
    variables: tuple[VariableChange, ...] = ()
    interrupted_runs: tuple[str, ...] = ()  # revert runs a kill interrupted: their files may be half restored

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "drift": [d.to_dict() for d in self.drift],
            "findings": [f.to_dict() for f in self.findings if not f.suppressed],
        }
        if self.variables:
            out["variables"] = [v.to_dict() for v in self.variables]
        if self.interrupted_runs:
            out["interrupted_runs"] = list(self.interrupted_runs)
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigChange:
    """One key of a JSON config that differs from the pristine file, by its key path."""

    file: str
    key: str  # `quantization.kv_cache_quant_algo`, `layers[3].bias`
    change: str  # "removed" | "added" | "changed"
    old: Any = None
    new: Any = None

    def text(self) -> str:
        if self.change == "removed":
            return f"{self.key}: removed (was {_show(self.old)})"
        if self.change == "added":
            return f"{self.key}: added ({_show(self.new)})"
        return f"{self.key}: changed {_show(self.old)} -> {_show(self.new)}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "key": self.key, "change": self.change, "old": self.old, "new": self.new}


def _show(value: Any, limit: int = 80) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) <= limit:
        return text
    kind = "chars" if isinstance(value, str) else "bytes of JSON"
    return f"{text[: limit - 20]}... ({len(text)} {kind})"


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelReport:
    """One model directory: a Hub cache repo, an `hf download --local-dir` tree, or a manifest'd directory."""

    name: str
    kind: str  # "hub-cache" | "local-dir" | "manifest"
    location: str
    revisions: tuple[str, ...] = ()
    drift: tuple[Drift, ...] = ()
    findings: tuple[Finding, ...] = ()
    changes: tuple[ConfigChange, ...] = ()
    notes: tuple[str, ...] = ()
    files_checked: int = 0

    @property
    def status(self) -> DistStatus:
        if self.drift:
            return DistStatus.DRIFTED
        return DistStatus.CLEAN if self.files_checked else DistStatus.UNVERIFIABLE

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "location": self.location,
            "revisions": list(self.revisions),
            "status": self.status.value,
            "drift": [d.to_dict() for d in self.drift],
            "findings": [f.to_dict() for f in self.findings if not f.suppressed],
            "changes": [c.to_dict() for c in self.changes],
            "notes": list(self.notes),
            "files_checked": self.files_checked,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    python: str | None
    paths: tuple[str, ...]
    image: str | None = None  # the image reference, when the target is an image read layer by layer


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    target: Target
    distributions: tuple[DistReport, ...]
    environment: EnvironmentReport = field(default_factory=EnvironmentReport)
    models: tuple[ModelReport, ...] = ()
    started: str = field(default_factory=now_utc)  # when the run began (UTC, ISO 8601); kept by replace()
    rules: str | None = None  # the rule pack's version when the hazard rules ran
    serving: Serving | None = None

    def all_drift(self) -> Iterable[Drift]:
        for dist in self.distributions:
            yield from dist.drift
        yield from self.environment.drift
        for model in self.models:
            yield from model.drift

    def all_facts(self) -> Iterable[Drift]:
        for dist in self.distributions:
            yield from dist.facts

    def all_findings(self, *, suppressed: bool = False) -> Iterable[Finding]:
        for dist in self.distributions:
            yield from dist.findings
        yield from self.environment.findings
        for model in self.models:
            yield from model.findings

    def active_findings(self) -> list[Finding]:
        return [f for f in self.all_findings() if not f.suppressed]

    def summary(self) -> dict[str, Any]:
        counts = {state: 0 for state in DriftState}
        for drift in self.all_drift():
            counts[drift.state] += 1
        for fact in self.all_facts():
            counts[fact.state] += 1
        severities = {sev.value: 0 for sev in Severity}
        upstream = {sev.value: 0 for sev in Severity}
        for finding in self.active_findings():
            severities[finding.severity.value] += 1
            if not finding.in_change:
                upstream[finding.severity.value] += 1
        return {
            "distributions": len(self.distributions),
            "files_checked": sum(d.files_checked for d in self.distributions),
            "models": len(self.models),
            "model_files_checked": sum(m.files_checked for m in self.models),
            "modified": counts[DriftState.MODIFIED],
            "missing": counts[DriftState.MISSING],
            "added": counts[DriftState.ADDED],
            "overwritten": counts[DriftState.OVERWRITTEN],
            "record-mismatch": counts[DriftState.RECORD_MISMATCH],
            "regenerated": counts[DriftState.REGENERATED],
            "unverifiable": sum(1 for d in self.distributions if d.status is DistStatus.UNVERIFIABLE),
            "findings": severities,
            # Of those, the findings in code that verifies against RECORD (`--all-files`).
            "upstream": upstream,
            "suppressed": sum(1 for f in self.all_findings() if f.suppressed),
        }

    def fails(
        self,
        fail_on: Severity | None = Severity.HIGH,
        *,
        unverifiable: bool = True,
        os_packages: bool = False,
        upstream: bool = False,
    ) -> bool:
        """Whether the report means exit 1: any drift, an unverifiable dist, or a finding at fail_on.

        A distribution the OS package manager installed, whose files agree with its weak hashes, counts
        as unverifiable only when `os_packages` asks for it. Findings in code that verifies against
        RECORD (in_change false) count only with `upstream`.
        """
        if any(True for _ in self.all_drift()) or self.environment.variables:
            return True
        if unverifiable and any(
            d.status is DistStatus.UNVERIFIABLE and (os_packages or not d.os_packaged) for d in self.distributions
        ):
            return True
        if unverifiable and any(m.status is DistStatus.UNVERIFIABLE for m in self.models):
            return True
        if fail_on is None:
            return False
        return any(f.severity.at_least(fail_on) for f in self.active_findings() if upstream or f.in_change)

    def _target_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"python": self.target.python, "paths": list(self.target.paths)}
        if self.target.image is not None:
            out["image"] = self.target.image
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema": SCHEMA,
            "run": {"patchaudit": _version(), "rules": self.rules, "started": self.started},
            "target": self._target_dict(),
            "distributions": [d.to_dict() for d in self.distributions],
            "environment": self.environment.to_dict(),
            "models": [m.to_dict() for m in self.models],
            "summary": self.summary(),
        }
        if self.serving is not None:
            out["serve"] = self.serving.to_dict()
        return out


def _version() -> str:
    from patchaudit import __version__

    return __version__
