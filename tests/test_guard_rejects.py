"""A guard asked the one question that matters: can it still reject anything it rejected before?

Engine-level: each case is one installed module (a patched copy of a model/runner-shaped module)
checked against its pristine bytes. CAUGHT patches leave a check that can no longer fail, by its new
test (a bound no value passes, a comparison with itself, a contradiction) or by the lines above it
that overwrite what it reads; FOLDED patches merge or move checks without losing what they reject;
QUIET patches change a check to another real check.
"""

from __future__ import annotations

import difflib

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

P = """
import sys
import torch
from vllm import envs

MAX_TOKENS = 8192
SUPPORTED_KERNELS = (64, 128, 256)


class MLAAttention:
    def __init__(self, num_heads, head_size, kv_lora_rank):
        self.num_heads = num_heads
        self.head_size = head_size
        self.kv_lora_rank = kv_lora_rank
        self.scale = None

    def forward(self, q, kv_c, attn_metadata, scale=None):
        num_tokens = q.shape[0]
        assert num_tokens > 0, "empty batch"
        if scale is not None and scale.numel() != self.num_heads:
            raise ValueError(f"scale has {scale.numel()} entries, want {self.num_heads}")
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise TypeError(f"unsupported dtype {q.dtype}")
        assert kv_c.shape[-1] == self.kv_lora_rank, "kv_c rank"
        out = q @ kv_c.transpose(-1, -2)
        return out


class ModelRunner:
    def __init__(self, max_num_tokens, block_size):
        self.max_num_tokens = max_num_tokens
        self.block_size = block_size

    def execute_model(self, input_ids, positions, seq_lens, mask, limit):
        n = len(input_ids)
        if n > self.max_num_tokens:
            raise ValueError(f"{n} tokens exceed {self.max_num_tokens}")
        if (seq_lens > limit).any():
            raise ValueError("sequence longer than the limit")
        if not mask.all():
            raise RuntimeError("masked slots in the batch")
        assert positions.shape[0] == n, "positions"
        for i, blk in enumerate(seq_lens.tolist()):
            if blk < 0:
                raise ValueError(f"negative length at {i}")
        return input_ids[:n]

    def load_weights(self, name, loaded, param):
        expected = param.shape
        assert loaded.shape == expected, f"{name}: {loaded.shape} != {expected}"
        if loaded.dtype != param.dtype:
            raise TypeError(name)
        param.copy_(loaded)


def check_block_table(block_table, num_blocks):
    if block_table.max() >= num_blocks:
        raise IndexError("block id out of range")
    if block_table.min() < 0:
        raise IndexError("negative block id")
    return block_table


def decode(q, cum_seq_lens_q, return_lse):
    if cum_seq_lens_q is not None:
        assert not return_lse, "ragged decode cannot return LSE"
    return q


def prepare(input_ids):
    if len(input_ids) > MAX_TOKENS:
        raise ValueError("batch too large")
    return input_ids


def sample(logits, temperature):
    assert logits.dim() == 2, "logits"
    assert temperature >= 0.0, "temperature"
    return torch.softmax(logits / max(temperature, 1e-5), dim=-1)
"""


def R(old: str, new: str, source: str = P) -> str:
    assert old in source, old
    return source.replace(old, new, 1)


_NUM = '        assert num_tokens > 0, "empty batch"\n'
_SCALE = "        if scale is not None and scale.numel() != self.num_heads:\n"
_LIMIT = "        if (seq_lens > limit).any():\n"
_MASK = "        if not mask.all():\n"
_N = "        if n > self.max_num_tokens:\n"
_SHAPE = '        assert loaded.shape == expected, f"{name}: {loaded.shape} != {expected}"\n'

# (1) a check whose new test can no longer fail for the values it sees
VACUOUS = {
    "count_ge_zero": R(_NUM, _NUM.replace("> 0", ">= 0")),
    "count_yoda_le": R(_NUM, _NUM.replace("num_tokens > 0", "0 <= num_tokens")),
    "len_ge_zero": R(_NUM, '        assert len(q) >= 0, "empty batch"\n'),
    "numel_ge_zero": R(_NUM, '        assert q.numel() >= 0, "empty batch"\n'),
    "size_ge_zero": R(_NUM, '        assert q.size(0) > -1, "empty batch"\n'),
    "or_true": R(_NUM, _NUM.replace("num_tokens > 0", "num_tokens > 0 or True")),
    "is_not_none_or_true": R(_SHAPE, "        assert loaded is not None or True\n"),
    "compared_with_itself": R(_SHAPE, '        assert loaded.shape == loaded.shape, f"{name}"\n'),
    "size_compared_with_itself": R(_SHAPE, "        assert loaded.size(0) == loaded.size(0), name\n"),
    "isinstance_object": R(_SHAPE, "        assert isinstance(loaded, object), name\n"),
    "contradiction_window": R(_N, "        if n < 0 and n > 0:\n"),
    "bound_inf": R(_N, '        if n > float("inf"):\n'),
    "bound_maxsize": R(_N, "        if n > sys.maxsize:\n"),
    "bound_chained": R(_N, "        if self.max_num_tokens < n < 0:\n"),
    "loop_index": R("            if blk < 0:\n", "            if i < 0:\n"),
    "negative_block_min": R("    if block_table.min() < 0:\n", "    if block_table.numel() < 0:\n"),
    "temperature_abs": R('    assert temperature >= 0.0, "temperature"\n', "    assert abs(temperature) >= 0.0\n"),
}

_SELF_SCALE = _SCALE.replace("scale is not None and scale.numel()", "self.scale is not None and self.scale.numel()")
_SELF_P = R(_SCALE, _SELF_SCALE)

# (2) a check left alone, defeated by what the lines above it now bind
DEFEATED = {
    "scale_none": R(_SCALE, "        scale = None\n" + _SCALE),
    "self_scale_none": (_SELF_P, R(_SELF_SCALE, "        self.scale = None\n" + _SELF_SCALE, _SELF_P)),
    "x_is_expected": R(_SHAPE, "        expected = loaded.shape\n" + _SHAPE),
    "tuple_bound": R(_SCALE, "        scale, q = None, q.contiguous()\n" + _SCALE),
    "annotated_none": R(_SCALE, "        scale: torch.Tensor | None = None\n" + _SCALE),
    "mask_ones": R(_MASK, "        mask = torch.ones_like(mask)\n" + _MASK),
    "mask_fill": R(_MASK, "        mask.fill_(True)\n" + _MASK),
    "seq_lens_clamp": R(_LIMIT, "        seq_lens = seq_lens.clamp(max=limit)\n" + _LIMIT),
    "seq_lens_clamp_inplace": R(_LIMIT, "        seq_lens.clamp_(max=limit)\n" + _LIMIT),
    "seq_lens_torch_clamp": R(_LIMIT, "        seq_lens = torch.clamp(seq_lens, 0, limit)\n" + _LIMIT),
    "n_min": R(_N, "        n = min(n, self.max_num_tokens)\n" + _N),
    "flag_forced_off": R(
        "    if cum_seq_lens_q is not None:\n", "    if cum_seq_lens_q is not None:\n        return_lse = False\n"
    ),
    "flag_forced_above_branch": R(
        "    if cum_seq_lens_q is not None:\n", "    return_lse = False\n    if cum_seq_lens_q is not None:\n"
    ),
    "instance_limit_after_method_call": R(
        "        self.max_num_tokens = max_num_tokens\n",
        "        self.max_num_tokens = sys.maxsize\n",
        R("        n = len(input_ids)\n", "        input_ids = self._pad(input_ids)\n        n = len(input_ids)\n"),
    ),
    "other_exit_above": R(_NUM, "        if q.dim() == 0:\n            return q\n" + _NUM.replace("> 0", ">= 0")),
    "module_limit_maxsize": R("MAX_TOKENS = 8192\n", "MAX_TOKENS = sys.maxsize\n"),
    "instance_limit_inf": R(
        "        self.max_num_tokens = max_num_tokens\n", '        self.max_num_tokens = float("inf")\n'
    ),
    "reshaped_to_expected": R(_SHAPE, "        loaded = loaded.reshape(expected)\n" + _SHAPE),
    "cast_before_dtype_check": R(
        "        if q.dtype not in (torch.float16, torch.bfloat16):\n",
        "        q = q.to(torch.bfloat16)\n        if q.dtype not in (torch.float16, torch.bfloat16):\n",
    ),
    "truncated_to_limit": R(
        _N, "        input_ids = input_ids[: self.max_num_tokens]\n        n = len(input_ids)\n" + _N
    ),
    "torch_minimum": R(_LIMIT, "        seq_lens = torch.minimum(seq_lens, limit)\n" + _LIMIT),
    "block_table_clamp_offset": R(
        "    if block_table.max() >= num_blocks:\n",
        "    block_table = block_table.clamp(0, num_blocks - 1)\n    if block_table.max() >= num_blocks:\n",
    ),
    "block_table_clamp": R(
        "    if block_table.max() >= num_blocks:\n",
        "    block_table = block_table.clamp(max=num_blocks - 1)\n    if block_table.max() > num_blocks - 1:\n",
        P,
    ),
}

# a fold that drops part of what the checks rejected is still a removal
WEAKER_FOLD = {
    "folded_into_helper_weaker": R(
        '    assert logits.dim() == 2, "logits"\n    assert temperature >= 0.0, "temperature"\n',
        "    _check_sampling(logits, temperature)\n",
        R(
            "def sample(logits, temperature):\n",
            "def _check_sampling(logits, temperature):\n"
            "    if logits.dim() != 2:\n"
            "        raise ValueError(f'bad sampling inputs: {logits.shape}')\n\n\n"
            "def sample(logits, temperature):\n",
        ),
    ),
}

WEAKER_FOLD["assert_dropped_beside_reraise"] = R(
    _SHAPE,
    "        try:\n            if loaded.shape != expected:\n                loaded = loaded[: expected[0]]\n"
    "        except Exception:\n            raise\n",
)

# (3) checks folded, split, moved or reworded: every input they rejected is still rejected
FOLDED = {
    "two_asserts_one_raise": R(
        '        assert num_tokens > 0, "empty batch"\n',
        "",
        R(
            '        assert kv_c.shape[-1] == self.kv_lora_rank, "kv_c rank"\n',
            "        if not num_tokens > 0 or not kv_c.shape[-1] == self.kv_lora_rank:\n"
            "            raise ValueError('bad batch')\n",
        ),
    ),
    "two_raises_or": R(
        '    if block_table.max() >= num_blocks:\n        raise IndexError("block id out of range")\n'
        '    if block_table.min() < 0:\n        raise IndexError("negative block id")\n',
        "    if block_table.max() >= num_blocks or block_table.min() < 0:\n"
        "        raise IndexError(f'block ids must lie in [0, {num_blocks})')\n",
    ),
    "assert_split_over_lines": R(
        '    assert logits.dim() == 2, "logits"\n    assert temperature >= 0.0, "temperature"\n',
        "    if (\n        logits.dim() != 2\n        or temperature < 0.0\n    ):\n"
        "        raise ValueError('logits or temperature')\n",
    ),
    "assert_to_raise_multiline": R(
        _SHAPE,
        "        if not (\n            loaded.shape == expected\n        ):\n            raise ValueError(name)\n",
    ),
    "compound_split": R(
        _SCALE,
        "        if scale is not None:\n            if scale.numel() != self.num_heads:\n",
    ).replace(
        '            raise ValueError(f"scale has {scale.numel()} entries, want {self.num_heads}")\n',
        '                raise ValueError(f"scale has {scale.numel()} entries, want {self.num_heads}")\n',
    ),
    "folded_into_helper": R(
        '    assert logits.dim() == 2, "logits"\n    assert temperature >= 0.0, "temperature"\n',
        "    _check_sampling(logits, temperature)\n",
        R(
            "def sample(logits, temperature):\n",
            "def _check_sampling(logits, temperature):\n"
            "    if logits.dim() != 2 or temperature < 0.0:\n"
            "        raise ValueError(f'bad sampling inputs: {logits.shape}, {temperature}')\n\n\n"
            "def sample(logits, temperature):\n",
        ),
    ),
    "assert_to_early_raise_in_method": R(
        '        assert kv_c.shape[-1] == self.kv_lora_rank, "kv_c rank"\n',
        "        self._check_rank(kv_c)\n",
        R(
            "    def forward(self, q, kv_c, attn_metadata, scale=None):\n",
            "    def _check_rank(self, kv_c):\n        if kv_c.shape[-1] != self.kv_lora_rank:\n"
            "            raise ValueError(f'kv_c rank {kv_c.shape[-1]}')\n\n"
            "    def forward(self, q, kv_c, attn_metadata, scale=None):\n",
        ),
    ),
    "message_changed": R('"empty batch"', '"no tokens in this batch"'),
    "threshold_moved": R(_N, "        if n > 2 * self.max_num_tokens:\n"),
    "cast_to_other_dtype": R(
        "        if q.dtype not in (torch.float16, torch.bfloat16):\n",
        "        q = q.to(torch.float8_e4m3fn)\n        if q.dtype not in (torch.float16, torch.bfloat16):\n",
    ),
    "reshaped_other": R(_SHAPE, "        loaded = loaded.reshape(-1, loaded.shape[-1])\n" + _SHAPE),
    "truncated_to_other": R(
        _N, "        input_ids = input_ids[: 2 * self.max_num_tokens]\n        n = len(input_ids)\n" + _N
    ),
    "flag_cast": R(
        "    if cum_seq_lens_q is not None:\n",
        "    return_lse = bool(return_lse)\n    if cum_seq_lens_q is not None:\n",
    ),
    "flag_forced_in_branch": R(
        "    if cum_seq_lens_q is not None:\n",
        "    if q is None:\n        return_lse = False\n    if cum_seq_lens_q is not None:\n",
    ),
    "block_table_clamp_wider": R(
        "    if block_table.max() >= num_blocks:\n",
        "    block_table = block_table.clamp(max=num_blocks + 1)\n    if block_table.max() >= num_blocks:\n",
    ),
    "zero_tokens_returned_above": R(
        _NUM, "        if num_tokens == 0:\n            return q\n" + _NUM.replace("> 0", ">= 0")
    ),
    "module_limit_moved": R("MAX_TOKENS = 8192\n", "MAX_TOKENS = 16384\n"),
    "instance_limit_moved": R(
        "        self.max_num_tokens = max_num_tokens\n", "        self.max_num_tokens = 1 << 20\n"
    ),
    "threshold_constant": R(_N, "        if n > MAX_TOKENS:\n"),
    "dtype_added": R("(torch.float16, torch.bfloat16)", "(torch.float16, torch.bfloat16, torch.float8_e4m3fn)"),
    "count_gt_to_ne": R(_NUM, _NUM.replace("> 0", "!= 0")),
    "clamp_elsewhere": R(_LIMIT, "        clipped = seq_lens.clamp(max=limit)\n" + _LIMIT),
    "scale_assigned_in_branch": R(_SCALE, "        if envs.VLLM_USE_V1:\n            scale = None\n" + _SCALE),
    "mask_ones_other_name": R(_MASK, "        full = torch.ones_like(mask)\n" + _MASK),
    "capacity_rewritten": R(_N, "        if len(input_ids) > self.max_num_tokens:\n"),
    "import_error_pass": R(
        "import sys\n", "import sys\n\ntry:\n    import flashinfer\nexcept ImportError:\n    pass\n"
    ),
}

RULES = load_rules()


def _high(installed: str, pristine: str = P) -> list[tuple[str, int, str]]:
    file = SourceFile(path="vllm/attn.py", installed=installed.encode(), pristine=pristine.encode())
    return [(f.rule, f.line, f.message) for f in check_file(file, RULES) if f.severity is Severity.HIGH and f.in_change]


def _case(case: str | tuple[str, str]) -> tuple[str, str]:
    return (case[1], case[0]) if isinstance(case, tuple) else (case, P)


def _on_changed_lines(installed: str, pristine: str) -> list[int]:
    """The lines of the high findings that fall on lines the patch wrote (what a reviewer is shown)."""
    opcodes = difflib.SequenceMatcher(None, pristine.splitlines(), installed.splitlines()).get_opcodes()
    written = {j + 1 for tag, _, _, j1, j2 in opcodes if tag != "equal" for j in range(j1, j2)}
    return [line for _, line, _ in _high(installed, pristine) if line in written]


@pytest.mark.parametrize("name", sorted(VACUOUS))
def test_check_that_can_no_longer_fail_is_high(name: str) -> None:
    assert _on_changed_lines(*_case(VACUOUS[name])), name


@pytest.mark.parametrize("name", sorted(DEFEATED))
def test_check_defeated_by_the_lines_above_is_high(name: str) -> None:
    assert _on_changed_lines(*_case(DEFEATED[name])), name


@pytest.mark.parametrize("name", sorted(WEAKER_FOLD))
def test_fold_that_drops_a_failure_is_high(name: str) -> None:
    assert _high(*_case(WEAKER_FOLD[name])), name


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_check_folded_or_moved_is_quiet(name: str) -> None:
    assert _high(*_case(FOLDED[name])) == [], name


# An allow-list of a raise widened (`!= "silu"` to `not in ("silu", "gelu")`) while the code below still
# handles only the old values; and a check whose helper is named for what it raises on.
A = """
class MLP:
    def __init__(self, hidden_act, kv_dtype, quant):
        if hidden_act != "silu":
            raise ValueError(f"Unsupported activation: {hidden_act}")
        if kv_dtype not in ("auto", "fp8"):
            raise NotImplementedError(kv_dtype)
        self.act_fn = SiluAndMul()
        self.quant = quant

    def forward(self, logits, x):
        raise_if_nan_logits(logits)
        self._raise_on_bad_shape(x)
        return self.act_fn(x)
"""

WIDENED = {
    "ne_to_not_in": A.replace('hidden_act != "silu"', 'hidden_act not in ("silu", "gelu", "relu")'),
    "one_to_set": A.replace('kv_dtype not in ("auto", "fp8")', 'kv_dtype != "auto"').replace(
        'hidden_act != "silu"', 'hidden_act not in {"silu", "swish"}'
    ),
    "not_in_list": A.replace('hidden_act != "silu"', 'hidden_act not in ["gelu_new", "silu"]'),
    "raise_if_commented": A.replace(
        "        raise_if_nan_logits(logits)\n", "        pass  # raise_if_nan_logits(logits)\n"
    ),
    "raise_if_behind_false": A.replace(
        "        raise_if_nan_logits(logits)\n", "        if False:\n            raise_if_nan_logits(logits)\n"
    ),
    "raise_on_commented": A.replace("        self._raise_on_bad_shape(x)\n", "        # self._raise_on_bad_shape(x)\n"),
}

WIDENED_QUIET = {
    # the patch adds the code for the value it lets in
    "support_added": A.replace('hidden_act != "silu"', 'hidden_act not in ("silu", "gelu")').replace(
        "        self.act_fn = SiluAndMul()\n", "        self.act_fn = get_act_and_mul_fn(hidden_act)\n"
    ),
    "branch_added": A.replace('("auto", "fp8")', '("auto", "fp8", "int8")').replace(
        "        self.quant = quant\n",
        '        self.quant = quant\n        if kv_dtype == "int8":\n            self.scale = 1.0\n',
    ),
    # a list of several supported values grown by one: a kernel or a dtype added
    "list_grew": A.replace('("auto", "fp8")', '("auto", "fp8", "fp8_e5m2")'),
    # the allow-list narrowed: more is rejected
    "narrowed": A.replace('("auto", "fp8")', '("auto",)'),
    # the same values, spelled another way
    "respelled": A.replace('hidden_act != "silu"', 'hidden_act not in ("silu",)'),
    "raise_if_kept_in_helper": A.replace("        raise_if_nan_logits(logits)\n", "        self._check(logits)\n")
    + "\n    def _check(self, logits):\n        raise_if_nan_logits(logits)\n",
}


@pytest.mark.parametrize("name", sorted(WIDENED))
def test_allow_list_widened_or_raise_helper_dropped_is_high(name: str) -> None:
    assert _on_changed_lines(WIDENED[name], A), name


@pytest.mark.parametrize("name", sorted(WIDENED_QUIET))
def test_allow_list_widened_with_its_handling_is_quiet(name: str) -> None:
    assert _high(WIDENED_QUIET[name], A) == [], name


# Process-global state forced when a library module is imported (env-mutation): seeds, determinism.
M = """
import random

import numpy as np
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
"""
_AT = "\n\nclass Model(nn.Module):\n"

FORCED = {
    "torch_seed": M.replace(_AT, "\ntorch.manual_seed(1234)\n" + _AT),
    "np_alias_seed": M.replace(_AT, "\nnp.random.seed(0)\n" + _AT),
    "from_import": M.replace("import random\n", "import random\nfrom torch.cuda import manual_seed_all\n").replace(
        _AT, "\nmanual_seed_all(7)\n" + _AT
    ),
    "deterministic": M.replace(_AT, "\ntorch.use_deterministic_algorithms(True)\n" + _AT),
    "cudnn_flag": M.replace(_AT, "\ntorch.backends.cudnn.deterministic = True\n" + _AT),
    "class_body": M.replace("        super().__init__()\n", "        super().__init__()\n").replace(
        "class Model(nn.Module):\n", "class Model(nn.Module):\n    random.seed(3)\n\n"
    ),
}

FORCED_QUIET = {
    # a seed the caller asks for, inside a function
    "in_function": M + "\n    def reseed(self, seed):\n        torch.manual_seed(seed)\n",
    # behind an explicit option
    "behind_option": M.replace("import random\n", "import os\nimport random\n").replace(
        _AT, '\nif os.environ.get("MODEL_SEED"):\n    torch.manual_seed(int(os.environ["MODEL_SEED"]))\n' + _AT
    ),
    # a local generator, not the global one
    "own_generator": M.replace(
        _AT, "\n_GEN = torch.Generator().manual_seed(0)\n_RNG = np.random.default_rng(0)\n" + _AT
    ),
    # a command's own main
    "main_guard": M + '\n\nif __name__ == "__main__":\n    torch.manual_seed(0)\n',
}


def _high_in(installed: str, pristine: str, path: str = "vllm/model_executor/models/m.py") -> list[str]:
    file = SourceFile(path=path, installed=installed.encode(), pristine=pristine.encode())
    return [f.rule for f in check_file(file, RULES) if f.severity is Severity.HIGH and f.in_change]


@pytest.mark.parametrize("name", sorted(FORCED))
def test_global_state_forced_at_import_is_high(name: str) -> None:
    assert "env-mutation" in _high_in(FORCED[name], M), name


@pytest.mark.parametrize("name", sorted(FORCED_QUIET))
def test_seed_asked_for_is_quiet(name: str) -> None:
    assert _high_in(FORCED_QUIET[name], M) == [], name


def test_seed_in_a_test_helper_is_quiet() -> None:
    helper = "import pytest\n" + M
    assert _high_in("import pytest\n" + FORCED["torch_seed"], helper, path="tests/conftest.py") == []
