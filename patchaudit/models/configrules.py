"""Config rules: what a changed key of a model's config means for serving, with a default severity.

They join the hazard rules in `patchaudit rules list|explain`. Each judges one ConfigChange by its
file and key path; the first rule that matches a change reports it. Examples are config pairs: the
INVALID ones must be flagged (by this rule), the VALID ones must not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from patchaudit.models.configdiff import diff_config
from patchaudit.report import ConfigChange, Severity

QUANT_SECTIONS = {"quantization_config", "quantization", "compression_config", "quant_config"}
CONTEXT_KEYS = {"max_position_embeddings", "max_seq_len", "seq_length", "model_max_length", "max_sequence_length",
                "sliding_window", "n_positions", "max_model_len"}  # fmt: skip
TOKEN_KEYS = {"eos_token_id", "bos_token_id", "pad_token_id", "eos_token", "bos_token", "pad_token", "unk_token"}


def _parts(key: str) -> list[str]:
    return [p.strip('"') for p in re.split(r"[.\[\]]+", key) if p and not p.isdigit()]


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigExample:
    file: str
    before: str
    after: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigRule:
    ID: str
    SEVERITY: Severity
    MESSAGE: str
    EXPLANATION: str
    matches: Callable[[str, str], bool]  # (file name, key path) -> bool
    VALID: Sequence[ConfigExample] = ()
    INVALID: Sequence[ConfigExample] = ()


def _name(file: str) -> str:
    return file.rsplit("/", 1)[-1]


def _quant(file: str, key: str) -> bool:
    parts = _parts(key)
    return (
        _name(file).startswith(("hf_quant_config", "quant_config", "quantize_config"))
        or any(p in QUANT_SECTIONS for p in parts)
        or bool(parts and parts[-1] in {"kv_cache_quant_algo", "kv_cache_dtype"})
    )


def _rope(file: str, key: str) -> bool:
    return any(p.startswith("rope_") or p in ("rotary_emb_base", "partial_rotary_factor") for p in _parts(key))


def _context(file: str, key: str) -> bool:
    parts = _parts(key)
    return bool(parts) and parts[-1] in CONTEXT_KEYS


def _dtype(file: str, key: str) -> bool:
    parts = _parts(key)
    return bool(parts) and parts[-1] in ("torch_dtype", "dtype") and _name(file) == "config.json"


def _template(file: str, key: str) -> bool:
    return "chat_template" in _parts(key) or _name(file).startswith("chat_template")


def _tokens(file: str, key: str) -> bool:
    parts = _parts(key)
    return bool(parts) and (parts[-1] in TOKEN_KEYS or parts[0] == "added_tokens_decoder")


def _generation(file: str, key: str) -> bool:
    return _name(file) == "generation_config.json"


def _any(file: str, key: str) -> bool:
    return True


FP8 = '{"quantization_config": {"quant_method": "fp8", "kv_cache_quant_algo": "FP8"}}'
RULES: tuple[ConfigRule, ...] = (
    ConfigRule(
        ID="config-quantization",
        SEVERITY=Severity.HIGH,
        MESSAGE="a quantization setting of the checkpoint was removed or changed",
        EXPLANATION="""\
The weights were quantized for these settings (quant method, KV-cache quantization, block sizes,
modules left out). Removing `kv_cache_quant_algo` makes the engine keep the KV cache in fp16/bf16:
memory use and numerics change silently; changing the method makes it read the weights wrong.""",
        matches=_quant,
        INVALID=(
            ConfigExample(file="config.json", before=FP8, after='{"quantization_config": {"quant_method": "fp8"}}'),
            ConfigExample(
                file="hf_quant_config.json",
                before='{"quantization": {"kv_cache_quant_algo": "FP8", "quant_algo": "FP8"}}',
                after='{"quantization": {"quant_algo": "FP8"}}',
            ),
        ),
        VALID=(ConfigExample(file="config.json", before=FP8, after=FP8),),
    ),
    ConfigRule(
        ID="config-rope",
        SEVERITY=Severity.HIGH,
        MESSAGE="rotary position settings (rope scaling or theta) were changed",
        EXPLANATION="""\
The model learned positions with these rotary settings; a different `rope_scaling` or `rope_theta`
changes every attention score, and output quality degrades without an error.""",
        matches=_rope,
        INVALID=(
            ConfigExample(
                file="config.json",
                before='{"rope_scaling": {"type": "yarn", "factor": 4.0}}',
                after='{"rope_scaling": {"type": "yarn", "factor": 8.0}}',
            ),
            ConfigExample(file="config.json", before='{"rope_theta": 1000000}', after='{"rope_theta": 10000}'),
        ),
        VALID=(ConfigExample(file="config.json", before='{"rope_theta": 1000000}', after='{"rope_theta": 1000000}'),),
    ),
    ConfigRule(
        ID="config-context-length",
        SEVERITY=Severity.MEDIUM,
        MESSAGE="the context length the checkpoint declares was changed",
        EXPLANATION="""\
`max_position_embeddings` and its kin size the engine's context window. Raising it past what the
model was trained for serves requests it answers badly; lowering it rejects requests that worked.""",
        matches=_context,
        INVALID=(
            ConfigExample(
                file="config.json",
                before='{"max_position_embeddings": 32768}',
                after='{"max_position_embeddings": 131072}',
            ),
        ),
        VALID=(ConfigExample(file="config.json", before='{"vocab_size": 1}', after='{"vocab_size": 1}'),),
    ),
    ConfigRule(
        ID="config-dtype",
        SEVERITY=Severity.MEDIUM,
        MESSAGE="the checkpoint's torch_dtype was changed",
        EXPLANATION="""\
`torch_dtype` picks the dtype the engine loads the weights in when it is not told otherwise: a
bf16 model loaded as fp16 can overflow in activations.""",
        matches=_dtype,
        INVALID=(
            ConfigExample(file="config.json", before='{"torch_dtype": "bfloat16"}', after='{"torch_dtype": "float16"}'),
        ),
        VALID=(
            ConfigExample(
                file="generation_config.json", before='{"torch_dtype": "bfloat16"}', after='{"torch_dtype": "float16"}'
            ),
        ),
    ),
    ConfigRule(
        ID="config-chat-template",
        SEVERITY=Severity.MEDIUM,
        MESSAGE="the chat template was edited",
        EXPLANATION="""\
The chat template turns messages into the prompt the model was tuned on. An edited template
(a dropped system turn, a changed stop marker) changes every answer without any error.""",
        matches=_template,
        INVALID=(
            ConfigExample(
                file="tokenizer_config.json",
                before='{"chat_template": "{{ messages }}"}',
                after='{"chat_template": "{{ messages }}\\n"}',
            ),
        ),
        VALID=(ConfigExample(file="tokenizer_config.json", before='{"x": 1}', after='{"x": 1}'),),
    ),
    ConfigRule(
        ID="config-special-tokens",
        SEVERITY=Severity.MEDIUM,
        MESSAGE="special tokens (end, start, padding) were changed",
        EXPLANATION="""\
The end-of-sequence and padding tokens decide where generation stops: a changed id makes answers
run on, or stop early.""",
        matches=_tokens,
        INVALID=(ConfigExample(file="config.json", before='{"eos_token_id": 2}', after='{"eos_token_id": [2, 7]}'),),
        VALID=(ConfigExample(file="config.json", before='{"eos_token_id": 2}', after='{"eos_token_id": 2}'),),
    ),
    ConfigRule(
        ID="config-generation",
        SEVERITY=Severity.LOW,
        MESSAGE="a default of generation_config.json was changed",
        EXPLANATION="""\
Sampling defaults (temperature, top_p, repetition penalty) apply to every request that does not set
them: answers change, nothing breaks.""",
        matches=_generation,
        INVALID=(
            ConfigExample(file="generation_config.json", before='{"temperature": 0.6}', after='{"temperature": 1.0}'),
        ),
        VALID=(ConfigExample(file="config.json", before='{"temperature": 0.6}', after='{"temperature": 1.0}'),),
    ),
    ConfigRule(
        ID="config-changed",
        SEVERITY=Severity.LOW,
        MESSAGE="a key of a model config was changed",
        EXPLANATION="""\
Any other key of a JSON config (config.json, tokenizer_config.json, ...) that differs from the
downloaded file. The file is drift either way; this names the key.""",
        matches=_any,
        INVALID=(ConfigExample(file="config.json", before='{"vocab_size": 1}', after='{"vocab_size": 2}'),),
        VALID=(ConfigExample(file="config.json", before='{"vocab_size": 1}', after='{"vocab_size": 1}'),),
    ),
)

SAFETENSORS_RULE = ConfigRule(
    ID="safetensors-header",
    SEVERITY=Severity.HIGH,
    MESSAGE="a safetensors shard's header does not parse or its offsets do not fit the file",
    EXPLANATION="""\
Checked on every scan without reading the weights: the 8-byte header length, the JSON header, and
that the tensors' data_offsets tile the data exactly. A truncated copy or a hand-edited header
fails here before the engine fails on it at load time.""",
    matches=lambda file, key: False,
)


def rule_for(change: ConfigChange) -> ConfigRule:
    for rule in RULES:
        if rule.matches(change.file, change.key):
            return rule
    return RULES[-1]


def catalog() -> tuple[ConfigRule, ...]:
    return (*RULES, SAFETENSORS_RULE)


def example_problems() -> list[str]:
    """Every example that its rule does not judge as it says (empty when the pack is consistent)."""
    problems = []
    for rule in RULES:
        for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID)):
            for n, ex in enumerate(examples):
                changes = diff_config(ex.file, ex.before.encode(), ex.after.encode()) or []
                flagged = any(rule_for(c) is rule for c in changes)
                if flagged != (kind == "invalid"):
                    problems.append(f"{rule.ID} {kind.upper()}[{n}]: {'not ' if kind == 'invalid' else ''}flagged")
    return problems
