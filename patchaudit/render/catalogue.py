"""The rule catalogue as Markdown (docs/rules.md): written from each rule's own text and examples,
so that the page says what the code does (`patchaudit rules list --format markdown`)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchaudit.models.configrules import ConfigRule
    from patchaudit.rule import Rule

HEADER = """\
# Rule catalogue

Written by `patchaudit rules list --format markdown --out docs/rules.md` from each rule's own
docstring, explanation and examples; a test keeps this page equal to that output. `patchaudit rules
explain ID` prints one rule, `patchaudit rules test` runs every example below.

Code rules judge Python (and `.pth`) files that changed; config rules judge a model's JSON configs
(`patchaudit model scan`). A finding's severity can be changed per rule by the policy's `[severity]`
table, and silenced in a line by `# patchaudit: ignore[ID]`.

| rule | severity | what it flags |
|---|---|---|
"""


def render_catalogue(rules: Sequence[type[Rule]], config_rules: Sequence[ConfigRule]) -> str:
    """One table of every rule, then a section per rule: its summary, explanation and examples."""
    rows = [f"| [{r.ID}](#{r.ID}) | {r.SEVERITY.value} | {_cell(r.MESSAGE)} |" for r in rules]
    rows += [f"| [{r.ID}](#{r.ID}) | {r.SEVERITY.value} | {_cell(r.MESSAGE)} |" for r in config_rules]
    parts = [HEADER + "\n".join(rows) + "\n", "## Code rules\n"]
    parts += [_code_rule(rule) for rule in rules]
    parts.append("## Config rules\n")
    parts += [_config_rule(rule) for rule in config_rules]
    return "\n".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _visible(code: str) -> str:
    """Control characters other than newline and tab written as Python escapes (`\\r`, `\\x0c`): an
    example that hides code behind a carriage return shows it."""
    return "".join(ch if ch in "\n\t" or ch.isprintable() else repr(ch)[1:-1] for ch in code)


def _summary(rule: type[Rule]) -> str:
    """The rule's own docstring, else its module's (a rule file opens with `ID: what it catches.`)."""
    own = rule.__dict__.get("__doc__")
    if own:
        return inspect.cleandoc(own)
    module = inspect.getmodule(rule)
    return inspect.cleandoc(module.__doc__) if module is not None and module.__doc__ else ""


def _code_rule(rule: type[Rule]) -> str:
    from patchaudit.rule import Example

    out = [f"### {rule.ID}\n", f"Severity **{rule.SEVERITY.value}**: {rule.MESSAGE}\n"]
    summary = _summary(rule)
    if summary:
        out.append(summary + "\n")
    if rule.EXPLANATION.strip():
        out.append(rule.EXPLANATION.strip() + "\n")
    for title, examples in (("Flagged", rule.INVALID), ("Not flagged", rule.VALID)):
        if not examples:
            continue
        out.append(f"{title}:\n")
        for example in examples:
            code = example.code if isinstance(example, Example) else example
            fence = "```python" if (example.path if isinstance(example, Example) else "x.py").endswith(".py") else "```"
            out.append(f"{fence}\n{_visible(code.strip(chr(10)))}\n```\n")
    return "\n".join(out)


def _config_rule(rule: ConfigRule) -> str:
    out = [f"### {rule.ID}\n", f"Severity **{rule.SEVERITY.value}**: {rule.MESSAGE}\n"]
    if rule.EXPLANATION.strip():
        out.append(rule.EXPLANATION.strip() + "\n")
    for title, examples in (("Flagged", rule.INVALID), ("Not flagged", rule.VALID)):
        if not examples:
            continue
        out.append(f"{title}:\n")
        for example in examples:
            out.append(f"```\n{example.file}: {example.before}\n{example.file}: {example.after}\n```\n")
    return "\n".join(out)
