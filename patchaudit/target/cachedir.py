"""Where patchaudit keeps its caches for one environment: a place the running user may write and,
as root, one that no other user can.

In order: `--cache-dir DIR` (or the policy's `cache_dir`), the systemd unit's `$STATE_DIRECTORY`,
the environment's own `<prefix>/.patchaudit/cache`, and the user's cache directory
(`$XDG_CACHE_HOME` or `~/.cache`)`/patchaudit`. Outside the environment, each environment has a
subdirectory of its own (named by its prefix), so two environments never share entries. The
first place this user may write is taken; as root, the environment's own directory is skipped when
another user could write it (a planted verdict or stat cache would make the gate pass a patched
file). When no place is writable the run is uncached, and `Location.note` says so.

Kept light: the warm gate calls this before anything else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

NAME = "patchaudit"


@dataclass(frozen=True, kw_only=True, slots=True)
class Location:
    """The cache directory for one environment (None: run uncached, and `note` says why)."""

    path: Path | None
    note: str | None = None


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data` in hex, from CPython's own module where there is one: hashlib loads
    OpenSSL first, a tenth of the warm gate's imports, for the two short names the gate digests."""
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12 and later
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


def env_key(prefix: Path) -> str:
    """A directory name for one environment: its prefix's name and a digest of its real path."""
    real = os.path.realpath(prefix)
    digest = sha256_hex(real.encode("utf-8", "surrogateescape"))[:16]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in os.path.basename(real))[:40].lstrip(".")
    return f"{name or 'root'}-{digest}"


def state_directory(environ: Mapping[str, str]) -> Path | None:
    """systemd's `$STATE_DIRECTORY` (several paths, colon-separated, when the unit names several).

    The first path below a `patchaudit` directory (`patchaudit systemd install` adds
    `StateDirectory=patchaudit/<unit>`), else `<first>/patchaudit`.
    """
    value = environ.get("STATE_DIRECTORY", "")
    paths = [Path(p) for p in value.split(":") if os.path.isabs(p)]
    if not paths:
        return None
    for path in paths:
        if NAME in path.parts:
            return path
    return paths[0] / NAME


def user_cache(environ: Mapping[str, str]) -> Path | None:
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = environ.get("HOME") or os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / NAME


def locate(prefix: Path, explicit: Path | None = None, environ: Mapping[str, str] | None = None) -> Location:
    """The cache directory for the environment at `prefix`; nothing is created here."""
    environ = os.environ if environ is None else environ
    key = env_key(prefix)
    tried: list[str] = []
    if explicit is not None:
        here = explicit.absolute() / key
        if _may_write(here):
            return Location(path=here)
        tried.append(f"--cache-dir {explicit}")
    state = state_directory(environ)
    if state is not None:
        if _may_write(state / key):
            return Location(path=state / key)
        tried.append(f"$STATE_DIRECTORY {state}")
    own = prefix / ".patchaudit" / "cache"
    foreign = _foreign_writer(own)
    if foreign is None and _may_write(own):
        return Location(path=own)
    tried.append(f"{own} ({foreign})" if foreign else str(own))
    user = user_cache(environ)
    if user is not None:
        if _may_write(user / key):
            return Location(path=user / key)
        tried.append(str(user))
    uid = os.geteuid() if hasattr(os, "geteuid") else -1
    return Location(path=None, note=f"no cache directory that uid {uid} may write (tried {'; '.join(tried)})")


def _foreign_writer(own: Path) -> str | None:
    """As root: why another user could write the environment's own cache directory (None: nobody can)."""
    from patchaudit.target import trust

    if not trust.running_as_root():
        return None
    reason = trust.foreign_writer([own])
    return f"not root-only: {reason}" if reason is not None else None


def _may_write(path: Path) -> bool:
    """Whether this user may write `path`, or create it below its nearest existing directory."""
    current = str(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            return False
        current = parent
    return os.path.isdir(current) and os.access(current, os.W_OK | os.X_OK)


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
