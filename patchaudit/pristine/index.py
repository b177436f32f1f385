"""Pristine source 4: the package index the target env's pip is configured for, read by range requests."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import shutil
import urllib.parse
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from typing import IO, cast

from packaging.utils import canonicalize_name

from patchaudit.errors import PristineNotFound
from patchaudit.fs.atomic import atomic_write
from patchaudit.pristine.cache import OwnCache, PipCache, pip_cache_dir
from patchaudit.pristine.direct_url import installed_sha256
from patchaudit.pristine.http import RangeFile, Transfer, fetch, local_path, sha256_file, sha256_of
from patchaudit.pristine.interface import PristineWheel
from patchaudit.pristine.origins import redact
from patchaudit.pristine.zipwheel import ZipWheel, open_local, wheel_match
from patchaudit.target.environment import Environment, InstalledDist

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexConfig:
    """What pip would use: index-url, extra-index-url, find-links, no-index, cache-dir."""

    index_url: str = ""  # empty: pip's built-in default, read from pip itself (default_index_url)
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    cache_dir: str | None = None
    no_cache: bool = False

    def urls(self) -> tuple[str, ...]:
        return () if self.no_index else tuple(u for u in (self.index_url, *self.extra_index_urls) if u)


def config_files(env: Environment, environ: Mapping[str, str]) -> list[Path]:
    """pip's configuration files in the order pip loads them (later ones win)."""
    config_file = environ.get("PIP_CONFIG_FILE")
    if config_file == os.devnull:
        return []
    files: list[Path] = []
    xdg_dirs = environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    files += [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs) if d]
    files.append(Path("/etc/pip.conf"))
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    files.append(home / ".pip" / "pip.conf")
    files.append(Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf")
    files.append(env.prefix / "pip.conf")
    if config_file:
        files.append(Path(config_file))
    return files


_PIP_DEFAULT = re.compile(r"""^PyPI = PackageIndex\(\s*["']([^"']+)["']""", re.MULTILINE)


def default_index_url(env: Environment) -> str:
    """The index pip uses when none is configured, as the target's pip (else our own) defines it.

    Read from pip's source rather than written here, so it follows pip; empty when no pip is found.
    """
    candidates = [site / "pip" / "_internal" / "models" / "index.py" for site in env.site_dirs]
    spec = importlib.util.find_spec("pip")
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / "_internal" / "models" / "index.py")
    for candidate in candidates:
        try:
            match = _PIP_DEFAULT.search(candidate.read_text(encoding="utf-8"))
        except OSError:
            continue
        if match:
            return match.group(1).rstrip("/") + "/simple"
    return ""


def pip_config(env: Environment, environ: Mapping[str, str] | None = None) -> IndexConfig:
    """Read the target env's pip configuration: files, then PIP_* variables, as pip does."""
    environ = os.environ if environ is None else environ
    values: dict[str, str] = {}
    for path in config_files(env, environ):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError, OSError):
            continue
        for section in ("global", "download", "install"):
            if parser.has_section(section):
                values.update({k.replace("_", "-"): v for k, v in parser.items(section)})
    for key in ("index-url", "extra-index-url", "find-links", "no-index", "cache-dir", "no-cache-dir"):
        env_key = "PIP_" + key.upper().replace("-", "_")
        if env_key in environ:
            values[key] = environ[env_key]
    return IndexConfig(
        index_url=values.get("index-url", "").strip() or default_index_url(env),
        extra_index_urls=tuple(values.get("extra-index-url", "").split()),
        find_links=tuple(values.get("find-links", "").split()),
        no_index=values.get("no-index", "").strip().lower() in _TRUE,
        cache_dir=values.get("cache-dir") or None,
        no_cache=values.get("no-cache-dir", "").strip().lower() in _TRUE,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def parse_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """Files listed by a PEP 691 JSON or PEP 503 HTML project page."""
    files: list[IndexFile] = []
    if "json" in content_type:
        data = json.loads(body)
        for item in data.get("files", []):
            if not isinstance(item, dict) or not isinstance(item.get("url"), str):
                continue
            url = urllib.parse.urljoin(page_url, item["url"])
            hashes = item.get("hashes")
            if not isinstance(hashes, dict):
                hashes = {}
            name = item.get("filename") or PurePosixPath(urllib.parse.urlsplit(url).path).name
            files.append(IndexFile(filename=str(name), url=url.split("#", 1)[0], sha256=hashes.get("sha256")))
        return files
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    for href, text in parser.links:
        url = urllib.parse.urljoin(page_url, href)
        base, _, fragment = url.partition("#")
        name = urllib.parse.unquote(PurePosixPath(urllib.parse.urlsplit(base).path).name) or text
        algorithm, _, value = fragment.partition("=")
        files.append(IndexFile(filename=name, url=base, sha256=value.lower() if algorithm == "sha256" else None))
    return files


def _dir_listing(directory: Path) -> list[IndexFile]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [IndexFile(filename=n, url=(directory / n).as_uri(), sha256=None) for n in names if n.endswith(".whl")]


class PackageIndex:
    """The simple API of the configured indexes (and find-links), fetching members by HTTP range."""

    name = "index"

    def __init__(
        self,
        config: IndexConfig,
        *,
        transfer: Transfer | None = None,
        cache: OwnCache | None = None,
        pip_cache: PipCache | None = None,
    ) -> None:
        self.config = config
        self.transfer = transfer if transfer is not None else Transfer()
        self.cache = cache
        self.pip_cache = pip_cache

    def candidates(self, dist: InstalledDist) -> list[IndexFile]:
        """Every listed file that is this dist's exact wheel, find-links first."""
        found: list[IndexFile] = []
        failed: list[PristineNotFound] = []  # pages that could not be fetched (no network, a dead mirror)
        answered = False
        for link in self.config.find_links:
            directory = local_path(link) if "://" in link else Path(link)
            if directory is not None:
                found += _dir_listing(directory)
                continue
            try:
                body, ctype, final = fetch(link, self.transfer, accept="text/html")
            except PristineNotFound as exc:
                failed.append(exc)
                continue
            answered = True
            found += parse_page(body, ctype or "text/html", final)
        for base in self.config.urls():
            page = base.rstrip("/") + "/" + canonicalize_name(dist.name) + "/"
            try:
                body, ctype, final = fetch(page, self.transfer, accept=ACCEPT)
            except PristineNotFound as exc:
                failed.append(exc)
                continue
            answered = True
            try:
                found += parse_page(body, ctype, final)
            except ValueError:
                continue
        scored = [(wheel_match(f.filename, dist), n, f) for n, f in enumerate(found) if f.filename.endswith(".whl")]
        matched = [f for score, _, f in sorted(scored, key=lambda s: (-s[0], s[1])) if score]
        if not matched and failed and not answered:
            raise PristineNotFound(f"the package index could not be reached ({failed[0]})")
        return matched

    def find(self, dist: InstalledDist, needed: Collection[str] = ()) -> PristineWheel | None:
        for item in self.candidates(dist):
            return self.open(item, installed_sha256(dist))
        return None

    def open(self, item: IndexFile, installed: str | None = None) -> PristineWheel:
        """Open `item`, checked against the hash the index publishes for it.

        It is `authentic` only when that hash is also the one pip recorded for the install (`installed`,
        from direct_url.json): the index vouches for its file, not for the build that was installed.
        """
        where = redact(item.url)
        path = local_path(item.url)
        is_installed = item.sha256 is not None and installed is not None and item.sha256.lower() == installed
        if path is not None:
            matches = item.sha256 is not None and sha256_file(path) == item.sha256
            if item.sha256 is not None and not matches:
                raise PristineNotFound(f"{path}: sha256 differs from what the index publishes")
            return open_local(path, "find-links", authentic=matches and is_installed)
        if self.pip_cache is not None and item.sha256 is not None:
            body = self.pip_cache.body_for(item.url)
            if body is not None and sha256_file(body) == item.sha256:
                return open_local(body, "pip http cache", authentic=is_installed, filename=item.filename)
        spool = self.cache.root / "tmp" if self.cache is not None and self.cache.writable() else None
        remote = RangeFile(item.url, self.transfer, spool_dir=spool)
        authentic = False
        whole = remote.whole_file()
        if whole is not None and item.sha256 is not None:
            if sha256_of(whole) != item.sha256:
                remote.close()
                raise PristineNotFound(f"{where}: sha256 differs from what the index publishes")
            authentic = is_installed
            if self.cache is not None:
                self._keep_whole(item.filename, whole)
        on_read = None
        if self.cache is not None and whole is None:
            on_read = _LazyRecorder(self.cache, item.filename)
        wheel = ZipWheel(cast(IO[bytes], remote), item.filename, f"index {where}", authentic=authentic, on_read=on_read)
        if on_read is not None:
            on_read.record_name = wheel.record_name
        return wheel

    def _keep_whole(self, filename: str, whole: object) -> None:
        assert self.cache is not None
        if not self.cache.writable():
            return
        target = self.cache.root / "wheels" / filename
        try:
            whole.seek(0)  # type: ignore[attr-defined]
            atomic_write(target, lambda dst: shutil.copyfileobj(whole, dst), durable=False)  # type: ignore[arg-type,type-var]
            whole.seek(0)  # type: ignore[attr-defined]
        except OSError:
            pass


class _LazyRecorder:
    """OwnCache.recorder, bound once the wheel's RECORD member name is known."""

    def __init__(self, cache: OwnCache, filename: str) -> None:
        self.cache = cache
        self.filename = filename
        self.record_name = ""

    def __call__(self, member: str, data: bytes, mode: int) -> None:
        name = self.record_name or (member if member.endswith(".dist-info/RECORD") else "")
        self.cache.recorder(self.filename, name)(member, data, mode)


def _is_local(url: str) -> bool:
    return "://" not in url or urllib.parse.urlsplit(url).scheme == "file"


def local_index_source(config: IndexConfig, *, cache: OwnCache | None = None) -> PackageIndex | None:
    """The indexes and find-links of `config` (pip's) that lie on this machine (`file://` URLs and
    directories), or None: reading them sends nothing anywhere, so offline runs use them too."""
    urls = [u for u in config.urls() if _is_local(u)]
    links = tuple(link for link in config.find_links if _is_local(link))
    if not urls and not links:
        return None
    local = IndexConfig(
        index_url=urls[0] if urls else "",
        extra_index_urls=tuple(urls[1:]),
        find_links=links,
        no_index=not urls,
        no_cache=True,
    )
    source = PackageIndex(local, cache=cache)
    source.name = "local-index"
    return source


def index_source(
    env: Environment,
    *,
    environ: Mapping[str, str] | None = None,
    transfer: Transfer | None = None,
    cache: OwnCache | None = None,
    config: IndexConfig | None = None,
) -> PackageIndex:
    """The index pip is configured with (`config`, when the caller has read it already)."""
    if config is None:
        config = pip_config(env, environ)
    pip_cache = None
    if not config.no_cache:
        pip_cache = PipCache(pip_cache_dir(os.environ if environ is None else environ, config.cache_dir))  # type: ignore[arg-type]
        from patchaudit.target import trust

        if trust.running_as_root() and trust.foreign_writer([pip_cache.root]) is not None:
            pip_cache = None  # a cache another user can write is never evidence
    return PackageIndex(config, transfer=transfer, cache=cache, pip_cache=pip_cache)
