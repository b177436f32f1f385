"""The JSON report: its shipped schema, and what it says about the run that made it."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import jsonschema
import pytest
from report_schema import check_report
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit import __version__
from patchaudit.report import schema_path


def test_the_schema_ships_in_the_package_and_a_scan_report_follows_it(tmp_path: Path) -> None:
    assert Path(schema_path()).is_file()
    assert Path(schema_path()).parent.name == "patchaudit"
    jsonschema.Draft202012Validator.check_schema(json.loads(Path(schema_path()).read_text()))
    wheel = build_wheel(tmp_path / "w", "demo", "1.0", {"demo/__init__.py": "", "demo/mod.py": "X = 1\n"})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    (site_packages(python) / "demo" / "mod.py").write_text("import pdb\npdb.set_trace()\n")
    before = time.time()
    proc = patchaudit("scan", "--python", python, "--format", "json", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    check_report(report)
    run = report["run"]
    assert run["patchaudit"] == __version__
    assert isinstance(run["rules"], str) and len(run["rules"]) == 16
    started = dt.datetime.fromisoformat(run["started"].replace("Z", "+00:00")).timestamp()
    assert before - 1 <= started <= time.time()

    quiet = json.loads(patchaudit("scan", "--python", python, "--format", "json", "--no-hazards").stdout)
    assert quiet["run"]["rules"] is None  # no rule ran
    with pytest.raises(jsonschema.ValidationError):
        check_report({**report, "summary": {**report["summary"], "modified": -1}})
    with pytest.raises(jsonschema.ValidationError):
        check_report({k: v for k, v in report.items() if k != "run"})
