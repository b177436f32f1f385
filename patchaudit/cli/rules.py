"""`patchaudit rules list|explain|test`: the hazard rule pack and a user's own rules."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from patchaudit.cli.common import write_output
from patchaudit.cli.examples import examples as help_examples
from patchaudit.cli.options import format_option, out_option, rules_option
from patchaudit.errors import ExitCode

if TYPE_CHECKING:
    from patchaudit.models.configrules import ConfigRule


@click.group(epilog=help_examples("rules"))
def rules() -> None:
    """The hazard rules: what each one catches, and a check of a pack's own examples."""


@rules.command("list", epilog=help_examples("rules list"))
@rules_option
@format_option("human", "markdown")
@out_option
def list_(rule_dirs: tuple[Path, ...], fmt: str, out: Path | None) -> int:
    """One line per rule: id, default severity, message; `--format markdown`: the whole catalogue
    (each rule's explanation and examples, as docs/rules.md holds it)."""
    from patchaudit.hazards import load_rules
    from patchaudit.models.configrules import catalog

    if fmt == "markdown":
        from patchaudit.render.catalogue import render_catalogue

        write_output(render_catalogue(load_rules(rule_dirs), catalog()), out)
        return ExitCode.CLEAN
    lines = [f"{rule.ID:<20} {rule.SEVERITY.value:<7} {rule.MESSAGE}\n" for rule in load_rules(rule_dirs)]
    lines += [f"{rule.ID:<20} {rule.SEVERITY.value:<7} {rule.MESSAGE}\n" for rule in catalog()]
    write_output("".join(lines), out)
    return ExitCode.CLEAN


@rules.command("explain", epilog=help_examples("rules explain"))
@click.argument("rule_id")
@rules_option
def explain(rule_id: str, rule_dirs: tuple[Path, ...]) -> int:
    """What RULE_ID catches, why it matters, and its examples."""
    from patchaudit.errors import PatchAuditError
    from patchaudit.hazards import load_rules
    from patchaudit.rule import Example

    found = {r.ID: r for r in load_rules(rule_dirs)}
    rule = found.get(rule_id)
    if rule is None:
        from patchaudit.models.configrules import catalog

        config_rule = next((r for r in catalog() if rule_id == r.ID), None)
        if config_rule is not None:
            _explain_config(config_rule)
            return ExitCode.CLEAN
        import difflib

        from patchaudit.models.configrules import catalog

        ids = [*found, *(r.ID for r in catalog())]
        close = difflib.get_close_matches(rule_id.replace("_", "-").lower(), ids, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else "`patchaudit rules list` shows the ids"
        raise PatchAuditError(f"no rule {rule_id!r}", hint=hint)
    click.echo(f"{rule.ID} ({rule.SEVERITY.value}): {rule.MESSAGE}\n")
    click.echo(rule.EXPLANATION.strip() + "\n")
    for title, examples in (("Flagged", rule.INVALID), ("Not flagged", rule.VALID)):
        click.echo(f"{title}:")
        for example in examples:
            code = example.code if isinstance(example, Example) else example
            click.echo("    " + code.rstrip("\n").replace("\n", "\n    "))
            click.echo("    ---")
    return ExitCode.CLEAN


def _explain_config(rule: ConfigRule) -> None:
    click.echo(f"{rule.ID} ({rule.SEVERITY.value}, config rule): {rule.MESSAGE}\n")
    click.echo(rule.EXPLANATION.strip() + "\n")
    for title, examples in (("Flagged", rule.INVALID), ("Not flagged", rule.VALID)):
        if examples:
            click.echo(f"{title}:")
        for example in examples:
            click.echo(f"    {example.file}: {example.before}")
            click.echo(f"    {' ' * len(example.file)}  {example.after}")
            click.echo("    ---")


@rules.command("test", epilog=help_examples("rules test"))
@click.argument("directory", required=False, type=click.Path(path_type=Path, file_okay=False))
def test(directory: Path | None) -> int:
    """Run a pack's own VALID/INVALID examples (default: the built-in pack); exit 1 on a failure."""
    from patchaudit.hazards import load_rules, run_examples

    pack = load_rules([directory], builtin=False) if directory is not None else load_rules()
    results = run_examples(pack)
    failed = [r for r in results if not r.ok]
    for result in failed:
        where = f"{result.kind.upper()}[{result.index}]" if result.index >= 0 else result.kind.upper()
        click.echo(f"FAIL {result.rule} {where}: {result.problem}")
    config_failed: list[str] = []
    if directory is None:
        from patchaudit.models.configrules import example_problems

        config_failed = example_problems()
        for problem in config_failed:
            click.echo(f"FAIL {problem}")
    passed, failing = len(results) - len(failed), len(failed) + len(config_failed)
    if directory is None:
        from patchaudit.models.configrules import catalog

        config_rules = len(catalog())
        passed += sum(len(r.INVALID) + len(r.VALID) for r in catalog()) - len(config_failed)
        total = f"{len(pack) + config_rules} rules ({len(pack)} code rules, {config_rules} config rules)"
    else:
        total = f"{len(pack)} rules"
    click.echo(f"{total}, {passed} passed, {failing} failed")
    return ExitCode.PROBLEMS if failed or config_failed else ExitCode.CLEAN
