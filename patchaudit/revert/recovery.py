"""Finishing or rolling back a run that a kill interrupted, from its journal; and reporting one.

A journal lies in the environment, so it is input like any other file there: before anything is
done, every journal is checked against what a run of this environment would have written (its run
directory, its destinations inside the environment's own directories, its staged names). One that
does not match is refused as a whole, with nothing changed, and left on disk for inspection.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from patchaudit.errors import LockBusy, StateRefused
from patchaudit.revert.commit import commit, mark, mark_manifest, rollback
from patchaudit.revert.fileops import locked, write_roots
from patchaudit.revert.model import MANIFEST, ActionKind, Journal, Phase, RunStatus
from patchaudit.revert.paths import check_destination, journal_dir, run_dir, run_dir_problem, staged_name
from patchaudit.revert.state import read_journal, read_manifest, write_json
from patchaudit.target.environment import Environment

RESUME_COMMAND = "patchaudit revert --resume"


def pending_runs(env: Environment) -> list[str]:
    """Run ids of interrupted runs (their journals), without reading or changing anything."""
    return env.interrupted_runs()


def recover(env: Environment, *, roots: Sequence[str] = (), lock_wait: float = 0.0) -> list[str]:
    """Finish or roll back runs a kill left in the journal; one message per run handled.

    `roots`: project directories of the environment's editable installs (computed from the
    environment by the caller). A journal whose lock is held belongs to a run that is alive: it is
    left to finish. StateRefused when a journal is not one this environment's runs write.
    """
    if not pending_runs(env):
        return []
    try:
        with locked(env, wait=lock_wait):
            return recover_locked(env, roots)
    except LockBusy:
        return ["a revert is running in this environment right now; its files may be changing"]


def journal_refusal(env: Environment, path: Path, roots: Sequence[str] = ()) -> tuple[Journal | None, str | None]:
    """(journal, None) when `path` is a journal a run of `env` wrote as it is; else (None, why not)."""
    if os.path.islink(path) or not path.is_file():
        return None, "not a regular file"
    state, problem = read_journal(path)
    if state is None:
        return None, f"unreadable ({problem})"
    run_id = state["run_id"]
    if path.name != f"{run_id}.json":
        return None, f"it names run {run_id!r}, not {path.stem!r}"
    problem = run_dir_problem(env, run_id)
    if problem is not None:
        return None, problem
    if state["run_dir"] != str(run_dir(env, run_id)):
        return None, f"its run directory {state['run_dir']} is not {run_dir(env, run_id)}"
    for entry in state["actions"]:
        dest = Path(entry["dest"])
        reason = check_destination(env, dest, roots)
        if reason is not None:
            return None, f"{entry['dest']}: {reason}"
        expected = None if entry["kind"] == ActionKind.REMOVE else str(staged_name(dest, run_id))
        if entry["staged"] != expected:
            return None, f"{entry['staged']} is not the staged name of {entry['dest']}"
    return state, None


def recover_locked(env: Environment, roots: Sequence[str] = ()) -> list[str]:
    """recover(), the lock held. Every journal is checked before any is acted on."""
    journals = []
    for path in sorted(journal_dir(env).glob("*.json")):
        state, problem = journal_refusal(env, path, roots)
        if state is None:
            raise StateRefused(
                f"refusing the interrupted-run journal {path}: {problem}; nothing was changed",
                hint="patchaudit writes only inside the environment: inspect that file, then remove it",
            )
        journals.append((path, state))
    messages = []
    for path, state in journals:
        messages.append(_recover_one(env, state, roots))
        path.unlink(missing_ok=True)
    return messages


def _recover_one(env: Environment, state: Journal, roots: Sequence[str]) -> str:
    where = run_dir(env, state["run_id"])
    op = state["op"]
    if state["phase"] != Phase.COMMIT:
        rollback(state, write_roots(env, roots))
        mark(where, RunStatus.ROLLED_BACK)
        return f"rolled back interrupted {op} {state['run_id']} (nothing had been changed)"
    manifest, _problem = read_manifest(where)
    bad, changed = commit(env, state, manifest, roots)
    if manifest is not None:
        mark_manifest(manifest, changed, bool(bad))
        with contextlib.suppress(OSError):
            write_json(where / MANIFEST, manifest)
    else:
        mark(where, RunStatus.INCOMPLETE if bad or changed else RunStatus.COMPLETE)
    message = f"finished interrupted {op} {state['run_id']}"
    if changed:
        named = [e["path"] for e in state["actions"] if e["dest"] in changed]
        message += (
            f"; left {len(changed)} file(s) that changed after it began as they are now"
            f" (the quarantine keeps the older copies): {', '.join(named[:3])}"
        )
    if bad:
        message += f"; {len(bad)} file(s) do not verify: {', '.join(bad[:3])}"
    return message


def interrupted_message(env: Environment, runs: Sequence[str]) -> str:
    """One line for a read-only command that found interrupted runs (it leaves them as they are)."""
    where = f"--python {env.python}" if env.python else f"--path {env.site_dirs[0]}"
    named = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
    return (
        f"revert run {named} was interrupted: files may be half restored; "
        f"`{RESUME_COMMAND} {where}` finishes or rolls it back"
    )
