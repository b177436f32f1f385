"""A plain model directory (a copied checkpoint) held to a manifest that `baseline create --model` wrote.

The manifest keeps every file's sha256 and size, and the text of small JSON configs and chat
templates, so a later change to a config can be shown key by key and put back. It lives in the
directory's `.patchaudit/`: whoever can rewrite the model can rewrite it too, as with any baseline
kept beside what it guards. As root over a directory that is not root's alone it lives in root's own
state directory instead (cachedir.tree_state), and a config's text is read once, without following a
link, from the bytes whose hash the manifest keeps.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import stat
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import ModelNotFound, PatchAuditError
from patchaudit.fs.atomic import atomic_write
from patchaudit.fs.beneath import private_dir, read_below
from patchaudit.fs.safefs import UnreadableFile, read_json
from patchaudit.models.configdiff import is_config
from patchaudit.models.digests import Algorithm, Digest, hash_files
from patchaudit.models.layout import HF_LOCAL, MANIFEST_NAME, STATE_DIR, LayoutScan, ModelTarget, Tracked
from patchaudit.models.localdir import walk_files
from patchaudit.parallel.statcache import StatCache
from patchaudit.report import DriftState
from patchaudit.target.cachedir import tree_state

SCHEMA = "patchaudit/model-manifest/v1"
CONFIG_LIMIT = 1 << 20  # configs up to this size are kept whole, for key diffs and revert


class InvalidManifest(PatchAuditError):
    """A model manifest that cannot be read."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest:
    files: dict[str, Digest]
    configs: dict[str, str]  # path -> text of small JSON files
    created: str = ""

    @classmethod
    def from_dict(cls, data: object, where: str) -> Manifest:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("files"), dict):
            raise InvalidManifest(f"{where}: not a {SCHEMA} manifest")
        files: dict[str, Digest] = {}
        for path, info in data["files"].items():
            digest = Digest.from_name(info.get("sha256", "")) if isinstance(info, dict) else None
            if digest is None or digest.algorithm is not Algorithm.SHA256:
                raise InvalidManifest(f"{where}: entry {path!r} has no sha256")
            files[path] = digest
        configs = data.get("configs") or {}
        if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
            raise InvalidManifest(f"{where}: 'configs' must map paths to text")
        return cls(files=files, configs=dict(configs), created=str(data.get("created") or ""))


def manifest_path(root: Path) -> Path:
    return tree_state(root, STATE_DIR) / MANIFEST_NAME


def load(root: Path) -> Manifest:
    path = manifest_path(root)
    try:
        data = read_json(path)
    except UnreadableFile as exc:
        raise ModelNotFound(f"cannot read {exc}") from None
    except ValueError as exc:
        raise InvalidManifest(f"{path}: not JSON ({exc})") from None
    return Manifest.from_dict(data, str(path))


def _skip(root: Path) -> tuple[Path, ...]:
    return (root / STATE_DIR, root / HF_LOCAL)


def create(root: Path, *, workers: int | None = None) -> tuple[Path, int]:
    """Write the manifest of every regular file below root; a symlink or special file is refused."""
    root = root.absolute()
    if not root.is_dir():
        raise ModelNotFound(f"{root} is not a directory")
    entries = list(walk_files(root, _skip(root)))
    odd = [rel for rel, _p, st in entries if not stat.S_ISREG(st.st_mode)]
    if odd:
        raise PatchAuditError(f"{root}: not regular files: {', '.join(odd[:3])}", hint="copy the files in, not links")
    hashed = hash_files([(p, Algorithm.SHA256) for _r, p, _s in entries], cache=None, workers=workers)
    files: dict[str, dict[str, object]] = {}
    configs: dict[str, str] = {}
    for rel, path, st in entries:
        digest = hashed[(path, Algorithm.SHA256)][0]
        if digest is None:
            raise PatchAuditError(f"cannot read {path}")
        files[rel] = {"sha256": digest.hex, "size": st.st_size}
        if is_config(rel) and st.st_size <= CONFIG_LIMIT:
            # bytes as they are (CRLF kept), and only the bytes that were hashed
            text = _config_text(path, digest.hex)
            if text is not None:
                configs[rel] = text
    data = {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "files": files,
        "configs": configs,
    }
    out = manifest_path(root)
    if out.parent != root / STATE_DIR:
        private_dir(out.parent)  # root's own, for a directory another user may write
    atomic_write(out, json.dumps(data, indent=1, sort_keys=True) + "\n", parents=out.parent == root / STATE_DIR)
    return out, len(files)


def _config_text(path: Path, sha256: str) -> str | None:
    """A config's text, read once without following a link, and only if it is the bytes just hashed.

    A file swapped after it was hashed (for a link to a file only root may read) is refused rather
    than read again: its text would land in the manifest.
    """
    try:
        data = read_below(path, CONFIG_LIMIT)
    except UnreadableFile as exc:
        raise PatchAuditError(f"{path} changed while it was read: {exc}", hint="run again once it is still") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise PatchAuditError(f"{path} changed while it was read", hint="run again once it is still")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def scan(target: ModelTarget, *, cache: StatCache | None, workers: int | None = None) -> LayoutScan:
    root = target.root
    held = load(root)
    on_disk = list(walk_files(root, _skip(root)))
    jobs = [(p, Algorithm.SHA256) for _r, p, st in on_disk if stat.S_ISREG(st.st_mode)]
    hashed = hash_files(jobs, cache=cache, workers=workers)
    files: list[Tracked] = []
    seen = set()
    for rel, path, st in on_disk:
        seen.add(rel)
        expected = held.files.get(rel)
        base = Tracked(path=rel, disk=path, repo_path=rel, expected=expected)
        if not stat.S_ISREG(st.st_mode):
            files.append(_with(base, state=DriftState.MODIFIED, note="not a regular file"))
            continue
        actual = hashed[(path, Algorithm.SHA256)][0]
        if expected is None:
            state: DriftState | None = DriftState.ADDED
        else:
            state = None if actual == expected else DriftState.MODIFIED
        files.append(_with(base, state=state, actual=actual, content=path))
    for rel, digest in sorted(held.files.items()):
        if rel not in seen:
            files.append(Tracked(path=rel, disk=root / rel, repo_path=rel, expected=digest, state=DriftState.MISSING))
    return LayoutScan(target=target, files=tuple(files), notes=(f"manifest of {held.created}",))


def _with(item: Tracked, **changes: object) -> Tracked:
    import dataclasses

    return dataclasses.replace(item, **changes)  # type: ignore[arg-type]
