"""The journal and manifests read back from disk: parsed into their typed shapes, or why they cannot be.

Shape only: whether the paths they name may be touched is decided by their readers (recovery, undo),
against roots computed from the environment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from patchaudit.fs.atomic import atomic_write
from patchaudit.fs.safefs import UnreadableFile, read_json
from patchaudit.revert.model import MANIFEST, MANIFEST_SCHEMA, ActionKind, Journal, Manifest, Original, Phase


def write_json(path: Path, value: object) -> None:
    atomic_write(path, json.dumps(value, indent=1, sort_keys=True), mode=0o644)


def _optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def journal_problem(state: object) -> str | None:
    """Why a journal is not one (None when it is)."""
    if not isinstance(state, dict):
        return "not a JSON object"
    for key in ("run_id", "run_dir", "phase"):
        if not isinstance(state.get(key), str):
            return f"no {key}"
    if state["phase"] not in tuple(Phase):
        return f"unknown phase {state['phase']!r}"
    if not _optional_str(state.get("op")):
        return "op is not a string"
    actions = state.get("actions")
    if not isinstance(actions, list):
        return "no list of actions"
    for n, entry in enumerate(actions):
        if not isinstance(entry, dict):
            return f"action {n} is not an object"
        for key in ("path", "dest", "kind"):
            if not isinstance(entry.get(key), str):
                return f"action {n} has no {key}"
        if entry["kind"] not in tuple(ActionKind):
            return f"action {n} has an unknown kind {entry['kind']!r}"
        for key in ("digest", "link", "staged", "quarantine"):
            if not _optional_str(entry.get(key)):
                return f"action {n}: {key} is not a string"
    return None


def read_journal(path: Path) -> tuple[Journal | None, str | None]:
    """(journal, None), or (None, why it is unreadable)."""
    try:
        state = read_json(path)
    except UnreadableFile as exc:
        return None, str(exc)
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"
    problem = journal_problem(state)
    if problem is not None:
        return None, problem
    state.setdefault("op", "revert")
    for entry in state["actions"]:
        for key in ("digest", "link", "staged"):
            entry.setdefault(key, None)
    return cast(Journal, state), None


def manifest_problem(manifest: object) -> str | None:
    """Why a quarantine manifest cannot be used (None when it can)."""
    if not isinstance(manifest, dict):
        return "not a JSON object"
    files = manifest.get("files")
    if not isinstance(files, list):
        return "no list of files"
    for n, item in enumerate(files):
        if not isinstance(item, dict):
            return f"file entry {n} is not an object"
        for key in ("path", "dest", "quarantine", "original"):
            if not isinstance(item.get(key), str):
                return f"file entry {n} has no {key}"
        if item["original"] not in tuple(Original):
            return f"file entry {n} has an unknown original {item['original']!r}"
        if item["original"] == Original.FILE and not isinstance(item.get("original_digest"), str):
            return f"file entry {n} has no original_digest"
        if item["original"] == Original.SYMLINK and not isinstance(item.get("original_link"), str):
            return f"file entry {n} has no original_link"
        if not isinstance(item.get("hook", False), bool):
            return f"file entry {n}: hook is not true or false"
        mode = item.get("original_mode")
        if mode is not None and (not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777):
            return f"file entry {n} has a bad original_mode"
        for key in ("action", "original_digest", "original_link", "new_digest", "new_link", "skipped", "dist"):
            if not _optional_str(item.get(key)):
                return f"file entry {n}: {key} is not a string"
    for key in ("schema", "run_id", "op", "dist", "version", "created", "status", "undo_of", "origin", "prefix"):
        if not _optional_str(manifest.get(key)):
            return f"{key} is not a string"
    if manifest.get("roots") is not None and not (
        isinstance(manifest["roots"], list) and all(isinstance(r, str) for r in manifest["roots"])
    ):
        return "roots is not a list of paths"
    return None


def read_manifest(run_dir: Path) -> tuple[Manifest | None, str | None]:
    """(manifest, None), or (None, why it is unreadable)."""
    try:
        manifest = read_json(run_dir / MANIFEST)
    except UnreadableFile as exc:
        return None, str(exc)
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"
    problem = manifest_problem(manifest)
    return (None, problem) if problem else (cast(Manifest, manifest), None)


def new_manifest(run_id: str) -> Manifest:
    """What stands in for a manifest that was never written (a run killed before it got that far)."""
    return cast(Manifest, {"schema": MANIFEST_SCHEMA, "run_id": run_id, "files": []})


def originals(manifest: Manifest | None) -> Mapping[str, Mapping[str, object]]:
    """The manifest's file entries by destination."""
    if manifest is None:
        return {}
    return {f["dest"]: cast(Mapping[str, object], f) for f in manifest["files"]}
