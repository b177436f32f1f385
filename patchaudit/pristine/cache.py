"""Pristine source 3: patchaudit's own cache of what it fetched, and pip's cache.

Own cache, under `<env>/.patchaudit/cache/`:
  wheels/<filename>                     whole wheels whose sha256 matched their index
  partial/<filename>/RECORD             a wheel's RECORD fetched by range requests
  partial/<filename>/blobs/<sha256hex>  members fetched by range requests, named by their content hash
  partial/<filename>/modes.json         member -> file mode
pip's cache: `wheels/**/*.whl` (wheels pip built locally) and `http-v2/` bodies. pip's http-v2 cache
stores each response body raw in `<a>/<b>/<c>/<d>/<e>/<sha224(url)>.body`, so a body is found from the
wheel's URL only; the index source asks for it once it knows the URL. pip's older `http/` cache keeps
bodies inside serialized responses and is not read.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.parse
from collections.abc import Collection, Iterator
from pathlib import Path

from patchaudit.errors import PristineNotFound, UnsafePath
from patchaudit.fs.atomic import atomic_write
from patchaudit.fs.beneath import private_dir
from patchaudit.pristine.direct_url import installed_sha256
from patchaudit.pristine.http import sha256_file
from patchaudit.pristine.interface import PristineWheel
from patchaudit.pristine.zipwheel import MEMBER_CAP, open_local, unsafe_member, wheel_match, wheel_matches
from patchaudit.target.environment import Environment, InstalledDist
from patchaudit.target.record import Record, parse_record


class CachedWheel:
    """A wheel known from its RECORD and the members fetched so far."""

    def __init__(self, directory: Path, filename: str) -> None:
        self.directory = directory
        self._filename = filename
        self._record = parse_record((directory / "RECORD").read_bytes())
        try:
            self._modes: dict[str, int] = json.loads((directory / "modes.json").read_text())
        except (OSError, ValueError):
            self._modes = {}
        self._hashes = {
            e.path: e.hash.value for e in self._record.entries if e.hash is not None and e.hash.algorithm == "sha256"
        }
        for name in self._hashes:
            if unsafe_member(name):
                raise UnsafePath(f"cached RECORD of {filename} names {name!r}")

    @property
    def filename(self) -> str:
        return self._filename

    @property
    def origin(self) -> str:
        return f"patchaudit cache {self.directory}"

    @property
    def authentic(self) -> bool:
        return False

    def record(self) -> Record:
        return self._record

    def _blob(self, member: str) -> Path | None:
        value = self._hashes.get(member)
        if value is None:
            return None
        import base64

        hexdigest = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
        return self.directory / "blobs" / hexdigest

    def has(self, member: str) -> bool:
        blob = self._blob(member)
        return blob is not None and blob.is_file()

    def read(self, member: str, *, limit: int) -> bytes:
        blob = self._blob(member)
        if blob is None:
            raise PristineNotFound(f"{self.origin}: no member {member}")
        try:
            with open(blob, "rb") as fh:
                data = fh.read(min(limit, MEMBER_CAP) + 1)
        except OSError:
            raise PristineNotFound(f"{self.origin}: member {member} not cached") from None
        return data

    def mode(self, member: str) -> int:
        return self._modes.get(member, 0o644)

    def close(self) -> None:
        pass


class OwnCache:
    """patchaudit's cache inside the target environment's state directory."""

    name = "patchaudit-cache"

    def __init__(self, root: Path) -> None:
        self.root = root
        self._writable: bool | None = None

    def writable(self) -> bool:
        """Make the cache directory (0700, this user's alone); False when it cannot be, then nothing is kept."""
        if self._writable is None:
            try:
                private_dir(self.root)
                self._writable = True
            except (OSError, UnsafePath):
                self._writable = False
        return self._writable

    @classmethod
    def of(cls, env: Environment) -> OwnCache:
        return cls(env.state_dir / "cache")

    def find(self, dist: InstalledDist, needed: Collection[str] = ()) -> PristineWheel | None:
        wheels = self.root / "wheels"
        for directory, opener in ((wheels, "whole"), (self.root / "partial", "partial")):
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                continue
            for name in names:
                if not name.endswith(".whl") or not wheel_matches(name, dist):
                    continue
                if opener == "whole":
                    # kept because its index published its hash; authentic only if it is the installed file
                    installed = installed_sha256(dist)
                    try:
                        authentic = installed is not None and sha256_file(directory / name) == installed
                    except OSError:
                        continue
                    return open_local(directory / name, "patchaudit cache", authentic=authentic)
                try:
                    return CachedWheel(directory / name, name)
                except OSError:
                    continue
        return None

    def recorder(self, filename: str, record_name: str):  # type: ignore[no-untyped-def]
        """A callback for ZipWheel(on_read=...) that keeps the RECORD and every member read."""
        directory = self.root / "partial" / filename

        def on_read(member: str, data: bytes, mode: int) -> None:
            if "/" in filename or filename.startswith(".") or not self.writable():
                return  # a file name from an index is input: it names one entry, or nothing is kept
            try:
                if member == record_name:
                    atomic_write(directory / "RECORD", data, durable=False)
                    return
                atomic_write(directory / "blobs" / hashlib.sha256(data).hexdigest(), data, durable=False)
                modes_path = directory / "modes.json"
                try:
                    modes = json.loads(modes_path.read_text())
                except (OSError, ValueError):
                    modes = {}
                if modes.get(member) != mode:
                    modes[member] = mode
                    atomic_write(modes_path, json.dumps(modes, sort_keys=True).encode(), durable=False)
            except OSError:
                pass  # a cache that cannot be written is simply not kept

        return on_read


def pip_cache_dir(environ: dict[str, str] | os._Environ[str] = os.environ, configured: str | None = None) -> Path:
    if environ.get("PIP_CACHE_DIR"):
        return Path(environ["PIP_CACHE_DIR"]).expanduser()
    if configured:
        return Path(configured).expanduser()
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pip"


def normalize_url(url: str) -> str:
    """The key cachecontrol (inside pip) files a response under: lower-cased scheme/host, no fragment."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path or "/"
    request_uri = path + ("?" + parts.query if parts.query else "")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{request_uri}"


class PipCache:
    """Wheels pip kept: locally built wheels, and downloaded wheel bodies in its http-v2 cache."""

    name = "pip-cache"

    def __init__(self, root: Path) -> None:
        self.root = root

    def all_wheels(self, dist: InstalledDist, needed: Collection[str] = ()) -> Iterator[PristineWheel]:
        """Every wheel pip built of this name, version and build; exact tags first."""
        built = self.root / "wheels"
        if not built.is_dir():
            return
        found: list[tuple[int, str, str]] = []
        for dirpath, _dirs, files in os.walk(built):
            for name in files:
                if name.endswith(".whl") and (score := wheel_match(name, dist)) > 0:
                    found.append((-score, name, dirpath))
        for _, name, dirpath in sorted(found):
            yield open_local(Path(dirpath) / name, "pip wheel cache")

    def find(self, dist: InstalledDist, needed: Collection[str] = ()) -> PristineWheel | None:
        return next(iter(self.all_wheels(dist, needed)), None)

    def body_for(self, url: str) -> Path | None:
        hashed = hashlib.sha224(normalize_url(url).encode()).hexdigest()
        path = self.root / "http-v2" / Path(*hashed[:5]) / f"{hashed}.body"
        return path if path.is_file() else None
