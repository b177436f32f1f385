"""Policy files: TOML or [tool.patchaudit], validated; unknown keys name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchaudit.errors import InvalidPolicy
from patchaudit.gate.policy import ABSENT, Policy, load
from patchaudit.report import Severity

FULL = """
python = "venv/bin/python"
distributions = ["vllm", "torch"]
fail_on = "medium"
fail_open = true
fail_unverifiable = false
hazards = true
rule_dirs = ["rules-extra", "/opt/site-rules"]
baseline = "baselines/vllm.json"

[severity]
print-call = "info"
token-count-branch = "high"

[[approved]]
distribution = "vllm"
path = "vllm/config/model.py"
hash = "sha256=abc"
reason = "SM120: no FP8 MLA backend"
by = "alice"

[[approved]]
path = "vllm/debug.py"
hash = "absent"
reason = "removed the debug dump"
"""


def test_full_policy_loads_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "vllm.toml"
    path.write_text(FULL)
    policy = load(path)
    assert policy.python == tmp_path / "venv/bin/python"
    assert policy.path is None
    assert policy.distributions == ("vllm", "torch")
    assert policy.fail_on is Severity.MEDIUM
    assert policy.fail_open is True
    assert policy.fail_unverifiable is False
    assert policy.rule_dirs == (tmp_path / "rules-extra", Path("/opt/site-rules"))
    assert policy.baseline == tmp_path / "baselines/vllm.json"
    assert policy.severity == {"print-call": Severity.INFO, "token-count-branch": Severity.HIGH}
    first, second = policy.approved
    assert first.covers("vllm", "vllm/config/model.py", "sha256=abc")
    assert not first.covers("vllm", "vllm/config/model.py", "sha256=other")
    assert not first.covers("torch", "vllm/config/model.py", "sha256=abc")
    assert second.hash == ABSENT and second.covers("vllm", "vllm/debug.py", None)


def test_empty_policy_has_safe_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.toml"
    path.write_text("")
    policy = load(path)
    assert policy.fail_on is Severity.HIGH
    assert policy.fail_open is False
    assert policy.fail_unverifiable is True
    assert policy.distributions == ()
    assert policy.baseline is None


def test_unknown_key_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text('distributions = ["vllm"]\nfail_opne = true\n')
    with pytest.raises(InvalidPolicy) as err:
        load(path)
    assert "'fail_opne'" in str(err.value)
    assert str(path) in str(err.value)


def test_unknown_key_inside_an_approval(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[approved]]\npath = "a.py"\nhash = "sha256=x"\nreason = "r"\nsha = "oops"\n')
    with pytest.raises(InvalidPolicy, match=r"unknown key 'sha' in approved\[1\]"):
        load(path)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('fail_on = "critical"\ndistributions = "vllm"\n[severity]\nprint-call = "loud"\n')
    with pytest.raises(InvalidPolicy) as err:
        load(path)
    message = str(err.value)
    assert "fail_on" in message and "distributions" in message and "print-call" in message


def test_approval_needs_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[approved]]\npath = "a.py"\nhash = "sha256=x"\n')
    with pytest.raises(InvalidPolicy, match="reason"):
        load(path)


def test_python_and_path_are_exclusive() -> None:
    with pytest.raises(InvalidPolicy, match="not both"):
        Policy.from_dict({"python": "/x/bin/python", "path": "/x/lib"})


def test_pyproject_tool_table(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "svc"\n\n[tool.patchaudit]\ndistributions = ["vllm"]\nfail_on = "none"\n')
    policy = load(path)
    assert policy.distributions == ("vllm",)
    assert policy.fail_on is None


def test_pyproject_without_the_table_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "svc"\n')
    with pytest.raises(InvalidPolicy, match=r"\[tool.patchaudit\]"):
        load(path)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidPolicy, match="cannot read"):
        load(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("distributions = [\n")
    with pytest.raises(InvalidPolicy, match="not valid TOML"):
        load(broken)


def test_the_documented_examples_load() -> None:
    docs = Path(__file__).parent.parent / "baselines"
    policy = load(docs / "vllm.toml")
    assert policy.distributions[0] == "vllm" and policy.approved[0].path == "vllm/config/model.py"
    import json

    from patchaudit.gate.baseline import Baseline

    held = Baseline.from_dict(json.loads((docs / "vllm-baseline.example.json").read_text()))
    assert held.approved[0].hash == held.find("vllm").files["vllm/config/model.py"]


def test_workers_key() -> None:
    assert Policy.from_dict({"workers": 4}).workers == 4
    assert Policy.from_dict({}).workers is None
    for bad in (0, -1, "4", True, 1.5):
        with pytest.raises(InvalidPolicy, match="'workers' must be a whole number"):
            Policy.from_dict({"workers": bad})
