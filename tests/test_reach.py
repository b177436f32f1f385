"""Reachability of guards: a check the pristine module had is reported when the installed one can no
longer reach it or it no longer fails, however the patch does it, and not when it moved or was
reworded. Engine-level: each case is one installed module checked against its pristine bytes.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

P = """
import os
import logging
import torch
logger = logging.getLogger(__name__)
DEBUG = False


class Attn:
    def __init__(self, head_size, dtype):
        self.head_size = head_size
        self.dtype = dtype

    def forward(self, q, k):
        if self.head_size not in (64, 128, 192):
            raise ValueError(f"unsupported head size {self.head_size}")
        assert q.shape[-1] == k.shape[-1], "q/k mismatch"
        self.check_dtype(q)
        out = q @ k.T
        return out

    def check_dtype(self, q):
        if q.dtype != self.dtype:
            raise TypeError("dtype")
"""
FWD_GUARD = """        if self.head_size not in (64, 128, 192):
            raise ValueError(f"unsupported head size {self.head_size}")
"""


def R(old, new):
    assert old in P, old
    return P.replace(old, new)


# A guard of the pristine module that the patch made dead, swallowed, bypassed or stubbed.
CAUGHT: dict[str, str | tuple[str, str]] = {
    "return_above": R(FWD_GUARD, "        return q @ k.T\n" + FWD_GUARD),
    "if_false_wrap": R(FWD_GUARD, "        if False:\n" + textwrap.indent(FWD_GUARD, "    ")),
    "one_eq_two": R("not in (64, 128, 192):", "not in (64, 128, 192) and 1 == 2:"),
    "debug_flag": R("not in (64, 128, 192):", "not in (64, 128, 192) and DEBUG:"),
    "local_const": R(FWD_GUARD, "        enforce = False\n" + FWD_GUARD.replace("if self", "if enforce and self")),
    "suppress": R(
        FWD_GUARD,
        "        from contextlib import suppress\n        with suppress(Exception):\n"
        + textwrap.indent(FWD_GUARD, "    "),
    ),
    "try_pass": R(
        FWD_GUARD,
        "        try:\n" + textwrap.indent(FWD_GUARD, "    ") + "        except Exception:\n            pass\n",
    ),
    "except_assertion": R(
        '        assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n',
        '        try:\n            assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n'
        '        except AssertionError:\n            logger.warning("mismatch")\n',
    ),
    "env_return": R(FWD_GUARD, '        if os.environ.get("SKIP_CHECK"):\n            return q @ k.T\n' + FWD_GUARD),
    "env_return_helper_var": R(
        FWD_GUARD,
        '        skip = os.getenv("SKIP_CHECK", "0") == "1"\n        if skip:\n            return q @ k.T\n'
        + FWD_GUARD,
    ),
    "logger_warning": R(
        'raise ValueError(f"unsupported head size {self.head_size}")',
        'logger.warning(f"unsupported head size {self.head_size}")',
    ),
    "commented_raise": R(
        '            raise ValueError(f"unsupported head size {self.head_size}")',
        '            # raise ValueError(f"unsupported head size {self.head_size}")\n            pass',
    ),
    "narrowed": R(
        '        assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n',
        '        if q.shape[-1] > 1e9:\n            raise ValueError("q/k mismatch")\n',
    ),
    "narrowed_if": R("if self.head_size not in (64, 128, 192):", "if self.head_size > 10**9:"),
    "check_call_pass": R("        self.check_dtype(q)\n", "        pass  # self.check_dtype(q)\n"),
    "check_call_none": R("        self.check_dtype(q)\n", "        None\n"),
    "assert_to_if_debug": R(
        '        assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n',
        '        if __debug__ and False:\n            assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n',
    ),
    "continue_loop": R(
        "        self.check_dtype(q)\n",
        "        for _ in range(1):\n            continue\n            self.check_dtype(q)\n",
    ),
    "helper_returns_early": R(
        "        if q.dtype != self.dtype:\n", "        return\n        if q.dtype != self.dtype:\n"
    ),
    "or_true": R("if self.head_size not in (64, 128, 192):", "if self.head_size not in (64, 128, 192) and not True:"),
    "class_flag": R("class Attn:\n", "class Attn:\n    STRICT = False\n").replace(
        "if self.head_size not in", "if self.STRICT and self.head_size not in"
    ),
    "return_in_with": R(FWD_GUARD, "        with torch.no_grad():\n            return q @ k.T\n" + FWD_GUARD),
    "envs_attr": R(
        FWD_GUARD,
        "        import vllm.envs as envs\n        if envs.VLLM_SKIP_HEAD_CHECK:\n            return q @ k.T\n"
        + FWD_GUARD,
    ),
    "raise_in_else_dead": R(
        FWD_GUARD, "        if True:\n            pass\n        else:\n" + textwrap.indent(FWD_GUARD, "    ")
    ),
    "cond_replaced_false": R("if self.head_size not in (64, 128, 192):", "if False:"),
    "cond_replaced_flag": R("if self.head_size not in (64, 128, 192):", "if DEBUG:"),
    "for_empty": R(FWD_GUARD, "        for _ in []:\n" + textwrap.indent(FWD_GUARD, "    ")),
    "while_false": R(FWD_GUARD, "        while False:\n" + textwrap.indent(FWD_GUARD, "    ")),
    "specific_except": R(
        FWD_GUARD,
        "        try:\n"
        + textwrap.indent(FWD_GUARD, "    ")
        + "        except (ValueError, TypeError) as e:\n            logger.warning(e)\n",
    ),
    "lambda_neuter": R(
        "        self.dtype = dtype\n", "        self.dtype = dtype\n        self.check_dtype = lambda q: None\n"
    ),
    "class_neuter": P + "\nAttn.check_dtype = lambda self, q: None\n",
    "zero_gt_one": R("if self.head_size not in (64, 128, 192):", "if 0 > 1 and self.head_size not in (64, 128, 192):"),
    "env_not_strict": R(
        FWD_GUARD, '        if not os.environ.get("STRICT_HEADS"):\n            return q @ k.T\n' + FWD_GUARD
    ),
    "module_env_flag": R("DEBUG = False\n", 'DEBUG = False\nSKIP = os.environ.get("SKIP_CHECKS") == "1"\n').replace(
        FWD_GUARD, "        if SKIP:\n            return q @ k.T\n" + FWD_GUARD
    ),
    "assert_or_true": R("assert q.shape[-1] == k.shape[-1],", "assert True or q.shape[-1] == k.shape[-1],"),
    "raise_to_return": R(
        '            raise ValueError(f"unsupported head size {self.head_size}")', "            return q @ k.T"
    ),
    "else_inverted_exit": R(
        FWD_GUARD,
        '        if os.environ.get("CHECK_HEADS"):\n            pass\n        else:\n            return q @ k.T\n'
        + FWD_GUARD,
    ),
    "getattr_env": R(
        FWD_GUARD,
        '        import vllm.envs as envs\n        if getattr(envs, "VLLM_SKIP", False):\n            return q @ k.T\n'
        + FWD_GUARD,
    ),
}
CAUGHT["assert_loosened"] = R("assert q.shape[-1] == k.shape[-1],", "assert q.shape[-1] >= -(1 << 30),")
CAUGHT["assert_loosened_pow"] = R("assert q.shape[-1] == k.shape[-1],", "assert q.numel() < 10**12,")

# The same guard moved, reworded or refactored: still checked.
QUIET: dict[str, str | tuple[str, str]] = {
    "moved_helper": R(FWD_GUARD, "        self._validate_head()\n").replace(
        "    def check_dtype", "    def _validate_head(self):\n" + FWD_GUARD + "\n    def check_dtype"
    ),
    "moved_helper2": R(FWD_GUARD, "        self._prep()\n").replace(
        "    def check_dtype",
        "    def _prep(self):\n        self._validate_head()\n\n    def _validate_head(self):\n"
        + FWD_GUARD
        + "\n    def check_dtype",
    ),
    "assert_as_if": R(
        '        assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n',
        '        if q.shape[-1] != k.shape[-1]:\n            raise AssertionError("q/k mismatch")\n',
    ),
    "message_changed": R('"q/k mismatch"', '"query and key head dims differ"'),
    "moved_down": R(
        FWD_GUARD + '        assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n',
        '        assert q.shape[-1] == k.shape[-1], "q/k mismatch"\n' + FWD_GUARD,
    ),
    "debug_print_added": R(
        "        out = q @ k.T\n", "        out = q @ k.T\n        if DEBUG:\n            print(out.shape)\n"
    ),
    "early_return_none": R(FWD_GUARD, "        if q is None:\n            return None\n" + FWD_GUARD),
    "refactor_tuple": R("(64, 128, 192)", "_HEADS").replace("class Attn:", "_HEADS = (64, 128, 192)\n\n\nclass Attn:"),
    "kernel_branch": R(
        "        out = q @ k.T\n",
        "        if self.head_size == 7168:\n            out = (q @ k.T).contiguous()\n"
        "        else:\n            out = q @ k.T\n",
    ),
    "documented_env_fastpath": R(
        "        out = q @ k.T\n",
        '        if os.environ.get("ATTN_FAST"):\n            return torch.matmul(q, k.T)\n        out = q @ k.T\n',
    ),
    "check_extended": R("if self.head_size not in (64, 128, 192):", "if self.head_size not in (64, 128, 192, 256):"),
    "huge_bound_ok": R(
        "        out = q @ k.T\n",
        "        if q.numel() > 2**31:\n            raise ValueError('too big')\n        out = q @ k.T\n",
    ),
}

QUIET["moved_helper_module"] = (
    R(FWD_GUARD, "        _validate_head(self.head_size)\n")
    + "\n\ndef _validate_head(h):\n    if h not in (64, 128, 192):\n"
    + "        raise ValueError(f'unsupported head size {h}')\n"
)
QUIET["moved_helper_module2"] = (
    R(FWD_GUARD, "        _prep(self)\n")
    + "\n\ndef _prep(m):\n    _validate_head(m.head_size)\n\n\ndef _validate_head(h):\n"
    + "    if h not in (64, 128, 192):\n        raise ValueError(f'unsupported head size {h}')\n"
)
QUIET["decorator_kept"] = R(
    "    def forward(self, q, k):", "    @validate_shapes\n    def forward(self, q, k):"
).replace("class Attn", "def validate_shapes(f):\n    return f\n\n\nclass Attn")
CAUGHT["raise_to_assert_O"] = R(FWD_GUARD, "        assert self.head_size in (64, 128, 192), 'head'\n")
CAUGHT["raise_keyword_dropped"] = R(
    '            raise ValueError(f"unsupported', '            ValueError(f"unsupported'
)
CAUGHT["finally_return"] = R(
    FWD_GUARD, "        try:\n" + textwrap.indent(FWD_GUARD, "    ") + "        finally:\n            return q @ k.T\n"
)
CAUGHT["type_checking"] = R(
    FWD_GUARD,
    "        from typing import TYPE_CHECKING\n        if TYPE_CHECKING:\n" + textwrap.indent(FWD_GUARD, "    "),
)
CAUGHT["suppress_alias"] = R(
    FWD_GUARD,
    "        import contextlib as cl\n        with cl.suppress(ValueError):\n" + textwrap.indent(FWD_GUARD, "    "),
)
CAUGHT["torch_assert"] = (
    R("        self.check_dtype(q)\n", "        torch._assert(q.dim() == 3, 'q')\n"),
    R("        self.check_dtype(q)\n", "        # torch._assert(q.dim() == 3, 'q')\n"),
)
CAUGHT["env_helper_fn"] = (
    R(FWD_GUARD, "        if _skip_checks():\n            return q @ k.T\n" + FWD_GUARD)
    + '\n\ndef _skip_checks():\n    return os.environ.get("SKIP_CHECKS", "0") == "1"\n'
)
CAUGHT["env_attr_init"] = R(
    "        self.dtype = dtype\n",
    '        self.dtype = dtype\n        self.fast = bool(int(os.getenv("ATTN_FAST", "0")))\n',
).replace(FWD_GUARD, "        if self.fast:\n            return q @ k.T\n" + FWD_GUARD)
CAUGHT["decorator_removed"] = (QUIET["decorator_kept"], QUIET["decorator_kept"].replace("    @validate_shapes\n", ""))
CAUGHT["decorator_commented"] = (
    QUIET["decorator_kept"],
    QUIET["decorator_kept"].replace("    @validate_shapes\n", "    # @validate_shapes\n"),
)
QUIET["decorator_moved"] = (
    QUIET["decorator_kept"],
    QUIET["decorator_kept"].replace(
        "    @validate_shapes\n    def forward(self, q, k):",
        "    @torch.no_grad()\n    @validate_shapes\n    def forward(self, q, k):",
    ),
)


# Conditions that can never hold, however they are spelled: folded over the whole boolean tree.
_HEAD = "not in (64, 128, 192):"
NEVER_TRUE = {
    "is_none_and_not_none": "not in (64, 128, 192) and q is None and q is not None:",
    "window_contradiction": "not in (64, 128, 192) and self.head_size > 5 and self.head_size < 3:",
    "yoda_contradiction": "not in (64, 128, 192) and (3 < self.head_size and 2 > self.head_size):",
    "not_a_and_a": "not in (64, 128, 192) and not k and k:",
    "isinstance_contradiction": "not in (64, 128, 192) and isinstance(q, int) and not isinstance(q, int):",
    "string_literals": 'not in (64, 128, 192) and "a" == "b":',
    "len_empty_tuple": "not in (64, 128, 192) and len(()) > 0:",
    "and_false_deep": "not in (64, 128, 192) and (q is not None and (k is None or False) and False):",
}
CAUGHT.update({name: R(_HEAD, test) for name, test in NEVER_TRUE.items()})
# Conditions that can hold: a two-sided window, two different names, `and True` in a branch.
SATISFIABLE = {
    "two_sided_window": "not in (64, 128, 192) and self.head_size > 5 and self.head_size < 300:",
    "two_names": "not in (64, 128, 192) and q is None and k is not None:",
    "or_true_in_a_branch": "not in (64, 128, 192) or (q is None and True):",
    "yoda_window": "not in (64, 128, 192) and 5 < self.head_size and 300 > self.head_size:",
    "nan_check": "not in (64, 128, 192) or q != q:",
}


RULES = load_rules()


def _high(case: str | tuple[str, str]) -> list[tuple[str, int]]:
    pristine, installed = case if isinstance(case, tuple) else (P, case)
    file = SourceFile(path="pkg/attn.py", installed=installed.encode(), pristine=pristine.encode())
    return [(f.rule, f.line) for f in check_file(file, RULES) if f.severity is Severity.HIGH and f.in_change]


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_disabled_guard_is_high(name: str) -> None:
    assert _high(CAUGHT[name]), CAUGHT[name]


@pytest.mark.parametrize("name", sorted(QUIET))
def test_moved_guard_is_not_high(name: str) -> None:
    assert _high(QUIET[name]) == [], QUIET[name]


@pytest.mark.parametrize("name", sorted(SATISFIABLE))
def test_satisfiable_condition_is_not_a_disabled_guard(name: str) -> None:
    installed = R(_HEAD, SATISFIABLE[name])
    file = SourceFile(path="pkg/attn.py", installed=installed.encode(), pristine=installed.encode())
    assert [f.line for f in check_file(file, RULES) if f.rule == "disabled-guard"] == [], installed


@pytest.mark.parametrize("name", sorted(NEVER_TRUE))
def test_never_true_condition_is_a_disabled_guard(name: str) -> None:
    installed = R(_HEAD, NEVER_TRUE[name])
    file = SourceFile(path="pkg/attn.py", installed=installed.encode(), pristine=P.encode())
    found = [(f.line, f.severity) for f in check_file(file, RULES) if f.rule == "disabled-guard"]
    assert (15, Severity.HIGH) in found, installed  # the `if` line


SWITCHED_OFF = """
import torch


def apply(x, w, fast_ok):
    # the fast kernel faults on this card
    if False:
        out = torch.ops.fast_mm(x, w)
    else:
        out = x @ w
    return out
"""


@pytest.mark.parametrize(
    ("code", "severity"),
    [
        (SWITCHED_OFF, Severity.MEDIUM),  # a path chosen, no check lost
        (SWITCHED_OFF.replace("out = torch.ops.fast_mm(x, w)", "torch.ops.warm_up(x)"), Severity.MEDIUM),
        (SWITCHED_OFF.replace("out = torch.ops.fast_mm(x, w)", "raise ValueError('no fast path')"), Severity.HIGH),
        (SWITCHED_OFF.replace("    else:\n        out = x @ w\n", ""), Severity.HIGH),
    ],
    ids=["fast_path_off", "call_off", "check_off", "no_else"],
)
def test_dead_branch_without_pristine_is_high_only_when_a_check_is_lost(code: str, severity: Severity) -> None:
    file = SourceFile(path="pkg/mm.py", installed=code.encode(), pristine=None)
    found = [f.severity for f in check_file(file, RULES) if f.rule == "disabled-guard"]
    assert found == [severity], code


ALIASED_SKIP = """
import os
SKIP = os.environ.get("SKIP_CHECKS")


def f(x):
    if SKIP:
        return x
    if x.dim() != 2:
        raise ValueError("x must be 2-d")
    return x
"""
LOCAL_SKIP = ALIASED_SKIP.replace('SKIP = os.environ.get("SKIP_CHECKS")\n', "").replace(
    "    if SKIP:", '    skip = os.environ.get("SKIP_CHECKS")\n    if skip:'
)


@pytest.mark.parametrize(
    ("code", "found"),
    [
        (ALIASED_SKIP, [Severity.HIGH]),
        (LOCAL_SKIP, [Severity.HIGH]),
        (ALIASED_SKIP.replace('os.environ.get("SKIP_CHECKS")', "x_is_cached()"), []),  # not the environment
    ],
    ids=["module_alias", "local_alias", "not_env"],
)
def test_exit_gated_on_an_alias_of_the_environment(code: str, found: list[Severity]) -> None:
    file = SourceFile(path="pkg/m.py", installed=code.encode(), pristine=None)
    assert [f.severity for f in check_file(file, RULES) if f.rule == "disabled-guard"] == found, code
