"""What a write puts on disk and where: serialised tensor bytes, files opened for writing by any
opener, fresh temp files, and environment variables a destination is read from.

A hurried dump is not always `torch.save(t, "/tmp/t.pt")`. It is `os.write(fd, pickle.dumps(t))`
on a descriptor from `os.open`, `.write(t.numpy().tobytes())` on a file opened for writing, an
`mmap` of a file, a
`NamedTemporaryFile(delete=False)` or `mkstemp()` whose name is printed, or a path read from an
environment variable the patch itself made up. This module answers, from the libcst expression
and the rule's resolver (the same callbacks `values.fixed_path` takes):

- `serialised(data)`: what makes `data` serialised object or array bytes (`pickle.dumps`,
  `marshal.dumps`, `.tobytes()`, a `BytesIO`'s `getvalue()`), else None;
- `destination(receiver)`: where a `.write` receiver or an `os.write` descriptor goes: the path
  expression its opener was given, `TEMP_FILE` for a fresh temp file, `STREAM` for the
  process's own stdout/stderr, else None;
- `fresh_temp(path)`: the temp-file call a destination comes from (`mkstemp()`,
  `NamedTemporaryFile(delete=False)`, the `.name` of one not kept, `mkdtemp()` joined), else None;
- `env_keys(expr)`: the literal names of the environment variables an expression reads.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

import libcst as cst

from patchaudit.analysis.trees import called_name
from patchaudit.analysis.values import Resolves, ValuesOf, call_arg, literal_string
from patchaudit.analysis.walk import nodes

__all__ = [
    "SETTINGS_PREFIXES",
    "STREAM",
    "TEMP_FILE",
    "destination",
    "env_keys",
    "env_keys_ast",
    "fresh_temp",
    "names_in",
    "serialised",
]

SERIALISERS = (
    "pickle.dumps",
    "marshal.dumps",
    "cloudpickle.dumps",
    "dill.dumps",
    "safetensors.torch.save",
    "safetensors.numpy.save",
)
BYTES_METHODS = ("tobytes", "tostring")
BUFFER_METHODS = ("getvalue", "getbuffer")
WRAPPERS = ("builtins.bytes", "builtins.bytearray", "builtins.memoryview")
# Openers whose first argument is the path, and the argument that holds the mode.
OPENERS = {"builtins.open": (1, "mode"), "io.open": (1, "mode"), "io.FileIO": (1, "mode"), "codecs.open": (1, "mode")}
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC")
STREAMS = ("sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__")
TEMP_CALLS = ("tempfile.mkstemp", "tempfile.mkdtemp", "tempfile.NamedTemporaryFile")
# Where each temp call takes its `dir` positionally.
_TEMP_DIR_AT = {"tempfile.mkstemp": 2, "tempfile.mkdtemp": 2, "tempfile.NamedTemporaryFile": 6}
ENV_READS = ("os.environ.get", "os.getenv", "os.environ.setdefault", "os.environ.pop")
# Namespaces of the serving stack's documented settings: a variable named so is configuration.
SETTINGS_PREFIXES = ("VLLM_", "SGLANG_", "TORCH_", "PYTORCH_", "CUDA_", "NCCL_", "HF_", "TRANSFORMERS_", "TRITON_")
STREAM = "<stream>"
TEMP_FILE = "<temp file>"
_DEPTH = 6


def serialised(node: cst.BaseExpression, resolves: Resolves, values_of: ValuesOf, depth: int = 0) -> str | None:
    """What makes `node` serialised object or array bytes, else None."""
    if depth > _DEPTH:
        return None
    if isinstance(node, cst.Name):
        return next(
            (k for v in reversed(values_of(node)) if (k := serialised(v, resolves, values_of, depth + 1))), None
        )
    if not isinstance(node, cst.Call):
        return None
    name = resolves(node, SERIALISERS)
    if name is not None:
        return f"{name}()"
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in BYTES_METHODS:
        return f".{func.attr.value}()"
    if (
        isinstance(func, cst.Attribute)
        and func.attr.value in BUFFER_METHODS
        and _is_bytes_io(func.value, resolves, values_of)
    ):
        return f"BytesIO.{func.attr.value}()"
    if node.args and resolves(node, WRAPPERS):
        return serialised(node.args[0].value, resolves, values_of, depth + 1)
    return None


def serialised_ast(node: ast.expr | None) -> str | None:
    """`serialised` for an `ast` expression of a helper, by its callee's last name only."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    last = called_name(func)
    return f"{last}()" if last in ("dumps", *BYTES_METHODS) else None


def _is_bytes_io(node: cst.BaseExpression, resolves: Resolves, values_of: ValuesOf) -> bool:
    if isinstance(node, cst.Call):
        return resolves(node, "io.BytesIO") is not None
    return isinstance(node, cst.Name) and any(_is_bytes_io(v, resolves, values_of) for v in values_of(node))


def destination(
    node: cst.BaseExpression, resolves: Resolves, values_of: ValuesOf, depth: int = 0
) -> cst.BaseExpression | str | None:
    """The path a file object or descriptor was opened on (or STREAM, TEMP_FILE), else None."""
    if depth > _DEPTH:
        return None
    again = lambda n: destination(n, resolves, values_of, depth + 1)  # noqa: E731
    if isinstance(node, cst.Attribute) and node.attr.value in ("buffer", "raw"):
        return again(node.value)  # `sys.stdout.buffer`, `fh.raw`
    if isinstance(node, cst.Name | cst.Attribute) and resolves(node, STREAMS) is not None:
        return STREAM
    if isinstance(node, cst.Name):
        return next((d for v in reversed(values_of(node)) if (d := again(v)) is not None), None)
    if isinstance(node, cst.Subscript):
        return TEMP_FILE if fresh_temp(node, resolves, values_of) else None  # `mkstemp()[0]`
    if not isinstance(node, cst.Call):
        return None
    if fresh_temp(node, resolves, values_of) is not None:
        return TEMP_FILE
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "fileno":
        return again(func.value)
    opener = resolves(node, tuple(OPENERS))
    if opener is not None and node.args:
        mode = call_arg(node, *OPENERS[opener])
        text = literal_string(mode) if mode is not None else "r"
        return node.args[0].value if text is None or any(c in text for c in "wax+") else None
    if resolves(node, "os.open") is not None and node.args:
        flags = call_arg(node, 1, "flags")
        written = flags is not None and any(
            isinstance(n, cst.Attribute | cst.Name) and _last(n) in WRITE_FLAGS for n in subexpressions(flags)
        )
        return node.args[0].value if written else None
    if resolves(node, ("os.fdopen", "mmap.mmap")) is not None and node.args:
        return again(node.args[0].value)  # `os.fdopen(fd, "wb")`, `mmap.mmap(fh.fileno(), 0)`
    return None


def fresh_temp(node: cst.BaseExpression, resolves: Resolves, values_of: ValuesOf, depth: int = 0) -> str | None:
    """The temp-file call a path or file object comes from: `mkstemp()` (or an item of it),
    `NamedTemporaryFile(delete=False)` (or its `.name`), `os.path.join(mkdtemp(), ...)`."""
    if depth > _DEPTH:
        return None
    again = lambda n: fresh_temp(n, resolves, values_of, depth + 1)  # noqa: E731
    if isinstance(node, cst.Name):
        return next((t for v in reversed(values_of(node)) if (t := again(v)) is not None), None)
    if isinstance(node, cst.Subscript):
        return again(node.value)
    if isinstance(node, cst.Attribute) and node.attr.value == "name":
        if isinstance(node.value, cst.Call) and resolves(node.value, "tempfile.NamedTemporaryFile") is not None:
            # The object is dropped at once, its file with it: what is then written to the name stays.
            return "tempfile.NamedTemporaryFile().name"
        return again(node.value)
    if isinstance(node, cst.BinaryOperation | cst.FormattedString):
        first = node.left if isinstance(node, cst.BinaryOperation) else (node.parts[0] if node.parts else None)
        inner = first.expression if isinstance(first, cst.FormattedStringExpression) else first
        return again(inner) if isinstance(inner, cst.BaseExpression) else None
    if not isinstance(node, cst.Call):
        return None
    name = resolves(node, TEMP_CALLS)
    if name is not None and _chosen_dir(node, name, values_of):
        return None  # `mkstemp(dir=directory)`: the caller picks the place (a spill, not a dump)
    if name == "tempfile.NamedTemporaryFile":
        delete = call_arg(node, 99, "delete")
        return f"{name}(delete=False)" if isinstance(delete, cst.Name) and delete.value == "False" else None
    if name is not None:
        return f"{name}()"
    if node.args and resolves(node, ("os.path.join", "pathlib.Path", "builtins.str", "os.fdopen")) is not None:
        return again(node.args[0].value)
    return None


def _chosen_dir(call: cst.Call, name: str, values_of: ValuesOf) -> bool:
    """Whether a temp call is given a `dir` its caller chose (a parameter or a setting: a lower-case
    name, an attribute), not one the patch fixed (a literal, an upper-case constant, a local bound to
    a literal)."""
    where = call_arg(call, _TEMP_DIR_AT[name], "dir")
    if where is None or literal_string(where) is not None:
        return False
    if isinstance(where, cst.Name):
        if where.value == "None" or where.value.isupper():
            return False
        return not any(literal_string(v) is not None for v in values_of(where))
    return isinstance(where, cst.Attribute)


def env_keys(
    node: cst.BaseExpression, resolves: Resolves, values_of: ValuesOf, depth: int = 0, seen: set[int] | None = None
) -> Iterator[str]:
    """The literal names of the environment variables `node` reads with no default (a default
    chooses a place of its own), through local names (each value read once: a loop that rebinds
    its names many times is not walked once per path through them)."""
    seen = set() if seen is None else seen
    if depth > _DEPTH or id(node) in seen:
        return
    seen.add(id(node))
    for sub in subexpressions(node):
        if isinstance(sub, cst.Call) and len(sub.args) == 1 and resolves(sub, ENV_READS) is not None:
            key = literal_string(sub.args[0].value)
        elif isinstance(sub, cst.Subscript) and resolves(sub.value, "os.environ") is not None:
            index = sub.slice[0].slice if len(sub.slice) == 1 else None
            key = literal_string(index.value) if isinstance(index, cst.Index) else None
        elif isinstance(sub, cst.Name):
            for value in values_of(sub):
                yield from env_keys(value, resolves, values_of, depth + 1, seen)
            continue
        else:
            continue
        if key is not None:
            yield key


def env_keys_ast(node: ast.expr, resolves: Callable[[ast.expr], frozenset[str]]) -> Iterator[str]:
    """The literal names of the environment variables an `ast` expression (a module-level
    binding, `DUMP_DIR = os.getenv("MY_DUMP")`) reads; `resolves` gives a callee's names."""
    for sub in ast.walk(node):
        key = None
        if (
            isinstance(sub, ast.Call)
            and len(sub.args) == 1
            and not sub.keywords
            and resolves(sub.func) & set(ENV_READS)
        ):
            key = sub.args[0]
        elif isinstance(sub, ast.Subscript) and "os.environ" in resolves(sub.value):
            key = sub.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            yield key.value


def names_in(node: cst.BaseExpression) -> list[str]:
    """The bare names an expression mentions."""
    return [sub.value for sub in subexpressions(node) if isinstance(sub, cst.Name)]


def _last(node: cst.Attribute | cst.Name) -> str:
    return node.attr.value if isinstance(node, cst.Attribute) else node.value


def subexpressions(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Every node under `node`, itself included, in visiting order."""
    return nodes(node)
