"""Where patchaudit keeps its caches for one environment: a place the running user may write and,
as root, one that no other user can.

In order: `--cache-dir DIR` (or the policy's `cache_dir`), the systemd unit's `$STATE_DIRECTORY`,
the environment's own `<prefix>/.patchaudit/cache`, and the user's cache directory
(`$XDG_CACHE_HOME` or `~/.cache`)`/patchaudit`. Outside the environment, each environment has a
subdirectory of its own (named by its prefix), so two environments never share entries. The
first place this user may write is taken; as root, the environment's own directory is skipped when
another user could write it (a planted verdict or stat cache would make the gate pass a patched
file). When no place is writable the run is uncached, and `Location.note` says so.

The choice itself is cacheplace.py, which the warm gate imports alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from patchaudit.target.cacheplace import NAME, env_key, place, sha256_hex, state_directory, user_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, kw_only=True, slots=True)
class Location:
    """The cache directory for one environment (None: run uncached, and `note` says why)."""

    path: Path | None
    note: str | None = None


def locate(prefix: Path, explicit: Path | None = None, environ: Mapping[str, str] | None = None) -> Location:
    """The cache directory for the environment at `prefix`; nothing is created here."""
    path, note = place(prefix, explicit, environ)
    return Location(path=path, note=note)


def ensure(path: Path) -> bool:
    """Create the cache directory (private to this user); False when it cannot be."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return False
    return os.path.isdir(path)


# --- root's own state for a tree it does not own ---

STATE_HOME_VAR = "PATCHAUDIT_STATE_HOME"
STATE_HOME = "/var/lib/patchaudit"
_TREES = "trees"
_tree_state_memo: dict[str, Path | None] = {}


def state_home(environ: Mapping[str, str] | None = None) -> Path:
    """Root's own state directory (`$PATCHAUDIT_STATE_HOME`, else /var/lib/patchaudit)."""
    environ = os.environ if environ is None else environ
    value = environ.get(STATE_HOME_VAR, "")
    return Path(value) if os.path.isabs(value) else Path(STATE_HOME)


def outside_state(tree: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where patchaudit keeps its state (quarantine, journal, lock, downloads) for a tree it reads as `/`
    (`--root`): never inside the tree. `$PATCHAUDIT_STATE_HOME`, else root's /var/lib/patchaudit, else
    the user's `$XDG_STATE_HOME` (or ~/.local/state)`/patchaudit`; one directory per tree, keyed by the
    path as given (a container's /proc/PID/root is not resolved to the host's `/`)."""
    import hashlib

    from patchaudit.target import trust

    environ = os.environ if environ is None else environ
    if os.path.isabs(environ.get(STATE_HOME_VAR, "")) or trust.running_as_root():
        home = state_home(environ)
    else:
        base = environ.get("XDG_STATE_HOME", "")
        if not os.path.isabs(base):
            base = os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".local", "state")
        home = Path(base) / NAME
    digest = hashlib.sha256(str(tree).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in tree.name)[:40].lstrip(".")
    return home / _TREES / f"{name or 'root'}-{digest}"


def tree_state(tree: Path, name: str = ".patchaudit") -> Path:
    """Where patchaudit keeps its state (cache, partial downloads, quarantine, journal, manifests) for
    `tree`: `tree/<name>`, or, as root over a tree that is not root's alone, a directory keyed by the
    tree inside root's own state home, so that nothing is ever written into a tree another user controls.
    """
    own = tree / name
    key = str(own)
    if key not in _tree_state_memo:
        from patchaudit.target import trust

        place: Path | None = own
        if trust.running_as_root() and trust.foreign_writer([own]) is not None:
            place = state_home() / _TREES / env_key(tree)
        _tree_state_memo[key] = place
    found = _tree_state_memo[key]
    assert found is not None
    return found


__all__ = [
    "NAME",
    "Location",
    "ensure",
    "env_key",
    "locate",
    "outside_state",
    "sha256_hex",
    "state_directory",
    "state_home",
    "tree_state",
    "user_cache",
]
