"""The environment a systemd unit gives its service, read from the unit file, its drop-ins and its
EnvironmentFile=s, each setting with the file and line it comes from.

Where systemd runs, `systemctl show` names the fragment and drop-ins it loaded; otherwise the unit
directories are searched as systemd would (first directory wins; drop-ins merge by file name).
"""

from __future__ import annotations

import enum
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import UnitNotFound
from patchaudit.safefs import Cap, UnreadableFile, read_capped_text

UNIT_DIRS = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Origin(enum.StrEnum):
    UNIT = "unit"
    DROP_IN = "drop-in"
    ENVIRONMENT_FILE = "environment-file"
    HOOK = "hook"  # a startup hook (.pth, sitecustomize) that sets os.environ
    PROCESS = "process"  # only seen in the running process's environment


@dataclass(frozen=True, kw_only=True, slots=True)
class Setting:
    """One variable set in one place: `where` is `path:line` (or `pid N` for a process)."""

    name: str
    value: str
    origin: Origin
    where: str
    only_if_unset: bool = False  # os.environ.setdefault


@dataclass(frozen=True, kw_only=True, slots=True)
class UnitFiles:
    """What systemd reads for a unit: its fragment, drop-ins in the order applied, drop-in directories."""

    unit: str
    fragment: Path | None
    drop_ins: tuple[Path, ...]
    drop_in_dirs: tuple[Path, ...]

    def watched(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.fragment, *self.drop_ins) if p is not None)


def find(unit: str, unit_dirs: Sequence[str | Path] = ()) -> UnitFiles:
    """Locate a unit's files; `unit_dirs` replaces the system's unit directories (tests, chroots)."""
    if not unit_dirs and _systemd_running():
        shown = _systemctl_show(unit)
        if shown is not None:
            return shown
    dirs = [Path(d) for d in (unit_dirs or UNIT_DIRS)]
    names = [unit]
    prefix, at, rest = unit.partition("@")
    if at and rest.split(".", 1)[0]:
        names.append(f"{prefix}@.{unit.rsplit('.', 1)[-1]}")  # a template instance falls back to its template
    fragment = next((d / n for n in names for d in dirs if (d / n).is_file()), None)
    suffix = unit.rsplit(".", 1)[-1]
    drop_in_dirs = [d / f"{n}.d" for d in dirs for n in (f"{suffix}", *reversed(names))]
    chosen: dict[str, Path] = {}
    for directory in drop_in_dirs:
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".conf") and entry not in chosen:
                chosen[entry] = directory / entry  # a higher-priority directory masks the same name
    if fragment is None and not chosen:
        where = ", ".join(str(d) for d in dirs)
        raise UnitNotFound(f"no unit file {unit} in {where}", hint="--unit-dir DIR names where the unit files are")
    drop_ins = tuple(chosen[name] for name in sorted(chosen))
    return UnitFiles(unit=unit, fragment=fragment, drop_ins=drop_ins, drop_in_dirs=tuple(drop_in_dirs))


def settings(files: UnitFiles) -> list[Setting]:
    """Every Environment= and EnvironmentFile= setting, in the order systemd applies them: the unit's
    Environment= lines (an empty one resets), then the EnvironmentFile=s, which override them."""
    assigned: list[Setting] = []
    env_files: list[tuple[str, str]] = []
    for path, origin in [(files.fragment, Origin.UNIT), *((p, Origin.DROP_IN) for p in files.drop_ins)]:
        if path is None:
            continue
        for line_no, key, value in _service_lines(path):
            where = f"{path}:{line_no}"
            if key == "Environment":
                if not value.strip():
                    assigned.clear()
                    continue
                for name, val in _assignments(value):
                    assigned.append(Setting(name=name, value=val, origin=origin, where=where))
            elif key == "EnvironmentFile":
                if not value.strip():
                    env_files.clear()
                    continue
                env_files.append((value.strip(), where))
    for spec, declared in env_files:
        optional = spec.startswith("-")
        path = Path(spec.removeprefix("-"))
        try:
            text = read_capped_text(path, Cap.SMALL, follow=True)
        except UnreadableFile as exc:
            if not optional:
                raise UnitNotFound(
                    f"{declared}: EnvironmentFile={path} cannot be read ({exc.why.value}): the unit would not start"
                ) from None
            continue
        for line_no, name, val in _env_file_lines(text):
            assigned.append(Setting(name=name, value=val, origin=Origin.ENVIRONMENT_FILE, where=f"{path}:{line_no}"))
    return assigned


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines with backslash continuations joined (systemd puts a space where the break was)."""
    pending: list[str] = []
    first = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            first = number
            if raw.lstrip().startswith(("#", ";")):
                continue
        if raw.endswith("\\"):
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        yield first, " ".join(pending)
        pending = []
    if pending:
        yield first, " ".join(pending)


def _service_lines(path: Path) -> Iterator[tuple[int, str, str]]:
    try:
        text = read_capped_text(path, Cap.SMALL, follow=True)
    except UnreadableFile:
        return
    section = None
    for number, line in _logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if section != "Service" or "=" not in stripped:
            continue
        key, _, value = stripped.partition("=")
        yield number, key.strip(), value.strip()


def _assignments(value: str) -> Iterator[tuple[str, str]]:
    """`Environment="A=b c" D=e` -> (A, "b c"), (D, e); specifier %% is %."""
    try:
        words = shlex.split(value, posix=True)
    except ValueError:
        words = value.split()
    for word in words:
        name, sep, val = word.partition("=")
        if sep and _NAME.match(name):
            yield name, val.replace("%%", "%")


def _env_file_lines(text: str) -> Iterator[tuple[int, str, str]]:
    for number, line in _logical_lines(text):
        stripped = line.strip()
        if not stripped or "=" not in stripped:
            continue
        name, _, value = stripped.partition("=")
        name, value = name.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if _NAME.match(name):
            yield number, name, value


def _systemd_running() -> bool:
    return os.path.isdir("/run/systemd/system")


def _systemctl_show(unit: str) -> UnitFiles | None:
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None
    try:
        proc = subprocess.run(
            [systemctl, "show", "--property=FragmentPath,DropInPaths", "--", unit],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    props = dict(line.partition("=")[::2] for line in proc.stdout.splitlines())
    fragment = props.get("FragmentPath") or None
    drop_ins = tuple(Path(p) for p in props.get("DropInPaths", "").split())
    if fragment is None and not drop_ins:
        return None
    return UnitFiles(
        unit=unit,
        fragment=Path(fragment) if fragment else None,
        drop_ins=drop_ins,
        # where a new drop-in would appear, so that a cached gate verdict notices it
        drop_in_dirs=tuple(sorted({p.parent for p in drop_ins} | {Path(d) / f"{unit}.d" for d in UNIT_DIRS})),
    )


def watched_paths(files: UnitFiles) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(files, directories) whose change can change the unit's environment: for a cached verdict."""
    paths = list(files.watched())
    for path in files.watched():
        for _number, key, value in _service_lines(path):
            if key == "EnvironmentFile" and value.strip():
                paths.append(Path(value.strip().removeprefix("-")))
    return tuple(paths), files.drop_in_dirs
