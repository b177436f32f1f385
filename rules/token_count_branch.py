"""token-count-branch: a branch taken only when a token or batch count equals a magic number."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity, literal_string

COUNT_NAME = re.compile(r"^(?:num|n|total)_\w*(?:tokens?|seqs|reqs|requests|prompts)$|^batch_size$|^bsz$|^seq_len$")
LEN_OF = re.compile(r"token|ids$|seq|req|prompt|batch", re.IGNORECASE)
SIDE_EFFECT_CALLS = (
    "builtins.print",
    "builtins.open",
    "builtins.breakpoint",
    "builtins.exit",
    "torch.save",
    "numpy.save",
    "numpy.savez",
    "numpy.savetxt",
    "pickle.dump",
    "json.dump",
    "os.*",
    "subprocess.*",
    "sys.exit",
    "pdb.set_trace",
    "shutil.*",
)
SIDE_EFFECT_METHODS = {"write", "write_text", "write_bytes", "save", "dump", "flush", "tofile"}


def _magic(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        value = int(node.value.replace("_", ""), 0)
        return value if value >= 2 else None
    return None


class _SideEffects(cst.CSTVisitor):
    def __init__(self, rule: "TokenCountBranch") -> None:
        super().__init__()
        self.rule = rule
        self.found: str | None = None

    def visit_Call(self, node: cst.Call) -> None:
        name = self.rule.resolves_to(node, SIDE_EFFECT_CALLS)
        func = node.func
        if name is None and isinstance(func, cst.Attribute) and func.attr.value in SIDE_EFFECT_METHODS:
            name = "." + func.attr.value + "()"
        if name and self.found is None:
            self.found = name.removeprefix("builtins.")

    def visit_Global(self, node: cst.Global) -> None:
        self.found = self.found or "global state"

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.found = self.found or "enclosing state"

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            item = target.target
            if isinstance(item, cst.Subscript) and self.rule.resolves_to(item.value, "os.environ"):
                self.found = self.found or "os.environ"


class TokenCountBranch(Rule):
    ID = "token-count-branch"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "branch on a token/batch count equal to a magic number"
    EXPLANATION = """\
A patch that only acts when exactly 5 tokens are processed (`if x.shape[0] == 5:`,
`if num_tokens == 7:`) was written to catch one request during debugging. It stays silent in
every test and fires in production on the first request of that size. The rule knows the usual
spellings of a count: `x.shape[0]`, `x.size(0)`, `len(x)`, `x.numel()`, and names such as
`num_tokens`, `num_actual_tokens`, `batch_size`, on either side of `==`. Comparisons with 0 or 1
are ordinary guards and are not flagged. The finding is high when the branch has side effects
(I/O, a save, print, global or environment state), medium otherwise."""
    PREFILTER = re.compile(rb"==")
    MAGIC = re.compile(rb"==[ \t(]*(?:[2-9]|[1-9][0-9_]+)\b|\b(?:[2-9]|[1-9][0-9_]+)[ \t)]*==")
    COUNT = re.compile(
        rb"shape\[0\]|size\(0\)|numel\(\)|(?:num|n|total)_\w|batch_size|bsz|seq_len"
        rb"|len\([^)\n]*(?i:token|ids|seq|req|prompt|batch)"
    )

    # Lines that cannot hold an `if`/`while` test: assertions, returns, comments, assignments.
    NOT_A_TEST = re.compile(rb"[ \t]*(?:assert\b|return\b|yield\b|#|[\w.\[\]]+[ \t]*(?::[^=\n]*)?=[^=])")
    MODULO = re.compile(rb"%[ \t]*\w+")

    @classmethod
    def prefilter(cls, data: bytes) -> bool:
        # Lines with `== <magic number>` that also spell a count; looser than the rule.
        end = 0
        for match in cls.PREFILTER.finditer(data):
            if match.start() < end:
                continue
            start = data.rfind(b"\n", 0, match.start()) + 1
            end = data.find(b"\n", match.end())
            end = len(data) if end < 0 else end
            line = data[start:end]
            if cls.NOT_A_TEST.match(line):
                continue
            line = cls.MODULO.sub(b"", line)
            if cls.MAGIC.search(line) and cls.COUNT.search(line):
                return True
        return False

    VALID = [
        "if x.shape[0] == 0:\n    return x\n",
        "if num_tokens == 1:\n    decode_only = True\n",
        "if x.dim() == 2:\n    x = x.unsqueeze(0)\n",
        "if mode == 5:\n    print('mode five')\n",
        "if num_tokens > 8192:\n    chunk()\n",
        "if len(args) == 2:\n    print(args)\n",
        "if x.shape[0] % 16 == 0:\n    print('aligned')\n",
    ]
    INVALID = [
        Example(
            code="import torch\nif x.shape[0] == 5:\n    torch.save(x, '/tmp/x.pt')\n",
            line=2,
            severity=Severity.HIGH,
        ),
        Example(code="if num_tokens == 7:\n    print('got seven')\n", severity=Severity.HIGH),
        Example(code="if 5 == len(ids):\n    ids = ids[:4]\n", severity=Severity.MEDIUM),
        Example(code="if x.size(0) == 13:\n    y = 1\n", severity=Severity.MEDIUM),
        Example(
            code="def f(attn_metadata):\n    if attn_metadata.num_actual_tokens == 5:\n"
            "        with open(path, 'w') as fh:\n            fh.write('x')\n",
            line=2,
            severity=Severity.HIGH,
        ),
        Example(code="if (\n    num_tokens == 5\n    and rank == 0\n):\n    print(1)\n", severity=Severity.HIGH),
        Example(code="while hidden.numel() == 4096:\n    global seen\n    seen = 1\n", severity=Severity.HIGH),
    ]

    def _count(self, node: cst.BaseExpression) -> str | None:
        code = None
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute):
            if node.value.attr.value == "shape" and len(node.slice) == 1:
                index = node.slice[0].slice
                if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0":
                    code = ".shape[0]"
        elif isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(node.args) == 1:
                arg = node.args[0].value
                if isinstance(arg, cst.Integer) and arg.value == "0":
                    code = ".size(0)"
            elif isinstance(func, cst.Attribute) and func.attr.value == "numel" and not node.args:
                code = ".numel()"
            elif self.resolves_to(node, "builtins.len") and len(node.args) == 1:
                # len() of anything is too common a guard (`len(args) == 2`): only counts of tokens,
                # ids, sequences, requests or batches.
                arg = cst.helpers.get_full_name_for_node(node.args[0].value) or ""
                if LEN_OF.search(arg.rsplit(".", 1)[-1]):
                    code = f"len({arg})"
        elif isinstance(node, cst.Name) and COUNT_NAME.match(node.value):
            code = node.value
        elif isinstance(node, cst.Attribute) and COUNT_NAME.match(node.attr.value):
            code = node.attr.value
        return code

    def _magic_count(self, test: cst.BaseExpression) -> tuple[str, int] | None:
        if isinstance(test, cst.BooleanOperation):
            return self._magic_count(test.left) or self._magic_count(test.right)
        if isinstance(test, cst.UnaryOperation):
            return None
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        target = test.comparisons[0]
        if not isinstance(target.operator, cst.Equal):
            return None
        for count_side, number_side in ((test.left, target.comparator), (target.comparator, test.left)):
            number = _magic(number_side)
            if number is not None and literal_string(count_side) is None:
                count = self._count(count_side)
                if count is not None:
                    return count, number
        return None

    def _check(self, node: cst.If | cst.While) -> None:
        found = self._magic_count(node.test)
        if found is None:
            return
        count, number = found
        effects = _SideEffects(self)
        node.body.visit(effects)
        if effects.found:
            self.report(
                node.test,
                f"branch runs {effects.found} only when {count} == {number} (debug trap left in a patch?)",
                severity=Severity.HIGH,
            )
        else:
            self.report(node.test, f"branch on {count} == {number}, a magic token/batch count")

    def visit_If(self, node: cst.If) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)
