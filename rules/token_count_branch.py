"""token-count-branch: a branch taken only when a token or batch count equals a magic number."""

import ast
import builtins
import re
from collections.abc import Sequence

import libcst as cst

from patchaudit.rule import COUNT_NAME, Example, Rule, Severity, literal_string

SIDE_EFFECT_CALLS = (
    "builtins.print",
    "builtins.open",
    "builtins.breakpoint",
    "builtins.exit",
    "builtins.quit",
    "torch.save",
    "numpy.save",
    "numpy.savez",
    "numpy.savetxt",
    "pickle.dump",
    "json.dump",
    "os.system",
    "os.makedirs",
    "os.mkdir",
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.replace",
    "os.kill",
    "os._exit",
    "os.putenv",
    "os.write",
    "subprocess.*",
    "sys.exit",
    "pdb.set_trace",
    "shutil.*",
)
SIDE_EFFECT_METHODS = {"write", "write_text", "write_bytes", "save", "dump", "flush", "tofile"}
_MAGIC = rb"(?:[2-9]|[1-9][0-9_]+|0[xXoObB][0-9a-fA-F_]+)"


def _magic_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 2


_COUNT_METHODS = {"size", "numel", "item", "long", "int", "tolist", "len", "float"}
_OTHER_BUILTINS = frozenset(dir(builtins)) - {"len", "int", "float"}
Values = dict[str, list[ast.expr]]


def _count_shaped(node: ast.AST, values: Values, depth: int = 0) -> bool:
    """Whether an operand could be a count: the ast side of `Rule.count_of`, looser.

    A local is followed into the values assigned to it in the same statement, as count_of does.
    A call of a builtin other than len/int/float is taken to be that builtin.
    """
    if depth > 8:
        return True
    if isinstance(node, ast.Name):
        if COUNT_NAME.match(node.id) is not None:
            return True
        return any(_count_shaped(v, values, depth + 1) for v in values.get(node.id, ()))
    if isinstance(node, ast.Attribute):
        return COUNT_NAME.match(node.attr) is not None
    if isinstance(node, ast.Subscript):
        owner = node.value
        if isinstance(owner, ast.Call):
            owner = owner.func
        return isinstance(owner, ast.Attribute) and owner.attr in ("shape", "size")
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr in _COUNT_METHODS
        return not (isinstance(func, ast.Name) and func.id in _OTHER_BUILTINS)
    return False


def _assigned(nodes: Sequence[ast.AST]) -> Values:
    out: Values = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and isinstance(node.target, ast.Name) and node.value:
            out.setdefault(node.target.id, []).append(node.value)
    return out


def _magic_test(node: ast.AST, assigned: Values) -> bool:
    """The ast side of the rule: a comparison or case with a magic number (no names resolved)."""
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            pair = operands[index : index + 2]
            if isinstance(op, ast.Eq) and any(
                _magic_constant(a) and _count_shaped(b, assigned) for a, b in (pair, pair[::-1])
            ):
                return True
            right = pair[1]
            collection = isinstance(right, ast.Tuple | ast.List | ast.Set)
            magic = collection and any(_magic_constant(e) for e in right.elts)  # type: ignore[attr-defined]
            if isinstance(op, ast.In) and magic and _count_shaped(pair[0], assigned):
                return True
    if isinstance(node, ast.Match):
        return _count_shaped(node.subject, assigned) and any(
            _magic_constant(n.value)
            for case in node.cases
            for n in ast.walk(case.pattern)
            if isinstance(n, ast.MatchValue)
        )
    return False


def _magic(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        value = node.evaluated_value
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
every test and fires in production on the first request of that size. A count is `.shape[i]`,
`.size()[i]`, `.size(i)`, `.numel()`, `len(ids)` and names such as `num_tokens`,
`num_actual_tokens`, `batch_size`, also through local assignments and casts (`n = int(x.size(0))`).
It is caught when tested by `==`, `in (5, 7)`, `match`/`case 5:`, a conditional expression, or
inside a compound condition, over one line or several. Comparisons with 0 or 1 are ordinary
guards (an empty batch, a squeeze) and are not flagged. The finding is high when the branch has
side effects (I/O, a save, print, global or environment state), medium otherwise."""
    PREFILTER = (
        re.compile(rb"==[\s(\\]*" + _MAGIC + rb"\b"),
        re.compile(rb"\b" + _MAGIC + rb"[\s)\\]*=="),
        re.compile(rb"\bin[\s\\]*[(\[{][^)\]}]*\b" + _MAGIC + rb"\b"),
        re.compile(rb"\bcase\b[^\n]*\b" + _MAGIC + rb"\b"),
    )
    REQUIRES = (b"shape", b"size", b"numel", b"len", b"num", b"n_", b"total_", b"bsz", b"seq_len")
    REQUIRES_IN_STATEMENT = True

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        assigned = _assigned(nodes)
        return any(_magic_test(node, assigned) for node in nodes)

    VALID = [
        "if x.shape[0] == 0:\n    return x\n",
        "if num_tokens == 1:\n    decode_only = True\n",
        "if x.dim() == 2:\n    x = x.unsqueeze(0)\n",
        "if mode == 5:\n    print('mode five')\n",
        "if num_tokens > 8192:\n    chunk()\n",
        "if len(args) == 2:\n    print(args)\n",
        "if x.shape[0] % 16 == 0:\n    print('aligned')\n",
        """
        def forward(self, x):
            if x.shape[0] == 1:
                x = x.squeeze(0)
            return x
        """,
        """
        def execute(self, batch):
            num_reqs = len(batch)
            if num_reqs == 0:
                return []
            return self.run(batch)
        """,
        "if x.shape[-1] == 128:\n    use_kernel()\n",
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
        Example(
            code="""
            def forward(self, hidden):
                n = int(hidden.size()[0])
                if n == 5:
                    print(hidden)
                return hidden
            """,
            line=3,
            message="n = .size()[0] == 5",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                if x.shape[0] in (5, 7):
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                match x.shape[0]:
                    case 5:
                        print(x.sum())
                    case _:
                        pass
                return x
            """,
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x, num_scheduled_tokens):
                tag = "five" if num_scheduled_tokens == 5 else "other"
                return x
            """,
            line=2,
        ),
        Example(
            code="""
            def forward(self, x, rank):
                if rank == 0 and not (x.shape[0] != 3 or (x.numel()
                        == 12)):
                    print(x)
                return x
            """,
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def step(self, batch):
                tokens = batch.input_ids
                count = len(tokens)
                if count == 6:
                    self.dump(tokens)
            """,
            line=4,
            severity=Severity.HIGH,
        ),
    ]

    def _count(self, node: cst.BaseExpression) -> str | None:
        if literal_string(node) is not None:
            return None
        return self.count_of(node)

    def _magic_count(self, test: cst.BaseExpression) -> tuple[str, str] | None:
        if isinstance(test, cst.BooleanOperation):
            return self._magic_count(test.left) or self._magic_count(test.right)
        if isinstance(test, cst.UnaryOperation):
            return self._magic_count(test.expression)
        if not isinstance(test, cst.Comparison):
            return None
        left = test.left
        for target in test.comparisons:
            right = target.comparator
            if isinstance(target.operator, cst.Equal):
                for count_side, number_side in ((left, right), (right, left)):
                    number = _magic(number_side)
                    if number is not None:
                        count = self._count(count_side)
                        if count is not None:
                            return count, f"== {number}"
            elif isinstance(target.operator, cst.In) and isinstance(right, cst.Tuple | cst.List | cst.Set):
                numbers = [n for n in (_magic(e.value) for e in right.elements) if n is not None]
                if numbers:
                    count = self._count(left)
                    if count is not None:
                        return count, f"in {tuple(numbers)}"
            left = right
        return None

    def _check(self, test: cst.BaseExpression, body: cst.CSTNode, where: cst.CSTNode) -> None:
        found = self._magic_count(test)
        if found is not None:
            self._report(where, body, *found)

    def _report(self, where: cst.CSTNode, body: cst.CSTNode, count: str, value: str) -> None:
        effects = _SideEffects(self)
        body.visit(effects)
        if effects.found:
            self.report(
                where,
                f"branch runs {effects.found} only when {count} {value} (debug trap left in a patch?)",
                severity=Severity.HIGH,
            )
        else:
            self.report(where, f"branch on {count} {value}, a magic token/batch count")

    def visit_If(self, node: cst.If) -> None:
        self._check(node.test, node.body, node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node.test, node.body, node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node.test, node.body, node)

    def visit_Match(self, node: cst.Match) -> None:
        count = self._count(node.subject)
        if count is None:
            return
        for case in node.cases:
            pattern = case.pattern
            options = [p.pattern for p in pattern.patterns] if isinstance(pattern, cst.MatchOr) else [pattern]
            numbers = [n for n in (_magic(p.value) for p in options if isinstance(p, cst.MatchValue)) if n is not None]
            if numbers:
                self._report(case, case.body, count, f"== {numbers[0]}")
