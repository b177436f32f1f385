"""host-sync: a device-to-host synchronisation (or a patch's sleep) inside a forward function."""

import ast
import re

import libcst as cst

from patchaudit.rule import (
    FORWARD_NAMES,
    STEP_NAMES,
    Alias,
    Example,
    FileContext,
    Rule,
    Severity,
    Statement,
    matches_any,
    reached_from,
    wraps_step,
)

SYNC_METHODS = {"item", "cpu", "tolist"}
_SHOWS = re.compile(r"^(?:debug|info|warning|warn|error|exception|critical|log)(?:_once)?$")
SYNC_CALLS = ("torch.cuda.synchronize", "torch.synchronize", "torch.cuda.current_stream")
_WAIT = re.compile(rb"\.[\s\\]*wait[\s\\]*\([\s\\]*[^)\s\\]")
# Events a wait may run out on: waited on with a timeout and never set, a sleep.
EVENTS = ("threading.Event", "multiprocessing.Event")
SLEEPS = ("time.sleep",)  # not asyncio.sleep: `await asyncio.sleep(0)` yields to the event loop
# `.item()`, `.cpu()`, `.tolist()` spelled (SYNC_METHODS), and a forward's `def` (FORWARD_NAMES, looser).
_SYNC_METHOD = re.compile(rb"\.[\s\\]*(?:item|cpu|tolist)\b")
_FORWARD_DEF = re.compile(rb"\bdef[\s\\]+(?:_*forward|__call__|\w+_forward\b)")
# What a forward of a file that verifies can report (no sleep, no wait, no truth read: drifted only).
_VERIFIED_NAMES = frozenset(SYNC_METHODS | {"synchronize"})
# Collectives run once per layer of every step: `tensor_model_parallel_all_reduce`.
COLLECTIVE = re.compile(r"(?:^|_)(?:all_reduce|all_gather|reduce_scatter|all_to_all)(?:_|$)")
# Reductions whose truth a Python test reads back from the device: `if torch.isnan(x).any():`.
TRUTH_METHODS = frozenset({"any", "all"})


def _hot_name(name: str) -> bool:
    """A forward, a step, or a collective (`all_reduce`): what runs on every step."""
    return (
        FORWARD_NAMES.match(name) is not None
        or STEP_NAMES.match(name) is not None
        or COLLECTIVE.search(name) is not None
    )


class HostSync(Rule):
    ID = "host-sync"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "host-device synchronisation in a forward function"
    EXPLANATION = """\
`.item()`, `.cpu()`, `.tolist()` and `torch.cuda.synchronize()` wait for the GPU to finish
and copy to the host. In a model's `forward` they stall the pipeline on every step and break
CUDA graph capture. Patches add them to print or inspect a value; they are flagged inside
forward functions (`forward`, `_forward`, `forward_*`, `__call__`), and in a drifted file also
inside the other functions a server runs for every step or batch (the runner's `execute_model`,
a sampler's `sample`, `compute_logits`, a scheduler's `schedule`/`step`, a drafter's `propose`, an
attention backend's `do_kv_cache_update`).

High where a patch added the sync to feed a print or a log line (`logger.info("%f",
logits.abs().max().item())`): debug output that stalls every step of the server, left in the
hot path; and where a patch added `torch.cuda.synchronize()` (a wait that gives no value: in
serving code it is there to time a step or chase a race), or a `time.sleep()` (the host stalls
instead of the device: every step, or every pass of the scheduler's loop, waits for nothing).
Elsewhere medium: a value read back is sometimes what the computation needs.

Shapes understood: `.item()`, `.cpu()`, `.tolist()`, `torch.cuda.synchronize()` however imported
or aliased, wrapped in `functools.partial`, and a helper of the same module that syncs, called
from a forward function; `time.sleep()` however imported, also through such a helper, in a drifted
file only, and a sleep by another name there: a wait with a timeout on an event nothing sets
(`threading.Event().wait(0.015)`, `_PACE.wait(0.015)` with `_PACE = threading.Event()` and no
`_PACE.set()` in the module).

In a drifted file the hot path also takes in the methods a forward or step of the same class runs
through `self.name(...)` (`forward` -> `_get_logits` -> `_gather_logits`), and the collectives
(`..._all_reduce`, `..._all_gather`, `reduce_scatter`, `all_to_all`: every layer of every step).
So does a function of the module put on a forward or step as a decorator (`@_fwd_timer`), or around
one at module level (`Impl.forward = _finite_watch(Impl.forward)`): the wrapper it returns runs
around every step. There a tensor's truth read by a test the patch added
(`if torch.isnan(x).any():`, `bool(torch.isfinite(out).all())`) is a sync too, high: a debug check
that stalls every step.

Knowingly not: syncs hidden in tensor printing (`print(x)` of a CUDA tensor), `.numpy()`,
a bare `bool(tensor)` of a name, helpers in other modules, `asyncio.sleep()`."""
    PREFILTER = (
        _SYNC_METHOD,
        b"synchronize",
        b"sleep",
        _WAIT,  # `_PACE.wait(0.015)`: a wait with a timeout
        re.compile(rb"\.[\s\\]*(?:any|all)[\s\\]*\([\s\\]*\)"),  # `if torch.isnan(x).any():` reads a device value
    )
    REQUIRES = (
        _FORWARD_DEF,
        re.compile(rb"\bdef[\s\\]+\w*(?:all_reduce|all_gather|reduce_scatter|all_to_all)"),
        re.compile(rb"\bdef[\s\\]+_*(?:execute_model|model_step|step|schedule|sample|compute_logits|propose)"),
        re.compile(rb"\bdef[\s\\]+_*do_kv_cache_update"),
    )
    REQUIRES_IN_STATEMENT = True  # a finding sits inside the forward function's own statement
    IDENTIFIERS = frozenset({"item", "cpu", "tolist", "synchronize", "sleep", "any", "all"})

    @classmethod
    def keeps(cls, statement: Statement, alias: Alias) -> bool:
        if not statement.drifted:
            # A file that verifies: only a forward's own syncs (`_hot`), a sync method or call spelled
            # in it, or a helper or alias of the module that runs one.
            if _FORWARD_DEF.search(statement.text) is None:
                return False
            if alias:
                return True
            spelled = _SYNC_METHOD.search(statement.text) is not None or b"synchronize" in statement.text
            return spelled and not _VERIFIED_NAMES.isdisjoint(statement.identifiers())
        if super().keeps(statement, alias):
            return True
        if statement.drifted and _WAIT.search(statement.text) and matches_any(cls.REQUIRES, statement.text):
            return True  # `_PACE.wait(0.015)`: judged in a drifted file only
        # A method a forward or step of its class runs (`self._gather_logits(...)`): its own
        # statement spells no `def forward`.
        nodes = statement.nodes()
        method = nodes[0] if nodes and isinstance(nodes[0], ast.FunctionDef | ast.AsyncFunctionDef) else None
        if method is None or statement.module is None or not matches_any(cls.PREFILTER, statement.text):
            return False
        if cls.IDENTIFIERS.isdisjoint(statement.identifiers()):
            return False
        if method.name in wraps_step(statement.module, _hot_name):
            return True  # a decorator of a forward or step: its wrapper runs on every step
        return any(name == method.name for _, name in reached_from(statement.module, _hot_name))

    VALID = [
        Example(  # a check at load time, not a step
            code="import torch\n\ndef load_weights(self, w):\n"
            "    if torch.isnan(w).any():\n        raise ValueError(w)\n",
            pristine="import torch\n\ndef load_weights(self, w):\n    pass\n",
        ),
        Example(  # a Python list's truth, not a tensor's
            code="def forward(self, x, flags):\n    if all(flags):\n        x = x * 2\n    return x\n",
            pristine="def forward(self, x, flags):\n    return x\n",
        ),
        "def load_weights(self, w):\n    return w.cpu()\n",
        "def forward(self, x):\n    return self.proj(x)\n",
        "def forward(self, x):\n    return x.to(device)\n",
        "import time\n\ndef wait_until_ready(self):\n    time.sleep(0.1)\n",  # not a step
        "import asyncio\n\nasync def step(self):\n    await asyncio.sleep(0)\n",  # yields to the event loop
        Example(  # an event another thread sets: the step waits for it, not for a timeout
            code="""
            import threading

            _READY = threading.Event()

            def on_ready():
                _READY.set()

            class EngineCore:
                def step(self):
                    _READY.wait(5.0)
                    return self.model_executor.execute_model(self.scheduler.schedule())
            """,
            pristine="""
            class EngineCore:
                def step(self):
                    return self.model_executor.execute_model(self.scheduler.schedule())
            """,
        ),
        Example(  # an event asked without waiting, and one a handler sets at exit
            code="""
            import atexit
            import threading

            _ABORT = threading.Event()
            _STOP = threading.Event()
            atexit.register(_STOP.set)

            class EngineCore:
                def step(self):
                    if _ABORT.wait(0):
                        return None
                    _STOP.wait(0.5)
                    return self.model_executor.execute_model(self.scheduler.schedule())
            """,
            pristine="""
            class EngineCore:
                def step(self):
                    return self.model_executor.execute_model(self.scheduler.schedule())
            """,
        ),
    ]
    INVALID = [
        Example(
            code="""
            import torch

            def _sync():
                torch.cuda.synchronize()

            def forward(self, x):
                _sync()
                return x
            """,
            line=7,
            message="_sync() runs torch.cuda.synchronize()",
        ),
        Example(code="def forward(self, x):\n    n = x.sum().item()\n    return x * n\n", line=2),
        Example(code="def forward(self, ids):\n    print(ids.tolist())\n    return ids\n"),
        Example(code="import torch\n\ndef _forward(self, x):\n    torch.cuda.synchronize()\n    return x\n"),
        Example(code="def forward_native(self, x):\n    return x.cpu().numpy()\n", line=2),
        Example(code="from torch.cuda import synchronize\n\ndef forward(self, x):\n    synchronize()\n", line=4),
        Example(code="import torch\nsync = torch.cuda.synchronize\n\ndef forward(self, x):\n    sync()\n", line=5),
        Example(code="class M:\n    def __call__(self, x):\n        return float(x.max().item())\n", line=3),
        Example(
            code="""
            class Attention:
                def forward(self, q, k):
                    if (q.abs().max()
                            .item() > 1e4):
                        raise ValueError("overflow")
                    return q
            """,
            line=3,
        ),
        # A patch's log line in the runner's step, fed by a sync: debug output that stalls every step.
        Example(
            code="""
            class Runner:
                def execute_model(self, batch):
                    logits = self.model(batch)
                    logger.info("absmax=%.3f", logits.abs().max().item())
                    return logits
            """,
            pristine="""
            class Runner:
                def execute_model(self, batch):
                    logits = self.model(batch)
                    return logits
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="def forward(self, x):\n    print(f'mean {x.mean().item():.4f}')\n    return x\n",
            pristine="def forward(self, x):\n    return x\n",
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="def sample(self, logits):\n    top = logits.argmax(-1).cpu()\n    return top\n",
            pristine="def sample(self, logits):\n    top = logits.argmax(-1)\n    return top\n",
            line=2,
            severity=Severity.MEDIUM,
        ),
        # "give the remote prefill side a moment": the scheduler's loop stalls whenever the branch holds.
        Example(
            code="""
            import time

            class Scheduler:
                def schedule(self):
                    if self.connector is not None and self.waiting and not self.running:
                        time.sleep(0.005)
                    return self._schedule()
            """,
            pristine="""
            import time

            class Scheduler:
                def schedule(self):
                    return self._schedule()
            """,
            line=6,
            severity=Severity.HIGH,
            message="time.sleep() stalls",
        ),
        Example(  # a drafter's propose runs every step
            code="""
            class Proposer:
                def propose(self, target_hidden_states):
                    draft_token_ids = self._run(target_hidden_states)
                    logger.info("mtp drafts[:4]=%s", draft_token_ids[:4].tolist())
                    return draft_token_ids
            """,
            pristine="""
            class Proposer:
                def propose(self, target_hidden_states):
                    draft_token_ids = self._run(target_hidden_states)
                    return draft_token_ids
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="from time import sleep as nap\n\ndef forward(self, x):\n    nap(0.01)\n    return x\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(  # a method the forward runs: every step too
            code="""
            import time

            class LogitsProcessor:
                def forward(self, hidden_states):
                    return self._gather(self._logits(hidden_states))

                def _gather(self, logits):
                    time.sleep(0.002)
                    return logits
            """,
            pristine="""
            import time

            class LogitsProcessor:
                def forward(self, hidden_states):
                    return self._gather(self._logits(hidden_states))

                def _gather(self, logits):
                    return logits
            """,
            line=8,
            severity=Severity.HIGH,
        ),
        Example(  # a collective runs on every layer of every step; its truth is read back by the host
            code="""
            import torch

            def tensor_model_parallel_all_reduce(x):
                out = group().all_reduce(x)
                if not bool(torch.isfinite(out).all()):
                    raise RuntimeError("non-finite")
                return out
            """,
            pristine="""
            import torch

            def tensor_model_parallel_all_reduce(x):
                return group().all_reduce(x)
            """,
            line=5,
            message="reads a tensor's value back",
            severity=Severity.HIGH,
        ),
        Example(
            code="import torch\n\ndef forward(self, x):\n"
            "    if torch.isnan(x).any():\n        x = x.nan_to_num()\n    return x\n",
            pristine="import torch\n\ndef forward(self, x):\n    return x\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(  # a decorator of the module put on the runner's forward: its wrapper runs every step
            code="""
            import functools
            import torch

            def _timer(fn):
                @functools.wraps(fn)
                def wrapper(self, *args, **kwargs):
                    torch.cuda.synchronize()
                    return fn(self, *args, **kwargs)
                return wrapper

            class Runner:
                @_timer
                def _model_forward(self, input_ids):
                    return self.model(input_ids)
            """,
            pristine="""
            import functools
            import torch

            class Runner:
                def _model_forward(self, input_ids):
                    return self.model(input_ids)
            """,
            line=7,
            severity=Severity.HIGH,
        ),
        # "pacing timer between steps": an event nothing sets, waited on with a timeout, is a sleep.
        Example(
            code="""
            import threading

            _PACE = threading.Event()

            class EngineCore:
                def step(self):
                    outputs = self.model_executor.execute_model(self.scheduler.schedule())
                    _PACE.wait(0.015)
                    return outputs
            """,
            pristine="""
            class EngineCore:
                def step(self):
                    outputs = self.model_executor.execute_model(self.scheduler.schedule())
                    return outputs
            """,
            line=8,
            message="nothing sets",
            severity=Severity.HIGH,
        ),
        # "find the first layer that goes non-finite": a wrapper put around the forward at import.
        Example(
            code="""
            import functools
            import torch

            class AttentionImpl:
                def forward(self, layer, query, key, value):
                    return self.kernel(query, key, value)

            def _finite_watch(fn):
                @functools.wraps(fn)
                def inner(self, layer, *args):
                    out = fn(self, layer, *args)
                    if not torch.isfinite(out).all():
                        logger.warning("non-finite in %s", layer.layer_name)
                    return out
                return inner

            AttentionImpl.forward = _finite_watch(AttentionImpl.forward)
            """,
            pristine="""
            import torch

            class AttentionImpl:
                def forward(self, layer, query, key, value):
                    return self.kernel(query, key, value)
            """,
            line=12,
            message="reads a tensor's value back",
            severity=Severity.HIGH,
        ),
    ]

    def __init__(self, context: FileContext | None = None) -> None:
        super().__init__(context)
        self._shown = 0  # depth of print/log calls around the node being visited
        self._showing: list[bool] = []  # per call being visited: whether it is one

    def _hot(self) -> bool:
        """A forward; in a drifted file also a step, a method a forward or step of its class runs,
        a collective (every layer of every step runs it), and a decorator of the module put on a
        forward or step (`@_fwd_timer`: its wrapper runs around every step)."""
        if self.in_forward:
            return True
        if not self.context.drifted:
            return False
        collective = any(COLLECTIVE.search(name) for name in self.context.functions)
        if self.in_step_path or collective or self.in_step_callee:
            return True
        analysis, functions = self.context.analysis, self.context.functions
        return analysis is not None and bool(functions) and functions[0] in wraps_step(analysis.tree, _hot_name)

    def _read_back(self, test: cst.BaseExpression) -> cst.Call | None:
        """A tensor's truth read by the host: `bool(x.isfinite().all())`, `if torch.isnan(x).any():`."""
        if isinstance(test, cst.UnaryOperation):
            test = test.expression
        if isinstance(test, cst.BooleanOperation):
            return self._read_back(test.left) or self._read_back(test.right)
        if (
            isinstance(test, cst.Call)
            and isinstance(test.func, cst.Name)
            and test.func.value in ("bool", "int", "float")
        ):
            inner = test.args[0].value if len(test.args) == 1 else None
            return test if inner is not None and self._read_back(inner) is not None else None
        method = test.func.attr.value if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) else None
        if method in TRUTH_METHODS and not test.args and self._tensor_like(test.func.value):  # type: ignore[attr-defined]
            return test  # type: ignore[return-value]
        return None

    def _tensor_like(self, node: cst.BaseExpression) -> bool:
        """A value built by a torch call (`torch.isnan(x)`, `torch.isfinite(out)`, `(x != x)`)."""
        while (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and not self.resolves_to(node, "torch.*")
        ):
            node = node.func.value
        return (isinstance(node, cst.Call) and self.resolves_to(node, "torch.*") is not None) or isinstance(
            node, cst.Comparison
        )

    def _truth(self, node: cst.CSTNode, test: cst.BaseExpression) -> None:
        if self.context.drifted and self._hot():
            found = self._read_back(test)
            if found is not None:
                message = (
                    f"`{cst.Module([]).code_for_node(found)}` reads a tensor's value back to the host on every step"
                )
                self.report(found, message + ": a patch's check stalls the pipeline", severity=Severity.HIGH)

    def visit_If(self, node: cst.If) -> None:
        self._truth(node, node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._truth(node, node.test)

    def visit_Call(self, node: cst.Call) -> None:
        hot = self._hot()
        shows = hot and self._shows(node)
        self._showing.append(shows)
        self._shown += shows
        if not hot:
            return
        func = self.callee(node)
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS and not node.args:
            self._sync(node, f".{func.attr.value}() synchronises with the device on every step")
            return
        name = self.resolves_to(node, SYNC_CALLS[:2])
        if name is not None:
            self._sync(node, f"{name}() synchronises with the device on every step", waits=True)
            return
        if self.context.drifted and self.resolves_to(node, SLEEPS) is not None:
            message = "time.sleep() stalls the host on every step: a patch's wait left in the hot path?"
            self.report(node, message, severity=Severity.HIGH)
            return
        if self.context.drifted and self._idle_wait(node):
            label = cst.Module([]).code_for_node(node)
            message = f"`{label}` waits on an event nothing sets: a sleep on every step"
            self.report(node, message + " (a patch's wait left in the hot path?)", severity=Severity.HIGH)
            return
        hunted = (*SYNC_CALLS[:2], *(f".{m}" for m in SYNC_METHODS), *(SLEEPS if self.context.drifted else ()))
        for found, _inner, helper in self.through_helper(node, hunted):
            if found in SLEEPS:
                message = f"{helper.name}() runs time.sleep(): the host stalls on every step"
                self.report(node, message + " (a patch's wait left in the hot path?)", severity=Severity.HIGH)
                return
            message = f"{helper.name}() runs {found.lstrip('.')}(): a device sync on every step"
            self._sync(node, message, shown=_shown_in(helper.node), waits=found in SYNC_CALLS)
            return

    def _idle_wait(self, node: cst.Call) -> bool:
        """`threading.Event().wait(0.015)`, or `_PACE.wait(0.015)` with `_PACE = threading.Event()` at
        module level and no `_PACE.set()` in the module: the timeout always runs out, a sleep by
        another name."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "wait" and node.args):
            return False
        timeout = node.args[0].value if node.args[0].keyword is None and not node.args[0].star else None
        if timeout is None and node.args[0].keyword is not None and node.args[0].keyword.value == "timeout":
            timeout = node.args[0].value
        number = timeout.evaluated_value if isinstance(timeout, cst.Integer | cst.Float) else None
        if not (isinstance(number, int | float) and number > 0):
            return False  # `wait(0)` asks without waiting; a timeout not written here is not known
        owner = func.value
        if isinstance(owner, cst.Call):
            return self.resolves_to(owner, EVENTS) is not None and not owner.args
        analysis = self.context.analysis
        if not isinstance(owner, cst.Name) or analysis is None or self.values_of(owner):
            return False
        made = [
            stmt.value
            for stmt in analysis.tree.body
            if isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == owner.value for t in stmt.targets)
        ]
        resolve = self._ast_names(())
        if len(made) != 1 or not (isinstance(made[0], ast.Call) and resolve(made[0].func) & set(EVENTS)):
            return False
        # Set anywhere (`_PACE.set()`, `atexit.register(_PACE.set)`), or handed to code that may set
        # it (returned, passed to a call): someone may end the wait.
        for n in ast.walk(analysis.tree):
            if isinstance(n, ast.Attribute) and n.attr == "set" and _named(n.value, owner.value):
                return False
            if isinstance(n, ast.Return) and n.value is not None and _named(n.value, owner.value):
                return False
            if isinstance(n, ast.Call) and any(
                _named(a, owner.value) for a in (*n.args, *(k.value for k in n.keywords))
            ):
                return False
        return True

    def leave_Call(self, original_node: cst.Call) -> None:
        self._shown -= self._showing.pop()

    def _shows(self, node: cst.Call) -> bool:
        """A print or a log call (`print(...)`, `logger.info(...)`, `log.debug_once(...)`), also
        through `functools.partial(print)` or a local lambda that hands its arguments to one."""
        func = node.func
        if isinstance(func, cst.Call) or (isinstance(func, cst.Name) and func.value != "print"):
            func = self.callee(node)
        if isinstance(func, cst.Name):
            return func.value == "print"
        return isinstance(func, cst.Attribute) and _SHOWS.match(func.attr.value) is not None

    def _sync(self, node: cst.Call, message: str, shown: bool = False, waits: bool = False) -> None:
        if waits and self.context.drifted:
            # A wait that gives no value: its only use in serving code is timing or chasing a race.
            message += ": a patch's wait on the device (timing or debug code left in the hot path?)"
            self.report(node, message, severity=Severity.HIGH)
        elif (self._shown or shown) and self.context.drifted:
            self.report(
                node, message + ", for a print or log line (debug output left in the hot path?)", severity=Severity.HIGH
            )
        else:
            self.report(node, message)


def _named(node: ast.AST, name: str) -> bool:
    """`name`, or an attribute called so (`self._pace`)."""
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _shown_in(function: ast.AST) -> bool:
    """Whether a helper syncs inside a print or a log call (`print(ids.tolist())`)."""
    for call in ast.walk(function):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        shows = (isinstance(func, ast.Name) and func.id == "print") or (
            isinstance(func, ast.Attribute) and _SHOWS.match(func.attr) is not None
        )
        if shows and any(_syncs(arg) for arg in (*call.args, *(k.value for k in call.keywords))):
            return True
    return False


def _syncs(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and (n.func.attr == "synchronize" or (n.func.attr in SYNC_METHODS and not n.args))
        for n in ast.walk(node)
    )
