"""debugger: a breakpoint or a debugger import left in installed code."""

import libcst as cst

from patchaudit.rule import Example, Rule, Severity

DEBUGGER_CALLS = (
    "builtins.breakpoint",
    "pdb.set_trace",
    "pdb.post_mortem",
    "pdb.pm",
    "ipdb.set_trace",
    "ipdb.post_mortem",
    "pudb.set_trace",
    "IPython.embed",
)
DEBUGGER_MODULES = {"pdb", "ipdb", "pudb"}
ENTRY_POINTS = {"set_trace", "post_mortem", "pm", "run", "runcall"}


class Debugger(Rule):
    ID = "debugger"
    SEVERITY = Severity.HIGH
    MESSAGE = "debugger breakpoint or import left in installed code"
    EXPLANATION = """\
`breakpoint()`, `pdb.set_trace()` or an `import pdb`/`ipdb` in installed code stops a serving
process on its first request, waiting on a terminal nobody is watching. Calls are matched by
what they resolve to (`from pdb import set_trace as st; st()` is caught). A module that uses
pdb as a library (`pdb.Pdb`, a class extending it: a debugger helper the package ships on
purpose) is not flagged for importing it; its breakpoint calls still are."""
    PREFILTER = (b"breakpoint", b"pdb", b"pudb", b"IPython", b"set_trace", b"post_mortem")

    VALID = [
        "import pdb\n\nclass ForkedPdb(pdb.Pdb):\n    pass\n",
        "import pdb\n\nold_init = pdb.Pdb.__init__\n",
        "def breakpoint_count(xs):\n    return len(xs)\n",
        "import logging\nlogging.getLogger(__name__).debug('x')\n",
        "class Helper:\n    def set_trace(self):\n        pass\n\nHelper().set_trace()\n",
    ]
    INVALID = [
        Example(code="def f(x):\n    breakpoint()\n    return x\n", line=2),
        Example(code="import pdb\n", line=1),
        Example(code="from pdb import set_trace as st\n\ndef g():\n    st()\n", line=1),
        Example(code="def g():\n    import ipdb; ipdb.set_trace()\n"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        name = self.resolves_to(node, DEBUGGER_CALLS)
        if name is not None:
            self.report(node, f"{name.removeprefix('builtins.')}() stops the process for a debugger")

    def visit_Module(self, node: cst.Module) -> None:
        self._imports: list[tuple[cst.CSTNode, str]] = []
        self._tooling = False

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = cst.helpers.get_full_name_for_node(alias.name) or ""
            if name.split(".")[0] in DEBUGGER_MODULES:
                self._imports.append((node, name))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is None or node.relative:
            return
        name = cst.helpers.get_full_name_for_node(node.module) or ""
        if name.split(".")[0] not in DEBUGGER_MODULES:
            return
        names = node.names if not isinstance(node.names, cst.ImportStar) else ()
        if any(alias.name.value not in ENTRY_POINTS for alias in names if isinstance(alias.name, cst.Name)):
            self._tooling = True  # `from pdb import Pdb`: building a debugger helper
        else:
            self._imports.append((node, name))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `pdb.Pdb`, `pdb.Pdb.__init__`: the module is used as a library, not to stop here.
        if node.attr.value not in ENTRY_POINTS and self.resolves_to(node, ("pdb.*", "ipdb.*", "pudb.*")):
            self._tooling = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._tooling:
            return
        for node, name in self._imports:
            self.report(node, f"imports the debugger {name}")
