"""What a process is known to have loaded, beyond what it maps: its entry module, read from its command line.

`python -m pkg.mod` imports `pkg/__init__.py` and `pkg/mod.py` (or `pkg/mod/__main__.py`); `python
script.py` runs the script; a console script (`bin/vllm`) imports the module its `from X import main`
line names. Any other pure-Python module may or may not have been imported: /proc does not say.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from patchaudit.fs.safefs import UnreadableFile, read_capped

# Interpreter options that take the next argument as their value.
_WITH_VALUE = {"-W", "-X", "--check-hash-based-pycs"}
_IMPORT_LINE = re.compile(rb"^from ([A-Za-z_][\w.]*) import ", re.MULTILINE)
SCRIPT_CAP = 64 << 10


def entry(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """(module run with -m, script path) from an interpreter's argv; (None, None) for -c, -, or nothing."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return None, argv[i + 1] if i + 1 < len(argv) else None
        if arg in ("-c", "-"):
            return None, None
        if arg == "-m":
            return (argv[i + 1] if i + 1 < len(argv) else None), None
        if arg.startswith("-") and not arg.startswith("--"):
            flags = arg[1:]
            for n, flag in enumerate(flags):
                if flag in "cm":  # `-um mod`, `-mmod`, `-uc code`
                    rest = flags[n + 1 :] or (argv[i + 1] if i + 1 < len(argv) else "")
                    return (rest or None, None) if flag == "m" else (None, None)
                if flag in "WX":  # the rest of the word, or the next argument, is its value
                    if n == len(flags) - 1:
                        i += 1
                    break
            i += 1
            continue
        if arg in _WITH_VALUE:
            i += 2
            continue
        if arg.startswith("--"):
            i += 1
            continue
        return None, arg
    return None, None


def module_files(module: str, site_dirs: Sequence[str]) -> set[str]:
    """The files importing `module` runs: each package's `__init__.py` on the way, and the module itself."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return set()
    found: set[str] = set()
    for site in site_dirs:
        base = site
        for part in parts[:-1]:
            base = os.path.join(base, part)
            found.add(os.path.join(base, "__init__.py"))
        last = os.path.join(base, parts[-1])
        found.update((last + ".py", os.path.join(last, "__init__.py"), os.path.join(last, "__main__.py")))
    return {os.path.normpath(f) for f in found if os.path.isfile(f)}


def loaded_files(argv: Sequence[str], cwd: str | None, site_dirs: Sequence[str]) -> set[str]:
    """Absolute paths of the files the command line says the process ran (entry module, script)."""
    module, script = entry(argv)
    if module is not None:
        return module_files(module, site_dirs)
    if script is None:
        return set()
    path = os.path.normpath(script if os.path.isabs(script) else os.path.join(cwd or "/", script))
    found = {path}
    try:
        head = read_capped(path, SCRIPT_CAP, follow=True)
    except UnreadableFile:
        return found
    match = _IMPORT_LINE.search(head)
    if match is not None:  # a console script: `from vllm.entrypoints.cli.main import main`
        found |= module_files(match.group(1).decode("ascii"), site_dirs)
    return found
