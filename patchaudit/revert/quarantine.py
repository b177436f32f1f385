"""The quarantine: list its runs, and undo one (put back exactly what it replaced).

A manifest lies in the environment, so it is input: every destination it names must pass
check_destination against roots computed from the environment (never the manifest's own `roots`),
and every quarantined copy must lie inside its run directory and match the manifest's hash.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from patchaudit.errors import QuarantineFailed, RunNotFound, StateRefused
from patchaudit.fs.beneath import real_dir, safe_mode
from patchaudit.pristine.check import digest as digest_of
from patchaudit.pristine.diff import read_installed
from patchaudit.revert.fileops import LOCK_WAIT
from patchaudit.revert.model import (
    FILES,
    HOOKS,
    MANIFEST,
    Action,
    ActionKind,
    Manifest,
    Op,
    Original,
    Plan,
    Refusal,
    Result,
    RunInfo,
    RunStatus,
)
from patchaudit.revert.paths import check_destination, quarantine_root, run_dir, run_dir_problem, valid_run_id
from patchaudit.revert.state import read_manifest
from patchaudit.revert.transaction import execute
from patchaudit.target.environment import Environment


def list_runs(env: Environment) -> list[RunInfo]:
    """Every run directory, oldest first; one whose manifest cannot be read is listed as `unreadable`."""
    root = quarantine_root(env)
    runs = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        if not (root / name).is_dir():
            continue
        manifest, problem = read_manifest(root / name)
        if manifest is None:
            status = f"unreadable: {problem}"
            runs.append(
                RunInfo(
                    run_id=name, path=root / name, op="?", dist="?", version="?", created="", status=status, files=0
                )
            )
            continue
        runs.append(
            RunInfo(
                run_id=name,
                path=root / name,
                op=manifest.get("op") or Op.REVERT,
                dist=manifest.get("dist") or "?",
                version=manifest.get("version") or "?",
                created=manifest.get("created") or "",
                status=manifest.get("status") or "?",
                files=len(manifest["files"]),
                undo_of=manifest.get("undo_of"),
                dists=_per_dist(manifest),
            )
        )
    return runs


def _per_dist(manifest: Manifest) -> tuple[tuple[str, int], ...]:
    """Files per distribution of a run over several (startup hooks as `startup hooks`); () for one."""
    counts: dict[str, int] = {}
    for item in manifest["files"]:
        name = HOOKS if item.get("hook") else item.get("dist")
        if name:
            counts[name] = counts.get(name, 0) + 1
    return tuple(counts.items())


def plan_undo(env: Environment, run_id: str, *, roots: Sequence[str] = ()) -> Plan:
    """Put back exactly what run `run_id` quarantined; files it created are removed.

    `roots`: project directories of the environment's editable installs (computed from the
    environment by the caller); a destination anywhere else outside the environment refuses the run.
    """
    where = run_dir(env, run_id)
    if not valid_run_id(run_id) or not (where / MANIFEST).is_file():
        raise RunNotFound(
            f"no quarantine run {run_id!r} in {quarantine_root(env)}", hint="see `patchaudit quarantine list`"
        )
    problem = run_dir_problem(env, run_id)
    if problem is not None:
        raise StateRefused(
            f"quarantine run {run_id}: {problem}; nothing was changed", hint="inspect it, then remove it"
        )
    manifest, problem = read_manifest(where)
    if manifest is None:
        raise QuarantineFailed(
            f"quarantine run {run_id}: its manifest is unreadable ({problem}); nothing was changed",
            hint=f"its files are still in {where / FILES}",
        )
    if manifest.get("status") == RunStatus.ROLLED_BACK:
        raise RunNotFound(f"run {run_id} was rolled back: it changed nothing, so there is nothing to undo")
    for item in manifest["files"]:
        reason = check_destination(env, Path(item["dest"]), roots)
        if reason is not None:
            raise StateRefused(
                f"quarantine run {run_id}: its manifest names {item['dest']}: {reason}; nothing was changed",
                hint="patchaudit writes only inside the environment: inspect that manifest, then remove the run",
            )
    actions: list[Action] = []
    refused: list[Refusal] = []
    files_dir = real_dir(where / FILES)
    for item in manifest["files"]:
        if item.get("skipped"):
            continue  # the run left it alone: there is nothing of it to put back
        dest = Path(item["dest"])
        owner, hook = item.get("dist"), bool(item.get("hook"))
        stored = where / item["quarantine"]
        parent = real_dir(stored.parent)
        inside = parent == files_dir or parent.startswith(files_dir + os.sep)
        if not inside and item["original"] != Original.MISSING:
            refused.append(Refusal(path=item["path"], reason="its quarantined copy lies outside the run directory"))
            continue
        if item["original"] == Original.FILE:
            data = read_installed(stored)
            if not isinstance(data, bytes) or digest_of(data, "sha256") != item["original_digest"]:
                refused.append(Refusal(path=item["path"], reason="quarantined copy does not match its manifest hash"))
                continue
            mode = item.get("original_mode")
            actions.append(
                Action(
                    path=item["path"],
                    dest=dest,
                    kind=ActionKind.WRITE,
                    data=data,
                    mode=0o644 if mode is None else safe_mode(mode),  # data: no setuid/setgid/sticky back
                    digest=item["original_digest"],
                    dist=owner,
                    hook=hook,
                )
            )
        elif item["original"] == Original.SYMLINK:
            link = item["original_link"]
            symlink = Action(path=item["path"], dest=dest, kind=ActionKind.SYMLINK, link=link, dist=owner, hook=hook)
            actions.append(symlink)
        elif item["original"] == Original.MISSING:
            actions.append(Action(path=item["path"], dest=dest, kind=ActionKind.REMOVE, dist=owner, hook=hook))
    return Plan(
        op=Op.UNDO,
        dist=manifest.get("dist") or "?",
        version=manifest.get("version") or "?",
        actions=tuple(actions),
        refused=tuple(refused),
        origin=f"quarantine {run_id}",
        undo_of=run_id,
        roots=tuple(roots),
    )


def undo(
    env: Environment, run_id: str, *, dry_run: bool = False, roots: Sequence[str] = (), lock_wait: float = LOCK_WAIT
) -> Result:
    return execute(env, plan_undo(env, run_id, roots=roots), dry_run=dry_run, roots=roots, lock_wait=lock_wait)
