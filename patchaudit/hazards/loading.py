"""Find and load rule packs: the built-in one and a user's directories."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from patchaudit.errors import InvalidRulePack
from patchaudit.hazards.engine_rules import ENGINE_RULES
from patchaudit.report import Severity
from patchaudit.rule import Rule

__all__ = ["builtin_rules_dir", "load_rules", "pack_version"]


def builtin_rules_dir() -> Path:
    """The built-in pack: `patchaudit/_rules` in a wheel, `<repo>/rules` in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "_rules"
    if installed.is_dir():
        return installed
    return package.parent / "rules"


def _load_rule_file(path: Path) -> type[Rule]:
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:12]
    module_name = f"patchaudit._loaded_rules.r{digest}_{path.stem.replace('-', '_')}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise InvalidRulePack(f"{path}: cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[module_name]
            raise InvalidRulePack(f"{path}: {type(exc).__name__}: {exc}") from exc
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Rule)
        and obj is not Rule
        and obj.__module__ == module_name
        and obj.ID
    ]
    if len(found) != 1:
        raise InvalidRulePack(f"{path}: a rule file defines exactly one Rule subclass with an ID, found {len(found)}")
    rule = found[0]
    problems = [attr for attr in ("MESSAGE", "EXPLANATION") if not getattr(rule, attr)]
    if not isinstance(rule.SEVERITY, Severity):
        problems.append("SEVERITY")
    if problems:
        raise InvalidRulePack(f"{path}: rule {rule.ID} does not declare {', '.join(problems)}")
    rule.SOURCE_FILE = str(path)
    return rule


@lru_cache(maxsize=16)
def _load_rules_cached(dirs: tuple[str, ...]) -> tuple[type[Rule], ...]:
    rules: dict[str, type[Rule]] = {}
    for directory in dirs:
        path = Path(directory)
        if not path.is_dir():
            raise InvalidRulePack(f"rule directory {path} does not exist")
        for file in sorted(path.glob("*.py")):
            if file.name.startswith("_"):
                continue
            rule = _load_rule_file(file)
            if rule.ID in rules or rule.ID in ENGINE_RULES:
                raise InvalidRulePack(
                    f"{file}: rule id {rule.ID} is already defined",
                    hint="give a user rule an id of its own",
                )
            rules[rule.ID] = rule
    return tuple(rules.values())


def load_rules(rule_dirs: Sequence[Path] = (), *, builtin: bool = True) -> list[type[Rule]]:
    """The built-in pack (unless builtin=False) plus the rules in `rule_dirs`, in load order."""
    dirs = ([builtin_rules_dir()] if builtin else []) + [Path(d) for d in rule_dirs]
    return list(_load_rules_cached(tuple(str(d.resolve()) for d in dirs)))


def pack_version(rules: Sequence[type[Rule]]) -> str:
    """A hash of the rule files and the engine: the cache key half that is not the file."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    engine = [*sorted((package / "hazards").glob("*.py")), *sorted((package / "analysis").glob("*.py"))]
    for engine_file in [*engine, Path(inspect.getfile(Rule))]:
        h.update(engine_file.read_bytes())
    for rule in rules:
        h.update(rule.ID.encode() + b"\0")
        if rule.SOURCE_FILE:
            h.update(Path(rule.SOURCE_FILE).read_bytes())
    return h.hexdigest()
