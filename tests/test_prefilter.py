"""Prefilters are sound: every rule gives the same findings with and without them.

Over every example of every rule and generated variants of each (calls and conditions broken over
lines, imports merged, the code moved into a method, unrelated code and aliases around it).
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import textwrap
import tokenize

import pytest

from patchaudit.filters import Spelling, matches_any
from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.hazards.examples import as_example

RULES = load_rules()
PADDING = "import logging\nlogger = logging.getLogger(__name__)\n\n\ndef unrelated(a):\n    return a + 1\n\n\n"


def _broken_over_lines(code: str) -> str:
    """A newline after every opening bracket and comma: the same code, spread over lines."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    lines = code.splitlines(keepends=True)
    inserts = sorted(
        {(t.end[0], t.end[1]) for t in tokens if t.type == tokenize.OP and t.string in ("(", "[", ",")},
        reverse=True,
    )
    for row, col in inserts:
        line = lines[row - 1]
        lines[row - 1] = line[:col] + "\n" + line[col:]
    return "".join(lines)


def _in_method(code: str) -> str:
    return "class Wrapper:\n    def forward(self, x):\n" + textwrap.indent(code, "        ") + "\n        pass\n"


def _merged_imports(code: str) -> str:
    return code.replace("import ", "import os, ", 1) if code.startswith("import ") else code


def _aliased(code: str) -> str:
    out = code
    for module in ("torch", "pdb", "os", "subprocess", "numpy"):
        out = out.replace(f"import {module}\n", f"import {module}\n_m_{module} = {module}\n", 1)
    return out


VARIANTS = {
    "as-is": lambda c: c,
    "lines": _broken_over_lines,
    "method": _in_method,
    "imports": _merged_imports,
    "padded": lambda c: PADDING + c,
    "aliased": _aliased,
    "padded-lines": lambda c: PADDING + _broken_over_lines(c),
}


def _cases():
    for rule in RULES:
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for index, example in enumerate(examples):
                yield pytest.param(rule, as_example(example), id=f"{rule.ID}-{kind}-{index}")


@pytest.mark.parametrize(("rule", "example"), list(_cases()))
def test_prefilter_changes_nothing(rule, example) -> None:
    tried = 0
    for name, variant in VARIANTS.items():
        code = variant(example.code)
        if example.path.endswith(".py"):
            try:
                ast.parse(code)
            except SyntaxError:
                continue
        file = SourceFile(
            path=example.path,
            installed=code.encode(),
            pristine=variant(example.pristine).encode() if example.pristine is not None else None,
        )
        tried += 1
        for rules in ([rule], RULES) if name in ("as-is", "padded-lines") else ([rule],):
            assert check_file(file, rules) == check_file(file, rules, prefilter=False), (name, code)
        if example.pristine is None:
            # The same code in a file that verifies (`--all-files`): each rule's filters keep only
            # what it reports there, and lose none of it.
            verified = SourceFile(path=example.path, installed=code.encode(), pristine=None, drifted=False)
            for rules in ([rule], RULES) if name == "as-is" else ([rule],):
                assert check_file(verified, rules) == check_file(verified, rules, prefilter=False), (name, code)
    assert tried >= 3
    if example.pristine is None and example.path.endswith(".py"):
        # Drifted against a pristine file: the engine also drops statements outside the change.
        code = PADDING + _in_method(example.code)
        lines = code.splitlines(keepends=True)
        pairs = [(code, p) for p in (PADDING, _in_method(example.code), "".join(lines[: len(lines) // 2]) + "\n")]
        body = ast.parse(example.code).body
        if len(body) >= 2:
            # Only the first statement changed; the rest of the module (after padding) did not.
            split = example.code.splitlines(keepends=True)
            first, rest = "".join(split[: body[0].end_lineno]), "".join(split[body[0].end_lineno :])
            pairs.append((first + PADDING + rest, PADDING + rest))
        for installed, pristine in pairs:
            file = SourceFile(path=example.path, installed=installed.encode(), pristine=pristine.encode())
            for rules in ([rule], RULES):
                assert check_file(file, rules) == check_file(file, rules, prefilter=False), (pristine, installed)


def test_the_guard_filters_count_every_check_the_rule_counts() -> None:
    """disabled-guard's statement filter keeps a folding condition over a check named as flow's
    CHECK_CALL names them (`raise_if_*`, `fail_on_*`), not only `check*`/`validate*`: the same finding
    with the filters as without."""
    (rule,) = [r for r in RULES if r.ID == "disabled-guard"]
    for check in ("raise_if_misaligned", "fail_on_bad_shape", "self.error_unless_aligned", "validate"):
        code = f"CHECKS = False\n\n\ndef load(self, w):\n    if CHECKS:\n        {check}(w)\n    return w\n"
        file = SourceFile(path="m.py", installed=code.encode(), pristine=None)
        found = check_file(file, [rule])
        assert [(f.line, "folds to false" in f.message) for f in found] == [(5, True)], (check, found)
        assert found == check_file(file, [rule], prefilter=False)


def test_removed_guard_reads_only_changed_functions_without_changing_the_result(monkeypatch) -> None:
    import email
    import inspect
    import json
    from pathlib import Path

    (rule,) = [r for r in RULES if r.ID == "removed-guard"]
    module = inspect.getmodule(rule)
    corpus = [p.read_text() for pkg in (json, email) for p in sorted(Path(pkg.__file__).parent.glob("*.py"))]
    pairs = []
    for pristine in corpus:
        lines = pristine.splitlines(keepends=True)
        guards = [i for i, line in enumerate(lines) if line.lstrip().startswith(("raise ", "assert "))]
        for i in guards[:6]:
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            pairs.append((pristine, "".join([*lines[:i], indent + "pass\n", *lines[i + 1 :]])))
    assert len(pairs) > 50
    fast = [list(rule().check_text(installed, pristine)) for pristine, installed in pairs]
    monkeypatch.setattr(module, "_functions", lambda tree, lines: {})
    slow = [list(rule().check_text(installed, pristine)) for pristine, installed in pairs]
    assert fast == slow
    assert sum(map(len, fast)) >= len(pairs) // 2


def test_prefilters_take_linear_time_on_comment_banners(tmp_path) -> None:
    """A licence banner of `#` runs after a keyword once sent a prefilter into exponential
    backtracking: chardet's johabfreq.py (pip vendors it) never finished under `--all-files`."""
    banner = "#" * 64 + "\n#   " + "  ".join(["word"] * 30) + "\n" + "#" * 64 + "\n"
    table = "TABLE = {\n" + "".join(f"    0x{8800 + i:X}: {i},\n" for i in range(3000)) + "}\n"
    source = tmp_path / "freq.py"
    source.write_text("# modify it under the terms of the GNU Lesser General Public License or\n" + banner + table)
    code = (
        "import sys; from pathlib import Path; from patchaudit.hazards import SourceFile, check_files\n"
        "data = Path(sys.argv[1]).read_bytes()\n"
        "print(len(check_files([SourceFile(path='freq.py', installed=data, pristine=None, drifted=False)], workers=1)))"
    )
    # Linear: milliseconds. Exponential in a 64-character run: longer than any machine would wait.
    proc = subprocess.run([sys.executable, "-c", code, str(source)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"


def test_a_kept_class_whose_body_shares_its_header_line_still_parses() -> None:
    # `class A(\n    Base,\n): ...`: the body sits on the header's last line; blanking it as a
    # member would cut the header and turn the file into a parse error.
    src = b"import pdb\n\n\n@register(pdb.Pdb)\nclass Stop(\n    Base,\n): ...\n"
    file = SourceFile(path="x.py", installed=src, pristine=None, drifted=False)
    rules = load_rules()
    found = [(f.rule, f.line) for f in check_file(file, rules)]
    assert found == [(f.rule, f.line) for f in check_file(file, rules, prefilter=False)]
    assert "parse-error" not in {rule for rule, _ in found}


# Code shaped as the trees `--all-files` scans, where a statement filter once dropped what the
# rule reports in a file that verifies: SGLang's kernels (a short helper's shape test read through
# arguments that are no counts themselves; a count the ast side did not know, beside assertions
# that kept the function before), a kernel's `cute.copy`
# and a deep copy beside a real shutil copy, a path that reaches a load through module names.
_VERIFIED_CASES = {
    "helper-reads-a-shape": (
        "def _supported(q, k):\n"
        "    num_tokens, _, head_size = q.shape\n"
        "    return head_size == 256 and k.shape[1] == 16\n\n\n"
        "def attention(q, k, v):\n"
        "    if _supported(q, k):\n"
        "        return q\n"
        "    return v\n",
        "token-count-branch",
    ),
    "flag-from-a-helper": (
        "def _fast(kv, H):\n"
        "    return kv.is_contiguous() and H in (8, 16)\n\n\n"
        "def attention(q, kv, topk):\n"
        "    H = q.shape[1]\n"
        "    fast = _fast(kv, H)\n"
        "    if fast:\n"
        "        return q\n"
        "    return kv\n",
        "token-count-branch",
    ),
    "plural-count": (
        "def prefill(topk_indices, extend_lens_cpu):\n"
        "    assert topk_indices.ndim == 2\n"
        "    max_extend_len = max(extend_lens_cpu)\n"
        "    block_q = 1 if max_extend_len == 1 else 2 if max_extend_len == 2 else 4\n"
        "    return block_q\n",
        "token-count-branch",
    ),
    "shutil-copy": (
        "import copy\nimport shutil\n\n\n"
        "def keep(cfg, src):\n"
        "    cfg = copy.deepcopy(cfg)\n"
        "    shutil.copy(src, '/tmp/kept.bin')\n"
        "    return cfg\n",
        "torch-save",
    ),
    "path-through-names": (
        "import os\nimport torch\n\n_BASE = '/mnt/k2'\n_FIX = os.path.join(_BASE, 'fix')\n\n\n"
        "def _path(name):\n    return os.path.join(_FIX, name)\n\n\n"
        "class Loader:\n"
        "    def __init__(self):\n        self.where = _path('w.pt')\n\n"
        "    def load(self, layer):\n        return torch.load(self.where)\n",
        "fixed-path-load",
    ),
    "forward-sync-through-a-helper": (
        "import torch\n\n\n"
        "def _peek(t):\n    return t.max().item()\n\n\n"
        "class Layer(torch.nn.Module):\n"
        "    def forward(self, x):\n        self.top = _peek(x)\n        return x\n",
        "host-sync",
    ),
    "environ-through-an-import-alias": (
        "from os import environ as env\n\n\ndef setup(backend):\n    env['VLLM_ATTENTION_BACKEND'] = backend\n",
        "env-mutation",
    ),
    "environ-through-an-attribute": (
        "import os\n\n_ENV = os.environ\n\n\n"
        "class Launcher:\n"
        "    def __init__(self):\n        self.env = _ENV\n\n"
        "    def start(self, rank):\n        self.env.setdefault('RANK', str(rank))\n",
        "env-mutation",
    ),
    "forward-sync-through-an-alias": (
        "from torch.cuda import synchronize as wait_device\n\n\n"
        "class Layer:\n"
        "    def _forward_impl(self, x):\n        wait_device()\n        return x\n",
        "host-sync",
    ),
}


@pytest.mark.parametrize("case", sorted(_VERIFIED_CASES))
def test_a_file_that_verifies_keeps_what_the_rule_reports_there(case: str) -> None:
    code, rule_id = _VERIFIED_CASES[case]
    file = SourceFile(path="m.py", installed=code.encode(), pristine=None, drifted=False)
    found = check_file(file, RULES)
    assert rule_id in {f.rule for f in found}, found
    assert found == check_file(file, RULES, prefilter=False)


def test_a_kernel_copy_and_a_deep_copy_keep_nothing_for_torch_save() -> None:
    """`cute.copy(src, dst)` and `copy.deepcopy(cfg)` are no path writer where nothing spells shutil:
    the filters keep neither function for torch-save (and the rule reports nothing either way)."""
    from patchaudit.analysis.module import ModuleAnalysis
    from patchaudit.analysis.names import NameTable
    from patchaudit.hazards.prefilter import reduced

    code = (
        b"import copy\nimport cutlass.cute as cute\n\n\n"
        b"def tile(src, dst, cfg):\n    cute.copy(src, dst)\n    return copy.deepcopy(cfg)\n"
    )
    tree = ast.parse(code)
    analysis = ModuleAnalysis.build(tree, NameTable.build(tree, code))
    (rule,) = [r for r in RULES if r.ID == "torch-save"]
    assert reduced(code, analysis, [rule], None, drifted=False) is None
    with_shutil = code.replace(b"import copy\n", b"import copy\nimport shutil\n")
    tree = ast.parse(with_shutil)
    analysis = ModuleAnalysis.build(tree, NameTable.build(tree, with_shutil))
    assert reduced(with_shutil, analysis, [rule], None, drifted=False) is not None


def _kept_for(rule_id: str, code: bytes, drifted: bool) -> bool:
    """Whether the statement filters keep anything of the code for one rule."""
    from patchaudit.analysis.module import ModuleAnalysis
    from patchaudit.analysis.names import NameTable
    from patchaudit.hazards.prefilter import reduced

    (rule,) = [r for r in RULES if rule_id == r.ID]
    tree = ast.parse(code)
    analysis = ModuleAnalysis.build(tree, NameTable.build(tree, code))
    return reduced(code, analysis, [rule], None, drifted=drifted) is not None


def test_a_step_of_a_file_that_verifies_keeps_nothing_for_host_sync() -> None:
    """In a file that verifies host-sync reports a forward's own syncs only: a step's `.item()` or
    `time.sleep()` (judged in a drifted file) keep nothing for it."""
    code = (
        b"import time\n\n\n"
        b"class Runner:\n"
        b"    def execute_model(self, x):\n        return x.sum().item()\n\n"
        b"    def step(self):\n        time.sleep(0.01)\n\n"
        b"    def forward(self, x):\n        return self.proj(x)\n"
    )
    assert not _kept_for("host-sync", code, drifted=False)
    assert _kept_for("host-sync", code, drifted=True)
    for drifted in (False, True):
        file = SourceFile(path="m.py", installed=code, pristine=None, drifted=drifted)
        found = check_file(file, RULES)
        assert found == check_file(file, RULES, prefilter=False)
        assert ("host-sync" in {f.rule for f in found}) is drifted


def test_a_seed_of_a_file_that_verifies_keeps_nothing_for_env_mutation() -> None:
    """In a file that verifies env-mutation reports the environment's changes only: a seed pinned, a
    switch flipped or a helper that seeds (judged against a drifted file's pristine text) keep
    nothing for it there, however a statement names the helper."""
    code = (
        b"import torch\n\n\n"
        b"def _pin(seed):\n    torch.manual_seed(seed)\n\n\n"
        b"class Sampler:\n"
        b"    def __init__(self, seed):\n        _pin(seed)\n        torch.backends.cudnn.deterministic = True\n"
    )
    assert not _kept_for("env-mutation", code, drifted=False)
    assert _kept_for("env-mutation", code, drifted=True)
    file = SourceFile(path="m.py", installed=code, pristine=None, drifted=False)
    assert check_file(file, RULES) == check_file(file, RULES, prefilter=False)


@pytest.mark.parametrize(
    ("code", "rule_id"),
    [
        ('import torch\n\ndef f(x):\n    getattr(torch, "s\\x61ve")(x, "/tmp/x.pt")\n', "torch-save"),
        ('import torch\n\ndef f(x):\n    getattr(torch, "\\u0073ave")(x, "/tmp/x.pt")\n', "torch-save"),
        ('import os\n\ndef f():\n    getattr(os, "put\\x65nv")("X", "1")\n', "env-mutation"),
        ('import os\n\ndef f():\n    getattr(os, "put\\145nv")("X", "1")\n', "env-mutation"),
    ],
)
def test_a_name_spelled_by_escapes_in_a_drifted_file_is_found_with_the_filters_on(code: str, rule_id: str) -> None:
    """A patch that spells its sink with escapes (`"s\\x61ve"`) spells no `save` for a byte filter;
    the rules read the string's value. Such a drifted file is checked without filters."""
    pristine = code.split("\n\ndef ")[0] + "\n\ndef f(x=None):\n    pass\n"
    file = SourceFile(path="m.py", installed=code.encode(), pristine=pristine.encode(), drifted=True)
    found = check_file(file, RULES)
    assert (rule_id, "high") in {(f.rule, str(f.severity.value)) for f in found}, found


def test_a_statement_nested_past_the_stack_is_left_to_the_rules() -> None:
    """A filter that walks a statement deeper than Python's stack does not stop the file: the
    statement is kept for the rule, which answers as it does with no filter (a rule error)."""
    deep = "def f(x):\n    if " + "not " * 1100 + "x:\n        g()\n\n"
    deep += "def h(y):\n    if True:\n        raise ValueError(y)\n"
    file = SourceFile(path="vllm/mod.py", installed=deep.encode(), pristine=None, drifted=False)
    rules = load_rules([])
    with_filters = [(f.rule, f.line) for f in check_file(file, rules)]
    assert ("rule-error", 1) in with_filters
    assert with_filters == [(f.rule, f.line) for f in check_file(file, rules, prefilter=False)]


_DROPPED = "def unrelated_{n}(a):\n    b = a + 1\n\n    return b * 2\n\n\n"
_MEMBER = "    def other_{n}(self, a):\n        b = a + 1\n\n        return b\n\n"


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("end", ["", "\n", "\n\n\n"])
def test_dropped_code_is_one_blank_stretch_and_findings_keep_their_lines(newline: str, end: str) -> None:
    """Every run of lines the filters drop reaches libcst as one piece of whitespace, not a blank
    line per line (three nodes each), and the findings after it keep their lines: module-level
    functions, members of a kept class (each its `pass`), the end of the file."""
    import libcst as cst

    from patchaudit.analysis.module import ModuleAnalysis
    from patchaudit.analysis.names import NameTable
    from patchaudit.analysis.walk import nodes
    from patchaudit.hazards.prefilter import reduced

    code = "import torch\n\n\n" + "".join(_DROPPED.format(n=n) for n in range(5))
    code += "class Model:\n" + "".join(_MEMBER.format(n=n) for n in range(5))
    code += "    def forward(self, x):\n        torch.save(x, '/tmp/x.pt')\n        return x\n\n"
    code += "".join(_MEMBER.format(n=n) for n in range(5, 8)) + "\n\n"
    code += "def tail(x):\n    torch.save(x, '/tmp/y.pt')\n\n\n" + _DROPPED.format(n=9).rstrip("\n") + end
    data = code.replace("\n", newline).encode()
    file = SourceFile(path="vllm/model.py", installed=data, pristine=None, drifted=True)
    found = [(f.rule, f.line) for f in check_file(file, RULES)]
    lines = code.splitlines()
    assert found == [
        ("torch-save", lines.index("        torch.save(x, '/tmp/x.pt')") + 1),
        ("torch-save", lines.index("    torch.save(x, '/tmp/y.pt')") + 1),
    ]
    assert found == [(f.rule, f.line) for f in check_file(file, RULES, prefilter=False)]

    tree = ast.parse(data)
    rules = [r for r in RULES if r.ID == "torch-save"]
    cut = reduced(data, ModuleAnalysis.build(tree, NameTable.build(tree, data)), rules, None)
    assert cut is not None
    assert len(cut.source.splitlines()) == len(data.splitlines())  # positions need no mapping
    blank_lines = nodes(cst.parse_module(cut.source), (cst.EmptyLine,))
    assert len(blank_lines) <= 12, len(blank_lines)  # the kept code's own, and one per dropped run


# token-count-branch: what a count may be, as its count_of reads one (a length of ids, of a local
# or of a view; a cast of a count; a short helper's returned count or window; a call counter that
# another method of the class increments), and what it may not.
_COUNTED = {
    "len-of-ids": "def f(ids):\n    if len(ids) == 5:\n        print(ids)\n",
    "len-of-a-view": "def f(x):\n    q = x.view(-1, 8)\n    if len(q) == 5:\n        print(q)\n",
    "len-of-a-list": "def f(batch):\n    if len(batch.input_ids.tolist()) == 5:\n        print(batch)\n",
    "len-of-a-local": "def f(reqs):\n    ids = reqs.token_ids\n    if len(ids) == 5:\n        print(ids)\n",
    "a-cast": "def f(num_tokens):\n    if int(num_tokens) == 5:\n        print(num_tokens)\n",
    "a-window-helper": (
        "def _probe(k):\n    return k in (3, 5)\n\n\ndef f(x):\n    if _probe(x.shape[0]):\n        print(x)\n"
    ),
    "a-count-helper": (
        "def _ntok(t):\n    return t.shape[0]\n\n\ndef f(x):\n    if _ntok(x) == 5:\n        print(x)\n"
    ),
    "a-shape-against-a-literal": "def f(x):\n    if x.shape == (5, 7168):\n        print(x)\n",
    "a-ceil-of-a-count": (
        "import math\n\n\ndef f(num_tokens):\n    if math.ceil(num_tokens / 4) == 2:\n        print(num_tokens)\n"
    ),
    "a-counter-of-another-method": (
        "class Runner:\n    def step(self):\n        self._calls += 1\n\n"
        "    def forward(self, x):\n        if self._calls == 5:\n            print(x)\n        return x\n"
    ),
}
_UNCOUNTED = {
    "len-of-a-parameter": (
        "def f(parts, args):\n    if len(parts) == 2:\n        print(parts)\n"
        "    if len(args.plugins) > 3:\n        print(args)\n"
    ),
    "another-modules-function": (
        "def f(x):\n    if get_node_count() != 1:\n        x = x + 1\n"
        "    if get_version() == 3:\n        print(x)\n    return x\n"
    ),
    "a-shape-against-names": (
        "def f(w, num_blocks, heads):\n    if w.shape == (num_blocks, heads):\n        print(w)\n"
    ),
    "a-method-given-a-count": (
        "class A:\n    def f(self, num_tokens):\n        if self.make_uniform(num_tokens) == 3:\n"
        "            print(num_tokens)\n"
    ),
    "a-helper-with-no-window": (
        "_DTYPES = ('fp8', 'int8')\n\n\ndef _known(name):\n    return name in _DTYPES\n\n\n"
        "def f(dtype):\n    if not _known(dtype):\n        raise ValueError(dtype)\n    return len(dtype) > 1\n"
    ),
}


@pytest.mark.parametrize("drifted", [False, True], ids=["verifies", "drifted"])
@pytest.mark.parametrize("case", sorted(_COUNTED) + sorted(_UNCOUNTED))
def test_token_count_branch_keeps_a_statement_only_for_a_count_its_rule_reads(case: str, drifted: bool) -> None:
    """The rule's statement check takes a call for a count only as the rule does: `len()` of ids, of a
    local or of a view, a cast of a count, a short helper of the module whose returned value is a
    count or a window, a counter any method of the class increments; not `len(parts)` of a
    parameter, another module's function or a helper that returns no window. The first kind is
    kept and found, the second dropped, with the same findings as without filters."""
    code = (_COUNTED | _UNCOUNTED)[case].encode()
    assert _kept_for("token-count-branch", code, drifted) is (case in _COUNTED)
    file = SourceFile(path="m.py", installed=code, pristine=None, drifted=drifted)
    found = check_file(file, RULES)
    assert found == check_file(file, RULES, prefilter=False)
    assert ("token-count-branch" in {f.rule for f in found}) is (case in _COUNTED)


# disabled-guard in a file that verifies: a test folds only through a module's or its class's
# literal (`STRICT`, `Config.CHECKS`) or a contradiction (`x is None and x is not None`); not through
# another module's flag, an instance's, or two facts of different kinds about one name.
_FOLDS = {
    "a-module-flag": "STRICT = False\n\n\ndef check(x):\n    if STRICT:\n        raise ValueError(x)\n    return x\n",
    "a-class-flag": (
        "class Config:\n    CHECKS = False\n\n\n"
        "def check(x):\n    if Config.CHECKS and x:\n        raise ValueError(x)\n    return x\n"
    ),
    "a-contradiction": (
        "def check(x):\n    if x is None and x is not None:\n        raise ValueError(x)\n    return x\n"
    ),
}
_NO_FOLD = {
    "another-modules-flag": (
        "import envs\n\n\ndef check(x):\n    if envs.VLLM_STRICT and x:\n        raise ValueError(x)\n    return x\n"
    ),
    "two-kinds-of-fact": (
        "def check(n):\n    if not isinstance(n, int) or n < 1:\n        raise ValueError(n)\n    return n\n"
    ),
    "an-instances-flag": (
        "class Checker:\n    def check(self, x):\n"
        "        if self.STRICT:\n            raise ValueError(x)\n        return x\n"
    ),
}


@pytest.mark.parametrize("case", sorted(_FOLDS) + sorted(_NO_FOLD))
def test_disabled_guard_keeps_a_verified_test_only_where_it_may_fold(case: str) -> None:
    """In a file that verifies, a guard under a test of names spelled as constants is kept for
    disabled-guard only where the rule could fold it (and it is reported); the rest is dropped,
    with the same findings as without filters."""
    code = (_FOLDS | _NO_FOLD)[case].encode()
    assert _kept_for("disabled-guard", code, drifted=False) is (case in _FOLDS)
    file = SourceFile(path="m.py", installed=code, pristine=None, drifted=False)
    found = check_file(file, RULES)
    assert found == check_file(file, RULES, prefilter=False)
    assert ("disabled-guard" in {f.rule for f in found}) is (case in _FOLDS)


def test_a_result_replaced_in_a_function_with_no_return_is_kept_for_disabled_guard() -> None:
    """In a drifted file, `b = np.empty(...)` after a computed `b` is reported however the function
    is spelled: one with no `return`, `raise` or constant test holds no byte disabled-guard's filters
    look for, and is kept all the same."""
    code = b"import numpy as np\n\n\ndef f(a, n):\n    b = np.linalg.solve(a, n)\n    b = np.empty((0, 0))\n"
    code += b"    use(b)\n"
    file = SourceFile(path="m.py", installed=code, pristine=None, drifted=True)
    found = check_file(file, RULES)
    assert found == check_file(file, RULES, prefilter=False)
    assert "disabled-guard" in {f.rule for f in found}


_RESPELLED = [
    # Spelled as the ast reads it, not as the bytes do: adjacent literals, a name Python normalises,
    # a coding declaration (each reached through a module-level name), an escape, a line joined
    # inside a string.
    'import torch  # savepoint\n_S = "sa" "ve"\n\ndef f(m):\n    getattr(torch, _S)(m, "/tmp/x.pt")\n',
    'from torch import \uff53\uff41\uff56\uff45 as s  # savepoint\n\ndef f(m):\n    s(m, "/tmp/x.pt")\n',
    '# coding: utf-7\nfrom torch import +AHM-ave as s  # savepoint\n\ndef f(m):\n    s(m, "/tmp/x.pt")\n',
    'import torch  # savepoint\n\ndef f(m):\n    getattr(torch, "s\\x61ve")(m, "/tmp/x.pt")\n',
    'import torch  # savepoint\n\ndef f(m):\n    getattr(torch, "sa\\\nve")(m, "/tmp/x.pt")\n',
]
_UNSPELLED = "import torch\n\n# saved weights are deepcopied\ndef unsaved(x):\n    return torch.deepcopy(x)\n"


@pytest.mark.parametrize("drifted", [False, True])
@pytest.mark.parametrize(("code", "spelled"), [(_UNSPELLED, False), *((code, True) for code in _RESPELLED)])
def test_a_rule_keeps_nothing_of_a_module_that_never_spells_its_identifiers(code: str, spelled: bool, drifted: bool):
    """torch-save keeps only a statement that spells one of its sinks (or names an alias or helper
    that does): in a module that spells none as the ast reads it, it weighs no statement at all,
    whatever its byte filters pass (`saved`, `deepcopy`). A sink the ast reads where the bytes do
    not spell it still has the module read; reached through a module-level name, or in a drifted
    file, it is found with the filters as without them."""
    rule = next(r for r in RULES if r.ID == "torch-save")
    data = code.encode()
    assert matches_any(rule.PREFILTER, data) and matches_any(rule.REQUIRES, data)
    tree = ast.parse(data)
    assert rule.keeps_nothing(Spelling(data, lambda: list(ast.walk(tree))), drifted) is not spelled
    if code in _RESPELLED[3:] and not drifted:
        return  # spelled in the statement itself: a drifted file with such bytes is checked without filters
    file = SourceFile(path="m.py", installed=data, pristine=None, drifted=drifted)
    findings = check_file(file, RULES)
    assert findings == check_file(file, RULES, prefilter=False)
    assert ("torch-save" in {f.rule for f in findings}) is spelled


def test_env_mutation_keeps_nothing_of_a_file_that_verifies_and_never_spells_the_environment() -> None:
    """In a file that verifies env-mutation reports the environment's changes only: a file whose
    bytes never spell it keeps nothing for it (a drifted one does: seeds and switches count there)."""
    code = b"import torch\n\n\ndef f():\n    torch.manual_seed(0)\n    torch.backends.cudnn.benchmark = True\n"
    rule = next(r for r in RULES if r.ID == "env-mutation")
    module = Spelling(code, lambda: [])
    assert rule.keeps_nothing(module, drifted=False)
    assert not rule.keeps_nothing(module, drifted=True)
    assert not rule.keeps_nothing(Spelling(code + b"os.environ['X'] = '1'\n", lambda: []), drifted=False)
    assert _kept_for("env-mutation", code, drifted=True)
    for drifted in (False, True):
        file = SourceFile(path="m.py", installed=code, pristine=None, drifted=drifted)
        assert check_file(file, RULES) == check_file(file, RULES, prefilter=False)
