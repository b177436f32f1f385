"""Where pristine bytes come from, in DESIGN.md's order, each candidate checked to be the same build."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from patchaudit.errors import PatchAuditError, PristineNotFound, UnsafePath, WheelMismatch
from patchaudit.fs.beneath import read_below
from patchaudit.fs.safefs import Cap, UnreadableFile
from patchaudit.parallel.statcache import StatCache
from patchaudit.pristine.cache import OwnCache, PipCache, pip_cache_dir
from patchaudit.pristine.check import RECORD_MISMATCH, BuildCheck, PristineFile, check_same_build, wheel_index
from patchaudit.pristine.direct_url import DirectUrlArchive
from patchaudit.pristine.http import Transfer
from patchaudit.pristine.index import index_source, local_index_source, pip_config
from patchaudit.pristine.interface import PristineSource, PristineWheel, candidates
from patchaudit.pristine.uvcache import UvCache, uv_cache_dir
from patchaudit.pristine.wheelhouse import Wheelhouse
from patchaudit.pristine.wheelhouse import from_environ as wheelhouses_from_environ
from patchaudit.report import Drift, DriftState
from patchaudit.target.environment import Environment, InstalledDist
from patchaudit.target.record import Record, parse_record

__all__ = [
    "RECORD_MISMATCH",
    "BuildCheck",
    "PristineFile",
    "PristineSource",
    "PristineWheel",
    "Transfer",
    "default_sources",
    "find_pristine",
    "installed_record",
]


def _describe(source: PristineSource) -> str:
    """A source as the "tried ..." list names it: its kind and, for a local one, where it looked."""
    where = getattr(source, "directory", None) or getattr(source, "root", None)
    return f"{source.name} {where}" if where is not None else source.name


def others_may_write(cache: Path) -> bool:
    """As root, whether a user other than root could have written `cache` (then it is never evidence)."""
    from patchaudit.target import trust

    return trust.running_as_root() and trust.foreign_writer([cache]) is not None


def installed_record(dist: InstalledDist) -> Record:
    path = dist.record_path
    if path is None:
        raise PristineNotFound(f"{dist.name} {dist.version} has no RECORD to check a wheel against")
    try:
        return parse_record(read_below(path, Cap.RECORD))
    except UnreadableFile as exc:
        raise PristineNotFound(f"cannot read RECORD: {exc}") from None


def default_sources(
    env: Environment,
    *,
    wheelhouse: Sequence[Path] = (),
    environ: Mapping[str, str] | None = None,
    transfer: Transfer | None = None,
    offline: bool = False,
    cache: StatCache | None = None,
) -> list[PristineSource]:
    """The sources in order: wheelhouse, direct_url.json archive, own cache, pip's and uv's caches, the index
    (offline: only the indexes and find-links pip is configured with that are local).

    `cache` remembers the digests of archives that direct_url.json names (see DirectUrlArchive)."""
    environ = os.environ if environ is None else environ
    houses = list(wheelhouse) or wheelhouses_from_environ(environ)  # type: ignore[arg-type]
    own: OwnCache | None = OwnCache.of(env)
    found: list[PristineSource] = [Wheelhouse(h) for h in houses]
    found.append(DirectUrlArchive(cache))
    if own is not None and others_may_write(own.root):
        own = None  # neither read as evidence nor written to
    if own is not None:
        found.append(own)
    config = pip_config(env, environ)
    if not config.no_cache:
        pip_cache = pip_cache_dir(environ, config.cache_dir)  # type: ignore[arg-type]
        if not others_may_write(pip_cache):
            found.append(PipCache(pip_cache))
    uv_cache = uv_cache_dir(environ)
    if not others_may_write(uv_cache):
        found.append(UvCache(uv_cache))
    if not offline:
        found.append(index_source(env, environ=environ, transfer=transfer, cache=own, config=config))
    elif (local := local_index_source(config, cache=own)) is not None:
        found.append(local)
    return found


def find_pristine(
    env: Environment,
    dist: InstalledDist,
    *,
    drift: Collection[Drift] = (),
    wheelhouse: Sequence[Path] = (),
    sources: Sequence[PristineSource] | None = None,
    environ: Mapping[str, str] | None = None,
    transfer: Transfer | None = None,
    offline: bool = False,
    cache: StatCache | None = None,
    record: Record | None = None,
) -> BuildCheck:
    """The first candidate that is the installed build and provides the bytes `drift` needs
    (`record`: the installed RECORD, when the caller parsed it already; else it is read here).

    A candidate of another build is skipped for the next source; when none is accepted the first
    refusal is raised (WheelMismatch names the file and both hashes), else PristineNotFound.
    """
    if record is None:
        record = installed_record(dist)
    if sources is None:
        sources = default_sources(
            env, wheelhouse=wheelhouse, environ=environ, transfer=transfer, offline=offline, cache=cache
        )
    needed = [d.path for d in drift if d.state is not DriftState.ADDED]
    refusals: list[PatchAuditError] = []
    tried: list[str] = []
    for source in sources:
        tried.append(_describe(source))
        found = candidates(source, dist, needed)
        while True:
            try:
                wheel = next(found, None)
            except (PristineNotFound, UnsafePath, WheelMismatch) as exc:
                refusals.append(exc)
                continue
            if wheel is None:
                break
            try:
                index = wheel_index(wheel)
                if not all(wheel.has(index[p][0]) for p in needed if p in index):
                    # uv's cache, for one, may hold only a hard link of the installed file: not evidence
                    tried[-1] += " (its copy of a needed file is missing or is the installed file itself)"
                    wheel.close()
                    continue
                return check_same_build(dist, record, wheel, drift)
            except (WheelMismatch, UnsafePath, PristineNotFound) as exc:
                wheel.close()
                refusals.append(exc)
    for kind in (WheelMismatch, UnsafePath):
        for refusal in refusals:
            if isinstance(refusal, kind):
                raise refusal
    detail = "; ".join(str(e) for e in refusals[:2])
    missing = PristineNotFound(
        f"no pristine wheel for {dist.name} {dist.version} (tried {', '.join(tried) or 'nothing'})"
        + (f": {detail}" if detail else ""),
        hint="give --wheelhouse DIR holding the installed wheel",
    )
    missing.tried = tuple(tried)
    raise missing
