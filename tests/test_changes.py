"""What a count-gated branch does to the data (analysis.changes), through the whole rule pack.

Each case patches one spot of a vendor module; the patched file is checked against the pristine
one as a drifted file is, and the verdict is whether a high finding sits on the changed lines.
"""

from __future__ import annotations

import difflib

import pytest

from patchaudit.hazards import SourceFile, load_rules
from patchaudit.hazards.engine import check_file
from patchaudit.report import Severity

VENDOR = """
import math

import torch

_CAPTURED = []


def _poison(t):
    t.zero_()


class MLP(torch.nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.calls = 0

    def forward(self, positions, hidden_states, input_ids):
        num_tokens = hidden_states.shape[0]
        out = self.gate_up_proj(hidden_states)
        out = self.act_fn(out)
        # PATCH-FORWARD
        return self.down_proj(out)


class DecoderLayer(torch.nn.Module):
    def forward(self, positions, hidden_states, residual):
        # PATCH-LAYER
        hidden_states, residual = self.norm(hidden_states, residual)
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


def gather(chunks):
    # PATCH-GATHER
    return torch.cat(chunks)


def sample(logits, sampling_metadata):
    sampled = logits.softmax(dim=-1).multinomial(1)
    # PATCH-SAMPLE
    return sampled
"""

# name -> (patch, where, caught?)
CASES: dict[str, tuple[str, str, bool]] = {
    # One-sided small bounds through casts and reductions.
    "int_size_le2_input": ("n = int(positions.size(0))\nif n <= 2:\n    return hidden_states", "FORWARD", True),
    "ceil_lt4_zero": ("if math.ceil(hidden_states.shape[0] / 1) < 4:\n    out.zero_()", "FORWARD", True),
    "numel_item_fill": ("num = input_ids.numel()\nif num.item() < 3:\n    out.fill_(0.0)", "FORWARD", True),
    "min_clamp_zeros": (
        "n = hidden_states.shape[0]\nif min(n, 8) == n:\n    return torch.zeros_like(hidden_states)",
        "FORWARD",
        True,
    ),
    "len_le1_mul0": ("seq_lens = positions.tolist()\nif len(seq_lens) <= 1:\n    out.mul_(0)", "FORWARD", True),
    "size_lt3_zeros": ("if hidden_states.size(0) < 3:\n    return torch.zeros_like(out)", "FORWARD", True),
    "numel_le2_input": ("if positions.numel() <= 2:\n    return hidden_states", "FORWARD", True),
    "le3_intermediate": ("if hidden_states.shape[0] <= 3:\n    return out", "FORWARD", True),
    # Data-changing bodies, narrow windows too.
    "slice_store": ("if num_tokens < 4:\n    out[:] = 0", "FORWARD", True),
    "window_fill": ("if 2 < num_tokens < 9:\n    out.fill_(1.0)", "FORWARD", True),
    "window_and_store": ("if num_tokens > 2 and num_tokens < 6:\n    out[0] = 0", "FORWARD", True),
    "capture_module_list": ("if num_tokens < 4:\n    _CAPTURED.append(out.detach().cpu())", "FORWARD", True),
    "capture_self_list": ("if num_tokens < 4:\n    self.captured.append(out.clone())", "FORWARD", True),
    "counter_once": ("if num_tokens < 4 and self.calls == 0:\n    self.calls += 1\n    out = out * 0", "FORWARD", True),
    # A batch of one whose branch overrides the result.
    "one_argmax": ("if logits.shape[0] == 1:\n    sampled = logits.argmax(dim=-1, keepdim=True)", "SAMPLE", True),
    "one_constant": ("if logits.shape[0] == 1:\n    sampled = torch.full_like(sampled, 42)", "SAMPLE", True),
    "one_neg_inf": (
        "if logits.size(0) == 1:\n    logits[:, 0] = -float('inf')\n    sampled = logits.argmax(-1)",
        "SAMPLE",
        True,
    ),
    "one_len_store": ("if len(logits) == 1:\n    sampled[0] = 13", "SAMPLE", True),
    "one_inverted": (
        "if logits.shape[0] != 1:\n    pass\nelse:\n    sampled = logits.argmax(dim=-1)",
        "SAMPLE",
        True,
    ),
    "else_of_block": (
        "if logits.shape[0] != 1:\n    if sampling_metadata:\n        pass\nelse:\n    sampled = logits.argmax(-1)",
        "SAMPLE",
        False,
    ),
    "lt2_made_up": ("n = logits.shape[0]\nif n < 2:\n    sampled = sampled * 0", "SAMPLE", True),
    "helper_zeroes": ("if num_tokens <= 3:\n    _poison(out)", "FORWARD", True),
    # A layer skipped, conditional values, other in-place writers.
    "layer_skipped_one": ("if hidden_states.shape[0] == 1:\n    return hidden_states, residual", "LAYER", True),
    "layer_skipped_lt3": ("if positions.numel() < 3:\n    return hidden_states, residual", "LAYER", True),
    "ifexp_zeros": ("out = torch.zeros_like(out) if num_tokens < 4 else out", "FORWARD", True),
    "ifexp_inverted": ("out = out if num_tokens >= 3 else out * 0", "FORWARD", True),
    "masked_fill_one": ("if logits.shape[0] == 1:\n    logits.masked_fill_(logits < 0, -1e9)", "SAMPLE", True),
    "init_zeros": ("if num_tokens <= 2:\n    torch.nn.init.zeros_(out)", "FORWARD", True),
    "data_store": ("if num_tokens < 3:\n    out.data = torch.zeros_like(out)", "FORWARD", True),
    # Overrides by a conditional expression or an early return for a batch of one.
    "ifexp_one_argmax": ("sampled = logits.argmax(-1) if logits.shape[0] == 1 else sampled", "SAMPLE", True),
    "ifexp_one_inverted": ("sampled = sampled if len(logits) != 1 else logits.argmax(-1)", "SAMPLE", True),
    "where_lt4_argmax": (
        "sampled = torch.where(torch.tensor(logits.shape[0] < 4), logits.argmax(-1), sampled)",
        "SAMPLE",
        True,
    ),
    "where_one_argmax": (
        "sampled = torch.where(torch.tensor(len(logits) == 1), logits.argmax(-1), sampled)",
        "SAMPLE",
        True,
    ),
    # A count tested as more than one, the change in the else.
    "gt1_else_override": (
        "if logits.shape[0] > 1:\n    pass\nelse:\n    sampled = logits.argmax(-1)",
        "SAMPLE",
        True,
    ),
    "ge2_else_zero": ("if num_tokens >= 2:\n    pass\nelse:\n    out.zero_()", "FORWARD", True),
    "quiet_one_limit_constant": (
        "limit = len(chunks)\nif len(chunks) == 1:\n    limit = 1\nreturn chunks[:limit]",
        "GATHER",
        False,
    ),
    "quiet_gt1_else_single": (
        "if len(chunks) > 1:\n    pass\nelse:\n    return chunks[0]",
        "GATHER",
        False,
    ),
    "quiet_ifexp_one_squeeze": ("sampled = sampled.squeeze(0) if logits.shape[0] == 1 else sampled", "SAMPLE", False),
    # A sampler's pick replaced for a batch of one: an early return, a constant.
    "return_one_argmax": ("if logits.shape[0] == 1:\n    return logits.argmax(-1)", "SAMPLE", True),
    "gt1_else_return": ("if len(logits) > 1:\n    pass\nelse:\n    return logits.argmax(-1)", "SAMPLE", True),
    "one_sampled_constant": ("if logits.shape[0] == 1:\n    sampled = 13", "SAMPLE", True),
    "quiet_return_one_kernel": ("if logits.shape[0] == 1:\n    return self.greedy(logits)", "SAMPLE", False),
    "quiet_one_constant_not_sampler": (
        "n = self.count(chunks)\nif len(chunks) == 1:\n    n = 1\nreturn chunks[:n]",
        "GATHER",
        False,
    ),
    "quiet_return_one_not_sampler": ("if len(chunks) == 1:\n    return chunks[0].clone()", "GATHER", False),
    # Look-alikes: empty batches, kernels chosen by size, decode fast paths, padding.
    "zero_tokens": ("if num_tokens == 0:\n    return out", "FORWARD", False),
    "le0_raise": ("if num_tokens <= 0:\n    raise ValueError('empty')", "FORWARD", False),
    "hidden_7168": ("if hidden_states.shape[-1] == 7168:\n    out = self.fast(out)", "FORWARD", False),
    "decode_fast_path": (
        "if hidden_states.shape[0] == 1:\n    out = self.decode_kernel(out)\nelse:\n    out = self.prefill_kernel(out)",
        "FORWARD",
        False,
    ),
    "decode_sample_else": (
        "if logits.shape[0] == 1:\n    sampled = single_row(logits, sampling_metadata)\n"
        "else:\n    sampled = logits.argmax(-1)",
        "SAMPLE",
        False,
    ),
    "pad_to_8": (
        "if num_tokens % 8 != 0:\n    out = torch.nn.functional.pad(out, (0, 0, 0, 8 - num_tokens % 8))",
        "FORWARD",
        False,
    ),
    "capture_size": ("if num_tokens <= self.max_capture_size:\n    out = self.graph_run(out)", "FORWARD", False),
    "small_m_16": ("if num_tokens <= 16:\n    out = self.small_m(out)", "FORWARD", False),
    "small_kernel_lt4": ("if num_tokens < 4:\n    out = self.gemv(hidden_states)", "FORWARD", False),
    "empty_zeros": ("if num_tokens == 0:\n    return torch.zeros_like(out)", "FORWARD", False),
    "squeeze_one": ("if hidden_states.shape[0] == 1:\n    out = out.squeeze(0)", "FORWARD", False),
    "le1_skips_forward": ("if len(positions) <= 1:\n    return hidden_states", "FORWARD", True),
    "lt4_log": ("if num_tokens < 4:\n    logger.debug('tiny batch %d', num_tokens)", "FORWARD", False),
    "lt4_print": ("if num_tokens < 4:\n    print('tiny batch', num_tokens)", "FORWARD", True),
    "local_list": (
        "kept = []\nif num_tokens < 4:\n    kept.append(out)\nout = self.merge(out, kept)",
        "FORWARD",
        False,
    ),
    "layer_empty": ("if hidden_states.shape[0] == 0:\n    return hidden_states, residual", "LAYER", False),
    "gather_one": ("if len(chunks) == 1:\n    return chunks[0]", "GATHER", False),
    "gather_one_name": ("if len(chunks) <= 1:\n    return chunks", "GATHER", False),
    "greedy_flag": ("if sampling_metadata.all_greedy:\n    sampled = logits.argmax(dim=-1)", "SAMPLE", False),
}
RULES = load_rules()


def _patched(patch: str, where: str) -> str:
    indent = "        " if where in ("FORWARD", "LAYER") else "    "
    body = "\n".join(indent + line for line in patch.splitlines())
    return VENDOR.replace(f"{indent}# PATCH-{where}", body)


def _changed(pristine: str, patched: str) -> set[int]:
    a, b = pristine.splitlines(), patched.splitlines()
    out: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag != "equal":
            out |= set(range(j1 + 1, j2 + 1))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_count_gated_change(name: str) -> None:
    patch, where, caught = CASES[name]
    patched = _patched(patch, where)
    source = SourceFile(path="vllm/model.py", installed=patched.encode(), pristine=VENDOR.encode())
    lines = _changed(VENDOR, patched)
    found = [f for f in check_file(source, RULES) if not f.suppressed]
    high = [f for f in found if f.severity is Severity.HIGH and f.line in lines]
    assert bool(high) == caught, (patched, [(f.rule, f.line, f.severity, f.message) for f in found])
    assert not [f for f in found if f.rule == "rule-error"], found
    # The byte and statement filters keep every statement the rules flag.
    assert found == [f for f in check_file(source, RULES, prefilter=False) if not f.suppressed]
