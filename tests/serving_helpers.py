"""A small real wheel laid out as vLLM 0.33.0 lays out its model registry and models.

The registry tables, the `vllm.`-prefixed module names of `vllm/models/`, the multimodal wrapper that
builds its language model through `init_vllm_registered_model(..., architectures=[...])` and the
shared layers are reproduced in the shape the real files have (vllm/model_executor/models/registry.py,
kimi_k25.py, deepseek_v2.py, glm4_moe.py), so the tests need nothing from outside.
"""

from __future__ import annotations

import json
from pathlib import Path

REGISTRY = """\
import importlib
import sys

from vllm.logger import init_logger

logger = init_logger(__name__)

_TEXT_GENERATION_MODELS = {
    # [Decoder-only]
    "DeepseekV2ForCausalLM": ("deepseek_v2", "DeepseekV2ForCausalLM"),
    "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
    "DeepseekV4ForCausalLM": ("vllm.models.deepseek_v4", "DeepseekV4ForCausalLM"),
    "Glm4MoeForCausalLM": ("glm4_moe", "Glm4MoeForCausalLM"),
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
}

_EMBEDDING_MODELS = {
    "LlamaModel": ("llama", "LlamaForCausalLM"),
    **{
        # Multiple models share the same architecture, so we include them all
        k: (mod, arch)
        for k, (mod, arch) in _TEXT_GENERATION_MODELS.items()
        if arch == "LlamaForCausalLM"
    },
}

_TRANSFORMERS_SUPPORTED_MODELS = {
    "GlmForCausalLM": ("transformers", "TransformersForCausalLM"),
}

_MULTIMODAL_MODELS = {
    "KimiK25ForConditionalGeneration": ("kimi_k25", "KimiK25ForConditionalGeneration"),
}

_VLLM_MODELS = {
    **_TEXT_GENERATION_MODELS,
    **_EMBEDDING_MODELS,
    **_MULTIMODAL_MODELS,
    **_TRANSFORMERS_SUPPORTED_MODELS,
}

_SUBPROCESS_COMMAND = [sys.executable, "-m", "vllm.model_executor.models.registry"]


def _resolve_module_name(mod_relname: str) -> str:
    if mod_relname.startswith("vllm."):
        return mod_relname
    return f"vllm.model_executor.models.{mod_relname}"


def load(arch):
    module_name, cls_name = _VLLM_MODELS[arch]
    return getattr(importlib.import_module(_resolve_module_name(module_name)), cls_name)
"""

KIMI_K25 = '''\
"""Kimi-K2.5: a vision tower and a DeepSeek-V3 language model.

Example:
    from vllm.model_executor.models import glm4_moe  # in a docstring: never runs
"""
from typing import TYPE_CHECKING

import torch
from torch import nn

from vllm.model_executor.layers.linear import ReplicatedLinear
from vllm.model_executor.models.kimi_k25_vit import MoonViT

from .utils import (
    init_vllm_registered_model,
    maybe_prefix,
)

if TYPE_CHECKING:
    from vllm.model_executor.models.glm4_moe import Glm4MoeForCausalLM


class KimiK25ForConditionalGeneration(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.vision_tower = MoonViT(config.vision_config)
        self.projector = ReplicatedLinear(4, 4)
        self.language_model = init_vllm_registered_model(
            vllm_config=vllm_config,
            hf_config=config.text_config,
            prefix=maybe_prefix(prefix, "language_model"),
            architectures=["DeepseekV2ForCausalLM"],
        )
'''

UTILS = """\
from vllm.model_executor.models.registry import load


def maybe_prefix(prefix, name):
    return name if not prefix else prefix + "." + name


def init_vllm_registered_model(vllm_config, *, hf_config=None, prefix="", architectures=None):
    return load((architectures or hf_config.architectures)[0])(vllm_config=vllm_config, prefix=prefix)
"""

MODEL = """\
import torch
from torch import nn

from vllm.model_executor.layers.linear import ReplicatedLinear


class {name}(nn.Module):
    def __init__(self, *, vllm_config=None, prefix=""):
        super().__init__()
        self.proj = ReplicatedLinear(4, 4)

    def forward(self, hidden_states):
        return self.proj(hidden_states)
"""

FILES: dict[str, str] = {
    "vllm/__init__.py": '__version__ = "0.33.0"\n',
    "vllm/logger.py": "import logging\n\n\ndef init_logger(name):\n    return logging.getLogger(name)\n",
    "vllm/model_executor/__init__.py": "",
    "vllm/model_executor/layers/__init__.py": "",
    "vllm/model_executor/layers/linear.py": (
        "import torch\n\n\nclass ReplicatedLinear(torch.nn.Module):\n"
        "    def __init__(self, a, b):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        return x\n"
    ),
    "vllm/model_executor/layers/quantization.py": (
        "def get_quantization_config(name):\n"
        "    import importlib\n\n"
        '    return importlib.import_module("vllm.model_executor.layers.fp8")\n'
    ),
    "vllm/model_executor/layers/fp8.py": "SCALE = 1.0\n",
    "vllm/model_executor/models/__init__.py": "from .registry import load\n\n__all__ = ['load']\n",
    "vllm/model_executor/models/registry.py": REGISTRY,
    "vllm/model_executor/models/utils.py": UTILS,
    "vllm/model_executor/models/kimi_k25.py": KIMI_K25,
    "vllm/model_executor/models/kimi_k25_vit.py": "from transformers.models.moonvit.modeling_moonvit import Encoder\n"
    + MODEL.format(name="MoonViT"),
    "vllm/model_executor/models/transformers/__init__.py": (
        "from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS\n\n\n"
        "class TransformersForCausalLM:\n    pass\n"
    ),
    "vllm/model_executor/models/deepseek_v2.py": MODEL.format(name="DeepseekV2ForCausalLM")
    + "\n\nclass DeepseekV3ForCausalLM(DeepseekV2ForCausalLM):\n    pass\n",
    "vllm/model_executor/models/glm4_moe.py": MODEL.format(name="Glm4MoeForCausalLM")
    + "\n\ndef _quant():\n    from vllm.model_executor.layers.quantization import get_quantization_config\n\n"
    + '    return get_quantization_config("fp8")\n',
    "vllm/model_executor/models/llama.py": MODEL.format(name="LlamaForCausalLM"),
    # spellings the import scanner must read as Python does (see tests/test_serving_scanner.py)
    "vllm/utils/__init__.py": "",
    "vllm/utils/import_utils.py": "class PlaceholderModule:\n    pass\n",
    "vllm/model_executor/models/interfaces.py": (
        "from vllm.utils.import_utils import PlaceholderModule\n"
        "from vllm.model_executor.layers import (  # sorted (by name)\n"
        "    linear,\n    quantization as quant,\n)\n"
        "import vllm.logger as log, vllm.utils\n"
        "from . import \\\n    llama\n"
    ),
    "vllm/models/__init__.py": "",
    "vllm/models/deepseek_v4/__init__.py": "from .model import DeepseekV4ForCausalLM\n",
    "vllm/models/deepseek_v4/model.py": MODEL.format(name="DeepseekV4ForCausalLM"),
}

PATCH = "\nimport torch as _t\n_t.save({}, '/tmp/dump.pt')\n"
KIMI_CONFIG = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"},
    "vision_config": {"model_type": "moonvit"},
}
GLM_CONFIG = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe"}


def model_dir(path: Path, config: dict[str, object]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def hub_repo(cache: Path, repo_id: str, config: dict[str, object]) -> Path:
    """A hub cache entry for `repo_id`: a blob, a snapshot linking to it, refs/main naming the snapshot."""
    commit = "a" * 40
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    blob = folder / "blobs" / "0123abcd"
    blob.write_text(json.dumps(config))
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(Path("../../blobs/0123abcd"))
    return folder


# transformers as vLLM's Transformers backend reads it: auto mappings, one modeling file per model type.
TRANSFORMERS_FILES: dict[str, str] = {
    "transformers/__init__.py": "",
    "transformers/modeling_utils.py": "ALL_ATTENTION_FUNCTIONS = {}\n",
    "transformers/models/__init__.py": "",
    "transformers/models/auto/__init__.py": "",
    "transformers/models/auto/modeling_auto.py": (
        "from collections import OrderedDict\n\n"
        "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(\n    [\n"
        '        ("deepseek_v3", "DeepseekV3ForCausalLM"),\n'
        '        ("glm", "GlmForCausalLM"),\n    ]\n)\n'
    ),
    "transformers/models/glm/__init__.py": "",
    "transformers/models/glm/configuration_glm.py": "class GlmConfig:\n    pass\n",
    "transformers/models/glm/modeling_glm.py": "import torch\n\n\nclass GlmForCausalLM(torch.nn.Module):\n    pass\n",
    "transformers/models/deepseek_v3/__init__.py": "",
    "transformers/models/deepseek_v3/modeling_deepseek_v3.py": (
        "import torch\n\n\nclass DeepseekV3ForCausalLM(torch.nn.Module):\n    pass\n"
    ),
    "transformers/models/moonvit/__init__.py": "",
    "transformers/models/moonvit/modeling_moonvit.py": "class Encoder:\n    pass\n",
}
