"""Put drifted files back, keeping every replaced byte in a quarantine run; journaled, locked, undoable.

plan.py decides what changes, transaction.py carries it out (quarantine, stage, commit), recovery.py
finishes or rolls back a run a kill interrupted, quarantine.py lists and undoes runs,
whole.py joins the plans of every drifted distribution and the unowned startup hooks into one; paths.py says
where a run may write, fileops.py does the file-level work, model.py and state.py hold the values and
their on-disk shapes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from patchaudit.pristine import Transfer
from patchaudit.pristine.interface import PristineSource
from patchaudit.report import DistReport
from patchaudit.revert.fileops import locked
from patchaudit.revert.model import Action, ActionKind, Op, Plan, Refusal, Result, RunInfo, RunStatus
from patchaudit.revert.paths import check_destination
from patchaudit.revert.plan import plan_revert, plan_tree
from patchaudit.revert.quarantine import list_runs, plan_undo, undo
from patchaudit.revert.recovery import RESUME_COMMAND, interrupted_message, pending_runs, recover
from patchaudit.revert.transaction import execute
from patchaudit.revert.whole import LeftAlone, Unavailable, WholePlan, plan_environment
from patchaudit.target.environment import Environment, InstalledDist


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
    "RESUME_COMMAND",
    "Action",
    "LeftAlone",
    "ActionKind",
    "Op",
    "Plan",
    "Refusal",
    "Result",
    "RunInfo",
    "RunStatus",
    "Unavailable",
    "WholePlan",
    "check_destination",
    "execute",
    "interrupted_message",
    "list_runs",
    "locked",
    "pending_runs",
    "plan_environment",
    "plan_revert",
    "plan_tree",
    "plan_undo",
    "recover",
    "revert",
    "undo",
]
