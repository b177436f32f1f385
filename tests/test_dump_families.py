"""Dumps reached through base classes, constructor-bound destinations, the standard library's temp
places and qualified sink names, and guards narrowed by flipping the shape of their test:
engine-level, each case one module against its pristine.

Written as a hurried engineer debugging a large MoE model writes them: a `_snap` helper on a mixin
the model now inherits, a `Recorder("/tmp/x")` built at module level, `tempfile.gettempdir()`
joined to a name, `safetensors.torch.save_file`, `envs.VLLM_X or "/tmp/y"`, and `if x != expected:
raise` turned into `if x == some_bad: raise`. Each look-alike of the same shape stays below high.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

P = textwrap.dedent("""
import os
import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)


class DeepseekV2MoE(nn.Module):
    def __init__(self, config, layer_idx, head_dim):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        if head_dim not in (64, 128, 192):
            raise ValueError(f"unsupported head_dim {head_dim}")
        self.head_dim = head_dim
        self.gate = nn.Linear(8, 8)

    def forward(self, hidden_states):
        router_logits = self.gate(hidden_states)
        if router_logits.shape[-1] != self.config.n_routed_experts:
            raise ValueError("router width")
        assert hidden_states is not None and hidden_states.is_contiguous()
        assert hidden_states.dtype in (torch.bfloat16, torch.float16)
        out = self.experts(hidden_states, router_logits)
        return out

    def load_weights(self, weights):
        for name, w in weights:
            if w.dtype not in (torch.bfloat16, torch.float8_e4m3fn):
                raise NotImplementedError(f"dtype {w.dtype}")
            if w.numel() > 1 << 30:
                raise ValueError("too large")
        return weights
""").lstrip()

CLS = "class DeepseekV2MoE(nn.Module):\n"
FWD = "        router_logits = self.gate(hidden_states)\n"
TOP = "logger = logging.getLogger(__name__)\n"
IMP = "import os\n"
CASES: list[tuple[str, str, bool, str]] = []


def R(*pairs: str) -> str:
    out = P
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert old in out, old
        out = out.replace(old, new, 1)
    return out


def case(name: str, patched: str, high: bool = True, pristine: str = "") -> None:
    CASES.append((name, patched, high, pristine or P))


def dump(name: str, imports: str, body: str, top: str = "", base: str = "", high: bool = True) -> None:
    """A patch that adds `imports`, module-level `top`, a class `base` above the model (the model
    then inherits it when `base` defines a class) and `body` after the router logits."""
    pairs = [IMP, IMP + imports, FWD, FWD + textwrap.indent(textwrap.dedent(body), "        ")]
    if top:
        pairs += [TOP, TOP + textwrap.dedent(top)]
    if base:
        base = textwrap.dedent(base)
        first = base.split("class ", 1)[1].split("(", 1)[0].split(":", 1)[0]
        pairs += [CLS, base + "\n\n" + CLS.replace("(nn.Module)", f"({first}, nn.Module)")]
    case(name, R(*pairs), high)


# (1) a dumping callable on a base class of the module, reached from the subclass
SNAP = """
class _DumpMixin:
    def _snap(self, t, tag):
        torch.save(t.cpu(), f"/tmp/dsv2_{tag}_{self.layer_idx}.pt")
"""
dump("a_base_method", "", 'self._snap(router_logits, "router")\n', base=SNAP)
dump(
    "a_base_staticmethod_lambda",
    "",
    "self._dump(router_logits)\n",
    base='class _Dbg:\n    _dump = staticmethod(lambda t: torch.save(t, "/tmp/router.pt"))\n',
)
dump(
    "a_base_partial",
    "import functools\n",
    "self._save(router_logits)\n",
    base='class _Dbg:\n    _save = functools.partial(torch.save, f="/tmp/router.pt")\n',
)
dump(
    "a_base_classmethod_np",
    "import numpy as np\n",
    "type(self)._dump(router_logits.float().cpu().numpy())\n",
    base='class _Dbg:\n    @classmethod\n    def _dump(cls, a):\n        np.save(f"/tmp/{cls.__name__}.npy", a)\n',
)
dump("a_super_call", "", 'super()._snap(router_logits, "r")\n', base=SNAP)
dump(
    "a_two_levels",
    "",
    'self._snap(router_logits, "r")\n',
    base=SNAP + "\n\nclass _Base(_DumpMixin):\n    pass\n",
)
dump(
    "a_base_debugger",
    "",
    "self._bp()\n",
    base="class _Dbg:\n    def _bp(self):\n        import pdb\n\n        pdb.set_trace()\n",
)
dump(
    "a_base_pickle_helper",
    "import pickle\n",
    "self.record(router_logits)\n",
    base='class _Rec:\n    def record(self, t):\n        with open("/tmp/rec.pkl", "ab") as f:\n'
    "            pickle.dump(t.cpu(), f)\n",
)
PSNAP = """
class _DumpMixin:
    def _snap(self, t, path):
        torch.save(t.detach().cpu(), path)
"""
LW = "        for name, w in weights:\n"


def loader(name: str, imports: str, body: str, top: str = "", base: str = "", high: bool = True) -> None:
    """Like `dump`, with `body` at the top of `load_weights` (not a forward function)."""
    pairs = [IMP, IMP + imports, LW, textwrap.indent(textwrap.dedent(body), "        ") + LW]
    if top:
        pairs += [TOP, TOP + textwrap.dedent(top)]
    if base:
        base = textwrap.dedent(base)
        first = base.split("class ", 1)[1].split("(", 1)[0].split(":", 1)[0]
        pairs += [CLS, base + "\n\n" + CLS.replace("(nn.Module)", f"({first}, nn.Module)")]
    case(name, R(*pairs), high)


dump("a_base_param_path_fwd", "", 'self._snap(router_logits, f"/tmp/r{self.layer_idx}.pt")\n', base=PSNAP)
loader("a_base_param_path_load", "", 'self._snap(weights, "/tmp/weights.pt")\n', base=PSNAP)
loader("a_super_param_path_load", "", 'super()._snap(weights, "/tmp/weights.pt")\n', base=PSNAP)
loader(
    "a_two_levels_param_path",
    "",
    'self._snap(weights, "/tmp/weights.pt")\n',
    base=PSNAP + "\n\nclass _Base(_DumpMixin):\n    pass\n",
)
loader(
    "a_base_partial_load",
    "import functools\n",
    "self._save(weights)\n",
    base='class _Dbg:\n    _save = functools.partial(torch.save, f="/tmp/w.pt")\n',
)
loader(
    "a_base_classmethod_param",
    "import numpy as np\n",
    'type(self)._dump(np.zeros(3), "/tmp/w.npy")\n',
    base="class _Dbg:\n    @classmethod\n    def _dump(cls, a, path):\n        np.save(path, a)\n",
)
loader(
    "a_base_init_attr_saver",
    "",
    'self.saver(weights, "/tmp/w.pt")\n',
    base="class _Dbg:\n    def __init__(self):\n        self.saver = torch.save\n",
)
loader("q_base_param_config_load", "", "self._snap(weights, self.config.weights_dump)\n", base=PSNAP, high=False)
# a debugger reached through a base class
loader(
    "a_dbg_base_staticmethod",
    "import pdb\n",
    "self._bp()\n",
    base="class _Dbg:\n    _bp = staticmethod(pdb.set_trace)\n",
)
loader("a_dbg_base_attr", "import pdb\n", "super()._bp()\n", base="class _Dbg:\n    _bp = pdb.set_trace\n")
loader(
    "a_dbg_base_init_pdb",
    "import pdb\n",
    "self._dbg.set_trace()\n",
    base="class _Dbg:\n    def __init__(self):\n        self._dbg = pdb.Pdb()\n",
)
loader(
    "a_dbg_base_breakpoint_alias",
    "",
    "type(self)._stop()\n",
    base="class _Dbg:\n    _stop = staticmethod(breakpoint)\n",
)
dump(
    "q_base_save_param",
    "",
    "",
    base='class _Io:\n    def save(self, t, path):\n        """Write `t` to `path`."""\n        torch.save(t, path)\n',
    high=False,
)
dump(
    "q_base_config_path",
    "",
    "if self.config.dump_router:\n    self.save(router_logits, self.config.dump_path)\n",
    base='class _Io:\n    def save(self, t, path):\n        """Write `t` to `path`."""\n        torch.save(t, path)\n',
    high=False,
)

# (2) a destination bound in a constructor
REC = """
class Recorder:
    def __init__(self, path{default}):
        self.path = path
        self.n = 0

    def record(self, t):
        self.n += 1
        torch.save(t.cpu(), os.path.join(self.path, f"{{self.n}}.pt"))
"""
dump(
    "b_module_instance",
    "",
    "_REC.record(router_logits)\n",
    top=REC.format(default="") + '\n\n_REC = Recorder("/tmp/rec")\n',
)
dump(
    "b_keyword_mkdtemp",
    "import tempfile\n",
    "_REC.record(router_logits)\n",
    top=REC.format(default="") + "\n\n_REC = Recorder(path=tempfile.mkdtemp())\n",
)
dump(
    "b_default_arg",
    "",
    "_REC.record(router_logits)\n",
    top=REC.format(default='="/tmp/dump"') + "\n\n_REC = Recorder()\n",
)
case(
    "b_init_instance_method",
    R(
        TOP,
        TOP + textwrap.dedent(REC.format(default="")),
        "        self.head_dim = head_dim\n",
        '        self.head_dim = head_dim\n        self.rec = Recorder(f"/tmp/moe_{layer_idx}")\n',
        FWD,
        FWD + "        self.rec.record(router_logits)\n",
    ),
)
case(
    "b_self_out_dir",
    R(
        "        self.head_dim = head_dim\n",
        '        self.head_dim = head_dim\n        self.out_dir = "/tmp/moe"\n',
        FWD,
        FWD + '        torch.save(router_logits, f"{self.out_dir}/{self.layer_idx}.pt")\n',
    ),
)
loader(
    "b_module_instance_load",
    "",
    "_REC.record(weights)\n",
    top=REC.format(default="") + '\n\n_REC = Recorder("/tmp/rec")\n',
)
loader(
    "b_keyword_mkdtemp_load",
    "import tempfile\n",
    "_REC.record(weights)\n",
    top=REC.format(default="") + "\n\n_REC = Recorder(path=tempfile.mkdtemp())\n",
)
loader(
    "b_default_arg_load",
    "",
    "_REC.record(weights)\n",
    top=REC.format(default='="/tmp/dump"') + "\n\n_REC = Recorder()\n",
)
loader("b_inline_instance_load", "", 'Recorder("/tmp/w").record(weights)\n', top=REC.format(default=""))
case(
    "b_init_instance_load",
    R(
        TOP,
        TOP + textwrap.dedent(REC.format(default="")),
        "        self.head_dim = head_dim\n",
        '        self.head_dim = head_dim\n        self.rec = Recorder(f"/tmp/moe_{layer_idx}")\n',
        LW,
        "        self.rec.record(weights)\n" + LW,
    ),
)
case(
    "b_self_out_dir_load",
    R(
        "        self.head_dim = head_dim\n",
        '        self.head_dim = head_dim\n        self.out_dir = "/tmp/moe"\n',
        LW,
        '        torch.save(weights, f"{self.out_dir}/{self.layer_idx}.pt")\n' + LW,
    ),
)
case(
    "b_init_param_default",
    R(
        "    def __init__(self, config, layer_idx, head_dim):\n",
        '    def __init__(self, config, layer_idx, head_dim, dump_dir="/tmp/moe"):\n',
        "        self.head_dim = head_dim\n",
        "        self.head_dim = head_dim\n        self.dump_dir = dump_dir\n",
        LW,
        '        torch.save(weights, os.path.join(self.dump_dir, "w.pt"))\n' + LW,
    ),
)
loader(
    "q_recorder_param_load",
    "",
    "Recorder(self.config.record_dir).record(weights)\n",
    top=REC.format(default=""),
    high=False,
)
loader(
    "a_base_lambda_param",
    "",
    'self._dump(weights, "/tmp/w.pt")\n',
    base="class _Dbg:\n    _dump = staticmethod(lambda t, p: torch.save(t, p))\n",
)
case(
    "a_base_class_const_dir",
    R(
        CLS,
        'class _Paths:\n    DUMP_DIR = "/tmp/dsv2"\n\n\n' + CLS.replace("(nn.Module)", "(_Paths, nn.Module)"),
        LW,
        '        torch.save(weights, os.path.join(self.DUMP_DIR, "w.pt"))\n' + LW,
    ),
)
loader(
    "b_subclass_construct",
    "",
    "_R.record(weights)\n",
    top=REC.format(default="") + '\n\nclass _DumpRec(Recorder):\n    pass\n\n\n_R = _DumpRec("/tmp/x")\n',
)
REC_OR = REC.replace("        self.path = path\n", '        self.path = path or "/tmp/rec"\n')
loader("b_init_or_fallback", "", "_R.record(weights)\n", top=REC_OR.format(default="=None") + "\n\n_R = Recorder()\n")
case(
    "b_init_getenv_default",
    R(
        "        self.head_dim = head_dim\n",
        '        self.head_dim = head_dim\n        self.dump_path = os.getenv("VLLM_MOE_DUMP", "/tmp/moe.pt")\n',
        LW,
        "        torch.save(weights, self.dump_path)\n" + LW,
    ),
)
loader(
    "c_module_const_gettempdir",
    "import tempfile\n",
    'torch.save(weights, f"{_DUMP}/w.pt")\n',
    top='_DUMP = os.path.join(tempfile.gettempdir(), "dsv2")\n',
)
loader(
    "q_recorder_built_from_param",
    "",
    "",
    top=REC.format(default="") + "\n\ndef make_recorder(path):\n    return Recorder(path)\n",
    high=False,
)
loader(
    "q_recorder_built_from_config",
    "",
    "",
    top=REC.format(default="") + "\n\ndef make_recorder(cfg):\n    return Recorder(path=cfg.record_dir)\n",
    high=False,
)
loader(
    "a_base_init_partial",
    "import functools\n",
    "self._save(weights)\n",
    base='class _Dbg:\n    def __init__(self):\n        self._save = functools.partial(torch.save, f="/tmp/w.pt")\n',
)
REC_PATH = REC.replace("        self.path = path\n", "        self.path = Path(path)\n")
loader(
    "b_init_wrapped_param",
    "from pathlib import Path\n",
    "_R.record(weights)\n",
    top=REC_PATH.format(default="") + '\n\n_R = Recorder(os.path.join("/tmp", "rec"))\n',
)
loader(
    "q_init_wrapped_param_config",
    "from pathlib import Path\n",
    "",
    top=REC_PATH.format(default="") + "\n\ndef make(cfg):\n    return Recorder(cfg.out)\n",
    high=False,
)
STORE = """
class PageStore:
    def __init__(self, cfg, path="/tmp/pages"):
        self.path = os.environ.get("VLLM_PAGE_STORE_DIR") or cfg.get("dir") or path

    def set(self, key, value):
        tmp = os.path.join(self.path, f".{key}.tmp")
        value.contiguous().view(dtype=torch.uint8).numpy().tofile(tmp)
        os.replace(tmp, os.path.join(self.path, f"{key}.bin"))
"""
loader("q_store_settings_then_default", "", "", top=STORE, high=False)
dump(
    "q_recorder_config_path",
    "",
    "if self.config.record_router:\n    _recorder.record(router_logits)\n",
    top=REC.format(default="") + "\n\n_recorder = Recorder(os.environ['VLLM_ROUTER_RECORD_DIR'])\n",
    high=False,
)
dump("q_recorder_never_built", "", "", top=REC.format(default=""), high=False)

# (3) temp destinations of the standard library and raw writers
for name, imports, body in [
    (
        "c_gettempdir_join",
        "import tempfile\n",
        'torch.save(router_logits, os.path.join(tempfile.gettempdir(), "r.pt"))\n',
    ),
    (
        "c_mkdtemp_join_np",
        "import tempfile\nimport numpy as np\n",
        'np.save(os.path.join(tempfile.mkdtemp(), "r.npy"), router_logits.cpu().numpy())\n',
    ),
    (
        "c_ntf_name",
        "import tempfile\n",
        'torch.save(router_logits, tempfile.NamedTemporaryFile(suffix=".pt", delete=False).name)\n',
    ),
    (
        "c_ntf_name_default_delete",
        "import tempfile\n",
        'torch.save(router_logits, tempfile.NamedTemporaryFile(suffix=".pt").name)\n',
    ),
    (
        "c_path_gettempdir_write_bytes",
        "import tempfile\nfrom pathlib import Path\n",
        '(Path(tempfile.gettempdir()) / f"{self.layer_idx}.bin").write_bytes(router_logits.cpu().numpy().tobytes())\n',
    ),
    ("c_tofile_literal", "", 'router_logits.float().cpu().numpy().tofile(f"/tmp/r_{self.layer_idx}.bin")\n'),
    ("c_open_ab_write", "", 'open("/tmp/r.bin", "ab").write(router_logits.cpu().numpy().tobytes())\n'),
    (
        "c_tofile_gettempdir",
        "import tempfile\n",
        'arr = router_logits.cpu().numpy()\narr.tofile(os.path.join(tempfile.gettempdir(), "r.bin"))\n',
    ),
    (
        "c_mkdtemp_var_fstring",
        "import tempfile\n",
        'd = tempfile.mkdtemp(prefix="dsv2_")\ntorch.save(router_logits, f"{d}/r.pt")\n',
    ),
    (
        "c_gettempdir_var",
        "import tempfile\n",
        'tmp = tempfile.gettempdir()\ntorch.save(router_logits, tmp + "/r.pt")\n',
    ),
    (
        "c_ntf_with_delete_false",
        "import tempfile\n",
        'with tempfile.NamedTemporaryFile(delete=False, suffix=".pt") as f:\n    torch.save(router_logits, f)\n',
    ),
    ("c_mkstemp_path", "import tempfile\n", 'fd, p = tempfile.mkstemp(suffix=".pt")\ntorch.save(router_logits, p)\n'),
    (
        "c_with_open_ab_tobytes",
        "import tempfile\n",
        'with open(os.path.join(tempfile.gettempdir(), "r.bin"), "ab") as f:\n'
        "    f.write(router_logits.cpu().numpy().tobytes())\n",
    ),
    (
        "c_inline_import_tempfile",
        "",
        'import tempfile as _tf\ntorch.save(router_logits, os.path.join(_tf.gettempdir(), "r.pt"))\n',
    ),
]:
    loader(name, imports, body.replace("router_logits", "weights").replace("self.layer_idx", "len(weights)"))

# (4) qualified and aliased sink names, environment destinations with a temp fallback
for name, imports, body in [
    ("d_serialization_save", "import torch.serialization\n", 'torch.serialization.save(router_logits, "/tmp/r.pt")\n'),
    ("d_ser_alias", "import torch.serialization as ser\n", 'ser.save(router_logits, "/tmp/r.pt")\n'),
    (
        "d_safetensors_save_file",
        "import safetensors.torch\n",
        'safetensors.torch.save_file({"r": router_logits}, "/tmp/r.safetensors")\n',
    ),
    (
        "d_safetensors_from_alias",
        "from safetensors.torch import save_file as sf\n",
        'sf({"r": router_logits.contiguous()}, f"/tmp/r{self.layer_idx}.safetensors")\n',
    ),
    (
        "d_np_write_array",
        "import numpy\n",
        'numpy.lib.format.write_array(open("/tmp/r.npy", "wb"), router_logits.cpu().numpy())\n',
    ),
    ("d_pickler_dump", "import pickle\n", 'pickle.Pickler(open("/tmp/r.pkl", "wb")).dump(router_logits)\n'),
    (
        "d_envs_or_tmp",
        "import vllm.envs as envs\n",
        'torch.save(router_logits, envs.VLLM_ROUTER_DUMP or "/tmp/router.pt")\n',
    ),
    ("d_getenv_default_tmp", "", 'torch.save(router_logits, os.getenv("VLLM_DUMP_PATH", "/tmp/router.pt"))\n'),
    (
        "d_environ_get_or_tmpdir",
        "import tempfile\n",
        'where = os.environ.get("VLLM_DUMP_DIR") or tempfile.gettempdir()\n'
        'torch.save(router_logits, os.path.join(where, "r.pt"))\n',
    ),
    ("d_np_savez", "import numpy as np\n", 'np.savez("/tmp/r.npz", r=router_logits.cpu().numpy())\n'),
    (
        "d_torch_serialization_from",
        "from torch.serialization import save as tsave\n",
        'tsave(router_logits, "/tmp/r.pt")\n',
    ),
]:
    loader(name, imports, body.replace("router_logits", "weights").replace("self.layer_idx", "len(weights)"))
# A tensor dump a patch adds to a per-step path is high even behind an environment option: once set,
# it writes on every step of every layer (vLLM's VLLM_DEBUG_DUMP_PATH is for compile-graph dumps,
# not activations). However the save is spelled (`torch.save`, `getattr(torch, "save")`, a helper),
# the verdict is the same. A setting named on the config (`self.config.dump_router`) and one-time
# code (`load_weights`) behind an option stay below high.
dump(
    "e_documented_setting_new_to_file",
    "import vllm.envs as envs\n",
    "if envs.VLLM_DEBUG_DUMP_PATH:\n"
    '    torch.save(router_logits, f"{envs.VLLM_DEBUG_DUMP_PATH}/r{self.layer_idx}.pt")\n',
    high=True,
)
dump(
    "e_getattr_save_setting_local",
    "import vllm.envs as envs\n",
    'if envs.VLLM_DEBUG_DUMP_PATH:\n    _persist = getattr(torch, "save")\n'
    '    where = envs.VLLM_DEBUG_DUMP_PATH\n    _persist(router_logits.cpu(), f"{where}/r.pt")\n',
    high=True,
)
dump(
    "e_helper_behind_new_setting",
    "import vllm.envs as envs\n",
    'if envs.VLLM_DEBUG_DUMP_PATH:\n    _dump(router_logits, f"{envs.VLLM_DEBUG_DUMP_PATH}/r.pt")\n',
    top="\n\ndef _dump(t, path):\n    torch.save(t.detach().cpu(), path)\n",
    high=True,
)
dump(
    "q_helper_behind_config",
    "",
    "if self.config.dump_router:\n    _dump(router_logits, self.config.dump_path)\n",
    top="\n\ndef _dump(t, path):\n    torch.save(t.detach().cpu(), path)\n",
    high=False,
)
dump(
    "q_config_gated_forward",
    "",
    "if self.config.dump_router:\n"
    '    torch.save(router_logits, os.path.join(self.config.dump_dir, f"{self.layer_idx}.pt"))\n',
    high=False,
)
WITH_SETTING = R(
    IMP,
    IMP + "import vllm.envs as envs\n",
    "        self.head_dim = head_dim\n",
    "        self.head_dim = head_dim\n        self.dump_dir = envs.VLLM_ROUTER_DUMP_DIR\n",
)
case(
    "e_setting_the_file_read",
    WITH_SETTING.replace(
        FWD,
        FWD + "        if envs.VLLM_ROUTER_DUMP_DIR:\n"
        '            torch.save(router_logits, f"{envs.VLLM_ROUTER_DUMP_DIR}/{self.layer_idx}.pt")\n',
    ),
    high=True,
    pristine=WITH_SETTING,
)
dump(
    "e_envs_gated_new_to_file",
    "import vllm.envs as envs\n",
    "if envs.VLLM_ROUTER_DUMP:\n    torch.save(router_logits, envs.VLLM_ROUTER_DUMP)\n",
    high=True,
)
loader(
    "q_envs_no_fallback_load",
    "import vllm.envs as envs\n",
    'if envs.VLLM_WEIGHTS_DUMP:\n    torch.save(weights, os.path.join(envs.VLLM_WEIGHTS_DUMP, "w.pt"))\n',
    high=False,
)
loader(
    "q_cache_dir_fallback_home",
    "",
    'where = os.environ.get("VLLM_CACHE_ROOT") or os.path.expanduser("~/.cache/vllm")\n'
    'torch.save(weights, os.path.join(where, "w.pt"))\n',
    high=False,
)

# (5) a raise/assert narrowed by flipping its shape
RW = "        if router_logits.shape[-1] != self.config.n_routed_experts:\n"
HD = "        if head_dim not in (64, 128, 192):\n"
DT = "            if w.dtype not in (torch.bfloat16, torch.float8_e4m3fn):\n"
AS = "        assert hidden_states is not None and hidden_states.is_contiguous()\n"
case("e_ne_to_eq_bad", R(RW, "        if router_logits.shape[-1] == 0:\n"))
case("e_not_in_to_in_one", R(HD, "        if head_dim in (96,):\n"))
case("e_not_in_to_in_set", R(DT, "            if w.dtype in {torch.float16}:\n"))
case("e_not_in_to_eq", R(HD, "        if head_dim == 96:\n"))
case("e_assert_drop_conjunct", R(AS, "        assert hidden_states is not None\n"))
case("e_ne_to_is_none", R(RW, "        if router_logits is None:\n"))
case("e_not_eq_to_eq", R(RW, "        if not router_logits.shape[-1] == 0:\n".replace("not ", "")))
DA = "        assert hidden_states.dtype in (torch.bfloat16, torch.float16)\n"
case("e_assert_in_to_not_in", R(DA, "        assert hidden_states.dtype not in (torch.float64,)\n"))
case("e_assert_in_to_ne", R(DA, "        assert hidden_states.dtype != torch.float64\n"))
case(
    "q_assert_in_widened",
    R(DA, "        assert hidden_states.dtype in (torch.bfloat16, torch.float16, torch.float32)\n"),
    high=False,
)
case(
    "q_raise_stricter_or",
    R(RW, "        if router_logits is None or router_logits.shape[-1] != self.config.n_routed_experts:\n"),
    high=False,
)
case(
    "e_yoda_flip",
    R(HD, "        if 96 == head_dim:\n"),
)
case(
    "q_hoist_supported_const",
    R(HD, "        if head_dim not in _SUPPORTED_HEAD_DIMS:\n", TOP, TOP + "_SUPPORTED_HEAD_DIMS = (64, 128, 192)\n"),
    high=False,
)
case(
    "q_rewrite_same_shape",
    R(RW, "        if router_logits.size(-1) != self.config.n_routed_experts:\n"),
    high=False,
)
case(
    "q_outside_to_outside_set",
    R(DT, "            if w.dtype not in _OK_DTYPES:\n", TOP, TOP + "_OK_DTYPES = {torch.bfloat16}\n"),
    high=False,
)
case(
    "q_eq_to_le",
    R("        if w.numel() > 1 << 30:\n", "        if w.numel() > 1 << 30 or w.numel() <= 0:\n"),
    high=False,
)
case("e_demorgan_and", R(AS, "        assert hidden_states is not None or hidden_states.is_contiguous()\n"))
case(
    "q_assert_split_in_two",
    R(AS, "        assert hidden_states is not None\n        assert hidden_states.is_contiguous()\n"),
    high=False,
)
EITHER = R(RW, "        if router_logits is None or router_logits.shape[-1] != self.config.n_routed_experts:\n")
case(
    "q_raise_split_in_two",
    R(RW, "        if router_logits is None:\n            raise ValueError('router width')\n" + RW),
    high=False,
    pristine=EITHER,
)
case("e_raise_disjunct_dropped", R(RW, "        if router_logits is None:\n"), pristine=EITHER)
case("q_widen_head_dim", R(HD, "        if head_dim not in (64, 128, 192, 256):\n"), high=False)
case("q_threshold_edit", R("        if w.numel() > 1 << 30:\n", "        if w.numel() > 1 << 31:\n"), high=False)
case(
    "q_dtype_list_edit",
    R(DT, "            if w.dtype not in (torch.bfloat16, torch.float8_e4m3fn, torch.float16):\n"),
    high=False,
)
case(
    "q_assert_to_if_raise",
    R(
        AS,
        "        if hidden_states is None or not hidden_states.is_contiguous():\n"
        "            raise ValueError('hidden')\n",
    ),
    high=False,
)
case(
    "q_message_change",
    R('raise ValueError("router width")', 'raise ValueError(f"router width {router_logits.shape}")'),
    high=False,
)
case(
    "q_guard_into_helper",
    R(
        RW + '            raise ValueError("router width")\n',
        "        self._check_router(router_logits)\n",
        "    def load_weights(self, weights):\n",
        "    def _check_router(self, router_logits):\n"
        + RW.replace("        ", "    ", 1)
        + '            raise ValueError("router width")\n\n    def load_weights(self, weights):\n',
    ),
    high=False,
)
case("q_except_importerror", R(IMP, IMP + "try:\n    import flashinfer\nexcept ImportError:\n    pass\n"), high=False)

RULES = load_rules()


def highs(patched: str, pristine: str) -> list[tuple[str, int]]:
    file = SourceFile(
        path="vllm/model_executor/models/deepseek_v2.py", installed=patched.encode(), pristine=pristine.encode()
    )
    return [(f.rule, f.line) for f in check_file(file, RULES) if f.severity is Severity.HIGH and f.in_change]


@pytest.mark.parametrize(("name", "patched", "high", "pristine"), CASES, ids=[c[0] for c in CASES])
def test_family(name: str, patched: str, high: bool, pristine: str) -> None:
    found = highs(patched, pristine)
    assert bool(found) == high, (name, found)


# Real code read whole (`scan --all-files`): shapes from SGLang's pristine tree that must stay below high.
UPSTREAM = {
    # A test suite's helper module (it imports pytest but defines no test itself) keeps a download
    # in the temp directory.
    "suite_helpers": """
import tempfile
from pathlib import Path

import pytest

MESH_OUTPUT_PATHS = {}


def fetch_mesh(resp, case_id, mesh_id):
    if resp.status_code != 200:
        pytest.fail(f"{case_id}: download failed")
    temp_path = Path(tempfile.gettempdir()) / f"mesh_test_{mesh_id}.glb"
    temp_path.write_bytes(resp.content)
    MESH_OUTPUT_PATHS[case_id] = str(temp_path)
""",
    # A profiler whose output directory is a documented setting defaulting to the bare temp directory.
    "profiler_setting": """
import json
import os
import time
from pathlib import Path

PROFILER_DIR = os.getenv("SGLANG_TORCH_PROFILER_DIR", "/tmp")


def run_profile(url, output_dir=None):
    if output_dir is None:
        output_dir = PROFILER_DIR
    output_dir = Path(os.path.abspath(os.path.normpath(output_dir))) / str(time.time())
    output_dir.mkdir(exist_ok=True, parents=True)
    file_path = Path(output_dir) / "server_args.json"
    with open(file_path, "w") as file:
        file.write(json.dumps({"url": url}))
""",
}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_upstream_code_read_whole_is_not_high(name: str) -> None:
    data = UPSTREAM[name].lstrip("\n").encode()
    file = SourceFile(path=f"sglang/{name}.py", installed=data, pristine=None, drifted=False)
    found = [(f.rule, f.line) for f in check_file(file, RULES) if f.severity is Severity.HIGH]
    assert found == [], found
