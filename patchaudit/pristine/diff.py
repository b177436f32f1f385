"""Unified diffs of pristine vs installed bytes, with headers `patch -p0` (or `git apply -p0`) accepts."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import PristineNotFound
from patchaudit.fs.beneath import parent_of, read_at, read_below, readlink_at, readlink_below
from patchaudit.fs.safefs import Cap, UnreadableFile, Why
from patchaudit.pristine import BuildCheck, Transfer, find_pristine
from patchaudit.pristine.interface import PristineSource
from patchaudit.report import DistReport, Drift, DriftState
from patchaudit.target.environment import Environment, InstalledDist

DEV_NULL = "/dev/null"
NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class FileDiff:
    """The change to one file, pristine (old) -> installed (new)."""

    path: str
    state: DriftState
    text: str  # a unified diff, or one line when there is nothing to show line by line
    binary: bool = False
    note: str | None = None


def is_binary(data: bytes) -> bool:
    if b"\x00" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _lines(data: bytes) -> list[str]:
    """Lines as patch(1) counts them: ended by "\n" only (str.splitlines would also split at \f, \x1c, \u2028...)."""
    text = data.decode("utf-8")
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r"}
_C_ESCAPES.update({'"': '\\"', "\\": "\\\\"})


def _header_name(name: str) -> str:
    """A file name for a `---`/`+++` line that both GNU patch and git apply read back whole.

    Like git: a name with a control character, a quote or a backslash is C-quoted; a name with a space
    ends with a TAB (where diff(1) puts its timestamp), so patch does not stop at the first space.
    """
    if name == DEV_NULL:
        return name
    if any(ch in _C_ESCAPES or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        raw = name.encode("utf-8", "surrogateescape")
        quoted = []
        for byte in raw:
            ch = chr(byte)
            if ch in _C_ESCAPES:
                quoted.append(_C_ESCAPES[ch])
            elif byte < 0x20 or byte >= 0x7F:
                quoted.append(f"\\{byte:03o}")
            else:
                quoted.append(ch)
        return '"' + "".join(quoted) + '"'
    if any(ch.isspace() for ch in name):
        return name + "\t"
    return name


def unified(path: str, old: bytes | None, new: bytes | None) -> tuple[str, bool]:
    """(diff text, is binary) for one path; None means the file does not exist on that side."""
    if (old is not None and is_binary(old)) or (new is not None and is_binary(new)):
        old_name = path if old is not None else DEV_NULL
        new_name = path if new is not None else DEV_NULL
        return f"Binary files {old_name} and {new_name} differ\n", True
    old_name = _header_name(path) if old is not None else DEV_NULL
    new_name = _header_name(path) if new is not None else DEV_NULL
    out: list[str] = []
    for line in difflib.unified_diff(
        _lines(old or b""), _lines(new or b""), fromfile=old_name, tofile=new_name, lineterm="\n"
    ):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n" + NO_NEWLINE)
    if old is not None and new is not None and not out:
        return "", False
    if not out:
        # an empty file created or removed: a header alone is what diff(1) prints
        out = [f"--- {old_name}\n", f"+++ {new_name}\n"]
    return "".join(out), False


def read_installed(path: Path) -> bytes | str | None:
    """The installed bytes without following a symlink: bytes, the link target (str), or None when
    missing. A FIFO, a device or a file past Cap.INSTALLED is UnreadableFile: never a read that waits."""
    return _bytes_or_link(lambda: read_below(path, Cap.INSTALLED), lambda: readlink_below(path))


def read_installed_below(location: Path, rel: str) -> bytes | str | None:
    """`read_installed` of `location/rel`, walked from `location` by directory descriptors when `rel`
    stays below it: a directory on the way that is (or becomes) a symlink is UnsafePath, never followed,
    so a diff run as root cannot be led to print a file outside the tree. A RECORD path that climbs out
    (scripts: `../../../bin/x`) is read by its path, as before."""
    parts = rel.split("/")
    if rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        return read_installed(location / rel)
    try:
        with parent_of(location / rel, [location]) as (fd, name):
            return _bytes_or_link(lambda: read_at(fd, name, Cap.INSTALLED), lambda: readlink_at(fd, name))
    except FileNotFoundError:
        return None


def _bytes_or_link(read: Callable[[], bytes], readlink: Callable[[], str]) -> bytes | str | None:
    """A regular file's bytes; a symlink's target; None when missing. Anything else is UnreadableFile."""
    try:
        return read()
    except UnreadableFile as exc:
        if exc.why is Why.MISSING:
            return None
        if exc.why is not Why.SYMLINK:
            raise
    try:
        return readlink()
    except OSError:
        return None


def select_drift(report: DistReport, paths: Collection[str]) -> list[Drift]:
    """The report's drift, limited to `paths` when any are given (normalized like RECORD paths)."""
    if not paths:
        return list(report.drift)
    wanted = {os.path.normpath(p).replace(os.sep, "/") for p in paths}
    return [d for d in report.drift if os.path.normpath(d.path).replace(os.sep, "/") in wanted]


def needs_pristine(drift: Sequence[Drift]) -> list[Drift]:
    return [d for d in drift if d.state is not DriftState.ADDED]


def diff_files(location: Path, drift: Sequence[Drift], check: BuildCheck | None) -> list[FileDiff]:
    """One FileDiff per drift entry; `check` gives pristine bytes (None when only added files drift)."""
    diffs: list[FileDiff] = []
    mismatch = set(check.record_mismatch) if check else set()
    unavailable = dict(check.unavailable) if check else {}
    for item in drift:
        installed = read_installed_below(location, item.path)
        if isinstance(installed, str):
            text = f"{item.path}: replaced by a symlink to {installed}\n"
            diffs.append(FileDiff(path=item.path, state=item.state, text=text, note="symlink"))
            continue
        if item.state is DriftState.ADDED:
            text, binary = unified(item.path, None, installed)
            diffs.append(FileDiff(path=item.path, state=item.state, text=text, binary=binary))
            continue
        if item.path in mismatch:
            text = f"{item.path}: record-mismatch: the installed bytes equal the wheel's; its RECORD is stale\n"
            diffs.append(FileDiff(path=item.path, state=item.state, text=text, note="record-mismatch"))
            continue
        pristine = check.files.get(item.path) if check else None
        if pristine is None:
            reason = unavailable.get(item.path, "no pristine bytes")
            diffs.append(FileDiff(path=item.path, state=item.state, text=f"{item.path}: {reason}\n", note=reason))
            continue
        text, binary = unified(item.path, pristine.data, installed)
        diffs.append(FileDiff(path=item.path, state=item.state, text=text, binary=binary))
    return diffs


def diff_dist(
    env: Environment,
    dist: InstalledDist,
    report: DistReport,
    *,
    paths: Collection[str] = (),
    wheelhouse: Sequence[Path] = (),
    sources: Sequence[PristineSource] | None = None,
    environ: Mapping[str, str] | None = None,
    transfer: Transfer | None = None,
) -> list[FileDiff]:
    """The unified diff of every drifted file of `dist` (or of `paths`), pristine -> installed."""
    drift = select_drift(report, paths)
    check = None
    needed = needs_pristine(drift)
    if needed:
        check = find_pristine(
            env, dist, drift=needed, wheelhouse=wheelhouse, sources=sources, environ=environ, transfer=transfer
        )
    try:
        diffs = diff_files(dist.location, drift, check)
        if check is not None and check.record_edited:
            diffs += diff_files(dist.location, list(check.record_edited), check)
        return diffs
    finally:
        if check is not None:
            check.wheel.close()


__all__ = ["FileDiff", "PristineNotFound", "diff_dist", "diff_files", "select_drift", "unified"]
