"""The gate's verdict cache: a fingerprint of every file the audit read, by stat, and the verdict it gave.

Each gate (its key: the options it ran with) keeps a file of its own, `gate-<digest of the key>.json`,
in the directory cachedir.locate() chose, so a warm gate reads and parses only its own; the newest
CACHE_KEEP are kept. The file is one line of JSON (the plan's listings given by their lengths) and
then the listings themselves, raw: they are nearly all of its ~3 MB, and parsing them as JSON strings
cost a warm gate ~6 ms before its first stat.

A warm gate does not re-verify: it keeps the last verdict together with a fingerprint of every
file the audit looked at (path, mode, size, mtime_ns, ctime_ns, inode, device; what is read and how it
is fingerprinted is patchaudit.gate.plan) and reuses the verdict only while that fingerprint is
unchanged. ctime cannot be set from user space, so an edit hidden with `touch -r` still changes the
fingerprint and the audit runs again.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from patchaudit.errors import ExitCode
from patchaudit.fs.safefs import Cap, UnreadableFile, parse_json, read_capped
from patchaudit.gate.plan import FilePlan, stat_row
from patchaudit.target.cacheplace import sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from patchaudit.gate.verdict import Verdict

CACHE_PREFIX = "gate-"
# 3: each walked root's listing is kept, so a warm check lists no directory; 4: in blocks; 5: a file per key;
# 6: a block may start inside a directory; 7: the listings follow the JSON line, raw
CACHE_VERSION = 7
CACHE_KEEP = 8


def cache_name(key: str) -> str:
    """The file that keeps the verdict of the gate with this key."""
    return CACHE_PREFIX + sha256_hex(key.encode("utf-8", "surrogateescape"))[:16] + ".json"


# --- the verdict cache, beside the environment's stat cache (where: patchaudit.target.cachedir) ---


def predicted_prefix(python: Path | None, site_path: Path | None) -> Path:
    """Where the environment's prefix most likely is, without running its interpreter."""
    if site_path is not None:
        site = site_path.absolute()
        parts = site.parts
        if len(parts) >= 3 and parts[-2].startswith("python") and parts[-3] in ("lib", "lib64"):
            return site.parents[2]
        return site.parent if parts[-1] in ("site-packages", "dist-packages") else site
    exe = (python if python is not None else Path(sys.executable)).absolute()
    if exe.is_dir():
        exe = exe / "bin" / "python"
    for d in (exe.parent, exe.parent.parent):
        if (d / "pyvenv.cfg").is_file():
            return d
    return exe.parent.parent


def _resolution_stat(python: Path | None, site_path: Path | None) -> list[Any]:
    """What the resolved environment depends on: the interpreter (and its pyvenv.cfg) or the site dir."""
    paths = [str(site_path.absolute())] if site_path is not None else []
    if site_path is None:
        exe = (python if python is not None else Path(sys.executable)).absolute()
        paths = [str(exe), str(exe.parent / "pyvenv.cfg"), str(exe.parent.parent / "pyvenv.cfg")]
    rows: list[Any] = [list(stat_row(p)) for p in paths]
    if site_path is None:
        rows.append(list(stat_row(os.path.realpath(paths[0]))))
    return rows


class VerdictCache:
    def __init__(self, entry: dict[str, Any], python: Path | None, site_path: Path | None) -> None:
        self.entry = entry
        self.python = python
        self.site_path = site_path

    @classmethod
    def open(cls, directory: Path, key: str, python: Path | None, site_path: Path | None) -> VerdictCache | None:
        """The cache of the gate with this key (None: there is none, or not one this gate can use)."""
        try:
            raw = read_capped(directory / cache_name(key), Cap.JSON)
            cut = raw.index(b"\n")
            data = parse_json(raw[:cut])
        except (UnreadableFile, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or data.get("key") != key:
            return None  # another version's, or another key's of the same digest
        entry = data.get("entry")
        if not isinstance(entry, dict):
            return None
        try:
            entry["plan"]["listings"] = _unpack(memoryview(raw)[cut + 1 :], entry["plan"]["listings"])
        except (KeyError, TypeError, ValueError):
            return None
        return cls(entry, python, site_path)

    def lookup(self, processes: int = 1) -> Cached | Verdict | None:
        entry = self.entry
        try:
            if entry["resolved"] != _resolution_stat(self.python, self.site_path):
                return None
            plan = FilePlan.from_dict(entry["plan"])
            if plan.fingerprint(processes) != entry["fingerprint"]:
                return None
            return kept(entry["verdict"])
        except (KeyError, TypeError, ValueError):
            return None

    @staticmethod
    def store(
        directory: Path,
        python: Path | None,
        site_path: Path | None,
        key: str,
        plan: FilePlan,
        fingerprint: int,
        verdict: Verdict,
    ) -> str | None:
        """Keep the verdict; None, or why a cache that cannot be written (full, read-only) was not kept."""
        from patchaudit.gate.verdict import to_dict

        path = directory / cache_name(key)
        planned = plan.to_dict()
        listings = [listing.encode("utf-8", "surrogateescape") for listing in planned["listings"]]
        planned["listings"] = [len(listing) for listing in listings]
        entry = {
            "resolved": _resolution_stat(python, site_path),
            "plan": planned,
            "fingerprint": fingerprint,
            "verdict": to_dict(verdict),
        }
        from patchaudit.fs.atomic import atomic_write  # only a miss writes: not on the warm path

        try:
            head = json.dumps({"version": CACHE_VERSION, "key": key, "entry": entry}, separators=(",", ":"))
            # ASCII without a newline (json.dumps escapes both), then the listings, byte for byte
            atomic_write(path, b"\n".join([head.encode(), b"".join(listings)]), durable=False)
        except OSError as exc:
            return f"cannot write {path} ({exc.strerror or exc})"
        _drop_oldest(directory)
        return None


class Cached:
    """A kept verdict that found no problem, as the journal prints it: a warm gate that passes builds no
    dataclass (the Verdict of patchaudit.gate.verdict and what it imports cost it milliseconds)."""

    __slots__ = ("exit_code", "distributions", "files_checked", "approved", "baseline", "seconds")
    problems = ()
    notes = ()
    cached = True
    failed_open = False

    def __init__(self, distributions: int, files_checked: int, approved: int, baseline: str | None) -> None:
        self.exit_code = ExitCode.CLEAN
        self.distributions = distributions
        self.files_checked = files_checked
        self.approved = approved
        self.baseline = baseline
        self.seconds = 0.0

    def verdict(self) -> Verdict:
        from patchaudit.gate.verdict import Verdict

        return Verdict(
            exit_code=self.exit_code,
            distributions=self.distributions,
            files_checked=self.files_checked,
            approved=self.approved,
            baseline=self.baseline,
            cached=True,
        )


def kept(d: dict[str, Any]) -> Cached | Verdict:
    """The verdict kept in a cache file (ValueError, KeyError, TypeError: not one this gate can use)."""
    code = ExitCode(int(d["exit_code"]))
    if code not in (ExitCode.CLEAN, ExitCode.PROBLEMS):
        raise ValueError(code)
    if int(d["distributions"]) < 1:  # kept by an older gate that let an empty directory pass
        raise ValueError(d["distributions"])
    facts = (int(d["distributions"]), int(d["files_checked"]), int(d["approved"]), d.get("baseline"))
    if code == ExitCode.CLEAN and not d["problems"]:
        return Cached(*facts)
    from patchaudit.gate.verdict import Problem, Verdict

    problems = tuple(
        Problem(kind=k, where=w, path=p, detail=t, rule=r, severity=s) for k, w, p, t, r, s in d["problems"]
    )
    distributions, files_checked, approved, baseline = facts
    return Verdict(
        exit_code=code,
        problems=problems,
        distributions=distributions,
        files_checked=files_checked,
        approved=approved,
        baseline=baseline,
        cached=True,
    )


def _unpack(raw: memoryview, sizes: list[int]) -> list[str]:
    """The listings, `sizes` bytes each, of the run after the JSON line (ValueError: they do not fit),
    each decoded from its place in the file's bytes: no copy of the ~3 MB run is made."""
    if any(not isinstance(n, int) or n < 0 for n in sizes) or sum(sizes) != len(raw):
        raise ValueError("listings that do not fit their sizes")
    listings, start = [], 0
    for n in sizes:
        listings.append(str(raw[start : start + n], "utf-8", "surrogateescape"))
        start += n
    return listings


def _drop_oldest(directory: Path) -> None:
    """Remove all but the newest CACHE_KEEP verdict files (an older version's among them)."""
    try:
        with os.scandir(directory) as it:
            kept = [(e.stat(follow_symlinks=False).st_mtime_ns, e.name) for e in it if e.name.startswith(CACHE_PREFIX)]
    except OSError:
        return
    for _, name in sorted(kept, reverse=True)[CACHE_KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(directory / name)
