"""Time a warm `patchaudit gate DIST --python PY` against `PY -m pip show DIST` in the same env.

Run by hand (on a copy COPY of the env: the edit check changes one byte of one file and puts it back):
    python bench/bench_gate.py --python COPY/bin/python vllm [--rounds 9]
    python bench/bench_gate.py --python ENV/bin/python vllm --all --no-edit-check   # gate every distribution
The env needs pip for the anchor (`PY -m ensurepip` in the copy). Both commands run pair by pair in
one process after one warm-up each; prints every pair and the median ratio (target <= 0.33x).
Then it changes one byte of a file of DIST keeping its size and mtime (as `touch -r` would) and
checks that the warm gate still fails, and passes again once the byte is back.

As a service's user against a root-owned env (both commands run as USER; the gate's caches go to a
fresh $STATE_DIRECTORY owned by USER, as the systemd drop-in arranges; an env without pip gets pip
on PYTHONPATH for the anchor, from a directory holding only pip):
    python bench/bench_gate.py --python ENV/bin/python vllm --all --user nobody --pip-dir DIR --no-edit-check
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = 0.33


RUN_AS: dict[str, object] = {}  # subprocess keywords: user, group, env (set by --user)
GATE_ENV: dict[str, str] = {}
ANCHOR_ENV: dict[str, str] = {}


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    extra = dict(RUN_AS)
    if "env" in kw or "env" in extra:
        extra["env"] = {**dict(extra.get("env", os.environ)), **dict(kw.pop("env", {}))}  # type: ignore[call-overload]
    return subprocess.run(cmd, check=False, **extra, **kw)  # type: ignore[call-overload,no-any-return]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    proc = _run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **({"env": env} if env else {}))
    return time.perf_counter() - start, proc.returncode


def gate_code(cmd: list[str]) -> tuple[int, str]:
    proc = _run(cmd, capture_output=True, text=True, **({"env": GATE_ENV} if GATE_ENV else {}))
    return proc.returncode, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()


def _others_may_run(exe: str) -> bool:
    real = os.path.realpath(exe)
    while real != "/":
        if not os.stat(real).st_mode & 0o001:
            return False
        real = os.path.dirname(real)
    return True


def _as_user(name: str, pip_dir: str | None) -> list[str] | None:
    """Run both commands as NAME; returns the gate's command prefix when patchaudit's own interpreter is
    private (then this checkout's code under a system interpreter of the same version)."""
    import pwd
    import sysconfig
    import tempfile

    user = pwd.getpwnam(name)
    state = Path(tempfile.mkdtemp(prefix="pa-bench-state-")) / "patchaudit" / "bench"
    state.mkdir(parents=True)
    for d in (state, state.parent, state.parent.parent):
        os.chown(d, user.pw_uid, user.pw_gid)
    state.parent.parent.chmod(0o755)
    RUN_AS.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    RUN_AS["env"] = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    GATE_ENV["STATE_DIRECTORY"] = str(state)
    if pip_dir:
        ANCHOR_ENV["PYTHONPATH"] = pip_dir
    print(f"as {name} (uid {user.pw_uid}); gate caches in $STATE_DIRECTORY={state}")
    if _others_may_run(sys.executable):
        return None
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = f"/usr/bin/{version}"
    root = Path(__file__).resolve().parent.parent
    GATE_ENV["PYTHONPATH"] = f"{root}:{sysconfig.get_paths()['purelib']}"
    return [system, "-m", "patchaudit"]


def edit_check(ours: list[str], python: str, dist: str) -> bool:
    """Flip one byte of one of DIST's files, keep size and mtime; the warm gate must still see it."""
    from patchaudit import environment

    env = environment.from_python(Path(python))
    (installed,) = environment.select(environment.distributions(env), [dist])
    assert installed.record_path is not None
    from patchaudit.record import parse_record

    record = parse_record(installed.record_path.read_bytes())
    rel = next(e.path for e in record.entries if e.path.endswith("__init__.py") and e.hash is not None)
    target = installed.location / rel
    original = target.read_bytes()
    st = target.stat()
    flipped = original[:-1] + (b" " if original[-1:] != b" " else b"\n")
    print(f"edit check on {target} ({st.st_size} bytes)")
    try:
        target.write_bytes(flipped)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = target.stat()
        assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        code, line = gate_code(ours)
        print(f"  after the edit:   exit {code}  {line}")
        caught = code == 1
    finally:
        target.write_bytes(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(0.1)
    code, line = gate_code(ours)
    print(f"  after restoring:  exit {code}  {line}")
    return caught and code == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True)
    parser.add_argument("dist")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-edit-check", action="store_true")
    parser.add_argument("--all", action="store_true", help="gate every distribution (no names), anchor unchanged")
    parser.add_argument("--user", help="run both commands as this user (a service's own), caches in a StateDirectory")
    parser.add_argument("--pip-dir", help="PYTHONPATH holding only pip, for an env without pip (with --user)")
    args = parser.parse_args()

    command = [shutil.which("patchaudit") or str(Path(sys.executable).parent / "patchaudit")]
    if args.user:
        command = _as_user(args.user, args.pip_dir) or command
    anchor = [args.python, "-m", "pip", "show", args.dist]
    ours = [*command, "gate", *([] if args.all else [args.dist]), "--python", args.python]

    _, code = timed(anchor, ANCHOR_ENV)
    if code != 0:
        sys.exit(f"the anchor failed: {' '.join(anchor)} (install pip into the env: {args.python} -m ensurepip)")
    timed(ours, GATE_ENV)  # cold run: verifies everything and writes the caches
    time.sleep(0.1)
    code, line = gate_code(ours)
    if code != 0:
        sys.exit(f"the gate does not pass on this env: {' '.join(ours)}: {line}")
    if " cached;" not in line:
        sys.exit(f"the warm gate did not answer from its cache: {line}")
    print(f"warm: {line}")
    pairs = []
    for _ in range(args.rounds):
        a, _ = timed(anchor, ANCHOR_ENV)
        b, _ = timed(ours, GATE_ENV)
        pairs.append((a, b))
        print(f"  pip show {a:6.3f}s   gate {b:6.3f}s   ratio {b / a:5.2f}")
    ratio = statistics.median(b / a for a, b in pairs)
    print(f"anchor: {' '.join(anchor)}")
    print(f"ours:   {' '.join(ours)}")
    print(
        f"median pip show {statistics.median(a for a, _ in pairs):.3f}s, "
        f"gate {statistics.median(b for _, b in pairs):.3f}s, ratio {ratio:.2f}x (target <= {TARGET}x)"
    )
    if not args.no_edit_check:
        ok = edit_check(ours, args.python, args.dist)
        print("edit check: " + ("caught, and clean again once restored" if ok else "FAILED"))
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
