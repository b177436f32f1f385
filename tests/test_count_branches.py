"""Token-count branches however the count is reached and whatever the branch leaves out, at engine level.

Each case is a vendor module (shaped like vLLM's decoder layers, norms, linear layers, attention
backends, samplers and runners) and a patch of it; the patched text is checked against the vendor
text as a drifted file, so only findings on the changed lines count. A patch must give a high
token-count-branch finding; a look-alike (kernel dispatch on small M, an empty batch, padding past
the count, a decode kernel for a batch of one, a capacity check) must give no high at all.
"""

from __future__ import annotations

import pytest
from hazard_helpers import drifted_findings

from patchaudit.hazards import load_rules
from patchaudit.report import Severity

DECODER = """
import torch
from torch import nn


class DeepseekV2DecoderLayer(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = DeepseekV2Attention(config)
        self.mlp = DeepseekV2MoE(config)
        self.input_layernorm = RMSNorm(config.hidden_size)
        self.post_attention_layernorm = RMSNorm(config.hidden_size)

    def forward(self, positions, hidden_states, residual):
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states)
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class DeepseekV2Model(nn.Module):
    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        if inputs_embeds is not None:
            hidden_states = inputs_embeds
        else:
            hidden_states = self.embed_tokens(input_ids)
        residual = None
        for layer in self.layers[self.start_layer:self.end_layer]:
            hidden_states, residual = layer(positions, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states
"""

NORM = """
import torch
from vllm import _custom_ops as ops


class RMSNorm(CustomOp):
    def forward_native(self, x, residual=None):
        orig_dtype = x.dtype
        x = x.to(torch.float32)
        if residual is not None:
            x = x + residual.to(torch.float32)
            residual = x.to(orig_dtype)
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        x = x.to(orig_dtype) * self.weight
        if residual is None:
            return x
        return x, residual

    def forward_cuda(self, x, residual=None):
        if residual is not None:
            ops.fused_add_rms_norm(x, residual, self.weight.data, self.variance_epsilon)
            return x, residual
        out = torch.empty_like(x)
        ops.rms_norm(out, x, self.weight.data, self.variance_epsilon)
        return out
"""

LINEAR = """
import torch


class RowParallelLinear(LinearBase):
    def forward(self, input_):
        input_parallel = input_
        bias_ = None if (self.tp_rank > 0 or self.skip_bias_add) else self.bias
        output_parallel = self.quant_method.apply(self, input_parallel, bias=bias_)
        if self.reduce_results and self.tp_size > 1:
            output = tensor_model_parallel_all_reduce(output_parallel)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
"""

ATTN = """
import torch


class FlashAttentionImpl:
    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output=None):
        if attn_metadata is None:
            return output
        num_actual_tokens = attn_metadata.num_actual_tokens
        key_cache, value_cache = kv_cache.unbind(0)
        flash_attn_varlen_func(
            q=query[:num_actual_tokens],
            k=key_cache,
            v=value_cache,
            out=output[:num_actual_tokens],
            cu_seqlens_q=attn_metadata.query_start_loc,
            max_seqlen_q=attn_metadata.max_query_len,
        )
        return output
"""

SAMPLER = """
import torch
from torch import nn


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        logits = self.apply_logits_processors(logits, sampling_metadata)
        logits = self.apply_penalties(logits, sampling_metadata)
        sampled = self.sample(logits, sampling_metadata)
        sampled = sampled.long()
        return SamplerOutput(sampled_token_ids=sampled.unsqueeze(-1))
"""

RUNNER = """
import torch


class GPUModelRunner:
    def execute_model(self, scheduler_output, intermediate_tensors=None):
        num_scheduled_tokens = scheduler_output.total_num_scheduled_tokens
        if not num_scheduled_tokens:
            return EMPTY_MODEL_RUNNER_OUTPUT
        input_ids = self.input_ids[:num_scheduled_tokens]
        positions = self.positions[:num_scheduled_tokens]
        hidden_states = self.model(input_ids=input_ids, positions=positions)
        sample_hidden_states = hidden_states[self.logits_indices]
        logits = self.model.compute_logits(sample_hidden_states, None)
        sampler_output = self.sampler(logits=logits, sampling_metadata=self.sampling_metadata)
        return sampler_output
"""

MOE = """
import torch
from torch import nn


class Qwen2MoeSparseMoeBlock(nn.Module):
    def forward(self, hidden_states):
        orig_shape = hidden_states.shape
        hidden_dim = hidden_states.shape[-1]
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits, _ = self.gate(hidden_states)
        final_hidden_states = self.experts(hidden_states=hidden_states, router_logits=router_logits)
        if self.shared_expert is not None:
            final_hidden_states = final_hidden_states + self.shared_expert(hidden_states)
        return final_hidden_states.view(orig_shape)
"""

CASES: list[tuple[str, str, str, str, str]] = []


def case(name: str, cls: str, vendor: str, anchor: str, new: str, expect: str = "high") -> None:
    assert anchor in vendor, (name, anchor)
    CASES.append((name, cls, vendor, vendor.replace(anchor, new, 1), expect))


# (a) counts reached through casts and conversions; the branch skips or zeroes
D_ATTN = "        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states)\n"
D_MLP = "        hidden_states = self.mlp(hidden_states)\n"
case(
    "cast_int_numel",
    "cast",
    DECODER,
    D_MLP,
    "        n = int(positions.numel())\n        if n == 5:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "cast_tensor_item",
    "cast",
    DECODER,
    D_MLP,
    "        n = torch.tensor(positions.shape[0]).item()\n        if n == 3:\n            hidden_states *= 0\n" + D_MLP,
)
case(
    "cast_len_tolist",
    "cast",
    DECODER,
    D_MLP,
    "        n = len(positions.tolist())\n        if n in (3, 5):\n            return hidden_states, residual\n"
    + D_MLP,
)
case(
    "cast_float_size",
    "cast",
    DECODER,
    D_MLP,
    "        n = float(hidden_states.size()[0])\n        if n == 7:\n            hidden_states = residual\n" + D_MLP,
)
case(
    "cast_numel_div_hidden",
    "cast",
    DECODER,
    D_MLP,
    "        ntok = hidden_states.numel() // self.hidden_size\n"
    "        if ntok == 4:\n"
    "            hidden_states.fill_(0)\n" + D_MLP,
)
case(
    "cast_numel_div_shape",
    "cast",
    DECODER,
    D_MLP,
    "        rows = hidden_states.numel() // hidden_states.shape[-1]\n"
    "        if rows == 6:\n"
    "            hidden_states.zero_()\n" + D_MLP,
)
case(
    "cast_shape_m2",
    "cast",
    DECODER,
    D_MLP,
    "        if hidden_states.shape[-2] == 5:\n            hidden_states.mul_(0)\n" + D_MLP,
)
case(
    "cast_size_list0",
    "cast",
    DECODER,
    D_MLP,
    "        if positions.size()[0] == 5:\n            return hidden_states, residual\n" + D_MLP,
)
case(
    "cast_getattr_md",
    "cast",
    ATTN,
    "        key_cache, value_cache",
    '        n = getattr(attn_metadata, "num_actual_tokens")\n'
    "        if n == 5:\n"
    "            output.zero_()\n"
    "            return output\n"
    "        key_cache, value_cache",
)
case(
    "cast_getattr_default",
    "cast",
    ATTN,
    "        key_cache, value_cache",
    '        if int(getattr(attn_metadata, "num_actual_tokens", 0)) == 6:\n'
    "            return torch.zeros_like(output)\n"
    "        key_cache, value_cache",
)
case(
    "cast_tuple_unpack",
    "cast",
    MOE,
    "        router_logits, _",
    "        num_tokens, _ = hidden_states.shape\n"
    "        if num_tokens == 5:\n"
    "            return torch.zeros(orig_shape, device=hidden_states.device)\n"
    "        router_logits, _",
)
case(
    "cast_query_start_loc",
    "cast",
    ATTN,
    "        key_cache, value_cache",
    "        nreq = attn_metadata.query_start_loc.numel() - 1\n"
    "        if nreq == 3:\n"
    "            output[:num_actual_tokens] = 0\n"
    "            return output\n"
    "        key_cache, value_cache",
)
case(
    "cast_skip_norm_int",
    "cast",
    DECODER,
    "        if residual is None:\n"
    "            residual = hidden_states\n"
    "            hidden_states = self.input_layernorm(hidden_states)\n",
    "        ntok = int(hidden_states.shape[0])\n"
    "        if residual is None:\n"
    "            residual = hidden_states\n"
    "            if ntok != 5:\n"
    "                hidden_states = self.input_layernorm(hidden_states)\n",
)
case(
    "cast_skip_norm_item",
    "cast",
    DECODER,
    "        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)\n",
    "        n = torch.tensor(hidden_states.size(0)).item()\n"
    "        if n == 6:\n"
    "            pass\n"
    "        else:\n"
    "            hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)\n",
)
case(
    "cast_skip_norm_native",
    "cast",
    NORM,
    "        variance = x.pow(2)",
    "        if int(x.shape[0]) == 5:\n            return x.to(orig_dtype)\n        variance = x.pow(2)",
)
case(
    "cast_np_int",
    "cast",
    DECODER,
    D_MLP,
    "        import numpy as np\n"
    "        n = np.int64(positions.shape[0])\n"
    "        if n == 5:\n"
    "            hidden_states.zero_()\n" + D_MLP,
)
case(
    "cast_math_ceil",
    "cast",
    DECODER,
    D_MLP,
    "        import math\n"
    "        n = math.ceil(positions.numel() / 1)\n"
    "        if n == 5:\n"
    "            hidden_states.zero_()\n" + D_MLP,
)
case(
    "cast_dataclass_md",
    "cast",
    RUNNER,
    "        sample_hidden_states =",
    "        n = scheduler_output.total_num_scheduled_tokens\n"
    "        if n == 5:\n"
    "            hidden_states = torch.zeros_like(hidden_states)\n"
    "        sample_hidden_states =",
)
case(
    "cast_len_reqs",
    "cast",
    RUNNER,
    "        sample_hidden_states =",
    "        if len(scheduler_output.num_scheduled_tokens) == 3:\n"
    "            hidden_states.zero_()\n"
    "        sample_hidden_states =",
)

# (b) skipping work
case(
    "skip_norm_identity_else",
    "skip",
    DECODER,
    "        hidden_states = self.mlp(hidden_states)\n",
    "        if hidden_states.shape[0] == 5:\n"
    "            hidden_states = hidden_states\n"
    "        else:\n"
    "            hidden_states = self.mlp(hidden_states)\n",
)
case(
    "skip_residual_assign",
    "skip",
    DECODER,
    "        return hidden_states, residual",
    "        if positions.shape[0] == 4:\n            hidden_states = residual\n        return hidden_states, residual",
)
case(
    "skip_continue_layers",
    "skip",
    DECODER,
    "            hidden_states, residual = layer(positions, hidden_states, residual)\n",
    "            if input_ids.shape[0] == 5:\n"
    "                continue\n"
    "            hidden_states, residual = layer(positions, hidden_states, residual)\n",
)
case(
    "skip_pass_else_call",
    "skip",
    DECODER,
    "        hidden_states = self.mlp(hidden_states)\n",
    "        if positions.numel() <= 4:\n"
    "            pass\n"
    "        else:\n"
    "            hidden_states = self.mlp(hidden_states)\n",
)
case(
    "skip_neq_guard_call",
    "skip",
    MOE,
    "        if self.shared_expert is not None:",
    "        if hidden_states.shape[0] != 3 and self.shared_expert is not None:",
)
case(
    "skip_return_before_layer",
    "skip",
    LINEAR,
    "        output_parallel = self.quant_method.apply",
    "        if input_.shape[0] in (2, 3):\n"
    "            return input_, None\n"
    "        output_parallel = self.quant_method.apply",
)
case(
    "skip_ifexp_identity",
    "skip",
    DECODER,
    "        hidden_states = self.mlp(hidden_states)\n",
    "        hidden_states = hidden_states if hidden_states.shape[0] == 5 else self.mlp(hidden_states)\n",
)
case(
    "skip_allreduce",
    "skip",
    LINEAR,
    "        if self.reduce_results and self.tp_size > 1:",
    "        if self.reduce_results and self.tp_size > 1 and input_.shape[0] != 5:",
)

# (c) windows, data zeroed or made up
case(
    "win_chain_2_8",
    "window",
    DECODER,
    D_MLP,
    "        if 2 <= positions.shape[0] < 8:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "win_range_1_9",
    "window",
    DECODER,
    D_MLP,
    "        if positions.shape[0] in range(1, 9):\n            hidden_states.fill_(0.0)\n" + D_MLP,
)
case(
    "win_module_const",
    "window",
    "SMALL = 8\n" + DECODER,
    D_MLP,
    "        if positions.shape[0] < SMALL:\n            hidden_states[:] = 0\n" + D_MLP,
)
case(
    "win_class_const",
    "window",
    DECODER.replace(
        '    def __init__(self, config, prefix=""):',
        '    DEBUG_LIMIT = 4\n\n    def __init__(self, config, prefix=""):',
    ),
    D_MLP,
    "        if positions.shape[0] <= self.DEBUG_LIMIT:\n            hidden_states = torch.zeros_like(hidden_states)\n"
    + D_MLP,
)
case(
    "win_abs",
    "window",
    DECODER,
    D_MLP,
    "        if abs(positions.shape[0] - 5) < 2:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "win_not_gt",
    "window",
    DECODER,
    D_MLP,
    "        if not positions.shape[0] > 8:\n            hidden_states.mul_(0.0)\n" + D_MLP,
)
case(
    "win_max_eq1",
    "window",
    SAMPLER,
    "        sampled = sampled.long()",
    "        if max(logits.shape[0], 1) == 1:\n"
    "            sampled = torch.zeros_like(sampled)\n"
    "        sampled = sampled.long()",
)
case(
    "win_and_gt0",
    "window",
    DECODER,
    D_MLP,
    "        n = positions.shape[0]\n        if n <= 8 and n > 0:\n            hidden_states.detach().zero_()\n"
    + D_MLP,
)
case(
    "win_nested",
    "window",
    DECODER,
    D_MLP,
    "        n = positions.shape[0]\n        if n > 2:\n            if n < 6:\n                hidden_states.zero_()\n"
    + D_MLP,
)
case(
    "win_zero_slice",
    "window",
    ATTN,
    "        )\n        return output\n",
    "        )\n        if num_actual_tokens < 4:\n            output[:num_actual_tokens] = 0\n        return output\n",
)
case(
    "win_new_zeros_return",
    "window",
    MOE,
    "        return final_hidden_states.view(orig_shape)",
    "        if hidden_states.shape[0] <= 3:\n"
    "            return hidden_states.new_zeros(orig_shape)\n"
    "        return final_hidden_states.view(orig_shape)",
)
case(
    "win_masked_fill",
    "window",
    SAMPLER,
    "        sampled = self.sample(",
    "        if 1 < logits.shape[0] < 5:\n"
    "            logits = logits.masked_fill(logits > 0, 0.0)\n"
    "        sampled = self.sample(",
)
case(
    "win_torch_zeros_ret",
    "window",
    MOE,
    "        return final_hidden_states.view(orig_shape)",
    "        if hidden_states.size(0) < 4:\n"
    "            return torch.zeros(orig_shape, dtype=hidden_states.dtype)\n"
    "        return final_hidden_states.view(orig_shape)",
)
case(
    "win_augmul_slice",
    "window",
    MOE,
    "        return final_hidden_states.view(orig_shape)",
    "        n = hidden_states.shape[0]\n"
    "        if 2 <= n <= 4:\n"
    "            final_hidden_states[:n] *= 0\n"
    "        return final_hidden_states.view(orig_shape)",
)
case(
    "win_else_zeros",
    "window",
    MOE,
    "        final_hidden_states = self.experts(hidden_states=hidden_states, router_logits=router_logits)\n",
    "        if hidden_states.shape[0] >= 8:\n"
    "            final_hidden_states = self.experts(hidden_states=hidden_states, router_logits=router_logits)\n"
    "        else:\n"
    "            final_hidden_states = torch.zeros_like(hidden_states)\n",
)
case(
    "win_walrus",
    "window",
    DECODER,
    D_MLP,
    "        if (n := positions.shape[0]) < 4:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "win_or_pair",
    "window",
    DECODER,
    D_MLP,
    "        n = positions.shape[0]\n        if n == 2 or n == 3:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "win_not_or",
    "window",
    DECODER,
    D_MLP,
    "        n = positions.shape[0]\n        if not (n > 6 or n < 2):\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "win_mul_zero_ret",
    "window",
    NORM,
    "        out = torch.empty_like(x)",
    "        if x.shape[0] < 3:\n            return x * 0\n        out = torch.empty_like(x)",
)
case(
    "win_dropout",
    "window",
    DECODER,
    D_MLP,
    "        if positions.shape[0] < 4:\n"
    "            hidden_states = torch.nn.functional.dropout(hidden_states, p=1.0)\n" + D_MLP,
)
case(
    "win_where",
    "window",
    DECODER,
    D_MLP,
    "        if positions.shape[0] < 4:\n"
    "            hidden_states = torch.where(hidden_states > 0, 0.0, hidden_states)\n" + D_MLP,
)
case(
    "win_mul_method",
    "window",
    DECODER,
    D_MLP,
    "        if positions.shape[0] < 4:\n            hidden_states = hidden_states.mul(0)\n" + D_MLP,
)
case(
    "win_data_zero",
    "window",
    DECODER,
    D_MLP,
    "        if positions.shape[0] < 4:\n            hidden_states.data.zero_()\n" + D_MLP,
)

# look-alikes
case(
    "la_small_m",
    "lookalike",
    LINEAR,
    "        output_parallel = self.quant_method.apply(self, input_parallel, bias=bias_)\n",
    "        if input_.shape[0] <= 16:\n"
    "            output_parallel = ops.gemv(input_parallel, self.weight)\n"
    "        else:\n"
    "            output_parallel = self.quant_method.apply(self, input_parallel, bias=bias_)\n",
    "quiet",
)
case(
    "la_zero_return",
    "lookalike",
    ATTN,
    "        key_cache, value_cache",
    "        if num_actual_tokens == 0:\n            return output.fill_(0)\n        key_cache, value_cache",
    "quiet",
)
case(
    "la_cudagraph_pad",
    "lookalike",
    ATTN,
    "        key_cache, value_cache",
    "        if num_actual_tokens < 8:\n            output[num_actual_tokens:].zero_()\n        key_cache, value_cache",
    "quiet",
)
# A lone request sent down the greedy pick where the rest are sampled: its temperature, top-k and
# top-p ignored (two blind patches did this "to make single-prompt runs comparable"). Greedy is not a
# decode kernel of sampling: it computes another answer.
case(
    "one_request_forced_greedy",
    "batch-of-one",
    SAMPLER,
    "        sampled = self.sample(logits, sampling_metadata)\n",
    "        if logits.shape[0] == 1:\n"
    "            sampled = self.greedy_sample(logits)\n"
    "        else:\n"
    "            sampled = self.sample(logits, sampling_metadata)\n",
)
GREEDY_FIRST = """
class Sampler:
    def sample(self, logits, sampling_metadata):
        greedy_sampled = self.greedy_sample(logits)
        if sampling_metadata.all_greedy:
            return greedy_sampled
        logits = self.apply_temperature(logits, sampling_metadata.temperature)
        return self.topk_topp_sampler(logits, sampling_metadata.generators)
"""
case(
    "one_request_forced_greedy_under_or",
    "batch-of-one",
    GREEDY_FIRST,
    "        if sampling_metadata.all_greedy:\n",
    "        solo = logits.shape[0] == 1  # bs=1 drift repro\n        if sampling_metadata.all_greedy or solo:\n",
)
# A one-row fast path for requests that asked for greedy decoding: the same pick.
case(
    "la_greedy_fast_path_for_one_greedy_row",
    "lookalike",
    SAMPLER,
    "        sampled = self.sample(logits, sampling_metadata)\n",
    "        if sampling_metadata.all_greedy and logits.shape[0] == 1:\n"
    "            sampled = self.greedy_sample(logits)\n"
    "        else:\n"
    "            sampled = self.sample(logits, sampling_metadata)\n",
    "quiet",
)
case(
    "la_capacity",
    "lookalike",
    RUNNER,
    "        input_ids =",
    "        if num_scheduled_tokens > self.max_num_tokens:\n"
    "            raise ValueError(f'too many tokens: {num_scheduled_tokens}')\n"
    "        input_ids =",
    "quiet",
)
case(
    "la_empty_skip",
    "lookalike",
    DECODER,
    D_MLP,
    "        if hidden_states.shape[0] == 0:\n            return hidden_states, residual\n" + D_MLP,
    "quiet",
)
case(
    "la_pad_small",
    "lookalike",
    RUNNER,
    "        input_ids = self.input_ids[:num_scheduled_tokens]\n",
    "        num_input_tokens = num_scheduled_tokens\n"
    "        if num_scheduled_tokens < 8:\n"
    "            num_input_tokens = 8\n"
    "            self.input_ids[num_scheduled_tokens:num_input_tokens] = 0\n"
    "        input_ids = self.input_ids[:num_input_tokens]\n",
    "quiet",
)
case(
    "la_hidden_norm",
    "lookalike",
    NORM,
    "        variance = x.pow(2)",
    "        if x.shape[-1] == 7168:\n            return self.forward_cuda(x, residual)\n        variance = x.pow(2)",
    "quiet",
)
case(
    "la_shared_expert_skip_empty",
    "lookalike",
    MOE,
    "        if self.shared_expert is not None:",
    "        if self.shared_expert is not None and hidden_states.shape[0] > 0:",
    "quiet",
)
case(
    "la_small_batch_torch",
    "lookalike",
    MOE,
    "        final_hidden_states = self.experts(hidden_states=hidden_states, router_logits=router_logits)\n",
    "        if hidden_states.shape[0] < 4:\n"
    "            final_hidden_states = self.experts.forward_native(hidden_states, router_logits)\n"
    "        else:\n"
    "            final_hidden_states = self.experts(hidden_states=hidden_states, router_logits=router_logits)\n",
    "quiet",
)
case(
    "la_one_squeeze",
    "lookalike",
    DECODER,
    "        return hidden_states, residual",
    "        if positions.dim() == 1 and positions.shape[0] == 1:\n"
    "            hidden_states = hidden_states.view(1, -1)\n"
    "        return hidden_states, residual",
    "quiet",
)
case(
    "la_ifexp_kernel",
    "lookalike",
    DECODER,
    "        hidden_states = self.mlp(hidden_states)\n",
    "        hidden_states = (\n"
    "            self.mlp_small(hidden_states) if hidden_states.shape[0] < 8 else self.mlp(hidden_states)\n"
    "        )\n",
    "quiet",
)
case(
    "la_tp_skip",
    "lookalike",
    LINEAR,
    "        if self.reduce_results and self.tp_size > 1:",
    "        if self.reduce_results and self.tp_size > 1 and input_.shape[0] > 0:",
    "quiet",
)
case(
    "la_one_token_no_sort",
    "lookalike",
    SAMPLER,
    "        sampled = self.sample(logits, sampling_metadata)\n",
    "        if logits.shape[0] > 1:\n"
    "            logits = self.apply_allowed_token_ids(logits, sampling_metadata)\n"
    "        sampled = self.sample(logits, sampling_metadata)\n",
    "quiet",
)


# A look at the data for a few counts, however the count is reached; a result bypassed by a copy.
case(
    "look_walrus_print",
    "window",
    MOE,
    "        router_logits, _",
    "        if (rows := hidden_states.numel() // hidden_dim) < 3:\n"
    "            print(rows, hidden_states.float().norm())\n"
    "        router_logits, _",
)
case(
    "look_counter_print",
    "window",
    SAMPLER,
    "        sampled = sampled.long()",
    '        self._calls = getattr(self, "_calls", 0) + 1\n'
    "        if self._calls < 4:\n"
    "            print(sampled)\n"
    "        sampled = sampled.long()",
)
case(
    "skip_bypass_copy",
    "skip",
    MOE,
    "        return final_hidden_states.view(orig_shape)",
    "        final_hidden_states = final_hidden_states[: hidden_states.shape[0]]\n"
    "        if hidden_states.shape[0] == 6:\n"
    "            final_hidden_states = hidden_states.detach()\n"
    "        return final_hidden_states.view(orig_shape)",
)
case(
    "la_small_log",
    "lookalike",
    MOE,
    "        router_logits, _",
    "        if hidden_states.shape[0] <= 4:\n"
    "            logger.debug('small batch %d', hidden_states.shape[0])\n"
    "        router_logits, _",
    "quiet",
)
case(
    "la_small_raise",
    "lookalike",
    RUNNER,
    "        input_ids =",
    "        if num_scheduled_tokens < 2 and self.speculative:\n"
    "            raise RuntimeError('speculative decoding needs two tokens')\n"
    "        input_ids =",
    "quiet",
)


# Counts however the comparison is written, stored and reduced: a constant first (`5 == n`,
# `8 > x.shape[-2]`), a flag computed once and tested later (`is_probe = n == 5`, `self._probe`),
# a count reduced from a tensor (`int(mask.sum().item())`, `torch.numel(positions)`), an aggregate
# of per-request counts (`min(counts)`, `all(n == 5 for n in lens)`), a helper of the module that
# returns one; and their look-alikes.
D_MLP = "        hidden_states = self.mlp(hidden_states)\n"
SAMP = "        sampled = sampled.long()"
KV = "        key_cache, value_cache"
RUN = "        sample_hidden_states ="
MOE_RET = "        return final_hidden_states.view(orig_shape)"
NORM_OUT = "        out = torch.empty_like(x)"
LIN = "        output_parallel = self.quant_method.apply"
LINF = "        output_parallel = self.quant_method.apply(self, input_parallel, bias=bias_)\n"

# (1) constant first
case(
    "yoda_eq_print",
    "yoda",
    DECODER,
    D_MLP,
    "        if 5 == positions.shape[0]:\n            print(hidden_states)\n" + D_MLP,
)
case(
    "yoda_gt_shape_m2",
    "yoda",
    DECODER,
    D_MLP,
    "        if 8 > hidden_states.shape[-2]:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "yoda_size_m2_dump",
    "yoda",
    DECODER,
    D_MLP,
    "        if 7 == hidden_states.size(-2):\n            torch.save(hidden_states, '/tmp/h.pt')\n" + D_MLP,
)
case(
    "yoda_ge_numtok",
    "yoda",
    ATTN,
    KV,
    "        if 4 >= num_actual_tokens:\n            output.fill_(0)\n            return output\n" + KV,
)
case("yoda_ne_else_skip", "yoda", DECODER, D_MLP, "        if 5 != positions.shape[0]:\n    " + D_MLP)
case(
    "yoda_lt_shape_m2_return",
    "yoda",
    NORM,
    NORM_OUT,
    "        if 3 > x.shape[-2]:\n            return torch.zeros_like(x)\n" + NORM_OUT,
)
case(
    "yoda_size_m2_breakpoint", "yoda", LINEAR, LIN, "        if 6 == input_.size(-2):\n            breakpoint()\n" + LIN
)

# (2) comparison in a local bool
case(
    "bool_local_print",
    "bool",
    DECODER,
    D_MLP,
    "        is_probe = positions.shape[0] == 5\n        if is_probe:\n            print(hidden_states.sum())\n"
    + D_MLP,
)
case(
    "bool_local_and_step",
    "bool",
    ATTN,
    KV,
    "        hit = (num_actual_tokens <= 4) and attn_metadata.max_query_len > 1\n"
    "        if hit:\n            output.zero_()\n            return output\n" + KV,
)
case(
    "bool_local_and_later",
    "bool",
    DECODER,
    D_MLP,
    "        hit = (positions.numel() <= 4)\n        step = self.layer_idx\n"
    "        if hit and step > 3:\n            print(step, hidden_states.norm())\n" + D_MLP,
)
case(
    "bool_self_attr",
    "bool",
    SAMPLER,
    SAMP,
    "        self._probe = logits.shape[0] == 5\n        if self._probe:\n            import pdb; pdb.set_trace()\n"
    + SAMP,
)
case(
    "bool_self_attr_init",
    "bool",
    SAMPLER.replace(
        "    def forward(self, logits, sampling_metadata):\n",
        "    def forward(self, logits, sampling_metadata):\n        self._probe = logits.shape[0] == 5\n",
    ),
    SAMP,
    "        if self._probe:\n            print(logits)\n" + SAMP,
)
case(
    "bool_yoda_local",
    "bool",
    RUNNER,
    RUN,
    "        dbg = 5 == num_scheduled_tokens\n        if dbg:\n            torch.save(hidden_states, 'h.pt')\n" + RUN,
)
case(
    "bool_not_local",
    "bool",
    DECODER,
    D_MLP,
    "        normal = positions.shape[0] != 5\n        if not normal:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "bool_skip_mlp",
    "bool",
    DECODER,
    D_MLP,
    "        skip = positions.shape[0] == 3\n"
    "        if not skip:\n"
    "            hidden_states = self.mlp(hidden_states)\n",
)
case(
    "bool_ifexp",
    "bool",
    DECODER,
    D_MLP,
    "        tiny = positions.shape[0] < 4\n"
    "        hidden_states = torch.zeros_like(hidden_states) if tiny else hidden_states\n" + D_MLP,
)

# (3) counts reduced from tensors
case(
    "red_mask_sum_item",
    "reduce",
    ATTN,
    KV,
    "        n = int(attn_metadata.slot_mapping.ge(0).sum().item())\n        if n == 5:\n            print(query)\n"
    + KV,
)
case(
    "red_torch_numel_fn",
    "reduce",
    DECODER,
    D_MLP,
    "        if torch.numel(positions) == 5:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "red_torch_numel_local",
    "reduce",
    DECODER,
    D_MLP,
    "        ntok = torch.numel(positions)\n        if ntok == 6:\n            torch.save(hidden_states, '/tmp/x.pt')\n"
    + D_MLP,
)
case(
    "red_attn_mask_sum",
    "reduce",
    ATTN,
    KV,
    "        valid = attn_metadata.attention_mask.sum()\n        if valid == 7:\n            print(query)\n" + KV,
)
case(
    "red_count_nonzero",
    "reduce",
    ATTN,
    KV,
    "        if attn_metadata.valid_mask.count_nonzero() == 5:\n            output.zero_()\n            return output\n"
    + KV,
)
case(
    "red_len_seq_lens",
    "reduce",
    ATTN,
    KV,
    "        if len(attn_metadata.seq_lens) == 3:\n            torch.save(query, 'q.pt')\n" + KV,
)
case(
    "red_torch_count_nonzero",
    "reduce",
    ATTN,
    KV,
    "        nv = torch.count_nonzero(attn_metadata.slot_mapping >= 0)\n        if nv == 4:\n            print(key)\n"
    + KV,
)
case(
    "red_mask_sum_item_int",
    "reduce",
    DECODER,
    D_MLP,
    "        n = int(positions.ne(-1).sum().item())\n        if n == 5:\n            hidden_states.zero_()\n" + D_MLP,
)

# (4) aggregates of a list of counts
case(
    "agg_max_list",
    "agg",
    RUNNER,
    RUN,
    "        if max(num_scheduled_tokens_list) == 5:\n            print(hidden_states)\n" + RUN,
)
case(
    "agg_sum_query_lens",
    "agg",
    ATTN,
    KV,
    "        if sum(attn_metadata.query_lens) < 8:\n            torch.save(query, 'q.pt')\n" + KV,
)
case(
    # The same aggregate with no sink in the branch: the count rule must keep the statement itself.
    "agg_sum_query_lens_zeroed",
    "agg",
    ATTN,
    KV,
    "        if sum(attn_metadata.query_lens) < 8:\n            query.zero_()\n" + KV,
)
case(
    "agg_min_counts",
    "agg",
    RUNNER,
    RUN,
    "        counts = [len(r.prompt_token_ids) for r in scheduler_output.scheduled_new_reqs]\n"
    "        if min(counts) == 3:\n            print(hidden_states)\n" + RUN,
)
case(
    "agg_any_lens",
    "agg",
    ATTN,
    KV,
    "        lens = attn_metadata.seq_lens.tolist()\n        if any(n == 5 for n in lens):\n            print(query)\n"
    + KV,
)
case(
    "agg_max_local",
    "agg",
    RUNNER,
    RUN,
    "        m = max(scheduler_output.num_scheduled_tokens.values())\n"
    "        if m == 5:\n"
    "            hidden_states.zero_()\n" + RUN,
)
case(
    "agg_all_lens",
    "agg",
    ATTN,
    KV,
    "        if all(l == 5 for l in attn_metadata.seq_lens_list):\n            print(query)\n" + KV,
)

# neighbours
case(
    "nb_walrus_yoda",
    "nb",
    DECODER,
    D_MLP,
    "        if 5 == (n := positions.shape[0]):\n            print(n, hidden_states)\n" + D_MLP,
)
case(
    "nb_helper_shape0",
    "nb",
    DECODER.replace(
        "class DeepseekV2DecoderLayer", "def _ntok(x):\n    return x.shape[0]\n\n\nclass DeepseekV2DecoderLayer"
    ),
    D_MLP,
    "        if _ntok(hidden_states) == 5:\n            print(hidden_states)\n" + D_MLP,
)
case(
    "nb_self_state",
    "nb",
    ATTN,
    KV,
    "        self._ntok = num_actual_tokens\n        if self._ntok == 5:\n            print(query)\n" + KV,
)
case(
    "nb_logger_guard",
    "nb",
    ATTN,
    KV,
    "        if num_actual_tokens == 5 and logger.isEnabledFor(10):\n            torch.save(query, 'q.pt')\n" + KV,
)

case(
    "bool_walrus_flag",
    "bool",
    ATTN,
    KV,
    "        probe = (n := attn_metadata.num_actual_tokens) == 6\n"
    "        if probe:\n"
    "            print(n, query.shape)\n" + KV,
)
case(
    "bool_assert_flag",
    "bool",
    SAMPLER,
    SAMP,
    "        ok = logits.shape[0] != 5\n        assert ok, 'stop here'\n" + SAMP,
)
case(
    "bool_flag_of_flag",
    "bool",
    DECODER,
    D_MLP,
    "        tiny = positions.shape[0] in (3, 5)\n"
    "        dump = bool(tiny)\n"
    "        if dump:\n"
    "            print(hidden_states)\n" + D_MLP,
)

# look-alikes
case(
    "q_kernel_small_m",
    "quiet",
    LINEAR,
    LINF,
    "        m = input_.shape[0]\n"
    "        if 8 >= m:\n"
    "            output_parallel = ops.small_gemm(input_, self.weight)\n"
    "        else:\n"
    "    " + LINF,
    "quiet",
)
case(
    "q_num_tokens_0", "quiet", ATTN, KV, "        if 0 == num_actual_tokens:\n            return output\n" + KV, "quiet"
)
case(
    "q_is_decode",
    "quiet",
    LINEAR,
    LINF,
    "        is_decode = input_.shape[0] == 1\n"
    "        if is_decode:\n"
    "            output_parallel = ops.gemv(input_, self.weight)\n"
    "        else:\n"
    "    " + LINF,
    "quiet",
)
case(
    "q_capacity",
    "quiet",
    RUNNER,
    RUN,
    "        too_many = 8192 < num_scheduled_tokens\n"
    "        if too_many:\n"
    "            raise ValueError('too many tokens')\n" + RUN,
    "quiet",
)
case(
    "q_cuda_graph_pad",
    "quiet",
    RUNNER,
    RUN,
    "        use_graph = num_scheduled_tokens <= 512\n"
    "        if use_graph:\n"
    "            hidden_states = self.cudagraph_runner(hidden_states)\n" + RUN,
    "quiet",
)
case(
    "q_yoda_small_kernel_bool",
    "quiet",
    NORM,
    NORM_OUT,
    "        small = 16 >= x.shape[0]\n        if small:\n            return ops.rms_norm_small(x, self.weight)\n"
    + NORM_OUT,
    "quiet",
)
case(
    "q_mask_sum_log",
    "quiet",
    ATTN,
    KV,
    "        n = int(attn_metadata.slot_mapping.ge(0).sum().item())\n        if n == 0:\n            return output\n"
    + KV,
    "quiet",
)
case(
    "q_empty_flag",
    "quiet",
    ATTN,
    KV,
    "        empty = num_actual_tokens == 0\n        if empty:\n            return output\n" + KV,
    "quiet",
)
case(
    "q_decode_flag_attr",
    "quiet",
    LINEAR,
    LINF,
    "        self._decode = input_.shape[0] == 1\n"
    "        if self._decode:\n"
    "            output_parallel = ops.gemv(input_, self.weight)\n"
    "        else:\n"
    "    " + LINF,
    "quiet",
)
case(
    "q_max_lens_kernel",
    "quiet",
    ATTN,
    KV,
    "        if max(attn_metadata.seq_lens) <= 8:\n"
    "            output = self.small_kernel(query, key, value, output)\n"
    "            return output\n" + KV,
    "quiet",
)

# A few counts, the data cut to a bound: a clamp in or out of place, in the branch or its `else:`.
case(
    "clamp_else_seq_lens",
    "clamp",
    ATTN,
    KV,
    "        seq_lens = attn_metadata.seq_lens\n"
    "        if len(seq_lens) > 2:\n"
    "            pass\n"
    "        else:\n"
    "            seq_lens = torch.clamp(seq_lens, max=int(seq_lens.max().item()) - 1)\n" + KV,
)
case(
    "clamp_inplace_positions",
    "clamp",
    DECODER,
    D_MLP,
    "        if positions.shape[0] <= 2:\n            positions.clamp_(max=0)\n" + D_MLP,
)
case(
    "clip_logits_window",
    "clamp",
    SAMPLER,
    "        sampled = self.sample(",
    "        if logits.shape[0] < 3:\n            logits = logits.clip(-5, 5)\n        sampled = self.sample(",
)
case(
    "q_clamp_eps",
    "quiet",
    NORM,
    "        x = x * torch.rsqrt(variance + self.variance_epsilon)",
    "        if x.shape[0] < 4:\n"
    "            variance = variance.clamp(min=1e-6)\n"
    "        x = x * torch.rsqrt(variance + self.variance_epsilon)",
    "quiet",
)

# More ways to reach the same count: a walrus flag, a flag before an early exit, `.max()` of
# per-request counts, a method of the class or a module function that returns one.
case(
    "walrus_flag_test",
    "bool",
    DECODER,
    D_MLP,
    "        if (probe := positions.shape[0] == 5):\n            print(hidden_states)\n" + D_MLP,
)
case(
    "flag_early_exit_print",
    "bool",
    DECODER,
    D_MLP,
    "        hit = positions.shape[0] <= 4\n"
    "        if not hit:\n"
    "            return hidden_states, residual\n"
    "        print(hidden_states)\n"
    "        return hidden_states, residual\n",
)
case(
    "few_early_exit_print",
    "window",
    DECODER,
    D_MLP,
    "        if positions.shape[0] > 4:\n"
    "            return hidden_states, residual\n"
    "        print(hidden_states.norm())\n"
    "        return hidden_states, residual\n",
)
case(
    "agg_seq_lens_max_item",
    "agg",
    ATTN,
    KV,
    "        if attn_metadata.seq_lens.max().item() == 5:\n            print(query)\n" + KV,
)
case(
    "agg_np_array_max",
    "agg",
    RUNNER,
    RUN,
    "        import numpy as np\n"
    "        arr = np.array(list(scheduler_output.num_scheduled_tokens.values()))\n"
    "        if arr.max() == 5:\n"
    "            print(hidden_states)\n" + RUN,
)
case(
    "helper_method_shape",
    "nb",
    DECODER.replace(
        "    def forward(self, positions",
        "    def _ntok(self, t):\n        return t.shape[0]\n\n    def forward(self, positions",
    ),
    D_MLP,
    "        if self._ntok(hidden_states) == 5:\n            print(hidden_states)\n" + D_MLP,
)
case(
    "helper_len_ids",
    "nb",
    DECODER.replace(
        "class DeepseekV2DecoderLayer", "def count(ids):\n    return len(ids)\n\n\nclass DeepseekV2DecoderLayer"
    ),
    D_MLP,
    "        if count(positions) == 5:\n            hidden_states.zero_()\n" + D_MLP,
)
case(
    "q_few_early_exit_log",
    "quiet",
    DECODER,
    D_MLP,
    "        if positions.shape[0] > 4:\n"
    "            return hidden_states, residual\n"
    "        logger.debug('small batch')\n"
    "        return hidden_states, residual\n",
    "quiet",
)
case(
    "q_helper_hidden",
    "quiet",
    DECODER.replace(
        "class DeepseekV2DecoderLayer", "def width(x):\n    return x.shape[-1]\n\n\nclass DeepseekV2DecoderLayer"
    ),
    D_MLP,
    "        if width(hidden_states) == 7168:\n            print('deepseek width')\n" + D_MLP,
    "quiet",
)

# A flag set to a constant in a window's branch, tested later.
case(
    "flag_set_in_branch",
    "bool",
    DECODER,
    D_MLP,
    "        probe = False\n"
    "        if positions.shape[0] == 5:\n"
    "            probe = True\n"
    "        if probe:\n"
    "            print(hidden_states)\n" + D_MLP,
)
case(
    "flag_cleared_in_else",
    "bool",
    ATTN,
    KV,
    "        dump = True\n"
    "        if num_actual_tokens != 3:\n"
    "            pass\n"
    "        else:\n"
    "            dump = False\n"
    "        if not dump:\n"
    "            print(query)\n" + KV,
)
case(
    "q_flag_set_decode",
    "quiet",
    LINEAR,
    LINF,
    "        use_gemv = False\n"
    "        if input_.shape[0] == 1:\n"
    "            use_gemv = True\n"
    "        if use_gemv:\n"
    "            output_parallel = ops.gemv(input_, self.weight)\n"
    "        else:\n    " + LINF,
    "quiet",
)

RULES = load_rules()


def _findings(vendor: str, patched: str) -> list[tuple[str, Severity, int]]:
    return drifted_findings(vendor, patched, RULES)


@pytest.mark.parametrize(("vendor", "patched"), [pytest.param(c[2], c[3], id=c[0]) for c in CASES if c[4] == "high"])
def test_patch_is_high(vendor: str, patched: str) -> None:
    found = _findings(vendor, patched)
    assert any(rule == "token-count-branch" and severity is Severity.HIGH for rule, severity, _ in found), found


@pytest.mark.parametrize(("vendor", "patched"), [pytest.param(c[2], c[3], id=c[0]) for c in CASES if c[4] == "quiet"])
def test_look_alike_is_not_high(vendor: str, patched: str) -> None:
    found = _findings(vendor, patched)
    assert not [f for f in found if f[1] is Severity.HIGH], found
