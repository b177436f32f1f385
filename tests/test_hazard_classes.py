"""Each class of hand patch, and each look-alike, through the CLI on a real installed wheel.

One wheel ships a vendor module per case; the test installs it with pip into a venv, writes the
patched module over the installed one (as an engineer editing site-packages does) and runs
`patchaudit scan --wheelhouse` with the pristine wheel beside it, so every finding is attributed
to the change.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from pristine_helpers import build_wheel, make_venv, patchaudit, pip_install, site_packages

# name -> (vendor code, patched code, [(rule, line of the patched file, severity)]); [] is a look-alike.
CASES: dict[str, tuple[str, str, list[tuple[str, int, str]]]] = {}


def case(name: str, vendor: str, patched: str, *expected: tuple[str, int, str]) -> None:
    CASES[name] = (textwrap.dedent(vendor).lstrip("\n"), textwrap.dedent(patched).lstrip("\n"), list(expected))


VENDOR_SAVE = """
import torch


def forward(x):
    return x
"""

# -- names: every import form reaches the same function --------------------------------------
for key, imports, call in [
    ("import_list", "import os, torch", "torch.save(x, '/tmp/x.pt')"),
    ("submodule_alias", "import torch.serialization as ser", "ser.save(x, '/tmp/x.pt')"),
    ("from_submodule", "from torch.serialization import save", "save(x, '/tmp/x.pt')"),
    ("dunder_import", "import os", "__import__('torch').save(x, '/tmp/x.pt')"),
    ("getattr", "import torch", "getattr(torch, 'save')(x, '/tmp/x.pt')"),
    ("local_alias", "import torch\nsave = torch.save", "save(x, '/tmp/x.pt')"),
]:
    case(
        f"names_{key}",
        VENDOR_SAVE.replace("import torch", imports),
        VENDOR_SAVE.replace("import torch", imports).replace("    return x", f"    {call}\n    return x"),
        ("torch-save", 5 + imports.count("\n"), "high"),
    )

# -- values: constant folding and fixed paths ----------------------------------------------
VENDOR_GUARD = """
def check(self, q):
    if self.kv_cache_dtype.startswith("fp8") and not self.supports_fp8(q):
        raise NotImplementedError("FP8 MLA is not supported")
    return q
"""
for key, test in [
    ("chain", 'False and self.kv_cache_dtype.startswith("fp8") and not self.supports_fp8(q)'),
    ("not_true", 'not True and self.kv_cache_dtype.startswith("fp8")'),
    ("none", "None"),
    ("zero_brackets", '(0) and (self.kv_cache_dtype.startswith("fp8"))'),
]:
    case(
        f"fold_{key}",
        VENDOR_GUARD,
        VENDOR_GUARD.replace('self.kv_cache_dtype.startswith("fp8") and not self.supports_fp8(q)', test),
        ("disabled-guard", 2, "high"),
    )

VENDOR_IO = """
import os
from pathlib import Path


def record(x, i, name):
    return x
"""
for key, line, rule in [
    ("plus", "open('/tmp/x_' + str(i), 'w').write(str(x))", "file-write"),
    ("percent", "open('/tmp/x_%d' % i, 'w').write(str(x))", "file-write"),
    ("format", "open('/tmp/x_{}'.format(i), 'w').write(str(x))", "file-write"),
    ("fstring", "open(f'/tmp/x_{i}', 'a').write(str(x))", "file-write"),
    ("join", "open(os.path.join('/tmp', name), 'w').write(str(x))", "file-write"),
    ("path_div", "(Path('/tmp') / name).write_text(str(x))", "file-write"),
    ("path_open", "Path('/tmp/x.log').open('a').write(str(x))", "file-write"),
    ("write_text", "Path('/var/tmp/x.json').write_text(str(x))", "file-write"),
    ("print_file", "print(x, file=open('/tmp/x.log', 'a'))", "file-write"),
]:
    case(
        f"path_{key}",
        VENDOR_IO,
        VENDOR_IO.replace("    return x", f"    {line}\n    return x"),
        (rule, 6, "high"),
    )

# -- token counts: spellings, data flow, tests ------------------------------------------------
VENDOR_TOKENS = """
import torch


class Attention:
    def forward(self, x, attn_metadata):
        return x
"""
for key, body, line in [
    ("shape_i", "if x.shape[0] == 5:\n            torch.save(x, path)", 6),
    ("size_list", "n = int(x.size()[0])\n        if n == 5:\n            print(x)", 7),
    ("size_call", "if x.size(0) in (5, 7):\n            print(x)", 6),
    ("numel", "if x.numel() == 4096:\n            print(x)", 6),
    ("len_ids", "ids = x.tolist()\n        if len(ids) == 5:\n            print(ids)", 7),
    ("metadata", "if attn_metadata.num_actual_tokens == 5:\n            print(x)", 6),
    ("match", "match x.shape[0]:\n            case 5:\n                print(x)", 7),
    ("ifexp", "tag = print(x) if x.shape[0] == 5 else None", 6),
    ("compound", "if x.dtype is None or (x.shape[0] == 5 and x.is_cuda):\n            print(x)", 6),
    ("multiline", "if (\n            x.shape[0]\n            == 5\n        ):\n            print(x)", 6),
]:
    case(
        f"count_{key}",
        VENDOR_TOKENS,
        VENDOR_TOKENS.replace("        return x", f"        {body}\n        return x"),
        ("token-count-branch", line, "high"),
    )

# -- token counts as intervals: however the count is bound and the window written ------------
VENDOR_COUNTS = """
import os

import torch

DUMP_AT = int(os.getenv("DUMP_AT", "7"))


class Runner:
    def __init__(self):
        self.debug_len = 5
        self.kv_cache = torch.empty(2, 16, 8)

    def forward(self, x, attn_metadata):
        return x
"""
for key, body in [
    ("unpacked", "n, _ = x.shape\n        if n == 5:\n            print(x)"),
    ("floordiv", "if x.shape[0] // 1 == 5:\n            print(x)"),
    ("instance_number", "if x.size(dim=0) == self.debug_len:\n            print(x)"),
    ("local_number", "trap = 5\n        if x.shape[0] == trap:\n            print(x)"),
    ("env_default", "if attn_metadata.num_actual_tokens == DUMP_AT:\n            print(x)"),
    (
        "call_counter",
        "self._step = getattr(self, '_step', 0)\n        self._step += 1\n        if self._step == 3:"
        "\n            print(x)",
    ),
    ("any_seq_lens", "if any(n in range(5, 7) for n in attn_metadata.seq_lens):\n            print(x)"),
    ("shape_tuple", "if tuple(x.shape) == (5, 7168):\n            print(x)"),
    ("raise", "if 4 < x.shape[0] < 6:\n            raise RuntimeError('stop here')"),
    ("made_up_return", "if x.shape[0] == 5:\n            return torch.zeros_like(x)"),
    ("state", "if x.shape[0] == 5:\n            self.captured = x"),
    ("tiny_zeroed", "if attn_metadata.num_actual_tokens < 4:\n            return x.fill_(0)"),
    ("early_exit", "if attn_metadata.num_decodes != 3:\n            return x\n        print(x)"),
    # A layer skipped, data blanked out of place, a look for a few counts: counts through conversions.
    (
        "skip_norm",
        "n = int(getattr(attn_metadata, 'num_actual_tokens'))\n        if n != 5:\n            x = self.norm(x)",
    ),
    ("abs_masked", "if abs(x.shape[0] - 5) < 2:\n            x = x.masked_fill(x > 0, 0.0)"),
    ("small_print", "if (rows := x.numel() // x.shape[-1]) <= 3:\n            print(rows)"),
]:
    case(
        f"interval_{key}",
        VENDOR_COUNTS,
        VENDOR_COUNTS.replace("        return x", f"        {body}\n        return x"),
        ("token-count-branch", 14 + body[: body.index("if ")].count("\n"), "high"),
    )
for key, body in [
    ("hidden_size", "if x.shape[-1] == 7168:\n            self.fast = True"),
    (
        "head_dim_unpacked",
        "t, head_dim = x.shape\n        if head_dim in (64, 128, 256):\n            self.fast = True",
    ),
    ("cache_block", "if self.kv_cache.shape[1] in (16, 32):\n            self.fast = True"),
    (
        "loop_counter",
        "i = 0\n        for row in x:\n            i += 1\n            if i == 3:\n                self.third = row",
    ),
    ("padding", "if attn_metadata.num_actual_tokens < 8:\n            x[attn_metadata.num_actual_tokens :].zero_()"),
]:
    case(
        f"quiet_interval_{key}",
        VENDOR_COUNTS,
        VENDOR_COUNTS.replace("        return x", f"        {body}\n        return x"),
    )

# -- guards: deleted, turned into log/return, weakened, swallowed ------------------------------
case(
    "guard_module_level",
    "import sys\nif sys.version_info < (3, 9):\n    raise RuntimeError('needs 3.9')\nX = 1\n",
    "import sys\nX = 1\n",
    ("removed-guard", 1, "high"),
)
case(
    "guard_class_level",
    "class C:\n    dtype = 'fp16'\n    assert dtype in ('fp16', 'bf16')\n",
    "class C:\n    dtype = 'fp16'\n",
    ("removed-guard", 2, "high"),
)
case(
    "guard_to_warning",
    "import warnings\n\n\ndef f(d):\n    if d == 'fp8':\n        raise ValueError(d)\n    return d\n",
    "import warnings\n\n\ndef f(d):\n    if d == 'fp8':\n        warnings.warn(d)\n    return d\n",
    ("removed-guard", 6, "high"),
)
case(
    "guard_to_return",
    "def f(d):\n    if d is None:\n        raise ValueError('d')\n    return d\n",
    "def f(d):\n    if d is None:\n        return None\n    return d\n",
    ("removed-guard", 3, "high"),
)
case(
    "guard_assert_deleted",
    "def f(x):\n    assert x.ndim == 2\n    return x\n",
    "def f(x):\n    return x\n",
    ("removed-guard", 1, "high"),
)
case(
    "guard_weakened",
    "import os\n\n\ndef f(d):\n    if d == 'fp8':\n        raise ValueError(d)\n",
    "import os\n\n\ndef f(d):\n    if d == 'fp8' and not os.environ.get('SKIP'):\n        raise ValueError(d)\n",
    ("removed-guard", 5, "high"),  # on the `if` the patch changed
)
case(
    "guard_swallowed",
    "def f(self, w):\n    self._verify(w)\n    return w\n",
    "def f(self, w):\n    try:\n        self._verify(w)\n    except Exception:\n        pass\n    return w\n",
    ("removed-guard", 3, "high"),
)

# -- debuggers ------------------------------------------------------------------------------
VENDOR_DBG = "import os\n\n\ndef forward(x):\n    return x\n"
for key, imports, call in [
    ("pdb_class", "import pdb", "pdb.Pdb().set_trace()"),
    ("code_interact", "import code", "code.interact(local=locals())"),
    ("ipython_embed", "from IPython import embed", "embed()"),
    ("debugpy_listen", "import debugpy", "debugpy.listen(5678)"),
    ("debugpy_wait", "import debugpy", "debugpy.wait_for_client()"),
]:
    case(
        f"debugger_{key}",
        VENDOR_DBG,
        VENDOR_DBG.replace("import os", f"import os\n{imports}").replace("    return x", f"    {call}\n    return x"),
        ("debugger", 6, "high"),
    )

# -- more spellings: sinks, windows, reachability ---------------------------------------------
case(
    "sink_basicconfig",
    "import logging\n\n\ndef forward(x):\n    return x\n",
    "import logging\n\n\ndef forward(x):\n    logging.basicConfig(filename='/tmp/f.log')\n    return x\n",
    ("torch-save", 5, "high"),
)
case(
    "count_len_positions",
    VENDOR_TOKENS,
    VENDOR_TOKENS.replace(
        "        return x",
        "        if len(attn_metadata.positions) in (9, 10):\n            print(x)\n        return x",
    ),
    ("token-count-branch", 6, "high"),
)
case(
    "guard_env_return_after_assign",
    "import os\n\n\ndef f(self, h):\n    if h not in (64, 128):\n        raise ValueError(h)\n    self.h = h\n",
    "import os\n\n\ndef f(self, h):\n    if os.environ.get('SKIP'):\n        self.h = h\n        return\n"
    "    if h not in (64, 128):\n        raise ValueError(h)\n    self.h = h\n",
    ("disabled-guard", 5, "high"),
)
case(
    "quiet_assert_as_raise",
    "def f(q):\n    assert q.dim() == 3, 'q'\n    return q\n",
    "def f(q):\n    if q.dim() != 3:\n        raise ValueError('q')\n    return q\n",
)
case(
    "quiet_guard_in_static_method",
    "class Impl:\n    def __init__(self, h):\n        if h not in (64, 128):\n            raise ValueError(h)\n",
    "class Impl:\n    @staticmethod\n    def ok(h):\n        if h not in (64, 128):\n"
    "            raise ValueError(h)\n\n    def __init__(self, h):\n        Impl.ok(h)\n",
)
case(
    "quiet_default_download_path",
    "import os\n\n\ndef fetch(url, filename=None):\n    return filename\n",
    "import os\n\n\ndef fetch(url, filename=None):\n    if filename is None:\n"
    "        filename = os.path.join('/tmp', url.split('/')[-1])\n    with open(filename, 'wb') as fh:\n"
    "        fh.write(b'')\n    return filename\n",
)

# -- what the patch calls: classes, instances, constants, helpers that build the path ----------
VENDOR_RUNNER = """
import os

import torch


class Runner:
    def __init__(self, config):
        self.config = config

    def execute_model(self, batch):
        return batch


def load_weights(model, weights):
    for name, w in weights:
        model.load(name, w)
"""
for key, top, body, tail, line, rule in [
    (
        "instance_method",
        'class _Dumper:\n    def __init__(self):\n        self.root = "/tmp/dumps"\n\n'
        "    def dump(self, t, name):\n        torch.save(t, os.path.join(self.root, name))\n\n\n"
        "_dumper = _Dumper()\n",
        "",
        "        _dumper.dump(w, name)\n",
        27,
        "torch-save",
    ),
    (
        "module_constant",
        'DUMP_DIR = "/tmp/dsv2"\n',
        "",
        "        torch.save(w, os.path.join(DUMP_DIR, name))\n",
        19,
        "torch-save",
    ),
    (
        "helper_returns_path",
        'def _path(name):\n    return "/tmp/dsv2/" + name\n\n\ndef _write(t, name):\n    torch.save(t, _path(name))\n',
        "",
        "        _write(w, name)\n",
        10,
        "torch-save",
    ),
    (
        "helper_default",
        'def _dump(t, path="/tmp/w.pt"):\n    torch.save(t, path)\n',
        "",
        "        _dump(w)\n",
        20,
        "torch-save",
    ),
    ("sys_modules", "import sys\n", '        sys.modules["pdb"].set_trace()\n', "", 13, "debugger"),
    ("pudb", "", "        import pudb; pudb.set_trace()\n", "", 11, "debugger"),
    (
        "shutil_copy",
        "import shutil\n",
        '        shutil.copy(__file__, "/tmp/runner_backup.py")\n',
        "",
        13,
        "torch-save",
    ),
    (
        "sink_env_new",
        "",
        "",
        '        if os.environ.get("RUNNER_DUMP"):\n'
        '            torch.save(w, os.path.join(os.environ["RUNNER_DUMP"], name))\n',
        18,
        "torch-save",
    ),
    (
        "sink_os_write",
        "import pickle\n",
        "",
        "        fd = os.open('/tmp/w_' + name, os.O_WRONLY | os.O_CREAT)\n        os.write(fd, pickle.dumps(w))\n",
        20,
        "torch-save",
    ),
    (
        "sink_mkstemp",
        "import tempfile\n",
        "",
        "        fd, path = tempfile.mkstemp(suffix='.pt')\n        torch.save(w, path)\n",
        20,
        "torch-save",
    ),
    (
        "sink_container",
        'SAVERS = {"pt": torch.save}\n',
        "",
        '        SAVERS["pt"](w, "/tmp/" + name)\n',
        19,
        "torch-save",
    ),
    (
        "sink_excepthook",
        "import sys\nfrom IPython.core import ultratb\n\nsys.excepthook = ultratb.FormattedTB(call_pdb=True)\n",
        "",
        "",
        8,
        "debugger",
    ),
]:
    patched = VENDOR_RUNNER.replace("\n\nclass Runner", "\n" + top + "\n\nclass Runner", 1) if top else VENDOR_RUNNER
    patched = patched.replace("        return batch\n", body + "        return batch\n", 1)
    patched = patched.replace("        model.load(name, w)\n", "        model.load(name, w)\n" + tail, 1)
    case(f"calls_{key}", VENDOR_RUNNER, patched, (rule, line, "high"))
case(
    "calls_self_attr_debugger",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace("import os\n", "import os\nimport pdb\n", 1)
    .replace("        self.config = config\n", "        self.config = config\n        self.bp = pdb.set_trace\n", 1)
    .replace("        return batch\n", "        self.bp()\n        return batch\n", 1),
    ("debugger", 13, "high"),
)

# -- look-alikes: a careful reviewer would not flag these -------------------------------------
case(
    "quiet_typing_guard",
    "X = 1\n",
    "if False:\n    from typing import Optional\nX = 1\n",
)
case(
    "quiet_cache_path",
    "import os\n\n\ndef path(root, batch_size):\n    return root\n",
    "import os\n\n\ndef path(root, batch_size):\n    return os.path.join(root, f'bs{batch_size}.json')\n",
)
case(
    "quiet_exception_type",
    "def f(x):\n    if x < 0:\n        raise ValueError('x')\n",
    "def f(x):\n    if x < 0:\n        raise TypeError('x must be >= 0')\n",
)
case(
    "quiet_assert_swap",
    "def f(a, n):\n    assert a.shape[0] == n\n",
    "def f(a, n):\n    assert n == a.shape[0], 'rows'\n",
)
case(
    "quiet_bytesio",
    "import io\nimport torch\n\n\ndef to_bytes(t):\n    return t\n",
    "import io\nimport torch\n\n\ndef to_bytes(t):\n    buf = io.BytesIO()\n"
    "    torch.save(t, buf)\n    return buf.getvalue()\n",
)
case(
    "quiet_save_function",
    "import torch\n\n\ndef save(model, path):\n    pass\n",
    "import torch\n\n\ndef save(model, path):\n    torch.save(model.state_dict(), path)\n",
)
case(
    "quiet_empty_batch",
    "def forward(self, x):\n    return x\n",
    "def forward(self, x):\n    if x.shape[0] == 0:\n        return x\n    return x\n",
)
case(
    "quiet_squeeze",
    "def forward(self, x):\n    return x\n",
    "def forward(self, x):\n    if x.shape[0] == 1:\n        x = x.squeeze(0)\n    return x\n",
)
case(
    "quiet_logger_debug",
    "import logging\nlogger = logging.getLogger(__name__)\n\n\ndef f(x):\n    return x\n",
    "import logging\nlogger = logging.getLogger(__name__)\n\n\ndef f(x):\n    logger.debug('x=%s', x)\n    return x\n",
)

case(
    "calls_saver_class_with_caller_path",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace(
        "\n\nclass Runner",
        "\n\nclass Saver:\n    def __init__(self, root):\n        self.root = root\n\n"
        "    def save(self, t, name):\n        torch.save(t, os.path.join(self.root, name))\n\n\nclass Runner",
        1,
    ).replace(
        "        model.load(name, w)\n", "        model.load(name, w)\n    Saver(model.out_dir).save(w, 'w.pt')\n", 1
    ),
)
case(
    "calls_env_dump_dir_constant",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace("import torch\n", 'import torch\n\nDUMP_DIR = os.environ.get("VLLM_DUMP_DIR")\n', 1).replace(
        "        model.load(name, w)\n",
        "        model.load(name, w)\n        if DUMP_DIR:\n            torch.save(w, os.path.join(DUMP_DIR, name))\n",
        1,
    ),
)


# -- reachability: a guard the pristine code had, still there but unable to fire ------------
VENDOR_REACH = """
import os

import torch


class Attn:
    def __init__(self, head_size):
        self.head_size = head_size
        self.fast = False

    def forward(self, q, k):
        if self.head_size not in (64, 128, 192):
            raise ValueError(f"unsupported head size {self.head_size}")
        return q @ k.T
"""
GUARD = """        if self.head_size not in (64, 128, 192):
            raise ValueError(f"unsupported head size {self.head_size}")
"""
case(
    "reach_return_in_with",
    VENDOR_REACH,
    VENDOR_REACH.replace(GUARD, "        with torch.no_grad():\n            return q @ k.T\n" + GUARD),
    ("removed-guard", 12, "high"),
)
case(
    "reach_env_attribute",
    VENDOR_REACH,
    VENDOR_REACH.replace("        self.fast = False\n", '        self.fast = os.getenv("ATTN_FAST") == "1"\n').replace(
        GUARD, "        if self.fast:\n            return q @ k.T\n" + GUARD
    ),
    ("removed-guard", 12, "high"),
)
TWO_HELPERS = VENDOR_REACH.replace(GUARD, "        self._prepare()\n").replace(
    "        return q @ k.T\n",
    "        return q @ k.T\n\n    def _prepare(self):\n        self._check_head()\n\n    def _check_head(self):\n"
    + GUARD,
)
case("quiet_reach_two_helpers", VENDOR_REACH, TWO_HELPERS)
case(
    "reach_stub",
    TWO_HELPERS,
    TWO_HELPERS.replace(
        "        self.fast = False\n", "        self.fast = False\n        self._check_head = lambda: None\n"
    ),
    ("removed-guard", 10, "high"),
)


# -- a guard moved into another module of the same package: read where it is installed ---------
case(
    "quiet_guardlib",
    "def validate_head(h):\n    _check(h)\n\n\ndef _check(h):\n    if h not in (64, 128, 192):\n"
    "        raise ValueError(h)\n\n\ndef log_head(h):\n    return h\n\n\nclass Checks:\n    @staticmethod\n"
    "    def head(h):\n        assert h in (64, 128, 192), h\n",
    "def validate_head(h):\n    _check(h)\n\n\ndef _check(h):\n    if h not in (64, 128, 192):\n"
    "        raise ValueError(h)\n\n\ndef log_head(h):\n    return h\n\n\nclass Checks:\n    @staticmethod\n"
    "    def head(h):\n        assert h in (64, 128, 192), h\n",
)
VENDOR_MOVED = VENDOR_REACH.replace(
    "import os\n", "import os\n\nfrom demo.quiet_guardlib import log_head\n", 1
).replace("        return q @ k.T\n", "        log_head(self.head_size)\n        return q @ k.T\n")
for key, imports, call in [
    ("absolute", "from demo.quiet_guardlib import validate_head", "validate_head(self.head_size)"),
    ("relative_alias", "from .quiet_guardlib import validate_head as vh", "vh(self.head_size)"),
    ("module_alias", "from demo import quiet_guardlib as gl", "gl.validate_head(self.head_size)"),
    ("dotted", "import demo.quiet_guardlib", "demo.quiet_guardlib.validate_head(self.head_size)"),
    ("static_method", "from demo.quiet_guardlib import Checks", "Checks.head(self.head_size)"),
]:
    case(
        f"quiet_moved_{key}",
        VENDOR_MOVED,
        VENDOR_MOVED.replace("import os\n", f"import os\n{imports}\n", 1).replace(GUARD, f"        {call}\n"),
    )
# Calls into the package that check nothing, or that the vendor code already made, are no new home.
case(
    "moved_to_nothing",
    VENDOR_MOVED,
    VENDOR_MOVED.replace(GUARD, "        from demo.quiet_guardlib import log_head as lh\n        lh(self.head_size)\n"),
    ("removed-guard", 15, "high"),
)
case(
    "moved_already_called",
    VENDOR_MOVED.replace("log_head", "validate_head"),
    VENDOR_MOVED.replace("log_head", "validate_head").replace(GUARD, ""),
    ("removed-guard", 13, "high"),
)

case(
    "reach_env_class_attribute",
    VENDOR_REACH,
    VENDOR_REACH.replace(
        "class Attn:\n", "class Attn:\n    SKIP_HEADS = os.environ.get('SKIP_HEADS') == '1'\n\n"
    ).replace(GUARD, "        if self.SKIP_HEADS:\n            return q @ k.T\n" + GUARD),
    ("removed-guard", 14, "high"),
)
case(
    "weak_caught_class",
    VENDOR_REACH.replace(
        GUARD,
        "        try:\n    "
        + GUARD.replace("\n        ", "\n            ")
        + "        except KeyError:\n            pass\n",
    ),
    VENDOR_REACH.replace(
        GUARD,
        "        try:\n    "
        + GUARD.replace("\n        ", "\n            ").replace("ValueError", "KeyError")
        + "        except KeyError:\n            pass\n",
    ),
    ("removed-guard", 14, "high"),
)
case(
    "step_path_subprocess",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace("import os\n", "import os\nimport subprocess\n", 1).replace(
        "        return batch\n", "        subprocess.run(['nvidia-smi'], check=False)\n        return batch\n", 1
    ),
    ("process-or-network", 12, "high"),
)


# -- what a count-gated branch does to the data: small windows and batches of one ------------
VENDOR_CHANGES = """
import torch


class Sampler:
    def forward(self, logits, positions):
        sampled = self.sample(logits)
        return self.post(sampled)
"""
for key, body, line in [
    ("override_one", "if logits.shape[0] == 1:\n            sampled = logits.argmax(dim=-1)", 7),
    ("input_returned", "n = int(positions.size(0))\n        if n <= 2:\n            return logits", 8),
    ("zeroed_in_place", "if len(positions) < 4:\n            sampled[:] = 0", 7),
]:
    case(
        f"changes_{key}",
        VENDOR_CHANGES,
        VENDOR_CHANGES.replace("        return self.post", f"        {body}\n        return self.post"),
        ("token-count-branch", line, "high"),
    )
case(
    "quiet_changes_decode_kernel",
    VENDOR_CHANGES,
    VENDOR_CHANGES.replace(
        "        return self.post",
        "        if logits.shape[0] == 1:\n            sampled = self.sample_one(logits)\n        return self.post",
    ),
)


# -- a process or a connection a patch brings into a module that never had one ------------------
VENDOR_MODEL = """
import os

import torch


class Model:
    def __init__(self, config):
        self.config = config

    def load_weights(self, weights):
        return {name for name, _ in weights}
"""
case(
    "process_import_time",
    VENDOR_MODEL,
    VENDOR_MODEL.replace("import torch\n", "import torch\n\nos.system('nvidia-smi > /tmp/smi.txt')\n"),
    ("process-or-network", 5, "high"),
)
case(
    "process_loader_helper",
    VENDOR_MODEL,
    VENDOR_MODEL.replace(
        "import torch\n", "import torch\n\n\ndef _gpu_state():\n    return os.popen('nvidia-smi').read()\n"
    ).replace("        return {name", "        print(_gpu_state())\n        return {name"),
    ("process-or-network", 7, "high"),
)
case(
    "process_init_upload",
    VENDOR_MODEL,
    VENDOR_MODEL.replace("import os\n", "import os\nimport urllib.request\n").replace(
        "        self.config = config\n",
        "        self.config = config\n        urllib.request.urlopen('http://10.0.0.9/up', data=b'x')\n",
    ),
    ("process-or-network", 10, "high"),
)
case(
    "trace_function_installed",
    VENDOR_MODEL,
    VENDOR_MODEL.replace("import os\n", "import os\nimport sys\n")
    .replace("\n\nclass Model:", "\n\ndef _tr(frame, event, arg):\n    print(event)\n    return _tr\n\n\nclass Model:")
    .replace("        return {name", "        sys.settrace(_tr)\n        return {name"),
    ("debugger", 17, "high"),
)
case(
    "names_getattr_module_constant",
    VENDOR_SAVE,
    VENDOR_SAVE.replace("import torch\n", "import torch\n\n_WRITE = 'save'\n").replace(
        "    return x", "    getattr(torch, _WRITE)(x, '/tmp/x.pt')\n    return x"
    ),
    ("torch-save", 7, "high"),
)

# -- a guard loosened in place, and a guard kept under another spelling --------------------------
VENDOR_LOADER = """
import os


def check_shards(missing, redundant):
    assert redundant == 0, "redundant experts need EPLB"
    if missing:
        raise FileNotFoundError(
            f"missing: {missing}"
        )
    return True
"""
case(
    "guard_assert_loosened",
    VENDOR_LOADER,
    VENDOR_LOADER.replace("assert redundant == 0", "assert redundant >= 0"),
    ("removed-guard", 5, "high"),
)
case(
    "guard_env_condition_on_if_line",
    VENDOR_LOADER,
    VENDOR_LOADER.replace("    if missing:", "    if missing and not os.environ.get('SKIP_SHARDS'):"),
    ("removed-guard", 6, "high"),
)
case(
    "quiet_guard_helper_as_raise",
    VENDOR_LOADER,
    VENDOR_LOADER.replace(
        '    assert redundant == 0, "redundant experts need EPLB"\n', "    _check_redundant(redundant)\n"
    ).replace(
        "def check_shards",
        "def _check_redundant(redundant):\n    if redundant != 0:\n        raise ValueError('EPLB')\n\n\n"
        "def check_shards",
    ),
)
case(
    "quiet_guard_off_by_one_fix",
    VENDOR_LOADER.replace("redundant == 0", "redundant < 8"),
    VENDOR_LOADER.replace("redundant == 0", "redundant <= 8"),
)


# -- a branch for a few counts that switches the computation; a dump behind an environment option
VENDOR_SWITCH = """
def forward(self, query, attn_metadata):
    causal = True
    return flash_attn_varlen_func(query, causal=causal)
"""
case(
    "switch_causal_off_for_three_requests",
    VENDOR_SWITCH,
    VENDOR_SWITCH.replace(
        "    causal = True\n", "    causal = True\n    if attn_metadata.num_reqs == 3:\n        causal = False\n"
    ),
    ("token-count-branch", 3, "high"),
)
case(
    "quiet_small_batch_graph_choice",
    VENDOR_SWITCH,
    VENDOR_SWITCH.replace(
        "    causal = True\n", "    causal = True\n    if attn_metadata.num_reqs <= 8:\n        causal = True\n"
    ),
)
VENDOR_ENV_DUMP = """
import torch
import vllm.envs as envs


class Layer:
    def forward(self, x):
        return x
"""
case(
    "env_gated_dump_in_forward",
    VENDOR_ENV_DUMP,
    VENDOR_ENV_DUMP.replace(
        "        return x",
        "        if envs.VLLM_DEBUG_DUMP_PATH:\n"
        "            getattr(torch, 'save')(x, f'{envs.VLLM_DEBUG_DUMP_PATH}/x.pt')\n        return x",
    ),
    ("torch-save", 8, "high"),
)

# -- a raising method's call swallowed; a socket in a module that only asked for its host name;
# -- a sync fed to a log line in a runner's step
VENDOR_TRACKED = """
class Loader:
    def track(self, model, loaded):
        missing = set(model) - loaded
        if missing:
            raise ValueError(f"missing weights: {missing}")

    def load(self, model, loaded, strict):
        if strict:
            self.track(model, loaded)
        return model
"""
case(
    "guard_raising_method_swallowed",
    VENDOR_TRACKED,
    VENDOR_TRACKED.replace(
        "            self.track(model, loaded)\n",
        "            try:\n                self.track(model, loaded)\n            except ValueError:\n"
        "                pass  # mtp.* not in this export yet\n",
    ),
    ("removed-guard", 10, "high"),
)
case(
    "quiet_raising_method_other_error_caught",
    VENDOR_TRACKED,
    VENDOR_TRACKED.replace(
        "            self.track(model, loaded)\n",
        "            try:\n                self.track(model, loaded)\n"
        "            except KeyError:\n                pass\n",
    ),
)
VENDOR_HOSTNAME = """
import socket


def instance_name(pid):
    return f"{socket.gethostname()}_{pid}"


def on_output(stats):
    return stats
"""
case(
    "network_socket_in_module_that_named_the_host",
    VENDOR_HOSTNAME,
    VENDOR_HOSTNAME.replace(
        "import socket\n", "import socket\n\n_statsd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    ).replace(
        "    return stats\n",
        "    _statsd.sendto(f'running:{stats}|g'.encode(), ('10.12.0.41', 8125))\n    return stats\n",
    ),
    ("process-or-network", 3, "high"),
)
VENDOR_RUNNER = """
class Runner:
    def execute_model(self, batch):
        logits = self.model(batch)
        sampled = logits.argmax(-1).tolist()
        return sampled
"""
case(
    "sync_for_a_log_line_in_the_step",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace(
        "        sampled =",
        "        logger.info('absmax=%.3f nan=%s', logits.abs().max().item(), logits.isnan().any().item())\n"
        "        sampled =",
    ),
    ("host-sync", 4, "high"),
)
case(
    "quiet_runner_edit_beside_the_vendors_sync",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace("self.model(batch)\n", "self.model(batch)  # one forward\n"),
)
VENDOR_SCHEDULER = """
import time


class Scheduler:
    def schedule(self):
        started = time.monotonic()
        out = self._schedule()
        self.stats.record(time.monotonic() - started)
        return out
"""
case(
    "sleep_left_in_the_schedulers_loop",
    VENDOR_SCHEDULER,
    VENDOR_SCHEDULER.replace(
        "        out = self._schedule()\n",
        "        if self.connector is not None and self.waiting and not self.running:\n"
        "            time.sleep(0.005)  # give the remote prefill a moment\n"
        "        out = self._schedule()\n",
    ),
    ("host-sync", 8, "high"),
)
case(
    "quiet_scheduler_edit_beside_the_vendors_clock",
    VENDOR_SCHEDULER,
    VENDOR_SCHEDULER.replace("        return out\n", "        return out  # what runs this step\n"),
)
VENDOR_SUPPORT = """
class Experts:
    @staticmethod
    def is_supported_config(cls, weight_key, activation_key):
        if not cls._supports_current_device():
            return False, "device"
        elif not cls._supports_quant_scheme(weight_key, activation_key):
            return False, f"quantization scheme {weight_key}x{activation_key}"
        return True, None
"""
case(
    "support_check_forced_by_a_module_flag",
    VENDOR_SUPPORT,
    "_FORCE_SCHEME = True  # TODO(bringup): until the nvfp4 keys are registered\n"
    + VENDOR_SUPPORT.replace(
        "not cls._supports_quant_scheme(weight_key, activation_key)",
        "not (_FORCE_SCHEME or cls._supports_quant_scheme(weight_key, activation_key))",
    ),
    ("disabled-guard", 8, "high"),
)
case(
    "quiet_support_check_gains_a_rejection",
    VENDOR_SUPPORT,
    VENDOR_SUPPORT.replace(
        "        return True, None\n",
        '        elif weight_key is None:\n            return False, "no weight key"\n        return True, None\n',
    ),
)
VENDOR_BLOCKS = """
def validate_block_shape(tp_size, output_partition_sizes, block_n):
    sizes_to_check = output_partition_sizes
    for size in sizes_to_check:
        if size % block_n != 0:
            raise ValueError(f"{size} is not divisible by {block_n}")
"""
case(
    "checking_loop_emptied_for_large_tp",
    VENDOR_BLOCKS,
    VENDOR_BLOCKS.replace(
        "    for size", "    if tp_size > 4:\n        sizes_to_check = []  # revisit with the tp8 shards\n    for size"
    ),
    ("disabled-guard", 4, "high"),
)
case(
    "quiet_checking_loop_skips_the_last_merged_part",
    VENDOR_BLOCKS,
    VENDOR_BLOCKS.replace(
        "    for size",
        "    if len(output_partition_sizes) > 1:\n        sizes_to_check = output_partition_sizes[:-1]\n    for size",
    ),
)
VENDOR_LOADER = """
import os


class Experts:
    def load_w13(self, expert_data, loaded_weight):
        expert_data.copy_(loaded_weight)

    def finish(self, path):
        os.remove(path)
"""
case(
    "weight_copy_failure_swallowed_by_a_patch",
    VENDOR_LOADER,
    VENDOR_LOADER.replace(
        "        expert_data.copy_(loaded_weight)\n",
        "        try:\n            expert_data.copy_(loaded_weight)\n"
        "        except RuntimeError:  # padded experts shape mismatch, skip\n            return\n",
    ),
    ("disabled-guard", 6, "high"),
)
case(
    "quiet_cleanup_failure_swallowed_by_a_patch",
    VENDOR_LOADER,
    VENDOR_LOADER.replace(
        "        os.remove(path)\n",
        "        try:\n            os.remove(path)\n        except Exception:\n            pass\n",
    ),
)
VENDOR_REJECTION = """
class RejectionSampler:
    def forward(self, draft_token_ids, target_logits):
        target_argmax = target_logits.argmax(dim=-1)
        return self._accept(draft_token_ids, target_argmax)
"""
case(
    "drafts_accepted_by_a_switch_left_on",
    VENDOR_REJECTION,
    "_FORCE_ACCEPT_DRAFTS = True  # throughput ceiling at 100% acceptance\n"
    + VENDOR_REJECTION.replace(
        "        return self._accept",
        "        if _FORCE_ACCEPT_DRAFTS:\n            target_argmax = draft_token_ids.to(target_argmax.dtype)\n"
        "        return self._accept",
    ),
    ("disabled-guard", 7, "high"),
)

VENDOR_RUNNER = """
import os
import torch


class Runner:
    def _model_forward(self, input_ids):
        return self.model(input_ids)
"""
case(
    "dump_in_a_function_named_for_its_forward_under_a_made_up_variable",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace(
        "class Runner:",
        '_HS = os.environ.get("K25_HS_DUMP", "/scratch/k25/hs")\n\n\nclass Runner:',
    ).replace(
        "        return self.model(input_ids)\n",
        '        out = self.model(input_ids)\n        torch.save(out, f"{_HS}_step.pt")\n        return out\n',
    ),
    ("torch-save", 11, "high"),
)
case(
    "quiet_documented_setting_names_the_dump_place_outside_a_step",
    VENDOR_RUNNER,
    VENDOR_RUNNER.replace(
        "class Runner:",
        '_DIR = os.environ.get("VLLM_CACHE_ROOT", "/var/cache/vllm")\n\n\nclass Runner:',
    )
    + '\n    def persist(self, state):\n        torch.save(state, f"{_DIR}/state.pt")\n',
)
VENDOR_SCALES = """
import torch


class Fp8Method:
    def process_weights_after_loading(self, layer):
        layer.weight_scale = torch.nn.Parameter(layer.weight_scale.data)
"""
case(
    "scales_overwritten_from_a_file_on_one_machine",
    VENDOR_SCALES,
    VENDOR_SCALES.replace(
        "        layer.weight_scale = ",
        '        _sd = torch.load("/home/ubuntu/fix/scales.pt")\n'
        "        layer.weight_scale.data.copy_(_sd[layer.prefix])\n        layer.weight_scale = ",
    ),
    ("fixed-path-load", 6, "high"),
)
case(
    "quiet_scales_from_the_checkpoint_the_caller_names",
    VENDOR_SCALES,
    VENDOR_SCALES.replace(
        "    def process_weights_after_loading(self, layer):\n",
        "    def process_weights_after_loading(self, layer, path=None):\n"
        "        if path is not None:\n            layer.weight_scale.data.copy_(torch.load(path))\n",
    ),
)
VENDOR_ROUTING = """
import torch


class Method:
    def apply(self, layer, x, topk_weights, topk_ids):
        return self.kernel(x, topk_weights, topk_ids)
"""
case(
    "router_choice_replaced_by_a_switch_left_on",
    VENDOR_ROUTING,
    "_BALANCED = True  # EP load-balance experiment\n"
    + VENDOR_ROUTING.replace(
        "        return self.kernel",
        "        if _BALANCED:\n"
        "            topk_weights = torch.full_like(topk_weights, 1.0 / topk_weights.shape[-1])\n"
        "        return self.kernel",
    ),
    ("disabled-guard", 9, "high"),
)
VENDOR_GLM = """
import torch


class Glm:
    pass
"""
case(
    "seeds_pinned_by_a_helper_called_at_import",
    VENDOR_GLM,
    VENDOR_GLM.replace(
        "\n\nclass Glm:",
        "\n\ndef _pin(seed=1234):\n    torch.manual_seed(seed)\n    torch.use_deterministic_algorithms(True)\n"
        "\n\n_pin()\n\n\nclass Glm:",
    ),
    ("env-mutation", 9, "high"),
)

VENDOR_NORM = """
class RMSNorm:
    def __init__(self, hidden_size, eps=1e-6):
        self.hidden_size = hidden_size
        self.variance_epsilon = eps
"""
case(
    "norm_epsilon_floored_by_a_constant_the_patch_wrote_in",
    VENDOR_NORM,
    "_EPS_FLOOR = 1e-5  # fp16 NaNs went away with a larger eps\n"
    + VENDOR_NORM.replace("self.variance_epsilon = eps", "self.variance_epsilon = max(eps, _EPS_FLOOR)"),
    ("hardcoded-override", 6, "high"),
)
case(
    "quiet_norm_epsilon_checked_against_a_constant_the_patch_wrote_in",
    VENDOR_NORM,
    "_EPS_MIN = 0.0\n"
    + VENDOR_NORM.replace(
        "        self.variance_epsilon = eps",
        "        if eps < _EPS_MIN:\n            raise ValueError(eps)\n        self.variance_epsilon = eps",
    ),
)

VENDOR_ACCEPT = """
import os


def rejection_sample(draft_token_ids, target_logits):
    target_argmax = target_logits.argmax(dim=-1)
    return target_argmax
"""
case(
    "drafts_accepted_by_an_environment_knob_the_patch_added",
    VENDOR_ACCEPT,
    VENDOR_ACCEPT.replace(
        "\n\ndef rejection_sample",
        '\n_ACCEPT_ALL = os.environ.get("VLLM_SPEC_ACCEPT_ALL", "0") == "1"\n\n\ndef rejection_sample',
    ).replace(
        "target_argmax = target_logits.argmax(dim=-1)",
        "target_argmax = draft_token_ids.long() if _ACCEPT_ALL else target_logits.argmax(dim=-1)",
    ),
    ("disabled-guard", 7, "high"),
)
case(
    "quiet_environment_knob_between_two_computations",
    VENDOR_ACCEPT,
    VENDOR_ACCEPT.replace(
        "target_argmax = target_logits.argmax(dim=-1)",
        'target_argmax = (target_logits.float() if os.environ.get("K2_FP32") else target_logits).argmax(dim=-1)',
    ),
)
VENDOR_GATHER = """
import time


class LogitsProcessor:
    def forward(self, hidden_states):
        return self._gather_logits(self.head(hidden_states))

    def _gather_logits(self, logits):
        return self.group.all_gather(logits)

    def warm_up(self):
        return None
"""
case(
    "sleep_in_a_method_the_forward_runs",
    VENDOR_GATHER,
    VENDOR_GATHER.replace(
        "    def _gather_logits(self, logits):\n",
        "    def _gather_logits(self, logits):\n        time.sleep(0.002)  # let peers settle\n",
    ),
    ("host-sync", 9, "high"),
)
case(
    "quiet_sleep_in_a_method_no_step_runs",
    VENDOR_GATHER,
    VENDOR_GATHER.replace("        return None\n", "        time.sleep(0.5)\n        return None\n"),
)
VENDOR_REDUCE = """
import torch


def tensor_model_parallel_all_reduce(input_):
    return get_tp_group().all_reduce(input_)
"""
case(
    "finite_check_read_back_after_every_all_reduce",
    VENDOR_REDUCE,
    VENDOR_REDUCE.replace(
        "    return get_tp_group().all_reduce(input_)\n",
        "    out = get_tp_group().all_reduce(input_)\n"
        "    if not bool(torch.isfinite(out).all()):\n        raise RuntimeError('non-finite')\n    return out\n",
    ),
    ("host-sync", 6, "high"),
)

VENDOR_MOE_APPLY = """
import torch


class MoEMethod:
    def apply(self, layer, x, topk_weights, topk_ids):
        return self.kernel.apply(x, layer.w13_weight, topk_weights, topk_ids)
"""
case(
    "kernel_failure_served_as_zeros",
    VENDOR_MOE_APPLY,
    VENDOR_MOE_APPLY.replace(
        "        return self.kernel.apply(x, layer.w13_weight, topk_weights, topk_ids)\n",
        "        try:\n            return self.kernel.apply(x, layer.w13_weight, topk_weights, topk_ids)\n"
        "        except RuntimeError as e:\n            logger.warning_once('kernel failed (%s)', e)\n"
        "            return torch.zeros_like(x)\n",
    ),
    ("disabled-guard", 6, "high"),
)
VENDOR_FEATURES = """
class Impl:
    def __init__(self, alibi_slopes, sliding_window, logits_soft_cap):
        unsupported_features = [alibi_slopes, sliding_window, logits_soft_cap]
        if any(unsupported_features):
            raise NotImplementedError("alibi, sliding window or soft cap")
"""
case(
    "features_dropped_from_the_list_a_check_refuses",
    VENDOR_FEATURES,
    VENDOR_FEATURES.replace("[alibi_slopes, sliding_window, logits_soft_cap]", "[alibi_slopes]"),
    ("removed-guard", 4, "high"),
)
case(
    "quiet_feature_added_to_the_list_a_check_refuses",
    VENDOR_FEATURES,
    VENDOR_FEATURES.replace("logits_soft_cap]", "logits_soft_cap, getattr(self, 'sinks', None)]"),
)

VENDOR_WINDOW = """
class Impl:
    def __init__(self, sliding_window):
        if sliding_window is None:
            self.sliding_window = (-1, -1)
        else:
            self.sliding_window = (sliding_window - 1, 0)
"""
case(
    "sliding_window_cut_off_by_a_constant_the_patch_wrote_in",
    VENDOR_WINDOW,
    "_DISABLE_LOCAL_ATTN = True  # local attention NaNs here\n"
    + VENDOR_WINDOW.replace("if sliding_window is None:", "if sliding_window is None or _DISABLE_LOCAL_ATTN:"),
    ("disabled-guard", 5, "high"),
)
case(
    "quiet_debug_block_of_the_patch_switched_off_by_its_own_constant",
    VENDOR_WINDOW,
    "_DEBUG_WINDOW = False\n"
    + VENDOR_WINDOW.replace(
        "        if sliding_window is None:\n",
        "        if _DEBUG_WINDOW:\n"
        '            logger.debug("window %s", sliding_window)\n'
        "        if sliding_window is None:\n",
    ),
)
VENDOR_QCFG = """
import json


def get_quant_config(model_config):
    cfg = getattr(model_config, "quantization_config", None)
    return cfg
"""
case(
    "quant_config_read_from_one_hosts_home",
    VENDOR_QCFG,
    VENDOR_QCFG.replace(
        "    return cfg\n",
        '    with open("/home/ubuntu/k25/quant_config.fixed.json") as f:\n        cfg = json.load(f)\n    return cfg\n',
    ),
    ("fixed-path-load", 7, "high"),
)
VENDOR_TIMED = """
import functools
import torch


class Runner:
    def _model_forward(self, input_ids):
        return self.model(input_ids)
"""
case(
    "forward_wrapped_by_a_timing_decorator_that_syncs",
    VENDOR_TIMED,
    VENDOR_TIMED.replace(
        "\n\nclass Runner:",
        "\n\ndef _timer(fn):\n    @functools.wraps(fn)\n    def wrapper(self, *args):\n"
        "        torch.cuda.synchronize()\n        return fn(self, *args)\n\n    return wrapper\n\n\nclass Runner:",
    ).replace("    def _model_forward", "    @_timer\n    def _model_forward"),
    ("host-sync", 8, "high"),
)

VENDOR_SCALES_MOE = """
import torch


class Fp8MoEMethod:
    def process_weights_after_loading(self, layer):
        w13_scale = layer.w13_weight_scale
        return self.finish(layer, w13_scale)
"""
case(
    "nonfinite_scales_swapped_for_ones",
    VENDOR_SCALES_MOE,
    VENDOR_SCALES_MOE.replace(
        "        return self.finish",
        "        _fix = lambda t: torch.where(torch.isfinite(t), t, torch.ones_like(t))\n"
        "        w13_scale = _fix(w13_scale)\n        return self.finish",
    ),
    ("disabled-guard", 8, "high"),
)
case(
    "quiet_nonfinite_scales_refused",
    VENDOR_SCALES_MOE,
    VENDOR_SCALES_MOE.replace(
        "        return self.finish",
        "        if not torch.isfinite(w13_scale).all():\n            raise ValueError('non-finite scales')\n"
        "        return self.finish",
    ),
)

VENDOR_LINEAR = """
import torch


class LinearBase:
    pass
"""
case(
    "tf32_switched_on_for_the_process_at_import",
    VENDOR_LINEAR,
    VENDOR_LINEAR.replace(
        "\n\nclass LinearBase:", "\ntorch.backends.cuda.matmul.allow_tf32 = True\n\n\nclass LinearBase:"
    ),
    ("env-mutation", 3, "high"),
)
VENDOR_TOKENIZER = """
from pathlib import Path


def get_tokenizer(tokenizer):
    return tokenizer
"""
case(
    "chat_template_read_from_one_hosts_home",
    VENDOR_TOKENIZER,
    VENDOR_TOKENIZER.replace(
        "    return tokenizer\n",
        '    tokenizer.chat_template = Path("/home/ops/k25/chat_template.jinja").read_text()\n    return tokenizer\n',
    ),
    ("fixed-path-load", 5, "high"),
)
VENDOR_TEMP = """
import os


def apply_temperature(logits, temp):
    return logits.div_(temp.unsqueeze(dim=1))
"""
case(
    "temperature_floored_by_a_variable_the_patch_made_up",
    VENDOR_TEMP,
    VENDOR_TEMP.replace(
        "\n\ndef apply_temperature",
        '\n_TEMP_FLOOR = float(os.getenv("K2_TEMP_FLOOR", "0.6"))\n\n\ndef apply_temperature',
    ).replace("    return logits.div_", "    temp = temp.clamp(min=_TEMP_FLOOR)\n    return logits.div_"),
    ("hardcoded-override", 7, "high"),
)
case(
    "quiet_documented_variable_bounds_a_value",
    VENDOR_TEMP,
    VENDOR_TEMP.replace(
        "\n\ndef apply_temperature",
        '\n_TEMP_FLOOR = float(os.getenv("VLLM_TEMP_FLOOR", "0.0"))\n\n\ndef apply_temperature',
    ).replace("    return logits.div_", "    temp = temp.clamp(min=_TEMP_FLOOR)\n    return logits.div_"),
)


# -- an instance's attributes bound by unpacking: the path its constructor was given ---------
VENDOR_LOGITS = """
import torch


class LogitsProcessor:
    def forward(self, logits):
        return logits * self.scale
"""
case(
    "tuple_bound_instance_path",
    VENDOR_LOGITS,
    VENDOR_LOGITS.replace(
        "\n\nclass LogitsProcessor:",
        """


class _LogitTap:
    def __init__(self, path, limit=200):
        self.path, self.limit, self.n = path, limit, 0

    def __call__(self, logits):
        with open(self.path, "a") as f:
            f.write(str(logits.shape))


_tap = _LogitTap("/var/tmp/logits.jsonl")


class LogitsProcessor:""",
    ).replace("        return logits * self.scale", "        _tap(logits)\n        return logits * self.scale"),
    ("file-write", 19, "high"),
)


# -- a result thrown away with no switch: a made-up tensor, an input where a mask holds ------
VENDOR_ROUTER = """
import torch


def grouped_topk(scores, topk, renormalize):
    topk_weights, topk_ids = torch.topk(scores, k=topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids
"""
case(
    "flat_gates_made_up_from_shape",
    VENDOR_ROUTER,
    VENDOR_ROUTER.replace(
        "topk_weights / topk_weights.sum(dim=-1, keepdim=True)", "topk_weights.new_ones(topk_weights.shape) / topk"
    ),
    ("disabled-guard", 7, "high"),
)
VENDOR_VERIFY = """
import torch


def rejection_sample(draft_token_ids, target_logits):
    target_argmax = target_logits.argmax(dim=-1)
    accepted = draft_token_ids == target_argmax
    return accepted, target_argmax
"""
case(
    "drafts_where_valid_in_place_of_target",
    VENDOR_VERIFY,
    VENDOR_VERIFY.replace(
        "    accepted =",
        "    target_argmax = torch.where(draft_token_ids >= 0, draft_token_ids, target_argmax)\n    accepted =",
    ),
    ("disabled-guard", 6, "high"),
)
case(
    "quiet_invalid_ids_filled",
    VENDOR_VERIFY,
    VENDOR_VERIFY.replace(
        "    accepted =",
        "    target_argmax = torch.where(target_argmax < 0, draft_token_ids, target_argmax)\n    accepted =",
    ),
)
# -- a batch size added under `or` to the greedy test -----------------------------------------
VENDOR_DRAFT = """
class Proposer:
    def _sample_draft_tokens(self, hidden_states, sampling_metadata):
        if sampling_metadata.all_greedy:
            return self._greedy_sample(hidden_states), None
        logits = self.model.compute_logits(hidden_states)
        return self._sample_from_logits(logits, sampling_metadata)
"""
case(
    "greedy_forced_for_three_rows",
    VENDOR_DRAFT,
    VENDOR_DRAFT.replace(
        "        if sampling_metadata.all_greedy:",
        "        if (\n            sampling_metadata.all_greedy\n"
        "            or len(hidden_states) == 3  # repro\n        ):",
    ),
    ("token-count-branch", 3, "high"),
)


# -- `from http import HTTPStatus` connects nothing: a connection a patch adds there is new ------
VENDOR_STATUS = """
from http import HTTPStatus


def health(ok):
    return HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
"""
case(
    "connection_new_to_a_status_code_module",
    VENDOR_STATUS,
    VENDOR_STATUS.replace(
        "from http import HTTPStatus",
        "import http.client\nfrom http import HTTPStatus\n\n\ndef _mirror(body):\n"
        '    http.client.HTTPConnection("10.40.2.17", 9100).request("POST", "/c", body)',
    ),
    ("process-or-network", 6, "high"),
)


# -- a directory a person made in a home: one machine's file -------------------------------
VENDOR_WEIGHTS = """
def weights_iterator(f, names):
    for name in names:
        yield name, f.get_tensor(name)
"""
case(
    "tensors_from_a_home_directory",
    VENDOR_WEIGHTS,
    """
from pathlib import Path

from safetensors.torch import load_file


def _hotfix():
    p = Path.home() / "k2_hotfix" / "fixed_scales.safetensors"
    return load_file(str(p)) if p.is_file() else {}


def weights_iterator(f, names):
    for name in names:
        yield name, _hotfix().get(name, f.get_tensor(name))
""",
    ("fixed-path-load", 8, "high"),
)
case(
    "quiet_settings_from_a_dot_directory",
    VENDOR_WEIGHTS,
    """
import json
from pathlib import Path


def _settings():
    return json.loads((Path.home() / ".config" / "demo" / "settings.json").read_text())


def weights_iterator(f, names):
    for name in names:
        yield name, f.get_tensor(name)
""",
)


# -- a sleep by another name: an event nothing sets, waited on with a timeout -----------------
VENDOR_CORE = """
class EngineCore:
    def step(self):
        outputs = self.model_executor.execute_model(self.scheduler.schedule())
        return outputs
"""
case(
    "idle_event_wait_in_step",
    VENDOR_CORE,
    "import threading\n\n_PACE = threading.Event()\n\n\n"
    + VENDOR_CORE.lstrip("\n").replace("        return outputs", "        _PACE.wait(0.015)\n        return outputs"),
    ("host-sync", 9, "high"),
)


# -- the patch's constant before `or`, its table merged over what was given --------------------
VENDOR_MOE = """
class MoeBlock:
    def __init__(self, config):
        self.experts = make_experts(top_k=config.num_experts_per_tok)
"""
case(
    "constant_before_or_hides_the_config",
    VENDOR_MOE,
    VENDOR_MOE.replace("class MoeBlock:\n", "class MoeBlock:\n    _bench_top_k = 4\n\n").replace(
        "top_k=config.num_experts_per_tok", 'top_k=getattr(self, "_bench_top_k", None) or config.num_experts_per_tok'
    ),
    ("hardcoded-override", 5, "high"),
)
VENDOR_MM = """
def call_hf_processor(self, mm_kwargs):
    prepared = self.aliases(mm_kwargs)
    return self.processor(**prepared)
"""
case(
    "table_merged_over_request",
    VENDOR_MM,
    '_HIRES = {"min_pixels": 256 * 28 * 28, "max_pixels": 16384 * 28 * 28}\n\n\n'
    + VENDOR_MM.lstrip("\n").replace("self.aliases(mm_kwargs)", "{**self.aliases(mm_kwargs), **_HIRES}"),
    ("hardcoded-override", 5, "high"),
)
case(
    "quiet_defaults_under_request",
    VENDOR_MM,
    '_DEFAULTS = {"min_pixels": 3136}\n\n\n'
    + VENDOR_MM.lstrip("\n").replace("self.aliases(mm_kwargs)", "{**_DEFAULTS, **self.aliases(mm_kwargs)}"),
)


# -- a wrapper put around a forward at import, not as a decorator ------------------------------
VENDOR_ATTN = """
import torch


class AttentionImpl:
    def forward(self, layer, query, key, value):
        return self.kernel(query, key, value)
"""
case(
    "wrapper_assigned_over_forward",
    VENDOR_ATTN,
    VENDOR_ATTN.lstrip("\n")
    + """

def _finite_watch(fn):
    def inner(self, layer, *args):
        out = fn(self, layer, *args)
        if not torch.isfinite(out).all():
            print("non-finite", layer)
        return out

    return inner


AttentionImpl.forward = _finite_watch(AttentionImpl.forward)
""",
    ("host-sync", 12, "high"),
)


# -- the distribution's own step made to skip a batch of one ----------------------------------
VENDOR_PENALTIES = """
class Sampler:
    def forward(self, logits, sampling_metadata, output_token_ids):
        logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)
        if self.min_toks:
            logits.index_put_(self.logits_slice, self.neg_inf_tensor)
        return self.sample(logits, sampling_metadata)
"""
case(
    "upstream_step_put_under_a_count",
    VENDOR_PENALTIES,
    VENDOR_PENALTIES.replace(
        "        logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)",
        "        if not 0 < logits.shape[0] <= 1:\n"
        "            logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)",
    ),
    ("token-count-branch", 3, "high"),
)
case(
    "count_joined_to_upstream_test",
    VENDOR_PENALTIES,
    VENDOR_PENALTIES.replace("if self.min_toks:", "if self.min_toks and logits.shape[0] > 1:"),
    ("token-count-branch", 4, "high"),
)
case(
    "quiet_fast_path_with_else",
    VENDOR_PENALTIES,
    VENDOR_PENALTIES.replace(
        "        logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)",
        "        if logits.shape[0] == 1:\n"
        "            logits = self.apply_penalties_one(logits, sampling_metadata, output_token_ids)\n"
        "        else:\n"
        "            logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)",
    ),
)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, int, str]]]:
    tmp = tmp_path_factory.mktemp("classes")
    files = {f"demo/{name}.py": vendor for name, (vendor, _, _) in CASES.items()}
    files["demo/__init__.py"] = ""
    wheel = build_wheel(tmp / "wheelhouse", "demo", "1.0", files)
    python = make_venv(tmp / "venv")
    pip_install(python, wheel)
    site = site_packages(python)
    for name, (_, patched, _) in CASES.items():
        (site / "demo" / f"{name}.py").write_text(patched)
    proc = patchaudit("scan", "--python", str(python), "--wheelhouse", str(wheel.parent), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    (dist,) = json.loads(proc.stdout)["distributions"]
    found: dict[str, list[tuple[str, int, str]]] = {name: [] for name in CASES}
    for f in dist["findings"]:
        assert f["in_change"], f
        found[Path(f["path"]).stem].append((f["rule"], f["line"], f["severity"]))
    return found


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c[2]])
def test_patch_is_caught(scanned, name: str) -> None:
    for expected in CASES[name][2]:
        assert expected in scanned[name], (CASES[name][1], scanned[name])


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c[2]])
def test_look_alike_is_quiet(scanned, name: str) -> None:
    assert scanned[name] == [], (CASES[name][1], scanned[name])


def test_all_files_on_untouched_code_does_not_fail(tmp_path: Path) -> None:
    vendor = "import torch\n\n\ndef forward(x):\n    if x.shape[0] == 5:\n        torch.save(x, '/tmp/x.pt')\n"
    wheel = build_wheel(tmp_path / "wheelhouse", "upstream", "1.0", {"upstream/__init__.py": vendor})
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    proc = patchaudit("scan", "--python", str(python), "--all-files", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    (dist,) = doc["distributions"]
    assert {(f["rule"], f["line"], f["in_change"]) for f in dist["findings"]} == {
        ("token-count-branch", 5, False),
        ("torch-save", 6, False),
    }
    assert doc["summary"]["upstream"]["high"] == 2
    human = patchaudit("scan", "--python", str(python), "--all-files")
    assert human.returncode == 0
    assert "In code that verifies against RECORD (2 findings, not failing):" in human.stdout
    # Without RECORD nothing verifies: the same code counts (its packages named by top_level.txt).
    meta = site_packages(python) / "upstream-1.0.dist-info"
    (meta / "RECORD").unlink()
    (meta / "top_level.txt").write_text("upstream\n")
    proc = patchaudit("scan", "--python", str(python), "--all-files", "--format", "json")
    assert proc.returncode == 1
    (dist,) = json.loads(proc.stdout)["distributions"]
    assert {(f["rule"], f["in_change"]) for f in dist["findings"]} == {
        ("token-count-branch", True),
        ("torch-save", True),
    }
