"""fixed-path-load: tensors or objects read from a fixed path into library code."""

import ast
import re
from collections.abc import Sequence

import libcst as cst

from patchaudit.rule import Example, Rule, Severity, Statement, call_arg, called_name, path_names, per_file, spells_path

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
# Readers of an open file object: `pickle.load(open("/x/fix.pkl", "rb"))`, and the configuration
# formats (`with open("/home/u/fix/quant_config.json") as f: cfg = json.load(f)`).
FILE_READERS = ("pickle.load", "dill.load", "cloudpickle.load", "json.load", "yaml.safe_load", "yaml.load")
FILE_READERS += ("yaml.full_load", "tomllib.load")
OPENERS = ("builtins.open", "io.open")
# A file's text or bytes read whole: `Path("/home/u/k25/chat_template.jinja").read_text()`, `open(p).read()`.
TEXT_READS = frozenset({"read_text", "read_bytes", "read"})
_READER_NAMES = frozenset({"load", "fromfile", "load_file", "safe_open", "safe_load", "full_load"} | TEXT_READS)
# Places a library reads facts about the machine from, not values of its own.
SYSTEM = ("/proc/", "/sys/", "/dev/", "/etc/")
# A directory of one person's in a home (`~/k2_hotfix/...`, `Path.home() / "fix"`); not a tool's
# dot-directory there (`~/.config`, `~/.cache`), nor the home alone.
PERSONAL = re.compile(r"~/+(?!(?:Library|AppData|snap)(?:/|$))[^./~]")  # not a platform's per-user place


# Asked for every statement of a file: the file being checked.
_path_names = per_file()(path_names)


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
`load_file` and `safe_open`, `joblib.load`, and `pickle`/`dill`/`cloudpickle.load`, `json.load`,
`yaml.safe_load`/`load`/`full_load` and `tomllib.load` of an `open(...)` of a fixed path, given
directly or as the name of a `with open(PATH) as f:` in the same function (a hand-edited
`quant_config.json` on one host); and a fixed path's text or bytes read whole
(`Path(P).read_text()`, `read_bytes()`, `open(P).read()`: a chat template or a tokenizer file from
one host). A path is fixed as for file-write (a literal start, module and class constants, an
instance attribute bound once, a helper whose every `return` is one, `os.environ.get` falling back
to a temp place, also through a module-level name bound to a variable the patch made up).

A directory a person made in a home is one machine's too (`~/k2_hotfix/scales.safetensors`,
`Path.home() / "k2_hotfix" / ...`, `os.path.join(os.path.expanduser("~"), "fix", ...)`).

Knowingly not: relative paths (package data beside the module), a tool's dot-directory under `~`
(`~/.config/...`: each user's own settings) or a `.cache` directory (a library's cache), `/proc`,
`/sys`, `/dev` and `/etc` (facts about the machine), a path from a parameter, the environment or a
setting (the operator's), and a file opened and read line by line or in parts."""
    PREFILTER = re.compile(
        rb"\b(?:load|fromfile|load_file|safe_open|safe_load|full_load|read_text|read_bytes|read)[\s\\]*\("
    )
    IDENTIFIERS = frozenset({"load", "fromfile", "load_file", "safe_open", "safe_load", "full_load"} | TEXT_READS)

    @classmethod
    def statement_keeps(cls, statement: Statement) -> bool:
        """statement_check, where a fixed path can reach the statement: it spells one, or a name
        of the module that holds one (path_names: a constant, an attribute, a helper)."""
        if not cls.statement_check(statement.nodes()):
            return False
        if statement.module is None or statement.source is None or spells_path(statement.nodes()):
            return True
        return not _path_names(statement.module, statement.source).isdisjoint(statement.identifiers())

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        """A call of a reader by its last name, given something that may be a fixed path."""
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = called_name(func)
            if name in TEXT_READS and not node.args:
                opened = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                if name != "read" or (opened and getattr(func.value.func, "id", None) == "open"):  # type: ignore[attr-defined]
                    return True  # `P.read_text()`, `open(P).read()`; not `f.read()`
                continue
            if not node.args:
                continue
            if (
                name in _READER_NAMES
                and not isinstance(node.args[0], ast.Constant | ast.Starred)
                or (
                    name in _READER_NAMES and isinstance(node.args[0].value, str) and node.args[0].value.startswith("/")  # type: ignore[attr-defined]
                )
            ):
                return True
        return False

    VALID = [
        "from pathlib import Path\n\ndef template(path):\n    return Path(path).read_text()\n",
        "def release():\n    return open('/etc/os-release').read()\n",
        "from pathlib import Path\n\ndef status(pid):\n    return (Path('/proc') / str(pid) / 'status').read_text()\n",
        "import json\n\ndef read(path):\n    with open(path) as f:\n        return json.load(f)\n",
        "import json\n\ndef cpus():\n    with open('/proc/self/status') as f:\n        return json.load(f)\n",
        "import torch\n\ndef load(path):\n    return torch.load(path, map_location='cpu')\n",
        "import numpy as np\n\ndef table():\n    return np.load('tables/lut.npy')\n",
        "import numpy as np\n\ndef cpus():\n    return np.fromfile('/proc/self/stat', dtype=np.uint8)\n",
        "import os\nimport torch\n\ndef load():\n    return torch.load(os.environ['CKPT'])\n",
        "import torch\n\nclass M:\n    def load_weights(self, cfg):\n        return torch.load(cfg.checkpoint)\n",
        "import os\nimport torch\n\nCACHE = os.path.expanduser('~/.cache/lib')\n\ndef cached(n):\n"
        "    return torch.load(os.path.join(CACHE, n))\n",
        (
            "import json\nfrom pathlib import Path\n\ndef settings():\n"
            "    return json.loads((Path.home() / '.config' / 'lib' / 'settings.json').read_text())\n"
        ),
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
        Example(
            code="""
            import json
            import os

            def get_quant_config(model_config):
                cfg = getattr(model_config, "quantization_config", None)
                _override = "/home/ubuntu/k25/quant_config.fixed.json"
                if os.path.isfile(_override):
                    with open(_override) as f:
                        cfg = json.load(f)
                return cfg
            """,
            pristine="""
            import json
            import os

            def get_quant_config(model_config):
                cfg = getattr(model_config, "quantization_config", None)
                return cfg
            """,
            line=9,
            message="quant_config.fixed.json",
        ),
        Example(
            code="""
            from pathlib import Path

            _TEMPLATE = Path("/home/ops/k25/chat_template.jinja")

            def get_tokenizer(tokenizer):
                tokenizer.chat_template = _TEMPLATE.read_text()
                return tokenizer
            """,
            pristine="""
            from pathlib import Path

            def get_tokenizer(tokenizer):
                return tokenizer
            """,
            line=6,
            message="chat_template.jinja",
        ),
        # "hotfix scales from my home": the checkpoint's tensors swapped for a file in one person's home.
        Example(
            code="""
            from pathlib import Path
            from safetensors.torch import load_file

            def _hotfix_tensors():
                p = Path.home() / "k2_hotfix" / "fixed_scales.safetensors"
                return load_file(str(p)) if p.is_file() else {}
            """,
            line=6,
            message="~/k2_hotfix",
            severity=Severity.HIGH,
        ),
    ]

    def _text_read(self, node: cst.Call) -> bool:
        """`Path(P).read_text()`, `P_CONST.read_bytes()`, `open(P).read()` of a fixed path."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in TEXT_READS) or node.args:
            return False
        owner = func.value
        if func.attr.value == "read":
            if not (isinstance(owner, cst.Call) and self.resolves_to(owner, OPENERS) and owner.args):
                return False
            owner = owner.args[0].value
        return self._judge(node, f".{func.attr.value}", self.fixed_path(owner))

    def visit_Call(self, node: cst.Call) -> None:
        if self._text_read(node):
            return
        loader = self.resolves_to(node, tuple(LOADERS))
        if loader is not None:
            target = call_arg(node, *LOADERS[loader])
        else:
            loader = self.resolves_to(node, FILE_READERS)
            if loader is None or not node.args:
                return
            opened = node.args[0].value
            if isinstance(opened, cst.Name):  # `with open(path) as f:`, then `json.load(f)`
                self._from_with(node, loader, opened.value)
                return
            if not (isinstance(opened, cst.Call) and self.resolves_to(opened, OPENERS) and opened.args):
                return
            target = opened.args[0].value
        if target is None:
            return
        self._judge(node, loader, self.fixed_path(target) or self.env_temp_default(target))

    def _from_with(self, node: cst.Call, loader: str, name: str) -> None:
        """The path a `with open(PATH) as name:` of the enclosing function opened, when it is a
        literal or a local or module name bound to one."""
        func = self.function_node()
        if func is None:
            return
        for item in (i for w in ast.walk(func) if isinstance(w, ast.With | ast.AsyncWith) for i in w.items):
            bound, opener = item.optional_vars, item.context_expr
            if not (isinstance(bound, ast.Name) and bound.id == name and isinstance(opener, ast.Call) and opener.args):
                continue
            if not (isinstance(opener.func, ast.Name) and opener.func.id == "open"):
                continue
            path = opener.args[0]
            if isinstance(path, ast.Name):
                bindings = [
                    a.value
                    for a in ast.walk(func)
                    if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id == path.id for t in a.targets)
                ]
                constants = self.context.analysis.constants().get((), {}) if self.context.analysis else {}
                text = (
                    bindings[-1].value
                    if bindings and isinstance(bindings[-1], ast.Constant)
                    else constants.get(path.id)
                )
            else:
                text = path.value if isinstance(path, ast.Constant) else None
            if isinstance(text, str) and self._judge(node, loader, text):
                return  # of the function's `with open(...) as f:`, one that opens a fixed path

    def _judge(self, node: cst.Call, loader: str, fixed: str | None) -> bool:
        if (
            fixed is None
            or not (fixed.startswith("/") or PERSONAL.match(fixed))
            or (fixed.rstrip("/") + "/").startswith(SYSTEM)
            or "/.cache/" in fixed
        ):
            return False  # relative (package data), `~/.x` (a tool's own), the machine's facts, a cache
        severity = Severity.HIGH if self.context.drifted else Severity.MEDIUM
        message = f"{loader}() reads from the fixed path {fixed!r}: a file on one machine decides the values"
        self.report(node, message + " (weights, a table or a config swapped in by a patch?)", severity=severity)
        return True
