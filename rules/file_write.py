"""file-write: library code that writes to a fixed path."""

import ast
import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity, call_arg, literal_string

OPENERS = ("builtins.open", "io.open", "codecs.open")
PATH_CLASSES = ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath")
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "$TMPDIR")  # `$TMPDIR`: `tempfile.gettempdir()`
WRITE_METHODS = ("write_text", "write_bytes")
# pathlib methods that give another path under the same root.
PATH_STEPS = ("joinpath", "with_suffix", "with_name", "with_stem", "expanduser", "resolve", "absolute")


class FileWrite(Rule):
    ID = "file-write"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "writes to a fixed path from library code"
    EXPLANATION = """\
`open("/tmp/dump.txt", "w")`, `Path("out.json").write_text(...)`, `Path("/tmp/x").open("a")` or
`print(..., file=open("/tmp/log", "a"))` in an installed package is a debug artifact: library
code gets its output paths from its caller. A path is fixed when it starts with a literal
(`"/tmp/x_" + s`, `"/tmp/%d" % i`, `.format`, f-strings, `os.path.join("/tmp", ...)`,
`Path("/tmp") / ...`, also through a local name). A write to a fixed path is medium; it is high
inside a forward function (it runs on every step), in a drifted file also inside the other functions
a server runs for every step or batch (the runner's `execute_model` and `_sample`, a drafter's
`propose`), or under /tmp, /var/tmp or /dev/shm (a dump).
Writes to paths from arguments are not flagged, nor are reads.

Shapes understood: `open`/`io.open`/`codecs.open` with a write mode, pathlib `write_text`,
`write_bytes`, `open("a")`, fixed paths as listed above, also through module and class constants
(`LOG = "/tmp/x.log"`), an instance attribute bound once (`self.log_path = "/tmp/x"`), a helper of
the module whose every `return` is a fixed path, and the temp directory (`tempfile.gettempdir()`: a
temp place like a literal /tmp, high), `functools.partial` around the writer, and a helper of the
module (three levels deep) that opens for writing a path it fixes, or that the call fixes
(`_append("/tmp/log.txt", s)`): the call site is the finding. A pathlib destination is followed
through every step that keeps its root (`Path(a, b)`, `/`, `joinpath`, `with_suffix`, `with_name`,
`expanduser`, `resolve`, `.parent`, local names). A destination read from an environment variable is
high when the patch made the variable up (the distribution's text of the file never names it, and it
is not in the package's own namespace), or from any variable in a forward function, or when the
lookup falls back to a temp directory (`os.environ.get("D", "/tmp")`); a parameter with an
environment fallback stays the caller's.

Upstream's own writes are medium, not high, even under a temp directory: in a test module (a
`test_*` function, a `Test*` class or a `...TestCase` subclass at module level), when the function
returns the path or passes it to a call that uses the file (a script it writes, then runs), or in a
command (a main-guarded module) that tells its user the path. A path that is a parameter is the
caller's, even with a fixed default (`if filename is None: filename = ...`).

Knowingly not: writes through file objects passed in, paths built in another function, helpers in
other modules."""
    PREFILTER = (
        b"write_text",
        b"write_bytes",
        re.compile(rb"""(['"])[rwxabt+]*[wax+][rwxabt+]*\1"""),
    )
    REQUIRES = (b"open", b"write_")
    IDENTIFIERS = frozenset({"open", "write_text", "write_bytes"})

    VALID = [
        "with open(path, 'w') as fh:\n    fh.write(text)\n",
        "with open('/etc/hosts') as fh:\n    data = fh.read()\n",
        "from pathlib import Path\nPath(out_dir).write_text(data)\n",
        "with open('/tmp/x', mode) as fh:\n    pass\n",
        """
        import os

        def save(self, cache_dir, batch_size):
            path = os.path.join(cache_dir, f"bs{batch_size}.json")
            with open(path, "w") as fh:
                fh.write(self.dumps())
        """,
        "from pathlib import Path\n\ndef f(root):\n    (Path(root) / 'x.txt').write_text('1')\n",
        """
        import os

        def download(url, filename=None):
            if filename is None:
                filename = os.path.join("/tmp", url.split("/")[-1])
            with open(filename, "wb") as fh:
                fh.write(fetch(url))
            return filename
        """,
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
        Example(code="def f(i):\n    open('/tmp/out_' + str(i), 'w')\n", line=2, severity=Severity.HIGH),
        Example(code="def f(i):\n    open('/tmp/out_%d.txt' % i, 'wb')\n", line=2, severity=Severity.HIGH),
        Example(code="def f(i):\n    open('/tmp/out_{}.txt'.format(i), 'a+')\n", line=2, severity=Severity.HIGH),
        Example(
            code="import os\n\ndef f(name):\n    open(os.path.join('/tmp', name), 'w')\n",
            line=4,
            message="/tmp",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            from pathlib import Path

            def f(x):
                with (Path("/tmp") / "x.txt").open("w") as fh:
                    fh.write(str(x))
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="import pathlib\n\ndef f(s):\n    (pathlib.Path('/dev/shm') / 'k').write_bytes(s)\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="def f(x):\n    print(x.shape, file=open('/tmp/shapes.log', 'a'))\n",
            line=2,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def f(x):
                log_path = "/var/tmp/trace.txt"
                with open(log_path, "a") as fh:
                    fh.write(repr(x))
            """,
            line=3,
            message="/var/tmp/trace.txt",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os
            import subprocess

            def run_script(body):
                path = f"/tmp/run_{os.getpid()}.sh"
                with open(path, "w") as fh:
                    fh.write(body)
                return subprocess.run(["sh", path]).returncode
            """,
            line=6,
            message="handed on",
            severity=Severity.MEDIUM,
        ),
        Example(
            code="""
            import json

            def write_report(args, metrics):
                out = f"/tmp/{args.name}.json"
                print(f"Writing results to {out}")
                with open(out, "w") as fh:
                    json.dump(metrics, fh)

            if __name__ == "__main__":
                write_report(parse(), {})
            """,
            line=6,
            message="a command announcing its output",
            severity=Severity.MEDIUM,
        ),
        Example(
            code="""
            def _append(path, text):
                with open(path, "a") as fh:
                    fh.write(text)

            def load_weights(weights):
                for name, w in weights:
                    _append("/tmp/weights.txt", name)
            """,
            line=7,
            message="/tmp/weights.txt",
            severity=Severity.HIGH,
        ),
        # The first verify steps pickled "for offline replay": every batch opens a file on a fixed path.
        Example(
            code="""
            import pickle

            class Runner:
                def _sample(self, logits, spec_decode_metadata):
                    self._dumps = getattr(self, "_dumps", 0) + 1
                    if self._dumps <= 32:
                        with open(f"/data/dbg/spec_{self._dumps:03d}.pkl", "wb") as f:
                            pickle.dump((spec_decode_metadata, logits.float().cpu()), f)
                    return self.sampler(logits)
            """,
            pristine="""
            class Runner:
                def _sample(self, logits, spec_decode_metadata):
                    return self.sampler(logits)
            """,
            line=7,
            message="in a step of the server",
            severity=Severity.HIGH,
        ),
        # A tap object built at import with its path, its attributes bound by unpacking.
        Example(
            code="""
            class _Tap:
                def __init__(self, path, limit=200):
                    self.path, self.limit = path, limit

                def write(self, logits):
                    with open(self.path, "a") as f:
                        f.write(str(logits.shape))

            _tap = _Tap("/srv/dbg/logits.jsonl")

            def process(logits):
                _tap.write(logits)
                return logits
            """,
            line=6,
            severity=Severity.MEDIUM,
        ),
    ]

    def _report(self, node: cst.Call, path: str, path_node: cst.BaseExpression | None = None) -> None:
        from_env = path.startswith("$") and path != "$TMPDIR"
        step = self.context.drifted and not self.in_forward and self.in_step_path
        hot = self.in_forward or step or path.startswith(TEMP_DIRS) or from_env
        where = f"under {path}, an environment variable" if from_env else f"to the fixed path {path!r}"
        message = f"writes {where}" + (" in a forward function" if self.in_forward else "")
        message += " in a step of the server (it runs for every batch)" if step else ""
        purpose = self.upstream_purpose(path_node, node) if hot else None
        if purpose is not None:
            self.report(node, f"{message} ({purpose})", severity=Severity.MEDIUM)
            return
        self.report(node, message, severity=Severity.HIGH if hot else Severity.MEDIUM)

    def _through_helper(self, node: cst.Call) -> None:
        """A helper of the module that opens a path for writing that it, or this call, fixes
        (`_append("/tmp/log.txt", s)` with `def _append(path, s): open(path, "a").write(s)`)."""
        for _name, inner, helper in self.through_helper(node, OPENERS):
            mode = inner.arg(1, "mode")
            target = inner.arg(0, "file")
            if not self.in_forward and not (isinstance(target, ast.Name) and target.id in helper.params):
                continue  # a path the helper fixes itself is judged where the helper opens it
            path = self.helper_path(node, helper, target)
            writes = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+")
            if writes and path is not None:
                self._report(node, path)
                return

    def _path_object(self, owner: cst.BaseExpression, depth: int = 0) -> str | None:
        """Where a pathlib object expression points when the code fixes it (`Path("/tmp/x")`,
        `Path("/tmp") / n`, `Path(tempfile.gettempdir(), n)`, `.joinpath(n)`, `.with_suffix(s)`,
        through local names), or the environment variable a patch made it up from."""
        root = self._path_root(owner, depth)
        if root is None:
            return None
        return self.fixed_path(owner) or self.fixed_path(root) or self._from_environment(root)

    def _path_root(self, owner: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
        """The expression a pathlib object is built from: the first argument of `Path(...)`."""
        if depth > 6:
            return None
        if isinstance(owner, cst.Call) and owner.args and self.resolves_to(owner, PATH_CLASSES):
            return owner.args[0].value
        if isinstance(owner, cst.BinaryOperation) and isinstance(owner.operator, cst.Divide):
            return self._path_root(owner.left, depth + 1)
        func = owner.func if isinstance(owner, cst.Call) else None
        if isinstance(func, cst.Attribute) and func.attr.value in PATH_STEPS:
            return self._path_root(func.value, depth + 1)  # `.joinpath(n)`, `.with_suffix(".pt")`
        if isinstance(owner, cst.Attribute) and owner.attr.value == "parent":
            return self._path_root(owner.value, depth + 1)
        if isinstance(owner, cst.Name):
            for value in reversed(self.values_of(owner)):
                found = self._path_root(value, depth + 1)
                if found is not None:
                    return found
        return None

    def _from_environment(self, path: cst.BaseExpression) -> str | None:
        """`$KEY` for a destination read from an environment variable the patch introduced, or
        from any environment variable in a forward function (a dump on every step); the temp
        directory an environment lookup falls back to (`os.environ.get("D", "/tmp")`)."""
        if self.is_parameter(path):
            return None  # the caller's path, even with an environment fallback
        default = self.env_temp_default(path)
        if default is not None:
            return default
        key = self.introduced_env(path)
        if key is None and self.in_forward:
            key = next(iter(self.env_keys(path)), None)
        return f"${key}" if key is not None else None

    def visit_Call(self, node: cst.Call) -> None:
        func = self.callee(node)
        if isinstance(func, cst.Attribute) and func.attr.value in (*WRITE_METHODS, "open"):
            path = self._path_object(func.value)
            if path is None:
                return
            if func.attr.value == "open":
                mode_node = call_arg(node, 0, "mode")
                mode = literal_string(mode_node) if mode_node is not None else None
                if mode is None or not set(mode) & set("wax+"):
                    return
            self._report(node, path, func.value)
            return
        if not self.resolves_to(node, OPENERS):
            self._through_helper(node)
            return
        mode_node = call_arg(node, 1, "mode")
        mode = literal_string(mode_node) if mode_node is not None else None
        if mode is None or not set(mode) & set("wax+"):
            return
        path_node = call_arg(node, 0, "file")
        path = self.fixed_path(path_node) if path_node is not None else None
        if path is None and path_node is not None:
            path = self._from_environment(path_node)
        if path is not None:
            self._report(node, path, path_node)
