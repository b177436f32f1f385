"""Which kind of model directory a path or repo id names, and where it lies; nothing is hashed here."""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import ModelNotFound

# The gate resolves its models on the warm path: only what resolving needs is imported here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from patchaudit.models.digests import Digest
    from patchaudit.report import DriftState

STATE_DIR = ".patchaudit"
MANIFEST_NAME = "model-manifest.json"
HF_LOCAL = Path(".cache") / "huggingface"
REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_REPO_ID = re.compile(r"^[\w.\-]+(/[\w.\-]+)?$")
_COMMIT = re.compile(r"[0-9a-f]{40}")
# a git ref name as the Hub allows it (`main`, `v1.0`, `refs/pr/1`) or a commit: no `..`, no empty part
_REVISION = re.compile(r"(?!.*\.\.)(?!/)(?!.*//)[\w.\-/]{1,255}(?<!/)")


class ModelKind(enum.StrEnum):
    HUB_CACHE = "hub-cache"  # models--org--name/{blobs,snapshots,refs}
    LOCAL_DIR = "local-dir"  # `hf download --local-dir`: .cache/huggingface/download/*.metadata
    MANIFEST = "manifest"  # a plain directory held to `baseline create --model`


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelTarget:
    kind: ModelKind
    root: Path  # the repo folder (hub cache) or the directory itself
    name: str  # repo id when known, else the directory name
    revision: str | None = None  # as asked: a ref, a commit or a commit prefix
    repo_id: str | None = None

    @property
    def state_dir(self) -> Path:
        return self.state_at(self.root)

    @staticmethod
    def state_at(root: Path) -> Path:
        """patchaudit's state for a model directory (root's own one for a tree another user may write)."""
        from patchaudit.target.cachedir import tree_state

        return tree_state(root, STATE_DIR)


@dataclass(frozen=True, kw_only=True, slots=True)
class Tracked:
    """One file of a model directory and its verdict (state None: clean)."""

    path: str  # as reported, relative to the root
    disk: Path  # the entry itself (a snapshot link, or the file)
    repo_path: str  # the file's path in the repository (config.json)
    expected: Digest | None = None
    actual: Digest | None = None
    state: DriftState | None = None
    note: str | None = None
    content: Path | None = None  # a regular file holding its current bytes (the blob for a link)
    commit: str | None = None
    blob: Path | None = None  # hub cache: the blob the entry should be


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """Drift that is not one file's: a ref without a snapshot, a blob no snapshot uses."""

    path: str
    state: DriftState
    note: str
    expected: Digest | None = None
    actual: Digest | None = None
    commit: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LayoutScan:
    target: ModelTarget
    files: tuple[Tracked, ...]
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()


def hub_cache_dir() -> Path:
    """Where the Hub client keeps its cache: HF_HUB_CACHE, HF_HOME/hub, then the XDG default."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def repo_folder(repo_id: str, repo_type: str = "model") -> str:
    return f"{repo_type}s--" + repo_id.replace("/", "--")


def repo_id_of(folder: Path) -> str | None:
    kind, sep, rest = folder.name.partition("--")
    if not sep or kind not in REPO_TYPES:
        return None
    return rest.replace("--", "/", 1)


def resolve(spec: str, *, revision: str | None = None, cache_dir: Path | None = None) -> ModelTarget:
    """A path (hub repo folder, snapshot, local dir, manifest dir) or a repo id looked up in the hub cache."""
    if revision is not None and not _REVISION.fullmatch(revision):
        raise ModelNotFound(f"{revision[:80]!r} is not a revision (a branch, tag or commit)")
    path = Path(spec).expanduser()
    if path.is_dir():
        return _from_path(path.absolute(), revision)
    if os.path.lexists(path):
        raise ModelNotFound(f"{spec} is not a directory")
    if not _REPO_ID.match(spec) or spec.startswith("."):
        raise ModelNotFound(f"{spec}: no such directory, and not a repo id")
    cache = cache_dir if cache_dir is not None else hub_cache_dir()
    folder = cache / repo_folder(spec)
    if not (folder / "snapshots").is_dir():
        raise ModelNotFound(
            f"{spec} is not in the hub cache {cache}", hint="pass the model directory, or set HF_HOME / HF_HUB_CACHE"
        )
    return ModelTarget(kind=ModelKind.HUB_CACHE, root=folder.absolute(), name=spec, revision=revision, repo_id=spec)


def _from_path(path: Path, revision: str | None) -> ModelTarget:
    # a snapshot directory: models--org--name/snapshots/<commit>
    if path.parent.name == "snapshots" and repo_id_of(path.parent.parent) is not None:
        if revision is not None and revision != path.name:
            raise ModelNotFound(f"{path} is snapshot {path.name}, not revision {revision}")
        revision, path = path.name, path.parent.parent
    repo_id = repo_id_of(path)
    if repo_id is not None and (path / "snapshots").is_dir():
        return ModelTarget(kind=ModelKind.HUB_CACHE, root=path, name=repo_id, revision=revision, repo_id=repo_id)
    if (path / HF_LOCAL / "download").is_dir():
        return ModelTarget(kind=ModelKind.LOCAL_DIR, root=path, name=path.name, revision=revision)
    if (ModelTarget.state_at(path) / MANIFEST_NAME).is_file():
        return ModelTarget(kind=ModelKind.MANIFEST, root=path, name=path.name, revision=revision)
    if any(repo_id_of(p) for p in _subdirs(path)):
        raise ModelNotFound(f"{path} is a hub cache: name one repo in it", hint="pass ORG/NAME or a models--* folder")
    raise ModelNotFound(
        f"{path} has no hub cache layout, no `hf download` metadata and no manifest",
        hint=f"record one with `patchaudit baseline create --model {path}`",
    )


def _subdirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except OSError:
        return []


def is_commit(value: str) -> bool:
    return _COMMIT.fullmatch(value) is not None
