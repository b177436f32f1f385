"""SARIF output: valid against the SARIF 2.1.0 schema, and what code-scanning tools rely on."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from patchaudit.hazards import SourceFile, check_files, load_rules
from patchaudit.render.sarif import render_sarif
from patchaudit.report import (
    DistReport,
    Drift,
    DriftState,
    EnvironmentReport,
    Finding,
    Report,
    Severity,
    Source,
    Target,
)

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
SITE = "/srv/vllm/lib/python3.12/site-packages"

PATCHED = b"""import torch


def forward(self, x):
    print(x.shape)  # patchaudit: ignore[print-call] kept while the bug is open
    if x.shape[0] == 5:
        torch.save(x, "/tmp/x.pt")
    return x
"""


def _report(findings: list[Finding], env: list[Finding] = ()) -> Report:
    dist = DistReport(name="vllm", version="0.33.0", location=SITE, source=Source.WHEEL, findings=tuple(findings))
    return Report(
        target=Target(python="/srv/vllm/bin/python", paths=(SITE,)),
        distributions=(dist,),
        environment=EnvironmentReport(findings=tuple(env)),
    )


def _sarif(installed: bytes = PATCHED) -> dict:
    findings = check_files([SourceFile(path="vllm/model.py", installed=installed, pristine=None)])
    hook = check_files([SourceFile(path="glm5_hotfix.pth", installed=b"import glm5\n", pristine=None)])
    broken = check_files([SourceFile(path="vllm/junk.py", installed=b"\xff\x00\x01", pristine=None)])
    return render_sarif(_report(findings + broken, hook), load_rules())


def test_output_is_valid_sarif_2_1_0() -> None:
    doc = _sarif()
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    json.dumps(doc)  # serialisable as is


def test_results_carry_rule_level_location_and_suppression() -> None:
    (run,) = _sarif()["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert {"torch-save", "removed-guard", "startup-hook", "parse-error"} <= {r["id"] for r in rules}
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert by_rule["torch-save"]["level"] == "error"
    assert by_rule["token-count-branch"]["level"] == "error"  # side effects in the branch
    assert by_rule["print-call"]["level"] == "note"
    assert by_rule["parse-error"]["level"] == "warning"
    assert by_rule["print-call"]["suppressions"] == [{"kind": "inSource"}]
    assert "suppressions" not in by_rule["torch-save"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    location = by_rule["torch-save"]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "vllm/model.py", "uriBaseId": "SITEPACKAGES"}
    assert location["region"] == {"startLine": 7, "startColumn": 9}
    assert run["originalUriBaseIds"]["SITEPACKAGES"]["uri"] == f"file://{SITE}/"
    hook = by_rule["startup-hook"]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert hook == {"uri": "glm5_hotfix.pth", "uriBaseId": "SITEPACKAGES"}
    severity = {r["id"]: r["defaultConfiguration"]["level"] for r in rules}
    assert severity["removed-guard"] == "error" and severity["env-mutation"] == "warning"


def test_fingerprints_survive_lines_moving() -> None:
    before = _sarif()["runs"][0]["results"]
    after = _sarif(b"# a comment added above\n\n" + PATCHED)["runs"][0]["results"]

    def prints(results):
        return {
            (r["ruleId"], r["partialFingerprints"]["patchaudit/v1"]): r["locations"][0]["physicalLocation"]["region"][
                "startLine"
            ]
            for r in results
        }

    a, b = prints(before), prints(after)
    assert a.keys() == b.keys()
    assert all(b[key] == a[key] + 2 for key in a if key[0] != "startup-hook" and key[0] != "parse-error")
    assert len({r["partialFingerprints"]["patchaudit/v1"] for r in before}) == len(before)


def test_two_identical_findings_get_distinct_fingerprints() -> None:
    twice = b'import torch\ntorch.save(a, "/tmp/x")\ntorch.save(a, "/tmp/x")\n'
    results = _sarif(twice)["runs"][0]["results"]
    saves = [r["partialFingerprints"]["patchaudit/v1"] for r in results if r["ruleId"] == "torch-save"]
    assert len(saves) == 2 and saves[0] != saves[1]


def test_empty_report_is_valid() -> None:
    doc = render_sarif(_report([]), load_rules(), base_path_id="SRCROOT")
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    assert doc["runs"][0]["results"] == []
    assert "SRCROOT" in doc["runs"][0]["originalUriBaseIds"]


def test_a_finding_from_an_unknown_rule_gets_a_descriptor() -> None:
    odd = Finding(rule="policy-x", severity=Severity.INFO, path="a b.py", line=0, message="m")
    doc = render_sarif(_report([odd]), [])
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    (result,) = doc["runs"][0]["results"]
    assert result["level"] == "note"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "a%20b.py"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 1


def test_every_drifted_file_is_a_result_and_every_rule_is_ranked() -> None:
    findings = check_files([SourceFile(path="vllm/model.py", installed=PATCHED, pristine=None)])
    drift = (
        Drift(path="vllm/model.py", state=DriftState.MODIFIED, expected="sha256=a", actual="sha256=b"),
        Drift(path="vllm/config/model.py", state=DriftState.MODIFIED, expected="sha256=c", actual="sha256=d"),
    )
    dist = DistReport(
        name="vllm", version="0.33.0", location=SITE, source=Source.WHEEL, drift=drift, findings=tuple(findings)
    )
    hook = Drift(path="glm5_hotfix.pth", state=DriftState.ADDED, actual="sha256=e")
    report = Report(
        target=Target(python="/srv/vllm/bin/python", paths=(SITE,)),
        distributions=(dist,),
        environment=EnvironmentReport(drift=(hook,)),
    )
    doc = render_sarif(report, load_rules())
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    (run,) = doc["runs"]
    results = run["results"]
    assert len(results) == len(findings) + 3
    drifted = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r["ruleId"]
        for r in results
        if r["ruleId"].endswith("-file")
    }
    assert drifted == {
        "vllm/model.py": "modified-file",
        "vllm/config/model.py": "modified-file",  # drift without a finding is not left out
        "glm5_hotfix.pth": "added-file",
    }
    for rule in run["tool"]["driver"]["rules"]:
        score = float(rule["properties"]["security-severity"])
        assert 0.0 <= score <= 10.0, rule["id"]
        assert rule["helpUri"].startswith("file:///"), rule["id"]
        assert Path(rule["helpUri"].removeprefix("file://")).is_file(), rule["id"]
    by_id = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert float(by_id["torch-save"]["properties"]["security-severity"]) >= 7.0  # GitHub: high
    assert float(by_id["print-call"]["properties"]["security-severity"]) < 4.0  # GitHub: low
    assert by_id["torch-save"]["helpUri"].endswith("/torch_save.py")
