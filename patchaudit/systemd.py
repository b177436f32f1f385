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


def drop_in(*, policy: Path, command: Path, warn_only: bool = False) -> str:
    """The drop-in text: ExecStartPre= runs the gate; a failing gate stops the start unless warn_only."""
    prefix = "-" if warn_only else ""
    line = f"ExecStartPre={prefix}{quote(str(command))} gate --policy {quote(str(policy))}"
    what = "logs problems and lets the service start" if warn_only else "stops the start on any problem"
    return (
        "# Written by `patchaudit systemd install`.\n"
        f"# The patchaudit gate runs before the service starts and {what}.\n"
        "[Service]\n"
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
    text = drop_in(policy=policy, command=(command or executable()).absolute(), warn_only=warn_only)
    directory = root / UNIT_DIR / f"{name}.d"
    target = directory / DROP_IN_NAME
    try:
        atomic_write(target, text, mode=0o644)
    except OSError as exc:
        raise PatchAuditError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
