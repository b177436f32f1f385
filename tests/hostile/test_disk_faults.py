"""A full or read-only filesystem in the middle of a revert, a restore and a cache write, on a real tiny tmpfs.

Each case runs in a private mount namespace (`unshare -m`) where a 4 MiB tmpfs holds a real venv with a real
wheel; the disk is filled (or remounted read-only) between steps, and the console script runs there as a user
would. What must hold: nothing lost (the patched bytes are where they were, or in the quarantine), the journal
coherent (a later run with room finishes the job), and a gate's verdict unchanged when its cache cannot be kept.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from wheels import build_wheel

PRISTINE = "def forward(x):\n    return x\n" + "# padding\n" * 20_000  # ~200 KiB: its temp copy cannot fit
PATCHED = "def forward(x):\n    breakpoint()\n    return x\n"


def _unshare() -> str:
    found = shutil.which("unshare")
    if found is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root with unshare(1) and must run this test")
        pytest.skip("needs root and unshare(1) for a private tmpfs")
    return found


SCRIPT = r"""
set -u
top="$1"; wheel="$2"; python="$3"; patchaudit="$4"
mount -t tmpfs -o size=4m tmpfs "$top"
"$python" -m venv --without-pip "$top/venv" >/dev/null
PIP_CONFIG_FILE=/dev/null "$python" -m pip --python "$top/venv/bin/python" install -q --no-index --no-deps \
    --no-cache-dir --disable-pip-version-check "$wheel" >/dev/null 2>&1
site=$(echo "$top"/venv/lib/python3*/site-packages)
mkdir -p "$top/house" && cp "$wheel" "$top/house/"
py="$top/venv/bin/python"
step() {  # step NAME COMMAND...: one JSON line with the exit code and output
    out=$("${@:2}" 2>"$top.err"); code=$?
    "$python" -c 'import json,sys; print(json.dumps({"step": sys.argv[1], "code": int(sys.argv[2]),
        "out": sys.argv[3], "err": open(sys.argv[4]).read()}))' "$1" "$code" "$out" "$top.err"
}
fill() { dd if=/dev/zero of="$top/filler" bs=4k 2>/dev/null; sync; }
unfill() { rm -f "$top/filler"; }
digest() { sha256sum "$site/demo/model.py" | cut -c1-64; }

step gate-clean "$patchaudit" gate --python "$py"
printf '%s' "$PATCHED" > "$site/demo/model.py"
echo "{\"step\": \"patched\", \"digest\": \"$(digest)\"}"

# a full disk: the gate's cache cannot be kept, its verdict stays what it is
rm -rf "$top/venv/.patchaudit/cache"; sleep 2  # past the racy window of the edit: a verdict would be kept
fill
step gate-full "$patchaudit" gate --python "$py"
# a full disk mid-revert: the quarantine copy fits, the pristine file does not
unfill; dd if=/dev/zero of="$top/filler" bs=1k count=$(( $(df -k --output=avail "$top" | tail -1) - 120 )) 2>/dev/null
step revert-full "$patchaudit" revert demo --python "$py" --wheelhouse "$top/house" --yes
echo "{\"step\": \"after-revert-full\", \"digest\": \"$(digest)\"}"
unfill
step revert-room "$patchaudit" revert demo --python "$py" --wheelhouse "$top/house" --yes
echo "{\"step\": \"after-revert-room\", \"digest\": \"$(digest)\"}"
step gate-reverted "$patchaudit" gate --python "$py"
run=$(ls -t "$top/venv/.patchaudit/quarantine" | head -1)  # the run that went through

# a read-only filesystem mid-restore: nothing changes, and once writable the restore goes through
mount -o remount,ro "$top"
step restore-ro "$patchaudit" quarantine restore "$run" --python "$py" --yes
echo "{\"step\": \"after-restore-ro\", \"digest\": \"$(digest)\"}"
mount -o remount,rw "$top"
step restore-rw "$patchaudit" quarantine restore "$run" --python "$py" --yes
echo "{\"step\": \"after-restore-rw\", \"digest\": \"$(digest)\"}"
umount "$top"
"""


@pytest.mark.timeout(240)
def test_full_and_read_only_disks_lose_nothing_and_leave_the_verdict_as_it_is(tmp_path: Path) -> None:
    unshare = _unshare()
    wheel = build_wheel(tmp_path / "w", "demo", "1.0", {"demo/__init__.py": "", "demo/model.py": PRISTINE})
    top = tmp_path / "disk"
    top.mkdir()
    exe = Path(sys.executable).parent / "patchaudit"
    script = textwrap.dedent(SCRIPT)
    proc = subprocess.run(
        [unshare, "-m", "--propagation", "private", "bash", "-c", script, "-", top, wheel, sys.executable, exe],
        capture_output=True,
        text=True,
        timeout=200,
        env={**os.environ, "PATCHED": PATCHED},
    )
    steps = {}
    for line in proc.stdout.splitlines():
        item = json.loads(line)
        steps[item["step"]] = item
    assert "after-restore-rw" in steps, (proc.stdout, proc.stderr)
    patched, pristine = steps["patched"]["digest"], None

    assert steps["gate-clean"]["code"] == 0, steps["gate-clean"]
    # full disk: same verdict as with room (the patch fails it), the missing cache said, no traceback
    full = steps["gate-full"]
    assert full["code"] == 1 and "demo/model.py" in full["out"], full
    assert "running uncached" in full["err"] and "Traceback" not in full["err"], full
    # full disk mid-revert: refused in one line, the patched bytes where they were
    failed = steps["revert-full"]
    assert failed["code"] == 2 and "Traceback" not in failed["err"], failed
    assert len(failed["err"].strip().splitlines()) == 1, failed
    assert steps["after-revert-full"]["digest"] == patched
    # with room again the revert goes through: the journal was left coherent
    assert steps["revert-room"]["code"] == 0, steps["revert-room"]
    pristine = steps["after-revert-room"]["digest"]
    assert pristine != patched and steps["gate-reverted"]["code"] == 0, steps["gate-reverted"]
    # read-only mid-restore: nothing changed; writable again: the patched bytes come back from the quarantine
    ro = steps["restore-ro"]
    assert ro["code"] == 2 and "Traceback" not in ro["err"], ro
    assert steps["after-restore-ro"]["digest"] == pristine
    assert steps["restore-rw"]["code"] == 0, steps["restore-rw"]
    assert steps["after-restore-rw"]["digest"] == patched
