"""Guards removed, weakened or swallowed however the patch spells it, and dumps reached through
pathlib, the environment and attributes: engine-level, each case one module against its pristine.

Written as a hurried engineer debugging a large MoE model writes them: a check deleted where a
like one survives in a helper the function already called, an assert given a way out (`or
DEBUG`, a conditional expression), a check inside `with suppress(...)` under an alias or a
context manager of the module that drops exceptions; a JSON dump to `Path(os.environ[...]) / x`,
a saver held as a class attribute. Each look-alike of the same shape must stay below high.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

CASES: list[tuple[str, str, str, bool]] = []


def case(name: str, patched: str, high: bool = True, pristine: str | None = None) -> None:
    CASES.append((name, pristine or P, patched, high))


P = textwrap.dedent("""
import os
import logging
import json

import torch
from torch import nn

logger = logging.getLogger(__name__)


class DeepseekV2MLAAttention(nn.Module):
    def __init__(self, config, num_heads, head_dim, kv_lora_rank):
        super().__init__()
        self.config = config
        self.num_heads = num_heads
        self.head_dim = head_dim
        assert num_heads % 8 == 0, "heads must divide tp"
        if head_dim not in (64, 128, 192):
            raise ValueError(f"unsupported head_dim {head_dim}")
        self.kv_lora_rank = kv_lora_rank

    def forward(self, positions, hidden_states):
        assert hidden_states.dim() == 2
        q = self.q_proj(hidden_states)
        if q.shape[-1] != self.num_heads * self.head_dim:
            raise ValueError("bad q shape")
        assert positions.shape[0] == hidden_states.shape[0]
        out = self.attn(q)
        return out

    def extra(self, hidden_states, positions):
        assert hidden_states.dim() == 2
        assert positions.shape[0] == hidden_states.shape[0]
        return hidden_states

    def load_weights(self, weights):
        for name, w in weights:
            assert name in self.params, name
            if w.dtype == torch.float8_e4m3fn and not self.fp8_ok:
                raise NotImplementedError("fp8")
            self.params[name].copy_(w)
        assert len(self.params) > 0


def check_scales(scale, block):
    if scale.dim() != 2:
        raise ValueError("scale dim")
    if block.dim() != 2:
        raise ValueError("block dim")
    if scale.numel() == 0:
        raise ValueError("empty scale")
    return scale
""").lstrip()


def R(*pairs: str) -> str:
    out = P
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert old in out, old
        out = out.replace(old, new, 1)
    return out


FWD_ASSERT = "        assert hidden_states.dim() == 2\n        q = self.q_proj"
FWD_RAISE = '        if q.shape[-1] != self.num_heads * self.head_dim:\n            raise ValueError("bad q shape")\n'


# (1) removed where an identical one survives
case("g1_del_assert_dup_other_fn", R(FWD_ASSERT, "        q = self.q_proj"))
case(
    "g1_comment_assert_dup_other_fn",
    R(FWD_ASSERT, "        # assert hidden_states.dim() == 2\n        q = self.q_proj"),
)
case(
    "g1_del_positions_assert",
    R("        assert positions.shape[0] == hidden_states.shape[0]\n        out", "        out"),
)
case("g1_del_one_of_same_class_raise", R('    if block.dim() != 2:\n        raise ValueError("block dim")\n', ""))
case(
    "g1_comment_same_class_raise",
    R(
        '    if block.dim() != 2:\n        raise ValueError("block dim")\n',
        '    # if block.dim() != 2:\n    #     raise ValueError("block dim")\n',
    ),
)
case("g1_raise_cond_only_del", R('    if scale.numel() == 0:\n        raise ValueError("empty scale")\n', ""))
case(
    "g1_moved_assert_after_return",
    R("        assert len(self.params) > 0\n", "        return\n        assert len(self.params) > 0\n"),
)
case(
    "g1_del_raise_add_same_elsewhere",
    R(
        FWD_RAISE,
        "",
        "    def extra(self, hidden_states, positions):\n",
        "    def extra(self, hidden_states, positions):\n"
        "        if hidden_states.shape[-1] != 7:\n"
        "            raise ValueError('bad q shape')\n",
    ),
)
case(
    "g1_del_assert_and_dup_later",
    R(
        FWD_ASSERT,
        "        q = self.q_proj",
        "        out = self.attn(q)\n",
        "        out = self.attn(q)\n        assert hidden_states.dim() == 2\n",
    ),
    high=False,
)
CALLS = R("        out = self.attn(q)\n", "        out = self.attn(q)\n        check_scales(self.scale, self.block)\n")
case("g1_del_raise_helper_same_class", CALLS.replace(FWD_RAISE, ""), pristine=CALLS)
case(
    "g1_raise_to_return_helper_same_class",
    CALLS.replace('            raise ValueError("bad q shape")', "            return None"),
    pristine=CALLS,
)
INITC = R(
    "        self.kv_lora_rank = kv_lora_rank\n",
    "        self.kv_lora_rank = kv_lora_rank\n        self.extra(None, None)\n",
)
case(
    "g1_del_assert_helper_same_text",
    INITC.replace('        assert num_heads % 8 == 0, "heads must divide tp"\n', ""),
    pristine=INITC,
)
case(
    "g1_del_assert_helper_same_text2",
    R(FWD_ASSERT, "        self.extra(hidden_states, positions)\n        q = self.q_proj"),
    high=False,
)
# (2) raise -> return / pass / warning
case("g2_return_none", R('            raise ValueError("bad q shape")', "            return None"))
case("g2_return", R('            raise ValueError("bad q shape")', "            return"))
case("g2_pass", R('        raise ValueError("empty scale")', "        pass"))
case(
    "g2_warning",
    R('            raise ValueError("bad q shape")', '            logger.warning("bad q shape, continuing")'),
)
case(
    "g2_warning_once",
    R(
        '            raise ValueError(f"unsupported head_dim {head_dim}")',
        '            logger.warning_once(f"unsupported head_dim {head_dim}")',
    ),
)
case(
    "g2_print_fallthrough",
    R('            raise NotImplementedError("fp8")', '            print("fp8 weight, loading anyway")'),
)
case("g2_continue", R('            raise NotImplementedError("fp8")', "            continue"))
case("g2_return_hidden", R('            raise ValueError("bad q shape")', "            return hidden_states"))
# (3) weakened
case(
    "g3_or_debug",
    R(
        "        assert hidden_states.dim() == 2\n        q",
        "        assert hidden_states.dim() == 2 or DEBUG\n        q",
        "logger = logging",
        "DEBUG = True\nlogger = logging",
    ),
)
case(
    "g3_and_b_or_debug",
    R(
        "        assert positions.shape[0] == hidden_states.shape[0]\n        out",
        "        assert positions.shape[0] == hidden_states.shape[0] and hidden_states.dim() == 2"
        " or os.environ.get('DBG')\n"
        "        out",
    ),
)
case("g3_or_true", R("        assert len(self.params) > 0", "        assert len(self.params) > 0 or True"))
case(
    "g3_or_environ",
    R(
        "        assert name in self.params, name",
        "        assert name in self.params or os.environ.get('VLLM_LAX'), name",
    ),
)
case(
    "g3_ifexp_skip",
    R(
        "        assert num_heads % 8 == 0, ",
        "        assert (num_heads % 8 == 0) if not SKIP else True, ",
        "logger = logging",
        "SKIP = os.environ.get('SKIP_CHECKS') == '1'\nlogger = logging",
    ),
)
case(
    "g3_ifexp_env_inline",
    R("        assert num_heads % 8 == 0, ", "        assert num_heads % 8 == 0 if not os.getenv('SKIP') else True, "),
)
case("g3_if_raise_and_not_env", R("    if scale.dim() != 2:", "    if scale.dim() != 2 and not os.environ.get('LAX'):"))
case(
    "g3_if_raise_ifexp",
    R(
        "    if scale.dim() != 2:",
        "    if (scale.dim() != 2) if not LAX else False:",
        "logger = logging",
        "LAX = True\nlogger = logging",
    ),
)
case(
    "g3_if_raise_and_false_debug",
    R(
        "    if scale.dim() != 2:",
        "    if scale.dim() != 2 and not DEBUG:",
        "logger = logging",
        "DEBUG = True\nlogger = logging",
    ),
)
case(
    "g3_assert_all_or",
    R(
        "        assert hidden_states.dim() == 2\n        q",
        "        assert hidden_states.dim() == 2 or hidden_states.dim() == 3 or __debug__\n        q",
    ),
)
# (4) swallowed
case(
    "g4_suppress_alias",
    R(
        "import json\n",
        "import json\nfrom contextlib import suppress as quiet\n",
        FWD_ASSERT,
        "        with quiet(AssertionError):\n            assert hidden_states.dim() == 2\n        q = self.q_proj",
    ),
)
case(
    "g4_suppress_module_alias",
    R(
        "import json\n",
        "import json\nimport contextlib as cl\n",
        FWD_RAISE,
        "        with cl.suppress(Exception):\n"
        "            if q.shape[-1] != self.num_heads * self.head_dim:\n"
        '                raise ValueError("bad q shape")\n',
    ),
)
case(
    "g4_suppress_plain",
    R(
        "import json\n",
        "import json\nimport contextlib\n",
        FWD_RAISE,
        "        with contextlib.suppress(ValueError):\n"
        "            if q.shape[-1] != self.num_heads * self.head_dim:\n"
        '                raise ValueError("bad q shape")\n',
    ),
)
case(
    "g4_try_except_pass",
    R(
        FWD_RAISE,
        "        try:\n            if q.shape[-1] != self.num_heads * self.head_dim:\n"
        '                raise ValueError("bad q shape")\n        except Exception:\n'
        "            pass\n",
    ),
)
case(
    "g4_try_except_log",
    R(
        FWD_RAISE,
        "        try:\n            if q.shape[-1] != self.num_heads * self.head_dim:\n"
        '                raise ValueError("bad q shape")\n'
        '        except ValueError as e:\n            logger.warning("ignored %s", e)\n',
    ),
)
case(
    "g4_custom_cm",
    R(
        "logger = logging.getLogger(__name__)\n",
        "logger = logging.getLogger(__name__)\n\n\nclass _Quiet:\n"
        "    def __enter__(self):\n        return self\n\n    def __exit__(self, *exc):\n"
        "        return True\n",
        FWD_ASSERT,
        "        with _Quiet():\n            assert hidden_states.dim() == 2\n        q = self.q_proj",
    ),
)
case(
    "g4_contextmanager_gen",
    R(
        "logger = logging.getLogger(__name__)\n",
        "logger = logging.getLogger(__name__)\n\n\nimport contextlib\n\n\n"
        "@contextlib.contextmanager\ndef tolerant():\n    try:\n        yield\n"
        "    except Exception:\n        logger.exception('ignored')\n",
        FWD_ASSERT,
        "        with tolerant():\n            assert hidden_states.dim() == 2\n        q = self.q_proj",
    ),
)
case(
    "g4_try_assert_except_assertion",
    R(
        "        assert len(self.params) > 0",
        "        try:\n            assert len(self.params) > 0\n        except AssertionError:\n            pass",
    ),
)
case(
    "g4_suppress_in_loop",
    R(
        "import json\n",
        "import json\nfrom contextlib import suppress\n",
        "            assert name in self.params, name\n",
        "            with suppress(AssertionError):\n                assert name in self.params, name\n",
    ),
)

# benign guards
case(
    "q_guard_helper",
    R(
        FWD_RAISE,
        "        self._check_q(q)\n",
        "    def extra(self",
        "    def _check_q(self, q):\n"
        "        if q.shape[-1] != self.num_heads * self.head_dim:\n"
        '            raise ValueError("bad q shape")\n\n    def extra(self',
    ),
    high=False,
)
case(
    "q_assert_to_if_raise",
    R(
        FWD_ASSERT,
        "        if hidden_states.dim() != 2:\n            raise ValueError('hidden')\n        q = self.q_proj",
    ),
    high=False,
)
case("q_message", R('raise ValueError("bad q shape")', 'raise ValueError(f"bad q shape {q.shape}")'), high=False)
case(
    "q_except_importerror",
    R("import json\n", "import json\ntry:\n    import flashinfer\nexcept ImportError:\n    pass\n"),
    high=False,
)
case(
    "q_suppress_unrelated",
    R(
        "import json\n",
        "import json\nimport contextlib\n",
        "        out = self.attn(q)\n",
        "        with contextlib.suppress(AttributeError):\n"
        "            self.cache.clear()\n        out = self.attn(q)\n",
    ),
    high=False,
)
case(
    "q_extra_assert",
    R(
        FWD_ASSERT,
        "        assert hidden_states.dim() == 2\n"
        "        assert hidden_states.is_contiguous()\n        q = self.q_proj",
    ),
    high=False,
)
case(
    "q_guard_moved_module_fn",
    R(
        '    if block.dim() != 2:\n        raise ValueError("block dim")\n',
        "    _check_block(block)\n",
        "def check_scales",
        "def _check_block(block):\n    if block.dim() != 2:\n"
        '        raise ValueError("block dim")\n\n\ndef check_scales',
    ),
    high=False,
)
case(
    "q_try_except_reraise",
    R(
        FWD_RAISE,
        "        try:\n            if q.shape[-1] != self.num_heads * self.head_dim:\n"
        '                raise ValueError("bad q shape")\n        except ValueError:\n'
        '            logger.error("q shape")\n            raise\n',
    ),
    high=False,
)


D = textwrap.dedent("""
import os
import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)


class DeepseekV2MoE(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.gate = nn.Linear(8, 8)

    def forward(self, hidden_states):
        router_logits = self.gate(hidden_states)
        out = self.experts(hidden_states, router_logits)
        return out
""").lstrip()


def RD(*pairs: str, base: str = D) -> str:
    out = base
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert old in out, old
        out = out.replace(old, new, 1)
    return out


IMP = "import os\n"
FWD = "        router_logits = self.gate(hidden_states)\n"


def dump(
    imports: str,
    body: str,
    name: str,
    high: bool = True,
    cls_attr: str | None = None,
    init: str | None = None,
    top: str | None = None,
) -> None:
    pairs = [IMP, IMP + imports, FWD, FWD + textwrap.indent(textwrap.dedent(body), "        ")]
    if cls_attr:
        pairs += [
            "class DeepseekV2MoE(nn.Module):\n",
            "class DeepseekV2MoE(nn.Module):\n" + textwrap.indent(textwrap.dedent(cls_attr), "    "),
        ]
    if init:
        pairs += [
            "        self.layer_idx = layer_idx\n",
            "        self.layer_idx = layer_idx\n" + textwrap.indent(textwrap.dedent(init), "        "),
        ]
    if top:
        pairs += [
            "logger = logging.getLogger(__name__)\n",
            "logger = logging.getLogger(__name__)\n" + textwrap.dedent(top),
        ]
    CASES.append((name, D, RD(*pairs), high))


# (5) pathlib from env
dump(
    "import json\nfrom pathlib import Path\n",
    '(Path(os.environ["DUMP_DIR"]) / "router.json").write_text(json.dumps(router_logits.tolist()))\n',
    "d5_path_env_write_text",
)
dump(
    "import json\nfrom pathlib import Path\n",
    '(Path(os.environ.get("DUMP_DIR", "/tmp")) / f"r{self.layer_idx}.json")'
    '.write_text(json.dumps({"shape": list(router_logits.shape)}))\n',
    "d5_path_envget_fstring",
)
dump(
    "import tempfile\nfrom pathlib import Path\n",
    'Path(tempfile.gettempdir(), f"{self.layer_idx}.pt").write_bytes(router_logits.cpu().numpy().tobytes())\n',
    "d5_tempdir_write_bytes",
)
dump(
    "import pickle\nfrom pathlib import Path\n",
    'with (Path(os.environ["D"]) / "x.pkl").open("wb") as f:\n    pickle.dump(router_logits.cpu(), f)\n',
    "d5_path_open_wb_pickle",
)
dump(
    "from pathlib import Path\n",
    'with (Path(os.environ["D"]) / "x.pt").open("wb") as f:\n    torch.save(router_logits, f)\n',
    "d5_path_open_wb_torch",
)
dump(
    "import pathlib\n",
    'p = pathlib.Path(os.getenv("DUMP", "/tmp/dumps"))\np.mkdir(exist_ok=True)\n'
    'torch.save(router_logits, p / f"logits_{self.layer_idx}.pt")\n',
    "d5_pathlib_var_torch_save",
)
dump(
    "import json\nfrom pathlib import Path\n",
    'out_dir = Path(os.environ["D"])\n(out_dir / "meta.json").write_text(json.dumps({"n": hidden_states.shape[0]}))\n',
    "d5_var_dir_write_text",
)
dump(
    "import numpy as np\nfrom pathlib import Path\n",
    'np.save(Path.home() / "logits.npy", router_logits.float().cpu().numpy())\n',
    "d5_home_np_save",
)
dump(
    "import json\nimport tempfile\nfrom pathlib import Path\n",
    'Path(tempfile.gettempdir()).joinpath("router.json").write_text(json.dumps(router_logits.tolist()))\n',
    "d5_joinpath_write_text",
)
dump(
    "import json\nfrom pathlib import Path\n",
    'with Path("/tmp/router.jsonl").open("a") as fh:\n    fh.write(json.dumps(router_logits.tolist()) + "\\n")\n',
    "d5_path_open_append",
)
dump(
    "import json\n",
    'with open(os.path.join(os.environ["D"], "r.json"), "w") as fh:\n    json.dump(router_logits.tolist(), fh)\n',
    "d5_json_dump_fh",
)
# (6) dumping callable held as attribute
dump(
    "",
    "self._dump(router_logits)\n",
    "d6_staticmethod_lambda",
    cls_attr='_dump = staticmethod(lambda t: torch.save(t, "/tmp/router.pt"))\n',
)
dump(
    "import functools\nimport numpy as np\n",
    "self._sink(router_logits.cpu().numpy())\n",
    "d6_partial_np_save_init",
    init='self._sink = functools.partial(np.save, "/tmp/router.npy")\n',
)
dump(
    "import functools\n",
    "self._sink(router_logits)\n",
    "d6_partial_torch_save_init",
    init='self._sink = functools.partial(torch.save, f=f"/tmp/r{layer_idx}.pt")\n',
)
dump(
    "",
    "self.dump_fn(router_logits, f'/tmp/r{self.layer_idx}.pt')\n",
    "d6_init_attr_torch_save",
    init="self.dump_fn = torch.save\n",
)
dump(
    "",
    "self._rec(router_logits)\n",
    "d6_init_lambda",
    init='self._rec = lambda t: torch.save(t.cpu(), f"/tmp/moe_{layer_idx}.pt")\n',
)
dump(
    "import pickle\n",
    "self._dump(router_logits)\n",
    "d6_class_attr_fn_pickle",
    cls_attr='@staticmethod\ndef _dump(t):\n    with open("/tmp/r.pkl", "wb") as f:\n        pickle.dump(t, f)\n',
)
dump(
    "import functools\n",
    "self._save(router_logits)\n",
    "d6_class_attr_partial",
    cls_attr='_save = functools.partial(torch.save, f="/tmp/r.pt")\n',
)
dump(
    "",
    "DeepseekV2MoE._dump(router_logits)\n",
    "d6_class_attr_via_class",
    cls_attr='_dump = staticmethod(lambda t: torch.save(t, "/tmp/router.pt"))\n',
)
dump(
    "",
    "self.saver(router_logits)\n",
    "d6_init_method_ref",
    init="self.saver = self._save_logits\n",
    cls_attr='def _save_logits(self, t):\n    torch.save(t, f"/tmp/l{self.layer_idx}.pt")\n',
)
dump("", "_DUMP(router_logits)\n", "d6_module_lambda", top='_DUMP = lambda t: torch.save(t, "/tmp/x.pt")\n')
dump(
    "import json\n",
    "_SINK(json.dumps(router_logits.tolist()))\n",
    "d6_module_bound_write",
    top='_SINK = open("/tmp/sink.jsonl", "a").write\n',
)
# benign
dump(
    "",
    "",
    "q_documented_save_param",
    high=False,
    cls_attr="def save_logits(self, t, path):\n"
    '    """Write router logits to `path` (used by tools/export.py)."""\n'
    "    torch.save(t, path)\n",
)
dump(
    "",
    "if self.config.record_router:\n    self.recorder.append(router_logits.detach())\n",
    "q_config_recorder",
    high=False,
)
dump("", 'logger.debug("router %s", router_logits.shape)\n', "q_logger_debug", high=False)
dump(
    "import json\nfrom pathlib import Path\n",
    "",
    "q_pathlib_read",
    high=False,
    cls_attr="def load_map(self, path):\n    return json.loads(Path(path).read_text())\n",
)
dump("", "self._hook(router_logits)\n", "q_init_attr_noop", high=False, init="self._hook = lambda t: None\n")

dump(
    "import json\nfrom pathlib import Path\n",
    "",
    "q_save_param_pathlib",
    high=False,
    cls_attr='def save_stats(self, out_dir):\n    (Path(out_dir) / "stats.json").write_text(json.dumps(self.stats))\n',
)
dump(
    "import json\n",
    "",
    "q_documented_env_cache",
    high=False,
    cls_attr="def save_cache(self):\n"
    '    path = os.path.join(os.environ["VLLM_CACHE_ROOT"], "moe.json")\n'
    '    with open(path, "w") as fh:\n        json.dump(self.cfg, fh)\n',
)
dump(
    "import json\n",
    "",
    "q_envpath_in_helper_param",
    high=False,
    cls_attr='def export(self, path=None):\n    path = path or os.environ.get("MOE_EXPORT")\n'
    '    if path:\n        with open(path, "w") as fh:\n'
    "            json.dump(self.cfg, fh)\n",
)
dump(
    "import json\n",
    "",
    "d5_introduced_env_outside_forward",
    high=True,
    cls_attr="def load_weights(self, weights):\n    names = [n for n, _ in weights]\n"
    '    with open(os.path.join(os.environ["DSV2_DEBUG_DIR"], "names.json"), "w") as fh:\n'
    "        json.dump(names, fh)\n",
)


# guards, more
case(
    "g4_self_method_cm",
    R(
        "import json\n",
        "import json\nimport contextlib\n",
        "    def extra(self",
        "    @contextlib.contextmanager\n    def _lenient(self):\n        try:\n"
        "            yield\n        except AssertionError as e:\n"
        "            logger.warning('ignored %s', e)\n\n    def extra(self",
        FWD_ASSERT,
        "        with self._lenient():\n            assert hidden_states.dim() == 2\n        q = self.q_proj",
    ),
)
case(
    "g4_alias_assign_suppress",
    R(
        "import json\n",
        "import json\nimport contextlib\nquiet = contextlib.suppress\n",
        FWD_ASSERT,
        "        with quiet(Exception):\n            assert hidden_states.dim() == 2\n        q = self.q_proj",
    ),
)
case(
    "g4_suppress_check_helper",
    R(
        "import json\n",
        "import json\nfrom contextlib import suppress\n",
        "        assert len(self.params) > 0\n",
        "        with suppress(Exception):\n            assert len(self.params) > 0\n",
    ),
)
case(
    "g2_assert_to_if_log",
    R(
        FWD_ASSERT,
        "        if hidden_states.dim() != 2:\n"
        "            logger.warning('hidden dim %d', hidden_states.dim())\n"
        "        q = self.q_proj",
    ),
)
case(
    "g2_raise_else_pass",
    R(
        '    if scale.numel() == 0:\n        raise ValueError("empty scale")\n',
        "    if scale.numel() == 0:\n        pass\n",
    ),
)
case("g2_raise_to_break", R('            raise NotImplementedError("fp8")', "            break"))
case(
    "g2_raise_to_return_value_and_log",
    R(
        '            raise ValueError(f"unsupported head_dim {head_dim}")',
        '            logger.warning("unsupported head_dim %s", head_dim)\n            return',
    ),
)
case("g3_not_or", R("    if scale.dim() != 2:", "    if not (scale.dim() == 2 or os.environ.get('LAX')):"))
case(
    "g3_assert_any",
    R(
        "        assert len(self.params) > 0",
        "        assert any([len(self.params) > 0, DEBUG])",
        "logger = logging",
        "DEBUG = True\nlogger = logging",
    ),
    high=True,
)
case("g3_assert_tuple_msg", R("        assert len(self.params) > 0", "        assert (len(self.params) > 0, 'params')"))
case("g3_assert_env_and", R("    if scale.dim() != 2:", "    if os.getenv('STRICT', '1') == '1' and scale.dim() != 2:"))
case(
    "q_assert_stricter",
    R(
        "        assert len(self.params) > 0",
        "        assert len(self.params) > 0 and all(p is not None for p in self.params.values())",
    ),
    high=False,
)
case(
    "q_assert_wrap_nograd",
    R(
        FWD_ASSERT,
        "        with torch.no_grad():\n            assert hidden_states.dim() == 2\n        q = self.q_proj",
    ),
    high=False,
)
case(
    "q_suppress_importerror_around_assert",
    R(
        "import json\n",
        "import json\nimport contextlib\n",
        FWD_ASSERT,
        "        with contextlib.suppress(ImportError):\n"
        "            import flash_attn  # noqa\n        assert hidden_states.dim() == 2\n"
        "        q = self.q_proj",
    ),
    high=False,
)
case(
    "q_cm_reraises",
    R(
        "import json\n",
        "import json\nimport contextlib\n",
        "logger = logging.getLogger(__name__)\n",
        "logger = logging.getLogger(__name__)\n\n\n@contextlib.contextmanager\n"
        "def annotate():\n    try:\n        yield\n    except Exception:\n"
        "        logger.exception('in attention')\n        raise\n",
        FWD_ASSERT,
        "        with annotate():\n            assert hidden_states.dim() == 2\n        q = self.q_proj",
    ),
    high=False,
)
case(
    "q_assert_debug_only_when_dev",
    R(FWD_ASSERT, "        assert hidden_states.dim() == 2, f'got {hidden_states.shape}'\n        q = self.q_proj"),
    high=False,
)
# dumps, more
dump(
    "import numpy as np\n",
    'np.save(os.path.join(os.environ["MOE_DUMP"], f"{self.layer_idx}.npy"), router_logits.cpu().numpy())\n',
    "d5_np_save_env_join",
)
dump(
    "from pathlib import Path\n",
    'router_logits.cpu().numpy().tofile(Path(os.environ["MOE_DUMP"]) / f"{self.layer_idx}.bin")\n',
    "d5_tofile_env_path",
)
dump(
    "import json\n",
    'json.dump(router_logits.tolist(), open(f"{os.environ[\'MOE_DUMP\']}/r.json", "w"))\n',
    "d5_json_open_fstring_env",
)
dump(
    "import logging.handlers\n",
    "",
    "d5_filehandler_env",
    init='logger.addHandler(logging.FileHandler(os.path.join(os.environ["MOE_LOG_DIR"], "moe.log")))\n',
)
dump(
    "import pickle\nimport tempfile\n",
    'with open(os.path.join(tempfile.gettempdir(), "r.pkl"), "wb") as f:\n    pickle.dump(router_logits.cpu(), f)\n',
    "d5_tempdir_pickle",
)
dump(
    "import json\nfrom pathlib import Path\n",
    'Path(os.environ["MOE_DUMP"], "r.json").write_text(json.dumps(router_logits.tolist()))\n',
    "d5_path_two_args_env",
)
dump(
    "import json\nfrom pathlib import Path\n",
    'dump_dir = Path(os.environ.get("MOE_DUMP") or "/tmp/moe")\n'
    '(dump_dir / "r.json").write_text(json.dumps(router_logits.tolist()))\n',
    "d5_or_default_tmp",
)
dump(
    "import numpy as np\n",
    "self._sink(router_logits.cpu().numpy())\n",
    "d6_class_attr_np_partial_import_in_fn",
    cls_attr='import functools\n_sink = functools.partial(np.save, "/tmp/router.npy")\n',
)
dump(
    "",
    "self.dumper(router_logits)\n",
    "d6_init_attr_helper_fn",
    top='def _dump_tensor(t):\n    torch.save(t.cpu(), "/tmp/t.pt")\n',
    init="self.dumper = _dump_tensor\n",
)
dump(
    "",
    "self.hooks['dump'](router_logits)\n",
    "d6_dict_attr_lambda",
    init="self.hooks = {'dump': lambda t: torch.save(t, '/tmp/h.pt')}\n",
)
dump(
    "",
    "getattr(self, '_dump')(router_logits)\n",
    "d6_getattr_self",
    cls_attr='_dump = staticmethod(lambda t: torch.save(t, "/tmp/router.pt"))\n',
)


ENV_PRISTINE = "import os\n\n\nclass Model:\n    def __init__(self, config):\n        self.config = config\n"
CASES.append(
    (
        "e_env_forced_in_model",
        ENV_PRISTINE,
        ENV_PRISTINE.replace("        self.config", "        os.environ['NCCL_PROTO'] = 'Simple'\n        self.config"),
        True,
    )
)
CASES.append(
    (
        "e_env_alias_setdefault",
        ENV_PRISTINE,
        "from os import environ as env\n"
        + ENV_PRISTINE.replace(
            "        self.config", "        env.setdefault('VLLM_MLA_DISABLE', '1')\n        self.config"
        ),
        True,
    )
)
CASES.append(
    (
        "q_env_read_only",
        ENV_PRISTINE,
        ENV_PRISTINE.replace(
            "        self.config = config",
            "        self.config = config\n        self.debug = os.environ.get('MODEL_DEBUG')",
        ),
        False,
    )
)

RULES = load_rules()


def _high(pristine: str, patched: str, *, prefilter: bool = True) -> list[str]:
    source = SourceFile(
        path="vllm/model_executor/models/deepseek_v2.py", installed=patched.encode(), pristine=pristine.encode()
    )
    found = check_file(source, RULES, prefilter=prefilter)
    return [f"{f.rule}:{f.line}" for f in found if f.severity == Severity.HIGH and f.in_change and not f.suppressed]


@pytest.mark.parametrize(("pristine", "patched"), [c[1:3] for c in CASES if c[3]], ids=[c[0] for c in CASES if c[3]])
def test_patch_is_high(pristine: str, patched: str) -> None:
    assert _high(pristine, patched), patched


@pytest.mark.parametrize(
    ("pristine", "patched"), [c[1:3] for c in CASES if not c[3]], ids=[c[0] for c in CASES if not c[3]]
)
def test_look_alike_stays_below_high(pristine: str, patched: str) -> None:
    assert _high(pristine, patched) == [], patched


@pytest.mark.parametrize(("pristine", "patched"), [c[1:3] for c in CASES[::5]], ids=[c[0] for c in CASES[::5]])
def test_prefilter_changes_nothing(pristine: str, patched: str) -> None:
    # The verdict, not each rule's lines: disabled-guard's statement filter reads `suppress` as
    # spelled, so `with quiet(...)` after `quiet = contextlib.suppress` is removed-guard's alone.
    assert bool(_high(pristine, patched)) == bool(_high(pristine, patched, prefilter=False))
