"""A Hub on 127.0.0.1 for huggingface_hub to download from: the API and resolve routes it calls, with
the Hub's headers (X-Repo-Commit; ETag = git blob sha1; X-Linked-Etag / X-Linked-Size for LFS files)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    repo_id: str
    files: dict[str, bytes]
    lfs_suffixes: tuple[str, ...] = (".safetensors",)
    commit: str = field(default="")
    requests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.commit:
            h = hashlib.sha1(json.dumps(sorted((p, git_sha1(d)) for p, d in self.files.items())).encode())
            self.commit = h.hexdigest()

    def is_lfs(self, path: str) -> bool:
        return path.endswith(self.lfs_suffixes)

    def tree(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for path, data in sorted(self.files.items()):
            entry: dict[str, object] = {"type": "file", "oid": git_sha1(data), "size": len(data), "path": path}
            if self.is_lfs(path):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            out.append(entry)
        return out


class _Handler(BaseHTTPRequestHandler):
    repo: Repo

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _send(self, status: int, headers: dict[str, str], data: bytes, body: bool) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _answer(self, *, body: bool) -> None:
        repo = self.repo
        path = unquote(urlsplit(self.path).path)
        repo.requests.append(f"{self.command} {path}")
        api = f"/api/models/{repo.repo_id}/"
        if path.startswith(api + "revision/"):
            info = {"id": repo.repo_id, "sha": repo.commit, "siblings": [{"rfilename": p} for p in sorted(repo.files)]}
            self._send(200, {"Content-Type": "application/json"}, json.dumps(info).encode(), body)
            return
        if path.startswith(api + "tree/"):
            self._send(200, {"Content-Type": "application/json"}, json.dumps(repo.tree()).encode(), body)
            return
        prefix = f"/{repo.repo_id}/resolve/"
        if path.startswith(prefix):
            _rev, _, name = path[len(prefix) :].partition("/")
            data = repo.files.get(name)
            if data is None:
                self._send(404, {"X-Error-Code": "EntryNotFound"}, b"not found", body)
                return
            headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{git_sha1(data)}"'}
            if repo.is_lfs(name):
                headers["X-Linked-Etag"] = f'"{hashlib.sha256(data).hexdigest()}"'
                headers["X-Linked-Size"] = str(len(data))
            self._send(200, headers, data, body)
            return
        self._send(404, {"X-Error-Code": "RepoNotFound"}, b"not found", body)


@contextlib.contextmanager
def serve(repo: Repo) -> Iterator[str]:
    """The endpoint URL (for HF_ENDPOINT) of a Hub serving `repo`."""
    handler = type("Handler", (_Handler,), {"repo": repo})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
