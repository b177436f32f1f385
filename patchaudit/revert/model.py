"""The values of a revert: plans, results, and the journal and manifest as they lie on disk."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, NotRequired, TypedDict

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "patchaudit/quarantine/v1"
FILES = "files"
HOOKS = "startup hooks"  # how a run over the whole environment names the unowned startup hooks it quarantined
CHANGED_MEANWHILE = "changed since the run quarantined it: left as it is now (the quarantine keeps the older copy)"


class Op(StrEnum):
    REVERT = "revert"
    UNDO = "undo"


class ActionKind(StrEnum):
    WRITE = "write"
    SYMLINK = "symlink"  # undo only: put back a symlink the revert replaced
    REMOVE = "remove"


class Phase(StrEnum):
    PREPARE = "prepare"  # quarantining and staging: nothing in the environment has changed yet
    COMMIT = "commit"  # staged files are being moved in: finish it


class Original(StrEnum):
    """What was at a destination when the run quarantined it."""

    FILE = "file"
    SYMLINK = "symlink"
    MISSING = "missing"
    OTHER = "other"


class RunStatus(StrEnum):
    PREPARED = "prepared"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    ROLLED_BACK = "rolled-back"


# ---------------------------------------------------------------- on disk


class JournalEntry(TypedDict):
    path: str
    dest: str
    kind: str  # ActionKind
    digest: str | None
    link: str | None
    staged: str | None
    quarantine: str


class Journal(TypedDict):
    """`<state>/journal/<run-id>.json`: what a run in progress is doing."""

    run_id: str
    op: str  # Op
    phase: str  # Phase
    run_dir: str
    roots: list[str]  # written for the record; never trusted when read back
    actions: list[JournalEntry]


class ManifestFile(TypedDict):
    path: str
    dest: str
    action: str  # ActionKind
    quarantine: str
    original: str  # Original
    original_digest: str | None
    original_mode: int | None
    original_link: str | None
    new_digest: str | None
    new_link: str | None
    skipped: NotRequired[str]
    dist: NotRequired[str | None]  # a run over the whole environment: the file's distribution
    hook: NotRequired[bool]  # a run over the whole environment: an unowned startup hook


class Manifest(TypedDict):
    """`<state>/quarantine/<run-id>/manifest.json`: what a run replaced, and where the old bytes are."""

    schema: str
    run_id: str
    op: str
    dist: str
    version: str
    created: str
    origin: str | None
    undo_of: str | None
    roots: list[str]  # written for the record; never trusted when read back
    status: str  # RunStatus
    prefix: str
    files: list[ManifestFile]


# ---------------------------------------------------------------- in memory


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    path: str
    reason: str
    dist: str | None = None  # a plan over several distributions: whose file it is

    def to_dict(self) -> dict[str, str]:
        out = {"path": self.path, "reason": self.reason}
        if self.dist is not None:
            out["dist"] = self.dist
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """One change to one path: write bytes, create a symlink (undo only), or remove."""

    path: str  # as the report or manifest names it
    dest: Path
    kind: ActionKind
    data: bytes | None = None
    link: str | None = None
    mode: int = 0o644
    digest: str | None = None  # of `data`
    dist: str | None = None  # a plan over several distributions: whose file it is
    hook: bool = False  # a plan over the whole environment: an unowned startup hook it quarantines


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What a revert (or an undo) would do; nothing has been written when a Plan exists."""

    op: Op
    dist: str
    version: str
    actions: tuple[Action, ...] = ()
    refused: tuple[Refusal, ...] = ()
    record_mismatch: tuple[str, ...] = ()
    origin: str | None = None
    undo_of: str | None = None
    roots: tuple[str, ...] = ()  # extra directories it may write: an editable install's project tree


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    run_id: str | None
    quarantine: Path | None
    restored: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    refused: tuple[Refusal, ...] = ()
    record_mismatch: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()
    dry_run: bool = False
    recovered: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "quarantine": str(self.quarantine) if self.quarantine else None,
            "restored": list(self.restored),
            "removed": list(self.removed),
            "refused": [r.to_dict() for r in self.refused],
            "record_mismatch": list(self.record_mismatch),
            "unverified": list(self.unverified),
            "dry_run": self.dry_run,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInfo:
    run_id: str
    path: Path
    op: str
    dist: str
    version: str
    created: str
    status: str
    files: int
    undo_of: str | None = None
    dists: tuple[tuple[str, int], ...] = ()  # a run over several distributions: files per distribution


def summary(plan: Plan, run_id: str | None, quarantine: Path | None, **extra: Any) -> Result:
    return Result(
        run_id=run_id,
        quarantine=quarantine,
        restored=tuple(a.path for a in plan.actions if a.kind != ActionKind.REMOVE),
        removed=tuple(a.path for a in plan.actions if a.kind == ActionKind.REMOVE),
        refused=plan.refused,
        record_mismatch=plan.record_mismatch,
        **extra,
    )
