"""Debug patches of one model file, written the ways a hurried engineer writes them, through the engine.

Each case edits the same vendor model file (a module with imports, a class with `__init__`, a
`forward` with a dtype guard and a `load_weights`) the way a patch would: a dump, a debugger, a
process or a connection, a guard turned off, reached through code the patch defines (decorators,
context managers, hooks, partials, monkeypatched methods, helpers, threads, `getattr` with a
constant). A patch must give a HIGH finding on a line it changed; a look-alike (a save function
whose path is a parameter, a documented dump setting, a guard moved into a helper, an assert
written as if/raise, a kernel-size branch) must give none.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

BASE = """
import os
import torch
from torch import nn

from vllm.logger import init_logger

logger = init_logger(__name__)
#HEAD


class DeepseekV2MLP(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        self.hidden_size = config.hidden_size
        #INIT

    def forward(self, hidden_states, positions):
        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")
        out = self.mlp(hidden_states)
        #FWD
        return out

    def load_weights(self, weights):
        loaded = set()
        for name, w in weights:
            loaded.add(name)
        #LOAD
        return loaded
"""

GUARD = """\
        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")"""
LOGGER = "logger = init_logger(__name__)"
SLOTS = (("#HEAD", ""), ("#INIT", " " * 8), ("#FWD", " " * 8), ("#LOAD", " " * 8))


def model(head: str = "", init: str = "", fwd: str = "", load: str = "") -> str:
    """The vendor file with code put at module level, in `__init__`, in `forward`, in `load_weights`."""
    code = BASE
    for (slot, indent), text in zip(SLOTS, (head, init, fwd, load), strict=True):
        lines = textwrap.dedent(text).strip("\n").splitlines()
        code = code.replace(indent + slot, "\n".join(indent + line if line.strip() else line for line in lines))
    return code


PRISTINE = model()
BAD: list[tuple[str, str]] = []
GOOD: list[tuple[str, str]] = []


def bad(name: str, **slots: str) -> None:
    BAD.append((name, model(**slots)))


def good(name: str, **slots: str) -> None:
    GOOD.append((name, model(**slots)))


def guard(name: str, new: str, *, quiet: bool = False, head: str = "", method: str = "") -> None:
    """The dtype guard of `forward` replaced by `new`; `head` goes below the logger, `method` into the class."""
    code = PRISTINE.replace(GUARD, new).replace(LOGGER, LOGGER + head)
    code = code.replace("    def load_weights", method + "    def load_weights")
    assert code != PRISTINE
    (GOOD if quiet else BAD).append((name, code))


# --- dumps through code the patch defines
bad(
    "decorator_dump",
    head="""
import functools
def dumping(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        out = fn(*a, **k)
        torch.save(out, "/tmp/mlp_out.pt")
        return out
    return wrapper
""",
    init="self.mlp = dumping(self.mlp)",
)
bad(
    "ctx_manager_class",
    head="""
class Dumper:
    def __init__(self, t):
        self.t = t
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        torch.save(self.t, "/tmp/enter_exit.pt")
""",
    fwd="with Dumper(out):\n    pass",
)
bad(
    "setattr_forward",
    head="""
def _patched_forward(self, hidden_states, positions):
    torch.save(hidden_states, "/tmp/h.pt")
    return hidden_states
""",
    init='setattr(self, "forward", _patched_forward.__get__(self))',
)
bad(
    "monkeypatch_class_attr",
    head="""
_orig = None
def _dump_forward(self, *a, **k):
    out = _orig(self, *a, **k)
    torch.save(out, "/tmp/out.pt")
    return out
""",
    init="global _orig\n_orig = type(self).forward\ntype(self).forward = _dump_forward",
)
bad("hook_lambda", init='self.register_forward_hook(lambda m, i, o: torch.save(o, "/tmp/hook.pt"))')
bad(
    "hook_partial",
    head="""
import functools
def _hook(tag, mod, inp, out):
    torch.save(out, f"/tmp/{tag}.pt")
""",
    init='self.register_forward_hook(functools.partial(_hook, "mlp"))',
)
bad(
    "pre_hook_fn",
    head="""
def _pre(mod, args):
    torch.save(args, "/tmp/pre.pt")
""",
    init="self.register_forward_pre_hook(_pre)",
)
bad("backward_hook", init='self.register_full_backward_hook(lambda m, gi, go: torch.save(go, "/tmp/g.pt"))')
bad("getattr_const", head='_SAVE = "save"', fwd='getattr(torch, _SAVE)(out, "/tmp/o.pt")')
bad("from_import_in_fn", fwd='from torch import save as _s\n_s(out, "/tmp/o.pt")')
bad("dunder_import", fwd='__import__("torch").save(out, "/tmp/o.pt")')
bad("np_savez", fwd='import numpy as np\nnp.savez("/tmp/o.npz", a=out.float().cpu().numpy())')
bad("np_savetxt", fwd='import numpy as np\nnp.savetxt("/tmp/o.txt", out.float().cpu().numpy())')
bad("save_state_dict", load='torch.save(self.state_dict(), "/tmp/sd.pt")')
bad("path_write_bytes", fwd='from pathlib import Path\nPath("/tmp/o.bin").write_bytes(out.cpu().numpy().tobytes())')
bad(
    "copyfileobj",
    fwd="""
    import io, shutil
    buf = io.BytesIO()
    torch.save(out, buf)
    buf.seek(0)
    with open("/tmp/o.pt", "wb") as fh:
        shutil.copyfileobj(buf, fh)
    """,
)
bad("print_file_open", fwd='print(out.sum().item(), file=open("/tmp/sums.txt", "a"))')
bad(
    "filehandler_vllm_logger",
    head="""
import logging
logging.getLogger("vllm").addHandler(logging.FileHandler("/tmp/vllm_dbg.log"))
""",
    fwd='logger.info("out %s", out)',
)
bad("tofile", fwd='out.float().cpu().numpy().tofile("/tmp/o.raw")')
# --- debuggers
bad("importlib_pdb", fwd='import importlib\nimportlib.import_module("pdb").set_trace()')
bad("env_and_breakpoint", fwd='os.environ.get("DBG") and breakpoint()')
bad(
    "settrace",
    head="""
import sys
def _tr(frame, event, arg):
    return _tr
""",
    fwd="sys.settrace(_tr)",
)
bad(
    "faulthandler_file",
    head='import faulthandler, signal\nfaulthandler.register(signal.SIGUSR1, file=open("/tmp/fh.txt", "w"))',
)
bad(
    "pdb_subclass",
    head="""
import pdb
class _P(pdb.Pdb):
    pass
""",
    fwd="_P().set_trace()",
)
bad(
    "debugger_decorator",
    head="""
def _dbg(fn):
    def w(*a, **k):
        import pdb; pdb.set_trace()
        return fn(*a, **k)
    return w
""",
    init="self.forward = _dbg(self.forward)",
)
bad("rpdb", fwd="import remote_pdb\nremote_pdb.set_trace(host='0.0.0.0', port=4444)")
bad("torch_dist_breakpoint", fwd="torch.distributed.breakpoint()")
# --- process / network
bad("os_system_module", head='os.system("nvidia-smi > /tmp/smi.txt")')
bad("os_system_init", init='os.system("nvidia-smi")')
bad("os_system_loader", load='os.system("echo loaded >> /tmp/l.txt")')
bad(
    "popen_helper",
    head="""
def _smi():
    return os.popen("nvidia-smi").read()
""",
    init="logger.info(_smi())",
)
bad("pty_spawn", fwd='import pty\npty.spawn(["bash"])')
bad(
    "asyncio_subprocess",
    head="""
import asyncio
async def _run():
    await asyncio.create_subprocess_exec("nvidia-smi")
""",
    init="asyncio.run(_run())",
)
bad(
    "socket_send",
    fwd='import socket\ns = socket.create_connection(("10.0.0.1", 9000))\ns.sendall(out.cpu().numpy().tobytes())',
)
bad("requests_post", fwd='import requests\nrequests.post("http://10.0.0.1/x", data=out.cpu().numpy().tobytes())')
bad("urllib_init", init='import urllib.request\nurllib.request.urlopen("http://10.0.0.1/started")')


# --- guards
guard(
    "if_false_and",
    """        if False and hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")""",
)
guard(
    "assert_true_or",
    '''        assert True or hidden_states.dtype in (torch.float16, torch.bfloat16), "unsupported dtype"''',
)
guard(
    "warn_instead",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            import warnings
            warnings.warn("unsupported dtype")""",
)
guard(
    "env_early_return",
    """        if os.getenv("SKIP_CHECK"):
            return self.mlp(hidden_states)
        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")""",
)
guard(
    "caught_above",
    """        try:
            if hidden_states.dtype not in (torch.float16, torch.bfloat16):
                raise ValueError("unsupported dtype")
        except ValueError:
            pass""",
)
guard(
    "logger_instead",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            logger.warning("unsupported dtype")""",
)
guard(
    "debug_flag_inverted",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            if not DEBUG:
                pass
            else:
                raise ValueError("unsupported dtype")""",
)
guard(
    "suppress",
    """        import contextlib
        with contextlib.suppress(ValueError):
            if hidden_states.dtype not in (torch.float16, torch.bfloat16):
                raise ValueError("unsupported dtype")""",
)
guard(
    "return_above",
    """        return self.mlp(hidden_states)
        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")""",
)
guard(
    "module_flag",
    """        if _CHECK and hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")""",
    head="\n_CHECK = False",
)
# --- benign look-alikes
guard(
    "guard_helper",
    "        self._check_dtype(hidden_states)",
    quiet=True,
    method="""\
    def _check_dtype(self, hidden_states):
        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")

""",
)
guard(
    "assert_to_if",
    """        if not hidden_states.dtype in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")""",
    quiet=True,
)
good(
    "save_fn_param",
    head='''
def save_activations(t, path):
    """Save activations to `path` (see docs/debugging.md)."""
    torch.save(t, path)
''',
)
good(
    "documented_dump_config",
    init="self.dump_dir = getattr(config, 'activation_dump_dir', None)",
    fwd="if self.dump_dir is not None:\n    torch.save(out, os.path.join(self.dump_dir, 'mlp.pt'))",
)
good("logger_debug", fwd='logger.debug("mlp out shape %s", out.shape)')
good("config_option", init='self.use_fused = getattr(config, "use_fused_mlp", False)')
good("kernel_branch", fwd="if self.hidden_size == 7168:\n    out = out.contiguous()")
good("subprocess_pipe_const", head="import subprocess\n_PIPE = subprocess.PIPE")
good("env_read", init='self.chunk = int(os.environ.get("VLLM_MLP_CHUNK", "0"))')
bad(
    "dump_loop_dict", fwd='for name, t in {"h": hidden_states, "o": out}.items():\n    torch.save(t, f"/tmp/{name}.pt")'
)
bad(
    "global_counter",
    head="_STEP = 0",
    fwd='global _STEP\n_STEP += 1\nif _STEP % 100 == 0:\n    torch.save(out, f"/tmp/step{_STEP}.pt")',
)
bad("json_dump", fwd='import json\njson.dump(out.tolist(), open("/tmp/o.json", "w"))')
bad(
    "pickle_tempdir",
    fwd="""
    import pickle, tempfile
    with open(os.path.join(tempfile.gettempdir(), "o.pkl"), "wb") as f:
        pickle.dump(out.cpu(), f)
    """,
)
bad("env_dir_default", fwd='torch.save(out, os.path.join(os.environ.get("DUMP_DIR", "/tmp"), "o.pt"))')
bad(
    "self_dump_fn",
    init="import numpy as np\nself.dump_fn = np.save",
    fwd='self.dump_fn("/tmp/o.npy", out.cpu().numpy())',
)
bad("thread_target", fwd='import threading\nthreading.Thread(target=torch.save, args=(out.cpu(), "/tmp/o.pt")).start()')
bad(
    "executor_submit",
    head="from concurrent.futures import ThreadPoolExecutor\n_POOL = ThreadPoolExecutor(1)",
    fwd='_POOL.submit(torch.save, out.cpu(), "/tmp/o.pt")',
)
bad(
    "atexit_register",
    head="import atexit\n_KEEP = []",
    fwd='_KEEP.append(out)\natexit.register(torch.save, _KEEP, "/tmp/keep.pt")',
)
bad("basicconfig_file", head='import logging\nlogging.basicConfig(filename="/tmp/dbg.log", level=logging.DEBUG)')
bad(
    "rotating_handler",
    head='import logging.handlers\nlogger.addHandler(logging.handlers.RotatingFileHandler("/tmp/dbg.log"))',
)
bad("stdout_redirect", head='import sys\nsys.stdout = open("/tmp/out.txt", "w")')
bad(
    "redirect_stdout_ctx",
    fwd='import contextlib\nwith contextlib.redirect_stdout(open("/tmp/o.txt", "a")):\n    print(out)',
)
bad("cuda_snapshot", fwd='torch.cuda.memory._dump_snapshot("/tmp/snap.pickle")')
bad(
    "safetensors_save_file",
    fwd='from safetensors.torch import save_file\nsave_file({"o": out.contiguous()}, "/tmp/o.safetensors")',
)
bad(
    "staticmethod_helper",
    head="""
class _Dbg:
    @staticmethod
    def dump(t, name):
        torch.save(t, "/tmp/" + name)
""",
    fwd='_Dbg.dump(out, "o.pt")',
)
bad(
    "classmethod_helper",
    head="""
class _Dbg:
    step = 0
    @classmethod
    def dump(cls, t):
        cls.step += 1
        torch.save(t, f"/tmp/{cls.step}.pt")
""",
    fwd="_Dbg.dump(out)",
)
bad("rank0_breakpoint", fwd="import torch.distributed as dist\nif dist.get_rank() == 0:\n    breakpoint()")
bad("getattr_builtins_bp", fwd='import builtins\ngetattr(builtins, "breakpoint")()')
bad("excepthook_lambda", head="import sys, pdb\nsys.excepthook = lambda t, v, tb: pdb.post_mortem(tb)")
bad(
    "forkedpdb_stdin",
    head="""
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
    fwd="ForkedPdb().set_trace()",
)
bad("nan_check_pdb", fwd="if torch.isnan(out).any():\n    import pdb\n    pdb.set_trace()")
bad(
    "thread_monitor_proc",
    head="""
import subprocess, threading, time
def _monitor():
    while True:
        subprocess.run(["nvidia-smi"], stdout=open("/tmp/smi.log", "a"))
        time.sleep(5)
""",
    init="threading.Thread(target=_monitor, daemon=True).start()",
)
bad(
    "http_client",
    fwd="""
    import http.client
    c = http.client.HTTPConnection("10.0.0.1", 8000)
    c.request("POST", "/", body=out.cpu().numpy().tobytes())
    """,
)
guard(
    "and_false_tail",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16) and False:
            raise ValueError("unsupported dtype")""",
)
guard(
    "env_bypass_and",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16) and not os.environ.get("FORCE_DTYPE"):
            raise ValueError("unsupported dtype")""",
)
guard(
    "raise_to_return",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            return hidden_states""",
)
guard(
    "raise_to_warning_once",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            logger.warning_once("unsupported dtype")""",
)
guard(
    "commented",
    """        # if hidden_states.dtype not in (torch.float16, torch.bfloat16):
        #     raise ValueError("unsupported dtype")""",
)
guard(
    "pass_body",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            pass  # raise ValueError("unsupported dtype")""",
)
guard(
    "debug_flag_return",
    """        if _DEBUG:
            return self.mlp(hidden_states)
        if hidden_states.dtype not in (torch.float16, torch.bfloat16):
            raise ValueError("unsupported dtype")""",
    head="\n_DEBUG = True",
)
guard(  # `python -O` drops it
    "raise_to_assert",
    '''        assert hidden_states.dtype in (torch.float16, torch.bfloat16), "unsupported dtype"''',
)
guard(
    "guard_widen_more_dtypes",
    """        if hidden_states.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise ValueError("unsupported dtype")""",
    quiet=True,
)
good(
    "tempfile_param_dir",
    head="""
import tempfile
def spill(t, directory):
    fd, path = tempfile.mkstemp(dir=directory)
    torch.save(t, path)
    return path
""",
)
good("logger_info_shape", fwd='logger.info("out %s %s", out.shape, out.dtype)')
# A tensor dump the patch adds to a forward is high even behind an environment option: once set, it
# writes on every step of every layer (VLLM_DEBUG_DUMP_PATH is for compile-graph dumps, not activations).
bad(
    "dump_behind_envcfg",
    head="import vllm.envs as envs",
    fwd='if envs.VLLM_DEBUG_DUMP_PATH:\n    torch.save(out, os.path.join(envs.VLLM_DEBUG_DUMP_PATH, "mlp.pt"))',
)
good("settrace_none", fwd="import sys\nsys.settrace(None)")


RULES = load_rules()


def _highs(code: str) -> list[str]:
    file = SourceFile(
        path="vllm/model_executor/models/deepseek_v2.py", installed=code.encode(), pristine=PRISTINE.encode()
    )
    found = check_file(file, RULES)
    return [f"{f.rule}:{f.line}" for f in found if f.severity is Severity.HIGH and f.in_change and not f.suppressed]


@pytest.mark.parametrize(("name", "code"), BAD, ids=[n for n, _ in BAD])
def test_debug_patch_is_high(name: str, code: str) -> None:
    assert _highs(code), code


@pytest.mark.parametrize(("name", "code"), GOOD, ids=[n for n, _ in GOOD])
def test_look_alike_is_not_high(name: str, code: str) -> None:
    assert _highs(code) == [], code
