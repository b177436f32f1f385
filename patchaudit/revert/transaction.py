"""Carrying out a plan: journal, quarantine, stage, commit, verify; under the environment's lock.

A run goes through two journaled phases. `prepare`: copy what will be replaced or removed into
`<state_dir>/quarantine/<run-id>/files/`, write the manifest and the `.patch`, then stage every new file
as a temporary file beside its destination (fsync'd). `commit`: `os.replace` each staged file over its
destination (never following a symlink), unlink removed files, drop stale bytecode, re-hash. A run
killed in `prepare` is rolled back (staged files deleted, nothing else had changed); a run killed in
`commit` is finished from its staged files (recovery.py). Either way the quarantine keeps every
replaced byte.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from patchaudit.errors import PatchAuditError, QuarantineFailed, UnsafePath
from patchaudit.fs import beneath
from patchaudit.fs.atomic import atomic_write, fsync_dir, write_new
from patchaudit.parallel.hashing import hash_file
from patchaudit.pristine.check import digest as digest_of
from patchaudit.pristine.diff import unified
from patchaudit.revert.commit import commit, mark, mark_manifest, rollback
from patchaudit.revert.fileops import LOCK_WAIT, locked, snapshot, write_roots
from patchaudit.revert.model import (
    CHANGED_MEANWHILE,
    FILES,
    MANIFEST,
    MANIFEST_SCHEMA,
    Action,
    ActionKind,
    Journal,
    JournalEntry,
    Manifest,
    ManifestFile,
    Op,
    Original,
    Phase,
    Plan,
    Refusal,
    Result,
    RunStatus,
    summary,
)
from patchaudit.revert.paths import (
    check_destination,
    dist_problem,
    journal_dir,
    new_run_id,
    quarantine_name,
    refuse_unsafe_root,
    run_dir,
    staged_name,
)
from patchaudit.revert.recovery import recover_locked
from patchaudit.revert.state import write_json
from patchaudit.target.environment import Environment


def execute(
    env: Environment,
    plan: Plan,
    *,
    dry_run: bool = False,
    lock_wait: float = LOCK_WAIT,
    roots: Sequence[str] = (),
) -> Result:
    """Carry out `plan`: quarantine, stage, commit, verify; finishes any interrupted run first.

    `roots`: the project directories of the environment's editable installs, which an interrupted
    run may have been writing (callers compute them from the environment, never from a file).
    """
    if plan.actions:
        refuse_unsafe_root(env)  # a dry run says so too
    if dry_run or not plan.actions:
        return summary(plan, None, None, dry_run=dry_run)
    with locked(env, wait=lock_wait):
        recovered = tuple(recover_locked(env, roots))
        # a recovered run may have changed the files this plan was made for
        for action in plan.actions:
            reason = check_destination(env, action.dest, plan.roots)
            if reason is not None:
                raise UnsafePath(f"{action.path}: {reason}")
        return _run(env, plan, recovered)


def _run(env: Environment, plan: Plan, recovered: tuple[str, ...]) -> Result:
    state, manifest = _prepare(env, plan)
    where = Path(state["run_dir"])
    unverified, changed = commit(env, state, manifest, plan.roots)
    mark_manifest(manifest, changed, bool(unverified))
    write_json(where / MANIFEST, manifest)
    (journal_dir(env) / f"{state['run_id']}.json").unlink(missing_ok=True)
    gone = set(changed)
    left = tuple(
        Refusal(path=a.path, reason=CHANGED_MEANWHILE, dist=a.dist) for a in plan.actions if str(a.dest) in gone
    )
    kept = tuple(a for a in plan.actions if str(a.dest) not in gone)
    done = dataclasses.replace(plan, actions=kept, refused=plan.refused + left)
    return summary(done, state["run_id"], where, unverified=tuple(unverified), recovered=recovered)


def _prepare(env: Environment, plan: Plan) -> tuple[Journal, Manifest]:
    """Journal, quarantine and stage `plan`; on return the journal is in phase `commit`."""
    run_id = new_run_id(plan.dist)
    where = run_dir(env, run_id)
    journal = journal_dir(env) / f"{run_id}.json"
    entries: list[JournalEntry] = []
    for action in plan.actions:
        entries.append(
            {
                "path": action.path,
                "dest": str(action.dest),
                "kind": action.kind,
                "digest": action.digest,
                "link": action.link,
                "staged": str(staged_name(action.dest, run_id)) if action.kind != ActionKind.REMOVE else None,
                "quarantine": _group(action) + quarantine_name(env, action.path, action.dest),
            }
        )
    state: Journal = {
        "run_id": run_id,
        "op": plan.op,
        "phase": Phase.PREPARE,
        "run_dir": str(where),
        "roots": list(plan.roots),
        "actions": entries,
    }
    try:
        beneath.private_dir(journal.parent)
        write_json(journal, state)
    except OSError as exc:
        raise QuarantineFailed(f"cannot write the journal in {journal.parent}: {exc.strerror}") from None
    try:
        manifest = _quarantine(env, plan, run_id, where, entries)
        _stage(env, plan, entries)
    except (OSError, PatchAuditError) as exc:
        rollback(state, write_roots(env, plan.roots))
        mark(where, RunStatus.ROLLED_BACK)  # a manifest may already say `prepared`: it changed nothing
        journal.unlink(missing_ok=True)
        if isinstance(exc, PatchAuditError):  # a directory swapped for a link, a file for a FIFO
            hint = "a file or directory of the environment changed during the run"
            raise UnsafePath(f"nothing was changed: {exc}", hint=hint) from None
        failed = getattr(exc, "filename", None) or where
        raise QuarantineFailed(
            f"nothing was changed: cannot write {failed}: {exc.strerror or exc}",
            hint="free space or make the quarantine directory writable",
        ) from None
    state["phase"] = Phase.COMMIT
    write_json(journal, state)
    return state, manifest


def _quarantine(env: Environment, plan: Plan, run_id: str, where: Path, entries: list[JournalEntry]) -> Manifest:
    """Copy what is at each destination into the run directory; write manifest and patch."""
    beneath.private_dir(where.parent)
    files_dir = where / FILES
    files_dir.mkdir(mode=0o700, parents=True, exist_ok=False)
    patch: list[str] = []
    records: list[ManifestFile] = []
    walk_from = write_roots(env, plan.roots)
    for action, entry in zip(plan.actions, entries, strict=True):
        kind, content, mode = snapshot(action.dest, walk_from)
        item: ManifestFile = {
            "path": action.path,
            "dest": str(action.dest),
            "action": action.kind,
            "quarantine": f"{FILES}/{entry['quarantine']}",
            "original": kind,
            "original_digest": None,
            "original_mode": mode,
            "original_link": None,
            "new_digest": action.digest,
            "new_link": action.link,
        }
        if action.dist is not None:
            item["dist"] = action.dist
        if action.hook:
            item["hook"] = True
        target = files_dir / entry["quarantine"]
        if kind is Original.FILE:
            assert isinstance(content, bytes)
            target.parent.mkdir(parents=True, exist_ok=True)
            write_new(target, content, 0o600)
            item["original_digest"] = digest_of(content, "sha256")
            if hash_file(str(target)).digest != item["original_digest"]:
                raise OSError(errno.EIO, "quarantine copy does not read back", str(target))
        elif kind is Original.SYMLINK:
            assert isinstance(content, str)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(content, target)
            item["original_link"] = content
        elif kind is Original.OTHER:
            raise OSError(errno.EISDIR, "not a regular file or symlink", str(action.dest))
        records.append(item)
        old = content if isinstance(content, bytes) else None
        new = action.data if action.kind == ActionKind.WRITE else None
        if action.kind != ActionKind.SYMLINK and kind is not Original.SYMLINK and old != new:
            text, _ = unified(action.path, new, old) if plan.op == Op.REVERT else unified(action.path, old, new)
            patch.append(text)
    manifest = cast(
        Manifest,
        {
            "schema": MANIFEST_SCHEMA,
            "run_id": run_id,
            "op": plan.op,
            "dist": plan.dist,
            "version": plan.version,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "origin": plan.origin,
            "undo_of": plan.undo_of,
            "roots": list(plan.roots),
            "status": RunStatus.PREPARED,
            "prefix": str(env.prefix),
            "files": records,
        },
    )
    # the patch re-applies what this run takes away (pristine -> patched), with `patch -p0`
    atomic_write(where / f"{run_id}.patch", "".join(patch).encode("utf-8", "surrogateescape"), durable=False)
    write_json(where / MANIFEST, manifest)
    fsync_dir(files_dir)
    return manifest


def _group(action: Action) -> str:
    """In a run over several distributions, each one's files lie in their own directory below `files/`.

    Distribution names begin with a letter or digit, so `_hooks/` (and `_outside/`) never meet one.
    """
    if action.hook:
        return "_hooks/"
    if action.dist and dist_problem(action.dist, "0") is not None:
        raise UnsafePath(f"{action.dist!r} is not a distribution name")
    return f"{action.dist}/" if action.dist else ""


def _stage(env: Environment, plan: Plan, entries: list[JournalEntry]) -> None:
    """Write each new file beside its destination, in the directory walked down by descriptors."""
    walk_from = write_roots(env, plan.roots)
    for action, entry in zip(plan.actions, entries, strict=True):
        if action.kind == ActionKind.REMOVE:
            continue
        assert entry["staged"] is not None
        staged = os.path.basename(entry["staged"])
        with beneath.parent_of(action.dest, walk_from, create=True) as (fd, _name):
            beneath.unlink_at(fd, staged)
            if action.kind == ActionKind.SYMLINK:
                assert action.link is not None
                beneath.symlink_at(fd, action.link, staged)
            else:
                assert action.data is not None
                beneath.write_new_at(fd, staged, action.data, action.mode)
            beneath.fsync_fd(fd)
