"""What a revert would do to one distribution: from its git checkout (editable installs), else from a pristine
wheel. Shared by `revert DIST` and `revert --all`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from patchaudit.report import DistReport
    from patchaudit.revert import Plan
    from patchaudit.target.environment import Environment, InstalledDist


def plan_one(
    env: Environment,
    every: Sequence[InstalledDist],
    target: InstalledDist,
    report: DistReport | None,
    *,
    paths: Sequence[str] = (),
    wheelhouse: Sequence[Path] = (),
) -> Plan:
    """The plan for one distribution: from its git checkout (editable installs), else from a pristine wheel."""
    from patchaudit import revert as core
    from patchaudit.check import vcs
    from patchaudit.check.verify import verify

    tree = vcs.working_tree_restore(target, paths)
    if tree is not None:
        return core.plan_tree(target, tree.files, origin=f"git commit {tree.commit}", root=tree.project)
    if report is None:
        (report,) = verify(env, [target], every=every).distributions
    return core.plan_revert(env, target, report, paths=paths, wheelhouse=wheelhouse)
