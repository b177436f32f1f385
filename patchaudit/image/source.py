"""An image reference opened into its layers: OCI layouts (a directory or an archive) and docker-archive.

Only the manifest, the config and the layer blobs are read, each by name from the layout or the
archive; a digest names a blob only once it has the form `sha256:<64 hex>` (never a path to follow).
"""

from __future__ import annotations

import json
import os
import re
import stat
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from patchaudit.fs.safefs import MIB, Cap, UnreadableFile, read_capped
from patchaudit.image import ImageError

MAX_LAYERS = 1000  # overlayfs stacks at most 128 (Docker 127); a manifest asking for more is not an image
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
TRANSPORTS = ("oci", "oci-archive", "docker-archive")


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerBlob:
    """One layer as the manifest names it; `digest` is the blob's, `diff_id` the uncompressed tar's."""

    index: int
    member: str  # where the blob lives: a path below the layout, or a member of the archive
    digest: str | None
    diff_id: str | None
    size: int | None
    created_by: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Image:
    ref: str
    transport: str
    path: Path
    layers: tuple[LayerBlob, ...]

    @contextmanager
    def open_blob(self, layer: LayerBlob) -> Iterator[IO[bytes]]:
        """The layer's blob as a stream of bytes, read where it lies."""
        if self.transport == "oci":
            fd = _open_regular(self.path / layer.member)
            with os.fdopen(fd, "rb", buffering=MIB) as fh:
                yield fh
            return
        with tarfile.open(self.path, "r:") as archive, _member(archive, layer.member) as fh:
            yield fh


def parse_ref(ref: str) -> tuple[str, Path, str | None]:
    """(transport, path, tag or reference) of `oci:DIR[:TAG]` and friends."""
    transport, sep, rest = ref.partition(":")
    if not sep or transport not in TRANSPORTS or not rest:
        raise ImageError(
            f"{ref!r} is not an image reference",
            hint="use oci:DIR[:TAG], oci-archive:FILE[:TAG] or docker-archive:FILE[:REF]",
        )
    path, tag = rest, None
    if ":" in rest:
        head, _, tail = rest.partition(":")  # a docker-archive reference may hold its own ':' (name:tag)
        if os.path.exists(head) or not os.path.exists(rest):
            path, tag = head, tail or None
    return transport, Path(path), tag


def open_image(ref: str) -> Image:
    transport, path, tag = parse_ref(ref)
    if not path.exists():
        raise ImageError(f"{path} does not exist ({ref})")
    try:
        if transport == "oci":
            layers = _oci(lambda name: _read(path / name, name), tag)
        else:
            with tarfile.open(path, "r:") as archive:
                reader = lambda name: _read_member(archive, name)  # noqa: E731
                layers = _oci(reader, tag) if transport == "oci-archive" else _docker(reader, tag)
    except (tarfile.TarError, EOFError) as exc:
        raise ImageError(f"{path} is not a readable archive: {exc}") from None
    except UnreadableFile as exc:
        raise ImageError(f"{ref}: {exc}") from None
    member = (lambda d: f"blobs/sha256/{d[7:]}") if transport != "docker-archive" else None
    fixed = tuple(
        LayerBlob(
            index=layer.index,
            member=member(layer.digest) if member is not None and layer.digest else layer.member,
            digest=layer.digest,
            diff_id=layer.diff_id,
            size=layer.size,
            created_by=layer.created_by,
        )
        for layer in layers
    )
    return Image(ref=ref, transport=transport, path=path, layers=fixed)


def _oci(read: Any, tag: str | None) -> list[LayerBlob]:
    index = _json(read("index.json"), "index.json")
    descriptor = _pick(index.get("manifests"), tag)
    if descriptor.get("mediaType") in _INDEX_TYPES:  # an image index: take the first manifest in it
        nested = _json(read(_blob_name(descriptor)), "the image index")
        descriptor = _pick(nested.get("manifests"), None)
    manifest = _json(read(_blob_name(descriptor)), "the manifest")
    config = _json(read(_blob_name(manifest.get("config"))), "the config")
    items = manifest.get("layers")
    if not isinstance(items, list):
        raise ImageError("the manifest lists no layers")
    _count(len(items))
    diff_ids = _diff_ids(config)
    history = _history(config)
    out = []
    for i, item in enumerate(items):
        digest = _digest(item.get("digest") if isinstance(item, dict) else None)
        size = item.get("size") if isinstance(item.get("size"), int) else None
        out.append(
            LayerBlob(
                index=i,
                member="",
                digest=digest,
                diff_id=diff_ids[i] if i < len(diff_ids) else None,
                size=size,
                created_by=history[i] if i < len(history) else None,
            )
        )
    return out


def _docker(read: Any, ref: str | None) -> list[LayerBlob]:
    manifest = json.loads(read("manifest.json"))
    if not isinstance(manifest, list) or not manifest:
        raise ImageError("manifest.json lists no image")
    chosen = manifest[0]
    if ref is not None:
        tagged = [
            m for m in manifest if isinstance(m, dict) and any(_same_tag(t, ref) for t in m.get("RepoTags") or [])
        ]
        if not tagged:
            raise ImageError(f"no image tagged {ref} in the archive")
        chosen = tagged[0]
    layers = chosen.get("Layers") if isinstance(chosen, dict) else None
    if not isinstance(layers, list) or not all(isinstance(m, str) for m in layers):
        raise ImageError("manifest.json lists no layers")
    _count(len(layers))
    config = _json(read(str(chosen.get("Config"))), "the config")
    diff_ids = _diff_ids(config)
    history = _history(config)
    if len(diff_ids) != len(layers):
        raise ImageError(f"the config names {len(diff_ids)} layers, the manifest {len(layers)}")
    out = []
    for i, member in enumerate(layers):
        named = re.fullmatch(r"blobs/sha256/([0-9a-f]{64})", member)
        out.append(
            LayerBlob(
                index=i,
                member=member,
                digest=f"sha256:{named.group(1)}" if named else None,
                diff_id=diff_ids[i],
                size=None,
                created_by=history[i] if i < len(history) else None,
            )
        )
    return out


def _same_tag(tag: object, ref: str) -> bool:
    """`example/x:1` names `docker.io/example/x:1` too, and `x:1` names `docker.io/library/x:1`."""
    return isinstance(tag, str) and tag in (ref, f"docker.io/{ref}", f"docker.io/library/{ref}", f"localhost/{ref}")


def _count(n: int) -> None:
    if n > MAX_LAYERS:
        raise ImageError(f"the manifest lists {n} layers (at most {MAX_LAYERS} are read)")


def _pick(manifests: object, tag: str | None) -> dict[str, Any]:
    if not isinstance(manifests, list) or not manifests or not all(isinstance(m, dict) for m in manifests):
        raise ImageError("index.json lists no manifest")
    if tag is None:
        return manifests[0]
    for m in manifests:
        if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == tag:
            return m
    raise ImageError(f"no manifest tagged {tag!r} in index.json")


def _blob_name(descriptor: object) -> str:
    digest = _digest(descriptor.get("digest") if isinstance(descriptor, dict) else None)
    return f"blobs/sha256/{digest[7:]}"


def _digest(value: object) -> str:
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise ImageError(f"{value!r} is not a sha256 digest")
    return value


def _diff_ids(config: dict[str, Any]) -> list[str]:
    rootfs = config.get("rootfs")
    ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    return [_digest(d) for d in ids] if isinstance(ids, list) else []


def _history(config: dict[str, Any]) -> list[str | None]:
    """created_by of each step that made a layer (empty_layer steps made none), in layer order."""
    steps = config.get("history")
    if not isinstance(steps, list):
        return []
    return [
        s.get("created_by") if isinstance(s.get("created_by"), str) else None
        for s in steps
        if isinstance(s, dict) and not s.get("empty_layer")
    ]


def _json(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ImageError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ImageError(f"{what} is not a JSON object")
    return value


def _read(path: Path, name: str) -> bytes:
    return read_capped(path, Cap.JSON)


def _open_regular(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ImageError(f"cannot open the blob {path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ImageError(f"the blob {path} is not a regular file")
    return fd


def _find(archive: tarfile.TarFile, name: str) -> tarfile.TarInfo:
    for info in archive.getmembers():
        if info.name.removeprefix("./") == name:
            if not info.isreg():
                raise ImageError(f"{name} in the archive is not a regular file")
            return info
    raise ImageError(f"{name} is not in the archive")


@contextmanager
def _member(archive: tarfile.TarFile, name: str) -> Iterator[IO[bytes]]:
    fh = archive.extractfile(_find(archive, name))
    if fh is None:
        raise ImageError(f"{name} in the archive cannot be read")
    with fh:
        yield fh


def _read_member(archive: tarfile.TarFile, name: str) -> bytes:
    info = _find(archive, name)
    if info.size > Cap.JSON:
        raise ImageError(f"{name} in the archive is larger than {Cap.JSON} bytes")
    with _member(archive, name) as fh:
        return fh.read()
