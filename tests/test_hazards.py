"""The hazard engine: change mapping, suppressions, parse errors, precision, cache, workers."""

from __future__ import annotations

import email
import gc
import json
import os
import sys
from pathlib import Path

import click
import packaging
import pytest
from pristine_helpers import build_wheel, make_venv, patchaudit, pip_install, site_packages

from patchaudit.hazards import (
    SourceFile,
    check_file,
    check_files,
    load_rules,
    pth_executable_lines,
)
from patchaudit.report import Severity

VENDOR = b"""import torch


def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)


class Attention:
    def forward(self, x, num_tokens):
        if x.dtype == "fp8":
            raise NotImplementedError("fp8 is not supported here")
        return x
"""

PATCHED = b"""import torch


def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)


class Attention:
    def forward(self, x, num_tokens):
        if x.dtype == "fp8":
            print("fp8, carrying on")
        if num_tokens == 5:
            torch.save(x, "/tmp/attn.pt")
        return x
"""


def _by_rule(findings):
    return sorted((f.rule, f.line, f.severity.value) for f in findings)


def test_patch_is_blamed_not_the_vendor() -> None:
    found = check_files([SourceFile(path="m/attn.py", installed=PATCHED, pristine=VENDOR)])
    assert _by_rule(found) == [
        ("print-call", 11, "low"),
        ("removed-guard", 11, "high"),
        ("token-count-branch", 12, "high"),
        ("torch-save", 13, "high"),
    ]
    assert all(f.in_change and f.path == "m/attn.py" for f in found)
    # The vendor's own torch.save on line 5 is outside the change: not reported.
    assert not any(f.line == 5 for f in found)


def test_without_pristine_every_finding_counts_as_changed() -> None:
    found = check_files([SourceFile(path="m/attn.py", installed=PATCHED, pristine=None)])
    assert ("torch-save", 13, "high") in _by_rule(found)
    # A save function writing where its caller says is not a dump.
    assert not any(f.line == 5 for f in found)
    assert "removed-guard" not in {f.rule for f in found}  # needs pristine bytes
    assert all(f.in_change for f in found)


def test_all_files_mode_reports_but_not_as_change() -> None:
    found = check_files([SourceFile(path="m/attn.py", installed=PATCHED, pristine=VENDOR, drifted=False)])
    assert ("torch-save", 13, "high") in _by_rule(found)
    assert all(not f.in_change for f in found)
    assert "removed-guard" not in {f.rule for f in found}


def test_aliases_resolve_and_shadowing_does_not_fool_the_rules() -> None:
    code = b"""import torch as t
from torch import save as s
import numpy as np

t.save(x, "/tmp/a.pt")
s(x, "/tmp/b.pt")


def f(print, np):
    print("not the builtin")
    np.save("/tmp/c.npy", x)
"""
    found = check_files([SourceFile(path="p.py", installed=code, pristine=None)])
    assert _by_rule(found) == [("torch-save", 5, "high"), ("torch-save", 6, "high")]


def test_suppression_on_line_and_statement_first_line() -> None:
    code = b"""import torch
torch.save(x, "/tmp/a.pt")  # patchaudit: ignore[torch-save] needed for the repro, ticket 12
torch.save(  # patchaudit: ignore[torch-save] multi-line call
    x,
    "/tmp/b.pt",
)
print("x")  # patchaudit: ignore[torch-save] wrong rule
dumps = [  # patchaudit: ignore[torch-save] on the statement's first line
    torch.save(y, "/tmp/c.pt"),
]
"""
    found = check_files([SourceFile(path="p.py", installed=code, pristine=None)])
    rows = sorted((f.rule, f.line, f.suppressed, f.severity.value) for f in found)
    assert rows == [
        ("print-call", 7, False, "low"),
        ("torch-save", 2, True, "high"),
        ("torch-save", 3, True, "high"),
        ("torch-save", 9, True, "high"),
        ("unused-ignore", 7, False, "low"),
    ]


def test_files_that_do_not_parse_give_a_finding_not_a_crash() -> None:
    files = [
        SourceFile(path="a/syntax.py", installed=b"def f(:\n    pass\n", pristine=None),
        SourceFile(path="a/latin.py", installed=b"x = '\xff\xfe caf\xe9'\n", pristine=None),
        SourceFile(path="a/binary.py", installed=b"\x7fELF\x02\x01\x01\x00\x00\x00" * 20, pristine=None),
        SourceFile(path="a/vendor_binary.py", installed=b"\x00\x01print(", pristine=None, drifted=False),
    ]
    found = check_files(files)
    assert {f.path for f in found if f.rule == "parse-error"} == {f.path for f in files}
    assert all(f.severity is Severity.MEDIUM for f in found)


def test_pth_lines_that_run_code() -> None:
    text = "/opt/lib\nimport sys\n  import os\nimport\tos; os.environ['A']='1'\n# import x\nimportlib\n"
    assert pth_executable_lines(text) == [2, 4]
    found = check_files([SourceFile(path="hotfix.pth", installed=text.encode(), pristine=None)])
    assert [(f.rule, f.line) for f in found] == [("startup-hook", 2), ("startup-hook", 4)]


def test_severity_overrides_apply_to_every_rule() -> None:
    found = check_files(
        [SourceFile(path="m/attn.py", installed=PATCHED, pristine=VENDOR)],
        severity_overrides={"print-call": Severity.HIGH, "torch-save": Severity.INFO},
    )
    severities = {f.rule: f.severity for f in found}
    assert severities["print-call"] is Severity.HIGH
    assert severities["torch-save"] is Severity.INFO


def test_cache_returns_the_same_findings(tmp_path: Path) -> None:
    files = [SourceFile(path="m/attn.py", installed=PATCHED, pristine=VENDOR)]
    first = check_files(files, cache_dir=tmp_path)
    assert list(tmp_path.rglob("*.json"))
    # A cached entry is what the second run returns: make that visible by editing it.
    (entry,) = tmp_path.rglob("*.json")
    rows = json.loads(entry.read_text())
    assert len(rows) == len(first)
    assert check_files(files, cache_dir=tmp_path) == first
    other = [SourceFile(path="m/attn.py", installed=PATCHED + b"\n", pristine=VENDOR)]
    assert len(check_files(other, cache_dir=tmp_path)) == len(first)
    assert len(list(tmp_path.rglob("*.json"))) == 2


def _package_files(package) -> list[SourceFile]:
    root = Path(package.__file__).parent
    return [
        SourceFile(path=p.relative_to(root.parent).as_posix(), installed=p.read_bytes(), pristine=None, drifted=False)
        for p in sorted(root.rglob("*.py"))
    ]


PRECISION_CORPUS = _package_files(json) + _package_files(email) + _package_files(click) + _package_files(packaging)


def test_precision_no_high_on_pristine_real_packages() -> None:
    found = check_files(PRECISION_CORPUS, workers=2)
    highs = [f"{f.path}:{f.line} {f.rule}" for f in found if f.severity is Severity.HIGH]
    assert highs == []
    # The pack still sees real code: the CLI library prints, that is its job.
    assert any(f.rule == "print-call" for f in found) or any(f.rule == "process-or-network" for f in found)


def test_pool_and_serial_agree() -> None:
    drifted = [SourceFile(path=f"m/attn{i}.py", installed=PATCHED, pristine=VENDOR) for i in range(40)]
    drifted += [SourceFile(path=f.path, installed=f.installed, pristine=None) for f in _package_files(json)]
    pooled = check_files(drifted, workers=2)
    assert pooled == check_files(drifted, workers=1)
    assert len({f.path for f in pooled if f.rule == "torch-save"}) == 40


def test_prefilters_change_nothing_on_real_code() -> None:
    rules = load_rules()
    corpus = (
        _package_files(click)
        + _package_files(json)
        + [
            SourceFile(path="m/attn.py", installed=PATCHED, pristine=None),
            SourceFile(path="m/attn2.py", installed=PATCHED, pristine=VENDOR),
            SourceFile(
                path="m/shadow.py",
                installed=b"import os\nimport torch as print\nprint.save(1, '/tmp/x')\n"
                b"def f(os):\n    os.system('x')\nos = None\n",
                pristine=None,
            ),
        ]
    )
    flagged = 0
    for file in corpus:
        fast = check_file(file, rules)
        assert fast == check_file(file, rules, prefilter=False), file.path
        flagged += bool(fast)
    assert flagged > 5  # the corpus gives the rules something to find


def test_a_rule_that_raises_is_reported_not_fatal(tmp_path: Path) -> None:
    pack = tmp_path / "buggy"
    pack.mkdir()
    (pack / "buggy.py").write_text(
        "import libcst as cst\nfrom patchaudit.rule import Rule, Severity\n\n"
        "class Buggy(Rule):\n    ID = 'buggy'\n    SEVERITY = Severity.LOW\n    MESSAGE = 'm'\n"
        "    EXPLANATION = 'e'\n\n    def visit_Call(self, node: cst.Call) -> None:\n        raise KeyError('boom')\n"
    )
    found = check_files([SourceFile(path="x.py", installed=b"f()\n", pristine=None)], rule_dirs=[pack])
    assert [(f.rule, f.severity) for f in found] == [("rule-error", Severity.LOW)]
    assert "KeyError" in found[0].message


def test_the_collector_is_paused_for_a_file_and_given_back_as_found(tmp_path: Path) -> None:
    """The cyclic collector is off while a file's rules run (a parse's objects are not walked again
    and again), and the caller's setting comes back after, a rule that raises included."""
    pack = tmp_path / "probe"
    pack.mkdir()
    (pack / "probe.py").write_text(
        "import gc\nimport libcst as cst\nfrom patchaudit.rule import Rule, Severity\n\n"
        "class Probe(Rule):\n    ID = 'probe'\n    SEVERITY = Severity.LOW\n    MESSAGE = 'm'\n"
        "    EXPLANATION = 'e'\n\n    def visit_Call(self, node: cst.Call) -> None:\n"
        "        self.report(node, f'collector on: {gc.isenabled()}')\n        raise KeyError('boom')\n"
    )
    rules = load_rules([pack])
    source = SourceFile(path="x.py", installed=b"f()\n", pristine=None)
    was = gc.isenabled()
    try:
        gc.enable()
        found = check_file(source, rules)
        assert gc.isenabled()
        assert [f.rule for f in found] == ["rule-error"]  # it raised after its report: the file's error only
        gc.disable()
        check_file(source, rules)
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    (quiet / "probe.py").write_text((pack / "probe.py").read_text().replace("        raise KeyError('boom')\n", ""))
    found = check_file(source, load_rules([quiet]))
    assert [f.message for f in found if f.rule == "probe"] == ["collector on: False"]


_LAYER = b"""\
import torch


def _dump(t, path):
    torch.save(t, path)


class DecoderLayer:
    def forward(self, positions, hidden_states, residual):
        hidden_states = self.mlp(hidden_states)
        if hidden_states.shape[0] < 4:
            return torch.zeros_like(hidden_states), residual
        if positions.numel() == 5:
            _dump(hidden_states, "/tmp/h.pt")
        out = self.down(hidden_states)
        return out, residual
"""


def test_a_files_trees_are_freed_without_the_collector() -> None:
    """Nothing the hazard pass builds for a file (rules, their context, the parsed trees) is left in
    a reference cycle: the collector, when it runs after the file, finds no node of libcst or ast to
    free, so the cost of a file ends with the file."""
    import ast

    import libcst as cst

    rules = load_rules()
    source = SourceFile(path="layer.py", installed=_LAYER, pristine=None, drifted=False)
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = check_file(source, rules)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, cst.CSTNode | ast.AST)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        (gc.enable if was else gc.disable)()
    assert {f.rule for f in found} >= {"token-count-branch", "torch-save"}
    assert left == []


def test_a_walker_walks_once() -> None:
    """The walk lets go of the hooks it was given (they hold the file's rules and trees): a second
    walk with the same walker is refused, never a silent walk with no hooks."""
    import libcst as cst

    from patchaudit.analysis.walk import walker

    seen: list[str] = []
    walking = walker({"visit_Name": [lambda node: seen.append(node.value)]})
    assert walking is not None
    module = cst.parse_module("a = b\n")
    walking.walk(module)
    assert seen == ["a", "b"]
    with pytest.raises(RuntimeError, match="walks once"):
        walking.walk(module)


def test_a_rule_with_attribute_hooks_sees_them_in_libcst_order(tmp_path: Path) -> None:
    """`visit_If_body` runs after the test is visited and `leave_If_body` before `else`: a call is
    flagged only inside an `if` body, as libcst's own batched visit calls the hooks."""
    pack = tmp_path / "bodies"
    pack.mkdir()
    (pack / "in_body.py").write_text(
        "import libcst as cst\nfrom patchaudit.rule import Rule, Severity\n\n"
        "class InBody(Rule):\n    ID = 'in-body'\n    SEVERITY = Severity.LOW\n    MESSAGE = 'm'\n"
        "    EXPLANATION = 'e'\n    depth = 0\n\n"
        "    def visit_If_body(self, node: cst.If) -> None:\n        self.depth += 1\n\n"
        "    def leave_If_body(self, node: cst.If) -> None:\n        self.depth -= 1\n\n"
        "    def visit_Call(self, node: cst.Call) -> None:\n        if self.depth:\n            self.report(node)\n"
    )
    code = b"if check():\n    run()\nelse:\n    other()\nafter()\nif a:\n    if b():\n        deep()\n"
    found = check_files([SourceFile(path="x.py", installed=code, pristine=None)], rule_dirs=[pack])
    assert [(f.rule, f.line) for f in found] == [("in-body", 2), ("in-body", 7), ("in-body", 8)]


def test_a_finding_in_a_method_is_placed_as_in_the_whole_module() -> None:
    """Positions taken from the method that holds a finding alone match the whole module's."""
    code = b"""import torch


@register(
    "x",
)
class Runner(
    Base,
):
    # a comment above the method
    LIMIT = 5

    @staticmethod
    def helper(a):
        return a

    @decorate
    def forward(self, x, num_tokens):
        if num_tokens == 5:
            torch.save(x, "/tmp/x.pt")
        print(
            "done",
        )
        return x

    def other(self):  # nothing here
        return 1
"""
    source = SourceFile(path="m.py", installed=code, pristine=None)
    rules = load_rules()
    found = check_file(source, rules)
    assert {(f.rule, f.line) for f in found} >= {("torch-save", 20), ("print-call", 21)}
    assert [(f.rule, f.line, f.column) for f in found] == [
        (f.rule, f.line, f.column) for f in check_file(source, rules, prefilter=False)
    ]


def test_module_is_importable_without_ui_libraries() -> None:
    assert "rich" not in {m.split(".")[0] for m in sys.modules if m.startswith("patchaudit")}


FEED_VENDOR = "a = 1\n{sep}\ndef g():\n    # one{sep}two\n    return 2\n"


@pytest.mark.parametrize("sep", ["\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028"], ids=repr)
def test_splitlines_separators_do_not_shift_the_change(sep: str) -> None:
    vendor = FEED_VENDOR.format(sep=sep if sep == "\x0c" else "# " + sep)
    patched = vendor.replace("    return 2", "    breakpoint()\n    return 2")
    found = check_files([SourceFile(path="ff/__init__.py", installed=patched.encode(), pristine=vendor.encode())])
    assert [(f.rule, f.line, f.in_change) for f in found] == [("debugger", 5, True)]


def _installed(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, Path, Path]:
    wheel = build_wheel(tmp_path / "wheelhouse", "demo", "1.0", files)
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    return python, site_packages(python), wheel.parent


def test_form_feed_in_an_installed_file_keeps_the_finding(tmp_path: Path) -> None:
    vendor = b"a = 1\n\x0c\ndef g():\n    return 2\n"
    python, site, wheelhouse = _installed(tmp_path, {"ff/__init__.py": vendor})
    (site / "ff/__init__.py").write_bytes(vendor.replace(b"    return 2", b"    breakpoint()\n    return 2"))
    proc = patchaudit("scan", "--python", str(python), "--wheelhouse", str(wheelhouse), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    (dist,) = json.loads(proc.stdout)["distributions"]
    assert [(f["rule"], f["path"], f["line"], f["in_change"]) for f in dist["findings"]] == [
        ("debugger", "ff/__init__.py", 4, True)
    ]


def test_file_name_that_is_not_utf8_is_reported_not_a_crash(tmp_path: Path) -> None:
    python, site, _ = _installed(tmp_path, {"demo/__init__.py": b""})
    (site / "demo").joinpath(os.fsdecode(b"bad\xff.py")).write_bytes(b"x = 1\n")
    (site / "demo").joinpath(os.fsdecode(b"dbg\xfe.py")).write_bytes(b"breakpoint()\n")
    for _ in range(2):  # the second run reads the rule-result cache
        proc = patchaudit("scan", "--python", str(python), "--format", "json")
        assert proc.returncode == 1, proc.stderr
        (dist,) = json.loads(proc.stdout)["distributions"]
        assert sorted((d["path"], d["state"]) for d in dist["drift"]) == [
            ("demo/bad\udcff.py", "added"),
            ("demo/dbg\udcfe.py", "added"),
        ]
        assert [(f["rule"], f["path"]) for f in dist["findings"]] == [("debugger", "demo/dbg\udcfe.py")]
    proc = patchaudit("scan", "--python", str(python), "--format", "sarif")
    assert proc.returncode == 1, proc.stderr
    results = json.loads(proc.stdout)["runs"][0]["results"]
    (result,) = [r for r in results if r["ruleId"] == "debugger"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "demo/dbg%FE.py"
    added = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results if r is not result)
    assert added == ["demo/bad%FF.py", "demo/dbg%FE.py"]  # each drifted file is a result of its own
