"""print-call: print() in library code."""

import re

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
`if __name__ == "__main__":` is a command-line entry point and is not flagged."""
    PREFILTER = re.compile(rb"print[ \t]*\(")

    VALID = [
        "import logging\nlogging.getLogger(__name__).info('x')\n",
        "if __name__ == '__main__':\n    print('usage: ...')\n",
        Example(code="print('hello')\n", path="pkg/__main__.py"),
        "def print_table(rows):\n    return rows\n",
    ]
    INVALID = [
        Example(code="def forward(self, x):\n    print(x.shape)\n    return x\n", line=2),
        Example(code="p = print\nprint('loaded', __name__)\n", line=2),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.in_main_guard or self.context.path.endswith("__main__.py"):
            return
        if self.resolves_to(node, "builtins.print"):
            self.report(node)
