"""Guards bypassed by state the environment sets, moved into another module, or weakened in place.

Engine-level: each case is one installed module checked against its pristine bytes. A guard the
pristine module had is reported high when the patch makes it run only when an environment variable
is absent, turns it into a warning, loosens it to always pass or makes its exception one a quiet
handler around it catches; a guard rewritten, or moved into a helper, stays quiet.
"""

from __future__ import annotations

import textwrap

import pytest

from patchaudit.hazards import SourceFile, check_file, load_rules
from patchaudit.report import Severity

P = """
import os
import functools
import logging

import torch

logger = logging.getLogger(__name__)


class MLAAttention:
    def __init__(self, config, head_size):
        self.config = config
        self.head_size = head_size

    def forward(self, q, k):
        if self.head_size not in (64, 128, 192):
            raise ValueError(f"unsupported head size {self.head_size}")
        out = q @ k.T
        return out

    def load(self, w):
        try:
            w = w.contiguous()
            if w.dtype == torch.float8_e4m3fn:
                raise NotImplementedError("fp8 weights")
        except ImportError:
            pass
        return w

    def check_features(self, alibi_slopes, sliding_window):
        unsupported_features = [alibi_slopes, sliding_window]
        if any(unsupported_features):
            raise NotImplementedError("alibi or sliding window")

    def check_kv(self, kv_dtype):
        supported = kv_dtype in ("auto", "fp8")
        if not supported:
            raise ValueError(f"kv cache dtype {kv_dtype}")
"""
KV = "        if not supported:\n"
GUARD = """        if self.head_size not in (64, 128, 192):
            raise ValueError(f"unsupported head size {self.head_size}")
"""
INIT = "        self.head_size = head_size\n"


def R(*pairs: str) -> str:
    out = P
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert old in out, old
        out = out.replace(old, new, 1)
    return out


def init(line: str) -> tuple[str, str]:
    return INIT, INIT + "        " + line + "\n"


def before_guard(code: str) -> tuple[str, str]:
    return GUARD, textwrap.indent(textwrap.dedent(code), "        ") + GUARD


def wrap_guard(test: str) -> tuple[str, str]:
    return GUARD, f"        if {test}:\n" + textwrap.indent(GUARD, "    ")


# -- a guard that now runs only when an environment variable the patch added is absent ------
ENV: dict[str, str] = {
    "init_attr_eq": R(
        *init('self.skip_check = os.environ.get("MLA_SKIP") == "1"'),
        *before_guard("if self.skip_check:\n    return q @ k.T\n"),
    ),
    "init_attr_wrap_not": R(
        *init('self.skip_check = os.environ.get("MLA_SKIP") == "1"'), *wrap_guard("not self.skip_check")
    ),
    "init_attr_bool_int": R(
        *init('self._fast = bool(int(os.environ["MLA_FAST"]))'), *before_guard("if self._fast:\n    return q @ k.T\n")
    ),
    "init_getenv_in": R(
        *init('self.relaxed = os.getenv("MLA_RELAXED", "").lower() in ("1", "true")'),
        *before_guard("if self.relaxed:\n    out = q @ k.T\n    return out\n"),
    ),
    "config_attr": R(
        *init('self.config.skip_head_check = os.environ.get("MLA_SKIP") is not None'),
        *before_guard("if self.config.skip_head_check:\n    return q @ k.T\n"),
    ),
    "module_global_getenv": R(
        "logger = logging", '_SKIP = os.getenv("MLA_SKIP")\nlogger = logging', *wrap_guard("not _SKIP")
    ),
    "module_global_envs": R(
        "import torch\n",
        "import torch\nimport vllm.envs as envs\n",
        "logger = logging",
        "SKIP_HEAD = envs.VLLM_SKIP_HEAD_CHECK\nlogger = logging",
        *before_guard("if SKIP_HEAD:\n    return q @ k.T\n"),
    ),
    "cached_flag_fn": R(
        "class MLAAttention",
        "@functools.cache\ndef _skip_checks():\n"
        '    value = os.environ.get("MLA_SKIP", "0")\n    return value == "1"\n\n\nclass MLAAttention',
        *before_guard("if _skip_checks():\n    return q @ k.T\n"),
    ),
    "lru_flag_fn_wrap": R(
        "class MLAAttention",
        "@functools.lru_cache(None)\ndef checks_on():\n"
        '    return "MLA_NO_CHECK" not in os.environ\n\n\nclass MLAAttention',
        *wrap_guard("checks_on()"),
    ),
    "env_in_guard_and": R(
        "if self.head_size not in (64, 128, 192):",
        'if not os.environ.get("MLA_SKIP") and self.head_size not in (64, 128, 192):',
    ),
    "property_flag": R(
        "    def forward(self, q, k):",
        "    @property\n    def skip(self):\n"
        '        return os.getenv("MLA_SKIP") == "1"\n\n    def forward(self, q, k):',
        *before_guard("if self.skip:\n    return q @ k.T\n"),
    ),
    "local_then_wrap": R(
        GUARD,
        '        strict = os.environ.get("MLA_STRICT", "0") == "1"\n'
        "        if strict:\n" + textwrap.indent(GUARD, "    "),
    ),
    "else_branch": R(
        GUARD,
        '        if os.environ.get("MLA_SKIP"):\n            logger.info("skipping")\n'
        "        else:\n" + textwrap.indent(GUARD, "    "),
    ),
}

# -- a guard weakened in place -----------------------------------------------------------------
WEAK: dict[str, str] = {
    "raise_to_warning": R(
        '            raise ValueError(f"unsupported head size {self.head_size}")',
        '            logger.warning(f"unsupported head size {self.head_size}")',
    ),
    "raise_to_warnings_warn": R(
        '            raise ValueError(f"unsupported head size {self.head_size}")',
        '            import warnings\n            warnings.warn("unsupported head size")',
    ),
    "caught_class": R('raise NotImplementedError("fp8 weights")', 'raise ImportError("fp8 weights")'),
    "caught_subclass": R("        except ImportError:\n", "        except RuntimeError:\n"),
    "getattr_default": R(
        "if self.head_size not in (64, 128, 192):", 'if getattr(self.config, "strict_head_check", False):'
    ),
    "getattr_default_and": R(
        "if self.head_size not in (64, 128, 192):",
        'if getattr(self.config, "enforce_heads", None) and self.head_size not in (64, 128, 192):',
    ),
    "module_constant": R(
        "logger = logging",
        "_ENFORCE_HEADS: bool = False\nlogger = logging",
        "if self.head_size not in (64, 128, 192):",
        "if _ENFORCE_HEADS:",
    ),
    "class_constant_self": R(
        "class MLAAttention:\n",
        "class MLAAttention:\n    strict = 0\n",
        "if self.head_size not in (64, 128, 192):",
        "if self.strict and self.head_size not in (64, 128, 192):",
    ),
    "debug_false": R(GUARD, "        if __debug__ and False:\n" + textwrap.indent(GUARD, "    ")),
}

# -- the same guard kept: look-alikes that must stay below high --------------------------------
QUIET: dict[str, str] = {
    "documented_env_dump": R(
        "        out = q @ k.T\n",
        '        out = q @ k.T\n        if os.environ.get("MLA_DUMP"):\n            logger.info("out %s", out.shape)\n',
    ),
    "env_fast_path_after_guard": R(
        "        out = q @ k.T\n",
        '        if os.environ.get("MLA_FAST"):\n            return torch.matmul(q, k.T)\n        out = q @ k.T\n',
    ),
    "config_getattr_extra_branch": R(
        "        out = q @ k.T\n",
        '        if getattr(self.config, "use_fast", False):\n            q = q.contiguous()\n        out = q @ k.T\n',
    ),
    "message_reworded": R(
        'raise ValueError(f"unsupported head size {self.head_size}")',
        'raise ValueError(f"head size {self.head_size} is not supported")',
    ),
    "except_widened_but_raises": R(
        "        except ImportError:\n            pass\n", "        except ImportError:\n            raise\n"
    ),
    "caught_class_unrelated": R('raise NotImplementedError("fp8 weights")', 'raise TypeError("fp8 weights")'),
    "extra_check_added": R(GUARD, GUARD + "        if q.dim() != 3:\n            raise ValueError('q')\n"),
}

ENV.update(
    {
        "from_envs_import": R(
            "import torch\n",
            "import torch\nfrom vllm.envs import VLLM_MLA_SKIP_CHECK\n",
            *before_guard("if VLLM_MLA_SKIP_CHECK:\n    return q @ k.T\n"),
        ),
        "envs_alias": R(
            "import torch\n",
            "import torch\nimport vllm.envs as E\n",
            *before_guard("if E.VLLM_MLA_SKIP_CHECK:\n    return q @ k.T\n"),
        ),
        "environ_alias": R(
            "import torch\n",
            "import torch\nfrom os import environ as ENV\n",
            *before_guard('if ENV.get("MLA_SKIP"):\n    return q @ k.T\n'),
        ),
        "walrus": R(*before_guard('if (skip := os.environ.get("MLA_SKIP")) is not None:\n    return q @ k.T\n')),
        "method_flag_local": R(
            "    def forward(self, q, k):",
            "    def _skip(self):\n"
            '        raw = os.getenv("MLA_SKIP", "0")\n        return raw not in ("", "0")\n\n'
            "    def forward(self, q, k):",
            *before_guard("if self._skip():\n    return q @ k.T\n"),
        ),
    }
)


ENV.update(
    {
        "class_attr": R(
            "class MLAAttention:\n",
            'class MLAAttention:\n    _SKIP = os.environ.get("MLA_SKIP", "0") == "1"\n',
            *before_guard("if self._SKIP:\n    return q @ k.T\n"),
        ),
        "global_set_in_function": R(
            "logger = logging",
            '_SKIP = False\n\n\ndef _init_flags():\n    global _SKIP\n    _SKIP = os.getenv("MLA_SKIP") == "1"\n\n\n'
            "logger = logging",
            *before_guard("if _SKIP:\n    return q @ k.T\n"),
        ),
        "attr_from_flag_helper": R(
            "class MLAAttention",
            'def _flag(name):\n    return os.environ.get(name, "0") == "1"\n\n\nclass MLAAttention',
            *init('self.skip = _flag("MLA_SKIP")'),
            *before_guard("if self.skip:\n    return q @ k.T\n"),
        ),
        "attr_from_local": R(
            *init('raw = os.getenv("MLA_SKIP")\n        self.skip = raw is not None'),
            *before_guard("if self.skip:\n    return q @ k.T\n"),
        ),
        "continue_in_loop": R(
            GUARD,
            '        for _ in range(1):\n            if os.environ.get("MLA_SKIP"):\n                continue\n'
            + textwrap.indent(GUARD, "    "),
        ),
    }
)
WEAK.update(
    {
        "assert_tuple": R(GUARD, '        assert (self.head_size in (64, 128, 192), "head")\n'),
        "raise_to_return_none": R(
            '            raise ValueError(f"unsupported head size {self.head_size}")', "            return None"
        ),
        "warning_once": R(
            '            raise ValueError(f"unsupported head size {self.head_size}")',
            '            logger.warning_once("unsupported head size %d", self.head_size)',
        ),
        "dict_get_default": R("if self.head_size not in (64, 128, 192):", 'if self.config.get("strict_heads", False):'),
        "except_exception_log": R(
            "        except ImportError:\n            pass\n",
            '        except Exception as e:\n            logger.warning("load: %s", e)\n',
        ),
    }
)


WEAK.update(
    {
        "features_emptied": R(
            "        unsupported_features = [alibi_slopes, sliding_window]\n",
            "        unsupported_features = []  # not yet: [alibi_slopes, sliding_window]\n",
        ),
        "features_nulled": R(
            "        unsupported_features = [alibi_slopes, sliding_window]\n",
            "        unsupported_features = [alibi_slopes, sliding_window]\n"
            "        unsupported_features = [None, None]\n",
        ),
        "flag_overridden": R(KV, "        supported = True  # unblock fp8_e5m2\n" + KV),
        "flag_overridden_tuple": R(KV, "        supported, _ = True, None\n        supported = 1\n" + KV),
        "self_flag_overridden": R(
            KV,
            "        self.strict = False\n        if self.strict and not supported:\n",
        ),
    }
)
QUIET.update(
    {
        "flag_widened": R(KV, '        supported |= kv_dtype == "fp8_e5m2"\n' + KV),
        "flag_set_in_branch": R(KV, '        if kv_dtype == "fp8_e5m2":\n            supported = True\n' + KV),
    }
)


RULES = load_rules()


def _high(installed: str) -> list[tuple[str, int, str]]:
    file = SourceFile(path="pkg/attn.py", installed=installed.encode(), pristine=P.encode())
    return [(f.rule, f.line, f.message) for f in check_file(file, RULES) if f.severity is Severity.HIGH and f.in_change]


@pytest.mark.parametrize("name", sorted(ENV))
def test_guard_run_only_without_an_environment_variable_is_high(name: str) -> None:
    assert _high(ENV[name]), ENV[name]


@pytest.mark.parametrize("name", sorted(WEAK))
def test_weakened_guard_is_high(name: str) -> None:
    assert _high(WEAK[name]), WEAK[name]


@pytest.mark.parametrize("name", sorted(QUIET))
def test_kept_guard_is_quiet(name: str) -> None:
    assert _high(QUIET[name]) == [], QUIET[name]
