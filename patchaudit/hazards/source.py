"""One file handed to the hazard engine."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SourceFile"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceFile:
    """One file to check, as the scan found it.

    `drifted` files are reported against their changed lines; a file that verifies against
    RECORD (drifted=False, `--all-files`) gives findings with in_change false.
    """

    path: str
    installed: bytes
    pristine: bytes | None
    drifted: bool = True
    # The directory `path` is relative to (the distribution's location), where a rule may read the
    # modules the file imports from its own package; None: no other file is read.
    location: str | None = None
