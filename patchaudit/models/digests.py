"""Model file digests as the Hub names them: 64 hex = sha256 of the content, 40 hex = git blob sha1."""

from __future__ import annotations

import base64
import enum
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from patchaudit.parallel.hashing import GIT_SHA1, FileState, hash_many
from patchaudit.parallel.statcache import StatCache

HEX64 = re.compile(r"[0-9a-f]{64}")
HEX40 = re.compile(r"[0-9a-f]{40}")
CACHE_ENV = "PATCHAUDIT_CACHE_DIR"


class Algorithm(enum.StrEnum):
    SHA256 = "sha256"
    GIT_SHA1 = GIT_SHA1


@dataclass(frozen=True, slots=True)
class Digest:
    """What a file must hash to; written `sha256:<hex>` or `git-sha1:<hex>` in reports."""

    algorithm: Algorithm
    hex: str

    def __str__(self) -> str:
        return f"{self.algorithm.value}:{self.hex}"

    @classmethod
    def from_name(cls, name: str) -> Digest | None:
        """The digest a Hub blob or etag name implies (None for a name of neither shape)."""
        name = name.strip().strip('"').lower()
        if HEX64.fullmatch(name):
            return cls(Algorithm.SHA256, name)
        if HEX40.fullmatch(name):
            return cls(Algorithm.GIT_SHA1, name)
        return None


def to_hex(state_digest: str) -> str:
    """`algo=urlsafe-b64` (as hashing writes it) -> hex."""
    b64 = state_digest.partition("=")[2]
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()


def stat_cache_path(root: Path) -> Path:
    """The stat cache of one model directory: in the user's cache, never inside the model."""
    import hashlib

    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "patchaudit"
    )
    key = hashlib.sha256(os.fsencode(os.path.realpath(root))).hexdigest()[:20]
    return Path(base) / "models" / f"{key}.json"


def hash_files(
    jobs: Iterable[tuple[Path, Algorithm]], *, cache: StatCache | None, workers: int | None = None
) -> dict[tuple[Path, Algorithm], tuple[Digest | None, FileState]]:
    """Hash every (path, algorithm) on all cores, without following symlinks; the digest is None when
    the path is not a readable regular file."""
    wanted = {(str(p), a.value): (p, a) for p, a in jobs}
    states = hash_many(wanted.keys(), cache=cache, workers=workers)
    out: dict[tuple[Path, Algorithm], tuple[Digest | None, FileState]] = {}
    for job, (path, algorithm) in wanted.items():
        state = states[job]
        digest = Digest(algorithm, to_hex(state.digest)) if state.digest else None
        out[(path, algorithm)] = (digest, state)
    return out
