"""Time a warm `patchaudit gate [DIST...] --python PY` against `PY -m pip show ANCHOR` in the same env.

Run by hand (on a copy COPY of the env: the edit check changes one byte of one file and puts it back):
    python bench/bench_gate.py --python COPY/bin/python                  # the gate over every distribution
    python bench/bench_gate.py --python COPY/bin/python vllm --anchor vllm
The env needs pip for the anchor (`PY -m ensurepip` in the copy). Both commands run pair by pair
after one warm-up each, timed from the outside with their interpreter start, every exit status
checked; prints every pair and the median ratio (target <= 0.33x). Then it changes one byte of a
file keeping its size and mtime (as `touch -r` would) and checks that the warm gate still fails,
and passes again once the byte is back (`--no-edit-check` skips it).

As a service's own user against a root-owned env (the gate-as-`User=vllm` case): `--user NAME` runs
both commands as NAME through `setpriv` (an exec, no login), with a clean environment and the gate's
caches in a fresh `$STATE_DIRECTORY` owned by NAME, as the systemd drop-in arranges; `--env K=V` adds
to both (e.g. `PYTHONPATH=DIR` holding only pip, for an env without pip). The warm gate must say
`cached`, or the bench stops:
    python bench/bench_gate.py --python ENV/bin/python vllm --user nobody --no-edit-check \
        --patchaudit 'python3.11 -m patchaudit' --env PYTHONPATH=PIPDIR --gate-env PYTHONPATH=CHECKOUT:DEPS
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _harness import Pairs, run

TARGET = 0.33


def gate_code(cmd: list[str]) -> tuple[int, str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()


def _as_user(
    name: str, anchor: list[str], ours: list[str], env: list[str], gate_env: list[str]
) -> tuple[list[str], list[str]]:
    """Both commands as user NAME (setpriv execs; no login), each with a clean environment."""
    import pwd
    import tempfile

    user = pwd.getpwnam(name)
    top = Path(tempfile.mkdtemp(prefix="pa-bench-state-"))
    top.chmod(0o755)
    state = top / "patchaudit" / "bench"
    state.mkdir(parents=True)
    for d in (state, state.parent):
        os.chown(d, user.pw_uid, user.pw_gid)
    print(f"as {name} (uid {user.pw_uid}); the gate's caches in $STATE_DIRECTORY={state}")
    switch = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "env", "-i"]
    base = ["PATH=/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8"]
    return [*switch, *base, *env, *anchor], [*switch, *base, f"STATE_DIRECTORY={state}", *gate_env, *ours]


def edit_check(ours: list[str], python: str, dist: str) -> bool:
    """Flip one byte of one of DIST's files, keep size and mtime; the warm gate must still see it, and
    give its verdict from before the edit once the byte is back (on an env with drift of its own too)."""
    from patchaudit.target import environment
    from patchaudit.target.record import parse_record

    env = environment.from_python(Path(python))
    (installed,) = environment.select(environment.distributions(env), [dist])
    assert installed.record_path is not None
    record = parse_record(installed.record_path.read_bytes())
    rel = next(e.path for e in record.entries if e.path.endswith("__init__.py") and e.hash is not None)
    target = installed.location / rel
    original = target.read_bytes()
    st = target.stat()
    flipped = original[:-1] + (b" " if original[-1:] != b" " else b"\n")
    print(f"edit check on {target} ({st.st_size} bytes)")
    before_code, before_line = gate_code(ours)
    try:
        target.write_bytes(flipped)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = target.stat()
        assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        code, line = gate_code(ours)
        print(f"  after the edit:   exit {code}  {line}")
        caught = code == 1 and verdict_of(line) != verdict_of(before_line)
    finally:
        target.write_bytes(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(0.1)
    code, line = gate_code(ours)
    print(f"  after restoring:  exit {code}  {line}")
    return caught and (code, verdict_of(line)) == (before_code, verdict_of(before_line))


def verdict_of(line: str) -> str:
    """`FAIL: 1 added, 2 modified` of a summary line, without its counts of files and seconds."""
    return line.removeprefix("patchaudit gate: ").split(";", 1)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the env's interpreter (pip show runs with it)")
    parser.add_argument("--path", help="give the gate this site-packages directory instead of --python")
    parser.add_argument("dists", nargs="*", help="what the gate guards (default: every distribution)")
    parser.add_argument("--anchor", default="vllm", help="the distribution `pip show` is asked about")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--patchaudit",
        default=shutil.which("patchaudit") or str(Path(sys.executable).parent / "patchaudit"),
        help="the command that runs patchaudit, e.g. 'python3 -m patchaudit'",
    )
    parser.add_argument("--allow-drift", action="store_true", help="time a gate that fails (exit 1) too")
    parser.add_argument("--no-edit-check", action="store_true")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--user", help="run both commands as this user, caches in a $STATE_DIRECTORY it owns")
    parser.add_argument("--env", action="append", default=[], help="K=V for the anchor (with --user)")
    parser.add_argument("--gate-env", action="append", default=[], help="K=V for the gate (with --user)")
    args = parser.parse_args()

    anchor = [args.python, "-m", "pip", "show", args.anchor]
    target = ["--path", args.path] if args.path else ["--python", args.python]
    ours = [*shlex.split(args.patchaudit), "gate", *args.dists, *target]
    if args.user:
        anchor, ours = _as_user(args.user, anchor, ours, args.env, args.gate_env)
    ok = (0, 1) if args.allow_drift else (0,)
    print(f"anchor: {shlex.join(anchor)}")
    print(f"ours:   {shlex.join(ours)}", flush=True)
    run(anchor)
    cold = run(ours, ok=ok)  # verifies everything and writes the caches
    print(f"cold gate: {cold.wall:.3f}s, exit {cold.code}")
    time.sleep(0.1)
    code, line = gate_code(ours)
    print(f"warm gate: exit {code}  {line}")
    if code not in ok:
        sys.exit(f"the gate does not pass on this env (exit {code}); --allow-drift times it anyway")
    if args.user and " cached;" not in line:
        sys.exit("the warm gate did not answer from its cache")
    pairs = Pairs("pip show", "gate")
    pairs.measure(lambda: run(anchor), lambda: run(ours, ok=ok), args.rounds)
    figures: dict[str, object] = dict(pairs.report(TARGET))
    figures.update(anchor=anchor, ours=ours, cold_gate=cold.wall)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    if not args.no_edit_check:
        dist = args.dists[0] if args.dists else args.anchor
        ok_edit = edit_check(ours, args.python, dist)
        print("edit check: " + ("caught, and the verdict from before once restored" if ok_edit else "FAILED"))
        if not ok_edit:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
