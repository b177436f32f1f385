from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# Every JSON report a test makes patchaudit write is parsed again here by a strict parser (RFC 8259: no
# NaN, no Infinity), whatever the test itself looks at: a report another program cannot read is a defect.
_JSON_FORMATS = {"json", "sarif"}
_not_strict: list[str] = []
_real_run = subprocess.run


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict_problem(text: str) -> str | None:
    try:
        json.loads(text)
    except ValueError:
        return None  # not a single JSON document (a stream of lines, an error message): not a report
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        return str(exc)
    return None


def _check_reports(args: Any, proc: Any) -> None:
    argv = [str(a) for a in args] if isinstance(args, list | tuple) else []
    if not any("patchaudit" in a for a in argv[:3]):
        return
    pairs = list(zip(argv, argv[1:], strict=False))
    fmt = next((b for a, b in pairs if a == "--format"), None)
    if fmt not in _JSON_FORMATS:
        return
    texts: list[tuple[str, str]] = []
    out = next((b for a, b in pairs if a == "--out"), None)
    if out is not None and out != "-":
        with contextlib.suppress(OSError, UnicodeDecodeError):
            texts.append((out, Path(out).read_text("utf-8")))
    elif isinstance(proc.stdout, str | bytes):
        stdout = proc.stdout if isinstance(proc.stdout, str) else proc.stdout.decode("utf-8", "replace")
        texts.append(("stdout", stdout))
    for where, text in texts:
        problem = _strict_problem(text)
        if problem is not None:
            _not_strict.append(f"{' '.join(argv[:6])} ... ({where}): {problem}")


def _run(*args: Any, **kwargs: Any) -> Any:
    proc = _real_run(*args, **kwargs)
    _check_reports(args[0] if args else kwargs.get("args"), proc)
    return proc


subprocess.run = _run  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _json_reports_are_strict() -> Iterator[None]:
    _not_strict.clear()
    yield
    found = list(_not_strict)
    _not_strict.clear()
    assert not found, "patchaudit wrote JSON a strict parser refuses:\n" + "\n".join(found)
