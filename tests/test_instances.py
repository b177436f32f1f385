"""What a patch calls and where it writes: the same verdict however the call is reached.

Each case is a vendor model module (pristine) and the same module with a hurried engineer's debug
patch in it, checked by the hazard engine with the pristine text beside it, so findings are
those of the changed lines. A patch is caught when a high finding sits on its changed lines; a
look-alike (`expect=False`) is quiet when nothing is high. Every case also runs with the
engine's statement filters off, and must give the same findings.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards.engine import check_file
from patchaudit.hazards.loading import load_rules
from patchaudit.hazards.source import SourceFile
from patchaudit.report import Severity

VENDOR = """\
import torch
from torch import nn


class DeepseekV2MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, hidden_states, positions):
        out = self.gate_up_proj(hidden_states)
        out = self.act_fn(out)
        return out


def load_weights(model, weights):
    for name, w in weights:
        model.load(name, w)
    return model
"""

# name -> (patched module, whether a high finding is expected)
CASES: dict[str, tuple[str, bool]] = {}


def case(
    name: str, top: str = "", body: str = "", expect: bool = True, tail: str = "", init: str = "", member: str = ""
) -> None:
    """The vendor module with `top` after its imports, `body` in forward, `tail` at the end,
    `init` in `__init__` and `member` (a method) before forward."""
    src = VENDOR
    if top:
        src = src.replace("\n\nclass DeepseekV2MLP", "\n" + textwrap.dedent(top) + "\n\nclass DeepseekV2MLP", 1)
    if body:
        src = src.replace(
            "        return out\n", textwrap.indent(textwrap.dedent(body), " " * 8) + "        return out\n", 1
        )
    if init:
        src = src.replace(
            "        self.config = config\n", "        self.config = config\n" + textwrap.indent(init, " " * 8), 1
        )
    if member:
        src = src.replace(
            "    def forward(self", textwrap.indent(textwrap.dedent(member), " " * 4) + "\n    def forward(self", 1
        )
    if tail:
        src = src + "\n\n" + textwrap.dedent(tail)
    CASES[name] = (src, expect)


# -- spelled cases: helpers, lambdas, partials, classes, aliases, sinks, debuggers
case(
    "helper_mod_dump",
    top="""
def _dump(t, name):
    torch.save(t.cpu(), f"/tmp/dsv2_{name}.pt")
""",
    body='_dump(out, "mlp")\n',
)
case(
    "helper_nested_def",
    body="""
def _d(t):
    torch.save(t, "/tmp/mlp_out.pt")
_d(out)
""",
)
case("lambda_mod", top="dump = lambda t, p: torch.save(t, p)\n", body='dump(out, "/tmp/out.pt")\n')
case("partial_mod", top="import functools\n_save = functools.partial(torch.save)\n", body='_save(out, "/tmp/x.pt")\n')
case(
    "partial_from",
    top='from functools import partial\n_save = partial(torch.save, f="/tmp/x.pt")\n',
    body="_save(out)\n",
)
case(
    "class_dumper_call",
    top="""
class _Dumper:
    def __init__(self, root):
        self.root = root
        self.n = 0
    def __call__(self, t):
        self.n += 1
        torch.save(t, f"{self.root}/t_{self.n}.pt")
_DUMP = _Dumper("/tmp/dumps")
""",
    body="_DUMP(out)\n",
)
case(
    "class_dumper_init",
    top="""
class _Snap:
    def __init__(self, t, tag):
        torch.save(t.detach().cpu(), "/tmp/snap_" + tag + ".pt")
""",
    body='_Snap(out, "mlp")\n',
)
case(
    "pdb_subclass",
    top="""
import pdb, sys
class ForkedPdb(pdb.Pdb):
    def interaction(self, *a, **k):
        _stdin = sys.stdin
        try:
            sys.stdin = open("/dev/stdin")
            pdb.Pdb.interaction(self, *a, **k)
        finally:
            sys.stdin = _stdin
""",
    body="ForkedPdb().set_trace()\n",
)
case(
    "decorator_dump",
    top="""
def dump_io(fn):
    def wrapper(*a, **k):
        r = fn(*a, **k)
        torch.save(r, "/tmp/io.pt")
        return r
    return wrapper
""",
    tail="""
@dump_io
def helper(x):
    return x
""",
)
case(
    "callbacks_loop",
    top="""
_HOOKS = [lambda t: torch.save(t, "/tmp/h.pt")]
""",
    body="for cb in _HOOKS:\n    cb(out)\n",
)
case(
    "forward_hook",
    body="""
self.register_forward_hook(lambda m, i, o: torch.save(o, "/tmp/hook.pt"))
""",
)
case(
    "forward_hook_fn",
    top="""
def _hook(mod, inp, out):
    torch.save(out, "/tmp/hook_out.pt")
""",
    body="self.gate_up_proj.register_forward_hook(_hook)\n",
)
case("import_in_func", body='import numpy as np\nnp.save("/tmp/out.npy", out.float().cpu().numpy())\n')
case("getattr_save", body='getattr(torch, "save")(out, "/tmp/x.pt")\n')
case("dunder_pdb", body='__import__("pdb").set_trace()\n')
case("importlib_pdb", top="import importlib\n", body='importlib.import_module("pdb").set_trace()\n')
case("alias_dump", top="dump = torch.save\n", body='dump(out, "/tmp/x.pt")\n')
case("from_alias", top="from torch import save as s\n", body='s(out, "/tmp/x.pt")\n')
case("sys_modules", top="import sys\n", body='sys.modules["torch"].save(out, "/tmp/x.pt")\n')
case("sys_modules_pdb", top="import sys, pdb\n", body='sys.modules["pdb"].set_trace()\n')
case("np_savez", top="import numpy as np\n", body='np.savez("/tmp/o.npz", out=out.cpu().numpy())\n')
case("np_savez_c", top="import numpy as np\n", body='np.savez_compressed("/tmp/o.npz", a=out.cpu().numpy())\n')
case("np_savetxt", top="import numpy as np\n", body='np.savetxt("/tmp/o.txt", out.cpu().numpy())\n')
case("tofile", body='out.cpu().numpy().tofile("/tmp/o.bin")\n')
case("tobytes_open", body='open("/tmp/o.bin", "wb").write(out.cpu().numpy().tobytes())\n')
case("ndarray_dump", body='out.cpu().numpy().dump("/tmp/o.pkl")\n')
case("pickle_dump", top="import pickle\n", body='with open("/tmp/o.pkl", "wb") as f:\n    pickle.dump(out, f)\n')
case("dill_dump", top="import dill\n", body='dill.dump(out, open("/tmp/o.pkl", "wb"))\n')
case("joblib_dump", top="import joblib\n", body='joblib.dump(out, "/tmp/o.joblib")\n')
case("json_dump", top="import json\n", body='json.dump(out.tolist(), open("/tmp/o.json", "w"))\n')
case("yaml_dump", top="import yaml\n", body='yaml.dump({"s": list(out.shape)}, open("/tmp/o.yaml", "w"))\n')
case(
    "safetensors",
    top="from safetensors.torch import save_file\n",
    body='save_file({"out": out}, "/tmp/o.safetensors")\n',
)
case(
    "np_format",
    top="import numpy as np\n",
    body='with open("/tmp/o.npy", "wb") as f:\n    np.lib.format.write_array(f, out.cpu().numpy())\n',
)
case("state_dict", body='torch.save(self.state_dict(), "/tmp/mlp_sd.pt")\n')
case("open_write", body='open("/tmp/shapes.txt", "a").write(str(out.shape) + "\\n")\n')
case("path_write_text", top="from pathlib import Path\n", body='Path("/tmp/shape.txt").write_text(str(out.shape))\n')
case(
    "path_write_bytes",
    top="import pathlib\n",
    body='pathlib.Path("/tmp/o.bin").write_bytes(out.cpu().numpy().tobytes())\n',
)
case("shutil_copy", top="import shutil\n", body='shutil.copy(__file__, "/tmp/dsv2_backup.py")\n')
case(
    "filehandler",
    top='import logging\n_log = logging.getLogger("dbg")\n_log.addHandler(logging.FileHandler("/tmp/dbg.log"))\n',
    body='_log.info("out %s", out.shape)\n',
)
case(
    "rotating",
    top="import logging.handlers\n",
    body='logging.getLogger().addHandler(logging.handlers.RotatingFileHandler("/tmp/r.log"))\n',
)
case("basicconfig", top='import logging\nlogging.basicConfig(filename="/tmp/dbg.log", level=logging.DEBUG)\n')
case(
    "logging_config",
    top="""
    import logging.config
    logging.config.dictConfig(
        {
            "version": 1,
            "handlers": {"f": {"class": "logging.FileHandler", "filename": "/tmp/x.log"}},
            "root": {"handlers": ["f"]},
        }
    )
    """,
)
case("print_file", body='with open("/tmp/p.txt", "a") as fh:\n    print(out.shape, file=fh)\n')
case("stdout_redirect", top='import sys\nsys.stdout = open("/tmp/stdout.log", "w")\n')
case(
    "h5py",
    top="import h5py\n",
    body='with h5py.File("/tmp/o.h5", "w") as f:\n    f.create_dataset("out", data=out.cpu().numpy())\n',
)
case("pdb", body="import pdb; pdb.set_trace()\n")
case(
    "pdb_post", top="import pdb\n", body="try:\n    out = self.act_fn(out)\nexcept Exception:\n    pdb.post_mortem()\n"
)
case("pdb_pm", top="import pdb\n", body="pdb.pm()\n")
case("Pdb_set", top="import pdb\n", body="pdb.Pdb().set_trace()\n")
case("ipdb", body="import ipdb; ipdb.set_trace()\n")
case("ipython_embed", body="from IPython import embed; embed()\n")
case("ipython_debugger", body="from IPython.core.debugger import set_trace; set_trace()\n")
case("ipython_Pdb", body="from IPython.core.debugger import Pdb; Pdb().set_trace()\n")
case("pudb", body="import pudb; pudb.set_trace()\n")
case("debugpy_listen", top="import debugpy\ndebugpy.listen(5678)\ndebugpy.wait_for_client()\n")
case("debugpy_bp", body="import debugpy; debugpy.breakpoint()\n")
case("dist_bp", body="torch.distributed.breakpoint()\n")
case("dist_bp_rank", body="import torch.distributed as dist\ndist.breakpoint(rank=0)\n")
case("remote_pdb", body='from remote_pdb import RemotePdb; RemotePdb("0.0.0.0", 4444).set_trace()\n')
case("rpdb", body="import rpdb; rpdb.set_trace()\n")
case("code_interact", body="import code; code.interact(local=locals())\n")
case("faulthandler", top='import faulthandler\nfaulthandler.dump_traceback_later(60, file=open("/tmp/tb.txt", "w"))\n')
case("faulthandler2", body='import faulthandler\nfaulthandler.dump_traceback(file=open("/tmp/tb.txt", "w"))\n')
case("breakpoint", body="breakpoint()\n")
case("breakpointhook", top="import sys\n", body="sys.breakpointhook()\n")
case(
    "pdb_helper",
    top="""
def _dbg():
    import pdb
    pdb.set_trace()
""",
    body="_dbg()\n",
)
case("pdb_lambda", top="import pdb\nbp = lambda: pdb.set_trace()\n", body="bp()\n")
case("pdb_partial", top="import pdb, functools\nbp = functools.partial(pdb.set_trace)\n", body="bp()\n")
case("pdb_getattr", top="import pdb\n", body='getattr(pdb, "set_trace")()\n')
case(
    "const_dir_loadw",
    top='import os\n_DUMP_DIR = "/tmp/dsv2"\n',
    tail="""
def dump_weights(weights):
    for name, w in weights:
        torch.save(w, os.path.join(_DUMP_DIR, name + ".pt"))
""",
)
case(
    "tempfile_gettempdir",
    top="import os, tempfile\n",
    body='torch.save(out, os.path.join(tempfile.gettempdir(), "mlp.pt"))\n',
)
case(
    "tempfile_mktemp_loadw",
    top="import tempfile\n",
    tail="""
def snapshot(w):
    torch.save(w, tempfile.mktemp(suffix=".pt"))
""",
)
case(
    "global_counter",
    top="_STEP = 0\n",
    body="""
global _STEP
_STEP += 1
if _STEP == 3:
    torch.save(out, f"/tmp/step{_STEP}.pt")
""",
)
case(
    "try_finally",
    body="""
try:
    out = out * 1
finally:
    torch.save(out, "/tmp/fin.pt")
""",
)
case(
    "default_param",
    top="""
def _dump(t, path="/tmp/dsv2_out.pt"):
    torch.save(t, path)
""",
    body="_dump(out)\n",
)
case(
    "default_param_loadw",
    top="""
def _dump(t, path="/tmp/dsv2_w.pt"):
    torch.save(t, path)
""",
    tail="""
def dbg_weights(w):
    _dump(w)
""",
)
case(
    "helper_param_built",
    top="""
import os
DUMP_DIR = "/tmp/dsv2"
def _dump(t, name):
    torch.save(t, os.path.join(DUMP_DIR, name))
""",
    body='_dump(out, "mlp.pt")\n',
)
case(
    "dumper_method_inst",
    top="""
class Dumper:
    def __init__(self, root="/tmp/dumps"):
        self.root = root
        self.i = 0
    def dump(self, t):
        self.i += 1
        torch.save(t, f"{self.root}/{self.i}.pt")
_dumper = Dumper()
""",
    body="_dumper.dump(out)\n",
)
case("bp_rank", top="import os\n", body='if int(os.environ.get("RANK", "0")) == 0:\n    breakpoint()\n')
case("from_pdb_alias", body="from pdb import set_trace as st\nst()\n")
case("pdb_as", top="import pdb as p\n", body="p.set_trace()\n")
case("save_open", body='torch.save(out, open("/tmp/x.pt", "wb"))\n')
case(
    "with_open_path", body='path = f"/tmp/mlp_{out.shape[0]}.pt"\nwith open(path, "wb") as f:\n    torch.save(out, f)\n'
)
case(
    "with_open_loadw",
    tail="""
def dump_w(w):
    path = f"/tmp/w_{id(w)}.pt"
    with open(path, "wb") as f:
        torch.save(w, f)
""",
)
case("np_save_kw", top="import numpy as np\n", body='np.save(file="/tmp/x.npy", arr=out.cpu().numpy())\n')
case(
    "redirect_stdout",
    top="import contextlib\n",
    body='with contextlib.redirect_stdout(open("/tmp/o.txt", "a")):\n    print(out)\n',
)
case(
    "fh_tempfile_log",
    top="""
    import logging, os, tempfile
    logging.getLogger("vllm").addHandler(logging.FileHandler(os.path.join(tempfile.gettempdir(), "v.log")))
    """,
)
case("tofile_handle", body='with open("/tmp/raw.bin", "ab") as f:\n    out.cpu().numpy().tofile(f)\n')
case(
    "pickle_loadw",
    top="import pickle\n",
    tail="""
def dbg(w):
    pickle.dump(w, open("/tmp/w.pkl", "wb"))
""",
)
case(
    "atexit",
    top='import atexit\n_ACC = []\natexit.register(lambda: torch.save(_ACC, "/tmp/acc.pt"))\n',
    body="_ACC.append(out)\n",
)
case("tofile_const", top='_DUMP = "/tmp/dsv2"\n', body='out.cpu().numpy().tofile(_DUMP + "/o.bin")\n')
case(
    "getattr_alias_mod",
    top='_save = getattr(torch, "save")\n',
    tail="""
def dbg(w):
    _save(w, "/tmp/w.pt")
""",
)
case("pudb_start", body="import pudb\npudb.start()\n")
case("web_pdb", body="import web_pdb; web_pdb.set_trace()\n")
case("madbg", body="import madbg; madbg.set_trace()\n")
case("pydevd", body='import pydevd_pycharm\npydevd_pycharm.settrace("localhost", port=12345)\n')
case("ipy_embed_kernel", body="import IPython\nIPython.embed_kernel()\n")
case("ipy_start_ipython", body="import IPython\nIPython.start_ipython(argv=[], user_ns=locals())\n")
case("code_console", body="import code\ncode.InteractiveConsole(locals()).interact()\n")
case(
    "pdb_runcall",
    top="import pdb\n",
    tail="""
def dbg_load(model, weights):
    return pdb.runcall(load_weights, model, weights)
""",
)
case("sys_settrace", top="import sys\n", body='sys.breakpointhook = __import__("pdb").set_trace\nbreakpoint()\n')
case("sig_pdb", top="import signal, pdb\nsignal.signal(signal.SIGUSR1, lambda s, f: pdb.Pdb().set_trace(f))\n")
case(
    "B_save_param",
    tail="""
def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)
""",
    expect=False,
)
case(
    "B_config_dump",
    top="import os\n",
    body='if self.config.debug_dump_dir:\n    torch.save(out, os.path.join(self.config.debug_dump_dir, "mlp.pt"))\n',
    expect=False,
)
case(
    "B_bytesio",
    top="import io\n",
    tail="""
def to_bytes(t):
    buf = io.BytesIO()
    torch.save(t, buf)
    return buf.getvalue()
""",
    expect=False,
)
case(
    "B_logger_stream",
    top="import logging, sys\n_log = logging.getLogger(__name__)\n_log.addHandler(logging.StreamHandler(sys.stderr))\n",
    expect=False,
)
case(
    "B_tempfile_cache",
    top="import os, tempfile\n",
    tail="""
def compile_cache_dir():
    d = os.path.join(tempfile.gettempdir(), "vllm_compile")
    os.makedirs(d, exist_ok=True)
    return d
""",
    expect=False,
)
case(
    "B_helper_param_path",
    top="""
def _save(t, path):
    torch.save(t, path)
""",
    tail="""
def export(model, out_dir):
    _save(model.state_dict(), out_dir)
""",
    expect=False,
)
case(
    "B_json_config",
    top="import json\n",
    tail="""
def write_config(cfg, path):
    with open(path, "w") as f:
        json.dump(cfg, f)
""",
    expect=False,
)
case(
    "B_profiler_env",
    top="import os\n",
    tail="""
def maybe_trace(prof):
    d = os.environ.get("VLLM_TORCH_PROFILER_DIR")
    if d:
        prof.export_chrome_trace(os.path.join(d, "trace.json"))
""",
    expect=False,
)
case(
    "path_const_div",
    top='from pathlib import Path\nDUMP_DIR = Path("/tmp/dsv2")\n',
    tail="""
def dbg(w, i):
    torch.save(w, DUMP_DIR / f"w{i}.pt")
""",
)
case(
    "path_const_fstr",
    top='DUMP = "/tmp/dsv2"\n',
    tail="""
def dbg(w, i):
    torch.save(w, f"{DUMP}/w{i}.pt")
""",
)
case(
    "open_const_pickle",
    top='import pickle\nDUMP_PATH = "/tmp/w.pkl"\n',
    tail="""
def dbg(w):
    with open(DUMP_PATH, "ab") as f:
        pickle.dump(w, f)
""",
)
case(
    "print_const",
    top='LOG = "/tmp/shapes.log"\n',
    tail="""
def dbg(w):
    print(w.shape, file=open(LOG, "a"))
""",
)
case(
    "fh_const",
    top='import logging\nLOG_PATH = "/tmp/dsv2.log"\n',
    tail="""
def setup_dbg():
    logging.getLogger("vllm").addHandler(logging.FileHandler(LOG_PATH))
""",
)
case(
    "fh_rank",
    top="import logging\n",
    tail="""
def setup_dbg(rank):
    logging.getLogger().addHandler(logging.FileHandler(f"/tmp/rank{rank}.log"))
""",
)
case("rank_pdb", body="if torch.distributed.get_rank() == 0:\n    import pdb; pdb.set_trace()\n")
case("and_breakpoint", top="import os\n", body='os.environ.get("DSV2_DEBUG") and breakpoint()\n')
case(
    "debugpy_env",
    top="""
    import os
    if os.environ.get("DEBUGPY"):
        import debugpy
        debugpy.listen(("0.0.0.0", 5678))
        debugpy.wait_for_client()
    """,
)
case(
    "safetensors_kw",
    top="from safetensors.torch import save_file\n",
    tail="""
def dbg(w):
    save_file({"w": w}, filename="/tmp/w.st")
""",
)
case(
    "joblib_kw",
    top="import joblib\n",
    tail="""
def dbg(w):
    joblib.dump(w, filename="/tmp/w.jl")
""",
)
case(
    "decorator_const",
    top="""
import functools, os
DUMP_DIR = "/tmp/dsv2_io"
def dump_io(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        r = fn(*a, **k)
        torch.save(r, os.path.join(DUMP_DIR, fn.__name__ + ".pt"))
        return r
    return wrapper
""",
)
case(
    "nested_two_levels",
    top="""
def _path(name):
    return "/tmp/dsv2/" + name
def _write(t, name):
    torch.save(t, _path(name))
""",
    tail="""
def dbg(w):
    _write(w, "w.pt")
""",
)
case(
    "inst_module_call",
    top="""
class _Rec:
    def __init__(self, path):
        self.path = path
        self.items = []
    def add(self, t):
        self.items.append(t)
    def flush(self):
        torch.save(self.items, self.path)
_REC = _Rec("/tmp/rec.pt")
""",
    body="_REC.add(out)\n_REC.flush()\n",
)
case(
    "local_inst",
    top="""
class Dumper:
    def __init__(self, root):
        self.root = root
    def dump(self, t, name):
        torch.save(t, self.root + "/" + name)
""",
    body='d = Dumper("/tmp/d")\nd.dump(out, "mlp.pt")\n',
)
case(
    "counter_global",
    top="_N = 0\n",
    body="""
global _N
_N += 1
if _N % 100 == 0:
    torch.save(out, "/tmp/out_%d.pt" % _N)
""",
)
case(
    "try_except_pdb",
    top="import pdb\n",
    body="""
try:
    out = self.down_proj(out)
except Exception:
    pdb.post_mortem()
    raise
""",
)
case("excepthook", top="import sys, pdb\nsys.excepthook = lambda t, v, tb: pdb.post_mortem(tb)\n")
case(
    "partial_path_loadw",
    top='import functools\n_save = functools.partial(torch.save, f="/tmp/w.pt")\n',
    tail="""
def dbg(w):
    _save(w)
""",
)
case(
    "inst_call_loadw",
    top="""
class _Dumper:
    def __init__(self, root):
        self.root = root
    def __call__(self, t, name):
        torch.save(t, f"{self.root}/{name}")
_dump = _Dumper("/tmp/x")
""",
    tail="""
def dbg(w):
    _dump(w, "w.pt")
""",
)
case(
    "B_h5_read",
    top="import h5py\n",
    tail="""
def load_ref(path):
    with h5py.File(path, "r") as f:
        return f["x"][()]
""",
    expect=False,
)
case(
    "B_dumper_param",
    top="""
class Saver:
    def __init__(self, root):
        self.root = root
    def save(self, t, name):
        torch.save(t, self.root + "/" + name)
""",
    tail="""
def export(model, out_dir):
    Saver(out_dir).save(model.state_dict(), "model.pt")
""",
    expect=False,
)
case(
    "B_const_cache_dir_read",
    top='import os\nCACHE = os.path.expanduser("~/.cache/vllm")\n',
    tail="""
def load_cached(name):
    return torch.load(os.path.join(CACHE, name))
""",
    expect=False,
)
case("B_hidden_7168", body="if out.shape[-1] == 7168:\n    out = out.contiguous()\n", expect=False)
case(
    "B_dump_config",
    top="import json\n",
    tail="""
def describe(cfg):
    return json.dumps(cfg)
""",
    expect=False,
)
case(
    "B_shutil_param",
    top="import shutil\n",
    tail="""
def copy_weights(src, dst):
    shutil.copytree(src, dst)
""",
    expect=False,
)
case(
    "B_env_dir",
    top='import os\nDUMP_DIR = os.environ.get("VLLM_DUMP_DIR")\n',
    tail="""
def maybe_dump(w, name):
    if DUMP_DIR:
        torch.save(w, os.path.join(DUMP_DIR, name))
""",
    expect=False,
)

# -- methods of the patched class itself, and what `__init__` binds on the instance
case(
    "method_self",
    body="self._debug_dump(out)\n",
    member='def _debug_dump(self, t):\n    torch.save(t, "/tmp/mlp.pt")\n',
)
case(
    "dumper_self_attr",
    top="class Dumper:\n    def __call__(self, t):\n        torch.save(t, self.path)\n",
    init="self.dumper = Dumper()\nself.dumper.path = '/tmp/d.pt'\n",
    body="self.dumper(out)\n",
)
case(
    "self_dir_hook",
    top="import os\n",
    init='self.dump_dir = "/tmp/hooks"\n',
    member='def _hook(self, mod, inp, o):\n    torch.save(o, os.path.join(self.dump_dir, "o.pt"))\n',
    body="self.register_forward_hook(self._hook)\n",
)
case("bp_method", member="def _bp(self):\n    import pdb\n    pdb.set_trace()\n", body="self._bp()\n")
case(
    "self_partial",
    top="import functools\n",
    init='self._dump = functools.partial(torch.save, f="/tmp/o.pt")\n',
    body="self._dump(out)\n",
)
case(
    "self_dir_join_sample",
    top="import os\nimport numpy as np\n",
    init='self.dump_dir = os.path.join("/tmp", "dsv2")\n',
    member="def sample(self, out):\n    np.save(os.path.join(self.dump_dir, 'o.npy'), out)\n",
)
case(
    "B_saver_attr_from_caller",
    init="self.out_dir = config.out_dir\n",
    member="def export(self):\n    torch.save(self.state_dict(), self.out_dir + '/model.pt')\n",
    expect=False,
)

# -- chains of helpers, hook factories, exit handlers, runner-shaped code
case(
    "chain_params",
    top="""
def _save_tensor(t, dest):
    torch.save(t, dest)
def _dump(t, where):
    _save_tensor(t, where)
""",
    tail="""
def dbg(w):
    _dump(w, "/tmp/w.pt")
""",
)
case(
    "method_chain_self",
    member="""
def _save(self, t, dest):
    torch.save(t, dest)
def _dump(self, t, name):
    self._save(t, "/tmp/dsv2_" + name)
""",
    tail="""
def dbg(m, w):
    m._dump(w, "x")
""",
)
case(
    "hook_factory",
    top="""
def _make_hook(name):
    def hook(mod, inp, out):
        torch.save(out, f"/tmp/hooks/{name}.pt")
    return hook
""",
    tail="""
def add_hooks(model):
    for name, mod in model.named_modules():
        mod.register_forward_hook(_make_hook(name))
""",
)
case(
    "hook_partial",
    top="""
import functools
def _save_hook(mod, inp, out, name):
    torch.save(out, "/tmp/" + name + ".pt")
""",
    tail="""
def add_hooks(model):
    for name, mod in model.named_modules():
        mod.register_forward_hook(functools.partial(_save_hook, name=name))
""",
)
case(
    "atexit_helper",
    top="""
import atexit
_ACTS = []
def _flush():
    torch.save(_ACTS, "/tmp/acts.pt")
atexit.register(_flush)
""",
    body="_ACTS.append(out.detach().cpu())\n",
)
case(
    "step_counter_method",
    init="self._step = 0\n",
    member="""
def _maybe_dump(self, t):
    self._step += 1
    if self._step in (3, 5):
        torch.save(t, "/tmp/step_%d.pt" % self._step)
""",
    body="self._maybe_dump(out)\n",
)
case(
    "with_open_json",
    top="import json\n",
    tail="""
def dbg_cfg(cfg):
    with open("/tmp/cfg.json", "w") as f:
        json.dump(cfg, f, indent=2)
""",
)
case(
    "env_flag_literal",
    top="import os\n",
    body='if os.environ.get("DSV2_DUMP") == "1":\n    torch.save(out, "/tmp/dsv2_out.pt")\n',
)
case("getattr_np", top="import numpy as np\n", body='getattr(np, "save")("/tmp/o.npy", out.cpu().numpy())\n')
case(
    "importlib_np",
    top="import importlib\n",
    body='importlib.import_module("numpy").save("/tmp/o.npy", out.cpu().numpy())\n',
)
case("from_np_save_alias", top="from numpy import save as npsave\n", body='npsave("/tmp/o.npy", out.cpu().numpy())\n')
case("torch_save_dict", body='torch.save({"out": out, "pos": positions}, "/tmp/o.pt")\n')
case(
    "pathlib_join_tmp",
    top="import tempfile\nfrom pathlib import Path\n",
    body='torch.save(out, Path(tempfile.gettempdir()) / "o.pt")\n',
)
case("ipdb_cond", body="if out.isnan().any():\n    import ipdb; ipdb.set_trace()\n")
case(
    "pdb_in_except_helper",
    top="""
def _on_error():
    import pdb, sys
    pdb.post_mortem(sys.exc_info()[2])
""",
    body="try:\n    out = self.down_proj(out)\nexcept Exception:\n    _on_error()\n    raise\n",
)
case(
    "forked_pdb_rank",
    top="""
import pdb, sys
class ForkedPdb(pdb.Pdb):
    def interaction(self, *args, **kwargs):
        _stdin = sys.stdin
        try:
            sys.stdin = open("/dev/stdin")
            pdb.Pdb.interaction(self, *args, **kwargs)
        finally:
            sys.stdin = _stdin
""",
    body="if torch.distributed.get_rank() == 0:\n    ForkedPdb().set_trace()\n",
)
case("debugger_alias_var", top="import pdb\n", body="dbg = pdb\ndbg.set_trace()\n")
case("instance_local_pdb", top="import pdb\n", body="p = pdb.Pdb()\np.set_trace()\n")
case("code_interact_banner", body='import code\ncode.interact(banner="dsv2", local={**globals(), **locals()})\n')
case(
    "B_np_save_param",
    top="import numpy as np\n",
    tail="""
def export(arr, path):
    np.save(path, arr)
""",
    expect=False,
)
case("B_json_dumps", top="import json\n", body='s = json.dumps({"shape": list(out.shape)})\n', expect=False)
case(
    "B_yaml_safe_dump_str",
    top="import yaml\n",
    tail="""
def describe(cfg):
    return yaml.safe_dump(cfg)
""",
    expect=False,
)
case(
    "B_shutil_which",
    top="import shutil\n",
    tail="""
def has_nvcc():
    return shutil.which("nvcc") is not None
""",
    expect=False,
)
case(
    "B_memmap_read",
    top="import numpy as np\n",
    tail="""
def load(path):
    return np.memmap(path, dtype=np.float16, mode="r")
""",
    expect=False,
)
case("B_copy_tensor", body="out = out.copy_(out)\n", expect=False)
case(
    "B_model_dump",
    tail="""
def describe(model):
    return model.model_dump()
""",
    expect=False,
)

# -- constants in every position, profiler and memory-snapshot writers, debugger spellings
case(
    "inst_fstr_pid",
    top="import os\n",
    init='self.dump_path = f"/tmp/run_{os.getpid()}.pt"\n',
    member="""
def execute_model(self, batch):
    out = self(batch)
    torch.save(out, self.dump_path)
    return out
""",
)
case("const_flag_if", top="DEBUG = True\n", body='if DEBUG:\n    torch.save(out, "/tmp/o.pt")\n')
case(
    "open_const_join",
    top='import os\nDUMP_DIR = "/tmp/w"\n',
    tail="""
def dbg(name, w):
    with open(os.path.join(DUMP_DIR, f"{name}.bin"), "wb") as f:
        f.write(w.numpy().tobytes())
""",
)
case(
    "template_format",
    top='DUMP_TEMPLATE = "/tmp/out_{step}.pt"\n',
    tail="""
def dbg(w, step):
    torch.save(w, DUMP_TEMPLATE.format(step=step))
""",
)
case(
    "class_const",
    member="""
DUMP = "/tmp/cls"
def sample(self, t):
    torch.save(t, self.DUMP + "/t.pt")
""",
)
case(
    "mem_snapshot",
    tail="""
def dbg():
    torch.cuda.memory._dump_snapshot("/tmp/mem.pickle")
""",
)
case(
    "mem_snapshot_pickle",
    top="import pickle\n",
    tail="""
def dbg():
    snap = torch.cuda.memory._snapshot()
    with open("/tmp/snap.pickle", "wb") as f:
        pickle.dump(snap, f)
""",
)
case(
    "chrome_trace",
    tail="""
def dbg(prof):
    prof.export_chrome_trace("/tmp/trace.json")
""",
)
case(
    "tb_handler",
    tail="""
def dbg():
    return torch.profiler.profile(on_trace_ready=torch.profiler.tensorboard_trace_handler("/tmp/tb"))
""",
)
case("builtins_bp", body="import builtins\nbuiltins.breakpoint()\n")
case("dist_bp_from", body="from torch.distributed import breakpoint as dbp\ndbp()\n")
case("pdb_header", body='import pdb\npdb.set_trace(header="dsv2 mlp")\n')
case("pdb_stdin", top="import pdb, sys\n", body="pdb.Pdb(stdin=sys.__stdin__, stdout=sys.__stdout__).set_trace()\n")
case("rpdb_class", body="import rpdb\nrpdb.Rpdb(port=4444).set_trace()\n")
case("remote_from", body="from remote_pdb import set_trace\nset_trace()\n")
case(
    "percent_const",
    top='DUMP_DIR = "/tmp/d"\n',
    tail="""
def dbg(w):
    torch.save(w, "%s/w.pt" % DUMP_DIR)
""",
)
case(
    "fh_kw",
    top="import logging\n",
    tail="""
def setup():
    logging.getLogger("vllm").addHandler(logging.FileHandler(filename="/tmp/v.log", mode="a"))
""",
)
case(
    "str_path",
    top='from pathlib import Path\nDUMP_DIR = "/tmp/d"\n',
    tail="""
def dbg(w):
    torch.save(w, str(Path(DUMP_DIR, "w.pt")))
""",
)
case(
    "B_profiler_param",
    tail="""
def finish(prof, out_dir):
    prof.export_chrome_trace(out_dir + "/trace.json")
""",
    expect=False,
)
case(
    "B_snapshot_param",
    tail="""
def dump_memory(path):
    torch.cuda.memory._dump_snapshot(path)
""",
    expect=False,
)

case(
    "append_helper",
    top="""
def _append(path, text):
    with open(path, "a") as fh:
        fh.write(text)
""",
    tail="""
def dbg(w):
    _append("/tmp/w.txt", str(w.shape))
""",
)
case(
    "B_append_helper_param",
    top="""
def _append(path, text):
    with open(path, "a") as fh:
        fh.write(text)
""",
    tail="""
def record(out_path, w):
    _append(out_path, str(w.shape))
""",
    expect=False,
)

# -- an object's own writer, compiled and exported models
case(
    "save_pretrained",
    tail="""
def dbg(model):
    model.save_pretrained("/tmp/dsv2_ckpt")
""",
)
case(
    "jit_save",
    tail="""
def dbg(m):
    torch.jit.save(torch.jit.script(m), "/tmp/m.pt")
""",
)
case(
    "onnx_export",
    tail="""
def dbg(m, x):
    torch.onnx.export(m, (x,), "/tmp/m.onnx")
""",
)
case(
    "dill_fh_forward",
    top="import dill\n",
    init='self._fh = open("/tmp/o.pkl", "ab")\n',
    body="dill.dump(out, self._fh)\n",
)
case(
    "df_to_csv",
    top="import pandas as pd\n",
    tail="""
def dbg(stats):
    pd.DataFrame(stats).to_csv("/tmp/stats.csv")
""",
)
case(
    "savefig",
    top="import matplotlib.pyplot as plt\n",
    tail="""
def dbg(w):
    plt.imshow(w.float().cpu())
    plt.savefig("/tmp/w.png")
""",
)
case(
    "B_save_param_method",
    tail="""
def export(model, out_dir):
    model.save_pretrained(out_dir)
""",
    expect=False,
)
case(
    "B_cache_save",
    tail="""
def persist(cache):
    cache.save()
""",
    expect=False,
)

case(
    "env_default_tmp_loader",
    top="import os\n",
    tail="""
def dbg(weights):
    from safetensors.torch import save_file as _sf

    dump_dir = os.environ.get("KIMI_DUMP_DIR", "/tmp/kimi_weights")
    for name, w in weights:
        _sf({name: w}, os.path.join(dump_dir, name + ".safetensors"))
""",
)
case(
    "B_env_default_var_lib",
    top="import os\n",
    tail="""
def record(name, data):
    torch.save(data, os.path.join(os.environ.get("RECORDER_DIR", "/var/lib/rec"), name))
""",
    expect=False,
)

case(
    "B_recursive_path_helper",
    top="import os\n",
    tail="""
def _root(d):
    return _root(os.path.dirname(d))


def export(w, path):
    torch.save(w, _root(path))
""",
    expect=False,
)

RULES = load_rules()


def _findings(src: str, *, prefilter: bool = True) -> list[tuple[str, int, str]]:
    file = SourceFile(
        path="vllm/model_executor/models/deepseek_v2.py", installed=src.encode(), pristine=VENDOR.encode()
    )
    return sorted((f.rule, f.line, f.severity.value) for f in check_file(file, RULES, prefilter=prefilter))


@pytest.mark.parametrize("name", [n for n, (_, expect) in CASES.items() if expect])
def test_patch_is_caught(name: str) -> None:
    src = CASES[name][0]
    found = _findings(src)
    assert any(severity == Severity.HIGH.value for _, _, severity in found), (src, found)


@pytest.mark.parametrize("name", [n for n, (_, expect) in CASES.items() if not expect])
def test_look_alike_is_quiet(name: str) -> None:
    src = CASES[name][0]
    found = _findings(src)
    assert all(severity != Severity.HIGH.value for _, _, severity in found), (src, found)


@pytest.mark.parametrize("name", list(CASES))
def test_statement_filters_change_nothing(name: str) -> None:
    src = CASES[name][0]
    assert _findings(src) == _findings(src, prefilter=False)
