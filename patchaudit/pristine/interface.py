"""What a source of pristine bytes is: given an installed distribution, a wheel it can read from."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Protocol

from patchaudit.target.environment import InstalledDist
from patchaudit.target.record import Record


class PristineWheel(Protocol):
    """One candidate wheel: its RECORD and the bytes of its members."""

    @property
    def filename(self) -> str: ...

    @property
    def origin(self) -> str:
        """Where it came from, for messages: `wheelhouse /srv/wh/x.whl`, `index https://...`."""
        ...

    @property
    def authentic(self) -> bool:
        """The whole wheel's sha256 equals the one pip recorded for this install in direct_url.json.

        A hash an index publishes does not make a wheel authentic: it proves the file is what the index
        serves, not that it is the build that was installed.
        """
        ...

    def record(self) -> Record: ...

    def has(self, member: str) -> bool: ...

    def read(self, member: str, *, limit: int) -> bytes:
        """The member's bytes; refuses symlink entries and anything longer than `limit`."""
        ...

    def mode(self, member: str) -> int:
        """The file mode pip would give the member: 0o755 when any executable bit is set, else 0o644."""
        ...

    def close(self) -> None: ...


class PristineSource(Protocol):
    """A place pristine wheels may come from."""

    name: str

    def find(self, dist: InstalledDist, needed: Collection[str]) -> PristineWheel | None:
        """A wheel of exactly this dist (name, version, tags) that can provide `needed` members, or None."""
        ...


def candidates(source: PristineSource, dist: InstalledDist, needed: Collection[str]) -> Iterator[PristineWheel]:
    """Every wheel a source holds for `dist`, best first; a source that knows only one gives `find`'s.

    Several wheels of one version may sit side by side (other tags, another build): a source that can
    tell them apart has `all_wheels()`, and each is checked in turn until one is the installed build.
    """
    many = getattr(source, "all_wheels", None)
    if many is not None:
        yield from many(dist, needed)
        return
    one = source.find(dist, needed)
    if one is not None:
        yield one
