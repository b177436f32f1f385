"""A step skipped for an exact token count: the function left early, a layer left out, a result altered.

Shapes a hurried engineer writes to take a step out for one count while chasing a bug: an attention
forward that returns the `output` buffer before the kernel writes it (the function's own returns sit
inside an `if` below, so no single last `return` names it); a helper that hands its input back before
transforming it (`return logits` ahead of `return apply_penalties(logits, ...)`); a kernel given an
`out=` buffer as the work left out; a layer of the module (`self.rotary_emb`) run for every count but
one. Counts written as a quotient (`n // 4 != 1`: 4 to 7 tokens) and a count per request against a
literal list (`num_draft_tokens == [2]`) are windows too, and a module constant written over the
result (`= PLACEHOLDER_TOKEN_ID`) is made-up data. The other way's computation altered for a few
counts is a change: a term of its sum dropped (`self.mlp(x)` for `self.mlp(x) + residual`, in an
`if` or a `match`), or the same call made on inputs cast to another precision for exact counts;
so are the function's own return with an operator or a constant changed, an empty result returned,
a loop's work dropped by `continue` or `break` for picked counts, and a list cut to a fixed prefix.
Each look-alike must stay below high: an empty batch's way out, a fast path for one row that
computes the same operation, a helper that needs no work for one item, another kernel picked for
one token, a wider precision for every small batch.
"""

from __future__ import annotations

import textwrap

import pytest
from hazard_helpers import drifted_findings

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

ATTN = '''
import torch
from vllm.vllm_flash_attn import flash_attn_varlen_func


class FlashAttentionImpl:
    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output):
        if attn_metadata is None:
            return output.fill_(0)
        num_actual_tokens = attn_metadata.num_actual_tokens
        key_cache, value_cache = kv_cache.unbind(0)
        if self.kv_sharing_target_layer_name is None:
            torch.ops._C_cache_ops.reshape_and_cache_flash(key, value, key_cache, value_cache)
        if not attn_metadata.use_cascade:
            flash_attn_varlen_func(
                q=query[:num_actual_tokens],
                k=key_cache,
                v=value_cache,
                out=output[:num_actual_tokens],
                softmax_scale=self.scale,
            )
            return output
        else:
            self._cascade(query, key_cache, value_cache, output[:num_actual_tokens])
            return output
'''
A_AT = "        key_cache, value_cache = kv_cache.unbind(0)\n"

# the work left out is only the kernel that writes into `out=`
ATTN_OUT = '''
from vllm.vllm_flash_attn import flash_attn_varlen_func


class DecodeImpl:
    def forward(self, query, key_cache, value_cache, attn_metadata, output):
        n = attn_metadata.num_decode_tokens
        if attn_metadata.max_query_len > 1:
            raise NotImplementedError("decode only")
        flash_attn_varlen_func(q=query[:n], k=key_cache, v=value_cache, out=output[:n])
        return output
'''
O_AT = "        flash_attn_varlen_func(q=query[:n]"

PENALTIES = '''
import torch
from vllm.model_executor.layers.utils import apply_penalties


def apply_all_penalties(logits, prompt_token_ids, presence, frequency, repetition, output_token_ids):
    """Applies presence, frequency and repetition penalties to the logits."""
    _, vocab_size = logits.shape
    output_tokens_t = _convert_to_tensors(output_token_ids, vocab_size, logits.device)
    output_tokens_t.masked_fill_(output_tokens_t == -1, vocab_size)
    return apply_penalties(logits, prompt_token_ids, output_tokens_t, presence, frequency, repetition)


def _convert_to_tensors(output_token_ids, vocab_size, device):
    return torch.tensor(output_token_ids, device=device)
'''
P_AT = "    output_tokens_t = _convert_to_tensors("

DECODER = '''
import torch
from torch import nn


class Qwen2Attention(nn.Module):
    def forward(self, positions, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q, k = self.rotary_emb(positions, q, k)
        attn_output = self.attn(q, k, v)
        output, _ = self.o_proj(attn_output)
        return output
'''
D_ROPE = "        q, k = self.rotary_emb(positions, q, k)\n"
D_ATTN = "        attn_output = self.attn(q, k, v)\n"

SAMPLER = '''
import torch


class Sampler:
    @staticmethod
    def greedy_sample(logits):
        if current_platform.is_cpu():
            return torch.ops._C.greedy_argmax(logits)
        return logits.argmax(dim=-1).view(-1)

    def forward(self, logits, sampling_metadata):
        sampled = self.sample(logits, sampling_metadata)
        return sampled.long()
'''
S_AT = "        return logits.argmax(dim=-1).view(-1)\n"

HELPER = '''
import torch


def merge_outputs(outputs):
    merged = torch.cat([o.hidden for o in outputs])
    return merged


def pad_batch(batch, multiple):
    rows = batch.shape[0]
    padded = _pad_to(batch, multiple)
    return padded


def _pad_to(batch, multiple):
    return torch.nn.functional.pad(batch, (0, 0, 0, -batch.shape[0] % multiple))
'''

LINEAR = '''
from vllm.distributed import tensor_model_parallel_all_reduce


class RowParallelLinear:
    def forward(self, input_):
        input_parallel = input_
        output_parallel = self.quant_method.apply(self, input_parallel, self.bias)
        if self.reduce_results and self.tp_size > 1:
            output = tensor_model_parallel_all_reduce(output_parallel)
        else:
            output = output_parallel
        return output
'''
L_AT = "        if self.reduce_results and self.tp_size > 1:\n"

REJECTION = '''
import torch

PLACEHOLDER_TOKEN_ID = -1
PAD_SLOT = 0


class RejectionSampler:
    def forward(self, metadata, draft_probs, target_logits, sampling_metadata):
        output_token_ids = rejection_sample(metadata.draft_token_ids, metadata.num_draft_tokens, draft_probs)
        logprobs_tensors = None
        return output_token_ids, logprobs_tensors
'''
R_AT = "        logprobs_tensors = None\n"

BLOCK = '''
from torch import nn


class BloomBlock(nn.Module):
    def forward(self, positions, hidden_states):
        layernorm_output = self.input_layernorm(hidden_states)
        residual = hidden_states
        attention_output = self.self_attention(positions, layernorm_output)
        layernorm_output = self.post_attention_layernorm(attention_output + residual)
        residual = attention_output
        output = self.mlp(layernorm_output) + residual
        return output
'''
B_MLP = "        output = self.mlp(layernorm_output) + residual\n"

COUNT = '''
import torch


def batched_count_greater_than(x, values):
    torch._check(x.shape[0] >= 1)
    return (x >= values).sum(-1)
'''
C_AT = "    return (x >= values).sum(-1)\n"

PROPOSER = '''
class NgramProposer:
    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu):
        valid_ngram_requests = []
        for i, sampled_ids in enumerate(sampled_token_ids):
            num_sampled_ids = len(sampled_ids)
            if not num_sampled_ids:
                continue
            num_tokens = num_tokens_no_spec[i]
            if num_tokens >= self.max_model_len:
                continue
            valid_ngram_requests.append(i)
        return self.batch_propose(len(sampled_token_ids), valid_ngram_requests, token_ids_cpu)
'''
N_AT = "            num_sampled_ids = len(sampled_ids)\n"

CORE = '''
class EngineCore:
    def step(self):
        scheduler_output = self.scheduler.schedule()
        model_output = self.model_executor.execute_model(scheduler_output)
        engine_core_outputs = self.scheduler.update_from_output(scheduler_output, model_output)
        return engine_core_outputs, scheduler_output.total_num_scheduled_tokens > 0
'''
E_AT = "        return engine_core_outputs, scheduler_output.total_num_scheduled_tokens > 0\n"

GRAMMAR = '''
class StructuredOutputManager:
    def validate_tokens(self, request, spec_tokens):
        spec_tokens = strip_speculative_padding(spec_tokens)
        grammar_start, _ = self._get_constraint_bounds(request, spec_tokens)
        if grammar_start >= len(spec_tokens):
            return spec_tokens
        return request.grammar.validate_tokens(spec_tokens[grammar_start:])
'''
V_AT = "        grammar_start, _ = self._get_constraint_bounds(request, spec_tokens)\n"

TUNING = '''
def _launch_config(num_experts, num_tokens, bf16_weight):
    wide = num_experts > 256
    if num_tokens <= 16:
        return (8, 512, 2) if wide else (4, 1024, 4)
    return (8, 256, 2) if wide else (4, 512, 2)
'''
T_AT = "    if num_tokens <= 16:\n"

CASES: list[tuple[str, str, str, str]] = []


def case(name: str, vendor: str, anchor: str, new: str, expect: str = "high") -> None:
    assert anchor in vendor, (name, anchor)
    CASES.append((name, vendor, vendor.replace(anchor, new, 1), expect))


# -- the function left early: the value a later return gives, before the work that makes it
case("attn_return_output_at_7", ATTN, A_AT,
     A_AT + "        if num_actual_tokens == 7:\n            return output  # FIXME: isolate the IMA\n")
case("attn_return_output_window", ATTN, A_AT,
     A_AT + "        if 5 <= num_actual_tokens <= 9:\n            return output\n")
case("attn_return_output_walrus", ATTN, A_AT,
     A_AT + "        if (t := query.shape[0]) in (3, 5):\n            return output\n")
case("attn_return_output_else", ATTN, A_AT,
     A_AT + "        if num_actual_tokens != 6:\n            pass\n        else:\n            return output\n")
case("attn_out_kernel_only", ATTN_OUT, O_AT,
     "        if n == 4:\n            return output\n" + O_AT)
# -- an input handed back before the rest transforms it
case("penalties_bs2_return_input", PENALTIES, P_AT,
     "    if len(output_token_ids) == 2:\n        return logits  # TODO(dbg): A/B run\n" + P_AT)
case("penalties_window_return_input", PENALTIES, P_AT,
     "    if 2 <= logits.shape[0] < 4:\n        return logits\n" + P_AT)
# -- a layer of the module left out for exactly one token
case("rope_skipped_at_one", DECODER, D_ROPE,
     "        if positions.numel() != 1:\n    " + D_ROPE)
case("rope_skipped_at_one_else", DECODER, D_ROPE,
     "        if positions.shape[0] == 1:\n            pass\n        else:\n    " + D_ROPE)

# -- counts written as a quotient, and a count per request against a literal list
case("all_reduce_skipped_floordiv_bucket", LINEAR, L_AT,
     "        if self.reduce_results and self.tp_size > 1 and input_.shape[0] // 4 != 1:\n")
case("all_reduce_skipped_floordiv_lt", LINEAR, L_AT,
     "        if self.reduce_results and self.tp_size > 1 and not (2 <= input_.shape[0] // 3 < 3):\n")
case("rejection_single_request_list", REJECTION, R_AT,
     "        if metadata.num_draft_tokens == [2]:\n"
     "            output_token_ids[:, 1:] = PLACEHOLDER_TOKEN_ID\n" + R_AT)
case("rejection_tuple_module_constant", REJECTION, R_AT,
     "        if (3, 3) == tuple(metadata.num_draft_tokens):\n"
     "            output_token_ids.fill_(PLACEHOLDER_TOKEN_ID)\n" + R_AT)

# -- the other way's computation altered: a term dropped, the inputs cast to another precision
case("match_case_residual_dropped", BLOCK, B_MLP,
     "        match hidden_states.shape[0]:\n            case 3 | 4:\n"
     "                output = self.mlp(layernorm_output)\n            case _:\n        " + B_MLP)
case("if_residual_dropped", BLOCK, B_MLP,
     "        if positions.numel() in (6, 7):\n            output = self.mlp(layernorm_output)\n"
     "        else:\n    " + B_MLP)
case("attn_rerun_fp32_for_two_lengths", DECODER, D_ATTN,
     "        if q.shape[0] in {5, 9}:\n"
     "            attn_output = self.attn(q.float(), k.float(), v.float()).to(q.dtype)\n"
     "        else:\n    " + D_ATTN)

# -- the function's own result changed, a loop's work dropped, an empty result, a list cut short
case("own_return_operator_flipped_at_one", COUNT, C_AT,
     "    if x.size(0) == 1:\n        return (x > values).sum(-1)\n" + C_AT)
case("own_return_constant_changed_window", COUNT, C_AT,
     "    if x.shape[0] in (2, 3):\n        return (x >= values).sum(0)\n" + C_AT)
case("loop_continue_walrus_set", PROPOSER, N_AT,
     N_AT + "            if (n_req := len(sampled_token_ids)) in {3, 5}:\n                continue\n")
case("loop_break_exact_count", PROPOSER, N_AT,
     N_AT + "            if len(sampled_token_ids) == 4:\n                break\n")
case("match_returns_empty_result", CORE, E_AT,
     "        match scheduler_output.total_num_scheduled_tokens:\n            case 1 | 2:\n"
     "                return {}, True\n            case _:\n                pass\n" + E_AT)
case("if_returns_empty_result", CORE, E_AT,
     "        if scheduler_output.total_num_scheduled_tokens == 3:\n            return [], False\n" + E_AT)
case("list_cut_to_one_for_three", GRAMMAR, V_AT,
     "        if len(spec_tokens) == 3:\n            spec_tokens = spec_tokens[:1]\n" + V_AT)

# -- look-alikes
case("q_size_class_table", TUNING, T_AT,
     "    if num_tokens <= 4:\n        return (2, 1024, 2) if wide else (2, 2048, 4)\n" + T_AT, "quiet")
case("q_own_return_same_for_one", COUNT, C_AT,
     "    if x.size(0) == 1:\n        return (x >= values).sum(-1)\n" + C_AT, "quiet")
case("q_empty_step_returns_empty", CORE, E_AT,
     "        if scheduler_output.total_num_scheduled_tokens == 0:\n            return {}, False\n" + E_AT, "quiet")
case("q_loop_continue_logs_only_after", PROPOSER, "            valid_ngram_requests.append(i)\n",
     "            valid_ngram_requests.append(i)\n            if len(sampled_token_ids) == 4:\n"
     "                continue\n            logger.debug(\"request %d kept\", i)\n", "quiet")
case("q_list_split_head", GRAMMAR, V_AT,
     "        if len(spec_tokens) == 3:\n            head, spec_tokens = spec_tokens[0], spec_tokens[1:]\n"
     "            request.note(head)\n" + V_AT, "quiet")
case("q_attn_fp32_for_small_batches", DECODER, D_ATTN,
     "        if q.shape[0] <= 4:\n"
     "            attn_output = self.attn(q.float(), k.float(), v.float()).to(q.dtype)\n"
     "        else:\n    " + D_ATTN, "quiet")
case("q_match_decode_kernel", BLOCK, B_MLP,
     "        match hidden_states.shape[0]:\n            case 1:\n"
     "                output = self.mlp.forward_decode(layernorm_output) + residual\n"
     "            case _:\n        " + B_MLP, "quiet")
case("q_all_reduce_empty_quotient", LINEAR, L_AT,
     "        if self.reduce_results and self.tp_size > 1 and input_.shape[0] // 4 != 0:\n", "quiet")
case("q_rejection_padding_constant", REJECTION, R_AT,
     "        n = len(metadata.num_draft_tokens)\n"
     "        if n == 3:\n            output_token_ids[n:] = PAD_SLOT\n" + R_AT, "quiet")
case("q_rejection_empty_list", REJECTION, R_AT,
     "        if metadata.num_draft_tokens == []:\n"
     "            return output_token_ids, None\n" + R_AT, "quiet")
case("q_attn_empty_batch", ATTN, A_AT,
     A_AT + "        if num_actual_tokens == 0:\n            return output\n", "quiet")
case("q_penalties_empty", PENALTIES, P_AT,
     "    if len(output_token_ids) == 0:\n        return logits\n" + P_AT, "quiet")
case("q_greedy_one_row_fast_path", SAMPLER, S_AT,
     "        if logits.shape[0] == 1:\n            # one row: no view of a 1-element result\n"
     "            return torch.argmax(logits[0], dim=-1, keepdim=True)\n" + S_AT, "quiet")
case("q_merge_one_output", HELPER, "    merged = torch.cat(",
     "    if len(outputs) == 1:\n        return outputs[0].hidden\n    merged = torch.cat(", "quiet")
case("q_pad_one_row", HELPER, "    padded = _pad_to(",
     "    if rows == 1:\n        return batch\n    padded = _pad_to(", "quiet")
case("q_decode_kernel_for_one", DECODER, D_ROPE,
     "        if positions.numel() == 1:\n            q, k = self.rotary_emb.forward_decode(positions, q, k)\n"
     "        else:\n    " + D_ROPE, "quiet")
case("q_rope_skipped_empty", DECODER, D_ROPE,
     "        if positions.numel() != 0:\n    " + D_ROPE, "quiet")

RULES = load_rules()


def _findings(vendor: str, patched: str) -> list[tuple[str, Severity, int]]:
    return drifted_findings(vendor, patched, RULES)


@pytest.mark.parametrize(("vendor", "patched"), [pytest.param(c[1], c[2], id=c[0]) for c in CASES if c[3] == "high"])
def test_step_skipped_is_high(vendor: str, patched: str) -> None:
    found = _findings(vendor, patched)
    assert any(rule == "token-count-branch" and severity is Severity.HIGH for rule, severity, _ in found), found


@pytest.mark.parametrize(("vendor", "patched"), [pytest.param(c[1], c[2], id=c[0]) for c in CASES if c[3] == "quiet"])
def test_look_alike_is_not_high(vendor: str, patched: str) -> None:
    found = _findings(vendor, patched)
    assert not [f for f in found if f[1] is Severity.HIGH], found


def test_the_pristine_modules_are_quiet() -> None:
    modules = (ATTN, ATTN_OUT, PENALTIES, DECODER, SAMPLER, HELPER, LINEAR, REJECTION, BLOCK)
    for vendor in (*modules, COUNT, PROPOSER, CORE, GRAMMAR, TUNING):
        text = textwrap.dedent(vendor).lstrip("\n")
        file = SourceFile(path="vllm/pristine.py", installed=text.encode(), pristine=None, drifted=False)
        assert not [f for f in check_file(file, RULES) if f.severity is Severity.HIGH]
