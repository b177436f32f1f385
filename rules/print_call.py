"""print-call: print() in library code."""

import libcst as cst

from patchaudit.rule import Example, Rule, Severity


class PrintCall(Rule):
    ID = "print-call"
    SEVERITY = Severity.LOW
    MESSAGE = "print() in library code (debug output left in a patch?)"
    EXPLANATION = """\
Library code reports through logging; a bare `print()` in an installed package is usually
debug output from a hand patch. On a serving host it floods the journal and, in a hot path,
costs a host round-trip per call. `print` in `__main__.py` or under
`if __name__ == "__main__":` is a command-line entry point and is not flagged.

Shapes understood: `print(...)` however reached (aliases such as `p = print`, imports of
`builtins`).

Knowingly not: `sys.stdout.write`, logging configured to print; `__main__.py` and
`if __name__ == "__main__":` blocks are deliberately quiet."""
    PREFILTER = b"print"
    IDENTIFIERS = frozenset({"print"})

    VALID = [
        "import logging\nlogging.getLogger(__name__).info('x')\n",
        "if __name__ == '__main__':\n    print('usage: ...')\n",
        Example(code="print('hello')\n", path="pkg/__main__.py"),
        "def print_table(rows):\n    return rows\n",
        "import logging\nlogger = logging.getLogger(__name__)\nlogger.debug('x=%s', x)\n",
        "def f(print):\n    print('not the builtin')\n",
    ]
    INVALID = [
        Example(code="def forward(self, x):\n    print(x.shape)\n    return x\n", line=2),
        Example(code="p = print\nprint('loaded', __name__)\n", line=2),
        Example(code="def f(x):\n    p = print\n    p(x)\n", line=3),
        Example(code="import builtins\nbuiltins.print('x')\n", line=2),
        Example(code="def f(x):\n    print  (\n        x\n    )\n", line=2),
        Example(code="def f(x):\n    getattr(__builtins__, 'print', None)\n    print(x, flush=True)\n", line=3),
        Example(code="class M:\n    def load(self):\n        print(f'{self}')\n", line=3),
        Example(code="out = [print(x) for x in xs]\n", line=1),
        Example(code="if DEBUG:\n    print('debug', x)\n", line=2),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.in_main_guard or self.context.path.endswith("__main__.py"):
            return
        if self.resolves_to(node, "builtins.print"):
            self.report(node)
