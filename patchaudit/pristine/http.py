"""HTTP for pristine bytes: a seekable file over Range requests that counts every byte it moves.

HTTP goes through requests (connection reuse, redirects, proxies and CA bundles as pip configures
them), imported on first use only: the gate's warm path never pays for it. Credentials are attached
per request by that request's own origin (scheme, host, port), on redirects too, so a password given
for an index never reaches the host its downloads are redirected to.
"""

from __future__ import annotations

import io
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import PristineNotFound
from patchaudit.pristine.origins import learn, redact

TYPE_CHECKING = False
if TYPE_CHECKING:
    import requests

BLOCK = 64 << 10
TIMEOUT = 60


@dataclass(slots=True)
class Transfer:
    """Bytes and requests moved over the network in one run (bodies only, not headers)."""

    bytes_received: int = 0
    requests: int = 0
    whole_files: int = 0


def _get(url: str, headers: dict[str, str] | None = None, *, stream: bool = False) -> requests.Response:
    """GET `url` (credentials learnt, then left out of the URL); PristineNotFound for transport errors."""
    import requests

    from patchaudit.pristine.session import session

    url = learn(url)
    try:
        return session().get(url, headers=headers, stream=stream, timeout=TIMEOUT)
    except (requests.RequestException, OSError, ValueError) as exc:
        raise PristineNotFound(f"cannot fetch {redact(url)}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


def fetch(url: str, transfer: Transfer, *, accept: str | None = None) -> tuple[bytes, str, str]:
    """GET a small resource: (body, content type, final url). A `file://` URL is read from disk, as pip
    reads a local index: a directory stands for its `index.html`."""
    path = local_path(url)
    if path is not None:
        page = path / "index.html" if path.is_dir() else path
        try:
            body = page.read_bytes()
        except OSError as exc:
            raise PristineNotFound(f"cannot read {page}: {exc.strerror or exc}") from None
        kind = "application/vnd.pypi.simple.v1+json" if page.suffix == ".json" else "text/html"
        return body, kind, url
    resp = _get(url, {"Accept": accept} if accept else None)
    with resp:
        transfer.requests += 1 + len(resp.history)
        if resp.status_code >= 400:
            raise PristineNotFound(f"cannot fetch {redact(url)}: {resp.status_code} {resp.reason}")
        body = _body(resp, url)
        transfer.bytes_received += len(body)
        return body, resp.headers.get("Content-Type", ""), redact(resp.url)


def _body(resp: requests.Response, url: str) -> bytes:
    import requests

    try:
        return resp.content
    except (requests.RequestException, OSError) as exc:
        raise PristineNotFound(f"cannot fetch {redact(url)}: {_reason(exc)}") from None


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file that fetches only the blocks that are read.

    When the server ignores Range (answers 200), the whole body is spooled to a temporary file once
    and served from there.
    """

    def __init__(self, url: str, transfer: Transfer, *, spool_dir: Path | None = None) -> None:
        super().__init__()
        self.url = learn(url)
        self.transfer = transfer
        self._pos = 0
        self._blocks: dict[int, bytes] = {}
        self._whole: io.BufferedRandom | None = None
        self._spool_dir = spool_dir
        self.length = self._probe()

    # -- io interface
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            self._pos = offset
        elif whence == io.SEEK_CUR:
            self._pos += offset
        elif whence == io.SEEK_END:
            self._pos = self.length + offset
        else:
            raise ValueError(f"bad whence {whence}")
        if self._pos < 0:
            raise OSError("negative seek")
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        n = len(data)
        memoryview(buffer)[:n] = data
        return n

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self.length - self._pos
        end = min(self._pos + size, self.length)
        if end <= self._pos:
            return b""
        data = self._slice(self._pos, end)
        self._pos = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def close(self) -> None:
        if self._whole is not None:
            self._whole.close()
            self._whole = None
        super().close()

    # -- fetching
    @property
    def whole(self) -> bool:
        return self._whole is not None

    def whole_file(self) -> io.BufferedRandom | None:
        """The spooled whole body, when the server did not do ranges."""
        return self._whole

    def _probe(self) -> int:
        """Learn the length with a first range request for the last block (where the zip index lives)."""
        with self._open({"Range": f"bytes=-{BLOCK}"}) as resp:
            if resp.status_code == 206:
                total = _content_range_total(resp.headers.get("Content-Range", ""))
                body = _body(resp, self.url)
                self.transfer.bytes_received += len(body)
                if total is not None:
                    start = total - len(body)
                    self._store(start, body, total)
                    return total
            self._spool(resp)
            assert self._whole is not None
            return self._whole.seek(0, io.SEEK_END)

    def _open(self, headers: dict[str, str]) -> requests.Response:
        """GET with `headers`; a server that refuses the range (416) is asked for the whole file."""
        resp = _get(self.url, headers, stream=True)
        self.transfer.requests += 1 + len(resp.history)
        if resp.status_code == 416 and "Range" in headers:
            resp.close()
            return self._open({k: v for k, v in headers.items() if k != "Range"})
        if resp.status_code >= 400:
            resp.close()
            raise PristineNotFound(f"cannot fetch {redact(self.url)}: {resp.status_code} {resp.reason}")
        return resp

    def _spool(self, resp: requests.Response) -> None:
        import requests

        self.transfer.whole_files += 1
        if self._spool_dir is not None:
            self._spool_dir.mkdir(parents=True, exist_ok=True)
        fh = tempfile.TemporaryFile(dir=self._spool_dir)  # noqa: SIM115 - kept open as the spool
        try:
            for chunk in resp.iter_content(1 << 20):
                self.transfer.bytes_received += len(chunk)
                fh.write(chunk)
        except (requests.RequestException, OSError) as exc:
            fh.close()
            raise PristineNotFound(f"cannot fetch {redact(self.url)}: {_reason(exc)}") from None
        fh.flush()
        self._whole = fh
        self._blocks.clear()

    def _store(self, start: int, body: bytes, total: int) -> None:
        """Keep the whole blocks that `body` (starting at `start`) covers, plus the file's last block."""
        first = -(-start // BLOCK)
        for index in range(first, (start + len(body)) // BLOCK + 1):
            lo = index * BLOCK
            hi = min(lo + BLOCK, total)
            if lo >= total or hi > start + len(body):
                continue
            self._blocks[index] = body[lo - start : hi - start]
        # the tail probe usually starts mid-block: keep its bytes as a partial first block too
        if start % BLOCK and start // BLOCK not in self._blocks:
            self._partial = (start, body)

    _partial: tuple[int, bytes] | None = None

    def _slice(self, start: int, end: int) -> bytes:
        if self._whole is not None:
            self._whole.seek(start)
            return self._whole.read(end - start)
        if self._partial is not None and start >= self._partial[0]:
            p_start, p_body = self._partial
            if end <= p_start + len(p_body):
                return p_body[start - p_start : end - p_start]
        first, last = start // BLOCK, (end - 1) // BLOCK
        missing = [i for i in range(first, last + 1) if i not in self._blocks]
        runs: list[tuple[int, int]] = []
        for i in missing:
            if runs and runs[-1][1] == i - 1:
                runs[-1] = (runs[-1][0], i)
            else:
                runs.append((i, i))
        for lo, hi in runs:
            self._fetch_blocks(lo, hi)
            if self._whole is not None:
                return self._slice(start, end)
        data = b"".join(self._blocks[i] for i in range(first, last + 1))
        offset = start - first * BLOCK
        return data[offset : offset + (end - start)]

    def _fetch_blocks(self, lo: int, hi: int) -> None:
        begin = lo * BLOCK
        stop = min((hi + 1) * BLOCK, self.length) - 1
        with self._open({"Range": f"bytes={begin}-{stop}"}) as resp:
            if resp.status_code != 206:
                self._spool(resp)
                return
            body = _body(resp, self.url)
            self.transfer.bytes_received += len(body)
        if len(body) != stop - begin + 1:
            raise PristineNotFound(f"{redact(self.url)} answered {len(body)} bytes for a {stop - begin + 1}-byte range")
        self._store(begin, body, self.length)


def _content_range_total(value: str) -> int | None:
    # "bytes 100-199/1000"
    _, _, total = value.rpartition("/")
    try:
        return int(total)
    except ValueError:
        return None


def local_path(url: str) -> Path | None:
    """The filesystem path of a file:// URL (None for anything else)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(urllib.parse.unquote(parts.path))  # what url2pathname does on POSIX


def sha256_of(fh: io.IOBase) -> str:
    import hashlib

    fh.seek(0)
    h = hashlib.sha256()
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            break
        h.update(chunk)
    fh.seek(0)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return sha256_of(fh)
