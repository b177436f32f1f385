"""env-mutation: library code that changes the process environment."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity

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
)
GLOBAL_FLAGS = ("torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark")
SEEDS = re.compile(rb"\bseed\s*\(|manual_seed|use_deterministic_algorithms|cudnn\.(?:deterministic|benchmark)\s*=")

_ANY_MODULE: tuple[bytes, ...] = ()  # `new_to_module` of nothing: a drifted library module, not a command


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
`torch.cuda.manual_seed_all`) or deterministic kernels switched on
(`torch.use_deterministic_algorithms`, `torch.backends.cudnn.deterministic = ...`) at module or
class level, in a module whose distribution's text does none of it: high, for every request of
every process that imports the module samples from a pinned generator. Quiet inside a function (a
seed the caller asks for), under an `if` (an explicit option), in a command's main block or a
test module, and for a generator of its own (`torch.Generator().manual_seed(0)`).

Knowingly not: environment changed by a subprocess's `env=` (that is the child's own), or through
a helper in another module."""
    PREFILTER = (b"environ", b"putenv", b"unsetenv", b"seed", b"deterministic", b"cudnn")
    IDENTIFIERS = frozenset(
        {"environ", "putenv", "unsetenv", "seed", "manual_seed", "manual_seed_all", "set_seed"}
        | {"use_deterministic_algorithms", "deterministic", "benchmark"}
    )

    VALID = [
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

    def _forced_at_import(self, node: cst.CSTNode, what: str) -> None:
        """Process-global state set when the module is imported, by a patch that brought the first
        such line into a library module: HIGH. Inside a function (a seed the caller asks for), under
        an `if` (an option), in a command or a test, or already in the module: not this rule's."""
        if self.context.functions or self.in_main_guard:
            return
        if any(isinstance(s, (cst.If, cst.Try)) for s in self.context.stmts):
            return
        if self.new_to_module(SEEDS):
            self.report(
                node,
                f"{what} when the module is imported, in a module that never did (added by a patch): "
                "every process that imports it runs with it",
                severity=Severity.HIGH,
            )

    def _is_environ_item(self, target: cst.BaseExpression) -> bool:
        return isinstance(target, cst.Subscript) and self.resolves_to(target.value, "os.environ") is not None

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
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
            self._forced_at_import(node, f"{seeder}() sets process-global random or determinism state")
            return
        name = self.resolves_to(node, MUTATORS)
        if name is not None:
            names = [n for a in node.args[:1] for n in _names(a.value)]
            names += [k.keyword.value for k in node.args if k.keyword is not None]  # `update(A="1")`
            self._changes(node, f"{name}() changes the process environment", names)
