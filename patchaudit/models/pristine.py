"""Where pristine bytes of a model file can be found offline, by the digest they must have.

In order: the repo's own blob, a blob of the same name in another repo of the same hub cache (or the
default one), `--source` directories (hub caches, repo folders, `hf download --local-dir` trees), and
the configs a manifest keeps. Every candidate is re-hashed before it is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from patchaudit.hashing import hash_file, new_hash, read_regular
from patchaudit.models.digests import Algorithm, Digest, to_hex
from patchaudit.models.layout import HF_LOCAL, ModelKind, ModelTarget, hub_cache_dir, repo_id_of
from patchaudit.models.localdir import all_metadata

READ_LIMIT = 2 << 30  # restore from memory up to this size; larger files: `hf download`


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

    def _candidates(self, digest: Digest) -> Iterator[tuple[Path, str]]:
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

    def find(self, digest: Digest, limit: int = READ_LIMIT) -> tuple[bytes, str] | None:
        """Bytes that hash to `digest`, and where they came from; None when none are at hand."""
        for path, where in self._candidates(digest):
            try:
                if not os.path.isfile(path) or os.lstat(path).st_size > limit:
                    continue
            except OSError:
                continue
            data = read_regular(path)
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
