"""Pristine source 2: the archive direct_url.json names, when it still exists and its hash matches."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from patchaudit.parallel.hashing import hash_file
from patchaudit.parallel.statcache import StatCache
from patchaudit.pristine.http import local_path
from patchaudit.pristine.interface import PristineWheel
from patchaudit.pristine.zipwheel import open_local, wheel_matches
from patchaudit.target.environment import InstalledDist
from patchaudit.target.record import encode_digest


def archive_hash(info: dict[str, object]) -> tuple[str, str] | None:
    """(algorithm, hex) that direct_url.json publishes for its archive (PEP 610 `hashes` or legacy `hash`)."""
    archive = info.get("archive_info")
    if not isinstance(archive, dict):
        return None
    hashes = archive.get("hashes")
    if isinstance(hashes, dict):
        for algorithm in ("sha256", "sha384", "sha512"):
            value = hashes.get(algorithm)
            if isinstance(value, str):
                return algorithm, value.lower()
    legacy = archive.get("hash")
    if isinstance(legacy, str) and "=" in legacy:
        algorithm, _, value = legacy.partition("=")
        if algorithm in ("sha256", "sha384", "sha512"):
            return algorithm, value.lower()
    return None


def installed_sha256(dist: InstalledDist) -> str | None:
    """The sha256 (hex) pip recorded, in direct_url.json, of the very archive it installed; else None.

    Only this proves a wheel *is* the installed build: an index's published hash proves only that a
    file is what the index publishes, and an index may publish another build under the same name.
    """
    info = dist.direct_url
    if info is None:
        return None
    published = archive_hash(info)
    if published is None or published[0] != "sha256":
        return None
    return published[1]


class DirectUrlArchive:
    """A local wheel named by `file://` in direct_url.json, accepted only when its published hash matches.

    Remote archive URLs are left to the index source: downloading a whole archive to check its hash
    would cost more than the index's range requests. With a stat cache, a verified archive is not
    hashed again until its size, times, inode or device change (a 336 MB wheel is 0.3 s of hashing).
    """

    name = "direct_url"

    def __init__(self, cache: StatCache | None = None) -> None:
        self.cache = cache

    def find(self, dist: InstalledDist, needed: Collection[str] = ()) -> PristineWheel | None:
        info = dist.direct_url
        if info is None or not isinstance(info.get("url"), str):
            return None
        url = str(info["url"])
        filename = unquote(PurePosixPath(urlsplit(url).path).name)
        path = local_path(url)
        published = archive_hash(info)
        if path is None or published is None or not path.is_file() or not wheel_matches(filename, dist):
            return None
        algorithm, hex_digest = published
        try:
            expected = f"{algorithm}={encode_digest(bytes.fromhex(hex_digest))}"
        except ValueError:
            return None
        # hash_file never follows a symlink; the archive may be one (a wheelhouse of links), as before
        if hash_file(os.path.realpath(path), algorithm, self.cache).digest != expected:
            return None
        return open_local(path, "direct_url.json archive", authentic=True)
