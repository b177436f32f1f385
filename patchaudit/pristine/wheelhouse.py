"""Pristine source 1: a directory of local wheels (`--wheelhouse DIR` or PATCHAUDIT_WHEELHOUSE)."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from patchaudit.environment import InstalledDist
from patchaudit.pristine.interface import PristineWheel
from patchaudit.pristine.zipwheel import open_local, wheel_matches

ENV_VAR = "PATCHAUDIT_WHEELHOUSE"


def from_environ(environ: dict[str, str] | os._Environ[str] = os.environ) -> list[Path]:
    value = environ.get(ENV_VAR, "")
    return [Path(p) for p in value.split(os.pathsep) if p]


class Wheelhouse:
    """Wheels in a directory (not recursive), matched by filename: name, version, build, tags."""

    name = "wheelhouse"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def find(self, dist: InstalledDist, needed: Collection[str] = ()) -> PristineWheel | None:
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return None
        for name in names:
            if name.endswith(".whl") and wheel_matches(name, dist):
                return open_local(self.directory / name, "wheelhouse")
        return None
