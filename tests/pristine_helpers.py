"""Real wheels, real venvs, a real index on loopback: helpers for the pristine/diff/revert/vcs tests."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from packaging.utils import canonicalize_name
from wheels import build_wheel, make_venv, pip_install, record_hash

__all__ = ["IndexServer", "build_wheel", "make_venv", "patchaudit", "pip_install", "record_hash", "site_packages"]

ROOT = Path(__file__).resolve().parents[1]


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def patchaudit(
    *args: str, env: Mapping[str, str] | None = None, input: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess (not a tty)."""
    full_env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "patchaudit", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        cwd=cwd or ROOT,
    )


class IndexServer:
    """A PEP 503 simple index on loopback that honours Range (unless told not to) and counts bytes."""

    def __init__(
        self,
        wheels: list[Path],
        *,
        ranges: bool = True,
        json_api: bool = False,
        refuse_ranges: bool = False,
        files_at: str | None = None,
    ) -> None:
        """`ranges=False`: Range is ignored (200, whole body); `refuse_ranges`: Range is answered 416;
        `files_at`: every file download is answered with a 302 to `files_at` + the same path."""
        self.files = {w.name: w for w in wheels}
        self.files_at = files_at
        self.authorizations: list[str] = []  # the Authorization header of every request ("" when none)
        self.ranges = ranges
        self.refuse_ranges = refuse_ranges
        self.json_api = json_api
        self.bytes_sent = 0
        self.requests: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                    with server._lock:
                        server.bytes_sent += len(body)

            def do_HEAD(self) -> None:
                self.do_GET()

            def do_GET(self) -> None:
                with server._lock:
                    server.requests.append(f"{self.path} {self.headers.get('Range', '')}")
                    server.authorizations.append(self.headers.get("Authorization", ""))
                m = re.fullmatch(r"/simple/([^/]+)/", self.path)
                if m:
                    return self._page(m.group(1))
                m = re.fullmatch(r"/files/([^/]+)", self.path)
                if m and server.files_at is not None:
                    return self._send(302, b"", {"Location": server.files_at + self.path})
                if m and m.group(1) in server.files:
                    return self._file(server.files[m.group(1)])
                self._send(404, b"not found", {})

            def _page(self, project: str) -> None:
                mine = [w for n, w in server.files.items() if canonicalize_name(n.split("-")[0]) == project]
                if server.json_api:
                    import json

                    body = json.dumps(
                        {
                            "meta": {"api-version": "1.0"},
                            "name": project,
                            "files": [
                                {
                                    "filename": w.name,
                                    "url": f"/files/{w.name}",
                                    "hashes": {"sha256": hashlib.sha256(w.read_bytes()).hexdigest()},
                                }
                                for w in mine
                            ],
                        }
                    ).encode()
                    return self._send(200, body, {"Content-Type": "application/vnd.pypi.simple.v1+json"})
                links = "".join(
                    f'<a href="/files/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
                    for w in mine
                )
                self._send(200, f"<html><body>{links}</body></html>".encode(), {"Content-Type": "text/html"})

            def _file(self, path: Path) -> None:
                data = path.read_bytes()
                rng = self.headers.get("Range")
                if rng and server.refuse_ranges:
                    return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                if rng and server.ranges:
                    m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
                    if m:
                        size = len(data)
                        if m.group(1) == "":
                            start, end = max(0, size - int(m.group(2))), size - 1
                        else:
                            start = int(m.group(1))
                            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                        return self._send(
                            206,
                            data[start : end + 1],
                            {
                                "Content-Range": f"bytes {start}-{end}/{size}",
                                "Accept-Ranges": "bytes",
                                "Content-Type": "application/octet-stream",
                            },
                        )
                self._send(200, data, {"Content-Type": "application/octet-stream"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = f"{self.origin}/simple"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> IndexServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def add(self, wheel: Path) -> None:
        self.files[wheel.name] = wheel
