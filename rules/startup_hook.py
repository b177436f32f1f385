"""startup-hook: a .pth file whose lines run code at every interpreter start."""

from collections.abc import Iterable

from patchaudit.rule import Example, Hit, Severity, TextRule, pth_executable_lines


class StartupHook(TextRule):
    ID = "startup-hook"
    SEVERITY = Severity.HIGH
    MESSAGE = "startup hook that no distribution owns runs code in every interpreter"
    EXPLANATION = """\
site.py executes every line of a `*.pth` file in site-packages that starts with `import`, in
every Python process of the environment, before any user code. A `sitecustomize.py` runs the
same way. Hot-fixes installed as a `.pth` (monkey-patching a vLLM module at startup) survive
every reinstall of the package they patch, because no RECORD owns them. The scan reports such
files when no distribution owns them; known environment-manager hooks (virtualenv's and uv's
`_virtualenv.pth`) are reported as info, not as a hazard. Lines that are plain paths are not
code and are not flagged.

Shapes understood: every `.pth` line site.py would execute (a line starting with `import` or
`import\t`), whatever the line endings.

Knowingly not: a `.pth` that only adds a directory holding a module of the same name as a real
one (shadowing), which is a path line."""
    SUFFIXES = (".pth",)

    VALID = [
        Example(code="/opt/extra/lib\n../shared/src\n", path="extra_paths.pth"),
        Example(code="# import nothing, a comment\n", path="comment.pth"),
    ]
    INVALID = [
        Example(code="import glm5_hotfix; glm5_hotfix.apply()\n", path="glm5_hotfix.pth", line=1),
        Example(code="/opt/paths\nimport\tos; os.environ['X'] = '1'\n", path="x.pth", line=2),
        Example(code="import sys; sys.path.insert(0, '/opt/hotfix')\n", path="a.pth", line=1),
        Example(code="# patched\r\nimport x\r\n", path="crlf.pth", line=2),
        Example(code="/opt/a\x85b\nimport x\n", path="nel.pth", line=2),
        Example(code="/opt/a\u2028b\nimport x\n", path="ls.pth", line=2),
        Example(code="\n\n\nimport vllm_patch\n", path="late.pth", line=4),
        Example(code="/a\rimport x\r", path="cr.pth", line=2),
    ]

    def check_text(self, installed: str, pristine: str | None) -> Iterable[Hit]:
        for line in pth_executable_lines(installed):
            yield self.hit(line, "executable .pth line runs at every interpreter start")
