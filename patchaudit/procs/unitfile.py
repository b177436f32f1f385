"""The environment a systemd unit gives its service, read from the unit file, its drop-ins and its
EnvironmentFile=s, each setting with the file and line it comes from.

Where systemd runs, `systemctl show` names the fragment and drop-ins it loaded; otherwise the unit
directories are searched as systemd would (systemd.unit(5): first directory wins; drop-ins of the
instance, the template, dash prefixes and the unit type merge by file name). The grammars are in
unitsyntax.py.
"""

from __future__ import annotations

import enum
import functools
import glob
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import UnitNotFound
from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped_text
from patchaudit.procs.unitsyntax import Specifiers, SyntaxProblem, env_file, env_name_ok, expand, unit_lines, words

# systemd's search path for system units (systemd.unit(5)), highest priority first; a name found in an
# earlier directory hides the same name in a later one.
UNIT_DIRS = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
    "/run/systemd/generator.late",
)


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
    dirs = [Path(d) for d in (unit_dirs or search_path())]
    names = [unit]
    prefix, at, rest = unit.partition("@")
    suffix = unit.rsplit(".", 1)[-1]
    if at and rest.split(".", 1)[0]:
        names.append(f"{prefix}@.{suffix}")  # a template instance falls back to its template
    # the instance's own file in any directory comes before the template's
    fragment = next((d / n for n in names for d in dirs if (d / n).is_file()), None)
    drop_in_dirs = dropin_dirs(unit, dirs)
    chosen: dict[str, Path] = {}
    for directory in drop_in_dirs:
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".conf") and entry not in chosen:
                chosen[entry] = directory / entry  # an earlier directory masks the same file name
    if fragment is None and not chosen:
        where = ", ".join(str(d) for d in dirs)
        raise UnitNotFound(f"no unit file {unit} in {where}", hint="--unit-dir DIR names where the unit files are")
    drop_ins = tuple(chosen[name] for name in sorted(chosen))  # applied in file-name order
    return UnitFiles(unit=unit, fragment=fragment, drop_ins=drop_ins, drop_in_dirs=drop_in_dirs)


def search_path(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """systemd's unit search path: `$SYSTEMD_UNIT_PATH` replaces it, and a trailing `:` appends the usual
    directories (systemd.unit(5))."""
    value = environ.get("SYSTEMD_UNIT_PATH")
    if not value:
        return UNIT_DIRS
    given = tuple(d for d in value.split(":") if d)
    return given + UNIT_DIRS if value.endswith(":") else given


def dropin_dirs(unit: str, dirs: Sequence[Path]) -> tuple[Path, ...]:
    """Drop-in directories in systemd's order: per search-path directory the unit's own (`vllm@a.service.d`),
    its template's (`vllm@.service.d`), each dash prefix's (`vllm-.service.d`); then the unit type's
    (`service.d`), the most generic, last. An earlier directory's file hides a later one of the same name."""
    out: list[Path] = []
    for d in dirs:
        for name in _dropin_names(unit):
            out.append(d / f"{name}.d")
    suffix = unit.rsplit(".", 1)[-1]
    out += [d / f"{suffix}.d" for d in dirs]
    return tuple(dict.fromkeys(out))


def _dropin_names(name: str) -> list[str]:
    """The unit names whose `.d` directories apply to `name`, most specific first (systemd's
    unit_file_find_dirs): the name, its template, then the same for its dash prefix, recursively."""
    names = [name]
    stem, _, suffix = name.rpartition(".")
    prefix, at, instance = stem.partition("@")
    is_instance = bool(at and instance)
    if is_instance:
        names += _dropin_names(f"{prefix}@.{suffix}")
    chopped = False
    while True:
        dash = prefix.rfind("-")
        if dash <= 0:
            return list(dict.fromkeys(names))
        if dash + 1 < len(prefix) or chopped:
            prefix = prefix[: dash + 1]
            break
        prefix, chopped = prefix[:dash], True  # a trailing dash is chopped off once
    names += _dropin_names(f"{prefix}@{instance}.{suffix}" if is_instance else f"{prefix}.{suffix}")
    return list(dict.fromkeys(names))


def settings(files: UnitFiles, manager: Mapping[str, str] | None = None) -> list[Setting]:
    """Every Environment= and EnvironmentFile= setting, in the order systemd applies them: the unit's
    Environment= lines (an empty one resets), then the EnvironmentFile=s, which override them.

    Specifiers are expanded as for a unit of the system manager (`manager` overrides its values:
    `{"h": "/home/u"}`); EnvironmentFile= takes a glob and `-` (missing is fine)."""
    assigned, env_files = declared(files, manager)
    for spec_path, where_declared in env_files:
        assigned += _read_env_files(spec_path, where_declared)
    return assigned


def declared(files: UnitFiles, manager: Mapping[str, str] | None = None) -> tuple[list[Setting], list[tuple[str, str]]]:
    """(the Environment= assignments in force, the EnvironmentFile= specs in force with where each is
    declared), specifiers expanded: what `systemd --test` prints as Environment: and EnvironmentFile:."""
    spec = Specifiers(unit=files.unit, fragment=str(files.fragment or ""), manager=manager or system_manager())
    assigned: list[Setting] = []
    env_files: list[tuple[str, str]] = []
    for path, origin in [(files.fragment, Origin.UNIT), *((p, Origin.DROP_IN) for p in files.drop_ins)]:
        if path is None:
            continue
        for line_no, key, value in _service_lines(path):
            where = f"{path}:{line_no}"
            if key == "Environment":
                if not value:
                    assigned.clear()
                    continue
                for name, val in _assignments(value, spec):
                    assigned.append(Setting(name=name, value=val, origin=origin, where=where))
            elif key == "EnvironmentFile":
                if not value:
                    env_files.clear()
                    continue
                try:
                    expanded = expand(value, spec)
                except SyntaxProblem:
                    continue  # systemd ignores the setting
                if os.path.isabs(expanded.removeprefix("-")):
                    env_files.append((expanded, where))
    return assigned, env_files


def _read_env_files(spec_path: str, declared: str) -> list[Setting]:
    """The assignments of every file an EnvironmentFile= spec names (a glob; `-`: may match nothing)."""
    assigned: list[Setting] = []
    optional = spec_path.startswith("-")
    pattern = spec_path.removeprefix("-")
    matched = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
    if not matched:
        if optional:
            return assigned
        raise UnitNotFound(f"{declared}: EnvironmentFile={pattern} matches no file: the unit would not start")
    for path in map(Path, matched):
        try:
            text = read_capped_text(path, Cap.SMALL, follow=True)
        except UnreadableFile as exc:
            if optional:
                continue
            raise UnitNotFound(
                f"{declared}: EnvironmentFile={path} cannot be read ({exc.why.value}): the unit would not start"
            ) from None
        for line_no, name, val in env_file(text):
            where = f"{path}:{line_no}"
            assigned.append(Setting(name=name, value=val, origin=Origin.ENVIRONMENT_FILE, where=where))
    return assigned


def _service_lines(path: Path) -> Iterator[tuple[int, str, str]]:
    try:
        text = read_capped_text(path, Cap.SMALL, follow=True)
    except UnreadableFile:
        return
    for number, section, key, value in unit_lines(text):
        if section == "Service":
            yield number, key, value


def exec_start(files: UnitFiles) -> str | None:
    """The command line of the unit's (last) ExecStart=, drop-ins applied (an empty one resets)."""
    found: str | None = None
    for path in files.watched():
        for _line_no, key, value in _service_lines(path):
            if key == "ExecStart":
                found = value or None
    return found


def _assignments(value: str, spec: Specifiers) -> Iterator[tuple[str, str]]:
    """`Environment="A=b c" D=e` -> (A, "b c"), (D, e): systemd's words, each with its specifiers expanded;
    a word systemd would ignore is left out, and a syntax error ends the line as it does for systemd."""
    try:
        for word in words(value):
            try:
                resolved = expand(word, spec)
            except SyntaxProblem:
                continue
            name, sep, val = resolved.partition("=")
            if sep and env_name_ok(name):
                yield name, val
    except SyntaxProblem:
        return


@functools.lru_cache(maxsize=1)
def system_manager() -> Mapping[str, str]:
    """What the manager-wide specifiers mean for the system manager (systemd.unit(5))."""
    uname = os.uname()
    host = uname.nodename
    release = _os_release()
    arch = {"x86_64": "x86-64", "aarch64": "arm64", "i686": "x86", "ppc64le": "ppc64-le"}.get(uname.machine)
    return {
        "u": "root", "U": "0", "g": "root", "G": "0", "h": "/root", "s": "/bin/sh",
        "t": "/run", "S": "/var/lib", "C": "/var/cache", "L": "/var/log", "E": "/etc",
        "T": "/tmp", "V": "/var/tmp", "H": host, "l": host.split(".", 1)[0],
        "m": _first_line("/etc/machine-id"), "b": _first_line("/proc/sys/kernel/random/boot_id").replace("-", ""),
        "v": uname.release, "a": arch or uname.machine,
        "o": release.get("ID", ""), "w": release.get("VERSION_ID", ""), "B": release.get("BUILD_ID", ""),
        "W": release.get("VARIANT_ID", ""), "M": release.get("IMAGE_ID", ""), "A": release.get("IMAGE_VERSION", ""),
        "q": "",
    }  # fmt: skip


def _first_line(path: str) -> str:
    try:
        return read_capped_text(path, Cap.SMALL, follow=True).strip()
    except UnreadableFile:
        return ""


def _os_release() -> dict[str, str]:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = read_capped_text(path, Cap.SMALL, follow=True)
        except UnreadableFile:
            continue
        return {name: value for _line, name, value in env_file(text)}
    return {}


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
            if key == "EnvironmentFile" and value:
                pattern = value.removeprefix("-")
                # a glob's matches can change: watch the directory it looks in
                paths.append(Path(pattern).parent if glob.has_magic(pattern) or "%" in pattern else Path(pattern))
    return tuple(paths), files.drop_in_dirs
