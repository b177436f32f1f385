"""The rule pack: every rule's own examples, the rules commands, user packs, the packaged pack."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from wheels import make_venv, patchaudit, pip_install, site_packages

from patchaudit.hazards import SourceFile, check_files, load_rules, run_example
from patchaudit.report import Severity
from patchaudit.rule import Example

REPO = Path(__file__).resolve().parents[1]
CATALOG = {
    "torch-save": Severity.HIGH,
    "token-count-branch": Severity.MEDIUM,  # high per finding when the branch has side effects
    "file-write": Severity.MEDIUM,  # high per finding in forward functions and temp dirs
    "removed-guard": Severity.HIGH,
    "disabled-guard": Severity.HIGH,
    "debugger": Severity.HIGH,
    "startup-hook": Severity.HIGH,
    "env-mutation": Severity.MEDIUM,
    "print-call": Severity.LOW,
    "host-sync": Severity.MEDIUM,
    "process-or-network": Severity.MEDIUM,
    "fixed-path-load": Severity.HIGH,  # medium per finding in a file that verifies (--all-files)
    "hardcoded-override": Severity.HIGH,  # drifted files only
}
RULES = load_rules()
CASES = [
    pytest.param(rule, kind, index, example, id=f"{rule.ID}-{kind}-{index}")
    for rule in RULES
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for index, example in enumerate(examples)
]


@pytest.mark.parametrize(("rule", "kind", "index", "example"), CASES)
def test_rule_example(rule, kind, index, example) -> None:
    result = run_example(rule, kind, index, example)
    assert result.ok, result.problem


def test_the_pack_is_the_catalog() -> None:
    assert {r.ID: r.SEVERITY for r in RULES} == CATALOG
    for rule in RULES:
        assert rule.VALID and rule.INVALID, rule.ID
        assert rule.MESSAGE and "\n" not in rule.MESSAGE
        assert len(rule.EXPLANATION.split()) > 20, rule.ID


def test_rules_list_and_explain() -> None:
    listed = patchaudit("rules", "list")
    assert listed.returncode == 0, listed.stderr
    from patchaudit.models.configrules import catalog

    config_rules = [r.ID for r in catalog()]  # config rules follow the hazard rules
    assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(CATALOG) + config_rules
    explained_config = patchaudit("rules", "explain", "config-quantization")
    assert explained_config.returncode == 0 and "kv_cache_quant_algo" in explained_config.stdout
    explained = patchaudit("rules", "explain", "token-count-branch")
    assert explained.returncode == 0
    assert "num_tokens" in explained.stdout and "Flagged:" in explained.stdout
    unknown = patchaudit("rules", "explain", "no-such-rule")
    assert unknown.returncode == 2
    assert "no rule 'no-such-rule'" in unknown.stderr


def test_builtin_pack_passes_its_own_examples() -> None:
    result = patchaudit("rules", "test")
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip().endswith("0 failed")


USER_RULE = '''
"""time-sleep: a sleep in a forward function."""

import libcst as cst

from patchaudit.rule import Example, Rule, Severity


class TimeSleep(Rule):
    ID = "time-sleep"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "time.sleep() in a forward function"
    EXPLANATION = "A sleep in forward stalls every step; it is a leftover from debugging a race."
    PREFILTER = b"sleep"
    VALID = ["import time\\ndef load(self):\\n    time.sleep(1)\\n"]
    INVALID = [Example(code="from time import sleep as zz\\ndef forward(self, x):\\n    zz(0.1)\\n", line=3)]

    def visit_Call(self, node: cst.Call) -> None:
        if self.in_forward and self.resolves_to(node, "time.sleep"):
            self.report(node)
'''


def _write_pack(directory: Path, body: str) -> Path:
    directory.mkdir()
    (directory / "time_sleep.py").write_text(textwrap.dedent(body))
    return directory


def test_user_pack_is_tested_listed_and_run(tmp_path: Path) -> None:
    pack = _write_pack(tmp_path / "myrules", USER_RULE)
    tested = patchaudit("rules", "test", pack)
    assert tested.returncode == 0, tested.stdout
    assert "1 rules, 2 passed, 0 failed" in tested.stdout
    listed = patchaudit("rules", "list", "--rules", pack)
    assert "time-sleep" in listed.stdout and "torch-save" in listed.stdout
    code = b"import time\n\ndef forward(self, x):\n    time.sleep(2)\n    return x\n"
    found = check_files([SourceFile(path="pkg/model.py", installed=code, pristine=None)], rule_dirs=[pack])
    # The pack's rule runs beside the built-in ones (host-sync reads a patch's sleep in a forward too).
    assert sorted((f.rule, f.line) for f in found) == [("host-sync", 4), ("time-sleep", 4)]


def test_user_pack_with_a_wrong_example_fails(tmp_path: Path) -> None:
    broken = USER_RULE.replace("zz(0.1)", "print(0.1)")
    pack = _write_pack(tmp_path / "broken", broken)
    tested = patchaudit("rules", "test", pack)
    assert tested.returncode == 1
    assert "FAIL time-sleep INVALID[0]: expected a finding, got none" in tested.stdout


def test_user_pack_that_does_not_load_is_a_usage_error(tmp_path: Path) -> None:
    pack = _write_pack(tmp_path / "bad", "import no_such_module_here\n")
    tested = patchaudit("rules", "test", pack)
    assert tested.returncode == 2
    assert "ModuleNotFoundError" in tested.stderr
    dup = tmp_path / "dup"
    dup.mkdir()
    (dup / "mine.py").write_text(USER_RULE.replace('"time-sleep"', '"torch-save"'))
    listed = patchaudit("rules", "list", "--rules", dup)
    assert listed.returncode == 2 and "already defined" in listed.stderr


def test_example_runner_reports_a_missing_finding_line() -> None:
    (rule,) = [r for r in RULES if r.ID == "print-call"]
    result = run_example(rule, "invalid", 0, Example(code="print(1)\n", line=7))
    assert not result.ok and "line 7" in result.problem


def test_installed_wheel_ships_the_pack(tmp_path: Path) -> None:
    wheels = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, REPO],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )
    (wheel,) = wheels.glob("patchaudit-*.whl")
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    site = site_packages(python)
    # Dependencies come from the test runner's environment, after the venv's own site-packages,
    # so `patchaudit` itself is the installed wheel, not this checkout.
    deps = Path(next(p for p in sys.path if p.endswith("site-packages")))
    (site / "zz_test_deps.pth").write_text(f"{deps}\n")
    where = subprocess.run(
        [python, "-c", "import patchaudit.hazards as h; print(h.builtin_rules_dir())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not the checkout: `python -c` puts the working directory on sys.path
    )
    assert Path(where.stdout.strip()) == site / "patchaudit" / "_rules"
    listed = subprocess.run(
        [python.parent / "patchaudit", "rules", "list"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    from patchaudit.models.configrules import catalog

    config_rules = [r.ID for r in catalog()]  # config rules follow the hazard rules
    assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(CATALOG) + config_rules
    explained_config = patchaudit("rules", "explain", "config-quantization")
    assert explained_config.returncode == 0 and "kv_cache_quant_algo" in explained_config.stdout


def test_rules_test_counts_what_rules_list_shows_and_explain_suggests_an_id() -> None:
    import re

    from wheels import patchaudit

    listed = patchaudit("rules", "list")
    tested = patchaudit("rules", "test")
    assert listed.returncode == tested.returncode == 0, tested.stdout
    count = len(listed.stdout.splitlines())
    summary = tested.stdout.splitlines()[-1]
    assert re.match(rf"{count} rules \(\d+ code rules, \d+ config rules\), \d+ passed, 0 failed$", summary)

    wrong = patchaudit("rules", "explain", "torch_save")
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert "did you mean torch-save?" in wrong.stderr
    far = patchaudit("rules", "explain", "zzzz")
    assert far.returncode == 2 and "did you mean" not in far.stderr and "rules list" in far.stderr


def test_every_rule_page_lists_what_it_understands_and_what_it_does_not() -> None:
    for rule in RULES:
        text = rule.EXPLANATION
        assert "Shapes understood:" in text, rule.ID
        assert "Knowingly not:" in text, rule.ID
        assert text.index("Shapes understood:") < text.index("Knowingly not:"), rule.ID


def test_a_call_through_a_table_in_a_batch_of_one_branch_is_read_without_error() -> None:
    """`self.pickers[kind](logits)` has no name to read: the greedy reading of a lone request's branch
    must skip it, not fail the file (a rule error hides every finding of the file's other rules)."""
    code = textwrap.dedent(
        """
        class Sampler:
            def sample(self, logits, metadata):
                if logits.shape[0] == 1:
                    picked = self.pickers[metadata.kind](logits)
                else:
                    picked = self.sample_all(logits, metadata)
                return picked
        """
    ).encode()
    found = check_files([SourceFile(path="pkg/sampler.py", installed=code, pristine=None)])
    assert [f.rule for f in found if f.rule == "rule-error"] == [], found
