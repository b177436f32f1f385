"""The commit phase of a run, idempotent so that recovery can run it again; and its undoing (rollback).

Both take a journal whose paths have been checked: a run's own, or one recovery has validated.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from patchaudit.atomic import fsync_dir
from patchaudit.environment import Environment
from patchaudit.hashing import hash_file
from patchaudit.pristine.check import digest as digest_of
from patchaudit.revert.fileops import drop_bytecode, snapshot
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


def _is_original(dest: Path, item: Mapping[str, object] | None) -> bool:
    """Is what is at `dest` now still what the run quarantined (its manifest entry `item`)?"""
    if item is None:
        return False
    kind, content, _mode = snapshot(dest)
    if kind != item.get("original"):
        return False
    if kind is Original.FILE:
        assert isinstance(content, bytes)
        return digest_of(content, "sha256") == item.get("original_digest")
    if kind is Original.SYMLINK:
        return content == item.get("original_link")
    return kind is Original.MISSING


def _is_new(dest: Path, entry: JournalEntry) -> bool:
    """Is what is at `dest` already what the run writes there (or nothing, for a removal)?"""
    got = hash_file(str(dest), (entry["digest"] or "sha256=").partition("=")[0])
    if entry["kind"] == ActionKind.REMOVE:
        return got.missing
    if entry["kind"] == ActionKind.SYMLINK:
        return got.symlink == entry["link"]
    return got.digest == entry["digest"]


def commit(
    env: Environment, state: Journal, manifest: Manifest | None, roots: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Replace, remove, drop bytecode, re-hash. Returns (unverified paths, changed destinations).

    Before a destination is replaced or removed, it must still hold what the run quarantined (the
    manifest's original) or already what the run writes. Anything else was written after the run
    quarantined it (for example between a crash and its recovery): it is left in place, the staged
    file is dropped, and the destination is returned in `changed` (destinations, not paths: in a run
    over several distributions two editable installs may hold the same relative path).
    """
    before = originals(manifest)
    parents = set()
    changed: list[str] = []
    for entry in state["actions"]:
        dest = Path(entry["dest"])
        parents.add(dest.parent)
        if entry["kind"] == ActionKind.REMOVE:
            if not os.path.lexists(dest):
                pass
            elif _is_original(dest, before.get(str(dest))):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(dest)
            else:
                changed.append(entry["dest"])
                continue
        else:
            assert entry["staged"] is not None
            staged = Path(entry["staged"])
            if not os.path.lexists(staged):
                pass  # already moved in before an interruption; verified below
            elif _is_original(dest, before.get(str(dest))) or _is_new(dest, entry):
                os.replace(staged, dest)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(staged)
                changed.append(entry["dest"])
                continue
        drop_bytecode(env, dest, roots)
    for parent in parents:
        fsync_dir(parent)
    return verify(state, skip=changed), changed


def mark_manifest(manifest: Manifest, changed: Collection[str], unverified: bool) -> None:
    """Record the outcome in `manifest`: entries left alone (`changed` destinations) are marked, so an
    undo leaves them too."""
    for item in manifest["files"]:
        if item["dest"] in changed:
            item["skipped"] = CHANGED_MEANWHILE
    manifest["status"] = RunStatus.INCOMPLETE if unverified or changed else RunStatus.COMPLETE


def verify(state: Journal, skip: Collection[str] = ()) -> list[str]:
    """Paths of the entries (but those whose destination is in `skip`) that do not hold what the run wrote."""
    bad = []
    for entry in state["actions"]:
        if entry["dest"] in skip:
            continue
        dest = Path(entry["dest"])
        if entry["kind"] == ActionKind.REMOVE:
            ok = hash_file(str(dest)).missing
        elif entry["kind"] == ActionKind.SYMLINK:
            ok = hash_file(str(dest)).symlink == entry["link"]
        else:
            algorithm = (entry["digest"] or "sha256=").partition("=")[0]
            ok = hash_file(str(dest), algorithm).digest == entry["digest"]
        if not ok:
            bad.append(entry["path"])
    return bad


def rollback(state: Journal) -> None:
    """Delete the staged files of a run that never began to commit."""
    for entry in state["actions"]:
        if entry["staged"]:
            with contextlib.suppress(OSError):
                os.unlink(entry["staged"])


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
