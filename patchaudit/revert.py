"""Put drifted files back, keeping every replaced byte in a quarantine run; journaled, locked, undoable.

A run goes through two journaled phases. `prepare`: copy what will be replaced or removed into
`<state_dir>/quarantine/<run-id>/files/`, write the manifest and the `.patch`, then stage every new file
as a temporary file beside its destination (fsync'd). `commit`: `os.replace` each staged file over its
destination (never following a symlink), unlink removed files, drop stale bytecode, re-hash. A run
killed in `prepare` is rolled back (staged files deleted, nothing else had changed); a run killed in
`commit` is finished from its staged files. Either way the quarantine keeps every replaced byte.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as _dt
import errno
import fcntl
import hashlib
import io
import json
import os
import secrets
import stat
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchaudit.diff import read_installed, select_drift, unified
from patchaudit.environment import Environment, InstalledDist
from patchaudit.errors import LockBusy, PatchAuditError, QuarantineFailed, RunNotFound, UnsafePath
from patchaudit.hashing import hash_file
from patchaudit.pristine import BuildCheck, Transfer, find_pristine
from patchaudit.pristine.check import PristineFile, wheel_index
from patchaudit.pristine.check import digest as digest_of
from patchaudit.pristine.interface import PristineSource
from patchaudit.pristine.zipwheel import unsafe_member
from patchaudit.report import DistReport, Drift, DriftState

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "patchaudit/quarantine/v1"
FILES = "files"
LOCK_WAIT = 10.0


# ---------------------------------------------------------------- values


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """One change to one path: write bytes, create a symlink (undo only), or remove."""

    path: str  # as the report or manifest names it
    dest: Path
    kind: str  # "write" | "symlink" | "remove"
    data: bytes | None = None
    link: str | None = None
    mode: int = 0o644
    digest: str | None = None  # of `data`


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What a revert (or an undo) would do; nothing has been written when a Plan exists."""

    op: str  # "revert" | "undo"
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


# ---------------------------------------------------------------- paths


def _roots(env: Environment) -> list[str]:
    return [os.path.realpath(r) for r in env.writable_roots()]


def check_destination(env: Environment, dest: Path, extra_roots: Sequence[str] = ()) -> str | None:
    """Why `dest` may not be written (None when it may): only inside the env's scheme directories.

    The parent is resolved (a symlinked directory that leads out is refused); the final component is
    never followed, because it is replaced with os.replace or unlinked.
    """
    parent = os.path.realpath(dest.parent)
    roots = _roots(env) + [os.path.realpath(r) for r in extra_roots]
    state = os.path.realpath(env.state_dir)
    inside = any(parent == r or parent.startswith(r.rstrip("/") + "/") for r in roots)
    if not inside:
        return "outside the environment's directories"
    if parent == state or parent.startswith(state + "/"):
        return "inside patchaudit's own state directory"
    if os.path.join(parent, dest.name) in roots:
        return "is a scheme directory itself"
    if "/.git/" in parent + "/" or dest.name == ".git":
        return "inside a git directory"
    return None


def _destination(location: Path, path: str) -> Path:
    return Path(os.path.normpath(os.path.join(location, path)))


def _quarantine_name(env: Environment, path: str, dest: Path) -> str:
    if not os.path.isabs(path) and not unsafe_member(path.replace(os.sep, "/")):
        return path
    rel = os.path.relpath(dest, env.prefix)
    if rel.startswith(".."):
        rel = dest.as_posix().lstrip("/")
    return "_outside/" + rel


# ---------------------------------------------------------------- low-level file operations


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create `path` exclusively (no symlink followed), write, set mode, fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    _write_new(tmp, json.dumps(value, indent=1, sort_keys=True).encode(), 0o644)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _snapshot(dest: Path) -> tuple[str, bytes | str | None, int | None]:
    """(kind, content, mode) of what is at dest now: file bytes, symlink target, or nothing."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return "missing", None, None
    if stat.S_ISLNK(st.st_mode):
        return "symlink", os.readlink(dest), None
    if not stat.S_ISREG(st.st_mode):
        return "other", None, None
    content = read_installed(dest)
    return "file", content if isinstance(content, bytes) else b"", stat.S_IMODE(st.st_mode)


def _drop_bytecode(env: Environment, dest: Path, roots: Sequence[str] = ()) -> list[str]:
    """Remove `__pycache__/<module>.*.pyc` of a restored or removed module source.

    Only regular files in a real `__pycache__` directory inside the environment's directories: a
    symlinked `__pycache__` (or one whose real path leads out) is left alone, never followed.
    """
    if dest.suffix != ".py":
        return []
    cache = dest.parent / "__pycache__"
    try:
        if not stat.S_ISDIR(os.lstat(cache).st_mode):
            return []
        fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    dropped = []
    try:
        prefix = dest.stem + "."
        for name in os.listdir(fd):
            if not (name.startswith(prefix) and name.endswith(".pyc")):
                continue
            if check_destination(env, cache / name, roots) is not None:
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(name, dir_fd=fd).st_mode):
                    os.unlink(name, dir_fd=fd)
                    dropped.append(name)
    finally:
        os.close(fd)
    return dropped


# ---------------------------------------------------------------- lock


@contextlib.contextmanager
def locked(env: Environment, *, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the environment's revert lock (fcntl.flock); LockBusy after `wait` seconds."""
    env.state_dir.mkdir(parents=True, exist_ok=True)
    path = env.state_dir / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    raise LockBusy(
                        f"another patchaudit run (pid {holder}) is changing {env.prefix}",
                        hint="wait for it to finish, then run again",
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


# ---------------------------------------------------------------- planning


def plan_revert(
    env: Environment,
    dist: InstalledDist,
    report: DistReport,
    *,
    paths: Collection[str] = (),
    wheelhouse: Sequence[Path] = (),
    sources: Sequence[PristineSource] | None = None,
    environ: Mapping[str, str] | None = None,
    transfer: Transfer | None = None,
) -> Plan:
    """Decide what reverting `dist` (or `paths` of it) does, from `report`; pristine bytes checked here."""
    drift = select_drift(report, paths)
    refused: list[Refusal] = []
    if paths:
        known = {os.path.normpath(d.path) for d in drift}
        refused += [Refusal(path=p, reason="not drifted") for p in paths if os.path.normpath(p) not in known]
    safe = []
    for item in drift:
        reason = check_destination(env, _destination(dist.location, item.path))
        if reason is not None:
            refused.append(Refusal(path=item.path, reason=reason))
        else:
            safe.append(item)
    needed = [d for d in safe if d.state is not DriftState.ADDED]
    added = [d for d in safe if d.state is DriftState.ADDED]
    actions: list[Action] = []
    mismatch: tuple[str, ...] = ()
    origin = None
    shipped: set[str] = set()
    check: BuildCheck | None = None
    if needed or added:
        try:
            check = find_pristine(
                env, dist, drift=needed, wheelhouse=wheelhouse, sources=sources, environ=environ, transfer=transfer
            )
        except PatchAuditError:
            if needed:
                raise
            check = None  # no wheel to ask: files no RECORD owns are removed, as always (and quarantined)
    if check is not None:
        try:
            # a file the wheel ships is not "added" even when its installed RECORD line is gone
            shipped = set(wheel_index(check.wheel))
            origin = check.wheel.origin
            mismatch = check.record_mismatch
            refused += [Refusal(path=p, reason=r) for p, r in check.unavailable]
            for item in needed:
                pristine = check.files.get(item.path)
                if pristine is None:
                    continue
                actions.append(
                    Action(
                        path=item.path,
                        dest=_destination(dist.location, item.path),
                        kind="write",
                        data=pristine.data,
                        mode=pristine.mode,
                        digest=pristine.digest,
                    )
                )
            actions += _record_edited_actions(env, dist, check.record_edited, check.files, refused)
        finally:
            check.wheel.close()
    for item in added:
        if os.path.normpath(item.path).replace(os.sep, "/") in shipped:
            refused.append(
                Refusal(
                    path=item.path,
                    reason="the pristine wheel ships this file but the installed RECORD does not list it "
                    "(its RECORD line was removed); not removed",
                )
            )
            continue
        actions.append(Action(path=item.path, dest=_destination(dist.location, item.path), kind="remove"))
    return Plan(
        op="revert",
        dist=dist.name,
        version=dist.version,
        actions=tuple(actions),
        refused=tuple(refused),
        record_mismatch=mismatch,
        origin=origin,
    )


def _record_edited_actions(
    env: Environment,
    dist: InstalledDist,
    edited: Sequence[Drift],
    files: Mapping[str, PristineFile],
    refused: list[Refusal],
) -> list[Action]:
    """Files whose installed RECORD line was edited to match a patch: restore them and their RECORD lines.

    Only an authentic wheel (its own sha256 published by the index or direct_url.json) reports these.
    """
    actions: list[Action] = []
    fixed: dict[str, PristineFile] = {}
    for item in edited:
        dest = _destination(dist.location, item.path)
        pristine = files.get(item.path)
        reason = check_destination(env, dest)
        if pristine is None or reason is not None:
            refused.append(Refusal(path=item.path, reason=reason or f"{item.note}; the wheel cannot restore it"))
            continue
        fixed[os.path.normpath(item.path)] = pristine
        if hash_file(str(dest), pristine.digest.partition("=")[0]).digest != pristine.digest:
            actions.append(
                Action(
                    path=item.path,
                    dest=dest,
                    kind="write",
                    data=pristine.data,
                    mode=pristine.mode,
                    digest=pristine.digest,
                )
            )
    record_path = dist.record_path
    if fixed and record_path is not None:
        rows = []
        for row in csv.reader(record_path.read_text("utf-8").splitlines()):
            if row and os.path.normpath(row[0]) in fixed:
                pristine = fixed[os.path.normpath(row[0])]
                row = [row[0], pristine.digest, str(len(pristine.data))]
            rows.append(row)
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        data = buf.getvalue().encode()
        rel = os.path.relpath(record_path, dist.location).replace(os.sep, "/")
        mode = stat.S_IMODE(os.lstat(record_path).st_mode)
        actions.append(
            Action(path=rel, dest=record_path, kind="write", data=data, mode=mode, digest=digest_of(data, "sha256"))
        )
    return actions


def _summary(plan: Plan, run_id: str | None, quarantine: Path | None, **extra: Any) -> Result:
    return Result(
        run_id=run_id,
        quarantine=quarantine,
        restored=tuple(a.path for a in plan.actions if a.kind != "remove"),
        removed=tuple(a.path for a in plan.actions if a.kind == "remove"),
        refused=plan.refused,
        record_mismatch=plan.record_mismatch,
        **extra,
    )


# ---------------------------------------------------------------- execution


def _new_run_id(dist: str) -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in dist)
    return f"{stamp}-{safe}-{secrets.token_hex(3)}"


def _staged_name(dest: Path, run_id: str) -> Path:
    """A short name beside `dest` (any legal file name must still be stageable): `.pa-<hash>.tmp`."""
    tag = hashlib.sha256(f"{run_id}\0{dest.name}".encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return dest.with_name(f".pa-{tag}.tmp")


def execute(env: Environment, plan: Plan, *, dry_run: bool = False, lock_wait: float = LOCK_WAIT) -> Result:
    """Carry out `plan`: quarantine, stage, commit, verify; finishes any interrupted run first."""
    if dry_run or not plan.actions:
        return _summary(plan, None, None, dry_run=dry_run)
    with locked(env, wait=lock_wait):
        recovered = tuple(_recover_locked(env))
        # a recovered run may have changed the files this plan was made for
        for action in plan.actions:
            reason = check_destination(env, action.dest, plan.roots)
            if reason is not None:
                raise UnsafePath(f"{action.path}: {reason}")
        return _run(env, plan, recovered)


def _run(env: Environment, plan: Plan, recovered: tuple[str, ...]) -> Result:
    state, manifest = _prepare(env, plan)
    run_dir = Path(state["run_dir"])
    journal = env.state_dir / "journal" / f"{state['run_id']}.json"
    unverified, changed = _commit(env, state, manifest)
    _mark_manifest(manifest, changed, bool(unverified))
    _atomic_json(run_dir / MANIFEST, manifest)
    journal.unlink(missing_ok=True)
    refused = plan.refused + tuple(Refusal(path=p, reason=CHANGED_MEANWHILE) for p in changed)
    done = dataclasses.replace(plan, actions=tuple(a for a in plan.actions if a.path not in changed), refused=refused)
    return _summary(done, state["run_id"], run_dir, unverified=tuple(unverified), recovered=recovered)


def _prepare(env: Environment, plan: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """Journal, quarantine and stage `plan`; on return the journal is in phase `commit`."""
    run_id = _new_run_id(plan.dist)
    run_dir = env.state_dir / "quarantine" / run_id
    journal = env.state_dir / "journal" / f"{run_id}.json"
    entries = []
    for action in plan.actions:
        entries.append(
            {
                "path": action.path,
                "dest": str(action.dest),
                "kind": action.kind,
                "digest": action.digest,
                "link": action.link,
                "staged": str(_staged_name(action.dest, run_id)) if action.kind != "remove" else None,
                "quarantine": _quarantine_name(env, action.path, action.dest),
            }
        )
    state = {
        "run_id": run_id,
        "op": plan.op,
        "phase": "prepare",
        "run_dir": str(run_dir),
        "roots": list(plan.roots),
        "actions": entries,
    }
    try:
        _atomic_json(journal, state)
    except OSError as exc:
        raise QuarantineFailed(f"cannot write the journal in {journal.parent}: {exc.strerror}") from None
    try:
        manifest = _quarantine(env, plan, run_id, run_dir, entries)
        _stage(plan, entries)
    except OSError as exc:
        _rollback(state)
        _mark(run_dir, "rolled-back")  # a manifest may already say `prepared`: it changed nothing
        journal.unlink(missing_ok=True)
        where = getattr(exc, "filename", None) or run_dir
        raise QuarantineFailed(
            f"nothing was changed: cannot write {where}: {exc.strerror or exc}",
            hint="free space or make the quarantine directory writable",
        ) from None
    state["phase"] = "commit"
    _atomic_json(journal, state)
    return state, manifest


def _quarantine(
    env: Environment, plan: Plan, run_id: str, run_dir: Path, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """Copy what is at each destination into the run directory; write manifest and patch."""
    files_dir = run_dir / FILES
    files_dir.mkdir(parents=True, exist_ok=False)
    patch: list[str] = []
    records = []
    for action, entry in zip(plan.actions, entries, strict=True):
        kind, content, mode = _snapshot(action.dest)
        item: dict[str, Any] = {
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
        target = files_dir / entry["quarantine"]
        if kind == "file":
            assert isinstance(content, bytes)
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_new(target, content, 0o600)
            item["original_digest"] = digest_of(content, "sha256")
            if hash_file(str(target)).digest != item["original_digest"]:
                raise OSError(errno.EIO, "quarantine copy does not read back", str(target))
        elif kind == "symlink":
            assert isinstance(content, str)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(content, target)
            item["original_link"] = content
        elif kind == "other":
            raise OSError(errno.EISDIR, "not a regular file or symlink", str(action.dest))
        records.append(item)
        old = content if isinstance(content, bytes) else None
        new = action.data if action.kind == "write" else None
        if action.kind != "symlink" and kind != "symlink" and old != new:
            text, _ = unified(action.path, new, old) if plan.op == "revert" else unified(action.path, old, new)
            patch.append(text)
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "run_id": run_id,
        "op": plan.op,
        "dist": plan.dist,
        "version": plan.version,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "origin": plan.origin,
        "undo_of": plan.undo_of,
        "roots": list(plan.roots),
        "status": "prepared",
        "prefix": str(env.prefix),
        "files": records,
    }
    # the patch re-applies what this run takes away (pristine -> patched), with `patch -p0`
    (run_dir / f"{run_id}.patch").write_text("".join(patch), encoding="utf-8", errors="surrogateescape")
    _atomic_json(run_dir / MANIFEST, manifest)
    _fsync_dir(files_dir)
    return manifest


def _stage(plan: Plan, entries: list[dict[str, Any]]) -> None:
    for action, entry in zip(plan.actions, entries, strict=True):
        if action.kind == "remove":
            continue
        staged = Path(entry["staged"])
        action.dest.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        if action.kind == "symlink":
            assert action.link is not None
            os.symlink(action.link, staged)
        else:
            assert action.data is not None
            _write_new(staged, action.data, action.mode)
    for parent in {a.dest.parent for a in plan.actions}:
        _fsync_dir(parent)


CHANGED_MEANWHILE = "changed since the run quarantined it: left as it is now (the quarantine keeps the older copy)"


def _is_original(dest: Path, item: Mapping[str, Any] | None) -> bool:
    """Is what is at `dest` now still what the run quarantined (its manifest entry `item`)?"""
    if not isinstance(item, Mapping):
        return False
    kind, content, _mode = _snapshot(dest)
    if kind != item.get("original"):
        return False
    if kind == "file":
        assert isinstance(content, bytes)
        return digest_of(content, "sha256") == item.get("original_digest")
    if kind == "symlink":
        return content == item.get("original_link")
    return kind == "missing"


def _is_new(dest: Path, entry: Mapping[str, Any]) -> bool:
    """Is what is at `dest` already what the run writes there (or nothing, for a removal)?"""
    got = hash_file(str(dest), (entry.get("digest") or "sha256=").partition("=")[0])
    if entry["kind"] == "remove":
        return got.missing
    if entry["kind"] == "symlink":
        return got.symlink == entry.get("link")
    return got.digest == entry.get("digest")


def _commit(
    env: Environment, state: Mapping[str, Any], manifest: Mapping[str, Any] | None
) -> tuple[list[str], list[str]]:
    """Replace, remove, drop bytecode, re-hash; idempotent, so recovery can run it again.

    Before a destination is replaced or removed, it must still hold what the run quarantined (the
    manifest's original) or already what the run writes. Anything else was written after the run
    quarantined it (for example between a crash and its recovery): it is left in place, the staged
    file is dropped, and the path is returned in `changed`. Returns (unverified, changed).
    """
    files = manifest.get("files") if isinstance(manifest, Mapping) else None
    originals = {str(f.get("dest")): f for f in files if isinstance(f, Mapping)} if isinstance(files, list) else {}
    parents = set()
    changed: list[str] = []
    for entry in state["actions"]:
        dest = Path(entry["dest"])
        parents.add(dest.parent)
        if entry["kind"] == "remove":
            if not os.path.lexists(dest):
                pass
            elif _is_original(dest, originals.get(str(dest))):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(dest)
            else:
                changed.append(entry["path"])
                continue
        else:
            staged = Path(entry["staged"])
            if not os.path.lexists(staged):
                # already moved in before an interruption; verified below
                pass
            elif _is_original(dest, originals.get(str(dest))) or _is_new(dest, entry):
                os.replace(staged, dest)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(staged)
                changed.append(entry["path"])
                continue
        _drop_bytecode(env, dest, state.get("roots") or ())
    for parent in parents:
        _fsync_dir(parent)
    return _verify(state, skip=changed), changed


def _mark_manifest(manifest: dict[str, Any], changed: Collection[str], unverified: bool) -> None:
    """Record the outcome in `manifest`: entries left alone are marked, so an undo leaves them too."""
    for item in manifest.get("files") or []:
        if isinstance(item, dict) and item.get("path") in changed:
            item["skipped"] = CHANGED_MEANWHILE
    manifest["status"] = "incomplete" if unverified or changed else "complete"


def _verify(state: Mapping[str, Any], skip: Collection[str] = ()) -> list[str]:
    bad = []
    for entry in state["actions"]:
        if entry["path"] in skip:
            continue
        dest = Path(entry["dest"])
        got = hash_file(str(dest))
        if entry["kind"] == "remove":
            ok = got.missing
        elif entry["kind"] == "symlink":
            ok = got.symlink == entry["link"]
        else:
            algorithm = (entry["digest"] or "sha256=").partition("=")[0]
            got = hash_file(str(dest), algorithm)
            ok = got.digest == entry["digest"]
        if not ok:
            bad.append(entry["path"])
    return bad


def _rollback(state: Mapping[str, Any]) -> None:
    for entry in state["actions"]:
        if entry.get("staged"):
            with contextlib.suppress(OSError):
                os.unlink(entry["staged"])


# ---------------------------------------------------------------- recovery


def recover(env: Environment, *, lock_wait: float = 0.0) -> list[str]:
    """Finish or roll back runs a kill left in the journal; one message per run handled.

    A journal whose lock is held belongs to a run that is alive: it is left to finish.
    """
    journal_dir = env.state_dir / "journal"
    if not journal_dir.is_dir() or not any(journal_dir.glob("*.json")):
        return []
    try:
        with locked(env, wait=lock_wait):
            return _recover_locked(env)
    except LockBusy:
        return ["a revert is running in this environment right now; its files may be changing"]


def _valid_journal(state: object) -> bool:
    if not isinstance(state, dict) or not isinstance(state.get("run_dir"), str):
        return False
    if not isinstance(state.get("run_id"), str) or not isinstance(state.get("actions"), list):
        return False
    keys = ("path", "dest", "kind")
    return all(isinstance(e, dict) and all(isinstance(e.get(k), str) for k in keys) for e in state["actions"])


def _read_manifest(run_dir: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((run_dir / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def _recover_locked(env: Environment) -> list[str]:
    messages = []
    for path in sorted((env.state_dir / "journal").glob("*.json")):
        try:
            state = json.loads(path.read_bytes())
        except (OSError, ValueError):
            state = None
        if not _valid_journal(state):
            messages.append(f"ignored unreadable journal {path.name}")
            continue
        run_dir = Path(state["run_dir"])
        op = state.get("op", "revert")
        if state.get("phase") == "commit":
            manifest = _read_manifest(run_dir)
            bad, changed = _commit(env, state, manifest)
            if manifest is not None:
                _mark_manifest(manifest, changed, bool(bad))
                with contextlib.suppress(OSError):
                    _atomic_json(run_dir / MANIFEST, manifest)
            else:
                _mark(run_dir, "incomplete" if bad or changed else "complete")
            message = f"finished interrupted {op} {state['run_id']}"
            if changed:
                message += (
                    f"; left {len(changed)} file(s) that changed after it began as they are now"
                    f" (the quarantine keeps the older copies): {', '.join(changed[:3])}"
                )
            if bad:
                message += f"; {len(bad)} file(s) do not verify: {', '.join(bad[:3])}"
            messages.append(message)
        else:
            _rollback(state)
            _mark(run_dir, "rolled-back")
            messages.append(f"rolled back interrupted {op} {state['run_id']} (nothing had been changed)")
        path.unlink(missing_ok=True)
    return messages


def _mark(run_dir: Path, status: str) -> None:
    manifest_path = run_dir / MANIFEST
    manifest = _read_manifest(run_dir)
    if manifest is None:
        if not run_dir.is_dir() or manifest_path.exists():
            return  # an unreadable manifest is left as it is: `quarantine list` shows it
        manifest = {"schema": MANIFEST_SCHEMA, "run_id": run_dir.name, "files": []}
    manifest["status"] = status
    with contextlib.suppress(OSError):
        _atomic_json(manifest_path, manifest)


# ---------------------------------------------------------------- quarantine: list and undo


def _manifest_problem(manifest: object) -> str | None:
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
        if item["original"] == "file" and not isinstance(item.get("original_digest"), str):
            return f"file entry {n} has no original_digest"
        if item["original"] == "symlink" and not isinstance(item.get("original_link"), str):
            return f"file entry {n} has no original_link"
        mode = item.get("original_mode")
        if mode is not None and (not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777):
            return f"file entry {n} has a bad original_mode"
    for key in ("op", "dist", "version", "created", "status", "undo_of"):
        if manifest.get(key) is not None and not isinstance(manifest[key], str):
            return f"{key} is not a string"
    if manifest.get("roots") is not None and not (
        isinstance(manifest["roots"], list) and all(isinstance(r, str) for r in manifest["roots"])
    ):
        return "roots is not a list of paths"
    return None


def _load_manifest(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None), or (None, why it is unreadable)."""
    try:
        manifest = json.loads((run_dir / MANIFEST).read_bytes())
    except OSError as exc:
        return None, exc.strerror or str(exc)
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"
    problem = _manifest_problem(manifest)
    return (None, problem) if problem else (manifest, None)


def list_runs(env: Environment) -> list[RunInfo]:
    """Every run directory, oldest first; one whose manifest cannot be read is listed as `unreadable`."""
    root = env.state_dir / "quarantine"
    runs = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        if not (root / name).is_dir():
            continue
        manifest, problem = _load_manifest(root / name)
        if manifest is None:
            runs.append(
                RunInfo(
                    run_id=name,
                    path=root / name,
                    op="?",
                    dist="?",
                    version="?",
                    created="",
                    status=f"unreadable: {problem}",
                    files=0,
                )
            )
            continue
        runs.append(
            RunInfo(
                run_id=name,
                path=root / name,
                op=manifest.get("op") or "revert",
                dist=manifest.get("dist") or "?",
                version=manifest.get("version") or "?",
                created=manifest.get("created") or "",
                status=manifest.get("status") or "?",
                files=len(manifest["files"]),
                undo_of=manifest.get("undo_of"),
            )
        )
    return runs


def plan_undo(env: Environment, run_id: str) -> Plan:
    """Put back exactly what run `run_id` quarantined; files it created are removed."""
    run_dir = env.state_dir / "quarantine" / run_id
    if os.sep in run_id or run_id in ("", ".", "..") or not (run_dir / MANIFEST).is_file():
        raise RunNotFound(
            f"no quarantine run {run_id!r} in {env.state_dir / 'quarantine'}", hint="see `patchaudit quarantine list`"
        )
    manifest, problem = _load_manifest(run_dir)
    if manifest is None:
        raise QuarantineFailed(
            f"quarantine run {run_id}: its manifest is unreadable ({problem}); nothing was changed",
            hint=f"its files are still in {run_dir / FILES}",
        )
    if manifest.get("status") == "rolled-back":
        raise RunNotFound(f"run {run_id} was rolled back: it changed nothing, so there is nothing to undo")
    actions: list[Action] = []
    refused: list[Refusal] = []
    roots = tuple(manifest.get("roots") or ())
    files_dir = os.path.realpath(run_dir / FILES)
    for item in manifest["files"]:
        if item.get("skipped"):
            continue  # the run left it alone: there is nothing of it to put back
        dest = Path(item["dest"])
        reason = check_destination(env, dest, roots)
        if reason is not None:
            refused.append(Refusal(path=item["path"], reason=reason))
            continue
        stored = run_dir / item["quarantine"]
        if not os.path.realpath(stored.parent).startswith(files_dir + os.sep) and item["original"] != "missing":
            refused.append(Refusal(path=item["path"], reason="its quarantined copy lies outside the run directory"))
            continue
        if item["original"] == "file":
            data = read_installed(stored)
            if not isinstance(data, bytes) or digest_of(data, "sha256") != item["original_digest"]:
                refused.append(Refusal(path=item["path"], reason="quarantined copy does not match its manifest hash"))
                continue
            mode = item.get("original_mode")
            actions.append(
                Action(
                    path=item["path"],
                    dest=dest,
                    kind="write",
                    data=data,
                    mode=0o644 if mode is None else mode,
                    digest=item["original_digest"],
                )
            )
        elif item["original"] == "symlink":
            actions.append(Action(path=item["path"], dest=dest, kind="symlink", link=item["original_link"]))
        elif item["original"] == "missing":
            actions.append(Action(path=item["path"], dest=dest, kind="remove"))
    return Plan(
        op="undo",
        dist=manifest.get("dist") or "?",
        version=manifest.get("version") or "?",
        actions=tuple(actions),
        refused=tuple(refused),
        origin=f"quarantine {run_id}",
        undo_of=run_id,
        roots=roots,
    )


def undo(env: Environment, run_id: str, *, dry_run: bool = False) -> Result:
    return execute(env, plan_undo(env, run_id), dry_run=dry_run)


def revert(
    env: Environment,
    dist: InstalledDist,
    report: DistReport,
    *,
    paths: Collection[str] = (),
    wheelhouse: Sequence[Path] = (),
    dry_run: bool = False,
    sources: Sequence[PristineSource] | None = None,
    environ: Mapping[str, str] | None = None,
    transfer: Transfer | None = None,
) -> Result:
    """plan_revert + execute."""
    plan = plan_revert(
        env, dist, report, paths=paths, wheelhouse=wheelhouse, sources=sources, environ=environ, transfer=transfer
    )
    return execute(env, plan, dry_run=dry_run)


__all__ = [
    "Action",
    "Plan",
    "Refusal",
    "Result",
    "RunInfo",
    "check_destination",
    "execute",
    "list_runs",
    "locked",
    "plan_revert",
    "plan_undo",
    "recover",
    "revert",
    "undo",
]
