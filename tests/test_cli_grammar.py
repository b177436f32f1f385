"""One grammar for the whole command line: an option name means the same on every command, every
command that reads an environment takes the same target group, old spellings still work for a release
(saying so on stderr), and every command's --help ends with examples that parse."""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import click
from model_helpers import run

from patchaudit.cli.examples import EXAMPLES
from patchaudit.cli.group import cli
from patchaudit.cli.options import Renamed

# What may differ between two commands' declarations of one option name, and why.
VARIES: dict[str, tuple[set[str], str]] = {
    "--format": ({"type", "default"}, "each command offers the formats its output has; the gate's is the journal"),
    "--timeout": ({"help", "default"}, "the help names each command's own default: none, the policy's, 120 s"),
    "--verbose": ({"help"}, "each command lists its own extra detail"),
}
# Commands whose option of a shared name is another thing, and why.
OWN: dict[tuple[str, str], str] = {
    ("--root", "systemd install"): "writes the drop-in below DIR (default /), as `systemctl --root` does",
    ("--root", "systemd uninstall"): "removes below DIR (default /), as `systemctl --root` does",
    ("--pid", "ps"): "selects the processes to report (repeatable); scan's --pid audits a process's root",
    ("--out", "baseline create"): "the baseline file to write, not a report",
    ("--unit", "baseline create"): "records that unit's environment; ps --unit selects its processes",
    ("--textfile", "systemd install"): "the timer's directory, with node_exporter's default",
    ("--image", "revert"): "taken only to be refused in one line: an image is never written",
}
FIELDS = ("name", "help", "type", "default", "is_flag", "multiple", "envvar", "opts", "metavar")


def walk(command: click.Command, path: str = "") -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from walk(sub, f"{path} {name}".strip())


def signature(option: click.Option) -> dict[str, object]:
    kind = option.type
    described = f"{type(kind).__name__}{getattr(kind, 'choices', '')}{getattr(kind, 'min', '')}"
    described += f"{getattr(kind, 'max', '')}{getattr(kind, 'file_okay', '')}{getattr(kind, 'dir_okay', '')}"
    return {
        "name": option.name,
        "help": option.help,
        "type": described,
        "default": option.default,
        "is_flag": option.is_flag,
        "multiple": option.multiple,
        "envvar": option.envvar,
        "opts": tuple(sorted(option.opts + option.secondary_opts)),
        "metavar": option.metavar,
    }


def grammar_problems(root: click.Command) -> list[str]:
    """Every option name declared two ways (beyond VARIES and OWN), and every short flag that names
    two long options."""
    seen: dict[str, list[tuple[str, dict[str, object]]]] = defaultdict(list)
    shorts: dict[str, set[str]] = defaultdict(set)
    for path, command in walk(root):
        for param in command.params:
            if not isinstance(param, click.Option) or isinstance(param, Renamed) or param.name in ("help", "version"):
                continue
            long = max(param.opts, key=len)
            for short in (o for o in param.opts if not o.startswith("--")):
                shorts[short].add(long)
            if (long, path) in OWN:
                continue
            varies = VARIES.get(long, (set(), ""))[0]
            sig = {k: v for k, v in signature(param).items() if k not in varies}
            seen[long].append((path, sig))
    problems = [f"{short} means {sorted(longs)}" for short, longs in shorts.items() if len(longs) > 1]
    for long, uses in seen.items():
        common = Counter(repr(sig) for _, sig in uses).most_common(1)[0][0]
        model = next(sig for _, sig in uses if repr(sig) == common)
        for path, sig in uses:
            for field in FIELDS:
                if field in sig and sig[field] != model[field]:
                    problems.append(f"{long} on `{path}`: {field} {sig[field]!r}, elsewhere {model[field]!r}")
    return problems


def test_every_option_name_means_one_thing() -> None:
    assert grammar_problems(cli) == []


def test_the_check_finds_a_planted_inconsistent_option() -> None:
    """The check itself: a second command declaring --workers as threads is caught."""

    @click.group()
    def top() -> None: ...

    @top.command()
    @click.option("--workers", type=click.IntRange(1, 256), help="Worker processes.")
    def one(workers: int) -> None: ...

    @top.command()
    @click.option("--workers", type=click.IntRange(1, 256), help="Hashing threads.")
    def two(workers: int) -> None: ...

    @top.command()
    @click.option("--workers", type=click.IntRange(1, 256), help="Worker processes.")
    def three(workers: int) -> None: ...

    assert grammar_problems(top) == ["--workers on `two`: help 'Hashing threads.', elsewhere 'Worker processes.'"]


def test_every_command_reading_an_environment_takes_the_same_target_group() -> None:
    for path, command in walk(cli):
        names = {max(p.opts, key=len) for p in command.params if isinstance(p, click.Option)}
        if "--python" in names or "--path" in names:
            assert {"--python", "--path"} <= names, path
        if "--image" in names or "--pid" in names and path != "ps":
            assert {"--python", "--path", "--root"} <= names, path
        if "--dry-run" in names:  # a command that changes files asks first, and -y/--yes answers
            assert "--yes" in names, path


def test_every_command_ends_its_help_with_examples_that_parse() -> None:
    for path, command in walk(cli):
        if command.hidden:
            continue
        text = command.get_help(click.Context(command, info_name=f"patchaudit {path}".strip()))
        tail = text.rstrip("\n").rsplit("Examples:\n\n", 1)
        assert len(tail) == 2, f"`patchaudit {path} --help` has no examples"
        lines = [line.strip() for line in tail[1].splitlines()]
        assert 2 <= len(lines) <= 3 and lines == list(EXAMPLES[path]), path
        for line in lines:
            assert line.startswith("patchaudit "), line
            _parse(line)
    assert {path for path, command in walk(cli) if not command.hidden} == set(EXAMPLES)


def _parse(line: str) -> None:
    """Parse an example as the command line would (up to a shell redirection, or the gate's `--`)."""
    words = shlex.split(line)[1:]
    for stop in (">", "--"):
        if stop in words:
            words = words[: words.index(stop)]
    command: click.Command = cli
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(click.Context(command), words[0])
        assert sub is not None, line
        command, words = sub, words[1:]
    try:
        command.make_context(command.name or "patchaudit", words)
    except click.exceptions.Exit:
        pass  # --version
    except click.BadParameter as exc:
        assert "does not exist" in exc.format_message(), f"{line}: {exc.format_message()}"


def test_old_spellings_still_work_and_say_so(tmp_path: Path) -> None:
    """model's --cache-dir is --hub-cache now, its --workers --threads: each still works for a release,
    with one line on stderr."""
    hub = tmp_path / "hub"
    hub.mkdir()
    new = run("model", "scan", "acme/tiny", "--hub-cache", hub, env={})
    old = run("model", "scan", "acme/tiny", "--cache-dir", hub, env={})
    assert new.returncode == old.returncode == 2
    assert str(hub) in new.stderr and "deprecated" not in new.stderr
    lines = old.stderr.splitlines()
    assert lines[0] == "patchaudit: --cache-dir is deprecated and goes in the next release; use --hub-cache"
    assert lines[1:] == new.stderr.splitlines()
    from_env = run("model", "scan", "acme/tiny", env={"HF_HUB_CACHE": str(hub)})
    assert from_env.stderr == new.stderr
    both = run("model", "scan", "acme/tiny", "--hub-cache", hub, "--cache-dir", hub, env={})
    assert both.returncode == 2 and "once" in both.stderr

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"torch_dtype": "bfloat16"}\n')
    assert run("baseline", "create", "--model", model, env={}).returncode == 0
    threads = run("model", "scan", model, "--workers", "2", env={})
    assert threads.returncode == 0, threads.stderr
    assert threads.stderr == "patchaudit: --workers is deprecated and goes in the next release; use --threads\n"
    assert threads.stdout == run("model", "scan", model, "--threads", "2", env={}).stdout


def test_the_gates_fast_parser_knows_only_the_gates_own_options() -> None:
    from patchaudit.cli.fastgate import FAIL_ON_CHOICES, FLAG_OPTIONS, VALUE_OPTIONS

    gate = cli.get_command(click.Context(cli), "gate")
    assert gate is not None
    declared = {o for p in gate.params if isinstance(p, click.Option) for o in p.opts}
    assert set(VALUE_OPTIONS) | set(FLAG_OPTIONS) <= declared
    (fail_on,) = (p for p in gate.params if "--fail-on" in getattr(p, "opts", ()))
    assert isinstance(fail_on.type, click.Choice) and tuple(fail_on.type.choices) == FAIL_ON_CHOICES
