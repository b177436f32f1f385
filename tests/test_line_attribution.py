"""A finding in a change points at a changed line, in files full of statements that look alike.

Each case is a pristine module with several near-identical statements and an installed copy in
which one of them (not the first, not the last) was edited; the rule's findings must name the
edited line, never an untouched twin.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.hazards.changes import changed_lines

RULES = {rule.ID: rule for rule in load_rules()}


def _three(stmt: str, header: str = "", indent: str = "    ") -> str:
    body = "".join(f"{indent}{stmt.format(i=i)}\n" for i in range(3))
    return header + "def forward(self, x, path, a, b):\n" + body + f"{indent}return x\n"


# rule -> (pristine, installed, path); the edit is always to the middle one of the look-alikes.
CASES: dict[str, tuple[str, str, str]] = {}


def case(rule: str, pristine: str, installed: str, path: str = "m.py") -> None:
    CASES[rule] = (textwrap.dedent(pristine), textwrap.dedent(installed), path)


case(
    "torch-save",
    _three("torch.save(x, path)", "import torch\n\n"),
    _three("torch.save(x, path)", "import torch\n\n").replace(
        "torch.save(x, path)\n    torch.save(x, path)", "torch.save(x, path)\n    torch.save(x, '/tmp/x.pt')", 1
    ),
)
case(
    "token-count-branch",
    _three("if x.shape[0] == 0: print({i})"),
    _three("if x.shape[0] == 0: print({i})").replace("== 0: print(1)", "== 5: print(1)"),
)
case(
    "fixed-path-load",
    _three("a = torch.load(path)", "import torch\n\n"),
    _three("a = torch.load(path)", "import torch\n\n").replace(
        "a = torch.load(path)\n    a = torch.load(path)", "a = torch.load(path)\n    a = torch.load('/srv/k/a.pt')", 1
    ),
)
case(
    "hardcoded-override",
    "_CAP = 8\n\n" + _three("a = min(a, {i})"),
    "_CAP = 8\n_MINE = 4\n\n" + _three("a = min(a, {i})").replace("a = min(a, 1)", "a = min(a, _MINE)", 1),
)
case(
    "file-write",
    _three("open(path, 'w').write('{i}')"),
    _three("open(path, 'w').write('{i}')").replace("open(path, 'w').write('1')", "open('/tmp/x', 'w').write('1')"),
)
case(
    "disabled-guard",
    """\
    def f(a, b):
        if (
            a
            and b
        ):
            raise ValueError("a")
        if (
            a
            and b
        ):
            raise ValueError("a")
        if (
            a
            and b
        ):
            raise ValueError("a")
    """,
    """\
    def f(a, b):
        if (
            a
            and b
        ):
            raise ValueError("a")
        if (
            a
            and False
        ):
            raise ValueError("a")
        if (
            a
            and b
        ):
            raise ValueError("a")
    """,
)
case(
    "debugger",
    _three("log({i})", "import pdb\n\n"),
    _three("log({i})", "import pdb\n\n").replace("log(1)", "pdb.set_trace()"),
)
case(
    "env-mutation",
    "import os\n" + "".join(f"os.environ['A{i}'] = os.environ.get('B', '')\n" for i in range(3)),
    "import os\nos.environ['A0'] = os.environ.get('B', '')\nos.environ['A1'] = '1'\n"
    "os.environ['A2'] = os.environ.get('B', '')\n",
)
case(
    "print-call",
    _three("log('{i}')"),
    _three("log('{i}')").replace("log('1')", "print('1')"),
)
case(
    "host-sync",
    _three("y{i} = x.sum()"),
    _three("y{i} = x.sum()").replace("y1 = x.sum()", "y1 = x.sum().item()"),
)
case(
    "process-or-network",
    _three("run(['ls', '{i}'])", "import subprocess\n\n"),
    _three("run(['ls', '{i}'])", "import subprocess\n\n").replace("run(['ls', '1'])", "subprocess.run(['ls', '1'])"),
)
case(
    "removed-guard",
    """\
    def f(a, b, c):
        if a < 0:
            raise ValueError("bad")
        if b < 0:
            raise ValueError("bad")
        if c < 0:
            raise ValueError("bad")
        return a
    """,
    """\
    def f(a, b, c):
        if a < 0:
            raise ValueError("bad")
        if b < 0:
            pass
        if c < 0:
            raise ValueError("bad")
        return a
    """,
)
case(
    "startup-hook",
    "/opt/a\n/opt/b\n/opt/c\n",
    "/opt/a\nimport hotfix; hotfix.apply()\n/opt/c\n",
    path="extra.pth",
)


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_a_finding_in_a_change_points_at_a_changed_line(rule_id: str) -> None:
    pristine, installed, path = CASES[rule_id]
    assert pristine != installed
    changed = changed_lines(installed, pristine)
    file = SourceFile(path=path, installed=installed.encode(), pristine=pristine.encode(), drifted=True)
    found = [f for f in check_file(file, [RULES[rule_id]]) if f.rule == rule_id]
    assert found, f"{rule_id}: the edit went unnoticed"
    assert all(f.line in changed for f in found), (rule_id, [(f.line, f.message) for f in found], sorted(changed))


def test_removed_guard_names_the_edited_raise_of_three() -> None:
    pristine, installed, path = CASES["removed-guard"]
    file = SourceFile(path=path, installed=installed.encode(), pristine=pristine.encode(), drifted=True)
    (finding,) = check_file(file, [RULES["removed-guard"]])
    assert finding.line == 5
