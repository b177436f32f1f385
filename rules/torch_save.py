"""torch-save: tensors or objects serialised to disk from library code."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity, call_arg, literal_string

SAVERS = {
    "torch.save": 1,
    "numpy.save": 0,
    "numpy.savez": 0,
    "numpy.savez_compressed": 0,
    "numpy.savetxt": 0,
    "pickle.dump": 1,
    "cloudpickle.dump": 1,
    "joblib.dump": 1,
    "safetensors.torch.save_file": 1,
}


PATH_BUILDERS = ("pathlib.Path", "pathlib.PurePath", "os.path.join")


class TorchSave(Rule):
    ID = "torch-save"
    SEVERITY = Severity.HIGH
    MESSAGE = "writes tensors or objects to disk (debug dump left in a patch?)"
    EXPLANATION = """\
A `torch.save`, `np.save` or `pickle.dump` call in installed library code is almost always a
debug dump added during bring-up: it fills the disk, slows every step, and when it sits in a
branch it only fires on rare inputs. Calls are matched by what they resolve to, so
`import torch as t; t.save(...)` and `from torch import save as s; s(...)` are both caught.
It is high when the destination is a literal path (`"/tmp/x.pt"`, an f-string, `Path("...")`)
or when the call sits in a forward function; elsewhere (a save utility that takes its path from
the caller) it is medium."""
    MODULES = rb"(?:torch|numpy|pickle|cloudpickle|joblib|safetensors\.torch)"
    FUNCS = rb"(?:save|savez|savez_compressed|savetxt|save_file|dump)"
    PREFILTER = (re.compile(rb"from[ \t]+" + MODULES + rb"[ \t]+import[ \t]*(?:\([^)]*|[^\n]*)\b" + FUNCS + rb"\b"),)
    MODULE_ALIAS = re.compile(rb"import[ \t]+(?:safetensors|" + MODULES + rb")(?:[ \t]+as[ \t]+(\w+))?")
    CALL = re.compile(rb"\." + FUNCS + rb"[ \t]*\(")
    HEAD = re.compile(rb"(\w+)(?:\.\w+)*$")

    @classmethod
    def prefilter(cls, data: bytes) -> bool:
        # A saver is reached through `from torch import save` or through a module alias.
        if super().prefilter(data):
            return True
        aliases = set()
        for match in cls.MODULE_ALIAS.finditer(data):
            aliases.add(match.group(1) or match.group(0).split()[-1].split(b".")[0])
        if not aliases:
            return False
        for match in cls.CALL.finditer(data):
            head = cls.HEAD.search(data, max(0, match.start() - 200), match.start())
            if head is not None and head.group(1) in aliases:
                return True
        return False

    VALID = [
        "import torch\nstate = model.state_dict()\n",
        "import json\njson.dump(cfg, fh)\n",
        "class Saver:\n    def save(self, x):\n        return x\n\nSaver().save(1)\n",
        "import torch\n\ndef save_checkpoint(obj, path):\n"
        "    torch.save(obj, path)  # patchaudit: ignore[torch-save] a public API\n",
    ]
    INVALID = [
        Example(code="import torch\ntorch.save(hidden, '/tmp/h.pt')\n", line=2, severity=Severity.HIGH),
        Example(code="import torch as t\nt.save(x, f'/tmp/dump_{step}.pt')\n", severity=Severity.HIGH),
        Example(
            code="from torch import save as s\n\ndef forward(self, x):\n    s(x, path)\n    return x\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(code="import numpy as np\nnp.save('/tmp/logits.npy', logits)\n", severity=Severity.HIGH),
        Example(code="import safetensors\nsafetensors.torch.save_file(t, '/tmp/t.st')\n", severity=Severity.HIGH),
        Example(
            code="import pickle\n\ndef dump_state(obj, fh):\n    pickle.dump(obj, fh)\n",
            severity=Severity.MEDIUM,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        name = self.resolves_to(node, SAVERS)
        if name is None:
            return
        target = call_arg(node, SAVERS[name], "f" if name == "torch.save" else "file")
        literal = target is not None and self._is_literal_path(target)
        severity = Severity.HIGH if literal or self.in_forward else Severity.MEDIUM
        where = "a literal path" if literal else "disk"
        self.report(node, f"{name}() writes to {where} (debug dump left in a patch?)", severity=severity)

    def _is_literal_path(self, node: cst.BaseExpression) -> bool:
        if literal_string(node) is not None:
            return True
        if isinstance(node, cst.Call) and node.args and self.resolves_to(node, PATH_BUILDERS):
            return literal_string(node.args[0].value) is not None
        return False
