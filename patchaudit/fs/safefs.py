"""The one way patchaudit reads a file the target controls: non-blocking, typed, bounded.

Everything below a target is input, and a local user may have put a FIFO, a device, a symlink to
`/dev/zero` or a giant file where a RECORD, a `.pth` or a manifest should be. A read here opens without
blocking and without following a final symlink, checks on the open descriptor that it holds a regular
file, and reads at most a cap chosen per kind of file. Anything else is an `UnreadableFile` that says why,
never a read to the end and never a wait. `dir_fd` reads a name relative to a directory descriptor, for
walks that must not resolve a path string twice.
"""

from __future__ import annotations

import enum
import errno
import json
import os
import stat

from patchaudit.errors import PatchAuditError

TYPE_CHECKING = False  # no typing import: the warm gate reads its cache through this module
if TYPE_CHECKING:
    from typing import Any

KIB = 1 << 10
MIB = 1 << 20


class Cap(enum.IntEnum):
    """The most bytes read of one kind of file; a file past its cap is refused, not cut."""

    RECORD = 64 * MIB  # torch's RECORD is ~2 MB; a 30x margin
    METADATA = 4 * MIB  # headers are read from the first 64 KiB; the description may follow
    SMALL = 1 * MIB  # WHEEL, INSTALLER, direct_url.json, pyvenv.cfg, refs, unit files, env files
    PTH = 1 * MIB  # a .pth or sitecustomize.py that no distribution owns
    SOURCE = 64 * MIB  # a source file the hazard rules parse
    JSON = 256 * MIB  # journals, manifests, baselines, reports given back
    CONFIG = 64 * MIB  # a model's config.json and friends
    PROC = 4 * MIB  # a /proc file (maps, environ, cmdline)
    INSTALLED = 1024 * MIB  # an installed file read whole to diff, quarantine or restore it


class Why(enum.StrEnum):
    """Why a file could not be read as a regular file within its cap."""

    MISSING = "missing"
    SYMLINK = "a symlink"
    NOT_REGULAR = "not a regular file"
    TOO_LARGE = "larger than its cap"
    ERROR = "unreadable"


class UnreadableFile(PatchAuditError):
    """A file of the target that is not a regular file within its cap, or that cannot be opened."""

    def __init__(self, path: str | os.PathLike[str], why: Why, detail: str = "") -> None:
        self.path = os.fspath(path)
        self.why = why
        self.detail = detail
        text = f"{self.path!r}: {why.value}" + (f" ({detail})" if detail else "")
        super().__init__(text)


_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def read_capped(
    path: str | os.PathLike[str],
    cap: int,
    *,
    dir_fd: int | None = None,
    follow: bool = False,
) -> bytes:
    """The bytes of the regular file at `path`, at most `cap` of them; UnreadableFile for anything else.

    A final symlink is refused unless `follow` (for files the user named, never for files found in a
    tree). Directories, FIFOs, sockets and devices are refused on the open descriptor, so a FIFO never
    blocks: O_NONBLOCK makes its open return at once.
    """
    flags = _FLAGS if follow else _FLAGS | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise _open_error(path, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, Why.NOT_REGULAR, _kind(st.st_mode))
        if st.st_size > cap:
            raise UnreadableFile(path, Why.TOO_LARGE, f"{st.st_size} bytes, cap {cap}")
        chunks: list[bytes] = []
        left = cap + 1  # one byte past the cap shows a file that grew after fstat
        # the whole file in one read when fstat told its size: one buffer, and no copy to join it
        want = max(st.st_size + 1, 1 * MIB)
        while left > 0:
            chunk = os.read(fd, min(left, want))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
            want = 1 * MIB
        if left <= 0:
            raise UnreadableFile(path, Why.TOO_LARGE, f"grew past cap {cap}")
        return b"".join(chunks)
    except OSError as exc:
        raise UnreadableFile(path, Why.ERROR, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def read_capped_text(
    path: str | os.PathLike[str],
    cap: int,
    *,
    dir_fd: int | None = None,
    follow: bool = False,
    errors: str = "replace",
) -> str:
    """`read_capped` decoded as UTF-8 (undecodable bytes replaced unless `errors` says otherwise)."""
    return read_capped(path, cap, dir_fd=dir_fd, follow=follow).decode("utf-8", errors)


def read_capped_or_none(
    path: str | os.PathLike[str],
    cap: int,
    *,
    dir_fd: int | None = None,
    follow: bool = False,
) -> bytes | None:
    """`read_capped`, with None where the file is missing; any other refusal still raises."""
    try:
        return read_capped(path, cap, dir_fd=dir_fd, follow=follow)
    except UnreadableFile as exc:
        if exc.why is Why.MISSING:
            return None
        raise


def parse_json(data: bytes | str) -> Any:
    """JSON from the target or the user; every way it can be bad is a ValueError: syntax, encoding,
    nesting deep enough to exhaust the parser's recursion, an integer too long to convert."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except ValueError:
        raise
    except (TypeError, MemoryError) as exc:
        raise ValueError(f"cannot be parsed ({type(exc).__name__})") from None


def parse_toml(data: bytes | str) -> dict[str, Any]:
    """TOML, with every way it can be bad a ValueError (tomllib's own errors are ValueErrors already)."""
    import tomllib

    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | os.PathLike[str], cap: int = Cap.JSON, *, dir_fd: int | None = None) -> Any:
    """A JSON file of the target: `read_capped` then `parse_json` (UnreadableFile, or ValueError)."""
    return parse_json(read_capped(path, cap, dir_fd=dir_fd))


def _open_error(path: str | os.PathLike[str], exc: OSError) -> UnreadableFile:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return UnreadableFile(path, Why.MISSING)
    if exc.errno == errno.ELOOP:
        return UnreadableFile(path, Why.SYMLINK)
    if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
        return UnreadableFile(path, Why.NOT_REGULAR, "socket")
    return UnreadableFile(path, Why.ERROR, exc.strerror or str(exc))


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


__all__ = [
    "Cap",
    "UnreadableFile",
    "Why",
    "parse_json",
    "parse_toml",
    "read_capped",
    "read_capped_or_none",
    "read_capped_text",
    "read_json",
]

# Every write, rename, unlink, mkdir and chmod below a target walks from a trusted root by directory
# descriptors, in the sibling module patchaudit.fs.beneath (it reads through read_capped above); it is
# not imported here: the warm gate reads its cache with this module alone.
