"""The README is a front page and docs/ holds the rest: the set-up commands stay exact, every section the
README had keeps a home, the rule catalogue is what the rules say, every command's page names every
option it has, the policy page every key, and no link points nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import click

from patchaudit.cli.group import cli
from patchaudit.gate.policy import POLICY_KEYS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Every section heading of the README before it became a front page: each keeps a home.
HEADINGS = (
    "Quickstart",
    "Environment layouts",
    "OS-packaged distributions",
    "Images and containers",
    "What `scan` checks",
    "See the patch, put it back",
    "Trust model: root against a tree another user may write",
    "Running services: what still runs the old code",
    "Serving path: which drift runs for the model you serve",
    "Hazards: can the patch hurt serving?",
    "The gate: before every service start",
    "Hostile trees: what a run reads, and how long it may take",
    "Where the caches live",
    "Model directories: the weights and configs the service loads",
    "Many hosts: a Ray cluster, and Prometheus",
    "Report contract",
    "Exit codes",
    "Benchmarks",
)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_the_two_set_up_commands_are_on_the_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "\npython3 -m venv .venv && .venv/bin/pip install . && .venv/bin/patchaudit scan\n" in readme
    assert "\nbash .ci/run\n" in readme
    assert len(readme.splitlines()) < 200


def test_every_section_of_the_old_readme_has_a_home() -> None:
    headings = {
        line.lstrip("#").strip() for page in pages() for line in page.read_text().splitlines() if line.startswith("#")
    }
    assert [h for h in HEADINGS if h not in headings] == []


def test_the_rule_catalogue_is_what_the_rules_say() -> None:
    from patchaudit.hazards import load_rules
    from patchaudit.models.configrules import catalog
    from patchaudit.render.catalogue import render_catalogue

    written = (DOCS / "rules.md").read_text()
    assert written == render_catalogue(load_rules(), catalog()), (
        "docs/rules.md is stale: patchaudit rules list --format markdown --out docs/rules.md"
    )
    for rule in load_rules():
        assert f"\n### {rule.ID}\n" in written and rule.EXPLANATION.strip() in written


def test_every_command_page_names_every_option() -> None:
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        page = (DOCS / "commands" / f"{name}.md").read_text()
        subs = command.commands.values() if isinstance(command, click.Group) else [command]
        for sub in subs:
            if sub.hidden:
                continue
            for param in sub.params:
                if isinstance(param, click.Option) and not param.hidden:
                    assert max(param.opts, key=len) in page, f"docs/commands/{name}.md: {sub.name} {param.opts}"


def test_every_policy_key_is_documented() -> None:
    page = (DOCS / "policy.md").read_text()
    assert [k for k in sorted(POLICY_KEYS) if f"| `{k}` |" not in page] == []


def test_no_link_points_nowhere() -> None:
    broken = []
    for page in pages():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_file_the_docs_name_exists() -> None:
    """A file of the tree named in backquotes (`patchaudit/fs/safefs.py`) is there: a move updates the docs."""
    named = {
        path
        for page in pages()
        for path in re.findall(r"`((?:patchaudit|bench|tests|baselines|rules)/[\w./-]+\.\w+)`", page.read_text())
    }
    assert named and sorted(p for p in named if not (ROOT / p).exists()) == []
