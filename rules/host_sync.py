"""host-sync: a device-to-host synchronisation inside a forward function."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity

SYNC_METHODS = {"item", "cpu", "tolist"}
SYNC_CALLS = ("torch.cuda.synchronize", "torch.synchronize", "torch.cuda.current_stream")


class HostSync(Rule):
    ID = "host-sync"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "host-device synchronisation in a forward function"
    EXPLANATION = """\
`.item()`, `.cpu()`, `.tolist()` and `torch.cuda.synchronize()` wait for the GPU to finish
and copy to the host. In a model's `forward` they stall the pipeline on every step and break
CUDA graph capture. Patches add them to print or inspect a value; they are flagged only inside
forward functions (`forward`, `_forward`, `forward_*`, `__call__`).

Shapes understood: `.item()`, `.cpu()`, `.tolist()`, `torch.cuda.synchronize()` however imported
or aliased, wrapped in `functools.partial`, and a helper of the same module that syncs, called
from a forward function.

Knowingly not: syncs hidden in tensor printing (`print(x)` of a CUDA tensor), `.numpy()`,
`bool(tensor)`, helpers in other modules."""
    PREFILTER = (re.compile(rb"\.[\s\\]*(?:item|cpu|tolist)\b"), b"synchronize")
    REQUIRES = re.compile(rb"\bdef[\s\\]+(?:_*forward|__call__)")
    REQUIRES_IN_STATEMENT = True  # a finding sits inside the forward function's own statement
    IDENTIFIERS = frozenset({"item", "cpu", "tolist", "synchronize"})

    VALID = [
        "def load_weights(self, w):\n    return w.cpu()\n",
        "def forward(self, x):\n    return self.proj(x)\n",
        "def forward(self, x):\n    return x.to(device)\n",
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
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.in_forward:
            return
        func = self.callee(node)
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS and not node.args:
            self.report(node, f".{func.attr.value}() synchronises with the device on every step")
            return
        name = self.resolves_to(node, SYNC_CALLS[:2])
        if name is not None:
            self.report(node, f"{name}() synchronises with the device on every step")
            return
        for found, _inner, helper in self.through_helper(node, (*SYNC_CALLS[:2], *(f".{m}" for m in SYNC_METHODS))):
            self.report(node, f"{helper.name}() runs {found.lstrip('.')}(): a device sync on every step")
            return
