"""Where pristine bytes of a model file can be found offline, by the digest they must have.

In order: the repo's own blob, a blob of the same name in another repo of the same hub cache (or the
default one), `--source` directories (hub caches, repo folders, `hf download --local-dir` trees), and
the configs a manifest keeps. Every candidate is re-hashed before it is used.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator, Sequence
from pathlib import Path

from patchaudit.models.digests import Algorithm, Digest, to_hex
from patchaudit.models.layout import HF_LOCAL, ModelKind, ModelTarget, hub_cache_dir, repo_id_of
from patchaudit.models.localdir import all_metadata
from patchaudit.parallel.hashing import hash_file, new_hash, read_regular

READ_LIMIT = 2 << 30  # restore from memory up to this size; larger files: `hf download`
MAX_PLAIN_FILES = 100_000  # files of the plain --source directories indexed by name, at most


def _children(path: Path) -> list[Path]:
    try:
        return list(path.iterdir())
    except OSError:
        return []


def digest_of(data: bytes, algorithm: Algorithm) -> Digest:
    h = new_hash(algorithm.value, len(data))
    h.update(data)
    return Digest(algorithm, h.hexdigest())


class Sources:
    def __init__(self, target: ModelTarget, extra: Sequence[Path] = (), configs: dict[str, str] | None = None) -> None:
        self.target = target
        self.extra = tuple(Path(p).absolute() for p in extra)
        self.configs = configs or {}
        self._local_index: dict[str, Path] | None = None
        self._by_name: dict[str, list[Path]] | None = None

    def _plain(self) -> list[Path]:
        """The --source directories that are neither a hub cache, a repo folder nor a --local-dir tree."""
        return [
            s
            for s in self.extra
            if not (s / "blobs").is_dir()
            and not (s / HF_LOCAL / "download").is_dir()
            and not any(repo_id_of(p) is not None for p in _children(s))
        ]

    def _named(self, name: str) -> list[Path]:
        """Files of the plain --source directories by file name (a bounded walk, done once)."""
        if self._by_name is None:
            self._by_name = {}
            seen = 0
            for source in self._plain():
                for base, dirs, names in os.walk(source):  # os.walk never follows symlinked directories
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    for n in sorted(names):
                        self._by_name.setdefault(n, []).append(Path(base) / n)
                    seen += len(names)
                    if seen > MAX_PLAIN_FILES:
                        break
        return self._by_name.get(name, [])

    def _plain_candidates(self, path: str) -> Iterator[tuple[Path, str]]:
        """A plain directory's file at the same path, then any of its files of the same name: each is
        used only if its bytes hash to the digest the model records."""
        parts = posixpath.normpath(path).split("/")
        for source in self._plain():
            if ".." not in parts and not posixpath.isabs(path):
                yield source / path, str(source / path)
        for candidate in self._named(posixpath.basename(path)):
            yield candidate, str(candidate)

    def why_not(self, digest: Digest, path: str) -> str:
        """Why no --source held the bytes, one clause per source (empty without --source)."""
        if not self.extra:
            return ""
        name = posixpath.basename(path)
        said = []
        for source in self.extra:
            if source in self._plain():
                said.append(f"no file named {name} in {source} has {digest.algorithm.value} {digest.hex[:16]}...")
            else:
                said.append(f"{source} holds no blob or file with {digest.algorithm.value} {digest.hex[:16]}...")
        return "; ".join(said)

    def _candidates(self, digest: Digest, path: str | None = None) -> Iterator[tuple[Path, str]]:
        name = digest.hex
        caches: list[Path] = []
        if self.target.kind is ModelKind.HUB_CACHE:
            yield self.target.root / "blobs" / name, "its blob"
            caches.append(self.target.root.parent)
        caches.append(hub_cache_dir())
        for source in self.extra:
            if (source / "blobs").is_dir():
                yield source / "blobs" / name, f"{source}"
            else:
                caches.append(source)
        seen = {os.path.realpath(self.target.root / "blobs")}
        for cache in caches:
            try:
                repos = sorted(p for p in cache.iterdir() if repo_id_of(p) is not None)
            except OSError:
                continue
            for repo in repos:
                real = os.path.realpath(repo / "blobs")
                if real not in seen:
                    seen.add(real)
                    yield repo / "blobs" / name, f"blob of {repo_id_of(repo)} in {cache}"
        local = self._local_files().get(name)
        if local is not None:
            yield local, str(local)
        if path is not None:
            yield from self._plain_candidates(path)

    def _local_files(self) -> dict[str, Path]:
        """etag -> file of the --source local dirs (their download metadata names each file's hash)."""
        if self._local_index is None:
            self._local_index = {}
            for source in self.extra:
                if (source / HF_LOCAL / "download").is_dir():
                    for rel, meta in all_metadata(source).items():
                        if meta is not None:
                            self._local_index.setdefault(meta.etag.strip('"').lower(), source / rel)
        return self._local_index

    def find(self, digest: Digest, limit: int = READ_LIMIT, *, path: str | None = None) -> tuple[bytes, str] | None:
        """Bytes that hash to `digest`, and where they came from; None when none are at hand. With `path`
        (the file's path in its repository), plain --source directories are searched by name too."""
        for candidate, where in self._candidates(digest, path):
            try:
                if not os.path.isfile(candidate) or os.lstat(candidate).st_size > limit:
                    continue
            except OSError:
                continue
            data = read_regular(candidate)
            if data is not None and digest_of(data, digest.algorithm) == digest:
                return data, where
        for name, text in self.configs.items():
            data = text.encode("utf-8")
            if digest_of(data, digest.algorithm) == digest:
                return data, f"the manifest's copy of {name}"
        return None

    def blob_intact(self, digest: Digest) -> Path | None:
        """The repo's own blob for `digest`, when it is a regular file with the right bytes."""
        if self.target.kind is not ModelKind.HUB_CACHE:
            return None
        blob = self.target.root / "blobs" / digest.hex
        state = hash_file(str(blob), digest.algorithm.value)
        return blob if state.digest is not None and to_hex(state.digest) == digest.hex else None
