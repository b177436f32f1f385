"""The hazard rules over many distributions on worker processes report what one process reports."""

from __future__ import annotations

import json
from pathlib import Path

from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

DUMP = "import torch\n\ndef forward(x):\n    torch.save(x, '/tmp/dump.pt')\n    return x\n"
GUARD = "def check(x):\n    if False and x:\n        raise ValueError(x)\n"


def test_all_files_with_one_worker_and_with_many_report_the_same(tmp_path: Path) -> None:
    house = tmp_path / "wheels"
    first = {f"first/m{n}.py": (DUMP if n % 9 == 0 else f"X = {n}\n") for n in range(30)}
    second = {f"second/sub/m{n}.py": (GUARD if n % 4 == 0 else "print('hello')\n") for n in range(12)}
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(house, "first", "1.0", first), build_wheel(house, "second", "1.0", second))
    (site_packages(python) / "second/sub/m1.py").write_text(DUMP)  # drifted too

    reports = []
    for workers in ("1", "3"):
        proc = patchaudit(
            "scan", "first", "second", "--python", python, "--all-files", "--no-cache", "--format", "json",
            "--workers", workers,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        report = json.loads(proc.stdout)
        report.pop("run")  # when each ran: the only part that may differ
        reports.append(report)
    assert reports[0] == reports[1]
    by_dist = {d["name"]: d["findings"] for d in reports[0]["distributions"]}
    dumps = sorted(f["path"] for f in by_dist["first"] if f["rule"] == "torch-save")
    assert dumps == ["first/m0.py", "first/m18.py", "first/m27.py", "first/m9.py"]
    assert {f["path"] for f in by_dist["second"] if f["rule"] == "disabled-guard"} == {
        f"second/sub/m{n}.py" for n in (0, 4, 8)
    }
    assert any(f["path"] == "second/sub/m1.py" and f["rule"] == "torch-save" for f in by_dist["second"])


def test_a_few_large_drifted_files_report_what_one_process_reports(tmp_path: Path) -> None:
    # Two drifted modules of about 100 KiB each: fewer files than a pool usually needs, but enough
    # source that they are checked side by side on workers. The report is the same as with one.
    filler = "".join(f"def f{n}(x):\n    return x + {n}\n\n\n" for n in range(3000))
    files = {f"big/m{n}.py": filler for n in range(2)}
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "wheels", "big", "1.0", files))
    for n in range(2):
        path = site_packages(python) / f"big/m{n}.py"
        path.write_text(filler + DUMP)
    reports = []
    for workers in ("1", "2"):
        proc = patchaudit("scan", "big", "--python", python, "--format", "json", "--workers", workers)
        assert proc.returncode == 1, proc.stderr
        report = json.loads(proc.stdout)
        report.pop("run")
        reports.append(report)
    assert reports[0] == reports[1]
    (found,) = [d["findings"] for d in reports[0]["distributions"]]
    assert sorted(f["path"] for f in found if f["rule"] == "torch-save") == ["big/m0.py", "big/m1.py"]
