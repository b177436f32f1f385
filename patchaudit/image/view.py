"""The files an image holds: its layers stacked in order, whiteouts applied, each file's layer kept."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace

from patchaudit.image.stream import LayerRead, Member

MAX_LINKS = 40


@dataclass(slots=True)
class Entry:
    layer: int
    member: Member


@dataclass(slots=True)
class View:
    entries: dict[str, Entry] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)  # a lower layer's file -> the layer that deleted it
    shadowed: dict[str, list[Entry]] = field(default_factory=dict)  # lower versions of a replaced file
    removed: dict[str, Entry] = field(default_factory=dict)  # the file a whiteout deleted, by its path

    def apply(self, layer: LayerRead) -> None:
        """Stack one more layer: its whiteouts hide the layers below, then its members land."""
        for target in layer.whiteouts:
            self._remove(target, layer.index, itself=True)
        for directory in layer.opaque:
            self._remove(directory, layer.index, itself=False)
        for member in layer.members:
            if member.kind == "h" and member.link is not None:
                below = self.entries.get(member.link)
                if below is not None and below.member.kind == "f":  # a hard link to a lower layer's file
                    member = replace(below.member, path=member.path)
            old = self.entries.get(member.path)
            if old is not None:
                if old.member.kind == "d" and member.kind != "d":
                    self._remove(member.path, layer.index, itself=False)
                elif old.member.kind == "f" and old.layer != layer.index:
                    self.shadowed.setdefault(member.path, []).append(old)
            if member.kind == "d" and old is not None and old.member.kind == "d":
                continue  # a directory entry again: what lies below it stays
            self.entries[member.path] = Entry(layer=layer.index, member=member)
            self.deleted.pop(member.path, None)
            self.removed.pop(member.path, None)

    def _remove(self, path: str, index: int, *, itself: bool) -> None:
        old = self.entries.get(path)
        if itself and old is not None:
            del self.entries[path]
            self.deleted[path] = index
            if old.member.kind == "f":
                self.removed[path] = old
        if old is None or old.member.kind == "d" or not itself:
            below = path + "/" if path else ""
            for key in [k for k in self.entries if k.startswith(below)]:
                if self.entries[key].layer < index:
                    del self.entries[key]
                    self.deleted[key] = index

    def lookup(self, path: str) -> Entry | None:
        """The entry at `path`; links on the way (never the last one) resolved inside the image."""
        found = self.entries.get(path)
        if found is not None:
            return found
        resolved = self.resolve(path)
        return self.entries.get(resolved) if resolved is not None else None

    def resolve(self, path: str) -> str | None:
        """`path` with every link of its directories followed inside the image; None if they loop."""
        todo = [p for p in path.split("/") if p not in ("", ".")]
        done: list[str] = []
        hops = 0
        while todo:
            name = todo.pop(0)
            if name == "..":
                if done:
                    done.pop()
                continue
            here = "/".join([*done, name])
            entry = self.entries.get(here)
            if todo and entry is not None and entry.member.kind == "l" and entry.member.link is not None:
                hops += 1
                if hops > MAX_LINKS:
                    return None
                link = entry.member.link
                if link.startswith("/"):
                    done = []
                todo[:0] = [p for p in posixpath.normpath(link).split("/") if p not in ("", ".")]
                continue
            done.append(name)
        return "/".join(done)
