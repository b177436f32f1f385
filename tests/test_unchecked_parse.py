"""libcst's parse without its per-node checks: the same tree, and the checks back for every node built after."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest

from patchaudit.hazards.engine import _parse_cst, check_file
from patchaudit.hazards.loading import load_rules
from patchaudit.hazards.source import SourceFile

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.mark.parametrize("module", ["argparse.py", "dataclasses.py", "email/_header_value_parser.py", "typing.py"])
def test_the_tree_is_the_checked_parse(module: str) -> None:
    data = (STDLIB / module).read_bytes()
    assert _parse_cst(data).deep_equals(cst.parse_module(data))


def test_a_node_built_after_a_scan_is_checked() -> None:
    code = b"import torch\n\ndef f(x):\n    torch.save(x, '/tmp/x.pt')  # here\n"
    found = check_file(SourceFile(path="m.py", installed=code, pristine=None, drifted=True), load_rules([]))
    assert [f.rule for f in found if f.rule == "torch-save"]
    with pytest.raises(cst.CSTValidationError):
        cst.Comment("no hash")


def test_a_parse_that_fails_leaves_the_checks_on() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        _parse_cst(b"def broken(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_code_that_trips_libcsts_own_check_is_read_by_the_rules() -> None:
    """`x if y else(lambda: 1)` is Python, and libcst's parser reads it; its node check raises a
    TypeError on it. Checked, the file was reported as one that does not parse, and the dump beside
    it went unread."""
    code = (
        b"import torch\n\ndef save(model, path):\n    x = path if path else(lambda:1)\n"
        b"    torch.save(model.state_dict(), '/tmp/m.pt')\n"
    )
    found = check_file(SourceFile(path="m.py", installed=code, pristine=None, drifted=True), load_rules([]))
    assert [(f.rule, f.severity.value, f.line) for f in found] == [("torch-save", "high", 5)]
