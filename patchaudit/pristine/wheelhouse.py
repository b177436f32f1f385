"""Pristine source 1: a directory of local wheels (`--wheelhouse DIR` or PATCHAUDIT_WHEELHOUSE)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path

from patchaudit.errors import PristineNotFound
from patchaudit.pristine.interface import PristineWheel
from patchaudit.pristine.zipwheel import open_local, wheel_match
from patchaudit.target.environment import InstalledDist

ENV_VAR = "PATCHAUDIT_WHEELHOUSE"


def from_environ(environ: dict[str, str] | os._Environ[str] = os.environ) -> list[Path]:
    value = environ.get(ENV_VAR, "")
    return [Path(p) for p in value.split(os.pathsep) if p]


class Wheelhouse:
    """Wheels in a directory (not recursive), matched by filename: name, version, build, tags."""

    name = "wheelhouse"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def all_wheels(self, dist: InstalledDist, needed: Collection[str] = ()) -> Iterator[PristineWheel]:
        """Every wheel of this name, version and build; the installed WHEEL file's exact tags first."""
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return
        ranked = sorted(
            (-score, name) for name in names if name.endswith(".whl") and (score := wheel_match(name, dist)) > 0
        )
        for _, name in ranked:
            try:
                yield open_local(self.directory / name, "wheelhouse")
            except PristineNotFound:
                continue  # unreadable: the next candidate may be the one

    def find(self, dist: InstalledDist, needed: Collection[str] = ()) -> PristineWheel | None:
        return next(iter(self.all_wheels(dist, needed)), None)
