"""systemd wiring: a drop-in that runs the gate as the service's ExecStartPre=."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from patchaudit.errors import InvalidUnit, PatchAuditError
from patchaudit.fs.atomic import atomic_write

DROP_IN_NAME = "patchaudit.conf"
UNIT_DIR = Path("etc/systemd/system")
# where systemd looks for system units, most important first (systemd.unit(5))
UNIT_PATH = ("etc/systemd/system", "run/systemd/system", "usr/local/lib/systemd/system", "usr/lib/systemd/system")
START_TIMEOUT = 180  # TimeoutStartSec= the drop-in sets: room for a cold gate of a big stack
GATE_TIMEOUT = 120  # the gate's own deadline, inside the start timeout
MARK = "# Written by `patchaudit systemd install"
_UNIT_CAP = 1 << 20
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?\.service$")


def unit_name(unit: str) -> str:
    """`vllm` or `vllm.service` -> `vllm.service`; only service units run ExecStartPre=."""
    name = unit if "." in unit.rsplit("@", 1)[-1] else unit + ".service"
    if "/" in name or not _UNIT_NAME.match(name) or len(name) > 255:
        raise InvalidUnit(f"{unit!r} is not a service unit name", hint="e.g. vllm.service or vllm@.service")
    return name


def executable() -> Path:
    """The absolute path of the patchaudit command that belongs to this installation."""
    beside = Path(sys.executable).absolute().parent / "patchaudit"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("patchaudit")
    if found is None:
        raise PatchAuditError("cannot find the patchaudit executable", hint="install patchaudit (pipx install ...)")
    return Path(found).absolute()


def quote(arg: str) -> str:
    """One argument as a unit file's command line reads it: specifiers and variables escaped."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./$-]+", arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def state_directory(unit: str) -> str:
    """The unit's own directory below /var/lib for the gate's caches: `patchaudit/<unit>`."""
    stem = unit_name(unit).removesuffix(".service")
    return "patchaudit/" + "".join(c if c.isalnum() or c in "-_." else "_" for c in stem).lstrip(".")


def drop_in(*, policy: Path, command: Path, warn_only: bool = False, unit: str = "service") -> str:
    """The drop-in text: ExecStartPre= runs the gate; a failing gate stops the start unless warn_only.

    StateDirectory= gives the gate a cache directory that the service's user owns (systemd creates
    it and passes it as $STATE_DIRECTORY), so a gate running as that user starts warm even when the
    environment belongs to root.
    """
    prefix = "-" if warn_only else ""
    line = f"ExecStartPre={prefix}{quote(str(command))} gate --policy {quote(str(policy))} --timeout {GATE_TIMEOUT}"
    what = "logs problems and lets the service start" if warn_only else "stops the start on any problem"
    return (
        "# Written by `patchaudit systemd install`.\n"
        f"# The patchaudit gate runs before the service starts and {what}.\n"
        "# Its caches go to /var/lib/<StateDirectory>, owned by the service's user.\n"
        f"# A cold gate of a big stack takes a while: it gives up after {GATE_TIMEOUT} s (and fails),\n"
        f"# within the {START_TIMEOUT} s this start may take.\n"
        "[Service]\n"
        f"TimeoutStartSec={START_TIMEOUT}\n"
        f"StateDirectory={state_directory(unit)}\n"
        f"{line}\n"
    )


def install(
    unit: str,
    *,
    policy: Path,
    root: Path = Path("/"),
    warn_only: bool = False,
    command: Path | None = None,
) -> Path:
    """Write `<root>/etc/systemd/system/UNIT.d/patchaudit.conf`; the policy must load cleanly first."""
    from patchaudit.gate.policy import load

    name = unit_name(unit)
    policy = policy.absolute()
    load(policy)  # a policy that cannot be read would stop the service at every start
    command = (command or executable()).absolute()
    found = find_unit(name, root)
    if found is None:
        where = ", ".join(str(root / d) for d in UNIT_PATH)
        raise InvalidUnit(f"no unit {name} in {where}", hint="install the service's unit first, then the gate")
    user = service_user(found, name, root)
    if user is not None:
        check_user(user, name, command=command, policy=policy, host=root == Path("/"))
    text = drop_in(policy=policy, command=command, warn_only=warn_only, unit=name)
    directory = root / UNIT_DIR / f"{name}.d"
    target = directory / DROP_IN_NAME
    try:
        atomic_write(target, text, mode=0o644)
    except OSError as exc:
        raise PatchAuditError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def _template(name: str) -> str | None:
    """`vllm@a.service` -> `vllm@.service` (an instance loads its template's file)."""
    prefix, at, rest = name.partition("@")
    if not at or rest.startswith("."):
        return None
    return f"{prefix}@{rest[rest.index('.') :]}"


def find_unit(name: str, root: Path) -> Path | None:
    """The file systemd loads for unit `name` below `root`, or where `systemctl cat` finds it; None."""
    names = [name, *filter(None, [_template(name)])]
    for directory in UNIT_PATH:
        for candidate in names:
            if (root / directory / candidate).is_file():
                return root / directory / candidate
    if root == Path("/") and shutil.which("systemctl"):
        try:
            proc = subprocess.run(
                ["systemctl", "cat", "--no-pager", "--", name], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        first = proc.stdout.splitlines()[:1]
        if proc.returncode == 0 and first and first[0].startswith("# /"):
            return Path(first[0][2:])
    return None


def service_user(unit_file: Path, name: str, root: Path) -> str | None:
    """`User=` as the unit file and its drop-ins set it (the last assignment wins); None: root."""
    from patchaudit.fs.safefs import UnreadableFile, read_capped_text

    files = [unit_file]
    for directory in reversed(UNIT_PATH):
        for owner in filter(None, [_template(name), name]):
            drop_ins = root / directory / f"{owner}.d"
            if drop_ins.is_dir():
                files += sorted(p for p in drop_ins.glob("*.conf") if p.name != DROP_IN_NAME)
    user: str | None = None
    for path in files:
        try:
            text = read_capped_text(path, _UNIT_CAP, follow=True)
        except UnreadableFile:
            continue
        section = ""
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("["):
                section = line
            elif section == "[Service]" and line.startswith("User="):
                user = line.removeprefix("User=").strip() or None
    return None if user in (None, "root", "0") else user


def check_user(user: str, unit: str, *, command: Path, policy: Path, host: bool) -> None:
    """The service's user must be able to run the gate and read the policy: tried as that user (as
    root; another user cannot switch). A user this host does not know is an error on the host itself."""
    import pwd

    try:
        entry = pwd.getpwnam(user) if not user.isdigit() else pwd.getpwuid(int(user))
    except KeyError:
        if host:
            raise PatchAuditError(f"{unit} runs as User={user}, who does not exist on this host") from None
        return
    if os.geteuid() != 0 or entry.pw_uid == 0:
        return

    def as_user(argv: list[str]) -> tuple[bool, str]:
        try:
            proc = subprocess.run(
                argv,
                user=entry.pw_uid,
                group=entry.pw_gid,
                extra_groups=os.getgrouplist(entry.pw_name, entry.pw_gid),
                cwd="/",
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, str(exc)
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return proc.returncode == 0, last

    ok, why = as_user([str(command), "--version"])
    if not ok:
        raise PatchAuditError(
            f"{unit} runs as User={user}, who cannot run {command} ({why}); the service could never start",
            hint=f"install patchaudit where {user} can run it (a venv under /opt), then install the gate from there",
        )
    ok, why = as_user(["/bin/sh", "-c", 'exec cat -- "$1" >/dev/null', "sh", str(policy)])
    if not ok:
        raise PatchAuditError(
            f"{unit} runs as User={user}, who cannot read the policy {policy} ({why})",
            hint=f"keep the policy where {user} can read it (e.g. /etc/patchaudit, mode 0644)",
        )


def uninstall(unit: str, *, root: Path = Path("/")) -> list[Path]:
    """Remove what `install` (and `install --timer`) wrote for `unit`, and nothing else: each file only
    if it still starts with patchaudit's mark; the drop-in directory only if that leaves it empty."""
    name = unit_name(unit)
    directory = root / UNIT_DIR / f"{name}.d"
    stem = name.removesuffix(".service").replace("@", "-")
    candidates = [directory / DROP_IN_NAME] + [
        root / UNIT_DIR / f"patchaudit-metrics-{stem}.{kind}" for kind in ("service", "timer")
    ]
    removed = []
    for path in candidates:
        try:
            with open(path, "rb") as fh:
                head = fh.read(len(MARK))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise PatchAuditError(f"cannot read {path}: {exc.strerror or exc}") from None
        if head != MARK.encode():
            raise PatchAuditError(f"{path} was not written by patchaudit; left as it is")
        path.unlink()
        removed.append(path)
    if removed and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        removed.append(directory)
    return removed


METRICS_TEXTFILE_DIR = Path("/var/lib/prometheus/node-exporter")  # Debian's prometheus-node-exporter default


def metrics_units(*, unit: str, policy: Path, command: Path, textfile: Path, interval: str) -> dict[str, str]:
    """A oneshot service that writes the textfile and a timer that runs it every `interval`."""
    stem = unit_name(unit).removesuffix(".service").replace("@", "-")
    base = f"patchaudit-metrics-{stem}"
    # the textfile is the unit's own (patchaudit_<unit>.prom): another unit's timer never overwrites it
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in stem).lstrip("_.-") or "unit"
    service = (
        "# Written by `patchaudit systemd install --timer`.\n"
        "[Unit]\n"
        f"Description=patchaudit drift metrics for {unit_name(unit)}\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={quote(str(command))} metrics --policy {quote(str(policy))} --textfile {quote(str(textfile))}"
        f" --name {name}\n"
        "# exit 1 is a verdict (drift found), already in the textfile; not a failed unit\n"
        "SuccessExitStatus=1\n"
    )
    timer = (
        "# Written by `patchaudit systemd install --timer`.\n"
        "[Unit]\n"
        f"Description=Refresh patchaudit drift metrics for {unit_name(unit)}\n"
        "[Timer]\n"
        "OnBootSec=1min\n"
        f"OnUnitActiveSec={interval}\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )
    return {f"{base}.service": service, f"{base}.timer": timer}


def install_timer(
    unit: str,
    *,
    policy: Path,
    root: Path = Path("/"),
    textfile: Path = METRICS_TEXTFILE_DIR,
    interval: str = "5min",
    command: Path | None = None,
) -> list[Path]:
    """Write the metrics service and timer into `<root>/etc/systemd/system`."""
    from patchaudit.gate.policy import load

    if not re.fullmatch(r"[0-9]+(us|ms|s|sec|min|m|h|d)?", interval):
        raise PatchAuditError(f"{interval!r} is not a timer interval", hint="e.g. 5min, 300s, 1h")
    policy = policy.absolute()
    load(policy)
    units = metrics_units(
        unit=unit, policy=policy, command=(command or executable()).absolute(), textfile=textfile, interval=interval
    )
    directory = root / UNIT_DIR
    written = []
    for name, text in units.items():
        target = directory / name
        try:
            atomic_write(target, text, mode=0o644)
        except OSError as exc:
            raise PatchAuditError(f"cannot write {target}: {exc.strerror or exc}") from None
        written.append(target)
    return written
