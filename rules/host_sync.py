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
forward functions (`forward`, `_forward`, `forward_*`, `__call__`)."""
    PREFILTER = (b".item()", b".cpu()", b".tolist()", b"synchronize")
    FORWARD = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+(?:_*forward\w*|__call__)[ \t]*\(", re.MULTILINE)

    @classmethod
    def prefilter(cls, data: bytes) -> bool:
        # A sync call inside the text of a forward function: from its `def` to the next line
        # indented no deeper than the `def`.
        if not super().prefilter(data):
            return False
        for match in cls.FORWARD.finditer(data):
            indent = len(match.group(1))
            end = len(data)
            closing = re.compile(rb"^[ \t]{0,%d}[^ \t\n#)\]]" % indent, re.MULTILINE)
            following = closing.search(data, data.find(b"\n", match.end()) + 1)
            if following is not None:
                end = following.start()
            body = data[match.end() : end]
            if any(token in body for token in cls.PREFILTER):  # type: ignore[union-attr]
                return True
        return False

    VALID = [
        "def load_weights(self, w):\n    return w.cpu()\n",
        "def forward(self, x):\n    return self.proj(x)\n",
        "def forward(self, x):\n    return x.to(device)\n",
    ]
    INVALID = [
        Example(code="def forward(self, x):\n    n = x.sum().item()\n    return x * n\n", line=2),
        Example(code="def forward(self, ids):\n    print(ids.tolist())\n    return ids\n"),
        Example(code="import torch\n\ndef _forward(self, x):\n    torch.cuda.synchronize()\n    return x\n"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.in_forward:
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS and not node.args:
            self.report(node, f".{func.attr.value}() synchronises with the device on every step")
            return
        name = self.resolves_to(node, SYNC_CALLS[:2])
        if name is not None:
            self.report(node, f"{name}() synchronises with the device on every step")
