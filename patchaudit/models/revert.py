"""Put a model directory back, through revert's quarantine, journal and undo.

Hub cache: a snapshot link replaced by a file (or pointed elsewhere) becomes the link to its blob again
when the blob is intact; a blob whose bytes changed is rewritten from identical bytes found offline
(another repo's blob of the same name, a `--source` tree). Local dirs and manifest'd directories get
their files back from the same sources. What cannot be restored offline is refused with the exact
`hf download` command that restores it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from patchaudit import revert
from patchaudit.models.digests import Algorithm
from patchaudit.models.layout import ModelKind, ModelTarget, Tracked, hub_cache_dir
from patchaudit.models.pristine import digest_of
from patchaudit.models.scan import ModelScan
from patchaudit.report import DriftState
from patchaudit.revert.model import ActionKind, Op
from patchaudit.target.environment import Environment
from patchaudit.target.record import encode_digest

BLOB_MODE = 0o644


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelPlan:
    plan: revert.Plan
    commands: tuple[str, ...]  # what to run to restore what no offline source holds


def environment(target: ModelTarget) -> Environment:
    """The model directory as revert sees an environment: it may write only below the root, and keeps its
    quarantine and journal in `<root>/.patchaudit/` (`patchaudit quarantine list --path ROOT`)."""
    return Environment(python=None, prefix=target.root, site_dirs=(target.root,), scheme={})


def selected(item: Tracked, paths: Collection[str]) -> bool:
    if not paths:
        return True
    return any(p in (item.path, item.repo_path) or item.path.endswith("/" + p.lstrip("/")) for p in paths)


def hf_command(target: ModelTarget, item: Tracked) -> str:
    repo = target.repo_id or "REPO_ID"
    args = ["hf", "download", repo, item.repo_path]
    if item.commit:
        args += ["--revision", item.commit]
    if target.kind is ModelKind.HUB_CACHE:
        cache = target.root.parent
        if os.path.realpath(cache) != os.path.realpath(hub_cache_dir()):
            args += ["--cache-dir", str(cache)]
    else:
        args += ["--local-dir", str(target.root)]
    # the client trusts a file that is already there: without this it keeps the edited bytes
    args.append("--force-download")
    return shlex.join(args)


def plan(scan: ModelScan, paths: Collection[str] = ()) -> ModelPlan:
    target = scan.layout.target
    actions: list[revert.Action] = []
    refused: list[revert.Refusal] = []
    commands: list[str] = []
    written: set[Path] = set()
    matched: set[str] = set()

    def write(path: str, dest: Path, data: bytes, mode: int) -> None:
        if dest not in written:
            written.add(dest)
            digest = "sha256=" + encode_digest(bytes.fromhex(digest_of(data, Algorithm.SHA256).hex))
            actions.append(
                revert.Action(path=path, dest=dest, kind=ActionKind.WRITE, data=data, mode=mode, digest=digest)
            )

    def cannot(item: Tracked, why: str) -> None:
        command = hf_command(target, item)
        refused.append(revert.Refusal(path=item.path, reason=f"{why}; run: {command}"))
        commands.append(command)

    for item in scan.layout.files:
        if item.state is None or not selected(item, paths):
            continue
        matched.update(p for p in paths if selected(item, [p]))
        if item.state is DriftState.ADDED:
            actions.append(revert.Action(path=item.path, dest=item.disk, kind=ActionKind.REMOVE))
            continue
        if os.path.isdir(item.disk) and not os.path.islink(item.disk):
            refused.append(revert.Refusal(path=item.path, reason="a directory stands where a file belongs"))
            continue
        if item.expected is None:
            cannot(item, "no record of what this file should be")
            continue
        if target.kind is not ModelKind.HUB_CACHE:
            found = scan.sources.find(item.expected, path=item.repo_path)
            if found is None:
                why = "no pristine copy at hand offline"
                unused = scan.sources.why_not(item.expected, item.repo_path)
                why += f" ({unused})" if unused else ""
                if target.kind is ModelKind.MANIFEST:
                    refused.append(revert.Refusal(path=item.path, reason=why))
                else:
                    cannot(item, why)
                continue
            mode = _mode(item.disk)
            write(item.path, item.disk, found[0], mode)
            continue
        blob = target.root / "blobs" / item.expected.hex
        link = os.path.relpath(blob, item.disk.parent)
        is_link_ok = os.path.islink(item.disk) and os.readlink(item.disk) == link
        if scan.sources.blob_intact(item.expected) is None:
            found = scan.sources.find(item.expected, path=item.repo_path)
            if found is None:
                unused = scan.sources.why_not(item.expected, item.repo_path)
                cannot(item, f"blobs/{item.expected.hex} is {'gone' if not os.path.lexists(blob) else 'changed'} "
                       "and no identical copy is at hand offline" + (f" ({unused})" if unused else ""))  # fmt: skip
                continue
            write(f"blobs/{item.expected.hex}", blob, found[0], BLOB_MODE)
        if not is_link_ok:
            actions.append(revert.Action(path=item.path, dest=item.disk, kind=ActionKind.SYMLINK, link=link))
    for problem in scan.layout.problems:
        if not paths or problem.path in paths:
            command = shlex.join(["hf", "download", target.repo_id or "REPO_ID", "--revision", problem.commit or "?"])
            refused.append(revert.Refusal(path=problem.path, reason=f"{problem.note}; run: {command}"))
            commands.append(command)
            matched.update(p for p in paths if p == problem.path)
    refused += [revert.Refusal(path=p, reason="not drifted") for p in paths if p not in matched]
    version = ",".join(c[:12] for c in scan.layout.commits) or "-"
    return ModelPlan(
        plan=revert.Plan(
            op=Op.REVERT,
            dist=f"model:{target.name}",
            version=version,
            actions=tuple(actions),
            refused=tuple(refused),
            origin="offline sources",
        ),
        commands=tuple(dict.fromkeys(commands)),
    )


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode & 0o777 if os.path.isfile(path) and not os.path.islink(path) else BLOB_MODE
    except OSError:
        return BLOB_MODE


def execute(target: ModelTarget, made: ModelPlan, *, dry_run: bool = False) -> revert.Result:
    return revert.execute(environment(target), made.plan, dry_run=dry_run)


def recover(target: ModelTarget) -> list[str]:
    """Finish or roll back a model revert a kill interrupted (as `revert` does for environments)."""
    return revert.recover(environment(target))
