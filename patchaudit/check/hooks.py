"""Startup hooks: `.pth` lines and `sitecustomize`/`usercustomize` modules that run at every interpreter
start; those no distribution owns are drift, and their executable lines findings."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from patchaudit.analysis.lines import pth_executable_lines, source_lines
from patchaudit.check.ownership import Ownership, file_digest, is_bytecode_of_known_source, walk
from patchaudit.fs.safefs import Cap, UnreadableFile, Why, read_capped
from patchaudit.report import Drift, DriftState, Finding, Severity
from patchaudit.target.environment import Environment
from patchaudit.target.record import encode_digest

STARTUP_HOOK = "startup-hook"

# site.py imports these by module name: a .py, a .pyc, an extension module or a package all run.
CUSTOMIZE_NAMES = ("sitecustomize", "usercustomize")

# Startup hooks that environment managers write and no RECORD owns, recognised by content.
_VIRTUALENV_PTH = "import _virtualenv"
_SETUPTOOLS_DISTUTILS_PTH = re.compile(
    r"import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os\.environ\.get\(var, '(local|stdlib)'\) == 'local'; "
    r"enabled and __import__\('_distutils_hack'\)\.add_shim\(\);?"
)

# sha256 of the `_virtualenv.py` that virtualenv and uv have written beside `_virtualenv.pth`, release by
# release (read from their published wheels). Anything else under that name runs unknown code.
KNOWN_VIRTUALENV_MODULES = frozenset(
    {
        "0278334cdcfab4c746b4416fbd5c2b6e7da937c81e132397d62c361d404ebe0e",  # virtualenv 21.10.0 .. virtualenv 21.9.1
        "02943e192823d75212f206e1f2991ac572119882683a95dfbb7a1b913d7b14b5",  # virtualenv 20.38.0 .. virtualenv 21.0.0
        "0aeb86546345c1d0fada097536e35525714d5cdbcc2d8eb3f9912a955044fcff",  # virtualenv 20.24.0 .. uv 0.0.5
        "0f20351ea7e90039c46d3fabdef991f28b1e3ff33eb13ee6f0d5cd21ea0e8b14",  # virtualenv 20.25.3 .. virtualenv 20.35.2
        "119e4eb9c1a39e6ffd220840844bd326fa1bd3acf2f1c9fa0612949aedc228a5",  # virtualenv 20.23.1
        "460589e83387d4dfe5fd84d41c5f6979599f5cd080983d73c832549161c80435",  # virtualenv 21.4.0 .. virtualenv 21.6.1
        "684b8c07932ba4a84ac2e5ae9afe49ef04e92bac3d8d4191d455cf09d093e5fc",  # virtualenv 20.0.35 .. virtualenv 20.9.0
        "6cf30c56faf2a55228914dbbd17f8088ed371ebb08f5e7fa6fd931f913fcaf1d",  # uv 0.11.0 .. uv 0.4.30
        "bec6155ff7bfc88f8e79e481f27fd7ee0a3b40eeca9bfeb41f4c4b997b2f8100",  # virtualenv 20.35.4 .. virtualenv 20.36.1
        "c9199315871b11b12df226f890a38e66e63191e1adbfb11a66e6861151b33fca",  # virtualenv 20.16.7 .. virtualenv 20.21.1
        "ce57d5e0d9b5d7356cb42da7450ba8f9359bdf693e335f4c921626943c77e64d",  # virtualenv 20.13.4 .. virtualenv 20.16.0
        "cfb3db86aaa53bb62b5ff764970bec2d71c9228590a0ebec57f6ec926cc0bf1a",  # uv 0.13.9 .. uv 0.11.33
        "cfe56cafbd68fd31a0e87100f111d7d2f6b7157241096500013c07e88d80a22f",  # virtualenv 21.15.11
        "e3e10c8a19a62a49928c139b8e6824eac92dcdda7639953bcd10921011cbbdff",  # uv 0.4.0 .. uv 0.3.0
        "e8c426ce260f866254ff35cefedc8b3efbd6d1446d99d7a4cdeb0095f98a8b8f",  # virtualenv 21.1.0 .. virtualenv 21.3.3
        "ee52b2e2e720a40885a6b4b90c40e28e5c70e550af74d5efd169eaa5db2a6f6f",  # uv 0.2.37 .. uv 0.1.45
        "f4dfaeb9efc1614890cfa94ed15bbe9b2ee15fbe76d569ef5e435e93e4987dc7",  # virtualenv 20.22.0 .. virtualenv 20.23.0
    }
)

_KNOWN_VIRTUALENV_B64 = frozenset(encode_digest(bytes.fromhex(h)) for h in KNOWN_VIRTUALENV_MODULES)


def startup_hook_lines(text: str) -> list[int]:
    """Line numbers of a .pth file that site.py executes rather than adds to sys.path."""
    return pth_executable_lines(text)


def startup_hooks(env: Environment, ownership: Ownership) -> tuple[list[Drift], list[Finding]]:
    """Unowned .pth files with code and *customize modules, in every site directory.

    Paths are relative to the first site directory, as RECORD paths are; hooks in the others are named
    by absolute path, so two hooks of one name in two directories stay two entries.
    """
    drift: list[Drift] = []
    findings: list[Finding] = []
    for index, site_dir in enumerate(env.site_dirs):
        try:
            names = sorted(os.listdir(site_dir))
        except OSError:
            continue
        hooks = [n for n in names if n.endswith(".pth") or n.partition(".")[0] in CUSTOMIZE_NAMES]
        for bare in hooks:
            path = site_dir / bare
            name = bare if index == 0 else str(path)
            if bare.partition(".")[0] in CUSTOMIZE_NAMES:
                if not _owned_module(ownership, site_dir, bare, path):
                    message = f"{bare} runs in every process of this environment and no distribution owns it"
                    note = "startup hook (package)" if path.is_dir() else "startup hook"
                    drift.append(Drift(path=name, state=DriftState.ADDED, actual=file_digest(path), note=note))
                    findings.append(_hook_finding(name, 1, Severity.HIGH, message))
                continue
            if path.is_dir() or ownership.owners(site_dir, bare):
                continue
            try:
                data = read_capped(path, Cap.PTH, follow=True)  # site.py follows a linked .pth too
            except UnreadableFile as exc:
                if exc.why is not Why.MISSING:
                    drift.append(
                        Drift(
                            path=name, state=DriftState.ADDED, note=f"startup file that cannot be read: {exc.why.value}"
                        )
                    )
                    findings.append(
                        _hook_finding(name, 1, Severity.HIGH, f"{bare} is {exc.why.value}: it cannot be checked")
                    )
                continue
            text = data.decode("utf-8", "replace")
            digest = f"sha256={encode_digest(hashlib.sha256(data).digest())}"
            lines = startup_hook_lines(text)
            if not lines:
                findings.append(_hook_finding(name, 1, Severity.INFO, "adds paths to sys.path; no code runs"))
                continue
            if text.strip() == _VIRTUALENV_PTH:
                module = file_digest(site_dir / "_virtualenv.py")
                if module is not None and module.partition("=")[2] in _KNOWN_VIRTUALENV_B64:
                    message = f"virtualenv/uv startup hook (known; _virtualenv.py {module})"
                    findings.append(_hook_finding(name, 1, Severity.INFO, message))
                    continue
                message = f"_virtualenv.py ({module}) is not any virtualenv or uv release's: it runs at every start"
                drift.append(Drift(path=name, state=DriftState.ADDED, actual=digest, note="startup hook"))
                findings.append(_hook_finding(name, 1, Severity.HIGH, message))
                continue
            if _SETUPTOOLS_DISTUTILS_PTH.fullmatch(text.strip()):
                message = "setuptools' distutils shim (known), left by an install without RECORD"
                findings.append(_hook_finding(name, 1, Severity.INFO, message))
                continue
            message = f"executes code at every interpreter start and no distribution owns it: {_first(text)}"
            drift.append(Drift(path=name, state=DriftState.ADDED, actual=digest, note="startup hook"))
            findings.append(_hook_finding(name, lines[0], Severity.HIGH, message))
    return drift, findings


def _owned_module(ownership: Ownership, site_dir: Path, bare: str, path: Path) -> bool:
    if path.is_dir() and not path.is_symlink():
        owners = ownership.dir_owners(site_dir, bare)
        owned = lambda rel: bool(ownership.owners(site_dir, rel))  # noqa: E731
        unowned = [
            rel
            for rel, _ in walk(site_dir, bare)
            if not owned(rel) and not is_bytecode_of_known_source(rel, owned, site_dir)
        ]
        return bool(owners) and not unowned
    return bool(ownership.owners(site_dir, bare))


def _first(text: str) -> str:
    line = next((ln for ln in source_lines(text) if ln.startswith(("import ", "import\t"))), "")
    return line if len(line) <= 80 else line[:77] + "..."


def _hook_finding(path: str, line: int, severity: Severity, message: str) -> Finding:
    return Finding(rule=STARTUP_HOOK, severity=severity, path=path, line=line, message=message, in_change=True)
