"""The warm gate: the verdict an earlier gate kept, found and checked without importing a dataclass.

core.run asks the cache the same way (the same key, the same place); fastgate comes here first when the
command line names no policy, --root, --image or --serve, and goes to core.run on a miss.
"""

from __future__ import annotations

from patchaudit import __version__
from patchaudit.gate.cache import VerdictCache, predicted_prefix
from patchaudit.parallel.deadline import phase
from patchaudit.target.cacheplace import place

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from patchaudit.gate.cache import Cached
    from patchaudit.gate.verdict import Verdict


# Keys whose kept verdict this process found stale: core.run, which fastgate hands a miss to, does not
# fingerprint every file a second time before it audits.
STALE: set[str] = set()


def gate_key(
    policy: Path | None,
    python: Path | None,
    site_path: Path | None,
    names: Sequence[str],
    fail_on: str,
    baseline: Path | None,
) -> str:
    """What a gate's verdict depends on beyond the fingerprint (the policy and baseline files are in that)."""
    return repr((__version__, str(policy), str(python), str(site_path), list(names), fail_on, str(baseline)))


def lookup(cache: VerdictCache, workers: int | None) -> Cached | Verdict | None:
    """The cached verdict while every file it depends on is as it was (None: audit again)."""
    from patchaudit.parallel.cpus import available_cpus

    phase("checking the cached verdict")
    return cache.lookup(workers or available_cpus())


def check(
    names: Sequence[str],
    *,
    python: Path | None,
    site_path: Path | None,
    baseline: Path | None,
    fail_on: str,
    cache_base: Path | None,
    workers: int | None,
) -> Cached | Verdict | None:
    """The kept verdict of a gate without a policy, --root, --image or --serve, as core.run would find it."""
    key = gate_key(None, python, site_path, names, fail_on, baseline)
    where, _ = place(predicted_prefix(python, site_path), cache_base)
    cache = VerdictCache.open(where, key, python, site_path) if where is not None else None
    verdict = lookup(cache, workers) if cache is not None else None
    if verdict is None:
        STALE.add(key)
    return verdict
