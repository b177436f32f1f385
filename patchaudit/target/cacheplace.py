"""Where the caches of one environment go (cachedir.py says how it is chosen), without a dataclass: the warm
gate finds its verdict cache through this module alone."""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

NAME = "patchaudit"


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


def place(
    prefix: Path, explicit: Path | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Path | None, str | None]:
    """The cache directory for the environment at `prefix` (None, and why not), as cachedir.locate gives it;
    nothing is created here."""
    environ = os.environ if environ is None else environ
    key = env_key(prefix)
    tried: list[str] = []
    if explicit is not None:
        here = explicit.absolute() / key
        if _may_write(here):
            return here, None
        tried.append(f"--cache-dir {explicit}")
    state = state_directory(environ)
    if state is not None:
        if _may_write(state / key):
            return state / key, None
        tried.append(f"$STATE_DIRECTORY {state}")
    own = prefix / ".patchaudit" / "cache"
    foreign = _foreign_writer(own)
    if foreign is None and _may_write(own):
        return own, None
    tried.append(f"{own} ({foreign})" if foreign else str(own))
    user = user_cache(environ)
    if user is not None:
        if _may_write(user / key):
            return user / key, None
        tried.append(str(user))
    uid = os.geteuid() if hasattr(os, "geteuid") else -1
    return None, f"no cache directory that uid {uid} may write (tried {'; '.join(tried)})"
