"""The commit phase of a run, idempotent so that recovery can run it again; and its undoing (rollback).

Both take a journal whose paths have been checked: a run's own, or one recovery has validated.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from patchaudit.errors import PatchAuditError
from patchaudit.fs import beneath
from patchaudit.pristine.check import digest as digest_of
from patchaudit.revert.fileops import drop_bytecode_at, snapshot_at, write_roots
from patchaudit.revert.model import (
    CHANGED_MEANWHILE,
    MANIFEST,
    ActionKind,
    Journal,
    JournalEntry,
    Manifest,
    Original,
    RunStatus,
)
from patchaudit.revert.state import new_manifest, originals, read_manifest, write_json
from patchaudit.target.environment import Environment


def _is_original(fd: int, name: str, item: Mapping[str, object] | None) -> bool:
    """Is entry `name` of directory `fd` still what the run quarantined (its manifest entry `item`)?"""
    if item is None:
        return False
    kind, content, _mode = snapshot_at(fd, name)
    if kind != item.get("original"):
        return False
    if kind is Original.FILE:
        assert isinstance(content, bytes)
        return digest_of(content, "sha256") == item.get("original_digest")
    if kind is Original.SYMLINK:
        return content == item.get("original_link")
    return kind is Original.MISSING


def _holds_new(fd: int, name: str, entry: JournalEntry) -> bool:
    """Is entry `name` of directory `fd` already what the run writes there (or nothing, for a removal)?"""
    kind, content, _mode = snapshot_at(fd, name)
    if entry["kind"] == ActionKind.REMOVE:
        return kind is Original.MISSING
    if entry["kind"] == ActionKind.SYMLINK:
        return kind is Original.SYMLINK and content == entry["link"]
    if kind is not Original.FILE:
        return False
    assert isinstance(content, bytes)
    return digest_of(content, (entry["digest"] or "sha256=").partition("=")[0]) == entry["digest"]


def commit(
    env: Environment, state: Journal, manifest: Manifest | None, roots: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Replace, remove, drop bytecode, re-hash. Returns (unverified paths, changed destinations).

    Before a destination is replaced or removed, it must still hold what the run quarantined (the
    manifest's original) or already what the run writes. Anything else was written after the run
    quarantined it (for example between a crash and its recovery): it is left in place, the staged
    file is dropped, and the destination is returned in `changed` (destinations, not paths: in a run
    over several distributions two editable installs may hold the same relative path).

    Every step acts on the destination's directory as walked down by descriptors (beneath.parent_of)
    and on names in it, never on the journal's path strings: a directory swapped for a symlink after
    the run began ends the walk instead of leading it elsewhere.
    """
    before = originals(manifest)
    changed: list[str] = []
    walk_from = write_roots(env, roots)
    for entry in state["actions"]:
        dest = Path(entry["dest"])
        try:
            with beneath.parent_of(dest, walk_from) as (fd, name):
                if not _commit_one(fd, name, entry, before.get(str(dest))):
                    changed.append(entry["dest"])
                    continue
                drop_bytecode_at(fd, name)
                beneath.fsync_fd(fd)
        except FileNotFoundError:
            if entry["kind"] != ActionKind.REMOVE:
                changed.append(entry["dest"])  # its directory went away since it was staged
    return verify(state, skip=changed, roots=walk_from), changed


def _commit_one(fd: int, name: str, entry: JournalEntry, original: Mapping[str, object] | None) -> bool:
    """Carry out one entry in directory `fd`; False when the destination changed since it was quarantined."""
    if entry["kind"] == ActionKind.REMOVE:
        if beneath.lstat_at(fd, name) is None:
            return True
        if not _is_original(fd, name, original):
            return False
        beneath.unlink_at(fd, name)
        return True
    assert entry["staged"] is not None
    staged = os.path.basename(entry["staged"])
    if beneath.lstat_at(fd, staged) is None:
        return True  # already moved in before an interruption; verified below
    if _is_original(fd, name, original) or _holds_new(fd, name, entry):
        beneath.replace_at(fd, staged, name)
        return True
    with contextlib.suppress(OSError):
        beneath.unlink_at(fd, staged)
    return False


def mark_manifest(manifest: Manifest, changed: Collection[str], unverified: bool) -> None:
    """Record the outcome in `manifest`: entries left alone (`changed` destinations) are marked, so an
    undo leaves them too."""
    for item in manifest["files"]:
        if item["dest"] in changed:
            item["skipped"] = CHANGED_MEANWHILE
    manifest["status"] = RunStatus.INCOMPLETE if unverified or changed else RunStatus.COMPLETE


def verify(state: Journal, skip: Collection[str] = (), *, roots: Sequence[str]) -> list[str]:
    """Paths of the entries (but those whose destination is in `skip`) that do not hold what the run wrote."""
    bad = []
    for entry in state["actions"]:
        if entry["dest"] in skip:
            continue
        try:
            with beneath.parent_of(entry["dest"], roots) as (fd, name):
                ok = _holds_new(fd, name, entry)
        except FileNotFoundError:
            ok = entry["kind"] == ActionKind.REMOVE
        except (OSError, PatchAuditError):
            ok = False
        if not ok:
            bad.append(entry["path"])
    return bad


def rollback(state: Journal, roots: Sequence[str]) -> None:
    """Delete the staged files of a run that never began to commit."""
    for entry in state["actions"]:
        if entry["staged"]:
            with contextlib.suppress(OSError, PatchAuditError), beneath.parent_of(entry["staged"], roots) as (fd, name):
                beneath.unlink_at(fd, name)


def mark(run_dir: Path, status: RunStatus) -> None:
    """Set a run's status; an unreadable manifest is left as it is (`quarantine list` shows it)."""
    manifest, _problem = read_manifest(run_dir)
    if manifest is None:
        if not run_dir.is_dir() or os.path.lexists(run_dir / MANIFEST):
            return
        manifest = new_manifest(run_dir.name)
    manifest["status"] = status
    with contextlib.suppress(OSError):
        write_json(run_dir / MANIFEST, manifest)
