"""One layer read as a stream: decompressed on the fly, its digest checked, every member hashed once.

Nothing is written anywhere and no member is held whole in memory, except the few small files the
audit needs whole (RECORDs, METADATA, `.pth` files) and members asked for by name (`keep`). A layer
whose blob does not match the digest its manifest names is refused before anything read from it is
used; a layer that decompresses past `MAX_RATIO` times its size is a bomb and is refused as it grows.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import queue
import tarfile
import threading
import zlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import IO, Any

from patchaudit.fs.safefs import MIB, Cap
from patchaudit.image import ImageError
from patchaudit.image.source import Image, LayerBlob

CHUNK = 1 * MIB
MAX_RATIO = 200  # tar of code compresses ~4x, of zero-filled files up to ~1000x: a bomb, not an image
MIN_BOMB = 256 * MIB  # below this much output, no ratio is suspicious
_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"


@dataclass(slots=True)
class Member:
    """One member of a layer, after its path was made canonical."""

    path: str  # "usr/local/lib/python3.12/site-packages/x.py": relative to the image's root, no `..`
    kind: str  # "f" file, "d" directory, "l" symlink, "h" hard link to no file of its layer, "o" other
    digest: bytes | None = None  # sha256 of the bytes (files, hard links)
    size: int = 0
    link: str | None = None  # a symlink's target; a broken hard link's target
    data: bytes | None = None  # kept whole: a small file the audit reads, or one asked for


@dataclass(slots=True)
class LayerRead:
    index: int
    members: list[Member] = field(default_factory=list)
    whiteouts: list[str] = field(default_factory=list)  # paths deleted from the layers below
    opaque: list[str] = field(default_factory=list)  # directories whose lower contents are hidden


def wants_whole(path: str) -> int:
    """The cap of a file the audit reads whole (0: only its digest is needed)."""
    head, _, name = path.rpartition("/")
    if head.endswith(".dist-info"):
        if name == "RECORD":
            return Cap.RECORD
        if name in ("METADATA", "direct_url.json"):
            return Cap.METADATA
    elif head.endswith(("site-packages", "dist-packages")) and (
        name.endswith(".pth") or name.partition(".")[0] in ("sitecustomize", "usercustomize")
    ):
        return Cap.PTH
    return 0


def read_layer(
    image: Image, layer: LayerBlob, keep: Collection[str] = (), sink: Callable[[Member], None] | None = None
) -> LayerRead:
    """Every member of the layer, hashed; `keep` names members whose bytes are wanted whole. With `sink`,
    each kept member is handed to it as it is read and its bytes are not kept in the result."""
    if layer.digest is None and layer.diff_id is None:
        raise ImageError(f"layer {layer.index} has no digest to check it against")
    out = LayerRead(index=layer.index)
    with image.open_blob(layer) as blob:
        stream = _Decompressed(blob, layer)
        try:
            with tarfile.open(fileobj=stream, mode="r|", bufsize=CHUNK) as tar:  # type: ignore[call-overload]
                files: dict[str, Member] = {}
                for info in tar:
                    _member(out, tar, info, files, keep, sink)
                    tar.members.clear()  # a stream never looks back: keep no TarInfo per member
            stream.finish()
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            stream.check_blob()  # a blob that is not the manifest's says so first
            raise ImageError(
                f"layer {layer.index} ({layer.digest or layer.diff_id}) is not a tar stream: {exc}"
            ) from None
        finally:
            stream.close()
    return out


def _member(
    out: LayerRead,
    tar: tarfile.TarFile,
    info: tarfile.TarInfo,
    files: dict[str, Member],
    keep: Collection[str],
    sink: Callable[[Member], None] | None,
) -> None:
    path = canonical(info.name, out.index)
    head, _, name = path.rpartition("/")
    if name == _OPAQUE:
        out.opaque.append(head)
        return
    if name.startswith(_WHITEOUT):
        target = canonical(f"{head}/{name[len(_WHITEOUT) :]}", out.index)
        if not target or name == _WHITEOUT or target.rpartition("/")[2] in ("", ".", ".."):
            raise ImageError(f"layer {out.index}: the whiteout {info.name!r} would delete the image's root")
        out.whiteouts.append(target)
        return
    if not path:
        return  # the root directory itself
    if info.isreg():
        member = Member(path=path, kind="f", size=info.size)
        cap = wants_whole(path)
        whole = path in keep or (cap and info.size <= cap)
        # every file is hashed: a RECORD may list paths anywhere below its prefix (share/, etc/, bin/)
        fh = tar.extractfile(info)
        assert fh is not None
        member.digest, member.data = _digest(fh, whole=bool(whole))
        if sink is not None and path in keep:
            sink(member)
            member.data = None
        files[path] = member
    elif info.islnk():
        target = canonical(info.linkname, out.index)
        source = files.get(target)
        if source is None:  # not an earlier file of this layer: the layers below may hold it (view.py)
            member = Member(path=path, kind="h", link=target)
        else:
            member = Member(path=path, kind="f", digest=source.digest, size=source.size, data=source.data)
            files[path] = member
    elif info.issym():
        member = Member(path=path, kind="l", link=info.linkname)
    elif info.isdir():
        member = Member(path=path, kind="d")
    else:
        member = Member(path=path, kind="o")
    out.members.append(member)


def canonical(name: str, index: int) -> str:
    """A member's path relative to the image's root; one that climbs out of it is refused."""
    path = posixpath.normpath("/" + name.lstrip("/"))
    raw = [p for p in name.split("/") if p not in ("", ".")]
    depth = 0
    for part in raw:
        depth = depth - 1 if part == ".." else depth + 1
        if depth < 0:
            raise ImageError(f"layer {index}: member {name!r} climbs out of the image")
    return path.lstrip("/")


def _digest(fh: IO[bytes], *, whole: bool) -> tuple[bytes, bytes | None]:
    h = hashlib.sha256()
    kept: list[bytes] = []
    while chunk := fh.read(CHUNK):
        h.update(chunk)
        if whole:
            kept.append(chunk)
    return h.digest(), b"".join(kept) if whole else None


class _Hashing:
    """The blob, hashed and counted as it is read."""

    def __init__(self, blob: IO[bytes]) -> None:
        self.blob = blob
        self.sha = hashlib.sha256()
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self.blob.read(n if n > 0 else CHUNK)
        self.sha.update(data)
        self.count += len(data)
        return data


def _inflater() -> tuple[Any, Any]:
    """ISA-L's inflate (the optional `isal` package: about twice zlib's speed, and inflating is most of
    an image scan's time) when it is installed, else zlib's; with the error it raises."""
    try:
        from isal import isal_zlib  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return zlib, zlib.error
    return isal_zlib, isal_zlib.error


class _Gzip:
    """gzip of one or more members, at most `n` bytes out per read: a bomb never lands in memory whole."""

    def __init__(self, raw: _Hashing, first: bytes) -> None:
        self.raw = raw
        self.module, self.error = _inflater()
        self.d = self.module.decompressobj(wbits=31)
        self.tail = first

    def read(self, n: int) -> bytes:
        while True:
            if not self.tail:
                self.tail = self.raw.read(CHUNK)
                if not self.tail:
                    return b""
            try:
                out = self.d.decompress(self.tail, n)
            except self.error as exc:
                raise zlib.error(str(exc)) from None  # one error for the reader, whichever inflate ran
            self.tail = self.d.unconsumed_tail
            if self.d.eof:
                self.tail = self.d.unused_data + self.tail
                self.d = self.module.decompressobj(wbits=31)
            if out:
                return bytes(out)


class _Plain:
    def __init__(self, raw: _Hashing, first: bytes) -> None:
        self.raw = raw
        self.first = first

    def read(self, n: int) -> bytes:
        if self.first:
            out, self.first = self.first[:n], self.first[n:]
            return out
        return self.raw.read(n)


class _Decompressed:
    """A file-like stream of the layer's tar: gzip, zstd or plain, the blob hashed as it is read."""

    def __init__(self, blob: IO[bytes], layer: LayerBlob) -> None:
        self._raw = _Hashing(blob)
        self._layer = layer
        self._tar = hashlib.sha256() if layer.digest is None else None  # docker-archive: the diff_id
        self._out = 0
        self._padded = False
        first = self._raw.read(CHUNK)
        self._source = _Prefetch(_source(self._raw, first, layer.index))

    def read(self, n: int = -1) -> bytes:
        out = self._source.read(n if n > 0 else CHUNK)
        if not out and not self._padded:
            # Some writers end a layer after its last member's bytes, with no padding and no two zero
            # blocks (umoci does); tar itself reads such a stream, so pad it here (neither hashed nor counted).
            self._padded = True
            return b"\0" * ((-self._out) % 512 + 1024)
        self._seen(out)
        return bytes(out)

    def _seen(self, out: bytes) -> None:
        self._out += len(out)
        if self._out > MIN_BOMB and self._out > MAX_RATIO * self._raw.count:
            raise ImageError(
                f"layer {self._layer.index} decompresses to more than {MAX_RATIO} times its size (a bomb?)"
            )
        if self._tar is not None:
            self._tar.update(out)

    def close(self) -> None:
        self._source.close()

    def check_blob(self) -> None:
        """After a bad stream: when the manifest names the blob's digest, read the rest and hold it to it."""
        self._source.close()  # the blob is read here from now on
        if self._layer.digest is None:
            return
        while self._raw.read(CHUNK):
            pass
        got = f"sha256:{self._raw.sha.hexdigest()}"
        if got != self._layer.digest:
            raise ImageError(
                f"layer {self._layer.index}: the blob's digest is {got}, the manifest names {self._layer.digest}"
            )

    def finish(self) -> None:
        """Read to the blob's end, then hold it to its digest."""
        while chunk := self._source.read(CHUNK):
            self._seen(chunk)
        while self._raw.read(CHUNK):  # bytes past the compressed stream's end count too
            pass
        layer = self._layer
        if layer.size is not None and layer.size != self._raw.count:
            raise ImageError(
                f"layer {layer.index}: the blob holds {self._raw.count} bytes, the manifest says {layer.size}"
            )
        want = layer.digest or layer.diff_id
        if layer.digest is not None:
            got = f"sha256:{self._raw.sha.hexdigest()}"
        else:
            assert self._tar is not None
            got = f"sha256:{self._tar.hexdigest()}"
        if got != want:
            raise ImageError(f"layer {layer.index}: the blob's digest is {got}, the manifest names {want}")


class _Prefetch:
    """Decompression (and the blob's digest) on a thread of its own, a few chunks ahead of the tar reader:
    zlib and sha256 release the GIL, so a layer is read on two cores. At most DEPTH chunks wait."""

    DEPTH = 4

    def __init__(self, source: Any) -> None:
        self._source = source
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=self.DEPTH)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._run, name="layer-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                chunk = self._source.read(CHUNK)
                self._queue.put(chunk)
                if not chunk:
                    return
        except BaseException as exc:  # handed to the reader, raised there
            self._queue.put(exc)

    def read(self, _n: int) -> bytes:
        if self._done:
            return b""
        item = self._queue.get()
        if isinstance(item, BaseException):
            self._done = True
            raise item
        if not item:
            self._done = True
        return item

    def close(self) -> None:
        """Stop the thread (whatever it was doing) before anyone else reads the blob."""
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get_nowait()
            self._thread.join(0.01)


def _source(raw: _Hashing, first: bytes, index: int) -> Any:
    if first.startswith(b"\x1f\x8b"):
        return _Gzip(raw, first)
    if first.startswith(b"\x28\xb5\x2f\xfd"):
        try:
            import zstandard  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise ImageError(
                f"layer {index} is zstd-compressed", hint="install the `zstandard` package to read zstd layers"
            ) from None
        return zstandard.ZstdDecompressor().stream_reader(_Plain(raw, first), read_across_frames=True)
    return _Plain(raw, first)
