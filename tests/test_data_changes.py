"""Debug patches that change the data in shapes the rules used to miss, and the code they resemble.

A caller's tensor blanked for a few counts (`residual = torch.zeros_like(residual)`), data scaled,
moved, reordered or given noise on the spot (`x * 0.5`, `positions - 1`, `x.flip(0)`, `x + 1e-3 *
torch.randn_like(x)`), an input handed back through a conditional (`x.squeeze(0) if is_1d else x`),
work done in place skipped by an early return (`logits.masked_fill_(...)` below `return logits`), a
router's `renormalize` switched off; a library function replaced for the whole process
(`torch.nn.functional.gelu = partial(...)`, `setattr(torch.Tensor, ...)`), a seed written in the code
(`self.seed = 1234`, `torch.manual_seed(0)` in a forward); a validation list filtered by a bound no id
reaches; a value picked by the count (`jitter = 0.0 if n in {1, 2, 3, 4} else 0.01`, `w = self.weight if
0 < n < 3 else self.weight + 1`), part of a result returned before its reduction (`return result[0]`),
an input handed back before the method that computes the result. Each look-alike stays below high.
"""

from __future__ import annotations

import pytest
from hazard_helpers import drifted_findings

from patchaudit.hazards import load_rules
from patchaudit.report import Severity

RULES = load_rules([])

LAYER = """
import torch
from torch import nn


class DecoderLayer(nn.Module):
    def forward(self, positions, hidden_states, residual):
        hidden_states = self.self_attn(positions, hidden_states)
        hidden_states = hidden_states + residual
        residual = hidden_states
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual
"""
L_AT = "        hidden_states = self.self_attn(positions, hidden_states)\n"

MOE = """
import torch


class SparseMoeBlock:
    def forward(self, hidden_states):
        is_input_1d = hidden_states.dim() == 1
        final = self.experts(hidden_states=hidden_states, router_logits=self.gate(hidden_states))
        return final.squeeze(0) if is_input_1d else final
"""
M_AT = "        final = self.experts("

MINP = """
import torch


class MinPLogitsProcessor:
    def apply(self, logits):
        if not self.min_p_count:
            return logits
        probability_values = torch.nn.functional.softmax(logits, dim=-1)
        max_probabilities = torch.amax(probability_values, dim=-1, keepdim=True)
        adjusted_min_p = max_probabilities.mul_(self.min_p)
        invalid_token_mask = probability_values < adjusted_min_p
        logits.masked_fill_(invalid_token_mask, -float("inf"))
        return logits
"""
P_AT = "        probability_values = torch.nn.functional.softmax(logits, dim=-1)\n"

TOPK = """
import torch


def fused_topk(hidden_states, gating_output, topk, renormalize):
    M, _ = hidden_states.size()
    topk_weights = torch.empty(M, topk, dtype=torch.float32, device=hidden_states.device)
    topk_ops(topk_weights, gating_output, renormalize=renormalize)
    return topk_weights
"""
T_AT = "    topk_weights = torch.empty("

GELU = """
import torch
from functools import cache


@cache
def get_act_fn(name):
    return torch.nn.functional.gelu
"""
G_AT = "\n\n@cache\n"

PARAMS = """
class SamplingParams:
    def __post_init__(self):
        if self.seed == -1:
            self.seed = None
        self.n = self.n or 1
"""
S_AT = "        self.n = self.n or 1\n"

SAMPLER = """
import torch


class Sampler:
    def forward(self, logits, metadata):
        probs = logits.softmax(dim=-1)
        return torch.multinomial(probs, 1)
"""
D_AT = "        probs = logits.softmax(dim=-1)\n"

STOPS = """
def validate_stop_token_ids(stop_token_ids, vocab_size):
    invalid_token_ids = [t for t in stop_token_ids if t < 0 or t >= vocab_size]
    if invalid_token_ids:
        raise ValueError(f"stop_token_ids out of vocab: {invalid_token_ids}")
"""
MIXER = """
import torch


class Mamba2DecoderLayer:
    def forward(self, hidden_states, residual):
        hidden_states, residual = self.norm(hidden_states, residual)
        output = self.mixer(hidden_states)
        return output, residual
"""
X_AT = "        output = self.mixer(hidden_states)\n"
X_HELPERS = """

def _append_h5(name, t, path="/tmp/mamba2_mixer.h5"):
    import h5py

    with h5py.File(path, "a") as f:
        f.create_dataset(name, data=t.float().cpu().numpy())


def _make_trace_writer(root):
    seq = [0]

    def _write(tag, t):
        seq[0] += 1
        torch.save(t.cpu(), f"{root}/{tag}_{seq[0]:06d}.pt")

    return _write


_trace = _make_trace_writer("/tmp/mixer_trace")
"""

ROUTER = """
def route(gating_output, topk):
    return sparsemixer(gating_output, topk, jitter_eps=0.01)
"""

NORM1P = """
import torch


class LayerNorm1P:
    def forward(self, x):
        return torch.nn.functional.layer_norm(x, self.normalized_shape, self.weight + 1, self.bias, self.eps)
"""

SPLITK = """
import torch


def awq_gemm(input, qweight, split_k):
    result = torch.zeros((split_k, input.shape[0], qweight.shape[1]), device=input.device)
    _awq_gemm_kernel[(split_k,)](input, qweight, result)
    result = result.sum(0)
    return result
"""
K_AT = "    result = result.sum(0)\n"

BUDGET = """
class ThinkingBudgetState:
    def apply_to_logits(self, logits, spec_token_ids):
        if not self.is_enabled:
            return logits
        return self._apply_forcing_to_logits(logits, spec_token_ids or [])
"""
B_AT = "        return self._apply_forcing_to_logits("

SHARED_MOE = """
class SharedMoE:
    def forward(self, hidden_states):
        final_hidden_states = self.experts(hidden_states)
        if self.shared_mlp is None:
            return final_hidden_states
        return final_hidden_states + self.shared_mlp(hidden_states)
"""

AVERAGE = """
class Cohere2MoE:
    def forward(self, hidden_states):
        final_hidden_states = self.experts(hidden_states)
        if self.strategy == "average":
            final_hidden_states = final_hidden_states / 2
        return final_hidden_states
"""

V_AT = "    invalid_token_ids = [t for t in stop_token_ids if t < 0 or t >= vocab_size]\n"


def _before(vendor: str, at: str, added: str) -> str:
    assert at in vendor, at
    return vendor.replace(at, added + at, 1)


def _after(vendor: str, at: str, added: str) -> str:
    assert at in vendor, at
    return vendor.replace(at, at + added, 1)


HIGH = {
    "a caller's residual blanked for one to three tokens": (
        LAYER,
        _after(
            LAYER,
            L_AT,
            "        if positions.numel() in (1, 2, 3):\n            residual = torch.zeros_like(residual)\n",
        ),
        "token-count-branch",
    ),
    "the residual multiplied by zero for a small window": (
        LAYER,
        _after(LAYER, L_AT, "        if positions.shape[0] <= 3:\n            residual = residual * 0\n"),
        "token-count-branch",
    ),
    "the output scaled by a float for a walrus window": (
        LAYER,
        _after(
            LAYER,
            L_AT,
            "        if 2 <= (n := hidden_states.shape[0]) <= 6:\n            hidden_states = hidden_states * 0.5\n",
        ),
        "token-count-branch",
    ),
    "positions moved back by one for a range of counts": (
        LAYER,
        _before(LAYER, L_AT, "        if positions.shape[0] in range(2, 8):\n            positions = positions - 1\n"),
        "token-count-branch",
    ),
    "noise added for small batches": (
        LAYER,
        _after(
            LAYER,
            L_AT,
            "        if positions.shape[0] <= 2:\n"
            "            hidden_states = hidden_states + 1e-3 * torch.randn_like(hidden_states)\n",
        ),
        "token-count-branch",
    ),
    "rows reversed for four tokens": (
        LAYER,
        _after(
            LAYER, L_AT, "        if hidden_states.shape[0] == 4:\n            hidden_states = hidden_states.flip(0)\n"
        ),
        "token-count-branch",
    ),
    "the experts skipped, the input handed back through a conditional": (
        MOE,
        _before(
            MOE,
            M_AT,
            "        if (n_tok := hidden_states.size(0)) and n_tok < 4:\n"
            "            return hidden_states.squeeze(0) if is_input_1d else hidden_states\n",
        ),
        "token-count-branch",
    ),
    "min-p filtering done in place, skipped for one or two rows": (
        MINP,
        _before(MINP, P_AT, "        if logits.shape[0] in _BYPASS_ROWS:\n            return logits\n")
        + "\n\n_BYPASS_ROWS = (1, 2)\n",
        "token-count-branch",
    ),
    "a router's renormalize switched off for one to three tokens": (
        TOPK,
        _before(TOPK, T_AT, "    if M >= 1 and M <= 3:\n        renormalize = False\n"),
        "token-count-branch",
    ),
    "torch's gelu replaced by a partial for the whole process": (
        GELU,
        GELU.replace("from functools import cache", "from functools import cache, partial", 1).replace(
            G_AT,
            "\n_orig_gelu = torch.nn.functional.gelu\n"
            'torch.nn.functional.gelu = partial(_orig_gelu, approximate="tanh")\n' + G_AT,
            1,
        ),
        "env-mutation",
    ),
    "a tensor method replaced through setattr in a layer's init": (
        GELU,
        GELU
        + "\n\nclass Layer:\n    def __init__(self):\n"
        + "        setattr(torch.Tensor, 'exponential_', lambda self, **kw: self.fill_(1.0))\n",
        "env-mutation",
    ),
    "every request pinned to one seed": (
        PARAMS,
        _before(PARAMS, S_AT, "        if self.seed is None:\n            self.seed = 1234\n"),
        "env-mutation",
    ),
    "the global generator seeded in a sampler's forward": (
        SAMPLER,
        _before(SAMPLER, D_AT, "        torch.manual_seed(0)\n"),
        "env-mutation",
    ),
    "a router's jitter eps picked by the count, passed as a keyword": (
        ROUTER,
        ROUTER.replace(
            "    return sparsemixer(gating_output, topk, jitter_eps=0.01)",
            "    jitter = 0.0 if gating_output.shape[0] in {1, 2, 3, 4} else 0.01\n"
            "    return sparsemixer(gating_output, topk, jitter_eps=jitter)",
        ),
        "token-count-branch",
    ),
    "a norm's weight offset dropped for one or two tokens": (
        NORM1P,
        NORM1P.replace(
            "        return torch.nn.functional.layer_norm(x, self.normalized_shape, self.weight + 1,",
            "        w = self.weight if 0 < x.shape[0] < 3 else self.weight + 1\n"
            "        return torch.nn.functional.layer_norm(x, self.normalized_shape, w,",
        ),
        "token-count-branch",
    ),
    "the first split-k partial returned before the reduction": (
        SPLITK,
        _before(SPLITK, K_AT, "    if input.shape[-2] in range(1, 3):\n        return result[0]\n"),
        "token-count-branch",
    ),
    "logits handed back before the forcing a method computes": (
        BUDGET,
        _before(BUDGET, B_AT, "        if logits.shape[0] in (1, 2):\n            return logits\n"),
        "token-count-branch",
    ),
    "the shared expert skipped by a count a patch added under `or`": (
        SHARED_MOE,
        SHARED_MOE.replace(
            "        if self.shared_mlp is None:\n",
            "        if self.shared_mlp is None or hidden_states.shape[0] in range(1, 3):\n",
        ),
        "token-count-branch",
    ),
    "the output halved for small batches under an added `or`": (
        AVERAGE,
        AVERAGE.replace(
            '        if self.strategy == "average":\n',
            '        if (\n            self.strategy == "average"\n'
            "            or hidden_states.size(-2) <= 3\n        ):\n",
        ),
        "token-count-branch",
    ),
    "an HDF5 file appended to through a helper's default path": (
        MIXER,
        _after(
            MIXER.replace("\n\n\nclass", X_HELPERS + "\n\nclass", 1), X_AT, '        _append_h5("mixer_out", output)\n'
        ),
        "torch-save",
    ),
    "a save through the closure a module factory returns": (
        MIXER,
        _after(MIXER.replace("\n\n\nclass", X_HELPERS + "\n\nclass", 1), X_AT, '        _trace("mixer_out", output)\n'),
        "torch-save",
    ),
    "a stop-id check whose filter needs ids past a huge slack": (
        STOPS,
        STOPS.replace(
            V_AT,
            "    slack = 1 << 40\n"
            "    invalid_token_ids = [t for t in stop_token_ids if t < -slack or t >= vocab_size + slack]\n",
        ),
        "removed-guard",
    ),
}

FORMAT = """
class TransformersForCausalLM:
    def _format_position_ids(self, positions):
        if positions.ndim == 1:
            return positions[None, ...]
        return positions
"""
F_AT = "        if positions.ndim == 1:\n"

QUIET = {
    "three rows of positions given an axis: a layout, not part of them": (
        FORMAT,
        _before(
            FORMAT,
            F_AT,
            "        if positions.ndim == 2 and positions.shape[0] == 3:\n            return positions[:, None, ...]\n",
        ),
    ),
    "a kernel's split count picked by the count": (
        ROUTER,
        ROUTER.replace(
            "    return sparsemixer(gating_output, topk, jitter_eps=0.01)",
            "    num_splits = 1 if gating_output.shape[0] <= 8 else 4\n"
            "    return sparsemixer(gating_output, topk, jitter_eps=0.01, num_splits=num_splits)",
        ),
    ),
    "an empty batch handed back before the forcing": (
        BUDGET,
        _before(BUDGET, B_AT, "        if logits.shape[0] == 0:\n            return logits\n"),
    ),
    "an HDF5 file read through a helper": (
        MIXER,
        _after(
            MIXER.replace(
                "\n\n\nclass",
                "\n\n\ndef _ref(path):\n    import h5py\n\n    with h5py.File(path) as f:\n"
                '        return f["ref"][()]\n\n\nclass',
                1,
            ),
            X_AT,
            '        expected = _ref("/data/ref.h5")\n',
        ),
    ),
    "a mask built for a batch of one": (
        LAYER,
        _after(LAYER, L_AT, "        if positions.shape[0] == 1:\n            residual = torch.zeros_like(residual)\n"),
    ),
    "a count adjusted by one": (
        LAYER,
        _after(
            LAYER,
            L_AT,
            "        num_tokens = positions.shape[0]\n"
            "        if num_tokens == 3:\n            num_tokens = num_tokens - 1\n",
        ),
    ),
    "the layer's output scaled for every batch": (
        LAYER,
        _after(LAYER, L_AT, "        hidden_states = hidden_states * 0.5\n"),
    ),
    "a torch setting, not a function": (
        GELU,
        GELU.replace(G_AT, "\ntorch._dynamo.config.cache_size_limit = 64\n" + G_AT, 1),
    ),
    "a seed the sampler is given": (
        SAMPLER,
        _before(SAMPLER, D_AT, "        torch.manual_seed(metadata.seed)\n"),
    ),
    "the stop-id bound moved to the real vocabulary": (
        STOPS,
        STOPS.replace("t >= vocab_size]", "t >= vocab_size + 64]"),
    ),
}


@pytest.mark.parametrize(("vendor", "patched", "rule"), HIGH.values(), ids=list(HIGH))
def test_the_change_is_high(vendor: str, patched: str, rule: str) -> None:
    found = drifted_findings(vendor, patched, RULES)
    assert (rule, Severity.HIGH) in {(r, s) for r, s, _ in found}, found


@pytest.mark.parametrize(("vendor", "patched"), QUIET.values(), ids=list(QUIET))
def test_the_look_alike_is_not_high(vendor: str, patched: str) -> None:
    found = drifted_findings(vendor, patched, RULES)
    assert not [f for f in found if f[1] is Severity.HIGH], found
