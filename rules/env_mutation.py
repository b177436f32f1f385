"""env-mutation: library code that changes the process environment."""

import ast
import re
from collections.abc import Sequence

import libcst as cst

from patchaudit.rule import (
    Alias,
    Example,
    Rule,
    Severity,
    Spelling,
    Statement,
    assigned_names,
    bound_through,
    per_file,
    spelled_identifiers,
    statements,
)

MUTATORS = (
    "os.putenv",
    "os.unsetenv",
    "os.environ.update",
    "os.environ.setdefault",
    "os.environ.pop",
    "os.environ.clear",
    "os.environ.__setitem__",
    "os.environ.__delitem__",
)


# How a module's own text changes the environment: a patch adding the first such change is a
# setting forced from inside the package, not configuration the module already owned.
MUTATES = re.compile(
    rb"environ\s*\[[^\]\n]*\]\s*[-+|]?=(?!=)|putenv|unsetenv|del\s+[\w.]*environ\b"
    rb"|environ\s*\.\s*(?:update|setdefault|pop|clear|__setitem__|__delitem__)\b"
)


# Process-global state a module forces on whoever imports it: the global random generators seeded,
# deterministic kernels switched on. Run at import time (module or class body, under no `if`), a
# patch that adds them pins every request's sampling for the whole process.
SEEDERS = (
    "random.seed",
    "numpy.random.seed",
    "torch.manual_seed",
    "torch.random.manual_seed",
    "torch.cuda.manual_seed",
    "torch.cuda.manual_seed_all",
    "torch.use_deterministic_algorithms",
    "transformers.set_seed",
    "transformers.trainer_utils.set_seed",
    "torch.set_float32_matmul_precision",
)
GLOBAL_FLAGS = ("torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark")
# Process-wide numerics: TF32 and reduced-precision reductions for every matmul of the process.
GLOBAL_FLAGS += (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cudnn.allow_tf32",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
)
SEEDS = re.compile(
    rb"\bseed\s*\(|manual_seed|use_deterministic_algorithms|cudnn\.(?:deterministic|benchmark)\s*="
    rb"|allow_tf32|reduced_precision_reduction|set_float32_matmul_precision"
)

# Libraries whose functions a patch may replace for the whole process (`torch._scaled_mm = _mine`,
# `F.silu = lambda x: ...`, `setattr(torch.Tensor, "exponential_", ...)`).
_FOREIGN_ROOTS = frozenset({"torch", "numpy", "transformers", "triton", "flash_attn", "flashinfer", "safetensors"})
# A statement that may assign to an attribute (`a.b = ...`, not `==`) or call setattr.
_ATTRIBUTE_SET = re.compile(rb"[\w\])]\.\w+\s*=(?!=)|\bsetattr\s*\(")
_OWN_PREFILTER = (b"environ", b"putenv", b"unsetenv", b"seed", b"deterministic", b"cudnn", b"tf32", b"_precision")

_ENVIRON = (b"environ", b"putenv", b"unsetenv")
_ENVIRON_NAMES = frozenset(word.decode() for word in _ENVIRON)


def _spells_environ(text: bytes) -> bool:
    """Whether the bytes spell the environment or its setters (the statement filters read a name
    by its spelling)."""
    return any(word in text for word in _ENVIRON)


@per_file()  # asked for every statement of a file: the file being checked
def _environ_names(tree: ast.Module, source: bytes | None) -> frozenset[str]:
    """The names and attributes a module binds to the environment or its setters, at any depth and
    through one another: `from os import environ as env`, `_ENV = os.environ`, `self.env = _ENV`,
    `_KEY = "environ"` (for a `getattr`). Empty when the file's bytes spell none of the three (`source`;
    None: unknown): the statement filters read a name by its spelling."""
    if source is not None and not _spells_environ(source):
        return frozenset()
    found: set[str] = set()
    binds: list[tuple[frozenset[str], frozenset[str]]] = []
    for stmt in statements(tree.body):
        if isinstance(stmt, ast.ImportFrom):
            found.update(a.asname or a.name for a in stmt.names if a.name in _ENVIRON_NAMES)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            binds.append((frozenset(assigned_names(stmt)), spelled_identifiers(ast.walk(stmt.value))))
    return bound_through(found, binds, _ENVIRON_NAMES)


# A seed given a number written in the code (`self.seed = 1234`, `seed = 0`, `kw["seed"] = 42`).
SEED_NAME = re.compile(r"^(?:\w+_)?seed$")
SEED_SET = re.compile(rb"seed[\"']?\]?\s*=\s*-?\d")

_ANY_MODULE: tuple[bytes, ...] = ()  # `new_to_module` of nothing: a drifted library module, not a command


def _root_of(module: str | None) -> str:
    return (module or "").split(".")[0]


def _imported(nodes: Sequence[ast.AST]) -> frozenset[str]:
    """The names `import` statements among nodes bind to one of the libraries in _FOREIGN_ROOTS."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.asname or _root_of(a.name) for a in node.names if _root_of(a.name) in _FOREIGN_ROOTS)
        elif isinstance(node, ast.ImportFrom) and not node.level and _root_of(node.module) in _FOREIGN_ROOTS:
            out.update(a.asname or a.name for a in node.names)
    return frozenset(out)


@per_file()
def _foreign_names(module: ast.Module | None) -> frozenset[str]:
    """The module-level names bound to one of the libraries in _FOREIGN_ROOTS (once per file)."""
    return _imported(module.body) if module is not None else frozenset()


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _sets_foreign(node: ast.AST, foreign: frozenset[str]) -> bool:
    """`torch.x = f`, `F.gelu = lambda ...`, `setattr(torch.Tensor, "m", f)`: an attribute of an
    imported library set (to anything but a literal), as the rule then weighs."""
    if isinstance(node, ast.Call):
        is_setattr = isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) == 3
        return is_setattr and _root(node.args[0]) in foreign
    if not isinstance(node, ast.Assign) or isinstance(node.value, ast.Constant):
        return False
    return any(isinstance(t, ast.Attribute) and _root(t) in foreign for t in node.targets)


def _names(node: cst.BaseExpression | None) -> list[str]:
    """The variable a literal key names: `"NCCL_DEBUG"`; `{"A": "1"}`'s keys."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return [value] if isinstance(value, str) else []
    if isinstance(node, cst.Dict):
        return [n for e in node.elements if isinstance(e, cst.DictElement) for n in _names(e.key)]
    return []


class EnvMutation(Rule):
    ID = "env-mutation"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "changes os.environ from library code"
    EXPLANATION = """\
Setting `os.environ[...]` or calling `os.putenv` inside an installed package changes behaviour
for the whole process and every child it starts, far from where the operator looks for
configuration (the unit file, the launcher). Patches that force `CUDA_VISIBLE_DEVICES`, NCCL or
attention-backend variables this way outlive the debugging session that needed them.

Shapes understood: `os.environ[...] = ...`, augmented assignment and `del` of an item, and the
mutating calls the rule lists (`os.putenv`, `os.unsetenv` and the `os.environ` methods),
however `os` or `environ` is imported.

High when a patch brought the first change of the environment into a module of the package
(its distribution's text of the file changes none, and it is neither a command nor a test): a
setting forced from inside a model or runner file for every process that imports it. High too
when a patch sets, by its literal name, a variable the distribution's text of the module never
names (`os.environ["NCCL_DEBUG"] = "INFO"` added to a settings module that sets variables of its
own): a debugging setting forced on, not the module's configuration. Medium when the module
already names the variable (its own configuration, patched further), when the name is not a
literal, and on `--all-files`.

The same for process-global state a patch forces when a library module is imported: the global
random generators seeded (`random.seed`, `np.random.seed`, `torch.manual_seed`,
`torch.cuda.manual_seed_all`), deterministic kernels switched on
(`torch.use_deterministic_algorithms`, `torch.backends.cudnn.deterministic = ...`) or the
process's matmul numerics changed (`torch.backends.cuda.matmul.allow_tf32 = True`, the reduced-
precision reductions, `torch.set_float32_matmul_precision("high")`) at module or
class level, in a module whose distribution's text does none of it: high, for every request of
every process that imports the module samples from a pinned generator. Quiet inside a function (a
seed the caller asks for), under an `if` (an explicit option), in a command's main block or a
test module, and for a generator of its own (`torch.Generator().manual_seed(0)`). A seed written
in the code (`torch.manual_seed(0)`, `np.random.seed(1234)`) that a patch adds inside a function
(a forward, a sampler), not under an `if`, is high too: the generator is pinned again each time it
runs. A seed the function is given (`torch.manual_seed(seed)`) stays quiet. High as well: a seed
setting given a number written in the code inside a function (`self.seed = 1234` in a request's
parameters, `seed = 0`, `kwargs["seed"] = 42`), in a module whose distribution's text never writes one.

A library's function replaced for the whole process: a patch that assigns a function of its own (a
lambda, a function the module defines, a `functools.partial`) to an attribute of torch,
numpy, transformers, triton, flash-attn, flashinfer or safetensors (`torch._scaled_mm = _mine`,
`F.gelu = lambda x: ...`, `torch.Tensor.exponential_ = ...`, `setattr(torch, "matmul", ...)`),
where the distribution's text of the module never assigns that attribute: high, every caller of
it in the process runs the patch's code. Settings (`torch._dynamo.config.cache_size_limit = 64`)
are not functions and stay quiet; without the distribution's text (`--all-files`) nothing is said.

Knowingly not: environment changed by a subprocess's `env=` (that is the child's own), or through
a helper in another module; a function replaced through a name bound to it elsewhere (`mm =
torch.matmul` is not followed), or by a function object from another module."""
    PREFILTER = (*_OWN_PREFILTER, *(root.encode() for root in sorted(_FOREIGN_ROOTS)))
    IDENTIFIERS = frozenset(
        {"environ", "putenv", "unsetenv", "seed", "manual_seed", "manual_seed_all", "set_seed"}
        | {"use_deterministic_algorithms", "deterministic", "benchmark", "allow_tf32", "set_float32_matmul_precision"}
        | {"allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction"}
    )

    @classmethod
    def mentions(cls, text: bytes) -> bool:
        """A module-level name bound to the environment, a seed or a switch (not every torch name)."""
        return any(word in text for word in _OWN_PREFILTER)

    @classmethod
    def keeps_nothing(cls, module: Spelling, drifted: bool) -> bool:
        """In a file that verifies, `keeps` asks for the environment spelled in the file's bytes."""
        return not drifted and not _spells_environ(module.source)

    @classmethod
    def keeps(cls, statement: Statement, alias: Alias) -> bool:
        """The environment, a seed or a determinism switch spelled (or a name bound to one); or an
        attribute of an imported library set to a function, or `setattr` on one."""
        if not statement.drifted and statement.module is not None:
            # A file that verifies: only the environment's changes are reported there (seeds, switches
            # and functions replaced are judged against the distribution's text of a drifted file),
            # spelled in the statement or through a name the module binds to the environment.
            bound = _environ_names(statement.module, statement.source)
            if bound and not bound.isdisjoint(statement.identifiers()):
                return True
            spelled = _spells_environ(statement.text)
            return spelled and not _ENVIRON_NAMES.isdisjoint(statement.identifiers())
        if alias:
            return True
        if any(word in statement.text for word in _OWN_PREFILTER) and not cls.IDENTIFIERS.isdisjoint(
            statement.identifiers()
        ):
            return True
        if _ATTRIBUTE_SET.search(statement.text) is None:
            return False
        nodes = statement.nodes()
        foreign = _foreign_names(statement.module) | _imported(nodes)
        return bool(foreign) and any(_sets_foreign(node, foreign) for node in nodes)

    VALID = [
        "import torch\n\ndef set_seed(seed):\n    torch.manual_seed(seed)\n",
        # The helper run by a function (a seed the caller asks for), not at import.
        Example(
            code="import torch\n\ndef _pin(seed):\n    torch.manual_seed(seed)\n\ndef init(cfg):\n    _pin(cfg.seed)\n",
            pristine="import torch\n",
        ),
        "import torch\n\nLIMIT = 64\ntorch._dynamo.config.cache_size_limit = LIMIT\n",
        "import os\nvalue = os.environ.get('HOME')\n",
        "import os\nif 'X' in os.environ:\n    pass\n",
        "env = {}\nenv['A'] = '1'\n",
        "import os\nenv = dict(os.environ)\nenv['A'] = '1'\n",
    ]
    INVALID = [
        Example(code="import os\nos.environ['VLLM_ATTENTION_BACKEND'] = 'XFORMERS'\n", line=2),
        Example(code="from os import environ as e\ne['NCCL_P2P_DISABLE'] = '1'\n", line=2),
        Example(code="import os\nos.putenv('A', '1')\n"),
        Example(code="import os\nos.environ.update(A='1')\n"),
        Example(code="import os\ndel os.environ['A']\n"),
        Example(code="import os, sys\n\ndef f():\n    os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", line=4),
        Example(code="import os\nenv = os.environ\nenv['NCCL_DEBUG'] = 'INFO'\n", line=3),
        Example(code="import os\nos.environ.setdefault('VLLM_USE_V1', '0')\n", line=2),
        Example(code="import os\nos.environ['PATH'] += ':/opt/bin'\n", line=2),
        Example(code="import os\ngetattr(os, 'putenv')('A', '1')\n", line=2),
        Example(code="__import__('os').environ.update({'A': '1'})\n", line=1),
        Example(code="from os import putenv as pe\n\ndef f():\n    pe('A', '1')\n", line=4),
        # A model file that never set a variable, patched to force one: high.
        Example(
            code="import os\n\nclass Model:\n    def __init__(self, config):\n"
            "        os.environ['NCCL_PROTO'] = 'Simple'\n        self.config = config\n",
            pristine="import os\n\nclass Model:\n    def __init__(self, config):\n        self.config = config\n",
            line=5,
            severity=Severity.HIGH,
        ),
        Example(
            code="import os\nos.environ.update({'VLLM_MLA_DISABLE': '1'})\nDEFAULT = os.environ.get('X')\n",
            pristine="import os\nDEFAULT = os.environ.get('X')\n",
            line=2,
            severity=Severity.HIGH,
        ),
        # A library function replaced by the patch's own, for the whole process.
        Example(
            code="import torch.nn.functional as F\n\ndef _gelu(x):\n    return x * 0.5\n\nF.gelu = _gelu\n",
            pristine="import torch.nn.functional as F\n\ndef _gelu(x):\n    return x * 0.5\n",
            line=6,
            message="replaces `torch.nn.functional.gelu`",
            severity=Severity.HIGH,
        ),
        Example(
            code="import torch\n\nclass M:\n    def __init__(self):\n"
            "        setattr(torch.Tensor, 'exponential_', lambda self, **kw: self.fill_(1.0))\n",
            pristine="import torch\n\nclass M:\n    def __init__(self):\n        pass\n",
            line=5,
            severity=Severity.HIGH,
        ),
        Example(
            code="class SamplingParams:\n    def __post_init__(self):\n        if self.seed is None:\n"
            "            self.seed = 1234\n",
            pristine="class SamplingParams:\n    def __post_init__(self):\n        if self.seed == -1:\n"
            "            self.seed = None\n",
            line=4,
            message="a number written in the code",
            severity=Severity.HIGH,
        ),
        # A seed written in the code, set by a patch each time a forward runs.
        Example(
            code="import torch\n\ndef forward(self, x):\n    torch.manual_seed(0)\n    return self.sample(x)\n",
            pristine="import torch\n\ndef forward(self, x):\n    return self.sample(x)\n",
            line=4,
            message="seed written in the code",
            severity=Severity.HIGH,
        ),
        # Seeds pinned through a helper of the module that the module calls when it is imported.
        Example(
            code="import torch\n\ndef _pin(seed=1234):\n    torch.manual_seed(seed)\n\n_pin()\n",
            pristine="import torch\n",
            line=6,
            message="when the module is imported",
            severity=Severity.HIGH,
        ),
        # A module that sets variables of its own already: patched further, a look, not an alarm.
        Example(
            code="import os\nos.environ.setdefault('A', '1')\nos.environ['A'] = '2'\n",
            pristine="import os\nos.environ.setdefault('A', '1')\n",
            line=3,
            severity=Severity.MEDIUM,
        ),
        Example(
            code="import os\n\ndef setdefault(name, value):\n    os.environ.setdefault(name, value)\n"
            "    os.environ[name + '_SET'] = '1'\n",
            pristine="import os\n\ndef setdefault(name, value):\n    os.environ.setdefault(name, value)\n",
            line=5,
            severity=Severity.MEDIUM,
        ),
        # ... but a variable it never named, forced on by a patch: high.
        Example(
            code="import os\nos.environ.setdefault('A', '1')\n\ndef port():\n"
            "    os.environ['NCCL_DEBUG'] = 'INFO'\n    return 1\n",
            pristine="import os\nos.environ.setdefault('A', '1')\n\ndef port():\n    return 1\n",
            line=5,
            severity=Severity.HIGH,
        ),
        Example(
            code="import os\nos.environ.setdefault('A', '1')\nos.environ.setdefault('TORCH_NCCL_BLOCKING_WAIT', '1')\n",
            pristine="import os\nos.environ.setdefault('A', '1')\n",
            line=3,
            severity=Severity.HIGH,
        ),
        # Process-wide matmul numerics switched at import by a patch: every model in the process computes in TF32.
        Example(
            code="import torch\n\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
            "torch.set_float32_matmul_precision('high')\n",
            pristine="import torch\n",
            line=3,
            message="when the module is imported",
            severity=Severity.HIGH,
        ),
    ]

    def _changes(self, node: cst.CSTNode, message: str, names: list[str] | None = None) -> None:
        if self.new_to_module(MUTATES) and not self.in_main_guard:
            self.report(node, f"{message}, in a module that never did (added by a patch)", severity=Severity.HIGH)
            return
        pristine = self.context.pristine
        if names and self.new_to_module(_ANY_MODULE) and not self.in_main_guard and pristine is not None:
            strange = [n for n in names if n not in pristine]
            if strange:
                message = f"{message}: `{strange[0]}`, a variable the module never named (added by a patch)"
                self.report(node, message, severity=Severity.HIGH)
                return
        self.report(node, message)

    def _forced_at_import(self, node: cst.CSTNode, what: str, fixed: bool = False) -> None:
        """Process-global state set when the module is imported, by a patch that brought the first
        such line into a library module: HIGH. So is a seed written in the code (`fixed`:
        `torch.manual_seed(0)`) that a function the patch changed sets each time it runs. Inside a
        function with a seed it is given (one the caller asks for), under an `if` (an option), in a
        command or a test, or already in the module: not this rule's."""
        if self.in_main_guard or any(isinstance(s, cst.If) for s in self.context.stmts):
            return
        if self.context.functions:
            if fixed and self.new_to_module(SEEDS):
                self.report(
                    node,
                    f"{what} with a seed written in the code, each time the function runs, in a module that "
                    "never did (added by a patch): every request after it draws the same numbers",
                    severity=Severity.HIGH,
                )
            return
        if any(isinstance(s, cst.Try) for s in self.context.stmts):
            return  # `try: import numpy; numpy.random.seed(0)`: at import, kept where it can be
        if self.new_to_module(SEEDS):
            self.report(
                node,
                f"{what} when the module is imported, in a module that never did (added by a patch): "
                "every process that imports it runs with it",
                severity=Severity.HIGH,
            )

    def _is_environ_item(self, target: cst.BaseExpression) -> bool:
        return isinstance(target, cst.Subscript) and self.resolves_to(target.value, "os.environ") is not None

    def _defined_functions(self) -> frozenset[str]:
        """The names of every function the module defines, at any depth (once per file)."""
        found = getattr(self, "_defined", None)
        if found is None:
            analysis = self.context.analysis
            tree = analysis.tree if analysis is not None else None
            defs = ast.FunctionDef | ast.AsyncFunctionDef
            found = frozenset(n.name for n in statements(tree.body) if isinstance(n, defs)) if tree else frozenset()
            self._defined = found
        return found

    def _function_like(self, value: cst.BaseExpression) -> bool:
        """A lambda, a function the module defines, or a `functools.partial` (of anything: it is a
        function the patch made)."""
        if isinstance(value, cst.Lambda):
            return True
        if isinstance(value, cst.Name):
            return value.value in self._defined_functions()
        return isinstance(value, cst.Call) and self.resolves_to(value, "functools.partial") is not None

    def _replaced(self, node: cst.CSTNode, owner: cst.BaseExpression, attr: str, value: cst.BaseExpression) -> None:
        """A library's function replaced by the patch's own, for every caller in the process: high
        when the patch brought the first assignment of that attribute into the module."""
        if not self._function_like(value) or not self.new_to_module(_ANY_MODULE):
            return
        roots = sorted(q for q in self.qualified_names(owner) if q.split(".", 1)[0] in _FOREIGN_ROOTS)
        pristine = self.context.pristine or ""
        if not roots or re.search(rf"\b{re.escape(attr)}\b[\"']?\s*[,=]", pristine):
            return
        self.report(
            node,
            f"replaces `{roots[0]}.{attr}` with a function of its own for the whole process (added by a "
            "patch): every caller of it runs the patch's code",
            severity=Severity.HIGH,
        )

    def _seed_set(self, node: cst.Assign, target: cst.BaseExpression) -> None:
        """A request's or a generator's seed given a number written in the code, inside a function,
        by a patch (the module's own text never does): every request it covers draws the same numbers."""
        if not (self.context.functions and isinstance(node.value, cst.Integer)) or self.in_main_guard:
            return
        if isinstance(target, cst.Subscript):
            key = target.slice[0].slice if len(target.slice) == 1 else None
            value = key.value if isinstance(key, cst.Index) else None
            name = value.evaluated_value if isinstance(value, cst.SimpleString) else None
        else:
            name = target.attr.value if isinstance(target, cst.Attribute) else getattr(target, "value", None)
        if isinstance(name, str) and SEED_NAME.match(name) and self.new_to_module(SEED_SET):
            self.report(
                node,
                f"sets `{name}` to {node.value.value}, a number written in the code (added by a patch): "
                "every request it covers draws the same numbers",
                severity=Severity.HIGH,
            )

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._seed_set(node, target.target)
            if isinstance(target.target, cst.Attribute):
                self._replaced(node, target.target.value, target.target.attr.value, node.value)
            flag = self.resolves_to(target.target, GLOBAL_FLAGS)
            if flag is not None:
                self._forced_at_import(node, f"sets `{flag}`")
            if self._is_environ_item(target.target):
                item = target.target
                key = item.slice[0].slice if isinstance(item, cst.Subscript) and item.slice else None
                names = _names(key.value) if isinstance(key, cst.Index) else []
                self._changes(node, "sets an environment variable through os.environ", names)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._is_environ_item(node.target):
            self._changes(node, "changes an environment variable through os.environ")

    def visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, cst.Tuple) else None
        items = [e.value for e in targets] if targets else [node.target]
        if any(self._is_environ_item(t) for t in items):
            self._changes(node, "deletes an environment variable from os.environ")

    def visit_Call(self, node: cst.Call) -> None:
        seeder = self.resolves_to(node, SEEDERS)
        if seeder is not None:
            fixed = bool(node.args) and all(isinstance(a.value, cst.Integer) for a in node.args)
            self._forced_at_import(node, f"{seeder}() sets process-global random, determinism or numerics state", fixed)
            return
        if not self.context.functions:
            # `_pin()` at import, where the module's `_pin` seeds: the call is the import-time setting.
            for seeder, _inner, helper in self.through_helper(node, SEEDERS):
                what = f"{helper.name}() runs {seeder}(), setting process-global random or determinism state,"
                self._forced_at_import(node, what)
                return
        if self.resolves_to(node, "builtins.setattr") and len(node.args) == 3:
            attr = node.args[1].value
            if isinstance(attr, cst.SimpleString) and isinstance(attr.evaluated_value, str):
                self._replaced(node, node.args[0].value, attr.evaluated_value, node.args[2].value)
        name = self.resolves_to(node, MUTATORS)
        if name is not None:
            names = [n for a in node.args[:1] for n in _names(a.value)]
            names += [k.keyword.value for k in node.args if k.keyword is not None]  # `update(A="1")`
            self._changes(node, f"{name}() changes the process environment", names)
