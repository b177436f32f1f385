"""process-or-network: library code that starts processes or opens network connections."""

import re

import libcst as cst

from patchaudit.rule import Example, Rule, Severity

CALLS = (
    "subprocess.*",
    "os.system",
    "os.popen",
    "os.execv",
    "os.execve",
    "os.execvp",
    "os.execl",
    "os.execlp",
    "os.spawnv",
    "os.spawnl",
    "os.posix_spawn",
    "socket.socket",
    "socket.create_connection",
    "urllib.request.urlopen",
    "urllib.request.urlretrieve",
    "http.client.HTTPConnection",
    "http.client.HTTPSConnection",
    "requests.*",
    "httpx.*",
    "aiohttp.ClientSession",
)
# Names in those modules that do not start anything.
HARMLESS = {
    "subprocess.PIPE",
    "subprocess.DEVNULL",
    "subprocess.STDOUT",
    "subprocess.CalledProcessError",
    "subprocess.TimeoutExpired",
    "subprocess.CompletedProcess",
    "requests.exceptions",
    "subprocess.list2cmdline",
    "httpx.Timeout",
    "httpx.Limits",
    "httpx.URL",
    "httpx.Headers",
}


_MODULES = rb"(?:subprocess|socket|urllib|requests|httpx|aiohttp|http)\b"
_OS_CALLS = rb"\b(?:system|popen|exec[lv]p?e?|spawn[lv]p?e?|posix_spawnp?)\b"


def _harmless(name: str) -> bool:
    return any(name.startswith(h) for h in HARMLESS)


class ProcessOrNetwork(Rule):
    ID = "process-or-network"
    SEVERITY = Severity.MEDIUM
    MESSAGE = "starts a process or opens a network connection"
    EXPLANATION = """\
`subprocess`, `os.system`, sockets, `urllib`, `requests` and `httpx` calls in installed library
code run with the service's privileges and network access. A patch that shells out (to
`nvidia-smi`, to upload a dump) or phones home is worth a look even when the package itself
uses such calls elsewhere. Calls are matched by what they resolve to.

Shapes understood: subprocess, `os.system`/`popen`/`exec*`/`spawn*`, socket, urllib, requests,
httpx, aiohttp, http.client, matched by what they resolve to.

High when a patch put the call in a function that runs for every step or batch (a `forward`,
`__call__`, the runner's `execute_model`, a scheduler's `schedule`/`step`, a sampler's `sample`,
`compute_logits`, `update_from_output`, `prepare_inputs` and their `_`-prefixed or suffixed
variants), there or through a function of the same module that the step path calls: a process per
step stalls serving and a connection per step sends its data off the host, as a dump in a forward
path would. Elsewhere, and in code that verifies against its RECORD (read only because of
`--all-files`), medium.

A method of what such a call returned (`requests.get(u).json()`) is part of the one finding, and
builders that connect to nothing (`subprocess.list2cmdline`, `httpx.Timeout`, `httpx.Limits`)
are not findings.

Knowingly not: network reached through a library that wraps it (an SDK client), helpers in
other modules."""
    # A statement with a finding names the module or function (or a module-level alias of it) ...
    PREFILTER = (
        re.compile(rb"\b(?:subprocess|socket|urllib|requests|httpx|aiohttp|HTTPS?Connection|ClientSession)\b"),
        re.compile(_OS_CALLS),
    )
    # ... and the file imports one of the modules, or names an os function that runs a program.
    REQUIRES = (
        re.compile(rb"import[^\n#]*\b" + _MODULES),
        re.compile(rb"from[ \t]+" + _MODULES),
        re.compile(rb"['\"]" + _MODULES),
        re.compile(_OS_CALLS),
    )

    IDENTIFIERS = frozenset(
        {n.rsplit(".", 1)[-1] for n in CALLS if not n.endswith("*")}
        | {"subprocess", "requests", "httpx", "aiohttp", "urllib", "http", "socket"}
    )

    VALID = [
        "num_requests = len(requests)\n",
        "import subprocess\nstdout = subprocess.PIPE\n",
        "import os\npath = os.path.join('a', 'b')\n",
        "import httpx\nlimits = httpx.Limits(max_connections=4)\n",
        "import subprocess\nline = subprocess.list2cmdline(['a', 'b c'])\n",
    ]
    INVALID = [
        Example(code="import subprocess\nsubprocess.run(['nvidia-smi'])\n", line=2),
        Example(code="import os\nos.system('rm -rf /tmp/x')\n"),
        Example(code="from urllib.request import urlopen as get\nget('http://example.invalid/')\n", line=2),
        Example(code="import requests as r\nr.post(url, data=blob)\n"),
        Example(code="import socket\ns = socket.socket()\n"),
        Example(code="import os, subprocess\n\ndef f():\n    subprocess.check_output(['nvidia-smi'])\n", line=4),
        Example(code="from subprocess import Popen\nPopen(['sh', '-c', 'x'])\n", line=2),
        Example(code="import subprocess as sp\nrun = sp.run\nrun(['ls'])\n", line=3),
        Example(code="__import__('os').system('id')\n", line=1),
        Example(
            code="import subprocess\n\nclass Runner:\n    def execute_model(self, b):\n"
            "        subprocess.run(['nvidia-smi'])\n        return b\n",
            line=5,
            severity=Severity.HIGH,
        ),
        Example(
            code="import urllib.request\n\ndef forward(self, x):\n"
            "    urllib.request.urlopen('http://collector/x', data=bytes(x))\n    return x\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(code="import subprocess\n\ndef load(self):\n    subprocess.run(['ls'])\n", severity=Severity.MEDIUM),
        Example(code="import os\ngetattr(os, 'system')('id')\n", line=2),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        name = self.resolves_to(node, CALLS)
        if name is None and self.context.drifted and self.in_step_path:
            # `_smi()` in execute_model, where `def _smi(): subprocess.run(...)` is of this module.
            inner = [found for found, _, _ in self.through_helper(node, CALLS) if not _harmless(found)]
            if inner:
                message = f"calls a helper that runs {inner[0]}() on every step (in a forward/step path)"
                self.report(node, message, severity=Severity.HIGH)
            return
        if name is None or _harmless(name):
            return
        if "()." in name:
            return  # a method of what a call returned (`requests.get(u).json()`): the call is the finding
        if self.context.drifted and self.in_step_path:
            # A patch that shells out or connects on every step: a stall per step, or data leaving the host.
            message = f"{name}() starts a process or opens a connection on every step (in a forward/step path)"
            self.report(node, message, severity=Severity.HIGH)
            return
        self.report(node, f"{name}() starts a process or opens a connection")
