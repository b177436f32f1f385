"""debugger: a breakpoint, an interactive console or a debugger import left in installed code."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity

DEBUGGER_CALLS = (
    "builtins.breakpoint",
    "sys.breakpointhook",
    "pdb.set_trace",
    "pdb.post_mortem",
    "pdb.pm",
    "pdb.run",
    "pdb.runcall",
    "pdb.runeval",
    "pdb.runctx",
    "pdb.interaction",
    "pdb.Pdb().*",
    "ipdb.*",
    "pudb.*",
    "remote_pdb.*",
    "web_pdb.*",
    "code.interact",
    "code.InteractiveConsole().interact",
    "IPython.embed",
    "IPython.start_ipython",
    "IPython.embed_kernel",
    "debugpy.listen",
    "debugpy.wait_for_client",
    "debugpy.breakpoint",
    "pydevd.settrace",
    "pydevd_pycharm.settrace",
    "IPython.core.debugger.set_trace",
    "IPython.core.debugger.Pdb().set_trace",
    "IPython.core.debugger.Tracer()()",
    "IPython.terminal.debugger.set_trace",
    "IPython.terminal.debugger.TerminalPdb().set_trace",
    "IPython.core.debugger.Pdb().*",
    "IPython.terminal.debugger.TerminalPdb().*",
    "torch.distributed.breakpoint",
    "celery.contrib.rdb.set_trace",
    "rpdb.*",
    "madbg.*",
    "wdb.*",
    "pdbr.*",
)
DEBUGGER_MODULES = {
    "pdb",
    "ipdb",
    "pudb",
    "debugpy",
    "remote_pdb",
    "web_pdb",
    "pydevd",
    "pydevd_pycharm",
    "rpdb",
    "madbg",
    "wdb",
    "pdbr",
}
# Where a function installed runs later, on an error, a signal or at exit: a debugger put there stops.
HOOKS = ("sys.excepthook", "sys.breakpointhook", "threading.excepthook", "sys.unraisablehook")
# Traceback printers that open a debugger when told to (`FormattedTB(call_pdb=True)`).
PDB_PRINTERS = ("IPython.core.ultratb.*",)
# Trace and profile hooks: once set, every line or call of the process runs the function given.
TRACERS = (
    "sys.settrace",
    "sys.setprofile",
    "threading.settrace",
    "threading.setprofile",
    "threading.settrace_all_threads",
    "threading.setprofile_all_threads",
)
TRACER_TEXT = re.compile(rb"\bset(?:trace|profile)(?:_all_threads)?\b")
# A process that stops itself, for a debugger (gdb, py-spy) to attach: `os.kill(os.getpid(), SIGSTOP)`.
SELF_SIGNALS = ("os.kill", "os.killpg", "signal.raise_signal", "signal.pthread_kill")
STOPS = tuple(f"signal.{n}" for n in ("SIGSTOP", "SIGTSTP", "SIGTRAP")) + tuple(
    f"signal.Signals.{n}" for n in ("SIGSTOP", "SIGTSTP", "SIGTRAP")
)
STOP_TEXT = re.compile(rb"\bSIG(?:STOP|TSTP|TRAP)\b")
ENTRY_POINTS = {"set_trace", "post_mortem", "pm", "run", "runcall", "runeval", "runctx", "listen", "wait_for_client"}


class Debugger(Rule):
    ID = "debugger"
    SEVERITY = Severity.HIGH
    MESSAGE = "debugger breakpoint or import left in installed code"
    EXPLANATION = """\
`breakpoint()`, `pdb.set_trace()`, `pdb.Pdb().set_trace()`, `code.interact()`, IPython's
`embed()`, `debugpy.listen()`/`wait_for_client()` or an `import pdb`/`ipdb` in installed code
stops a serving process on its first request, waiting on a terminal (or a debugger client)
nobody is attaching. Calls are matched by what they resolve to, however imported or aliased
(`from pdb import set_trace as st`, `__import__("pdb").set_trace()`, `getattr(pdb, "set_trace")`,
`dbg = pdb.Pdb(); dbg.set_trace()`). A module that uses pdb as a library (`pdb.Pdb` extended:
a debugger helper the package ships on purpose) is not flagged for importing it; its
breakpoint calls still are.

Shapes understood: `breakpoint()`, pdb, ipdb, pudb, remote_pdb, web_pdb, rpdb, madbg, wdb, pdbr,
`code.interact`,
IPython's `embed`/`embed_kernel`/`start_ipython` and its `core.debugger` and
`terminal.debugger` entry points, `torch.distributed.breakpoint`, debugpy, pydevd, celery's rdb;
every import form and alias, `functools.partial`, lambdas, `Pdb` subclasses (`ForkedPdb().set_trace()`),
a `self.X` bound to an entry point (`self.bp = pdb.set_trace`), `sys.modules["pdb"]`, and a
function, class (`__init__`, `__call__`) or instance method of the same module that stops (the
call site is the finding too). A debugger installed to run later is one too: an entry point
handed on as a value (`signal.signal(SIGUSR1, pdb.set_trace)`, `atexit.register(pdb.set_trace)`),
set as a hook (`sys.excepthook = pdb.pm`, `sys.breakpointhook = ipdb.set_trace`,
`threading.excepthook`), a lambda or function of the module that stops, installed anywhere
(`signal.signal(s, lambda *a: pdb.set_trace())`), IPython's `Pdb().interaction(...)`, and
IPython's traceback printers with `call_pdb` set (`sys.excepthook = FormattedTB(call_pdb=True)`).

A process that stops itself for a debugger (gdb, py-spy) to attach is one too:
`os.kill(os.getpid(), signal.SIGSTOP)`, `signal.raise_signal(signal.SIGTRAP)`, `os.killpg(0, SIGTSTP)`
(another process stopped is process control, not a debugger).

A trace or profile function a patch installs (`sys.settrace(f)`, `sys.setprofile`,
`threading.settrace`) in a module whose distributed text never traces is one too: every line or
call of the serving process runs through it from then on (`settrace(None)` turns it off).

Knowingly not: a debugger module passed to a helper as an argument, a debugger reached through
another module's helper, a trace function set in a module that already traces (a documented
tracing option), `faulthandler` (it prints stacks, it does not stop; a file it writes to is
file-write's)."""
    PREFILTER = (
        b"breakpoint",
        b"Tracer",
        b"pdb",
        b"pudb",
        b"madbg",
        b"wdb",
        b"interact",
        b"IPython",
        b"embed",
        b"debugpy",
        b"pydevd",
        b"set_trace",
        b"listen",
        b"wait_for_client",
        TRACER_TEXT,
        STOP_TEXT,
    )
    WHOLE_MODULE = True  # an import is flagged unless the module uses pdb as a library elsewhere
    # The module must be named somewhere: imported, or given to __import__ as a string.
    REQUIRES = (
        b"breakpoint",
        b"pdb",
        b"pudb",
        b"madbg",
        b"wdb",
        b"IPython",
        b"debugpy",
        b"pydevd",
        re.compile(rb"import[^\n#]*\bcode\b|['\"]code['\"]"),
        TRACER_TEXT,
        STOP_TEXT,
    )
    IDENTIFIERS = frozenset(
        {n.rsplit(".", 1)[-1] for n in DEBUGGER_CALLS if not n.endswith(("*", ")"))}
        | DEBUGGER_MODULES
        | {"Pdb", "interact", "Tracer", "call_pdb", "excepthook"}
        | {n.rsplit(".", 1)[-1] for n in TRACERS}
        | {n.rsplit(".", 1)[-1] for n in SELF_SIGNALS + STOPS}
    )

    VALID = [
        """
        import pdb

        class ForkedPdb(pdb.Pdb):
            pass
        """,
        "import pdb\n\nold_init = pdb.Pdb.__init__\n",
        "def breakpoint_count(xs):\n    return len(xs)\n",
        "import logging\nlogging.getLogger(__name__).debug('x')\n",
        "class Helper:\n    def set_trace(self):\n        pass\n\nHelper().set_trace()\n",
        """
        def embed(tokens):
            return tokens

        embed([1, 2])
        """,
        "import code\nsource = code.compile_command('x = 1')\n",
        "import os\nimport signal\n\ndef pause(child):\n    os.kill(child.pid, signal.SIGSTOP)\n",
        "import os\nimport signal\n\ndef stop():\n    os.kill(os.getpid(), signal.SIGTERM)\n",
        "import sys\nfrom IPython.core import ultratb\n\nsys.excepthook = ultratb.FormattedTB(call_pdb=False)\n",
        Example(code="import sys\n\ndef stop_tracing():\n    sys.settrace(None)\n", pristine="import sys\n"),
        Example(  # a module that traces on purpose (an option to trace calls): its own business
            code="import sys\n\ndef trace_calls(fn, log):\n    sys.settrace(fn)\n    log.info('tracing')\n",
            pristine="import sys\n\ndef trace_calls(fn, log):\n    sys.settrace(fn)\n",
        ),
    ]
    INVALID = [
        Example(code="def f(x):\n    breakpoint()\n    return x\n", line=2, message="breakpoint()"),
        Example(
            code="import os\nimport signal\n\ndef f(x):\n    if x.isnan().any():\n"
            "        os.kill(os.getpid(), signal.SIGSTOP)\n    return x\n",
            line=6,
            message="stops itself",
        ),
        Example(
            code="from signal import raise_signal, SIGTRAP as TRAP\n\ndef f(x):\n    raise_signal(TRAP)\n",
            line=4,
            message="stops itself",
        ),
        Example(code="import pdb\n", line=1, message="imports the debugger pdb"),
        Example(code="from pdb import set_trace as st\n\ndef g():\n    st()\n", line=4, message="pdb.set_trace()"),
        Example(code="def g():\n    import ipdb; ipdb.set_trace()\n", line=2),
        Example(
            code="""
            import pdb

            def forward(self, x):
                pdb.Pdb().set_trace()
                return x
            """,
            line=4,
            message="pdb.Pdb().set_trace()",
        ),
        Example(
            code="""
            def forward(self, x):
                dbg = __import__("pdb")
                dbg.set_trace()
            """,
            line=3,
        ),
        Example(code="import pdb\ntrace = getattr(pdb, 'set_trace')\ntrace()\n", line=3),
        Example(code="import code\n\ndef f(x):\n    code.interact(local=locals())\n", line=4, message="code.interact"),
        Example(code="from IPython import embed\n\ndef f(x):\n    embed()\n", line=4, message="IPython.embed"),
        Example(
            code="""
            import debugpy

            debugpy.listen(("0.0.0.0", 5678))
            debugpy.wait_for_client()
            """,
            line=3,
            message="debugpy.listen",
        ),
        Example(code="import os, pdb\n\ndef f():\n    pdb.post_mortem()\n", line=4),
        Example(
            code="""
            import pdb

            def f(x):
                p = pdb.Pdb(skip=["torch.*"])
                p.set_trace()
            """,
            line=5,
        ),
        Example(
            code="""
            import pdb

            class ForkedPdb(pdb.Pdb):
                def interaction(self, *args, **kwargs):
                    pdb.Pdb.interaction(self, *args, **kwargs)

            def forward(self, x):
                ForkedPdb().set_trace()
                return x
            """,
            line=8,
            message="set_trace",
        ),
        Example(code="import torch.distributed as dist\n\ndef f():\n    dist.breakpoint(rank=0)\n", line=4),
        Example(code="from IPython.core.debugger import set_trace\n\ndef f(x):\n    set_trace()\n", line=4),
        Example(
            code="""
            def _stop():
                breakpoint()

            def forward(self, x):
                _stop()
                return x
            """,
            line=5,
            message="_stop() runs breakpoint()",
        ),
        Example(code="def f(x):\n    import pudb; pudb.set_trace()\n    return x\n", line=2, message="pudb"),
        Example(code="import rpdb\n\ndef f():\n    rpdb.set_trace()\n", line=4, message="rpdb.set_trace"),
        Example(
            code="""
            import pdb

            class Layer:
                def __init__(self):
                    self.bp = pdb.set_trace

                def forward(self, x):
                    self.bp()
                    return x
            """,
            line=8,
            message="pdb.set_trace",
        ),
        Example(
            code="""
            class _Stop:
                def __call__(self):
                    import pdb
                    pdb.set_trace()

            _stop = _Stop()

            def forward(self, x):
                _stop()
                return x
            """,
            line=9,
            message="__call__() runs pdb.set_trace()",
        ),
        Example(
            code="import signal\nimport pdb\n\nclass ForkedPdb(pdb.Pdb):\n    pass\n\n"
            "signal.signal(signal.SIGUSR1, pdb.set_trace)\n",
            line=7,
            message="hands pdb.set_trace()",
        ),
        Example(
            code="import sys\nfrom IPython.core import ultratb\n\n"
            "sys.excepthook = ultratb.FormattedTB(call_pdb=True)\n",
            line=4,
            message="call_pdb",
        ),
        Example(
            code="""
            import sys

            def _trace(frame, event, arg):
                print(frame.f_code.co_name, event)
                return _trace

            def forward(self, x):
                sys.settrace(_trace)
                return x
            """,
            pristine="def forward(self, x):\n    return x\n",
            line=8,
            message="trace function",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        name = self.resolves_to(node, DEBUGGER_CALLS)
        if name is not None:
            self.report(node, f"{name.removeprefix('builtins.')}() stops the process for a debugger")
            return
        for found, _inner, helper in self.through_helper(node, DEBUGGER_CALLS):
            self.report(node, f"{helper.name}() runs {found.removeprefix('builtins.')}(): stops for a debugger")
            return
        tracer = self.resolves_to(node, TRACERS)
        if tracer is not None:
            self._tracer(node, tracer)
            return
        if self._stops_itself(node):
            self.report(node, "the process stops itself (SIGSTOP/SIGTRAP) for a debugger to attach")
            return
        call_pdb = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "call_pdb"), None)
        if call_pdb is not None and self.truth(call_pdb) and self.resolves_to(node, PDB_PRINTERS):
            self.report(node, "an IPython traceback printer with call_pdb opens a debugger on every error")
            return
        for arg in node.args:
            entry = self._entry(arg.value)
            if entry is not None:
                self.report(
                    node, f"hands {entry}() on to be run later (a signal, an exit, a thread): stops the process"
                )
                return

    def _stops_itself(self, node: cst.Call) -> bool:
        """`os.kill(os.getpid(), signal.SIGSTOP)`, `signal.raise_signal(SIGTRAP)`, `os.killpg(0, SIGTSTP)`:
        a stop signal sent to this very process (another process stopped is process control)."""
        kind = self.resolves_to(node, SELF_SIGNALS)
        if kind is None or not node.args or self.resolves_to(node.args[-1].value, STOPS) is None:
            return False
        if kind == "signal.raise_signal":
            return True
        if kind == "signal.pthread_kill":
            return (
                self.resolves_to(node.args[0].value, ("threading.get_ident", "threading.main_thread().ident"))
                is not None
            )
        target = node.args[0].value
        ours = isinstance(target, cst.Call) and self.resolves_to(target, ("os.getpid", "os.getpgid", "os.getpgrp"))
        return bool(ours) or (isinstance(target, cst.Integer) and target.evaluated_value == 0)

    def _tracer(self, node: cst.Call, tracer: str) -> None:
        """`sys.settrace(f)` a patch brought into a module that never traced: every line or call
        of the process runs `f` from then on (`settrace(None)` turns tracing off)."""
        given = node.args[0].value if node.args else None
        if given is None or (isinstance(given, cst.Name) and given.value == "None"):
            return
        if self.new_to_module(TRACER_TEXT) and not self.in_main_guard:
            message = f"{tracer}() installs a trace function: every call of the process runs through it"
            self.report(node, message, severity=Severity.HIGH)

    def visit_Assign(self, node: cst.Assign) -> None:
        hook = next((h for t in node.targets if (h := self.resolves_to(t.target, HOOKS)) is not None), None)
        entry = self._entry(node.value) if hook is not None else None
        if entry is not None:
            self.report(node, f"installs {entry}() as {hook}: stops the process for a debugger")

    def _entry(self, value: cst.BaseExpression) -> str | None:
        """The debugger entry point a value names, not calls (`pdb.pm`, `ipdb.post_mortem`)."""
        if not isinstance(value, cst.Name | cst.Attribute):
            return None
        name = self.resolves_to(value, DEBUGGER_CALLS)
        return name.removeprefix("builtins.") if name is not None and name != "sys.breakpointhook" else None

    def visit_Module(self, node: cst.Module) -> None:
        self._imports: list[tuple[cst.CSTNode, str]] = []
        self._tooling = False
        self._calls = 0

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

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # `class ForkedPdb(pdb.Pdb)`: the module is used as a library, not to stop here.
        if any(self.resolves_to(base.value, ("pdb.Pdb", "pdb.*")) for base in node.bases):
            self._tooling = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `pdb.Pdb.__init__`: pdb used as a library.
        if isinstance(node.value, cst.Attribute) and self.resolves_to(node.value, "pdb.Pdb"):
            self._tooling = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._tooling:
            return
        for node, name in self._imports:
            self.report(node, f"imports the debugger {name}")
