"""Branches that switch the computation for a few counts, and dumps behind an environment switch.

Each case edits one vendor file (a decoder layer, an attention backend, a sampler, a runner, a rotary
embedding) the way a hurried engineer debugging a large model does, and runs the engine with the
pristine file beside it. A patch must give a HIGH finding on a line it changed: a branch taken only
for a few counts (tokens, requests, sequences, a batch, a position tensor's last dimension) that turns
the causal flag off, drops scheduler metadata, forces greedy sampling, skips a sublayer, or changes a
scale or a dtype; a tensor dump added to a per-step path behind an environment option, however the
save is spelled. A look-alike (a kernel-size branch, an empty-batch return, a decode fast path calling
another kernel, a small-batch graph choice, a capacity check, a save function whose path is a
parameter, a dump in one-time code or behind a config setting) must give none.
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
import vllm.envs as envs
from vllm.logger import init_logger

logger = init_logger(__name__)


class DecoderLayer(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.causal = True
        self.scale = config.head_dim ** -0.5

    def forward(self, positions, hidden_states, residual, attn_metadata):
        num_tokens = hidden_states.shape[0]
        #L1
        hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states, causal=self.causal)
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        hidden_states = self.mlp(hidden_states)
        #L2
        return hidden_states, residual


class Backend:
    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output):
        num_actual_tokens = attn_metadata.num_actual_tokens
        causal = True
        scheduler_metadata = attn_metadata.scheduler_metadata
        max_seqlen_q = attn_metadata.max_query_len
        slot_mapping = attn_metadata.slot_mapping
        #B1
        reshape_and_cache(key, value, kv_cache, slot_mapping)
        flash_attn_varlen_func(
            q=query[:num_actual_tokens],
            k=key,
            v=value,
            out=output[:num_actual_tokens],
            max_seqlen_q=max_seqlen_q,
            softmax_scale=self.scale,
            causal=causal,
            scheduler_metadata=scheduler_metadata,
        )
        #B2
        return output


class Sampler(nn.Module):
    def forward(self, logits, sampling_metadata):
        temperature = sampling_metadata.temperature
        top_k = sampling_metadata.top_k
        batch_size = logits.shape[0]
        #S1
        logits = logits.div_(temperature.unsqueeze(1))
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
        sampled = self.topk_sample(probs, top_k)
        #S2
        return sampled


class ModelRunner:
    def execute_model(self, scheduler_output, intermediate_tensors=None):
        num_reqs = self.input_batch.num_reqs
        num_scheduled_tokens = scheduler_output.total_num_scheduled_tokens
        #R1
        attn_metadata = self._prepare_inputs(scheduler_output)
        hidden_states = self.model(input_ids=self.input_ids, positions=self.positions, attn_metadata=attn_metadata)
        #R2
        logits = self.model.compute_logits(hidden_states)
        return self.sampler(logits, self.sampling_metadata)


class RotaryEmbedding(nn.Module):
    def forward(self, positions, query, key):
        #P1
        cos_sin = self.cos_sin_cache[positions]
        query = apply_rotary(query, cos_sin)
        return query, key

    def load_weights(self, weights):
        loaded = set()
        for name, w in weights:
            loaded.add(name)
        #W1
        return loaded
"""

SLOTS = {"L1": 8, "L2": 8, "B1": 8, "B2": 8, "S1": 8, "S2": 8, "R1": 8, "R2": 8, "P1": 8, "W1": 8}
LOGGER = "logger = init_logger(__name__)\n"


def model(head: str = "", **slots: str) -> str:
    """The vendor file with `head` after the imports and code at each slot (`L1`: the decoder
    layer's forward before its sublayers, `B1`: the backend before the kernel, `S1`: the sampler,
    `R1`: the runner, `P1`: the rotary forward, `W1`: `load_weights`)."""
    code = BASE.replace(LOGGER, LOGGER + textwrap.dedent(head).strip("\n") + "\n") if head else BASE
    for slot, text in slots.items():
        indent = " " * SLOTS[slot]
        lines = textwrap.dedent(text).strip("\n").splitlines()
        code = code.replace(indent + "#" + slot, "\n".join(indent + line if line.strip() else line for line in lines))
    for slot, width in SLOTS.items():
        code = code.replace(" " * width + "#" + slot + "\n", "")
    return code


def edited(replacements: list[tuple[str, str]]) -> str:
    code = model()
    for old, new in replacements:
        assert old in code, old
        code = code.replace(old, new)
    return code


PRISTINE = model()
BAD: list[tuple[str, str]] = []
GOOD: list[tuple[str, str]] = []


def bad(name: str, rep: list[tuple[str, str]] | None = None, HEAD: str = "", **slots: str) -> None:  # noqa: N803
    BAD.append((name, edited(rep) if rep else model(HEAD, **slots)))


def good(name: str, rep: list[tuple[str, str]] | None = None, HEAD: str = "", **slots: str) -> None:  # noqa: N803
    GOOD.append((name, edited(rep) if rep else model(HEAD, **slots)))


# ---- family 1: branch switches the computation
bad("causal_off_local", B1="if num_actual_tokens == 3:\n    causal = False")
bad("causal_off_attr", L1="if num_tokens == 5:\n    self.causal = False")
bad("sched_md_none", B1="if num_actual_tokens in (2, 3):\n    scheduler_metadata = None")
bad("max_seqlen_recomp", B1="if num_actual_tokens == 4:\n    max_seqlen_q = int(query.shape[0])")
bad("slot_mapping_changed", B1="if num_actual_tokens == 6:\n    slot_mapping = slot_mapping.clone().fill_(0)")
bad("slot_mapping_slice", B1="if num_actual_tokens == 6:\n    slot_mapping = slot_mapping[:1]")
bad("greedy_temp0", S1="if batch_size == 2:\n    temperature = torch.zeros_like(temperature)")
bad("greedy_topk1", S1="if batch_size in {3, 4}:\n    top_k = 1")
bad("argmax_return", S1="if batch_size == 3:\n    return logits.argmax(dim=-1)")
bad(
    "skip_mlp_return",
    rep=[
        (
            "        hidden_states = self.mlp(hidden_states)\n",
            (
                "        if num_tokens == 7:\n"
                "            return hidden_states, residual\n"
                "        hidden_states = self.mlp(hidden_states)\n"
            ),
        )
    ],
)
bad(
    "skip_attn_ifelse",
    rep=[
        (
            (
                "        hidden_states = self.self_attn("
                "positions=positions, hidden_states=hidden_states, causal=self.causal)\n"
            ),
            (
                "        if num_tokens != 3:\n"
                "            hidden_states = self.self_attn("
                "positions=positions, hidden_states=hidden_states, causal=self.causal)\n"
            ),
        )
    ],
)
bad("dtype_switch", L1="if num_tokens == 4:\n    hidden_states = hidden_states.float()")
bad("scale_switch", B1="if num_actual_tokens == 2:\n    self.scale = 1.0")
bad(
    "scale_local_kw",
    rep=[
        (
            "            softmax_scale=self.scale,\n",
            "            softmax_scale=self.scale if num_actual_tokens != 3 else 1.0,\n",
        )
    ],
)
bad(
    "causal_kw_ifexp", rep=[("            causal=causal,\n", "            causal=causal and num_actual_tokens != 4,\n")]
)
bad("mask_swap", B1="if num_actual_tokens == 5:\n    attn_metadata.causal = False")
# ---- family 2: counts not called tokens
bad("num_reqs_eq", R1="if num_reqs == 3:\n    print('reqs', scheduler_output)")
bad("num_reqs_attr", R1="if self.input_batch.num_reqs in {3, 4}:\n    import pdb; pdb.set_trace()")
bad(
    "num_seqs_range",
    R1=(
        "num_seqs = len(scheduler_output.scheduled_new_reqs)\n"
        "if num_seqs in range(2, 5):\n"
        "    torch.save(self.input_ids, '/tmp/ids.pt')"
    ),
)
bad("len_seq_lens_tuple", B1="if len(attn_metadata.seq_lens) in (2, 3):\n    causal = False")
bad("num_prefills_window", B1="if 2 <= attn_metadata.num_prefills <= 4:\n    scheduler_metadata = None")
bad("num_decode_tokens_and", B1="n = attn_metadata.num_decode_tokens\nif n < 3 and n > 1:\n    causal = False")
bad("positions_last_dim", P1="if positions.shape[-1] == 3:\n    return query, key")
bad("positions_size_neg", P1="if positions.size(-1) in (2, 3):\n    print(positions)")
bad("batch_size_eq_greedy", S1="if batch_size == 4:\n    top_k = torch.ones_like(top_k)")
bad(
    "num_reqs_skip_sample",
    rep=[
        (
            "        return self.sampler(logits, self.sampling_metadata)\n",
            (
                "        if num_reqs == 2:\n"
                "            return logits.argmax(-1)\n"
                "        return self.sampler(logits, self.sampling_metadata)\n"
            ),
        )
    ],
)
bad(
    "num_seqs_forward_dump",
    L1="num_seqs = attn_metadata.num_seqs\nif num_seqs == 3:\n    torch.save(hidden_states, f'/tmp/h_{num_seqs}.pt')",
)
bad("batch_size_chain", S1="if 1 < batch_size < 4:\n    temperature = temperature * 0")
# ---- benign look-alikes
good("hidden_7168", L1="if self.hidden_size == 7168:\n    hidden_states = hidden_states.contiguous()")
good("zero_tokens_return", B1="if num_actual_tokens == 0:\n    return output")
good(
    "decode_fast_path",
    rep=[
        (
            "        reshape_and_cache(key, value, kv_cache, slot_mapping)\n",
            (
                "        reshape_and_cache(key, value, kv_cache, slot_mapping)\n"
                "        if num_actual_tokens == 1:\n"
                "            return self._decode_attention(query, key, value, kv_cache, attn_metadata, output)\n"
            ),
        )
    ],
)
good(
    "cuda_graph_pad",
    R1=(
        "if num_reqs <= 8:\n"
        "    use_cuda_graph = True\n"
        "else:\n"
        "    use_cuda_graph = False\n"
        "self.use_cuda_graph = use_cuda_graph"
    ),
)
good("capacity_check", R1="if num_scheduled_tokens > self.max_num_tokens:\n    raise ValueError('too many tokens')")
good("batch_one_greedy_upstream", S1="if sampling_metadata.all_greedy:\n    return logits.argmax(dim=-1)")
good(
    "num_tokens_small_pad",
    R1=(
        "if num_scheduled_tokens <= 512:\n"
        "    num_input_tokens = self.pad_for_cudagraph(num_scheduled_tokens)\n"
        "else:\n"
        "    num_input_tokens = num_scheduled_tokens"
    ),
)
good("head_dim_branch", B1="if query.shape[-1] == 576:\n    causal = True")
good("num_reqs_zero", R1="if num_reqs == 0:\n    return None")
good("split_kv_decode", B1="if attn_metadata.num_decodes > 0:\n    max_seqlen_q = 1")
good(
    "graph_small_batch_alone",
    R1="use_cuda_graph = False\nif num_reqs <= 8:\n    use_cuda_graph = True\nself.run(use_cuda_graph=use_cuda_graph)",
)
good(
    "pad_small_alone",
    R1=(
        "num_input_tokens = num_scheduled_tokens\n"
        "if num_scheduled_tokens <= 8:\n"
        "    num_input_tokens = 8\n"
        "self.prepare(num_input_tokens)"
    ),
)
good("decode_one_kernel_kw", B1="if num_actual_tokens == 1:\n    max_seqlen_q = 1")
good("position_ids_3d_mrope", P1="if positions.ndim == 2:\n    positions = positions[0]")

# ---- dumps behind an environment switch
bad(
    "env_plain",
    L2="if envs.VLLM_DEBUG_DUMP_PATH:\n    torch.save(hidden_states, os.path.join(envs.VLLM_DEBUG_DUMP_PATH, 'h.pt'))",
)
bad(
    "env_getattr",
    L2=(
        "if envs.VLLM_DEBUG_DUMP_PATH:\n"
        "    _persist = getattr(torch, 'save')\n"
        "    _persist(hidden_states.cpu(), f'{envs.VLLM_DEBUG_DUMP_PATH}/h.pt')"
    ),
)
bad(
    "env_getattr_module_level",
    HEAD="_persist = getattr(torch, 'save')",
    L2="if envs.VLLM_DEBUG_DUMP_PATH:\n    _persist(hidden_states.cpu(), f'{envs.VLLM_DEBUG_DUMP_PATH}/h.pt')",
)
bad(
    "osenv_get_backend",
    B2=(
        "if os.environ.get('VLLM_DEBUG_DUMP_PATH'):\n"
        "    torch.save(output, os.environ['VLLM_DEBUG_DUMP_PATH'] + '/attn.pt')"
    ),
)
bad(
    "env_runner_execute",
    R2="if envs.VLLM_DEBUG_DUMP_PATH:\n    torch.save(hidden_states, f'{envs.VLLM_DEBUG_DUMP_PATH}/step.pt')",
)
bad(
    "env_sampler",
    S2="if os.getenv('DUMP_LOGITS'):\n    torch.save(logits, os.path.join(os.getenv('DUMP_LOGITS'), 'logits.pt'))",
)
bad(
    "env_helper",
    HEAD="def _dump(t, path):\n    torch.save(t.detach().cpu(), path)",
    L2="if envs.VLLM_DEBUG_DUMP_PATH:\n    _dump(hidden_states, f'{envs.VLLM_DEBUG_DUMP_PATH}/h.pt')",
)
bad(
    "env_pathlib",
    HEAD="from pathlib import Path",
    L2="if envs.VLLM_DEBUG_DUMP_PATH:\n    torch.save(hidden_states, Path(envs.VLLM_DEBUG_DUMP_PATH) / 'h.pt')",
)
bad(
    "env_np_save",
    HEAD="import numpy as np",
    L2=(
        "if envs.VLLM_DEBUG_DUMP_PATH:\n"
        "    np.save(os.path.join(envs.VLLM_DEBUG_DUMP_PATH, 'h.npy'), hidden_states.float().cpu().numpy())"
    ),
)
bad(
    "env_local_flag",
    L2="dump_dir = envs.VLLM_DEBUG_DUMP_PATH\nif dump_dir:\n    torch.save(hidden_states, f'{dump_dir}/h.pt')",
)
good("param_save_fn", HEAD="def save_tensor(t, path):\n    torch.save(t, path)")
good(
    "load_behind_env",
    W1="if envs.VLLM_DEBUG_DUMP_PATH:\n    torch.save(loaded, os.path.join(envs.VLLM_DEBUG_DUMP_PATH, 'loaded.pt'))",
)
good("config_dump_fwd", L2="if self.config.dump_hidden:\n    torch.save(hidden_states, self.config.dump_path)")
good(
    "fwd_param_path",
    rep=[
        (
            "    def forward(self, positions, hidden_states, residual, attn_metadata):",
            "    def forward(self, positions, hidden_states, residual, attn_metadata, dump_path=None):",
        ),
        (
            "        return hidden_states, residual\n",
            (
                "        if envs.VLLM_DEBUG_DUMP_PATH and dump_path:\n"
                "            torch.save(hidden_states, dump_path)\n"
                "        return hidden_states, residual\n"
            ),
        ),
    ],
)


# ---- more spellings: a keyword that is the test, a dict of keywords, a dtype, a conditional value
bad("kw_comparison", rep=[("            causal=causal,\n", "            causal=num_actual_tokens != 4,\n")])
bad(
    "kwargs_dict",
    B1="kw = dict(causal=True)\nif num_actual_tokens == 3:\n    kw['causal'] = False\nself.kernel(query, **kw)",
)
bad(
    "dtype_local",
    L1="dtype = hidden_states.dtype\nif num_tokens in (2, 3):\n    dtype = torch.float32\n"
    "hidden_states = hidden_states.to(dtype)",
)
bad("ifexp_temp", S1="temperature = 0.0 if batch_size == 3 else temperature")
bad(
    "greedy_md_attr",
    S1="if batch_size == 2:\n    sampling_metadata.all_greedy = True\n"
    "if sampling_metadata.all_greedy:\n    return logits.argmax(-1)",
)
bad(
    "attn_md_none",
    L1="if num_tokens == 6:\n    attn_metadata = None\nhidden_states = self.other(hidden_states, attn_metadata)",
)
good(
    "kw_small_kernel",
    rep=[
        ("            causal=causal,\n", "            causal=causal,\n            use_small=num_actual_tokens <= 8,\n")
    ],
)
good(
    "kw_decode_only",
    rep=[
        (
            "            causal=causal,\n",
            "            causal=causal,\n            decode_only=num_actual_tokens == 1,\n",
        )
    ],
)
good(
    "flush_batch",
    R1="batch = []\nfor req in scheduler_output.reqs:\n    batch.append(req)\n    if len(batch) == 16:\n"
    "        self.submit(batch)\n        batch = []",
)
bad("runner_env_path_ungated", R2="torch.save(hidden_states, f'{envs.VLLM_DEBUG_DUMP_PATH}/step{self._step}.pt')")
good(
    "runner_param_path",
    rep=[
        (
            "    def execute_model(self, scheduler_output, intermediate_tensors=None):",
            "    def execute_model(self, scheduler_output, intermediate_tensors=None, dump_to=None):",
        ),
        (
            "        logits = self.model.compute_logits(hidden_states)\n",
            "        if dump_to is not None:\n            torch.save(hidden_states, dump_to)\n"
            "        logits = self.model.compute_logits(hidden_states)\n",
        ),
    ],
)

# ---- a batch of one: metadata a kernel reads dropped or recomputed counts; a constant for a size class does not
bad(
    "one_token_md_none",
    B1="if num_actual_tokens == 1:\n    scheduler_metadata = None\n    max_seqlen_q = int(query.shape[0])",
)
bad("one_req_slot_recomputed", B1="if len(attn_metadata.seq_lens) == 1:\n    slot_mapping = slot_mapping.clamp(min=0)")
good("small_splits_const", B1="if num_actual_tokens <= 4:\n    max_seqlen_q = 1")

# ---- counts that are not called tokens, in other forms; a padding table stays quiet
bad(
    "f2_num_reqs_range_kw",
    S1="top_k = top_k if sampling_metadata.num_reqs not in range(2, 5) else torch.ones_like(top_k)",
)
bad(
    "f2_num_seqs_two_sided",
    R1="num_seqs = len(scheduler_output.scheduled_cached_reqs.req_ids)\n"
    "if num_seqs < 3 and num_seqs > 1:\n    self.use_greedy = True",
)
bad("f2_input_batch_walrus", R1="if (n := self.input_batch.num_reqs) == 3:\n    import pdb\n    pdb.set_trace()")
bad(
    "f2_num_prefills_match",
    B1="match attn_metadata.num_prefills:\n    case 2 | 3:\n        causal = False\n    case _:\n        pass",
)
bad("f2_decode_tokens_yoda", B1="if 3 == attn_metadata.num_decode_tokens:\n    scheduler_metadata = None")
bad(
    "f2_positions_size_else",
    P1="if positions.size(-1) != 5:\n    pass\nelse:\n    positions = positions.clone().zero_()",
)
bad(
    "f2_len_seq_lens_const",
    HEAD="TRAP_SEQS = (2, 3)",
    B1="if len(attn_metadata.seq_lens) in TRAP_SEQS:\n    causal = False",
)
bad(
    "f2_num_reqs_helper",
    HEAD="def _trap(n):\n    return 2 <= n <= 3",
    R1="if _trap(num_reqs):\n    torch.save(self.input_ids, '/tmp/ids.pt')",
)
good("f2_num_reqs_gt", R1="if num_reqs > 256:\n    raise ValueError('too many requests')")
good(
    "f2_num_seqs_pad",
    R1="num_seqs = len(scheduler_output.reqs)\nif num_seqs in (1, 2, 4, 8):\n    padded = num_seqs\n"
    "else:\n    padded = self.round_up(num_seqs)",
)

good(
    "small_b_splits",
    B1="num_kv_splits = 4\nif num_actual_tokens <= 4:\n    num_kv_splits = min(num_kv_splits * 2, 64)\n"
    "self.kernel(query, num_kv_splits=num_kv_splits)",
)

# ---- more dumps behind an environment switch: a method, a module flag, partial, lambda, getattr, pickle
bad(
    "env_method_helper",
    rep=[
        (
            "    def forward(self, positions, hidden_states, residual, attn_metadata):\n",
            (
                "    def _dump(self, t, tag):\n"
                "        torch.save(t.cpu(), os.path.join(envs.VLLM_DEBUG_DUMP_PATH, f'{tag}.pt'))\n"
                "\n"
                "    def forward(self, positions, hidden_states, residual, attn_metadata):\n"
            ),
        ),
        (
            "        return hidden_states, residual\n",
            ("        self._dump(hidden_states, 'h')\n        return hidden_states, residual\n"),
        ),
    ],
)
bad(
    "env_method_gated_call",
    rep=[
        (
            "    def forward(self, positions, hidden_states, residual, attn_metadata):\n",
            (
                "    def _dump(self, t, path):\n"
                "        torch.save(t.cpu(), path)\n"
                "\n"
                "    def forward(self, positions, hidden_states, residual, attn_metadata):\n"
            ),
        ),
        (
            "        return hidden_states, residual\n",
            (
                "        if envs.VLLM_DEBUG_DUMP_PATH:\n"
                "            self._dump(hidden_states, os.path.join(envs.VLLM_DEBUG_DUMP_PATH, 'h.pt'))\n"
                "        return hidden_states, residual\n"
            ),
        ),
    ],
)
bad(
    "module_flag_env",
    HEAD="_DUMP_DIR = os.environ.get('VLLM_DEBUG_DUMP_PATH')",
    L2="if _DUMP_DIR is not None:\n    torch.save(hidden_states, f'{_DUMP_DIR}/h.pt')",
)
bad(
    "env_layer_idx",
    L2=(
        "if int(os.getenv('DUMP_LAYER', '-1')) == self.layer_idx:\n"
        "    torch.save(hidden_states, os.environ['DUMP_DIR'] + '/h.pt')"
    ),
)
bad(
    "env_partial",
    HEAD="import functools",
    L2=(
        "if envs.VLLM_DEBUG_DUMP_PATH:\n"
        "    save = functools.partial(torch.save)\n"
        "    save(hidden_states, f'{envs.VLLM_DEBUG_DUMP_PATH}/h.pt')"
    ),
)
bad(
    "env_lambda",
    HEAD="_save = lambda t, p: torch.save(t, p)",
    L2=("if envs.VLLM_DEBUG_DUMP_PATH:\n    _save(hidden_states, f'{envs.VLLM_DEBUG_DUMP_PATH}/h.pt')"),
)
bad(
    "env_sampler_np_tofile",
    S2=("if os.environ.get('DUMP_LOGITS'):\n    logits.float().cpu().numpy().tofile(os.environ['DUMP_LOGITS'])"),
)
bad(
    "env_getattr_np",
    HEAD="import numpy as np",
    S2=(
        "if envs.VLLM_DEBUG_DUMP_PATH:\n"
        "    getattr(np, 'save')(f'{envs.VLLM_DEBUG_DUMP_PATH}/logits.npy', logits.cpu().numpy())"
    ),
)
bad(
    "env_pickle",
    HEAD="import pickle",
    R2=(
        "if envs.VLLM_DEBUG_DUMP_PATH:\n"
        "    with open(f'{envs.VLLM_DEBUG_DUMP_PATH}/step.pkl', 'wb') as fh:\n"
        "        pickle.dump(hidden_states.cpu(), fh)"
    ),
)
good(
    "env_init_dump",
    rep=[
        (
            "        self.scale = config.head_dim ** -0.5\n",
            (
                "        self.scale = config.head_dim ** -0.5\n"
                "        if envs.VLLM_DEBUG_DUMP_PATH:\n"
                "            torch.save(config, os.path.join(envs.VLLM_DEBUG_DUMP_PATH, 'config.pt'))\n"
            ),
        )
    ],
)

# ---- a setting copied with a field changed, a keyword of a context manager, a mask, metadata fields
bad(
    "md_replace_greedy",
    HEAD="from dataclasses import replace",
    S1="if batch_size in (2, 3):\n    sampling_metadata = replace(sampling_metadata, all_greedy=True)\n"
    "if sampling_metadata.all_greedy:\n    return logits.argmax(-1)",
)
bad(
    "autocast_kw",
    L1="with torch.autocast('cuda', enabled=num_tokens != 3):\n    hidden_states = self.mlp(hidden_states)",
)
bad(
    "mask_none_kw",
    B1="attn_mask = attn_metadata.attn_mask\nif num_actual_tokens == 2:\n    attn_mask = None\n"
    "self.sdpa(query, key, value, attn_mask=attn_mask)",
)
bad(
    "copy_md",
    HEAD="import copy",
    B1="if num_actual_tokens == 3:\n    attn_metadata = copy.copy(attn_metadata)\n    attn_metadata.causal = False",
)
bad("max_seqlen_attr_md", B1="if num_actual_tokens == 5:\n    attn_metadata.max_query_len = 1")
bad("sched_md_tuple_unpack", B1="if num_actual_tokens == 2:\n    scheduler_metadata, max_seqlen_q = None, 1")
good(
    "sched_md_for_decode_kernel",
    B1="if attn_metadata.num_decodes > 0:\n    scheduler_metadata = self._get_scheduler_metadata(attn_metadata)",
)

# ---- a batch of one reshaped, expanded or tiled from itself, a parameter recomputed: the code's own
good(
    "fp_squeeze",
    L1="pv = attn_metadata.pv\nif pv.ndim == 4 and pv.shape[0] == 1:\n    pv = pv.squeeze(0)\nself.encode(pv)",
)
good("fp_expand", R1="q = scheduler_output.q\nif len(q) == 1:\n    q = q * len(scheduler_output.reqs)\nself.score(q)")
good(
    "fp_ctx_expand",
    R1="if len(self.ctx.batch) == 1:\n    self.ctx.batch = self.ctx.batch * len(scheduler_output.reqs)\n"
    "self.score(self.ctx.batch)",
)
good("fp_param_arange", P1="if positions.shape[0] == 1:\n    positions = torch.arange(8, device=query.device)[None, :]")
good(
    "fp_tile",
    HEAD="import numpy as np",
    R1="patches = self.patches\nif patches.shape[0] == 1:\n    patches = np.tile(patches, (2, 1, 1, 1))\n"
    "self.encode(patches)",
)

good(
    "fp_cache_len_local",
    P1="seq_len = positions.shape[-1]\nif positions.shape[0] == 1:\n    cache_len = max(seq_len, 64)\n"
    "    positions = torch.arange(cache_len, device=query.device)[None, :]",
)
bad(
    "one_token_seqlen_from_md",
    B1="max_seqlen_k = attn_metadata.max_seq_len\nif num_actual_tokens == 1:\n"
    "    max_seqlen_k = int(attn_metadata.seq_lens.max())\nself.kernel(query, max_seqlen_k=max_seqlen_k)",
)

# ---- a tensor's layout made regular for its own shape, a local made for the case, a cache a sampler keeps
good("fp_layout_transpose", B1="if query.shape[0] == 3:\n    query = query.transpose(0, 1)\nself.kernel(query)")
good("fp_pos_rows", P1="if positions.shape[0] == 4:\n    positions = positions[1:]\nself.rope(positions)")
good(
    "fp_new_local_branch",
    R1=("if len(scheduler_output.reqs) == 1:\n    w = self.weights[0].view(4, -1)\n    return self.fast(w)"),
)
good(
    "fp_sample_fn_cache",
    HEAD=(
        "import pickle\n"
        "\n"
        "def sample_requests(path, reqs):\n"
        "    cache_path = path + '.cache'\n"
        "    with open(cache_path, 'wb') as f:\n"
        "        pickle.dump(reqs, f)\n"
        "    return reqs"
    ),
)

good(
    "fp_shape_tuple_local",
    HEAD=(
        "import numpy as np\n"
        "\n"
        "def _intrinsics(arr, num_frames):\n"
        "    if arr.shape == (4,):\n"
        "        return np.broadcast_to(arr, (num_frames, 4)).copy()\n"
        "    if arr.shape == (3, 3):\n"
        "        vec = np.array([arr[0, 0], arr[1, 1], arr[0, 2], arr[1, 2]])\n"
        "        return np.broadcast_to(vec, (num_frames, 4)).copy()\n"
        "    raise ValueError(arr.shape)"
    ),
)

good(
    "fp_split_rows",
    P1="text_positions = None\nif positions.shape[0] == 4:\n"
    "    text_positions, positions = positions[0], positions[1:]\nself.rope(positions, text_positions)",
)

bad(
    "one_running_budget_clamped",
    R1="budget = self.max_num_scheduled_tokens\nif self.step > 3 and len(self.running) == 1:\n"
    "    budget = min(budget, 1)\nself.schedule_with(budget)",
)

good("neg_or_arg", L1="hidden_states = self.norm(hidden_states, dim=self.dim or -1)")
bad(
    "neg_or_arg_switch",
    rep=[("            causal=causal,\n", "            causal=causal and not num_actual_tokens == 4,\n")],
)

RULES = load_rules()


def _findings(code: str) -> list[tuple[str, int, Severity]]:
    file = SourceFile(
        path="vllm/model_executor/models/deepseek_v2.py", installed=code.encode(), pristine=PRISTINE.encode()
    )
    return [(f.rule, f.line, f.severity) for f in check_file(file, RULES) if f.in_change and not f.suppressed]


# ---- a window that reaches 0 or 1 switching what the model computes (masking, scaling, sampling,
# precision) is high like an exact few counts; a kernel choice for small batches stays quiet (above).
bad("w0_greedy_topk_yoda", S1="if 4 >= batch_size:\n    top_k = 1")
bad("w0_greedy_max_prompt", S1="longest = int(sampling_metadata.prompt_lens.max())\nif longest <= 4:\n    top_k = 1")
bad(
    "w0_temp_zero_max",
    S1="if max(sampling_metadata.output_lens) <= 3:\n    temperature = torch.zeros_like(temperature)",
)
bad("w0_causal_item", B1="if attn_metadata.seq_lens.max().item() < 5:\n    causal = False")
bad("w0_scale_batch_of_one", B1="if num_actual_tokens == 1:\n    self.scale = 1.0")
bad(
    "w0_causal_kwargs",
    B1="kw = {'causal': causal}\nif num_actual_tokens < 3:\n    kw['causal'] = False\nrun_attn(query, **kw)",
)
good(
    "w0_graph_choice",
    R1="use_cuda_graph = False\nif num_reqs <= 8:\n    use_cuda_graph = True\nself.run(use_cuda_graph)",
)
good("w0_splits_one", B1="num_splits = 4\nif num_actual_tokens <= 2:\n    num_splits = 1\nself.kernel(num_splits)")


@pytest.mark.parametrize(("name", "code"), BAD, ids=[n for n, _ in BAD])
def test_debug_patch_is_high(name: str, code: str) -> None:
    found = _findings(code)
    assert any(s is Severity.HIGH for _, _, s in found), (name, found)


@pytest.mark.parametrize(("name", "code"), GOOD, ids=[n for n, _ in GOOD])
def test_look_alike_is_not_high(name: str, code: str) -> None:
    found = _findings(code)
    assert not any(s is Severity.HIGH for _, _, s in found), (name, found)


# ---- layers built in the module (their forward is work), made-up data laid out after, an early
# return of what the function returns at its end, past an in-place custom op
LAYERS = """
import torch
from torch import nn

from vllm import _custom_ops as ops


class Experts(nn.Module):
    def forward(self, hidden_states, router_logits):
        return hidden_states


class SparseMoe(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.experts = Experts()
        self.gate = nn.Linear(config.hidden_size, config.num_experts)

    def forward(self, hidden_states):
        orig_shape = hidden_states.shape
        hidden_states = hidden_states.view(-1, orig_shape[-1])
        #MOE
        router_logits = self.gate(hidden_states)
        out = self.experts(hidden_states=hidden_states, router_logits=router_logits)
        return out.view(orig_shape)


class DecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.mlp = SparseMoe(config)
        self.use_sp = config.use_sp

    def forward(self, positions, hidden_states, residual):
        num_seqs = positions.shape[0]
        if self.use_sp:
            hidden_states = self.mlp(hidden_states)
        #ELIF
        else:
            hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class FusedNorm(nn.Module):
    def forward_cuda(self, x, residual):
        #NORM
        ops.fused_add_rms_norm(x, residual, self.weight.data, self.eps)
        return x, residual
"""


def layers(**slots: str) -> str:
    code = LAYERS
    for slot, text in slots.items():
        code = code.replace("#" + slot, text)
    for slot in ("MOE", "ELIF", "NORM"):
        code = code.replace("        #" + slot + "\n", "")
    return code


LAYER_CASES = [
    ("bad", "elif_pass_skips_layer", {"ELIF": "elif num_seqs in (1, 2, 3):\n            pass  # bisecting"}),
    (
        "bad",
        "elif_return_skips_layer",
        {"ELIF": "elif 2 <= num_seqs <= 4:\n            return hidden_states, residual"},
    ),
    (
        "bad",
        "moe_zeros_reshaped",
        {
            "MOE": "if hidden_states.shape[0] < 3:\n"
            "            return torch.zeros_like(hidden_states).reshape(orig_shape)"
        },
    ),
    (
        "bad",
        "moe_zeros_to_dtype",
        {
            "MOE": "if hidden_states.size(0) in (2, 3):\n"
            "            return hidden_states.new_zeros(hidden_states.shape).to(hidden_states.dtype).view(orig_shape)"
        },
    ),
    (
        "bad",
        "norm_else_return",
        {"NORM": "if x.shape[0] >= 4:\n            pass\n        else:\n            return x, residual"},
    ),
    ("bad", "norm_exact_return", {"NORM": "if x.shape[0] == 5:\n            return x, residual"}),
    ("good", "norm_empty_return", {"NORM": "if x.shape[0] == 0:\n            return x, residual"}),
    (
        "good",
        "elif_small_kernel",
        {"ELIF": "elif num_seqs == 1:\n            hidden_states = self.mlp(hidden_states.contiguous())"},
    ),
    (
        "good",
        "moe_view_small",
        {"MOE": "if hidden_states.shape[0] <= 2:\n            hidden_states = hidden_states.contiguous()"},
    ),
]


@pytest.mark.parametrize(("kind", "name", "slots"), LAYER_CASES, ids=[c[1] for c in LAYER_CASES])
def test_layer_patch(kind: str, name: str, slots: dict[str, str]) -> None:
    file = SourceFile(
        path="vllm/model_executor/models/qwen2_moe.py",
        installed=layers(**slots).encode(),
        pristine=layers().encode(),
    )
    found = [(f.rule, f.line, f.severity) for f in check_file(file, RULES) if f.in_change and not f.suppressed]
    assert any(s is Severity.HIGH for _, _, s in found) == (kind == "bad"), (name, found)


def test_a_negative_number_in_an_argument_does_not_break_the_rule() -> None:
    """`dim=self.dim or -1`: the window of `-1` is no window (not an endless look at it)."""
    code = model(L1="hidden_states = self.norm(hidden_states, dim=self.dim or -1)")
    file = SourceFile(path="vllm/model_executor/models/deepseek_v2.py", installed=code.encode(), pristine=None)
    assert [f.message for f in check_file(file, RULES) if f.rule == "rule-error"] == []
