"""systemd's grammars, checked case by case against systemd itself.

Each case is taken from systemd's own tests (named in `source`) and answered twice: by patchaudit and by
the installed systemd, as an unprivileged user, offline:
- `Environment=` lines and specifiers: `systemd --test --user --no-pager --unit=oracle.target` with
  SYSTEMD_UNIT_PATH pointing at the cases' units prints each unit as systemd loaded it (`Environment:`).
- environment files: systemd's environment.d generator reads them with the same env-file parser.
  Where the generator is not the service's path (it drops a key with no value, `merge_env_file`, while a
  service gets `KEY=`), the case says so and is held to its test's own expectation instead.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchaudit.procs.unitfile import find, settings
from patchaudit.procs.unitsyntax import env_file

SYSTEMD = shutil.which("systemd") or "/lib/systemd/systemd"
GENERATOR = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"
FRAGMENT = "test-load-fragment.c test_config_parse_exec"
EXTRA = "test-load-fragment.c test_config_parse_log_extra_fields"
PRINTF = "test-load-fragment.c test_install_printf"
ENVFILE = "test-env-file.c"


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    text: str  # Environment= value(s) (one per line), or an environment file's content
    expected: dict[str, str] | None = None  # only where systemd cannot answer offline
    why_not_systemd: str = ""


# Environment= values: the quoting and escaping cases of ExecStart= (same word splitter, with C
# escapes), each argument made an assignment; `B=1` before a word systemd refuses shows that the words
# before a syntax error are kept.
ENVIRONMENT = [
    Case("basic", f"{FRAGMENT} /* basic test */", "A=/RValue r1"),
    Case("slashes", f"{FRAGMENT} /* test slashes */", "A=/RValue///slashes r1///"),
    Case("semicolon", f"{FRAGMENT} /* semicolon */", "A=-@/RValue B=argv0 C=r1 ; D=/goo/goo"),
    Case("quoted-semicolon", f"{FRAGMENT} /* trailing semicolon in single quotes */", "A=r1 B=';'"),
    Case("escaped-semicolon", f"{FRAGMENT} /* escaped semicolon */", "B=1 A=\\;"),
    Case("escaped-semicolon-x", f"{FRAGMENT} /* escaped semicolon as part of an expression */", "B=1 A=\\;x"),
    Case("encoded-semicolon", f"{FRAGMENT} /* encoded semicolon */", "A=\\073"),
    Case("quoted-semicolon-2", f"{FRAGMENT} /* quoted semicolon */", 'A=";"'),
    Case("spaces", f"{FRAGMENT} /* spaces in the filename */", '"A=/PATH WITH SPACES/daemon" -1 -2'),
    Case("spaces-no-args", f"{FRAGMENT} /* spaces in the filename, no args */", 'A="/PATH WITH SPACES/daemon -1 -2"'),
    Case("spaces-quoted", f"{FRAGMENT} /* everything quoted */", '"A=/PATH WITH SPACES/daemon" "B=-1" \'C=-2\''),
    Case("escaped-spaces", f"{FRAGMENT} /* escaped spaces */", "\"A=/PATH\\sWITH\\sSPACES/daemon\" 'B=-1 -2'"),
    Case("hex-spaces", f"{FRAGMENT} /* escaped spaces (2) */", '"A=/PATH\\x20WITH\\x20SPACES/daemon" "B=-1 -2"'),
    Case("incomplete-hex", f"{FRAGMENT} /* invalid character: \\x */", "B=1 A=/path\\x"),
    Case("bell", f"{FRAGMENT} /* invalid character: \\a */", "A=/path\\a"),
    Case("backslash", f"{FRAGMENT} /* invalid character: \\\\ */", "A=/path\\\\"),
    Case("single-quote", f"{FRAGMENT} /* invalid character: \\' */", "A=/path\\'"),
    Case("valid-s", f"{FRAGMENT} /* valid character: \\s */", "A=/path\\s"),
    Case("quoted-backslashes", f"{FRAGMENT} /* quoted backslashes */", "B=1 A='\\w+\\K'"),
    Case("missing-quote", f"{FRAGMENT} /* missing ending ' */", "B=1 A='foo"),
    Case("missing-quote-backslash", f"{FRAGMENT} /* missing ending ' with trailing backslash */", "B=1 A='foo\\"),
    Case("reset", f"{FRAGMENT} /* empty argument, reset */", "A=1\n\nB=2"),
    Case("extra-basic", f"{EXTRA} basic test", "FOO=BAR \"QOOF=quux '  ' \""),
    Case("extra-add", f"{EXTRA} add some", "FOO2=BAR2 QOOF2=quux '  '"),
    Case("continuation", f"{ENVFILE} env_file_1, as unit-file lines", "a=a\nb=b\\\nc\nd=d\\\ne\\\nf\ng=g\\ \nh=h"),
    Case("comment-in-continuation", f"{ENVFILE} env_file_3, as unit-file lines", 'A="-d \\\n#--nouser \\\nB=line"'),
]

# Specifiers, for a plain unit and an instance (test_install_printf's name.service and name@inst.service).
SPECIFIERS = [
    (unit, spec)
    for unit, specs in (("name.service", "nNpijmbH"), ("name@inst.service", "nNpiIfPmbH"))
    for spec in specs
]

ENV_FILES = [
    Case("env_file_1", f"{ENVFILE} test_load_env_file_1", "a=a\nb=b\\\nc\nd=d\\\ne\\\nf\ng=g\\ \nh=h\ni=i\\"),
    Case("env_file_2", f"{ENVFILE} test_load_env_file_2", "a=a\\\n"),
    Case(
        "env_file_3",
        f"{ENVFILE} test_load_env_file_3",
        '#SPAMD_ARGS="-d --socketpath=/var/lib/bulwark/spamd \\\n#--nouser-config                 \\\nnormal=line',
    ),
    Case(
        "env_file_4",
        f"{ENVFILE} test_load_env_file_4",
        '# Generated\n\nHWMON_MODULES="coretemp f71882fg"\n\n# For compatibility reasons\n\nMODULE_0=coretemp\n'
        "MODULE_1=f71882fg",
    ),
    Case(
        "env_file_5",
        f"{ENVFILE} test_load_env_file_5",
        "a=\nb=",
        expected={"a": "", "b": ""},
        why_not_systemd="the generator drops a key without a value; load_env_file keeps KEY=",
    ),
    # The parser's own states (env-file.c, parse_env_file_internal), beyond what its test file covers:
    Case("multi-line-double", "env-file.c DOUBLE_QUOTE_VALUE", 'A="line one\nline two"\nB=2'),
    Case("multi-line-single", "env-file.c SINGLE_QUOTE_VALUE", "A='one\\\ntwo'\nB='x\"y'"),
    Case("double-escapes", "env-file.c DOUBLE_QUOTE_VALUE_ESCAPE", 'A="q\\"q \\\\ \\n \\`"\nB="cont\\\nnued"'),
    Case("quotes-mid-value", "env-file.c PRE_VALUE after a quote", "A=\"b\"c'd'\nB=  spaced value  \nC=x # y"),
    Case("keys", "env-file.c KEY", "  KEY  =v\n1BAD=x\nA.B=y\nexport C=z\nD"),
    Case("comments", "env-file.c COMMENT", "# a\n; b\n  # c\nA=1 ; not a comment\n"),
]


def _world_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="pa-systemd-", dir="/tmp"))
    path.chmod(0o755)
    return path


def _nobody() -> dict[str, object]:
    if os.geteuid() != 0:
        pytest.skip("needs root to run systemd as an unprivileged user")
    if not (os.path.exists(SYSTEMD) and os.path.exists(GENERATOR)):
        if os.environ.get("CI"):
            pytest.fail("systemd (Debian package: systemd) must be installed in CI")
        pytest.skip("systemd is not installed")
    user = pwd.getpwnam("nobody")
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _units(cases: list[Case]) -> dict[str, str]:
    units = {}
    for n, case in enumerate(cases):
        # the case's lines last: one that ends in a backslash continues into the end of the file only
        body = "".join(f"Environment={line}\n" for line in case.text.split("\n"))
        units[f"case-{n:02d}.service"] = f"[Service]\nExecStart=/bin/true\n{body}"
    body = "".join(f"Environment=V_{spec}=%{spec}\n" for _unit, spec in SPECIFIERS)
    units["name.service"] = f"[Service]\n{body}ExecStart=/bin/true\n"
    units["name@.service"] = units["name.service"]
    return units


def _systemd_dump(directory: Path, target: str) -> dict[str, dict[str, str]]:
    """unit -> its Environment as `systemd --test` prints it."""
    runtime = directory / "runtime"
    runtime.mkdir()
    shutil.chown(runtime, "nobody")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/nonexistent",
        "SYSTEMD_UNIT_PATH": f"{directory / 'units'}:",
        "XDG_RUNTIME_DIR": str(runtime),
    }
    proc = subprocess.run(
        [SYSTEMD, "--test", "--user", "--no-pager", f"--unit={target}"],
        capture_output=True, text=True, env=env, timeout=60, cwd="/", **_nobody(),  # type: ignore[call-overload]
    )  # fmt: skip
    assert "-> Unit" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    dump: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in proc.stdout.split("\n"):
        if line.startswith("\t-> Unit ") and line.endswith(":"):
            current = dump.setdefault(line[len("\t-> Unit ") : -1], {})
        elif current is not None and line.startswith("\t\tEnvironment: "):
            name, _, value = line[len("\t\tEnvironment: ") :].partition("=")
            current[name] = value
    return dump


@pytest.fixture(scope="module")
def oracle() -> Iterator[tuple[Path, dict[str, dict[str, str]]]]:
    directory = _world_dir()
    try:
        units = directory / "units"
        units.mkdir()
        wanted = []
        for name, text in _units(ENVIRONMENT).items():
            (units / name).write_text(text)
            if not name.endswith("@.service"):
                wanted.append(name)
        wanted.append("name@inst.service")
        (units / "oracle.target").write_text(f"[Unit]\nWants={' '.join(wanted)}\n")
        for path in directory.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield units, _systemd_dump(directory, "oracle.target")
    finally:
        shutil.rmtree(directory)


def _ours(units: Path, unit: str) -> dict[str, str]:
    """Every variable the unit sets (later settings win), as patchaudit reads the unit."""
    return {s.name: s.value for s in settings(find(unit, [units]))}


@pytest.mark.parametrize("n", range(len(ENVIRONMENT)), ids=[c.id for c in ENVIRONMENT])
def test_environment_lines_as_systemd_reads_them(oracle: tuple[Path, dict], n: int) -> None:
    units, dump = oracle
    unit = f"case-{n:02d}.service"
    assert unit in dump, f"systemd did not load {unit} ({ENVIRONMENT[n].source})"
    assert _ours(units, unit) == dump[unit], ENVIRONMENT[n].source


@pytest.mark.parametrize("unit,spec", SPECIFIERS, ids=[f"{u}-%{s}" for u, s in SPECIFIERS])
def test_specifiers_as_systemd_expands_them(oracle: tuple[Path, dict], unit: str, spec: str) -> None:
    units, dump = oracle
    assert _ours(units, unit)[f"V_{spec}"] == dump[unit][f"V_{spec}"], f"{PRINTF}: %{spec} of {unit}"


def _generator(text: str | None) -> dict[str, str]:
    directory = _world_dir()
    try:
        conf = directory / "environment.d"
        conf.mkdir(mode=0o755)
        if text is not None:
            (conf / "50-case.conf").write_text(text)
            (conf / "50-case.conf").chmod(0o644)
        proc = subprocess.run(
            [GENERATOR], capture_output=True, text=True, timeout=30, cwd="/",
            env={"PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": str(directory)}, **_nobody(),  # type: ignore[call-overload]
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        out = {}
        for line in proc.stdout.splitlines():  # KEY=value, the value quoted by systemd's shell_maybe_quote
            name, _, value = line.partition("=")
            out[name] = _unquote(value)
        return out
    finally:
        shutil.rmtree(directory)


_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unquote(value: str) -> str:
    """Undo shell_maybe_quote: inside double quotes, `\\` before one of `"\\`$`, C escapes for the rest."""
    if not (len(value) >= 2 and value[0] == value[-1] == '"'):
        return value
    inner, out, i = value[1:-1], [], 0
    while i < len(inner):
        c = inner[i]
        if c != "\\" or i + 1 >= len(inner):
            out.append(c)
            i += 1
            continue
        n = inner[i + 1]
        if n in '"\\`$':
            out.append(n)
            i += 2
        elif n in _C_ESCAPES:
            out.append(_C_ESCAPES[n])
            i += 2
        elif n == "x":
            out.append(chr(int(inner[i + 2 : i + 4], 16)))
            i += 4
        else:  # \NNN octal
            out.append(chr(int(inner[i + 1 : i + 4], 8)))
            i += 4
    return "".join(out)


@pytest.mark.parametrize("case", ENV_FILES, ids=[c.id for c in ENV_FILES])
def test_environment_files_as_systemd_reads_them(case: Case) -> None:
    ours: dict[str, str] = {}
    for _line, name, value in env_file(case.text):
        ours[name] = value
    if case.expected is not None:
        assert ours == case.expected, f"{case.source} ({case.why_not_systemd})"
        return
    before = _generator(None)
    after = _generator(case.text)
    theirs = {k: v for k, v in after.items() if before.get(k) != v}
    assert ours == theirs, case.source


DROP_INS = {
    # (search-path directory, drop-in directory, file): the variables it sets
    ("high", "vllm-worker@.service.d", "30-i.conf"): "I=template-high",
    ("low", "vllm-worker@a.service.d", "10-x.conf"): "X=instance",
    ("low", "vllm-worker@a.service.d", "30-i.conf"): "I=instance-low",
    ("low", "vllm-worker@.service.d", "10-x.conf"): "X=template",
    ("low", "vllm-worker@.service.d", "20-t.conf"): "T=1 ORDER=20",
    ("low", "vllm-worker@.service.d", "40-order.conf"): "ORDER=40",
    ("low", "vllm-.service.d", "10-x.conf"): "X=prefix",
    ("low", "vllm-.service.d", "05-p.conf"): "P=1 ORDER=05",
    ("low", "vllm-@a.service.d", "15-pa.conf"): "PA=1",
    ("low", "service.d", "50-all.conf"): "ALL=1",
    ("low", "service.d", "10-x.conf"): "X=toplevel",
}
TEMPLATE = """[Service]
ExecStart=/bin/true
Environment=SRC=%n X=fragment
EnvironmentFile=-/etc/vllm/%i.env
EnvironmentFile=/etc/vllm/conf.d/*.env
EnvironmentFile=-%h/.config/%p/%I.env
"""


def test_drop_in_order_and_environment_files_as_systemd_loads_them() -> None:
    """Instance over template over dash prefix over the unit type's `service.d`, an earlier search-path
    directory's file masking a later one of the same name; specifiers in EnvironmentFile=."""
    directory = _world_dir()
    try:
        for (where, sub, name), body in DROP_INS.items():
            (directory / where / sub).mkdir(parents=True, exist_ok=True)
            (directory / where / sub / name).write_text(f"[Service]\nEnvironment={body}\n")
        (directory / "low" / "vllm-worker@.service").write_text(TEMPLATE)
        for path in directory.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        runtime = directory / "runtime"
        runtime.mkdir()
        shutil.chown(runtime, "nobody")
        proc = subprocess.run(
            [SYSTEMD, "--test", "--user", "--no-pager", "--unit=vllm-worker@a.service"],
            capture_output=True, text=True, timeout=60, cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "XDG_RUNTIME_DIR": str(runtime),
                 "SYSTEMD_UNIT_PATH": f"{directory / 'high'}:{directory / 'low'}:"},
            **_nobody(),  # type: ignore[call-overload]
        )  # fmt: skip
        block = proc.stdout.split("\t-> Unit vllm-worker@a.service:\n", 1)[1].split("\t-> Unit ", 1)[0]
        fields = [line.strip().partition(": ") for line in block.splitlines()]
        their_drop_ins = [v for k, _, v in fields if k == "DropIn Path"]
        their_env = dict(v.partition("=")[::2] for k, _, v in fields if k == "Environment")
        their_files = [v for k, _, v in fields if k == "EnvironmentFile"]

        from patchaudit.procs.unitfile import declared

        files = find("vllm-worker@a.service", [directory / "high", directory / "low"])
        assert [str(p) for p in files.drop_ins] == their_drop_ins
        assigned, env_files = declared(files, manager={"h": "/nonexistent", "u": "nobody"})
        assert {s.name: s.value for s in assigned} == their_env
        assert [spec for spec, _where in env_files] == their_files
        assert their_env["X"] == "instance" and their_env["I"] == "template-high" and their_env["ORDER"] == "40"
    finally:
        shutil.rmtree(directory)
