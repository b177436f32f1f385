"""Startup hooks that no distribution owns run in every process: they are reported whatever is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, patchaudit, pip_install, site_packages


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    python = make_venv(tmp_path / "venv")
    pip_install(
        python,
        build_wheel(
            tmp_path / "w", "owned-hook", "1.0", {"owned_hook.pth": "import os\n", "owned_hook/__init__.py": ""}
        ),
        build_wheel(tmp_path / "w", "plain", "1.0", {"plain/__init__.py": ""}),
    )
    return python


def scan(python: Path, *names: str) -> tuple[int, dict]:
    proc = patchaudit("scan", *names, "--python", python, "--format", "json", "--no-hazards")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_owned_pth_and_plain_path_pth_do_not_fail(venv: Path) -> None:
    (site_packages(venv) / "extra-paths.pth").write_text("/opt/models/lib\n# comment\n")
    code, report = scan(venv)
    assert code == 0, report
    (finding,) = report["environment"]["findings"]
    assert finding["path"] == "extra-paths.pth" and finding["severity"] == "info"
    assert report["environment"]["drift"] == []


def test_pth_with_import_line_is_a_high_startup_hook_even_when_scanning_one_dist(venv: Path) -> None:
    (site_packages(venv) / "glm5_hotfix.pth").write_text("/opt/x\nimport glm5_patch; glm5_patch.apply()\n")
    code, report = scan(venv, "plain")
    assert code == 1
    assert report["distributions"][0]["status"] == "clean"
    (drift,) = report["environment"]["drift"]
    assert drift["path"] == "glm5_hotfix.pth" and drift["state"] == "added"
    (finding,) = [f for f in report["environment"]["findings"] if f["severity"] == "high"]
    assert finding["rule"] == "startup-hook" and finding["line"] == 2
    assert "glm5_patch" in finding["message"]


def test_unowned_sitecustomize_is_high(venv: Path) -> None:
    (site_packages(venv) / "sitecustomize.py").write_text("import torch\n")
    code, report = scan(venv)
    assert code == 1
    assert [f["rule"] for f in report["environment"]["findings"] if f["severity"] == "high"] == ["startup-hook"]


def test_virtualenv_hook_is_info_only_with_a_released_module(venv: Path) -> None:
    import virtualenv

    released = Path(virtualenv.__file__).parent / "create" / "via_global_ref" / "_virtualenv.py"
    site = site_packages(venv)
    (site / "_virtualenv.pth").write_text("import _virtualenv")
    (site / "_virtualenv.py").write_bytes(released.read_bytes())
    code, report = scan(venv)
    assert code == 0, report
    assert [f["severity"] for f in report["environment"]["findings"]] == ["info"]

    # The docstring and everything else kept, one line of code appended: not a release's module.
    (site / "_virtualenv.py").write_bytes(released.read_bytes() + b"import os; os.system('id')\n")
    code, report = scan(venv)
    assert code == 1
    (finding,) = report["environment"]["findings"]
    assert finding["severity"] == "high" and "not any virtualenv or uv release" in finding["message"]

    (site / "_virtualenv.py").write_bytes(released.read_bytes())
    (site / "_virtualenv.pth").write_text("import _virtualenv; import os; os.system('id')")
    code, report = scan(venv)
    assert code == 1


def test_setuptools_distutils_shim_is_known_but_a_variant_is_not(venv: Path) -> None:
    shim = (
        "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; "
        "enabled and __import__('_distutils_hack').add_shim(); \n"
    )
    pth = site_packages(venv) / "distutils-precedence.pth"
    pth.write_text(shim)
    code, report = scan(venv)
    assert code == 0, report
    assert [f["severity"] for f in report["environment"]["findings"]] == ["info"]
    pth.write_text(shim.replace("add_shim();", "add_shim(); __import__('os').system('id');"))
    code, report = scan(venv)
    assert code == 1
    assert report["environment"]["drift"][0]["path"] == "distutils-precedence.pth"


@pytest.mark.parametrize("form", ["package", "bytecode", "extension"])
def test_sitecustomize_in_any_importable_form_is_a_hook(venv: Path, form: str) -> None:
    site = site_packages(venv)
    if form == "package":
        (site / "sitecustomize").mkdir()
        (site / "sitecustomize/__init__.py").write_text("print('HOOK')\n")
    elif form == "bytecode":
        import py_compile

        source = site.parent / "sitecustomize_src.py"
        source.write_text("print('HOOK')\n")
        py_compile.compile(str(source), cfile=str(site / "sitecustomize.pyc"))
        source.unlink()
    else:
        (site / "sitecustomize.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    code, report = scan(venv, "plain")
    assert code == 1
    (drift,) = report["environment"]["drift"]
    assert drift["path"].startswith("sitecustomize")
    assert [f["severity"] for f in report["environment"]["findings"]] == ["high"]
