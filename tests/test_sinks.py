"""Dump sinks and debugger entries however the patch writes them: raw writes of serialised
tensors, fresh temp files, debuggers installed as hooks, savers kept in containers, and dump
paths from an environment variable the patch itself introduces.

Each case is the vendor model module with a hurried engineer's patch in it, checked by the
hazard engine with the pristine text beside it (findings are those of the changed lines). A
patch is caught when a high finding sits on its changed lines; a look-alike (`expect=False`) is
quiet when nothing is high. Every case also runs with the engine's statement filters off.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards.engine import check_file
from patchaudit.hazards.loading import load_rules
from patchaudit.hazards.source import SourceFile
from patchaudit.report import Severity

VENDOR = """\
import os

import torch
from torch import nn


class DeepseekV2MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.trace_dir = os.environ.get("VLLM_TORCH_PROFILER_DIR")

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


def case(name: str, top: str = "", body: str = "", expect: bool = True, tail: str = "") -> None:
    """The vendor module with `top` after its imports, `body` in forward and `tail` at the end."""
    src = VENDOR
    if top:
        src = src.replace("\n\nclass DeepseekV2MLP", "\n" + textwrap.dedent(top) + "\n\nclass DeepseekV2MLP", 1)
    if body:
        src = src.replace(
            "        return out\n", textwrap.indent(textwrap.dedent(body), " " * 8) + "        return out\n", 1
        )
    if tail:
        src = src + "\n\n" + textwrap.dedent(tail)
    CASES[name] = (src, expect)


# -- raw writes of serialised tensor data ------------------------------------------------------
case(
    "raw_os_write_pickle",
    top="import pickle\n",
    body="""
fd = os.open(f"/tmp/mlp_{positions[0]}.pkl", os.O_WRONLY | os.O_CREAT)
os.write(fd, pickle.dumps(out.cpu()))
os.close(fd)
""",
)
case(
    "raw_os_write_tobytes",
    body="""
fd = os.open("/tmp/mlp.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, out.float().cpu().numpy().tobytes())
""",
)
case(
    "raw_fileio_write",
    top="import io\n",
    body="""
io.FileIO("/tmp/mlp.raw", "w").write(out.cpu().numpy().tobytes())
""",
)
case(
    "raw_open_write_pickle_bytes",
    top="import pickle\n",
    tail="""
def dbg(w):
    buf = pickle.dumps(w)
    open("/tmp/w.pkl", "wb").write(buf)
""",
)
case(
    "raw_with_open_marshal",
    top="import marshal\n",
    tail="""
def dbg(shapes):
    with open(os.path.join("/tmp", "shapes.bin"), "wb") as fh:
        fh.write(marshal.dumps(shapes))
""",
)
case(
    "raw_mmap_write",
    top="import mmap\n",
    body="""
with open("/dev/shm/act.bin", "r+b") as fh:
    mm = mmap.mmap(fh.fileno(), 0)
    mm.write(out.cpu().numpy().tobytes())
""",
)
case(
    "raw_torch_bytes",
    top="import io\n",
    tail="""
def dbg(w):
    buf = io.BytesIO()
    torch.save(w, buf)
    with open("/tmp/w.pt", "wb") as f:
        f.write(buf.getvalue())
""",
)
case(
    "lookalike_stdout_buffer",
    top="import sys\n",
    tail="""
def emit(payload):
    sys.stdout.buffer.write(payload.tobytes())
""",
    expect=False,
)
case(
    "lookalike_write_bytes_param",
    top="import pickle\n",
    tail="""
def save_state(state, path):
    with open(path, "wb") as fh:
        fh.write(pickle.dumps(state))
""",
    expect=False,
)

# -- a dump into a fresh temp file -------------------------------------------------------------
case(
    "tmp_named_delete_false",
    top="import tempfile\n",
    body="""
with tempfile.NamedTemporaryFile(suffix=".pt", delete=False) as tf:
    torch.save(out.cpu(), tf)
""",
)
case(
    "tmp_named_name",
    top="import tempfile\n",
    tail="""
def dbg(w):
    f = tempfile.NamedTemporaryFile(delete=False, prefix="w_")
    torch.save(w, f.name)
    print("dumped", f.name)
""",
)
case(
    "tmp_mkstemp",
    top="import tempfile\nimport numpy as np\n",
    tail="""
def dbg(w):
    fd, path = tempfile.mkstemp(suffix=".npy")
    np.save(path, w.cpu().numpy())
""",
)
case(
    "tmp_mkstemp_fdopen",
    top="import tempfile\nimport pickle\n",
    tail="""
def dbg(w):
    fd, path = tempfile.mkstemp()
    with os.fdopen(fd, "wb") as fh:
        pickle.dump(w, fh)
""",
)

# -- a debugger installed as a hook -----------------------------------------------------------
case(
    "dbg_signal_lambda",
    top="import signal\n",
    tail="""
def _install():
    import pdb
    signal.signal(signal.SIGUSR1, lambda *a: pdb.set_trace())
""",
)
case("dbg_excepthook_pm", top="import sys\nimport pdb\n", tail="sys.excepthook = lambda *a: pdb.pm()\n")
case(
    "dbg_excepthook_ipdb",
    top="import sys\n",
    tail="""
def _hook(t, v, tb):
    import ipdb
    ipdb.post_mortem(tb)


sys.excepthook = _hook
""",
)
case(
    "dbg_breakpointhook",
    top="import sys\n",
    tail="""
import ipdb
sys.breakpointhook = ipdb.set_trace
""",
)
case("dbg_atexit", top="import atexit\nimport pdb\n", tail="atexit.register(pdb.set_trace)\n")
case(
    "dbg_threading_excepthook",
    top="import threading\n",
    tail="""
def _on_thread_error(args):
    import pdb
    pdb.post_mortem(args.exc_traceback)


threading.excepthook = _on_thread_error
""",
)
case(
    "dbg_faulthandler_file",
    top="import faulthandler\nimport signal\n",
    tail='faulthandler.register(signal.SIGUSR2, file=open("/tmp/stacks.txt", "w"), all_threads=True)\n',
)
case(
    "dbg_ultratb_call_pdb",
    top="import sys\n",
    tail="""
from IPython.core import ultratb
sys.excepthook = ultratb.FormattedTB(mode="Verbose", call_pdb=True)
""",
)
case(
    "dbg_ipython_pdb_interaction",
    top="import sys\n",
    tail="""
def _pm(kind, value, tb):
    from IPython.core.debugger import Pdb
    Pdb().interaction(None, tb)


sys.excepthook = _pm
""",
)
case(
    "dbg_hook_in_tooling_module",
    top="import signal\nimport pdb\n\n\nclass ForkedPdb(pdb.Pdb):\n    pass\n",
    tail="signal.signal(signal.SIGUSR1, pdb.set_trace)\n",
)
case(
    "dbg_excepthook_value_in_tooling_module",
    top="import sys\nimport pdb\n\n\nclass ForkedPdb(pdb.Pdb):\n    pass\n",
    tail="sys.excepthook = pdb.pm\n",
)
case(
    "lookalike_ultratb_no_pdb",
    top="import sys\n",
    tail="""
from IPython.core import ultratb
sys.excepthook = ultratb.FormattedTB(mode="Verbose", call_pdb=False)
""",
    expect=False,
)
case(
    "lookalike_faulthandler_enable",
    top="import faulthandler\n",
    tail="faulthandler.enable()\n",
    expect=False,
)

# -- savers held in containers, built names, methodcaller -------------------------------------
case(
    "container_dict",
    top='import numpy as np\nSAVERS = {"pt": torch.save, "np": np.save}\n',
    body="""
SAVERS["pt"](out, "/tmp/mlp.pt")
""",
)
case(
    "container_dict_fmt",
    top='import numpy as np\n_SAVE = {"pt": torch.save, "np": np.save}\n',
    tail="""
def dbg(w, fmt="pt"):
    _SAVE[fmt](w, f"/tmp/w.{fmt}")
""",
)
case(
    "container_list_loop",
    top="import numpy as np\n",
    tail="""
def dbg(w):
    for save in (torch.save, np.save):
        save(w, "/tmp/w")
""",
)
case(
    "lookalike_container_in_memory",
    top="import io\n",
    tail="""
SERIALIZERS = {"pt": torch.save}


def to_bytes(t, fmt):
    buf = io.BytesIO()
    SERIALIZERS[fmt](t, buf)
    return buf.getvalue()
""",
    expect=False,
)

# -- a dump path from an environment variable the patch introduces ----------------------------
case(
    "env_new_no_default_forward",
    body="""
if os.environ.get("DSV2_DUMP"):
    torch.save(out, os.path.join(os.environ["DSV2_DUMP"], "mlp.pt"))
""",
)
case(
    "env_new_module_name",
    top='DUMP_DIR = os.getenv("MY_DUMP_DIR")\n',
    tail="""
def dbg(w):
    if DUMP_DIR:
        torch.save(w, f"{DUMP_DIR}/w.pt")
""",
)
case(
    "env_new_tmp_default",
    tail="""
def dbg(w):
    torch.save(w, os.environ.get("W_DUMP", "/tmp/w.pt"))
""",
)
# An activation saved in forward behind the module's own environment setting (a profiler directory
# it already reads) writes on every step once the variable is set: high, like any dump the patch
# adds to a per-step path behind an environment option (tests/test_dump_families.py).
case(
    "forward_dump_behind_existing_env_setting",
    body="""
if self.trace_dir:
    torch.save(out, os.path.join(self.trace_dir, "mlp.pt"))
""",
)
case(
    "lookalike_spill_to_a_chosen_dir",
    top="import tempfile\nimport numpy as np",
    tail="""
def spill(array, directory):
    fd, path = tempfile.mkstemp(prefix="arr-", suffix=".npy", dir=directory)
    with os.fdopen(fd, "wb") as f:
        np.save(f, array, allow_pickle=False)
    return path
""",
    expect=False,
)
case(
    "temp_in_a_constant_dir",
    top="import tempfile\nDUMP_DIR = '/tmp/dbg'",
    tail="""
def dbg(w):
    fd, path = tempfile.mkstemp(dir=DUMP_DIR)
    torch.save(w, path)
""",
)
case(
    "lookalike_save_checkpoint",
    tail="""
def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)
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


def test_a_destination_rebound_many_times_is_read_once_per_value() -> None:
    """A save whose path a loop-like run of statements rebinds 40 times, each value naming the path
    again: following every path through the bindings is 40**6 walks (a scan that never ends, as
    on a scheduler's `schedule()`); each value is read once, and the patch's variable is found."""
    rebinds = "".join(f"    path = path + '/' + parts[{i}] if parts[{i}] else path\n" for i in range(40))
    patched = (
        "import os\nimport torch\n\n\ndef dump(x, parts):\n    path = os.environ['DUMP_ROOT']\n"
        + rebinds
        + "    torch.save(x, path)\n    return x\n"
    )
    pristine = "import os\nimport torch\n\n\ndef dump(x, parts):\n    return x\n"
    file = SourceFile(path="vllm/model_executor/models/x.py", installed=patched.encode(), pristine=pristine.encode())
    found = [(f.rule, f.line, f.severity) for f in check_file(file, RULES)]
    assert ("torch-save", 47, Severity.HIGH) in found, found
