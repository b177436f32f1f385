"""JSON configs compared key by key: `quantization.kv_cache_quant_algo: removed (was "FP8")`."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from patchaudit.report import ConfigChange
from patchaudit.safefs import parse_json

CONFIG_SUFFIXES = (".json", ".jinja")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][\w\-]*$")


def is_config(repo_path: str) -> bool:
    return repo_path.endswith(CONFIG_SUFFIXES)


def _join(prefix: str, key: str) -> str:
    part = key if _PLAIN_KEY.match(key) else json.dumps(key)
    if not prefix:
        return part if _PLAIN_KEY.match(key) else f"[{part}]"
    return f"{prefix}.{part}" if _PLAIN_KEY.match(key) else f"{prefix}[{part}]"


def diff_values(file: str, old: Any, new: Any, prefix: str = "") -> list[ConfigChange]:
    """Every leaf that differs, by key path; lists of equal length are compared item by item."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[ConfigChange] = []
        for key in old:
            path = _join(prefix, str(key))
            if key not in new:
                out.append(ConfigChange(file=file, key=path, change="removed", old=old[key]))
            else:
                out.extend(diff_values(file, old[key], new[key], path))
        for key in new:
            if key not in old:
                out.append(ConfigChange(file=file, key=_join(prefix, str(key)), change="added", new=new[key]))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out.extend(diff_values(file, a, b, f"{prefix}[{i}]"))
        return out
    if type(old) is type(new) and (old == new or _both_nan(old, new)):
        return []
    return [ConfigChange(file=file, key=prefix or "(document)", change="changed", old=old, new=new)]


def _both_nan(a: Any, b: Any) -> bool:
    return isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)


def diff_config(file: str, old: bytes, new: bytes) -> list[ConfigChange] | None:
    """Key changes between two versions of a config; None when either side is not JSON (a template is
    one value: the whole text)."""
    if file.endswith(".jinja"):
        if old == new:
            return []
        return [
            ConfigChange(
                file=file,
                key="chat_template",
                change="changed",
                old=old.decode("utf-8", "replace"),
                new=new.decode("utf-8", "replace"),
            )
        ]
    try:
        a = parse_json(old)
        b = parse_json(new)
    except ValueError:
        return None
    return diff_values(file, a, b)


def key_line(text: bytes, key: str) -> int:
    """The line where the key path's last key is written in `text` (1 when it is not there)."""
    last = re.split(r"[.\[]", key)[-1].rstrip("]").strip('"')
    needle = json.dumps(last).encode()
    index = text.find(needle + b":")
    if index < 0:
        index = text.find(needle)
    return text.count(b"\n", 0, index) + 1 if index >= 0 else 1
