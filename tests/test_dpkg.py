"""Distributions Debian's dpkg installed: named by their package, checked (weakly) by its md5sums.

The subject is a real Debian package, python3-six (.ci/run installs it): its egg-info has no RECORD.
Edits are made in a private mount namespace (a changed copy bound over six.py), so the machine's own
files stay as they are.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wheels import patchaudit

from patchaudit.target import dpkg, environment

SYSTEM_PYTHON = Path("/usr/bin/python3")
DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")
SIX = DIST_PACKAGES / "six.py"
BIN = Path(sys.executable).parent


def _owner(path: Path) -> str | None:
    proc = subprocess.run(["dpkg", "-S", str(path)], capture_output=True, text=True)
    return proc.stdout.partition(":")[0] if proc.returncode == 0 else None


pytestmark = pytest.mark.skipif(
    shutil.which("dpkg") is None or not SYSTEM_PYTHON.exists() or _owner(SIX) != "python3-six",
    reason="needs Debian's python3 and python3-six (apt-get install python3-six)",
)


def _scan(*args: str | os.PathLike[str]) -> tuple[int, dict[str, object]]:
    proc = patchaudit("scan", *args, "--no-hazards", "--no-cache", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_os_packaged_distribution_names_its_package_and_does_not_fail_the_scan() -> None:
    code, report = _scan("six", "--python", SYSTEM_PYTHON)
    (six,) = report["distributions"]  # type: ignore[misc]
    assert six["os_package"] == {"manager": "dpkg", "name": "python3-six"}
    assert six["status"] == "unverifiable"
    assert six["drift"] == []
    (note,) = six["unverified"]
    assert note["path"].startswith("six-") and note["path"].endswith(".egg-info")
    assert "python3-six" in note["reason"] and "md5 is weak, not trusted" in note["reason"]
    assert six["files_checked"] >= 2  # six.py and the egg-info's files, from dpkg's md5sums
    # only a startup hook of the machine itself (if any) may fail this scan; six never does
    assert code == (1 if report["environment"]["drift"] else 0)  # type: ignore[index]


def test_dpkg_owner_lookup_reads_the_real_database() -> None:
    env = environment.from_python(SYSTEM_PYTHON)
    (six,) = environment.select(environment.distributions(env), ["six"])
    package = dpkg.Dpkg().owner(six.meta_dir, six.location, dpkg.top_level(six.meta_dir))
    assert package is not None and package.name == "python3-six"
    assert str(SIX) in package.files
    assert len(package.md5[str(SIX)]) == 32


def _namespace(script: str) -> subprocess.CompletedProcess[str]:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to edit a system file privately")
    if subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("mount namespaces are not allowed here")
    proc = subprocess.run(
        [unshare, "-m", "--propagation", "private", "bash", "-c", script], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _mask_machine_hooks(tmp_path: Path) -> str:
    """Shell lines that hide the machine's own unowned startup hooks inside the namespace (an empty
    file bound over each) and give the system interpreter an empty /usr/local, as a fresh image has."""
    empty = tmp_path / "empty.pth"
    empty.write_text("")
    lines = []
    local = Path(f"/usr/local/lib/python3.{_minor()}/dist-packages")
    if local.is_dir():
        lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {local}")
    env = environment.from_python(SYSTEM_PYTHON)
    for site in env.site_dirs:
        if site == local:
            continue
        for pth in sorted(site.glob("*.pth")):
            if _owner(pth) is None:
                lines.append(f"mount --bind {empty} {pth}")
    return "\n".join(lines)


def _minor() -> str:
    proc = subprocess.run(
        [str(SYSTEM_PYTHON), "-I", "-S", "-c", "import sys; print(sys.version_info[1])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def test_a_file_that_disagrees_with_md5sums_is_drift_and_fails(tmp_path: Path) -> None:
    patched = tmp_path / "six.py"
    patched.write_bytes(SIX.read_bytes() + b"\nimport os; os.environ['PATCHED'] = '1'\n")
    out = tmp_path / "report.json"
    script = f"""
set -e
{_mask_machine_hooks(tmp_path)}
mount --bind {patched} {SIX}
set +e
{BIN / "patchaudit"} scan six --python {SYSTEM_PYTHON} --no-hazards --no-cache --format json > {out}
echo "exit=$?"
"""
    proc = _namespace(script)
    assert proc.stdout.splitlines()[-1] == "exit=1"
    (six,) = json.loads(out.read_text())["distributions"]
    assert six["status"] == "drifted"
    (drift,) = six["drift"]
    assert drift["path"] == "six.py" and drift["state"] == "modified"
    assert drift["expected"].startswith("md5=") and drift["actual"].startswith("md5=")
    assert "python3-six" in drift["note"]
    assert SIX.read_bytes() != patched.read_bytes(), "the real six.py was never touched"


def test_gate_passes_os_packages_unless_the_policy_asks(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(f'python = "{SYSTEM_PYTHON}"\ndistributions = ["six"]\nfail_os_packages = true\n')
    script = f"""
{_mask_machine_hooks(tmp_path)}
{BIN / "patchaudit"} gate six --python {SYSTEM_PYTHON} --no-cache
echo "default=$?"
{BIN / "patchaudit"} gate --policy {policy} --no-cache
echo "strict=$?"
{BIN / "patchaudit"} scan six --python {SYSTEM_PYTHON} --no-hazards --no-cache > /dev/null
echo "scan=$?"
"""
    proc = _namespace(script)
    lines = proc.stdout.splitlines()
    assert "default=0" in lines, proc.stdout + proc.stderr
    assert "strict=1" in lines, proc.stdout + proc.stderr
    assert "scan=0" in lines, proc.stdout + proc.stderr
    strict_output = proc.stdout.split("default=0", 1)[1]
    assert "unverifiable" in strict_output and "python3-six" in strict_output


def test_gate_plan_watches_the_files_of_an_os_package() -> None:
    """The gate reuses a verdict while nothing it read changed: six.py must be among what it reads."""
    from patchaudit.gate.plan import FilePlan

    env = environment.from_python(SYSTEM_PYTHON)
    plan, _, _ = FilePlan.build(env, ["six"], extra_files=[], extra_roots=[])
    assert str(SIX) in plan.files


def test_md5_verdicts_equal_dpkg_verify() -> None:
    """Every OS-packaged distribution of the system interpreter: the files patchaudit finds changed are
    exactly those `dpkg --verify` reports with another md5 (or missing) below the site directory."""
    _, report = _scan("--python", SYSTEM_PYTHON)
    found: dict[str, set[str]] = {}
    for dist in report["distributions"]:  # type: ignore[attr-defined]
        if dist.get("os_package"):
            paths = found.setdefault(dist["os_package"]["name"], set())
            paths.update(f"{dist['location']}/{d['path']}" for d in dist["drift"])
    assert "python3-six" in found
    for package, paths in found.items():
        proc = subprocess.run(["dpkg", "--verify", package], capture_output=True, text=True)
        expected = set()
        for line in proc.stdout.splitlines():
            flags, path = line.split()[0], line.split()[-1]
            if path.startswith(str(DIST_PACKAGES) + "/") and (flags == "missing" or flags[2:3] == "5"):
                expected.add(path)
        assert paths == expected, package


def test_debian_record_that_disagrees_with_stripped_binaries_is_not_drift() -> None:
    """python3-yaml ships a RECORD written before Debian stripped its extension: RECORD says one
    sha256, the installed (and dpkg-verified) .so has another. dpkg is the authority there."""
    metas = sorted(DIST_PACKAGES.glob("PyYAML-*.dist-info"))
    if not metas or _owner(metas[0]) != "python3-yaml" or not (metas[0] / "RECORD").is_file():
        pytest.skip("needs python3-yaml (apt-get install python3-yaml)")
    from patchaudit.parallel.hashing import hash_file
    from patchaudit.target.record import parse_record

    record = parse_record((metas[0] / "RECORD").read_bytes())
    disagree = [
        e.path
        for e in record.entries
        if e.hash is not None and hash_file(str(DIST_PACKAGES / e.path), e.hash.algorithm).digest != str(e.hash)
    ]
    assert disagree, "this python3-yaml build's RECORD agrees with its files: nothing to show here"
    _, report = _scan("PyYAML", "--python", SYSTEM_PYTHON)
    (dist,) = report["distributions"]  # type: ignore[misc]
    assert dist["os_package"] == {"manager": "dpkg", "name": "python3-yaml"}
    assert dist["drift"] == []
    assert dist["status"] == "unverifiable"


def test_human_output_names_the_package() -> None:
    proc = patchaudit("scan", "six", "--python", SYSTEM_PYTHON, "--no-hazards", "--no-cache")
    line = next(ln for ln in proc.stdout.splitlines() if " six " in ln)
    assert line.startswith("unverifiable") and "OS package python3-six, md5 only" in line
