"""fixed-path-load: tensors or objects read from a fixed path into library code."""

import ast
import re
from collections.abc import Sequence

import libcst as cst

from patchaudit.rule import Example, Rule, Severity, call_arg

# Readers of tensors, arrays and pickled objects: the argument that names the file.
LOADERS = {
    "torch.load": (0, "f"),
    "torch.jit.load": (0, "f"),
    "numpy.load": (0, "file"),
    "numpy.fromfile": (0, "file"),
    "safetensors.torch.load_file": (0, "filename"),
    "safetensors.numpy.load_file": (0, "filename"),
    "safetensors.safe_open": (0, "filename"),
    "joblib.load": (0, "filename"),
}
# Readers of an open file object: `pickle.load(open("/x/fix.pkl", "rb"))`.
FILE_READERS = ("pickle.load", "dill.load", "cloudpickle.load")
OPENERS = ("builtins.open", "io.open")
_READER_NAMES = frozenset({"load", "fromfile", "load_file", "safe_open"})
# Places a library reads facts about the machine from, not values of its own.
SYSTEM = ("/proc/", "/sys/", "/dev/", "/etc/")


class FixedPathLoad(Rule):
    ID = "fixed-path-load"
    SEVERITY = Severity.HIGH
    MESSAGE = "reads tensors or objects from a fixed path"
    EXPLANATION = """\
`torch.load("/home/u/fix/scales.pt")`, `np.load("/scratch/ovr.npy")`, `safe_open("/data/w.safetensors")`
or `pickle.load(open("/tmp/state.pkl", "rb"))` in an installed package reads values from one
machine's disk: a weight, scale or table a hand patch swapped in during bring-up. Library code
gets its checkpoints from its caller and its settings from its configuration; a file at a path
written into the code decides the model's numbers on the host that has it, and nothing says so
anywhere else. High where a patch added it (a drifted file); medium in a file that verifies
(`--all-files`: upstream's own fixed paths are for an author to judge).

Shapes understood: `torch.load`, `torch.jit.load`, `numpy.load`, `numpy.fromfile`, safetensors'
`load_file` and `safe_open`, `joblib.load`, and `pickle`/`dill`/`cloudpickle.load` of an `open(...)`
of a fixed path; a path is fixed as for file-write (a literal start, module and class constants,
an instance attribute bound once, a helper whose every `return` is one, `os.environ.get` falling
back to a temp place or, for a variable the patch made up, to any absolute path).

Knowingly not: relative paths (package data beside the module), paths under `~` (each user's own
home) or a `.cache` directory (a library's cache), `/proc`, `/sys`, `/dev` and `/etc` (facts about
the machine), a path from a parameter, the environment or a setting (the operator's),
and files read as text (`open(p).read()`, `json.load`), which configuration often is."""
    PREFILTER = re.compile(rb"\b(?:load|fromfile|load_file|safe_open)[\s\\]*\(")
    IDENTIFIERS = frozenset({"load", "fromfile", "load_file", "safe_open"})

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        """A call of a reader by its last name, given something that may be a fixed path."""
        for node in nodes:
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _READER_NAMES and not isinstance(node.args[0], ast.Constant | ast.Starred) or (
                name in _READER_NAMES and isinstance(node.args[0].value, str) and node.args[0].value.startswith("/")  # type: ignore[attr-defined]
            ):
                return True
        return False

    VALID = [
        "import torch\n\ndef load(path):\n    return torch.load(path, map_location='cpu')\n",
        "import numpy as np\n\ndef table():\n    return np.load('tables/lut.npy')\n",
        "import numpy as np\n\ndef cpus():\n    return np.fromfile('/proc/self/stat', dtype=np.uint8)\n",
        "import os\nimport torch\n\ndef load():\n    return torch.load(os.environ['CKPT'])\n",
        "import torch\n\nclass M:\n    def load_weights(self, cfg):\n        return torch.load(cfg.checkpoint)\n",
        "import os\nimport torch\n\nCACHE = os.path.expanduser('~/.cache/lib')\n\ndef cached(n):\n"
        "    return torch.load(os.path.join(CACHE, n))\n",
    ]
    INVALID = [
        Example(
            code="""
            import os
            import torch

            class Fp8Method:
                def process_weights_after_loading(self, layer):
                    _ovr = "/home/ubuntu/fix/fp8_scale_overrides.pt"
                    if os.path.exists(_ovr):
                        sd = torch.load(_ovr, map_location="cpu")
                        layer.weight_scale.data.copy_(sd[layer.prefix])
            """,
            pristine="""
            import os
            import torch

            class Fp8Method:
                def process_weights_after_loading(self, layer):
                    pass
            """,
            line=8,
            message="/home/ubuntu/fix",
        ),
        Example(code="import numpy as np\n\nLUT = np.load('/scratch/lut.npy')\n", line=3),
        Example(
            code="from safetensors import safe_open\n\ndef f():\n    return safe_open('/data/w.safetensors', 'pt')\n",
            line=4,
        ),
        Example(code="import pickle\n\ndef f():\n    return pickle.load(open('/tmp/state.pkl', 'rb'))\n", line=4),
        Example(
            code="import torch\n\n_FIX = '/mnt/k2/fix'\n\ndef f(w):\n    w.copy_(torch.load(f'{_FIX}/w.pt'))\n", line=6
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        loader = self.resolves_to(node, tuple(LOADERS))
        if loader is not None:
            target = call_arg(node, *LOADERS[loader])
        else:
            loader = self.resolves_to(node, FILE_READERS)
            if loader is None or not node.args:
                return
            opened = node.args[0].value
            if not (isinstance(opened, cst.Call) and self.resolves_to(opened, OPENERS) and opened.args):
                return
            target = opened.args[0].value
        if target is None:
            return
        fixed = self.fixed_path(target) or self.env_temp_default(target)
        if fixed is None or not fixed.startswith("/") or fixed.startswith(SYSTEM) or "/.cache/" in fixed:
            return  # relative (package data), `~` (each user's own), the machine's facts, a cache
        severity = Severity.HIGH if self.context.drifted else Severity.MEDIUM
        message = f"{loader}() reads from the fixed path {fixed!r}: a file on one machine decides the values"
        self.report(node, message + " (a weight or table swapped in by a patch?)", severity=severity)
