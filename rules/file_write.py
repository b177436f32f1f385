"""file-write: library code that writes to a fixed path."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity, call_arg, literal_string

OPENERS = ("builtins.open", "io.open", "codecs.open")
PATH_CLASSES = ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath")
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


class FileWrite(Rule):
    ID = "file-write"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "writes to a fixed path from library code"
    EXPLANATION = """\
`open("/tmp/dump.txt", "w")` or `Path("out.json").write_text(...)` in an installed package is a
debug artifact: library code gets its output paths from its caller. A write to a literal path
is medium; it is high inside a forward function (it runs on every step) or when the path is
under /tmp, /var/tmp or /dev/shm (a dump). Writes to paths computed from arguments are not
flagged, nor are reads."""
    PREFILTER = (
        b"write_text",
        b"write_bytes",
        re.compile(rb"""open\((?:[^;]{0,300}?)(['"])[rwxab]*[wax+][bt+]*\1""", re.DOTALL),
    )

    VALID = [
        "with open(path, 'w') as fh:\n    fh.write(text)\n",
        "with open('/etc/hosts') as fh:\n    data = fh.read()\n",
        "from pathlib import Path\nPath(out_dir).write_text(data)\n",
        "with open('/tmp/x', mode) as fh:\n    pass\n",
    ]
    INVALID = [
        Example(code="with open('/tmp/dump.txt', 'w') as fh:\n    fh.write(s)\n", severity=Severity.HIGH),
        Example(code="fh = open('debug.log', 'a')\n", severity=Severity.MEDIUM),
        Example(
            code="def forward(self, x):\n    open(f'logits_{i}.txt', mode='w').write(str(x))\n    return x\n",
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="from pathlib import Path\nPath('/tmp/state.json').write_text(s)\n",
            severity=Severity.HIGH,
        ),
    ]

    def _report(self, node: cst.CSTNode, path: str) -> None:
        hot = self.in_forward or path.startswith(TEMP_DIRS)
        self.report(
            node,
            f"writes to the fixed path {path!r}" + (" in a forward function" if self.in_forward else ""),
            severity=Severity.HIGH if hot else Severity.MEDIUM,
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("write_text", "write_bytes"):
            owner = func.value
            if isinstance(owner, cst.Call) and owner.args and self.resolves_to(owner, PATH_CLASSES):
                path = literal_string(owner.args[0].value)
                if path is not None:
                    self._report(node, path)
            return
        if not self.resolves_to(node, OPENERS):
            return
        mode_node = call_arg(node, 1, "mode")
        mode = literal_string(mode_node) if mode_node is not None else None
        if mode is None or not set(mode) & set("wax+"):
            return
        path_node = call_arg(node, 0, "file")
        path = literal_string(path_node) if path_node is not None else None
        if path is not None:
            self._report(node, path)
