"""The variables that steer the serving stack, as a service gets them: from its unit (Environment=,
EnvironmentFile=, drop-ins), from startup hooks that set os.environ, and from the live process.
Values that look like secrets are kept and shown only as a hash."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from patchaudit.errors import BaselineError
from patchaudit.procs.unitfile import Origin, Setting
from patchaudit.report import DriftState, VariableChange

STEERING_PREFIXES = ("VLLM_", "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "HF_", "TRANSFORMERS_")
STEERING_NAMES = frozenset({"LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP"})
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
_SEPARATORS = re.compile(r"[\s/,:;=]")


def steers(name: str) -> bool:
    return name in STEERING_NAMES or name.startswith(STEERING_PREFIXES)


def looks_secret(name: str, value: str) -> bool:
    """A name that says so, or a long value of high entropy with no separators (a token, a key)."""
    upper = name.upper()
    if any(word in upper for word in SECRET_WORDS):
        return True
    if len(value) < 20 or _SEPARATORS.search(value):
        return False
    if not (re.search(r"[A-Za-z]", value) and re.search(r"[0-9]", value)):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 3.5


def digest(value: str) -> str:
    return "sha256=" + hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class Variable:
    """One variable's effective value (or its hash, for a secret) and where it is set."""

    name: str
    value: str | None  # None for a secret
    hash: str | None  # set for a secret
    origin: Origin
    where: str

    @classmethod
    def of(cls, setting: Setting) -> Variable:
        secret = looks_secret(setting.name, setting.value)
        return cls(
            name=setting.name,
            value=None if secret else setting.value,
            hash=digest(setting.value) if secret else None,
            origin=setting.origin,
            where=setting.where,
        )

    @property
    def shown(self) -> str:
        return self.value if self.value is not None else f"<secret {(self.hash or '')[:19]}…>"

    @property
    def key(self) -> str:
        return self.hash if self.hash is not None else digest(self.value or "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"origin": self.origin.value, "where": self.where}
        if self.hash is not None:
            out["hash"] = self.hash
        else:
            out["value"] = self.value
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class ServiceEnv:
    """The baseline's record of a unit's environment (`environment.service` in a baseline file)."""

    unit: str
    unit_dirs: tuple[str, ...] = ()  # empty: the system's unit directories
    variables: Mapping[str, Variable] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "unit_dirs": list(self.unit_dirs),
            "variables": {n: v.to_dict() for n, v in sorted(self.variables.items())},
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "baseline") -> ServiceEnv:
        problem = f"{source}: environment.service must hold unit, unit_dirs and variables"
        if not isinstance(data, dict) or not isinstance(data.get("unit"), str):
            raise BaselineError(problem)
        dirs, raw = data.get("unit_dirs") or [], data.get("variables") or {}
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs) or not isinstance(raw, dict):
            raise BaselineError(problem)
        variables: dict[str, Variable] = {}
        for name, item in raw.items():
            try:
                value, hashed = item.get("value"), item.get("hash")
                if (value is None) == (hashed is None) or not isinstance(value or hashed, str):
                    raise TypeError
                variables[name] = Variable(
                    name=name, value=value, hash=hashed, origin=Origin(item["origin"]), where=str(item["where"])
                )
            except (AttributeError, KeyError, TypeError, ValueError):
                raise BaselineError(
                    f"{source}: environment.service.variables.{name} needs value or hash, origin, where"
                ) from None
        return cls(unit=data["unit"], unit_dirs=tuple(dirs), variables=variables)


def effective(settings: Iterable[Setting]) -> dict[str, Variable]:
    """The value each steering variable ends up with: later settings win; setdefault only fills a gap."""
    out: dict[str, Variable] = {}
    for setting in settings:
        if not steers(setting.name) or (setting.only_if_unset and setting.name in out):
            continue
        out[setting.name] = Variable.of(setting)
    return out


def collect(
    unit: str,
    *,
    unit_dirs: Sequence[str] = (),
    site_dirs: Sequence[str] = (),
    process: tuple[int, Mapping[str, str]] | None = None,
) -> ServiceEnv:
    """The unit's steering variables now; a live process adds those that neither the unit nor a hook sets."""
    from patchaudit.procs.hookenv import hook_settings
    from patchaudit.procs.unitfile import find, settings

    declared = [*settings(find(unit, unit_dirs)), *hook_settings(site_dirs)]
    variables = effective(declared)
    if process is not None:
        pid, environ = process
        for name, value in sorted(environ.items()):
            if steers(name) and name not in variables:
                variables[name] = Variable.of(
                    Setting(name=name, value=value, origin=Origin.PROCESS, where=f"pid {pid}")
                )
    return ServiceEnv(unit=unit, unit_dirs=tuple(unit_dirs), variables=variables)


def compare(held: ServiceEnv, site_dirs: Sequence[str]) -> tuple[VariableChange, ...]:
    """What the next start would get, against the baseline. Variables the baseline saw only in the
    live process are not declared anywhere a check can read, so they are not held against it."""
    now = collect(held.unit, unit_dirs=held.unit_dirs, site_dirs=site_dirs).variables
    changes: list[VariableChange] = []
    for name in sorted(set(now) | set(held.variables)):
        before, after = held.variables.get(name), now.get(name)
        if after is None:
            if before is None or before.origin is Origin.PROCESS:
                continue
            changes.append(_change(held.unit, name, DriftState.MISSING, before, None))
        elif before is None:
            changes.append(_change(held.unit, name, DriftState.ADDED, None, after))
        elif before.key != after.key:
            changes.append(_change(held.unit, name, DriftState.MODIFIED, before, after))
    return tuple(changes)


def _change(unit: str, name: str, state: DriftState, before: Variable | None, after: Variable | None) -> VariableChange:
    source = after or before
    assert source is not None
    return VariableChange(
        name=name,
        state=state,
        unit=unit,
        expected=before.shown if before else None,
        actual=after.shown if after else None,
        origin=source.origin.value,
        where=source.where,
    )


def detail(change: VariableChange) -> str:
    """One line for the journal: `SYS -> NVL (drop-in /etc/.../10-nccl.conf:3)`."""
    if change.state is DriftState.ADDED:
        what = f"{change.actual}"
    elif change.state is DriftState.MISSING:
        what = f"was {change.expected}, now unset"
    else:
        what = f"{change.expected} -> {change.actual}"
    return f"{what} ({change.origin} {change.where})"


def live_process(unit: str) -> tuple[int, Mapping[str, str]] | None:
    """The unit's main process (its oldest readable one) and its environment, when the unit runs here."""
    from patchaudit.errors import UnitNotFound
    from patchaudit.procs.cgroup import unit_pids
    from patchaudit.procs.proc import ProcState, read

    try:
        pids = unit_pids(unit)
    except UnitNotFound:
        return None
    readable = [p for p in (read(pid) for pid in pids) if p.state is ProcState.OK]
    for main in sorted(readable, key=lambda p: (p.started, p.pid)):
        environ = main.environ()
        if environ is not None:
            return main.pid, environ
    return None
