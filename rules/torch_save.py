"""torch-save: tensors or objects serialised to disk from library code."""

import ast
import re

import libcst as cst

from patchaudit.rule import Example, FileContext, Inner, Rule, Severity, call_arg, literal_string, subexpressions

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
    "dill.dump": 1,
    "torch.jit.save": 1,
    "torch.onnx.export": 2,
}
# The keyword that names the destination, where it is not `file`.
SAVER_KEYWORDS = {"torch.save": "f", "joblib.dump": "filename", "torch.jit.save": "f", "torch.onnx.export": "f"}
SAVER_KEYWORDS |= {name: "filename" for name in SAVERS if name.startswith("safetensors.")}
IN_MEMORY = ("io.BytesIO", "io.BytesIO()", "io.StringIO", "io.StringIO()")
# Writers whose first argument is the file: logging handlers that open it.
FILE_HANDLERS = (
    "logging.FileHandler",
    "logging.handlers.RotatingFileHandler",
    "logging.handlers.TimedRotatingFileHandler",
    "logging.handlers.WatchedFileHandler",
    "logging.basicConfig",
)

# Writers that take a destination path: the argument that names it, and (when a mode decides
# whether they write) the argument that holds the mode and the modes that write.
PATH_WRITERS: dict[str, tuple[int, str]] = {
    "shutil.copy": (1, "dst"),
    "shutil.copy2": (1, "dst"),
    "shutil.copyfile": (1, "dst"),
    "shutil.copytree": (1, "dst"),
    "shutil.move": (1, "dst"),
    "h5py.File": (0, "name"),
    "numpy.memmap": (0, "filename"),
    "numpy.lib.format.open_memmap": (0, "filename"),
    "numpy.open_memmap": (0, "filename"),
    "torch.cuda.memory._dump_snapshot": (0, "filename"),
    "torch.profiler.tensorboard_trace_handler": (0, "dir_name"),
}
# Methods of objects built elsewhere that write their first argument: a pickled array, a profile.
METHOD_WRITERS = (
    "dump",
    "export_chrome_trace",
    "export_stacks",
    "export_memory_timeline",
    "save_pretrained",  # a model's; a figure's `savefig`, a frame's `to_csv`
    "savefig",
    "to_csv",
    "to_parquet",
    "to_json",
)
WRITE_MODE = re.compile(r"[wax+]")
MODE_ARG = {"h5py.File": (1, "mode"), "numpy.memmap": (2, "mode"), "numpy.open_memmap": (1, "mode")}
LOG_CONFIG = ("logging.config.dictConfig",)
NOWHERE = "/dev/null"
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "$TMPDIR")

# What an operator sets: the environment, or a setting whose name says it dumps or debugs.
SWITCH_SOURCES = ("os.environ", "os.environ.get", "os.getenv")
FROM_ENVIRONMENT = ("os.environ.get()", "os.getenv()")
SWITCH_NAME = re.compile(r"dump|debug|record", re.IGNORECASE)
# Modules of environment settings (`import vllm.envs as envs; envs.VLLM_X`).
ENV_MODULES = ("vllm.envs", "sglang.srt.environ", "sglang.srt.envs")
ENVIRONMENT, SETTING = "environment", "setting"


# Calls that take a function and run it later (its arguments beside it, or in `args=`).
DEFERRING = (
    "threading.Thread",
    "threading.Timer",
    "multiprocessing.Process",
    "atexit.register",
    "builtins.map",
    "concurrent.futures.*.submit",
)
DEFERRING_METHODS = ("submit", "call_soon", "call_later", "call_soon_threadsafe", "run_in_executor", "apply_async")



def _opens_to_write(name: str, inner: Inner) -> bool:
    """A file or a memory map a helper opens in a writing mode (`h5py.File(path, "a")`; h5py's
    default mode only reads): data dumped through the helper."""
    key = "numpy.open_memmap" if name.endswith("open_memmap") else name
    mode_at = MODE_ARG.get(key)
    if mode_at is None:
        return False  # a copy or a snapshot a helper makes is judged where the helper makes it
    mode = inner.arg(*mode_at)
    if mode is None:
        return key != "h5py.File"
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and WRITE_MODE.search(mode.value) is not None

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
parameter).

Shapes understood: every import form and alias (`import torch as t`, `from torch import save as s`,
`__import__`, `getattr(torch, "save")`, `getattr(torch, NAME)` with `NAME = "save"` a module or
local string constant, `save = torch.save`, `sys.modules["torch"]`, an import inside the function),
`functools.partial(torch.save, ...)` (a destination it binds counts), a lambda whose body saves
(bound to a name or a class attribute, `staticmethod(lambda ...)` too: a path passed at the call
site counts), `self.dump = torch.save` (or a partial of it) bound in a method, a function or method
of the same module that saves (three levels of calls deep, through `functools.partial` too: the call
site is the finding, high when it passes a fixed path, leaves a fixed default in place, or sits in a
forward function; medium there behind a switch the operator sets), the same for a helper that opens an
HDF5 file or a memory map to write (`h5py.File(path, "a")`), a closure a module function returns
(`_trace = _make_writer(root)`, then `_trace("x", t)`), a method, partial, lambda or class attribute of a base class of
the module reached as `self.x`, `cls.x`, `super().x` or `type(self).x` (looked up along the module's
own bases, depth first), a class of the module (`Dumper(...)` runs `__init__`, `dump(x)` with `dump
= Dumper()` runs `__call__`, `dumper.save(x)` and `self.dumper.save(x)` run the method), pickle,
dill, joblib, numpy (`save`, `savez`, `savez_compressed`, `savetxt`, `ndarray.dump`) and
safetensors, `ndarray.tofile()` to a fixed path or in a step function (forward, `execute_model`, a
sampler: behind a switch too, no serving code keeps raw array bytes), `fh.write(x.tobytes())` in
forward, `logging.FileHandler` (and the rotating and watched handlers),
`logging.basicConfig(filename=...)` and `logging.config.dictConfig` with a `filename` on a fixed
path, `shutil.copy`/`copy2`/`copyfile`/`copytree`/`move` to a fixed path, `h5py.File` and numpy
memory maps opened for writing at a fixed path, CUDA memory snapshots
(`torch.cuda.memory._dump_snapshot`), profiler traces (`export_chrome_trace`, `export_stacks`,
`tensorboard_trace_handler`), and an object's own writer (`model.save_pretrained`, `plt.savefig`,
`df.to_csv`) given a fixed path (not a bare `.save(...)`: too many objects name a method so); these
tools are high in a temp directory or a forward function and medium elsewhere (upstream ships
profilers that write beside the process). `torch.jit.save`, `torch.onnx.export` and `dill.dump` are
savers like `torch.save`. A destination is fixed through module and class constants (`DUMP_DIR =
"/tmp/d"`, `Path("/tmp/d")`, of a base class too), an instance attribute bound once (`self.dump_dir
= "/tmp/d"` in `__init__`), one bound to a constructor parameter when the class (or a subclass) is
built in this module with a fixed path or `mkdtemp()` or the parameter's default is one
(`Recorder("/tmp/r")`, `def __init__(self, path="/tmp/r")`), a fallback to a temp place (`envs.X or
"/tmp/d"`, `os.getenv("X", "/tmp/d")`, `path or tempfile.gettempdir()`: a debug destination even
when the variable is real), a helper of the module whose every `return` is a fixed path, and the
shared temp directory (`tempfile.gettempdir()`, `mktemp()`; not `mkdtemp()` or `mkstemp()`, a fresh
place each call). Such writes in a test module, or whose path is handed on, are medium.

In code every step runs (a forward, a runner's `execute_model`, a scheduler's `schedule`, a sampler)
a save behind an environment switch (`if os.environ.get("DUMP_DIR"):`, `if
envs.VLLM_DEBUG_DUMP_PATH:`, a name read from either) is high, however the save is spelled (`torch.save`,
`getattr(torch, "save")`, a helper of the module that saves): once set, it writes on every step of every
layer; not when the destination is the function's own parameter. A save in such a step function
outside a forward (`execute_model`, a sampler) to a place the environment names is high too, gated or
not (`f"{envs.VLLM_DEBUG_DUMP_PATH}/step.pt"`). In a forward function a save behind
a setting named for dumping or debugging on the object (`if self.config.debug_dump:`) is medium: a
documented switch, not a patch; so is a call of a helper that saves there behind such a setting.
A save in a test module, or whose
path the function hands on, is medium (see file-write).

Outside forward functions a destination chosen elsewhere is not flagged: a parameter, the object's
own setting (`self.path_stem`), the environment (`os.environ[...]`, `envs.X`), or a file object of a
`with` (`with io.BytesIO() as buf`; `with open(path, "wb") as f`, whose path file-write judges).

Outside forward functions a destination the environment chooses through a module name (`DUMP_DIR =
os.environ.get("VLLM_DUMP_DIR")`) is the operator's, not flagged; one that falls back to a temp
directory when the variable is unset (`os.environ.get("DUMP_DIR", "/tmp/d")`) writes there by
default, and is a fixed path.

Serialised bytes written by hand are a dump like a save: `os.write(fd, pickle.dumps(t))` on an
`os.open` descriptor opened for writing, `.write()` of `pickle.dumps`/`marshal.dumps`/`.tobytes()`
or a `BytesIO`'s `getvalue()` to a file from `open`, `io.FileIO`, `codecs.open`, `os.fdopen`, an
`mmap` of a file (also through a `with ... as fh` or a local name): high to a fixed path, a new
temp file, or from a forward function; the process's own `sys.stdout.buffer` is not a file. A
save into a new temp file that outlives the call (`tempfile.mkstemp()`, an item of it, its
`os.fdopen`, `NamedTemporaryFile(delete=False)` or its `.name`, the `.name` of a
`NamedTemporaryFile(...)` not kept, `os.path.join(mkdtemp(), ...)`)
is a fixed destination, unless the call is given a `dir` its caller chose (a parameter, a
lower-case name, an attribute: a spill handed on, as IPC does), not a literal or an upper-case
constant. Savers kept in containers are savers: `SAVERS = {"pt": torch.save, "np":
np.save}; SAVERS[fmt](t, p)`, a list or tuple of them, and a loop over one (`for save in
(torch.save, np.save)`); of several, the one given a fixed path decides.

A destination read from an environment variable that the patch introduces is a debug dump:
high, also behind `if os.environ.get(...)` in a forward function. Introduced: the pristine file
never names it, it has no default (`os.environ["DSV2_DUMP"]`, `DUMP_DIR = os.getenv("MY_DUMP")`
at module level), and it is not in the package's own namespace nor the serving stack's (`VLLM_`,
`SGLANG_`, `TORCH_`, `HF_`...: documented settings). A variable the pristine file already reads,
or a documented setting, stays the operator's (above); a test that reads an existing setting
(`if self.trace_dir:` with `self.trace_dir = os.environ.get(...)`) is a switch.

A factory's closure is read with what the module-level call gave the factory: `_dump =
_make_dumper("/tmp/dsv3_logits")`, where the closure saves to `f"{out_dir}/step.pt"`, saves to a
fixed path under `/tmp` at each of its call sites.

Knowingly not: a callee passed to a helper as an argument, a save function whose destination is
its parameter (its callers decide), a factory's closure whose path comes from something other than
a literal the factory was given, a lambda's default destination, methods of objects built in
other modules (`self.model_runner.save_sharded_state(...)`), helpers in other modules, a saver
name built at run time (`getattr(torch, "sa" + "ve")`: the file must name the saver for the rule
to read it), `operator.methodcaller("save", ...)`, a new variable in a documented namespace
(`VLLM_MY_DUMP`, indistinguishable here from a documented one), bases imported from other modules
or nested classes (only the module's own top-level classes are followed), a constructor parameter
bound under another name or through a container (`self.cfg = {"path": path}`), a fallback outside
a temp place (`path or "~/.cache/x"`: a documented default), and files scanned without their
pristine text (every variable there is the operator's)."""
    PREFILTER = (
        b"save",
        b"dump",
        b"tofile",
        b"tobytes",
        b"FileHandler",
        b"basicConfig",
        b"dictConfig",
        b"copy",
        b"move",
        b"File",
        b"memmap",
        b"export",
        b"trace_handler",
        b"to_csv",
        b"to_parquet",
        b"to_json",
    )
    REQUIRES = (
        b"torch",
        b"numpy",
        b"pickle",
        b"marshal",
        b"joblib",
        b"safetensors",
        b"tofile",
        b"tobytes",
        b"FileHandler",
        b"basicConfig",
        b"dictConfig",
        b"shutil",
        b"h5py",
        b"memmap",
        b"export_",
        b"dill",
        b".save",
        b"savefig",
        b".dump",
        b"pretrained",
        b"to_csv",
        b"to_parquet",
        b"to_json",
    )
    IDENTIFIERS = frozenset(
        {"save", "savez", "savez_compressed", "savetxt", "dump", "dumps", "save_file", "tofile", "tobytes", "getvalue"}
        | {n.rsplit(".", 1)[-1] for n in (*SAVERS, *FILE_HANDLERS)}
        | {n.rsplit(".", 1)[-1] for n in (*PATH_WRITERS, *LOG_CONFIG)}
        | set(METHOD_WRITERS)
    )
    # A path writer's name is its module's member (`cute.copy(...)` copies tensors in a kernel).
    IDENTIFIER_MODULES = {
        **{n.rsplit(".", 1)[-1]: b"shutil" for n in PATH_WRITERS if n.startswith("shutil.")},
        "File": b"h5py",
        "export": b"onnx",
    }

    VALID = [
        # A documented setting's default (the serving stack's own variable) is the operator's place.
        (
            "import os\nimport torch\n\n_DIR = os.environ.get('VLLM_CACHE_DIR', '/var/cache/vllm')\n\n"
            "def persist(w):\n    torch.save(w, f'{_DIR}/w.pt')\n"
        ),
        "import torch\nstate = model.state_dict()\n",
        "import threading\nimport numpy as np\n\ndef f(pool, a):\n    pool.submit(np.mean, a)\n"
        "    threading.Thread(target=print, args=('/tmp/x.pt',)).start()\n",
        "def export(model, out_dir):\n    model.save_pretrained(out_dir)\n",
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
        """
        import torch

        def save_checkpoint(model, path):
            torch.save(model.state_dict(), path)

        def finish(model, args):
            save_checkpoint(model, args.output)
        """,
        """
        import logging

        def add_file_log(path):
            logging.getLogger("vllm").addHandler(logging.FileHandler(path))
        """,
        "def write_weights(fh, t):\n    fh.write(t.numpy().tobytes())\n",
        """
        import io
        import torch

        def to_bytes(x):
            with io.BytesIO() as buf:
                torch.save(x, buf)
                return buf.getvalue()
        """,
        """
        import os
        import numpy as np

        def cache(state, folder):
            for name, param in state.items():
                with open(os.path.join(folder, name), "wb") as f:
                    np.save(f, param.numpy())
        """,
        """
        import os
        from pathlib import Path
        import torch

        def record(name, data):
            out = Path(os.environ.get("RECORDER_DIR", "/var/lib/rec")) / name
            torch.save(data, str(out))
        """,
        """
        import torch

        class Recorder:
            def flush(self):
                torch.save(self.buffer, f"{self.path_stem}.{self.count}.pt")
        """,
        """
        import os
        import pickle

        class Requests:
            def record(self, entry):
                self.pending.append(entry)
                if len(self.pending) > 1000:
                    def flush():
                        with open(os.path.join(self.folder, "requests.pkl"), "wb") as f:
                            pickle.dump(self.pending, f)
                    flush()
        """,
        """
        import h5py

        def read_ref(name):
            with h5py.File("/data/ref.h5", "r") as f:
                return f[name][()]
        """,
        """
        import shutil

        def export(src, dst):
            shutil.copy(src, dst)
        """,
        """
        import torch

        class Saver:
            def __init__(self, path):
                self.path = path

            def save(self, t):
                torch.save(t, self.path)

        def finish(t, args):
            Saver(args.out).save(t)
        """,
        "import sys\nimport pickle\n\ndef emit(x):\n    sys.stdout.buffer.write(pickle.dumps(x))\n",
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
        Example(
            code="""
            import torch

            def _dump(t, path):
                torch.save(t, path)

            class Layer:
                def forward(self, x):
                    _dump(x, f"/tmp/layer_{id(self)}.pt")
                    return x
            """,
            line=8,
            message="_dump() runs torch.save()",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import functools
            import torch

            dump = functools.partial(torch.save, f="/tmp/x.pt")

            def forward(self, x):
                dump(x)
                return x
            """,
            line=7,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def forward(self, x):
                dump = lambda t: torch.save(t, "/tmp/t.pt")
                dump(x)
                return x
            """,
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                x.detach().cpu().numpy().tofile("/tmp/hidden.bin")
                return x
            """,
            line=2,
            message="tofile",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import logging

            log = logging.getLogger("dbg")
            log.addHandler(logging.FileHandler("/tmp/vllm_debug.log"))
            """,
            line=4,
            message="FileHandler",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            class Runner:
                def _save(self, t):
                    import numpy as np
                    np.save("/tmp/t.npy", t)

                def forward(self, x):
                    self._save(x)
                    return x
            """,
            line=7,
            message="_save() runs numpy.save()",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            def forward(self, x):
                with open(self.path, "ab") as fh:
                    fh.write(x.cpu().numpy().tobytes())
                return x
            """,
            line=3,
            message="tobytes",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import logging

            def forward(self, x):
                logging.basicConfig(filename="/tmp/fwd.log", level=logging.DEBUG)
                return x
            """,
            line=4,
            message="basicConfig",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os
            import torch

            class Layer:
                def forward(self, x):
                    if os.environ.get("LAYER_DUMP_DIR"):
                        torch.save(x, os.path.join(os.environ["LAYER_DUMP_DIR"], "x.pt"))
                    return x
            """,
            line=7,
            message="behind an environment switch",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            class Layer:
                def forward(self, x):
                    if self.config.dump_hidden:
                        torch.save(x, self.config.dump_path)
                    return x
            """,
            line=6,
            message="behind a switch",
            severity=Severity.MEDIUM,
        ),
        Example(
            code="""
            import torch

            def _forward(rank, output_dir, model):
                torch.save(model.state_dict(), output_dir + "/weights.pt")

            def test_parallel_matches_single(tmp_path):
                _forward(0, str(tmp_path), None)
            """,
            line=4,
            message="in a test module",
            severity=Severity.MEDIUM,
        ),
        Example(
            code="""
            import os
            import torch

            class Dumper:
                def __init__(self):
                    self.root = "/tmp/dumps"

                def dump(self, t, name):
                    torch.save(t, os.path.join(self.root, name))

            _dumper = Dumper()

            def load_weights(weights):
                for name, w in weights:
                    _dumper.dump(w, name)
            """,
            line=9,
            message="/tmp/dumps",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import torch

            def _dump(t, path="/tmp/w.pt"):
                torch.save(t, path)

            def load_weights(w):
                _dump(w)
            """,
            line=7,
            message="_dump() runs torch.save() to the fixed path",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os
            import torch

            DUMP_DIR = "/tmp/dsv2"

            def load_weights(weights):
                for name, w in weights:
                    torch.save(w, os.path.join(DUMP_DIR, name))
            """,
            line=8,
            message="/tmp/dsv2",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os
            import tempfile
            import torch

            def snapshot(w):
                torch.save(w, os.path.join(tempfile.gettempdir(), "w.pt"))
            """,
            line=6,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import functools
            import torch

            class Layer:
                def __init__(self):
                    self._dump = functools.partial(torch.save, f="/tmp/layer.pt")

                def forward(self, x):
                    self._dump(x)
                    return x
            """,
            line=9,
            severity=Severity.HIGH,
        ),
        Example(code="import sys\nsys.modules['torch'].save(x, '/tmp/x.pt')\n", line=2, severity=Severity.HIGH),
        Example(code="import shutil\nshutil.copy(__file__, '/tmp/model_backup.py')\n", line=2, message="shutil.copy"),
        Example(
            code="""
            import h5py

            def forward(self, x):
                with h5py.File("/tmp/acts.h5", "a") as f:
                    f.create_dataset("x", data=x.cpu().numpy())
                return x
            """,
            line=4,
            message="h5py.File",
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import logging.config

            logging.config.dictConfig(
                {"version": 1, "handlers": {"f": {"class": "logging.FileHandler", "filename": "/tmp/v.log"}}}
            )
            """,
            line=3,
            message="dictConfig",
            severity=Severity.HIGH,
        ),
        Example(code="def f(x):\n    x.numpy().dump('/tmp/x.pkl')\n", line=2, message=".dump()"),
        Example(
            code="""
            import torch

            def report():
                torch.cuda.memory._dump_snapshot("/tmp/mem.pickle")
            """,
            line=4,
            message="_dump_snapshot",
        ),
        Example(
            code="def f(prof):\n    prof.export_chrome_trace('/tmp/trace.json')\n",
            line=2,
            message="export_chrome_trace",
        ),
        Example(
            code="import torch\n\ndef report():\n    torch.cuda.memory._dump_snapshot('memory_usage.pickle')\n",
            line=4,
            severity=Severity.MEDIUM,
        ),
        Example(code="import torch\ntorch.onnx.export(m, (x,), '/tmp/m.onnx')\n", line=2, message="torch.onnx.export"),
        Example(
            code="""
            import threading
            import torch

            def forward(self, x):
                threading.Thread(target=torch.save, args=(x, "/tmp/x.pt")).start()
                return x
            """,
            line=5,
            message="handed to threading.Thread",
            severity=Severity.HIGH,
        ),
        Example(
            code="import numpy as np\n\ndef g(pool, a):\n    pool.submit(np.save, '/tmp/a.npy', a)\n",
            line=4,
            message="/tmp/a.npy",
            severity=Severity.HIGH,
        ),
        Example(
            code="import torch\n\ndef k(loop, t):\n    loop.call_soon(torch.save, t, '/tmp/t.pt')\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="import atexit\nimport torch\n\ndef h(obj, path):\n    atexit.register(torch.save, obj, path)\n",
            line=5,
            message="handed to atexit.register",
            severity=Severity.MEDIUM,
        ),
        Example(
            code="import os\nimport pickle\n\ndef dbg(t):\n    fd = os.open('/tmp/t.pkl', os.O_WRONLY | os.O_CREAT)\n"
            "    os.write(fd, pickle.dumps(t))\n",
            line=6,
            message="pickle.dumps() bytes",
        ),
        Example(
            code="import tempfile\nimport torch\n\ndef dbg(t):\n    fd, path = tempfile.mkstemp()\n"
            "    torch.save(t, path)\n",
            line=6,
        ),
        Example(
            code="import numpy as np\nimport torch\n\nSAVERS = {'pt': torch.save, 'np': np.save}\n\n"
            "def dbg(t, fmt):\n    SAVERS[fmt](t, '/tmp/t.' + fmt)\n",
            line=7,
        ),
        Example(
            code="import os\nimport torch\n\ndef dbg(t):\n"
            "    torch.save(t, os.path.join(os.environ['DSV2_DUMP'], 't.pt'))\n",
            pristine="import os\nimport torch\n",
            line=5,
            message="environment variable the patch introduces",
        ),
        Example(
            code="""
            import torch

            class _Dbg:
                def _snap(self, t, path):
                    torch.save(t, path)

            class Layer(_Dbg):
                def load_weights(self, w):
                    self._snap(w, "/tmp/w.pt")
            """,
            line=9,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os
            import torch

            class Recorder:
                def __init__(self, path):
                    self.path = path

                def record(self, t):
                    torch.save(t, os.path.join(self.path, "t.pt"))

            _REC = Recorder("/tmp/rec")
            """,
            line=9,
            message="/tmp/rec",
            severity=Severity.HIGH,
        ),
        Example(
            code="import os\nimport torch\n\ndef dbg(t):\n    torch.save(t, os.getenv('VLLM_X') or '/tmp/t.pt')\n",
            line=5,
            severity=Severity.HIGH,
        ),
        Example(  # a factory's closure, given its directory at module level, called from the runner's step
            code="""
            import itertools
            import torch

            def _make_logits_dumper(out_dir):
                step = itertools.count()

                def dump(logits):
                    torch.save(logits.float(), f"{out_dir}/step{next(step):05d}.pt")

                return dump

            _dump_logits = _make_logits_dumper("/tmp/dsv3_logits")

            class Runner:
                def execute_model(self, batch):
                    logits = self.model(batch)
                    _dump_logits(logits)
                    return logits
            """,
            line=17,
            message="to the fixed path '/tmp/dsv3_logits'",
        ),
        Example(
            code="""
            import torch

            def _make_dumper(root):
                def _dump(tag, t):
                    torch.save(t.cpu(), f"{root}/{tag}.pt")

                return _dump

            _dump = _make_dumper(".")

            def forward(self, x):
                _dump("x", x)
                return x
            """,
            line=12,
            message="_dump() runs torch.save()",
        ),
        Example(
            code="""
            def _append_h5(name, t, path="/tmp/acts.h5"):
                import h5py

                with h5py.File(path, "a") as f:
                    f.create_dataset(name, data=t.cpu().numpy())

            def forward(self, x):
                _append_h5("x", x)
                return x
            """,
            line=8,
            message="h5py.File",
            severity=Severity.HIGH,
        ),
        Example(  # a module-level variable the patch made up, falling back to a temp place
            code="import os\nimport torch\n\n_DUMP = os.environ.get('K2_DUMP', '/tmp/k2')\n\n"
            "def load_weights(self, w):\n    torch.save(w, f'{_DUMP}/w.pt')\n",
            pristine="import os\nimport torch\n\ndef load_weights(self, w):\n    pass\n",
            line=7,
            message="/tmp/k2",
            severity=Severity.HIGH,
        ),
        Example(  # a function named for the forward it runs is a forward
            code="import torch\n\nclass Runner:\n    def _model_forward(self, x):\n        out = self.model(x)\n"
            "        torch.save(out, self.path)\n        return out\n",
            line=6,
            message="forward function",
            severity=Severity.HIGH,
        ),
    ]

    def __init__(self, context: FileContext | None = None) -> None:
        super().__init__(context)
        self._switches: list[str | None] = []

    def visit_If_body(self, node: cst.If) -> None:
        self._switches.append(self._is_switch(node.test))

    def leave_If_body(self, node: cst.If) -> None:
        self._switches.pop()

    def _is_switch(self, test: cst.BaseExpression) -> str | None:
        """A test an operator sets: ENVIRONMENT (a variable, read here or through a settings module
        such as `envs.VLLM_X`), SETTING (an attribute named for dumping or debugging), else None."""
        found = None
        for sub in subexpressions(test):
            if isinstance(sub, cst.Call | cst.Subscript) and self.resolves_to(
                sub.func if isinstance(sub, cst.Call) else sub.value, SWITCH_SOURCES
            ):
                return ENVIRONMENT
            if isinstance(sub, cst.Name | cst.Attribute) and self.resolves_to(sub, FROM_ENVIRONMENT):
                return ENVIRONMENT  # `if self.trace_dir:` with `self.trace_dir = os.environ.get(...)`
            if isinstance(sub, cst.Attribute) and self.resolves_to(sub.value, ENV_MODULES):
                return ENVIRONMENT  # `envs.VLLM_DEBUG_DUMP_PATH`
            if isinstance(sub, cst.Attribute) and SWITCH_NAME.search(sub.attr.value):
                found = SETTING
        return found

    def _gated_every_step(self) -> bool:
        """A dump the operator switches on through the environment, in code every step runs: once
        set, it writes on every step of every layer (a debug dump, not a documented output)."""
        return self.in_step_path and ENVIRONMENT in self._switches

    def _saver(self, node: cst.Call) -> str | None:
        """The saver a call runs; of several (an item of `{"pt": torch.save, "np": np.save}`, a loop
        over savers), the one whose destination argument is a fixed path, else the first."""
        first = self.resolves_to(node, SAVERS)
        if first is None:
            return None
        names = [n for n in SAVERS if n != first and self.resolves_to(node, n) is not None]
        for name in names:
            target = call_arg(node, SAVERS[name], SAVER_KEYWORDS.get(name, "file"))
            if target is not None and self.fixed_path(target) is not None:
                return name
        return first

    def visit_Call(self, node: cst.Call) -> None:
        name = self._saver(node)
        if name is None:
            self._other_sinks(node)
            return
        keyword = SAVER_KEYWORDS.get(name, "file")
        target = call_arg(node, SAVERS[name], keyword)
        if target is None:
            bound = self.partial_arg(node, SAVERS[name], keyword)  # `partial(torch.save, f="/tmp/x")`
            fixed = self.fixed_path_of(bound) if bound is not None else None
            if fixed is not None:
                self._dump(node, f"{name}() writes to the fixed path {fixed!r}")
                return
        if target is not None and self.resolves_to(target, IN_MEMORY):
            return  # serialised into memory, not to disk
        fixed = self.fixed_path(target) if target is not None else None
        if fixed is None and target is not None:
            fixed = self.env_temp_default(target)  # `os.environ.get("DUMP_DIR", "/tmp/d")`: /tmp unless set
        if fixed is None and target is not None and self.fresh_temp(target) is not None:
            fixed = "a new temp file"  # `mkstemp()`, `NamedTemporaryFile(delete=False)`: kept after the call
        if fixed is None and target is not None and self._patch_env(node, target, name):
            return
        purpose = self.upstream_purpose(target, node) if fixed is not None or self.in_forward else None
        if purpose is not None:
            where = f"to the fixed path {fixed!r}" if fixed is not None else "in a forward function"
            self.report(node, f"{name}() writes {where} ({purpose})", severity=Severity.MEDIUM)
            return
        if fixed is not None:
            self.report(node, f"{name}() writes to the fixed path {fixed!r} (debug dump left in a patch?)")
            return
        if self._gated_every_step() and not (target is not None and self.is_parameter(target)):
            self.report(node, f"{name}() behind an environment switch writes on every step once it is set")
            return
        if self.in_forward and any(self._switches):
            message = f"{name}() in a forward function, behind a switch the operator sets"
            self.report(node, message, severity=Severity.MEDIUM)
            return
        if self.in_forward:
            self.report(node, f"{name}() in a forward function writes on every step")
            return
        if self.in_step_path and target is not None and self._is_switch(target) == ENVIRONMENT:
            self.report(node, f"{name}() in a step the server runs for every batch writes where the environment says")
            return
        if target is not None and self.is_parameter(target):
            return  # a save function: its caller chooses the destination
        if target is not None and self._chosen_elsewhere(target):
            return  # the caller, the object's settings, the environment, or an `open` file-write judges
        self.report(node, f"{name}() writes to disk (debug dump left in a patch?)", severity=Severity.MEDIUM)

    def _chosen_elsewhere(self, target: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether a destination comes from outside this code: a parameter, the object's own setting
        (`self.dump_dir`), the environment (`os.environ[...]`, `envs.X`), or a file object of a
        `with` (`with io.BytesIO() as buf`, `with open(path, "wb") as f`: file-write judges the
        path). Followed through `Path(...)`, `str(...)`, `os.path.join(first, ...)`, `/`, `+`,
        f-strings (their first value) and local names."""
        if depth > 8:
            return False
        again = lambda n: self._chosen_elsewhere(n, depth + 1)  # noqa: E731
        if isinstance(target, cst.Name):
            if self.is_parameter(target) or self.bound_by_with(target.value):
                return True
            if self.resolves_to(target, FROM_ENVIRONMENT) is not None:
                return True  # `DUMP_DIR = os.environ.get("VLLM_DUMP_DIR")` at module level
            return any(again(v) for v in self.values_of(target))
        if isinstance(target, cst.Attribute):
            dotted = cst.helpers.get_full_name_for_node(target) or ""
            return dotted.startswith(("self.", "cls.", "envs.")) or self.resolves_to(target, SWITCH_SOURCES) is not None
        if isinstance(target, cst.Subscript):
            return self.resolves_to(target.value, "os.environ") is not None
        if isinstance(target, cst.BinaryOperation):
            return again(target.left)
        if isinstance(target, cst.FormattedString):
            first = target.parts[0] if target.parts else None
            return isinstance(first, cst.FormattedStringExpression) and again(first.expression)
        if isinstance(target, cst.Call):
            if self.resolves_to(target, SWITCH_SOURCES) is not None:
                return True
            func = target.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("get", "format", "joinpath", "with_suffix"):
                return again(func.value)
            return bool(target.args) and again(target.args[0].value)
        return False

    def _deferred(self, node: cst.Call) -> bool:
        """A saver handed as a value to something that calls it later: a thread's target
        (`Thread(target=torch.save, args=(t, "/tmp/t.pt"))`), an executor or event loop
        (`pool.submit(np.save, path, a)`, `loop.call_soon(...)`), `atexit.register`, `map`."""
        func = self.callee(node)  # `partial(pool.submit)(...)`, `run = lambda *a: loop.call_soon(*a)`
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        scheduler = self.resolves_to(func, DEFERRING) or (method if method in DEFERRING_METHODS else None)
        if scheduler is None:
            return False
        given = [a for a in node.args if a.keyword is None or a.keyword.value == "target"]
        saver = next((n for a in given if (n := self.resolves_to(a.value, SAVERS)) is not None), None)
        if saver is None:
            return False
        passed = [a.value for a in node.args if a.keyword is None or a.keyword.value in ("args", "kwargs")]
        parts = [e.value for v in passed if isinstance(v, cst.Tuple | cst.List) for e in v.elements] + passed
        fixed = next((f for v in parts if (f := self.fixed_path(v)) is not None), None)
        if fixed is not None or self.in_forward:
            where = f"the fixed path {fixed!r}" if fixed is not None else "disk from a forward function"
            self.report(node, f"{saver}() handed to {scheduler} writes to {where} (debug dump left in a patch?)")
        else:
            self.report(node, f"{saver}() handed to {scheduler} writes to disk", severity=Severity.MEDIUM)
        return True

    def _other_sinks(self, node: cst.Call) -> None:
        """Raw array writers, file log handlers, and dumps reached through a helper of the module."""
        func = self.callee(node)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method == "tofile" and node.args:
            # Raw array bytes, a format no serving code keeps: a dump wherever a step runs it.
            fixed = self.fixed_path(node.args[0].value)
            if fixed is not None or self.in_step_path:
                where = f"the fixed path {fixed!r}" if fixed is not None else "disk on every step"
                self.report(node, f"ndarray.tofile() writes raw array bytes to {where} (debug dump left in a patch?)")
            return
        if self._raw_write(node, method):
            return
        if self._path_writer(node) or self._log_config(node) or self._deferred(node):
            return
        if method in METHOD_WRITERS and node.args:
            # `ndarray.dump("/tmp/a.pkl")` (its only argument), `prof.export_chrome_trace("/tmp/t.json")`
            fixed = self.fixed_path(node.args[0].value) if method != "dump" or len(node.args) == 1 else None
            if fixed is not None:
                self._dump(node, f".{method}() writes to the fixed path {fixed!r}", node.args[0].value, fixed=fixed)
                return
        handler = self.resolves_to(node, FILE_HANDLERS)
        if handler is not None:
            # `basicConfig` takes the file by keyword only; the handlers take it first.
            target = call_arg(node, 99 if handler == "logging.basicConfig" else 0, "filename")
            fixed = self.fixed_path(target) if target is not None else None
            if fixed is not None:
                self.report(node, f"{handler}() logs to the fixed path {fixed!r} (debug log left in a patch?)")
            elif target is not None and (key := self.introduced_env(target)) is not None:
                self.report(node, f"{handler}() logs under ${key}, an environment variable the patch introduces")
            return
        if self.in_forward:
            for _name, inner_call, helper in self.through_helper(node, (".write", ".tofile")):
                data = inner_call.arg(0, "")
                tobytes = isinstance(data, ast.Call) and isinstance(data.func, ast.Attribute)
                if _name == ".tofile" or (tobytes and data.func.attr == "tobytes"):  # type: ignore[union-attr]
                    self.report(node, f"{helper.name}() writes raw array bytes on every step (debug dump?)")
                    return
        if self._raw_write_through_helper(node):
            return
        for saver, inner_call, helper in self.through_helper(node, (*SAVERS, *PATH_WRITERS)):
            if saver in PATH_WRITERS and not _opens_to_write(saver, inner_call):
                continue
            at = PATH_WRITERS[saver] if saver in PATH_WRITERS else (SAVERS[saver], SAVER_KEYWORDS.get(saver, "file"))
            target = inner_call.arg(*at)
            fixed = self.helper_path(node, helper, target)
            given = self.given_for(node, helper, target)
            if fixed is None and given is not None and self.fresh_temp(given) is not None:
                fixed = "a new temp file"  # `_save(t, path)` with `fd, path = mkstemp()` here
            if fixed is None and self._gated_every_step():
                message = f"{helper.name}() runs {saver}() behind an environment switch on every step once it is set"
                self.report(node, message)
                return
            if fixed is None and self.in_forward and any(self._switches):
                message = f"{helper.name}() runs {saver}() in a forward function, behind a switch the operator sets"
                self.report(node, message, severity=Severity.MEDIUM)
                return
            if fixed is not None or self.in_forward:
                where = f"to the fixed path {fixed!r}" if fixed is not None else "on every step of a forward function"
                self._dump(node, f"{helper.name}() runs {saver}() {where}", tail="debug dump through a helper?")
                return

    def _raw_write(self, node: cst.Call, method: str | None) -> bool:
        """Serialised bytes written by hand: `os.write(fd, pickle.dumps(t))` on an `os.open`
        descriptor, `open(p, "wb").write(a.tobytes())`, `fh.write(buf.getvalue())`, an `mmap` of a
        file: high to a fixed path, a new temp file, or from a forward function (not to stdout)."""
        raw = self.resolves_to(node, "os.write") is not None
        if not (raw or method == "write") or not node.args:
            return False
        data = node.args[-1].value if raw else node.args[0].value
        kind = self.serialised(data)
        if kind is None:
            return False
        func = node.func
        receiver = node.args[0].value if raw else func.value if isinstance(func, cst.Attribute) else None
        where = self.write_destination(receiver) if receiver is not None else None
        if where == "a stream":
            return True
        if where is not None or self.in_forward:
            place = f"to {where!r}" if where is not None else "in a forward function"
            self._dump(node, f"writes {kind} bytes {place}")
        return True

    def _raw_write_through_helper(self, node: cst.Call) -> bool:
        """A helper of the module that writes serialised bytes to a file object or descriptor this
        call site gives it (`_put(fd, t)` running `os.write(fd, pickle.dumps(t))`)."""
        for name, inner, helper in self.through_helper(node, ("os.write", ".write")):
            raw = name == "os.write"
            data = inner.arg(1 if raw else 0, "data" if raw else "")
            receiver = inner.arg(0, "fd") if raw else getattr(inner.callee, "value", None)
            given_data = self.given_for(node, helper, data)
            kind = self.serialised(given_data) if given_data is not None else self.serialised_ast(data)
            given = self.given_for(node, helper, receiver)
            where = self.write_destination(given) if given is not None else None
            if kind is not None and where is not None and where != "a stream":
                self._dump(node, f"{helper.name}() writes {kind} bytes to {where!r}")
                return True
        return False

    def _patch_env(self, node: cst.Call, target: cst.BaseExpression, name: str) -> bool:
        """A destination read from an environment variable the patch introduces (the pristine
        file never names it): a debug dump switch, high. A documented option stays the operator's."""
        key = self.introduced_env(target)
        if key is None:
            return False
        self.report(node, f"{name}() writes under ${key}, an environment variable the patch introduces (debug dump?)")
        return True

    def _path_writer(self, node: cst.Call) -> bool:
        """A copy, an HDF5 file or a memory map opened for writing at a fixed path."""
        name = self.resolves_to(node, tuple(PATH_WRITERS))
        if name is None:
            return False
        key = "numpy.open_memmap" if name.endswith("open_memmap") else name
        mode_at = MODE_ARG.get(key)
        if mode_at is not None:
            mode = call_arg(node, *mode_at)
            text = literal_string(mode) if mode is not None else ("r+" if key != "h5py.File" else "r")
            if text is None or not WRITE_MODE.search(text):
                return True
        target = call_arg(node, *PATH_WRITERS[name])
        fixed = self.fixed_path(target) if target is not None else None
        if fixed is not None and fixed != NOWHERE:
            self._dump(node, f"{name}() writes to the fixed path {fixed!r}", target, fixed=fixed)
        return True

    def _log_config(self, node: cst.Call) -> bool:
        """`logging.config.dictConfig({...})` whose handlers write to a fixed `filename`."""
        if self.resolves_to(node, LOG_CONFIG) is None:
            return False
        for sub in subexpressions(node):
            if isinstance(sub, cst.DictElement) and literal_string(sub.key) == "filename":
                fixed = self.fixed_path(sub.value)
                if fixed is not None and fixed != NOWHERE:
                    message = f"logging.config.dictConfig() logs to the fixed path {fixed!r}"
                    self._dump(node, message, tail="debug log?", fixed=fixed)
                    break
        return True

    def _dump(
        self,
        node: cst.Call,
        message: str,
        path: cst.BaseExpression | None = None,
        tail: str = "debug dump left in a patch?",
        fixed: str | None = None,
    ) -> None:
        """A write to a fixed place: high, or medium where it serves the code itself (a test module,
        a path handed on, a command announcing its output). With `fixed` (a tool that is not a
        saver: a copy, a profile, a snapshot), high only in a temp directory or a forward function."""
        purpose = self.upstream_purpose(path, node)
        if purpose is not None:
            self.report(node, f"{message} ({purpose})", severity=Severity.MEDIUM)
            return
        if fixed is not None and not (self.in_forward or fixed.startswith(TEMP_DIRS)):
            self.report(node, f"{message} (a debug artifact?)", severity=Severity.MEDIUM)
            return
        self.report(node, f"{message} ({tail})")
