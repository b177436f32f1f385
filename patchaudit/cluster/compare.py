"""Across nodes: which node differs from the others, named by version, distribution and file."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_PATHS = 5  # per node and distribution; the JSON report has every drifted path


@dataclass(frozen=True, kw_only=True, slots=True)
class Outlier:
    node: str
    distribution: str
    message: str
    paths: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "distribution": self.distribution,
            "message": self.message,
            "paths": list(self.paths),
        }


def _others(n: int) -> str:
    return "the other node" if n == 1 else f"the {n} other nodes"


def _majority(values: Mapping[str, str]) -> str | None:
    """The value most nodes agree on, or None when no value has more nodes than every other."""
    counts = Counter(values.values()).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def outliers(fingerprints: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[Outlier]:
    """`fingerprints`: node -> distribution -> {"version", "digest", "files"?}. Differences, node by node."""
    found: list[Outlier] = []
    nodes = sorted(fingerprints)
    if len(nodes) < 2:
        return found
    names = sorted({name for fp in fingerprints.values() for name in fp})
    for name in names:
        having = {n: fingerprints[n][name] for n in nodes if name in fingerprints[n]}
        lacking = [n for n in nodes if n not in having]
        if lacking and len(having) > len(lacking):
            for n in lacking:
                found.append(Outlier(node=n, distribution=name, message=f"lacks {name}, on {_others(len(having))}"))
            continue
        if lacking:
            for n in having:
                found.append(
                    Outlier(node=n, distribution=name, message=f"has {name}, absent from {_others(len(lacking))}")
                )
            continue
        versions = {n: str(fp.get("version", "")) for n, fp in having.items()}
        usual = _majority(versions)
        if len(set(versions.values())) > 1:
            for n, v in sorted(versions.items()):
                if usual is None:
                    found.append(Outlier(node=n, distribution=name, message=f"has {name} {v}; the nodes disagree"))
                elif v != usual:
                    others = sum(1 for x in versions.values() if x == usual)
                    found.append(
                        Outlier(node=n, distribution=name, message=f"has {name} {v}, {_others(others)} {usual}")
                    )
            continue
        digests = {n: str(fp.get("digest", "")) for n, fp in having.items()}
        if len(set(digests.values())) == 1:
            continue
        found.extend(_file_outliers(name, having, digests))
    return found


def _file_outliers(name: str, having: Mapping[str, Mapping[str, Any]], digests: Mapping[str, str]) -> list[Outlier]:
    usual = _majority(digests)
    agreeing = [n for n, d in digests.items() if d == usual] if usual is not None else []
    reference: Mapping[str, str] = having[agreeing[0]].get("files", {}) if agreeing else {}
    found = []
    for n, digest in sorted(digests.items()):
        if usual is not None and digest == usual:
            continue
        files: Mapping[str, str] = having[n].get("files", {})
        if usual is None or not files or not reference:
            what = "differs between the nodes" if usual is None else f"differs from {_others(len(agreeing))}"
            found.append(Outlier(node=n, distribution=name, message=f"{name} {what}"))
            continue
        paths = sorted(p for p in set(files) | set(reference) if files.get(p) != reference.get(p))
        shown = ", ".join(paths[:MAX_PATHS]) + (f" (+{len(paths) - MAX_PATHS} more)" if len(paths) > MAX_PATHS else "")
        verb = "differs" if len(paths) == 1 else "differ"
        found.append(
            Outlier(
                node=n,
                distribution=name,
                message=f"{shown} {verb} from {_others(len(agreeing))}",
                paths=tuple(paths),
            )
        )
    return found


def disagreeing(fingerprints: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, list[str]]:
    """Distributions whose files differ between nodes at one version: node -> names to ask in detail."""
    asks: dict[str, list[str]] = {}
    names = sorted({name for fp in fingerprints.values() for name in fp})
    for name in names:
        having = {n: fp[name] for n, fp in fingerprints.items() if name in fp}
        if len({str(fp.get("version")) for fp in having.values()}) != 1:
            continue
        if len({str(fp.get("digest")) for fp in having.values()}) > 1:
            for n in having:
                asks.setdefault(n, []).append(name)
    return asks


def merge_detail(
    fingerprints: dict[str, dict[str, dict[str, Any]]], detail: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> None:
    """Put second-round per-file maps into the first round's fingerprints, in place."""
    for node, by_name in detail.items():
        for name, fp in by_name.items():
            if name in fingerprints.get(node, {}) and fp.get("files"):
                fingerprints[node][name]["files"] = dict(fp["files"])


def node_labels(nodes: Sequence[tuple[str, str]]) -> dict[str, str]:
    """(node id, address) -> a short label: the address, with the id's head where addresses repeat."""
    count = Counter(address for _, address in nodes)
    return {nid: address if count[address] == 1 else f"{address}/{nid[:8]}" for nid, address in nodes}
