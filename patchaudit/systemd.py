"""systemd wiring: a drop-in that runs the gate as the service's ExecStartPre=."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from patchaudit.atomic import atomic_write
from patchaudit.errors import InvalidUnit, PatchAuditError

DROP_IN_NAME = "patchaudit.conf"
UNIT_DIR = Path("etc/systemd/system")
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
    line = f"ExecStartPre={prefix}{quote(str(command))} gate --policy {quote(str(policy))}"
    what = "logs problems and lets the service start" if warn_only else "stops the start on any problem"
    return (
        "# Written by `patchaudit systemd install`.\n"
        f"# The patchaudit gate runs before the service starts and {what}.\n"
        "# Its caches go to /var/lib/<StateDirectory>, owned by the service's user.\n"
        "[Service]\n"
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
    from patchaudit.policy import load

    name = unit_name(unit)
    policy = policy.absolute()
    load(policy)  # a policy that cannot be read would stop the service at every start
    text = drop_in(policy=policy, command=(command or executable()).absolute(), warn_only=warn_only, unit=name)
    directory = root / UNIT_DIR / f"{name}.d"
    target = directory / DROP_IN_NAME
    try:
        atomic_write(target, text, mode=0o644)
    except OSError as exc:
        raise PatchAuditError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


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
    from patchaudit.policy import load

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
