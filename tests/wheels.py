"""Real wheels and real venvs for the tests: wheels built with zipfile and a correct RECORD,
venvs made by `python -m venv`, installs done by real pip."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

from packaging.utils import canonicalize_name


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(
    dest: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes | str],
    *,
    tag: str = "py3-none-any",
    scripts: Mapping[str, bytes | str] | None = None,
    entry_points: str | None = None,
    executable: tuple[str, ...] = (),
    record_hashes: Mapping[str, str] | None = None,
    record_sizes: Mapping[str, int] | None = None,
    extra_infos: list[tuple[zipfile.ZipInfo, bytes]] | None = None,
) -> Path:
    """Write `{name}-{version}-{tag}.whl` into dest with METADATA, WHEEL and a correct RECORD.

    `record_hashes`/`record_sizes` override some RECORD lines (a wheel shipped with a stale RECORD); `extra_infos`
    adds raw zip entries that RECORD does not list (hostile members).
    """
    dest.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(name).replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members: dict[str, bytes] = {p: (v.encode() if isinstance(v, str) else v) for p, v in files.items()}
    for script, body in (scripts or {}).items():
        members[f"{dist}-{version}.data/scripts/{script}"] = body.encode() if isinstance(body, str) else body
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode()
    members[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    if entry_points:
        members[f"{info}/entry_points.txt"] = entry_points.encode()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for path, data in members.items():
        writer.writerow(
            [path, (record_hashes or {}).get(path, record_hash(data)), (record_sizes or {}).get(path, len(data))]
        )
    writer.writerow([f"{info}/RECORD", "", ""])
    members[f"{info}/RECORD"] = out.getvalue().encode()
    wheel = dest / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            zi = zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = (0o100755 if path in executable else 0o100644) << 16
            zf.writestr(zi, data)
        for zi, data in extra_infos or []:
            zf.writestr(zi, data)
    return wheel


def make_venv(path: Path) -> Path:
    """A real venv without pip (fast); returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def pip_install(python: Path, *wheels: str | os.PathLike[str], extra: tuple[str, ...] = ()) -> None:
    """Install into the venv of `python` with the test runner's real pip, blind to the machine's pip config."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            *extra,
            *map(str, wheels),
        ],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )


def site_packages(python: Path) -> Path:
    venv = python.parent.parent
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found


def patchaudit(*args: str | os.PathLike[str], check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the installed `patchaudit` console script as a user would."""
    from report_schema import check_output

    exe = Path(sys.executable).parent / "patchaudit"
    proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, check=check)
    check_output(proc.stdout)  # every JSON report the suite writes is held to the shipped schema
    return proc
