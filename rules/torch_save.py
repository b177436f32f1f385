"""torch-save: tensors or objects serialised to disk from library code."""

import libcst as cst

from patchaudit.rule import Example, Rule, Severity, call_arg

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
    "safetensors.numpy.save_file": 1,
}
IN_MEMORY = ("io.BytesIO", "io.BytesIO()", "io.StringIO", "io.StringIO()")


class TorchSave(Rule):
    ID = "torch-save"
    SEVERITY = Severity.HIGH
    MESSAGE = "writes tensors or objects to disk (debug dump left in a patch?)"
    EXPLANATION = """\
A `torch.save`, `np.save` or `pickle.dump` call in installed library code is almost always a
debug dump added during bring-up: it fills the disk, slows every step, and when it sits in a
branch it only fires on rare inputs. Calls are matched by what they resolve to, however
imported or aliased (`import torch as t`, `from torch.serialization import save`,
`__import__("torch")`, `getattr(torch, "save")`, `save = torch.save`). It is high when the
destination is a fixed path (a literal, `"/tmp/x_" + s`, `"/tmp/%d" % i`, `.format`, an
f-string, `os.path.join("/tmp", ...)`, `Path("/tmp") / ...`, also through a local name) or when
the call sits in a forward function; medium elsewhere. Not flagged: a save into memory
(`io.BytesIO`), and a save function that writes where its caller says (the path is a
parameter)."""
    PREFILTER = (b"save", b"dump")
    REQUIRES = (b"torch", b"numpy", b"pickle", b"joblib", b"safetensors")
    IDENTIFIERS = frozenset({"save", "savez", "savez_compressed", "savetxt", "dump", "save_file"})

    VALID = [
        "import torch\nstate = model.state_dict()\n",
        "import json\njson.dump(cfg, fh)\n",
        "class Saver:\n    def save(self, x):\n        return x\n\nSaver().save(1)\n",
        """
        import io
        import torch

        def serialize(t):
            buf = io.BytesIO()
            torch.save(t, buf)
            return buf.getvalue()
        """,
        """
        import torch

        def save_checkpoint(model, path):
            torch.save(model.state_dict(), path)
        """,
        """
        import pickle

        def dump_state(obj, fh):
            pickle.dump(obj, fh)
        """,
        "import torch\n\ndef to_bytes(t):\n    torch.save(t, __import__('io').BytesIO())\n",
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
        Example(code="import os, torch\ntorch.save(x, '/tmp/x.pt')\n", line=2, severity=Severity.HIGH),
        Example(
            code="import torch.serialization as ser\nser.save(x, '/tmp/x.pt')\n",
            line=2,
            message="torch.save",
            severity=Severity.HIGH,
        ),
        Example(
            code="from torch.serialization import save\n\ndef f(x, i):\n    save(x, '/tmp/a_%d.pt' % i)\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(code="__import__('torch').save(x, '/tmp/x.pt')\n", line=1, severity=Severity.HIGH),
        Example(code="import torch\ngetattr(torch, 'save')(x, '/tmp/x.pt')\n", line=2, severity=Severity.HIGH),
        Example(
            code="""
            import torch

            save = torch.save

            def dump(x, step):
                save(x, "/tmp/step_" + str(step) + ".pt")
            """,
            line=6,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os
            import torch

            def capture(self, x):
                path = os.path.join("/tmp/dumps", f"x_{self.step}.pt")
                torch.save(x, path)
            """,
            line=6,
            message="/tmp/dumps",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            from pathlib import Path
            import torch

            def capture(x):
                torch.save(x, Path("/tmp") / "x.pt")
            """,
            line=5,
            severity=Severity.HIGH,
        ),
        Example(
            code="import torch\n\ndef f(x, i):\n    torch.save(x, '/tmp/x_{}.pt'.format(i))\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(code="import pickle\n\ndef f(obj):\n    pickle.dump(obj, fh)\n", severity=Severity.MEDIUM),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        name = self.resolves_to(node, SAVERS)
        if name is None:
            return
        target = call_arg(node, SAVERS[name], "f" if name == "torch.save" else "file")
        if target is not None and self.resolves_to(target, IN_MEMORY):
            return  # serialised into memory, not to disk
        fixed = self.fixed_path(target) if target is not None else None
        if fixed is not None:
            self.report(node, f"{name}() writes to the fixed path {fixed!r} (debug dump left in a patch?)")
            return
        if self.in_forward:
            self.report(node, f"{name}() in a forward function writes on every step")
            return
        if target is not None and self.is_parameter(target):
            return  # a save function: its caller chooses the destination
        self.report(node, f"{name}() writes to disk (debug dump left in a patch?)", severity=Severity.MEDIUM)
