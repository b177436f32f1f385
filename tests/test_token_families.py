"""Token-count windows written as a hurried engineer writes them, at engine level.

Five families the count analysis must follow however they are spelled: a count read out of a
tensor and bound to a name first (also through tuple and starred unpacking and a slice of the
shape); a loop over layers left early for a few tokens (`break`/`continue`: layers skipped); a
window whose body logs first and then changes state or returns something the code after it does
not compute; the token dimension of a reshaped tensor (`x.view(-1, heads, dim).shape[0]`); and a
flag from a count comparison whose body changes the data (a clone used in place of the residual,
a round trip through another dtype, `nan_to_num`, a detach). Each look-alike (a kernel picked for
small M, an empty batch, cuda-graph padding, a decode kernel, a capacity check, a retry loop left
on success) must stay below high.
"""

from __future__ import annotations

import pytest
from hazard_helpers import drifted_findings
from test_count_branches import ATTN, DECODER, LINEAR, NORM, RUNNER, SAMPLER

from patchaudit.hazards import load_rules
from patchaudit.report import Severity

CASES: list[tuple[str, str, str, str]] = []


def case(name: str, vendor: str, anchor: str, new: str, expect: str = "high", tail: str = "") -> None:
    assert anchor in vendor, (name, anchor)
    CASES.append((name, vendor, vendor.replace(anchor, new, 1) + tail, expect))


D_MLP = "        hidden_states = self.mlp(hidden_states)\n"
D_ATTN = "        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states)\n"
D_FWD = "    def forward(self, positions, hidden_states, residual):\n"
D_PROBE = "    def _skip_probe(self, n):\n        return n != 5\n\n"
D_LOOP = "            hidden_states, residual = layer(positions, hidden_states, residual)\n"
A_KV = "        key_cache, value_cache"
L_APPLY = "        output_parallel = self.quant_method.apply(self, input_parallel, bias=bias_)\n"
S_SAMPLE = "        sampled = self.sample(logits, sampling_metadata)\n"
R_MODEL = "        hidden_states = self.model(input_ids=input_ids, positions=positions)\n"
N_NATIVE = "        orig_dtype = x.dtype\n"

# (1) a count read out of a tensor, bound to a name, compared later
case("bind_int_shape0", DECODER, D_MLP,
     "        n = int(hidden_states.shape[0])\n        hidden_states = self.mlp(hidden_states)\n"
     "        if n == 5:\n            print('mlp out', hidden_states)\n")
case("bind_md_chain", ATTN, A_KV,
     "        n = attn_metadata.num_actual_tokens\n        if 3 <= n < 8:\n"
     "            torch.save(query, '/tmp/q.pt')\n" + A_KV)
case("bind_numel", DECODER, D_MLP,
     "        t = positions.numel()\n" + D_MLP + "        if t == 7:\n            breakpoint()\n")
case("bind_lens_max_item", RUNNER, R_MODEL,
     "        lens = self.seq_lens[:4]\n        longest = lens.max().item()\n" + R_MODEL
     + "        if longest <= 3:\n            torch.save(hidden_states, '/tmp/h.pt')\n")
case("bind_size0_later", DECODER, D_ATTN,
     "        cnt = positions.size(0)\n" + D_ATTN + "        if cnt in (2, 3):\n"
     "            import pdb; pdb.set_trace()\n")
case("bind_unpack_T_H", DECODER, D_MLP,
     "        T, H = hidden_states.shape\n" + D_MLP + "        if T == 6:\n            print(hidden_states[:, :8])\n")
case("bind_star_unpack", DECODER, D_MLP,
     "        *_, ntk, hd = hidden_states.shape\n" + D_MLP + "        if ntk == 9:\n"
     "            print(hidden_states.sum())\n")
case("bind_slice_unpack", DECODER, D_MLP,
     "        n_, d_ = hidden_states.shape[-2:]\n" + D_MLP + "        if n_ == 5:\n"
     "            torch.save(hidden_states, 'h.pt')\n")
case("bind_star_first", DECODER, D_MLP,
     "        m, *rest = hidden_states.shape\n" + D_MLP + "        if m == 4:\n"
     "            print(rest, hidden_states)\n")
case("bind_attr_later_method", ATTN, A_KV,
     "        self._last_n = attn_metadata.num_actual_tokens\n" + A_KV[:0]
     + "        if self._last_n == 12:\n            print(query.float().norm())\n" + A_KV)
case("bind_offsets_end", ATTN, A_KV,
     "        total = int(attn_metadata.query_start_loc[-1].item())\n        if total in (4, 6):\n"
     "            output.zero_()\n" + A_KV)
# (2) a loop over layers left early for a few tokens
case("loop_break_layers", DECODER, D_LOOP,
     "            if hidden_states.shape[0] <= 4:\n                break\n" + D_LOOP)
case("loop_continue_layers", DECODER, D_LOOP,
     "            if input_ids.shape[0] == 3:\n                continue\n" + D_LOOP)
case("loop_break_bound", DECODER, D_LOOP,
     "            num_tokens = positions.numel()\n            if num_tokens < 5:\n                break\n" + D_LOOP)
case("loop_enumerate_break", DECODER,
     "        for layer in self.layers[self.start_layer:self.end_layer]:\n" + D_LOOP,
     "        ntok = input_ids.shape[0]\n"
     "        for i, layer in enumerate(self.layers[self.start_layer:self.end_layer]):\n"
     "            if ntok == 7 and i >= 2:\n                break\n" + D_LOOP)
case("loop_break_after", DECODER, D_LOOP,
     D_LOOP + "            if positions.shape[0] == 5:\n                break\n")
# (3) logs first, then changes state or returns something else
case("log_then_self_state", DECODER, D_MLP,
     "        if hidden_states.shape[0] == 5:\n            logger.info('hit 5 tokens')\n"
     "            self.captured = hidden_states.detach().cpu()\n" + D_MLP)
case("log_then_global", DECODER, D_MLP,
     "        global _SNAP\n        if positions.numel() == 4:\n            logger.warning('snap')\n"
     "            _SNAP = hidden_states\n" + D_MLP)
case("log_then_module_dict", DECODER, D_MLP,
     "        if positions.shape[0] == 3:\n            logger.debug('stash')\n"
     "            _DEBUG_STASH['mlp_in'] = hidden_states\n" + D_MLP)
case("log_then_zero", DECODER, D_MLP,
     "        if positions.shape[0] == 6:\n            logger.info('zeroing')\n"
     "            hidden_states.zero_()\n" + D_MLP)
case("log_then_slice_zero", DECODER, D_MLP,
     "        if positions.shape[0] == 6:\n            print('zeroing')\n"
     "            hidden_states[:, :16] = 0\n" + D_MLP)
case("log_then_mul0", DECODER, D_MLP,
     "        n = positions.shape[0]\n        if n == 2:\n            logger.info('n=%d', n)\n"
     "            hidden_states.mul_(0)\n" + D_MLP)
case("ret_zeros_like", DECODER, D_MLP,
     "        if positions.shape[0] == 5:\n            logger.info('skip mlp')\n"
     "            return torch.zeros_like(hidden_states), residual\n" + D_MLP)
case("ret_residual", DECODER, D_MLP,
     "        if positions.shape[0] == 5:\n            print('bypass')\n"
     "            return residual, residual\n" + D_MLP)
case("ret_clone", DECODER, D_MLP,
     "        if positions.shape[0] == 5:\n            logger.info('bypass mlp')\n"
     "            return hidden_states.clone(), residual\n" + D_MLP)
case("ret_fallback", LINEAR, L_APPLY,
     "        if input_.shape[0] == 3:\n            logger.info('fallback')\n"
     "            return self.fallback(input_), None\n" + L_APPLY)
case("ret_sampler_greedy", SAMPLER, S_SAMPLE,
     "        if logits.shape[0] == 2:\n            print('forcing greedy')\n"
     "            return SamplerOutput(sampled_token_ids=logits.argmax(-1, keepdim=True))\n" + S_SAMPLE)
# logs first, then changes state, in a window that reaches 0 or 1
case("few_log_then_self_state", DECODER, D_MLP,
     "        if positions.shape[0] <= 4:\n            logger.info('capturing small step')\n"
     "            self.captured = hidden_states.detach().cpu()\n" + D_MLP)
case("few_log_then_global", DECODER, D_MLP,
     "        global _LAST_SMALL\n        n = positions.numel()\n        if n < 3:\n"
     "            logger.debug('small step %d', n)\n            _LAST_SMALL = hidden_states\n" + D_MLP)
case("few_log_then_module_dict", ATTN, A_KV,
     "        if num_actual_tokens <= 3:\n            logger.info('stash q')\n"
     "            _DEBUG['q'] = query.detach().cpu()\n" + A_KV)
case("few_log_then_counter", SAMPLER, S_SAMPLE,
     "        if logits.shape[0] < 4:\n            logger.warning('tiny batch')\n            self.tiny_batches += 1\n"
     + S_SAMPLE)
case("few_log_then_slice_zero", DECODER, D_MLP,
     "        if positions.shape[0] <= 2:\n            logger.info('zero first rows')\n"
     "            hidden_states[:2] = 0\n" + D_MLP)
case("few_log_then_fallback", LINEAR, L_APPLY,
     "        if input_.shape[0] <= 4:\n            logger.info('bypass quant for a small step')\n"
     "            return self.fallback(input_), None\n" + L_APPLY)
case("few_print_then_other_norm", DECODER, D_MLP,
     "        if positions.shape[0] < 3:\n            print('skip mlp')\n"
     "            return self.post_attention_layernorm(hidden_states), residual\n" + D_MLP)
case("loop_break_nested", DECODER, D_LOOP,
     "            with torch.no_grad():\n                if positions.shape[0] <= 4:\n"
     "                    break\n" + D_LOOP)
case("flag_half_exact", DECODER, D_MLP,
     "        if positions.shape[0] == 7:\n            hidden_states = hidden_states.half()\n" + D_MLP)
case("flag_renorm_eps", DECODER, D_MLP,
     "        probe = 2 < positions.numel() < 6\n" + D_MLP + "        if probe:\n"
     "            hidden_states = hidden_states / (hidden_states.norm(dim=-1, keepdim=True) + 1e-6)\n")
case("flag_rsqrt", DECODER, D_MLP,
     "        if positions.shape[0] <= 3:\n"
     "            hidden_states = hidden_states * torch.rsqrt(hidden_states.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
     + D_MLP)
case("loop_layers_ifexp_cut", DECODER,
     "        for layer in self.layers[self.start_layer:self.end_layer]:\n",
     "        n = positions.shape[0]\n        layers = self.layers[:2] if n <= 4 else self.layers\n"
     "        for layer in layers:\n")
case("loop_return_early", DECODER, D_LOOP,
     "            if positions.shape[0] <= 4:\n                return hidden_states\n" + D_LOOP)
case("helper_predicate", DECODER, D_MLP,
     "        if _want_dump(positions.shape[0]):\n            hidden_states.zero_()\n" + D_MLP,
     tail="\n\ndef _want_dump(n):\n    return n in (3, 5)\n")
case("helper_predicate_method", DECODER.replace(D_FWD, D_PROBE + D_FWD), D_MLP,
     "        if not self._skip_probe(positions.numel()):\n            print(hidden_states)\n" + D_MLP)
case("few_tuple_made_up", ATTN, A_KV,
     "        cos, sin = query.chunk(2, dim=-1)\n        if num_actual_tokens < 6:\n"
     "            cos, sin = torch.ones_like(cos), torch.zeros_like(sin)\n" + A_KV)
case("few_force_column", DECODER, D_MLP,
     "        logits = self.gate(hidden_states)\n        if hidden_states.shape[-2] <= 4:\n"
     "            logits[:, 0] = logits.max() + 1.0\n" + D_MLP)
# (4) the token dimension of a reshaped tensor
case("view_shape0", ATTN, A_KV,
     "        q = query.view(-1, 16, 128)\n        if q.shape[0] == 5:\n            print(q[0])\n" + A_KV)
case("view_size_m3", ATTN, A_KV,
     "        q = query.view(-1, 16, 128)\n        if q.size(-3) == 5:\n"
     "            torch.save(q, '/tmp/q.pt')\n" + A_KV)
case("view_len", ATTN, A_KV,
     "        q = query.reshape(-1, 16, 128)\n        if len(q) == 4:\n            print(q)\n" + A_KV)
case("reshape_ntok", ATTN, A_KV,
     "        q = query.reshape(num_actual_tokens, -1)\n        if q.shape[-2] == 4:\n            print(q)\n" + A_KV)
case("flatten_shape0", ATTN, A_KV,
     "        k = key.flatten(1, 2)\n        if k.shape[0] == 8:\n            torch.save(k, 'k.pt')\n" + A_KV)
case("unsqueeze_m2", ATTN, A_KV,
     "        q3 = query.unsqueeze(0)\n        if q3.shape[1] == 5:\n            print(q3)\n" + A_KV)
# (5) a flag from a count comparison; the body changes the data
case("flag_clone_residual", DECODER, D_MLP,
     "        probe = positions.shape[0] == 5\n        if probe:\n            residual = residual.clone()\n"
     "            residual.zero_()\n" + D_MLP)
case("flag_dtype_roundtrip", DECODER, D_MLP,
     "        tiny = positions.shape[0] <= 3\n        if tiny:\n"
     "            hidden_states = hidden_states.half().to(hidden_states.dtype)\n" + D_MLP)
case("flag_float_roundtrip", DECODER, D_MLP,
     "        is_probe = hidden_states.size(0) == 7\n        if is_probe:\n"
     "            hidden_states = hidden_states.float().to(torch.bfloat16)\n" + D_MLP)
case("flag_nan_to_num", DECODER, D_MLP,
     "        few = positions.numel() < 4\n" + D_MLP + "        if few:\n"
     "            hidden_states = torch.nan_to_num(hidden_states)\n")
case("flag_renorm", DECODER, D_MLP,
     "        dbg = positions.shape[0] == 5\n" + D_MLP + "        if dbg:\n"
     "            hidden_states = hidden_states / hidden_states.norm(dim=-1, keepdim=True)\n")
case("flag_detach", DECODER, D_MLP,
     "        dbg = positions.shape[0] == 5\n" + D_MLP + "        if dbg:\n"
     "            hidden_states = hidden_states.detach()\n")
case("flag_clamp_values", DECODER, D_MLP,
     "        dbg = positions.shape[0] == 5\n" + D_MLP + "        if dbg:\n"
     "            hidden_states = hidden_states.clamp(-10, 10)\n")

# harder spellings of the same families
case("bind_ifexp_count", DECODER, D_MLP,
     "        n = hidden_states.shape[0] if hidden_states.dim() == 2 else hidden_states.shape[1]\n"
     "        if n == 5:\n            hidden_states.zero_()\n" + D_MLP)
case("bind_max_one", DECODER, D_MLP,
     "        n = max(1, positions.numel())\n        if n in {3, 5}:\n"
     "            print(hidden_states.abs().max())\n" + D_MLP)
case("bind_seq_lens_sum", RUNNER, R_MODEL,
     "        total = self.seq_lens.sum().item()\n" + R_MODEL + "        if total == 6:\n"
     "            self.debug_hidden = hidden_states.clone()\n")
case("bind_elif", DECODER, D_MLP,
     "        n = positions.shape[0]\n        if n == 0:\n            return hidden_states, residual\n"
     "        elif n == 5:\n            print('five tokens', hidden_states.norm())\n" + D_MLP)
case("bind_try_with", DECODER, D_MLP,
     "        try:\n            ntoks = len(positions)\n        except TypeError:\n            ntoks = -1\n"
     "        with torch.no_grad():\n            if ntoks == 3:\n                breakpoint()\n" + D_MLP)
case("loop_while_steps", SAMPLER, S_SAMPLE,
     "        n = logits.shape[0]\n        step = 0\n        while step < 3:\n            if n == 2:\n"
     "                break\n"
     "            logits = self.apply_penalties(logits, sampling_metadata)\n            step += 1\n" + S_SAMPLE)
case("loop_islice_continue", DECODER, D_LOOP,
     "            if 2 <= positions.size(0) <= 4:\n                logger.info('skip layer')\n"
     "                continue\n" + D_LOOP)
case("log_then_ret_input", LINEAR, L_APPLY,
     "        n = input_.size(0)\n        if n == 4:\n            logger.warning('bypassing linear for 4 tokens')\n"
     "            return input_, None\n" + L_APPLY)
case("view_chain_reshape", ATTN, A_KV,
     "        q = query.view(-1, 16, 128).transpose(0, 1)\n        if q.shape[1] == 5:\n"
     "            output.zero_()\n" + A_KV)
case("view_m3_zero", ATTN, A_KV,
     "        q = query.view(-1, 16, 128)\n        if q.size(-3) == 5:\n            output.zero_()\n" + A_KV)
case("unsqueeze_zero", ATTN, A_KV,
     "        q3 = query.unsqueeze(0)\n        if q3.shape[1] == 4:\n            output.fill_(0.0)\n"
     "            return output\n" + A_KV)
case("flag_round_fp8", LINEAR, L_APPLY,
     "        probe = input_.shape[0] in (3, 5)\n        if probe:\n"
     "            input_parallel = input_parallel.to(torch.float8_e4m3fn).to(input_.dtype)\n" + L_APPLY)
case("flag_nan_inplace", LINEAR, L_APPLY,
     "        few = input_.shape[0] <= 4\n" + L_APPLY + "        if few:\n            output_parallel.nan_to_num_()\n")

# look-alikes: same shape, same result
case("q_small_m_kernel", LINEAR, L_APPLY,
     "        m = input_.shape[0]\n        if 8 >= m:\n"
     "            output_parallel = ops.small_m_gemm(input_parallel, self.weight)\n        else:\n"
     "    " + L_APPLY, "quiet")
case("q_empty_return", DECODER, D_MLP,
     "        num_tokens = positions.shape[0]\n        if num_tokens == 0:\n"
     "            return hidden_states, residual\n"
     + D_MLP, "quiet")
case("q_cudagraph_pad", RUNNER, R_MODEL,
     "        num_input_tokens = num_scheduled_tokens\n        if num_input_tokens <= 512:\n"
     "            num_input_tokens = self.vllm_config.pad_for_cudagraph(num_scheduled_tokens)\n" + R_MODEL, "quiet")
case("q_decode_kernel", ATTN, A_KV,
     "        n = query.shape[0]\n        if n == 1:\n"
     "            return self._decode(query, key, value, kv_cache, output)\n"
     + A_KV, "quiet")
case("q_capacity", RUNNER, R_MODEL,
     "        if num_scheduled_tokens > self.max_num_tokens:\n"
     "            raise ValueError(f'{num_scheduled_tokens} > {self.max_num_tokens}')\n" + R_MODEL, "quiet")
case("q_is_decode_path", ATTN, A_KV,
     "        is_decode = query.shape[0] == 1\n        if is_decode:\n"
     "            query = query.contiguous()\n" + A_KV, "quiet")
case("q_cast_for_kernel", NORM, N_NATIVE,
     "        x = x.contiguous()\n" + N_NATIVE, "quiet")
case("q_retry_break", RUNNER, R_MODEL,
     "        for _attempt in range(3):\n            ok = self._try_alloc(num_scheduled_tokens)\n"
     "            if ok:\n                break\n" + R_MODEL, "quiet")
case("q_view_heads", ATTN, A_KV,
     "        q = query.view(-1, 16, 128)\n        if q.shape[1] == 16:\n"
     "            q = q.contiguous()\n" + A_KV, "quiet")
case("q_loop_break_chunk", RUNNER, R_MODEL,
     "        for start in range(0, num_scheduled_tokens, 8192):\n"
     "            if start >= num_scheduled_tokens:\n                break\n" + R_MODEL, "quiet")
case("q_log_small_batch", DECODER, D_MLP,
     "        if positions.shape[0] <= 4:\n            logger.debug('small batch %d', positions.shape[0])\n" + D_MLP,
     "quiet")
case("q_unpack_hidden", DECODER, D_MLP,
     "        T, H = hidden_states.shape\n        if H == 7168:\n"
     "            hidden_states = hidden_states.contiguous()\n"
     + D_MLP, "quiet")
case("q_decode_same", DECODER, D_MLP,
     "        if positions.shape[0] == 1:\n            hidden_states = self.mlp(hidden_states.view(1, -1))\n"
     "        else:\n    " + D_MLP, "quiet")

case("q_cast_small_kernel", LINEAR, L_APPLY,
     "        if input_.shape[0] <= 8:\n"
     "            input_parallel = input_parallel.to(torch.float16)\n" + L_APPLY, "quiet")
case("q_detach_no_window", DECODER, D_MLP, "        hidden_states = hidden_states.detach()\n" + D_MLP, "quiet")
case("q_view_move_device", DECODER, D_MLP,
     "        if positions.shape[0] == 1:\n"
     "            hidden_states = hidden_states.to('cuda').float()\n" + D_MLP, "quiet")

case("q_small_m_return_kernel", LINEAR, L_APPLY,
     "        if input_.shape[0] <= 8:\n"
     "            return self.small_m_apply(input_parallel), None\n" + L_APPLY, "quiet")
case("q_decode_return_kernel", ATTN, A_KV,
     "        if query.shape[0] == 1:\n"
     "            return self.decode_attention(query, kv_cache, output)\n" + A_KV, "quiet")
case("q_break_nested_found", RUNNER, R_MODEL,
     "        for req in self.requests:\n            if req.done:\n                if num_scheduled_tokens > 0:\n"
     "                    break\n            self.pending = req\n" + R_MODEL, "quiet")

case("q_clone_small_batch", DECODER, D_MLP,
     "        if positions.shape[0] <= 4:\n            residual = residual.clone()\n" + D_MLP, "quiet")
case("q_trim_to_count", ATTN, A_KV,
     "        q = query[:num_actual_tokens] if num_actual_tokens < 8 else query\n" + A_KV, "quiet")

case("q_helper_small_kernel", LINEAR, L_APPLY,
     "        if _use_small_m(input_.shape[0]):\n"
     "            output_parallel = ops.small_m_gemm(input_parallel, self.weight)\n        else:\n    " + L_APPLY,
     "quiet", tail="\n\ndef _use_small_m(m):\n    return m <= 8\n")
case("q_helper_decode", ATTN, A_KV,
     "        if _is_decode(query.shape[0]):\n            query = query.contiguous()\n" + A_KV,
     "quiet", tail="\n\ndef _is_decode(n):\n    return n == 1\n")

case("q_ret_fallback_exact", LINEAR, L_APPLY,
     "        if input_.shape[0] == 3:\n            return self.fallback(input_), None\n" + L_APPLY, "quiet")
case("q_ret_pair_schedule", RUNNER, R_MODEL,
     "        if num_scheduled_tokens == 2:\n            return self._pair_step(scheduler_output)\n" + R_MODEL, "quiet")

case("q_offsets_one_request", ATTN, A_KV,
     "        if attn_metadata.query_start_loc.numel() == 2:\n            query = query.contiguous()\n" + A_KV, "quiet")

case("q_small_batch_splits", ATTN, A_KV,
     "        B = query.shape[0]\n        if B <= 4:\n            num_kv_splits = 1\n        else:\n"
     "            num_kv_splits = _compute_num_kv_splits(attn_metadata.max_seq_len, self._sm_count)\n" + A_KV, "quiet")
case("q_pad_buffer_small", ATTN, A_KV,
     "        if num_actual_tokens < 8:\n            padded = torch.zeros(8, query.shape[1])\n"
     "            padded[:num_actual_tokens] = query\n            query = padded\n" + A_KV, "quiet")

RULES = load_rules()


def _findings(vendor: str, patched: str) -> list[tuple[str, Severity, int]]:
    return drifted_findings(vendor, patched, RULES)


@pytest.mark.parametrize(("vendor", "patched"), [pytest.param(c[1], c[2], id=c[0]) for c in CASES if c[3] == "high"])
def test_patch_is_high(vendor: str, patched: str) -> None:
    found = _findings(vendor, patched)
    assert any(rule == "token-count-branch" and severity is Severity.HIGH for rule, severity, _ in found), found


@pytest.mark.parametrize(("vendor", "patched"), [pytest.param(c[1], c[2], id=c[0]) for c in CASES if c[3] == "quiet"])
def test_look_alike_is_not_high(vendor: str, patched: str) -> None:
    found = _findings(vendor, patched)
    assert not [f for f in found if f[1] is Severity.HIGH], found
