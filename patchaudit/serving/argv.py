"""The model a server serves, from its command line: a running process's argv or a unit's ExecStart=.

Recognised: `vllm serve MODEL` (also `python -m vllm.entrypoints.cli.main serve MODEL`), `--model MODEL`
(vLLM's older `python -m vllm.entrypoints.openai.api_server`), and SGLang's `--model-path MODEL`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from patchaudit.errors import PatchAuditError

MODEL_FLAGS = ("--model", "--model-path", "--model_path")
# Options of `vllm serve` that take a value and may stand before the model.
_SERVE_VALUE_OPTIONS = ("--config",)


def model_from_argv(argv: Sequence[str]) -> str | None:
    """The model named on a server's command line, or None when none is named."""
    args = list(argv)
    for n, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in MODEL_FLAGS:
            if eq:
                return value or None
            return args[n + 1] if n + 1 < len(args) else None
    if not any(_is_vllm(a) for a in args[:3]) or "serve" not in args:
        return None
    rest = args[args.index("serve") + 1 :]
    skip = False
    for arg in rest:
        if skip:
            skip = False
            continue
        if arg in _SERVE_VALUE_OPTIONS:
            skip = True
            continue
        if not arg.startswith("-"):
            return arg
    return None


def _is_vllm(arg: str) -> bool:
    return os.path.basename(arg) == "vllm" or arg.startswith("vllm.entrypoints")


def model_from_unit(spec: str) -> str:
    """`unit:NAME` (found as systemd finds it) or `unit:/path/to/NAME.service`: the model its ExecStart= serves,
    the command line read as systemd reads it (quotes, C escapes, `%` specifiers such as a template's `%i`)."""
    from patchaudit.procs.unitfile import UnitFiles, exec_start, find, system_manager
    from patchaudit.procs.unitsyntax import Specifiers, SyntaxProblem, expand, words

    name = spec.removeprefix("unit:")
    if name.startswith("/"):
        files = UnitFiles(unit=os.path.basename(name), fragment=Path(name), drop_ins=(), drop_in_dirs=())
    else:
        files = find(name)
    line = exec_start(files)
    if line is None:
        raise PatchAuditError(f"{name}: no ExecStart= to read the served model from")
    fragment = str(files.fragment) if files.fragment is not None else ""
    specifiers = Specifiers(unit=files.unit, fragment=fragment, manager=system_manager())
    try:
        argv = [expand(word, specifiers) for word in words(line)]
    except SyntaxProblem as exc:
        raise PatchAuditError(f"{name}: ExecStart= cannot be read as systemd reads it ({exc})") from None
    if argv:
        argv[0] = argv[0].lstrip("@-:+!|")
    model = model_from_argv(argv)
    if model is None:
        raise PatchAuditError(f"{name}: ExecStart= names no model (`vllm serve MODEL`, --model, --model-path)")
    return model


def own_unit() -> str:
    """The systemd unit this process runs in (a gate's ExecStartPre= runs in its service's cgroup)."""
    from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped
    from patchaudit.procs.cgroup import unit_of
    from patchaudit.procs.proc import parse_cgroup

    try:
        unit = unit_of(parse_cgroup(read_capped("/proc/self/cgroup", Cap.PROC)))
    except UnreadableFile:
        unit = None
    if unit is None or not unit.endswith(".service"):
        raise PatchAuditError("--serve auto: this process runs in no systemd service", hint="--serve MODEL")
    return unit


def resolve_spec(spec: str) -> str:
    """What `--serve` was given, as a model: `auto` (the gate's own unit), `unit:...`, or the model itself."""
    if spec == "auto":
        return model_from_unit(f"unit:{own_unit()}")
    if spec.startswith("unit:"):
        return model_from_unit(spec)
    return spec
