"""The driver: one task per alive Ray node, pinned there, bounded in time; then compare the answers."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from patchaudit.cluster import task
from patchaudit.cluster.compare import Outlier, disagreeing, merge_detail, node_labels, outliers
from patchaudit.errors import ExitCode, PatchAuditError

SCHEMA = "patchaudit/cluster/v1"
EXTRA_HINT = "pip install 'patchaudit[ray]'"


class ClusterUnavailable(PatchAuditError):
    """Ray is missing, or the cluster cannot be reached."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeResult:
    label: str
    node_id: str
    address: str
    status: str  # answered | error | timeout | dead
    error: str | None = None
    data: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int | None:
        if self.data is None:
            return None
        return int(self.data.get("verdict", {}).get("exit_code", ExitCode.INTERNAL))

    def to_dict(self) -> dict[str, Any]:
        data = self.data or {}
        return {
            "node": self.label,
            "node_id": self.node_id,
            "address": self.address,
            "host": data.get("host"),
            "status": self.status,
            "error": self.error,
            "python": data.get("python"),
            "verdict": data.get("verdict"),
            "report": data.get("report"),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterResult:
    nodes: tuple[NodeResult, ...]
    outliers: tuple[Outlier, ...] = ()
    seconds: float = 0.0
    timeout: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    detached: bool = False  # ray.shutdown had not returned: end the process without waiting for Ray

    @property
    def ok(self) -> bool:
        return not self.outliers and all(n.status == "answered" and n.exit_code == ExitCode.CLEAN for n in self.nodes)

    def summary(self) -> dict[str, int]:
        answered = [n for n in self.nodes if n.status == "answered"]
        return {
            "nodes": len(self.nodes),
            "answered": len(answered),
            "failing": sum(1 for n in answered if n.exit_code != ExitCode.CLEAN),
            "unanswered": len(self.nodes) - len(answered),
            "outliers": len(self.outliers),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "nodes": [n.to_dict() for n in self.nodes],
            "outliers": [o.to_dict() for o in self.outliers],
            "summary": self.summary(),
            "seconds": round(self.seconds, 3),
        }


class ClusterTimeout(ClusterUnavailable):
    """The cluster did not answer within --timeout; Ray may still hold threads that never return."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ClusterUnavailable("`patchaudit cluster` needs Ray, which is not installed", hint=EXTRA_HINT) from None
    return ray


def run(address: str, node_args: Sequence[str], *, timeout: float) -> ClusterResult:
    """Audit every alive node of the cluster at `address`; nothing is waited on past `timeout` seconds.

    Ray's client blocks in native code (minutes on a GCS that does not answer) where neither a deadline
    nor a signal reaches it, so the whole Ray conversation runs on a daemon thread and this thread only
    waits for it: until the deadline, or until SIGINT/SIGTERM arrive (KeyboardInterrupt here). What Ray
    writes to stderr while it runs is kept out of the output. After ClusterTimeout or an interrupt the
    caller should end the process without waiting for Ray (its threads and exit hook may never return).
    """
    started = time.monotonic()
    deadline = started + timeout

    def left() -> float:
        return max(min(5.0, deadline - time.monotonic()), 0.1)

    ray = _import_ray()  # seconds on a busy host: within the deadline too
    resolved = _resolve(address)
    _reachable(resolved, left())  # fail at once, in one line, when nothing listens there
    if _is_loopback(_host_port(resolved)[0]):
        _keep_on_loopback()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def conversation() -> None:
        try:
            try:
                ray.init(address=resolved, logging_level=logging.ERROR, log_to_driver=False)
            except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError... for one cause
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                outcome["error"] = ClusterUnavailable(f"cannot connect to the Ray cluster at {resolved}: {first}")
                return
            outcome["connected"] = True
            try:
                outcome["result"] = _run(ray, list(node_args), started, deadline, timeout)
            except BaseException as exc:  # reported in the waiting thread, as its own
                outcome["error"] = exc
            finally:
                ray.shutdown()
        finally:
            done.set()

    with _quiet_stderr():
        worker = threading.Thread(target=conversation, name="patchaudit-ray", daemon=True)
        worker.start()
        # Not connected by the deadline: over. Connected: collection ends at the deadline by itself (late
        # tasks are cancelled), and a little grace lets the answers in hand come out, then ray.shutdown.
        answered_at: float | None = None
        while not done.wait(0.1):
            now = time.monotonic()
            if "result" in outcome:
                answered_at = answered_at or now
                if now >= answered_at + GRACE:
                    break
            elif now >= deadline + (GRACE if outcome.get("connected") else 0.0):
                break
    if "result" in outcome:
        result: ClusterResult = outcome["result"]
        return result if done.is_set() else dataclasses.replace(result, detached=True)
    if "error" in outcome:
        raise outcome["error"]
    if outcome.get("connected"):
        raise ClusterTimeout(f"the Ray cluster at {resolved} did not finish within {timeout:g}s")
    raise ClusterTimeout(f"no answer from the Ray GCS at {resolved} within {timeout:g}s")


GRACE = 3.0  # seconds for the answers to come out past the deadline, and again for ray.shutdown


def _resolve(address: str) -> str:
    """The bootstrap address as Ray recorded it (RAY_ADDRESS, the last `ray start`, a running GCS).

    Ray's own canonicalisation turns a loopback host into this host's external address: a head bound
    to 127.0.0.1 then looks unreachable. The address is taken as written instead.
    """
    if address != "auto" and "://" not in address:
        return address
    try:
        from ray._private.services import get_ray_address_from_environment

        found = get_ray_address_from_environment(address, None)
    except ConnectionError:
        found = None
    except Exception:  # a private helper of Ray's; its other failures say the same
        found = None
    if not found or found == "auto":
        raise ClusterUnavailable("no running Ray cluster found", hint="pass --address HOST:PORT or set RAY_ADDRESS")
    return str(found)


def _host_port(address: str) -> tuple[str, str]:
    """("host", "port") of `HOST:PORT`, `[v6]:PORT` or `ray://HOST:PORT`."""
    host, _, port = address.rpartition("://")[2].rpartition(":")
    return host.strip("[]"), port


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _keep_on_loopback() -> None:
    """A head on loopback: keep this driver there too (Ray's switch for a cluster on one machine)."""
    import os

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    try:
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False  # read at import; the environment alone comes too late
    except Exception:  # a private module of Ray's: without it, the address may still resolve
        pass


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: Ray's native client logs there, retry after retry."""
    import os
    import sys

    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _reachable(resolved: str, timeout: float) -> None:
    """Fail fast, in one line, when nothing listens at the cluster's bootstrap address."""
    import socket

    host, port = _host_port(resolved)
    if not host or not port.isdigit():
        raise ClusterUnavailable(f"{resolved!r} is not a Ray address", hint="auto or HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterUnavailable(f"cannot connect to the Ray cluster at {resolved}: {exc.strerror or exc}") from None


def _run(ray: Any, node_args: list[str], started: float, deadline: float, timeout: float) -> ClusterResult:
    import ray.cloudpickle as cloudpickle
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cloudpickle.register_pickle_by_value(task)  # the node's Python need not import patchaudit
    remote = ray.remote(num_cpus=0, max_retries=0)(task.run_node)
    listed = ray.nodes()
    labels = node_labels([(n["NodeID"], str(n.get("NodeManagerAddress", "?"))) for n in listed])
    results: dict[str, NodeResult] = {}
    alive: list[str] = []
    for n in listed:
        nid = n["NodeID"]
        address = str(n.get("NodeManagerAddress", "?"))
        if n.get("Alive"):
            alive.append(nid)
        else:
            results[nid] = NodeResult(
                label=labels[nid], node_id=nid, address=address, status="dead", error="not alive in the cluster"
            )
    addresses = {n["NodeID"]: str(n.get("NodeManagerAddress", "?")) for n in listed}

    def submit(nid: str, args: list[str]) -> Any:
        strategy = NodeAffinitySchedulingStrategy(node_id=nid, soft=False)
        left = max(deadline - time.monotonic() - 0.5, 1.0)
        return remote.options(scheduling_strategy=strategy).remote(args, left)

    def collect(refs: dict[Any, str]) -> dict[str, dict[str, Any] | tuple[str, str]]:
        got: dict[str, dict[str, Any] | tuple[str, str]] = {}
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=max(deadline - time.monotonic(), 0))
        for ref in ready:
            try:
                got[refs[ref]] = ray.get(ref)
            except ray.exceptions.RayError as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                got[refs[ref]] = ("error", f"{type(exc).__name__}: {first}"[:300])
        for ref in pending:
            ray.cancel(ref, force=True)
            got[refs[ref]] = ("timeout", f"no answer within {timeout:g}s")
        return got

    first = collect({submit(nid, node_args): nid for nid in alive})
    fingerprints: dict[str, dict[str, dict[str, Any]]] = {}
    for nid, value in first.items():
        base: dict[str, Any] = {"label": labels[nid], "node_id": nid, "address": addresses[nid]}
        if isinstance(value, tuple):
            results[nid] = NodeResult(**base, status=value[0], error=value[1])
        elif "timeout" in value:
            results[nid] = NodeResult(**base, status="timeout", error=str(value["timeout"]), data=None)
        elif "error" in value:
            results[nid] = NodeResult(**base, status="error", error=str(value["error"]), data=None)
        else:
            results[nid] = NodeResult(**base, status="answered", data=value)
            fingerprints[labels[nid]] = {k: dict(v) for k, v in value.get("fingerprints", {}).items()}

    notes: list[str] = []
    by_label = {labels[nid]: nid for nid in alive}
    asks = disagreeing(fingerprints)
    if asks and deadline - time.monotonic() > 1.0:
        refs = {}
        for label, names in asks.items():
            detail_args = [*node_args]
            for name in names:
                detail_args += ["--detail", name]
            refs[submit(by_label[label], detail_args)] = by_label[label]
        second = collect(refs)
        detail = {
            labels[nid]: v.get("fingerprints", {})
            for nid, v in second.items()
            if isinstance(v, dict) and "error" not in v and "timeout" not in v
        }
        merge_detail(fingerprints, detail)
        if len(detail) < len(refs):
            notes.append("some nodes did not send file lists in time: their differences are named by distribution")
    elif asks:
        notes.append("no time left to ask for file lists: differences are named by distribution")
    ordered = tuple(sorted(results.values(), key=lambda r: r.label))
    return ClusterResult(
        nodes=ordered,
        outliers=tuple(outliers(fingerprints)),
        seconds=time.monotonic() - started,
        timeout=timeout,
        notes=tuple(notes),
    )
