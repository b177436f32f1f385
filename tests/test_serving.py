"""`--serve MODEL`: which drift runs for the served model, on a real wheel laid out as vLLM 0.33.0."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from report_schema import check_output
from serving_helpers import FILES, GLM_CONFIG, KIMI_CONFIG, PATCH, TRANSFORMERS_FILES, hub_repo, model_dir
from wheels import build_wheel, make_venv, pip_install, site_packages

DS = "vllm/model_executor/models/deepseek_v2.py"
GLM = "vllm/model_executor/models/glm4_moe.py"
LINEAR = "vllm/model_executor/layers/linear.py"
TIMEOUT = 120


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serving")
    python = make_venv(root / "venv")
    pip_install(
        python,
        build_wheel(root / "wheels", "vllm", "0.33.0", FILES),
        build_wheel(root / "wheels", "transformers", "5.20.2", TRANSFORMERS_FILES),
    )
    site = site_packages(python)
    for rel in (DS, GLM, LINEAR):
        with open(site / rel, "a") as fh:
            fh.write(PATCH)
    return {
        "python": python,
        "site": site,
        "kimi": model_dir(root / "Kimi-K2.5", KIMI_CONFIG),
        "glm": model_dir(root / "GLM-4.5", GLM_CONFIG),
        "odd": model_dir(root / "Odd", {"architectures": ["NoSuchModelForCausalLM"]}),
        "cache": root / "cache",
    }


def run(*args: str | os.PathLike[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "patchaudit"
    proc = subprocess.run(
        [str(exe), *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT, env=env or dict(os.environ)
    )
    check_output(proc.stdout)  # a report with reach is held to the shipped schema
    return proc


def scan_json(stack: dict[str, Path], model: str | os.PathLike[str], *extra: str) -> dict[str, Any]:
    proc = run("scan", "--python", stack["python"], "--serve", model, "--format", "json", *extra)
    assert proc.returncode == 1, proc.stderr  # drift fails whatever its reach
    return json.loads(proc.stdout)


def reaches(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (vllm,) = [d for d in report["distributions"] if d["name"] == "vllm"]
    return {d["path"]: d["reach"] for d in vllm["drift"]}


def line_of(site: Path, path: str, needle: str) -> int:
    (number,) = [n for n, text in enumerate((site / path).read_text().splitlines(), 1) if needle in text]
    return number


def check_via(site: Path, via: list[str]) -> None:
    """Every step names a line of an installed file, and that line says what the step says."""
    assert via
    for step in via:
        where, _, what = step.partition(" ")
        path, _, line = where.rpartition(":")
        text = (site / path).read_text().splitlines()[int(line) - 1]
        if what.startswith("import "):
            assert what.removeprefix("import ").rsplit(".", 1)[-1] in text, (step, text)
        elif what.startswith("package of "):
            assert int(line) == 1 and path.endswith("__init__.py")
        elif what.startswith("class "):
            assert text.startswith(f"{what}("), (step, text)
        else:
            arch = re.search(r"\w+For\w+", what)
            assert arch is not None and f'"{arch.group()}"' in text, (step, text)


def test_kimi_reaches_deepseek_through_the_registry_call(stack: dict[str, Path]) -> None:
    report = scan_json(stack, stack["kimi"])
    reach = reaches(report)
    assert reach[DS]["class"] == "runs"
    assert reach[GLM] == {"class": "other-model", "via": []}
    assert reach[LINEAR]["class"] == "shared"
    via = reach[DS]["via"]
    registry, kimi = "vllm/model_executor/models/registry.py", "vllm/model_executor/models/kimi_k25.py"
    site = stack["site"]
    kimi_entry = line_of(site, registry, '"KimiK25ForConditionalGeneration":')
    call = line_of(site, kimi, "architectures=[")
    ds_entry = line_of(site, registry, '"DeepseekV2ForCausalLM":')
    assert via == [
        f"{registry}:{kimi_entry} KimiK25ForConditionalGeneration -> vllm.model_executor.models.kimi_k25",
        f"{kimi}:{call} init_vllm_registered_model(architectures=['DeepseekV2ForCausalLM'])",
        f"{registry}:{ds_entry} DeepseekV2ForCausalLM -> vllm.model_executor.models.deepseek_v2",
    ]
    check_via(stack["site"], via)
    # no import names deepseek_v2: the chain goes through the registry call only
    assert "deepseek_v2" not in (stack["site"] / "vllm/model_executor/models/kimi_k25.py").read_text()
    served = report["serve"]
    assert served["framework"] == "vllm" and served["architectures"] == ["KimiK25ForConditionalGeneration"]
    (finding,) = [f for d in report["distributions"] for f in d["findings"] if f["path"] == DS]
    assert finding["rule"] == "torch-save" and finding["reach"]["class"] == "runs"


def test_glm_swaps_the_two_models(stack: dict[str, Path]) -> None:
    reach = reaches(scan_json(stack, stack["glm"]))
    assert reach[GLM]["class"] == "runs"
    assert reach[DS] == {"class": "other-model", "via": []}
    assert reach[LINEAR]["class"] == "shared"
    check_via(stack["site"], reach[LINEAR]["via"])


def test_a_model_loaded_through_shared_code_says_so(stack: dict[str, Path], tmp_path: Path) -> None:
    """As in vLLM 0.33.0: a layer imports another model's package inside a function (quantization configs),
    and that package imports deepseek_v2 for a helper. The module is loaded for GLM too, and says how."""
    venv = tmp_path / "venv"
    shutil.copytree(stack["python"].parent.parent, venv, symlinks=True)
    python, site = venv / "bin" / "python", site_packages(venv / "bin" / "python")
    with open(site / "vllm/model_executor/layers/quantization.py", "a") as fh:
        fh.write("\n\ndef deepseek_config():\n    from vllm.models.deepseek_v4 import DeepseekV4ForCausalLM\n")
    with open(site / "vllm/models/deepseek_v4/model.py", "a") as fh:
        fh.write("\nfrom vllm.model_executor.models.deepseek_v2 import DeepseekV2ForCausalLM as _Helper\n")
    proc = run("scan", "--python", python, "--serve", stack["glm"], "--format", "json", "--no-hazards")
    reach = reaches(json.loads(proc.stdout))
    assert reach[GLM]["class"] == "runs" and "why" not in reach[GLM]
    assert reach[DS]["class"] == "runs"
    line = line_of(site, "vllm/model_executor/layers/quantization.py", "from vllm.models.deepseek_v4")
    assert reach[DS]["why"] == (
        f"loaded through shared code (vllm/model_executor/layers/quantization.py:{line}), not built as this model,"
        " imported for names that never run here; a changed line runs (module-level code or a name that is reached)"
    )
    check_via(site, reach[DS]["via"])
    kimi = reaches(json.loads(run("scan", "--python", python, "--serve", stack["kimi"], "--format", "json").stdout))
    assert kimi[DS]["class"] == "runs" and "why" not in kimi[DS]  # built by Kimi through the registry
    with open(site / "vllm/model_executor/layers/quantization.py", "a") as fh:  # shared code takes a name
        fh.write(
            "\n\ndef v3():\n    from vllm.model_executor.models import deepseek_v2 as ds\n\n"
            "    return ds.DeepseekV3ForCausalLM\n"
        )
    proc = run("scan", "--python", python, "--serve", stack["glm"], "--format", "json", "--no-hazards")
    why = reaches(json.loads(proc.stdout))[DS]["why"]
    taken = line_of(site, "vllm/model_executor/layers/quantization.py", "return ds.DeepseekV3ForCausalLM")
    assert f"imported for ds.DeepseekV3ForCausalLM (vllm/model_executor/layers/quantization.py:{taken})" in why, why
    with open(site / "vllm/model_executor/layers/quantization.py", "a") as fh:  # a lookup by name
        fh.write('\nKERNELS = {"mla": "vllm.model_executor.models.deepseek_v2.DeepseekV2ForCausalLM"}\n')
    proc = run("scan", "--python", python, "--serve", stack["glm"], "--format", "json", "--no-hazards")
    why = reaches(json.loads(proc.stdout))[DS]["why"]
    named = line_of(site, "vllm/model_executor/layers/quantization.py", "KERNELS = ")
    assert f"any of its names may run (vllm/model_executor/layers/quantization.py:{named} names it in a string)" in why


def test_unknown_architecture_is_named_and_nothing_is_dropped(stack: dict[str, Path]) -> None:
    plain = run("scan", "--python", stack["python"], "--format", "json")
    report = scan_json(stack, stack["odd"])
    reach = reaches(report)
    (vllm,) = [d for d in json.loads(plain.stdout)["distributions"] if d["name"] == "vllm"]
    assert set(reach) == {d["path"] for d in vllm["drift"]}
    for path in (DS, GLM):
        assert reach[path]["class"] == "unknown"
        assert "NoSuchModelForCausalLM" in reach[path]["why"]
    assert reach[LINEAR]["class"] == "shared"
    assert report["serve"]["unresolved"] == ["NoSuchModelForCausalLM"]


def test_human_view_leads_with_what_runs(stack: dict[str, Path]) -> None:
    proc = run("scan", "--python", stack["python"], "--serve", stack["kimi"])
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"serving {stack['kimi']} (KimiK25ForConditionalGeneration) with vllm 0.33.0")
    assert lines[1].strip().startswith(f"runs  vllm: {DS}")
    assert "1 patched file(s) sit in other models' code" in proc.stdout


def test_repo_id_in_the_hub_cache(stack: dict[str, Path], tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    hub_repo(hub, "moonshotai/Kimi-K2.5", KIMI_CONFIG)
    proc = run(
        "scan", "--python", stack["python"], "--serve", "moonshotai/Kimi-K2.5", "--format", "json",
        env={**os.environ, "HF_HUB_CACHE": str(hub)},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert reaches(json.loads(proc.stdout))[DS]["class"] == "runs"


def test_bad_model_is_one_line_exit_2(stack: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "config.json").write_text("[" * 200_000)  # nested past the parser's recursion
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "config.json")  # never ends: refused, not read
    for model in (tmp_path, tmp_path / "missing", deep, fifo):
        proc = run("scan", "--python", stack["python"], "--serve", model)
        assert proc.returncode == 2
        assert proc.stderr.startswith("patchaudit: error:") and "Traceback" not in proc.stderr


def test_a_planted_import_is_followed_past_the_cache(stack: dict[str, Path], tmp_path: Path) -> None:
    """The graph is cached by RECORD; a drifted file is read again, so an import planted in it counts."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "wheels", "vllm", "0.33.0", FILES))
    site = site_packages(python)
    with open(site / GLM, "a") as fh:
        fh.write(PATCH)
    args = ("scan", "--python", python, "--serve", stack["kimi"], "--format", "json", "--cache-dir", tmp_path / "c")
    assert reaches(json.loads(run(*args).stdout))[GLM]["class"] == "other-model"
    assert list((tmp_path / "c").rglob("serving-graph-*"))
    vit = site / "vllm/model_executor/models/kimi_k25_vit.py"
    with open(vit, "a") as fh:
        fh.write("\nfrom vllm.model_executor.models import glm4_moe\n")
    reach = reaches(json.loads(run(*args).stdout))
    assert reach[GLM]["class"] == "runs"
    assert reach[GLM]["via"][-1].startswith("vllm/model_executor/models/kimi_k25_vit.py:")
    check_via(site, reach[GLM]["via"])


def test_gate_fails_on_drift_whatever_its_reach(stack: dict[str, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'python = "{stack["python"]}"\nserve = "{stack["kimi"]}"\nfail_on = "medium"\n'
        '[severity.reach]\nother-model = "low"\nruns = "high"\n'
    )
    proc = run("gate", "--policy", policy, "--no-cache")
    assert proc.returncode == 1, proc.stderr
    journal = proc.stdout
    assert re.search(rf"modified.*{re.escape(GLM)}.*reach other-model", journal)
    assert re.search(rf"modified.*{re.escape(DS)}.*reach runs", journal)
    # the torch.save in other-model code is lowered to low: below fail_on, it is not a problem line
    assert re.search(rf"finding.*{re.escape(DS)}.*high torch-save.*reach runs", journal)
    assert not re.search(rf"finding.*{re.escape(GLM)}", journal)


def test_baseline_accepts_other_models_leftovers_but_not_what_runs(stack: dict[str, Path], tmp_path: Path) -> None:
    held = tmp_path / "baseline.json"
    created = run("baseline", "create", "--python", stack["python"], "--out", held)
    assert created.returncode == 0, created.stderr
    base = ("baseline", "accept", held, "--reason", "GLM-5 bring-up leftover", "--serve", stack["kimi"])
    ok = run(*base, GLM)
    assert ok.returncode == 0, ok.stderr
    assert f"{GLM}: reach other-model" in ok.stderr and f"accepted vllm: {GLM}" in ok.stdout
    refused = run(*base, DS)
    assert refused.returncode == 2
    assert f"{DS} runs for {stack['kimi']}" in refused.stderr and "--force" in refused.stderr
    assert approved(held) == [GLM]
    forced = run(*base, DS, "--force")
    assert forced.returncode == 0, forced.stderr
    assert approved(held) == [GLM, DS]


def approved(held: Path) -> list[str]:
    return [a["path"] for a in json.loads(held.read_text())["approved"]]


def test_gate_reads_the_model_from_the_units_exec_start(stack: dict[str, Path], tmp_path: Path) -> None:
    unit = tmp_path / "vllm-kimi.service"
    unit.write_text(
        f"[Service]\nExecStart={stack['python'].parent}/vllm serve {stack['glm']}\n"
        f"ExecStart=\nExecStart=-{stack['python'].parent}/vllm serve {stack['kimi']} --port 8000\n"
    )
    proc = run("gate", "--python", stack["python"], "--serve", f"unit:{unit}", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    assert re.search(rf"modified.*{re.escape(DS)}.*reach runs", proc.stdout)
    unit.write_text("[Service]\nExecStart=/usr/bin/sleep 60\n")
    proc = run("gate", "--python", stack["python"], "--serve", f"unit:{unit}", "--no-cache")
    assert proc.returncode == 2 and "ExecStart= names no model" in proc.stdout + proc.stderr


def _cgroup_root() -> Path | None:
    """A cgroup hierarchy this test may place a process in (cgroup2, else systemd's named v1 one)."""
    for base in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup")):
        if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
            return base
    return None


@pytest.mark.skipif(os.geteuid() != 0 or _cgroup_root() is None, reason="needs root and a writable cgroup hierarchy")
def test_gate_serve_auto_reads_its_own_units_exec_start(stack: dict[str, Path], tmp_path: Path) -> None:
    """As ExecStartPre= of a template unit, the gate runs in the instance's cgroup; the unit's ExecStart=
    names the model through `%i`, quoted and escaped as systemd reads it."""
    root = _cgroup_root()
    assert root is not None
    models = tmp_path / "my models"  # a space: quoted in the unit
    model_dir(models / "Kimi-K2.5", KIMI_CONFIG)
    model_dir(models / "GLM-4.5", GLM_CONFIG)
    units = tmp_path / "units"
    units.mkdir()
    template = f"pa-serve-{uuid.uuid4().hex[:8]}"
    exe = str(Path(sys.executable).parent / "patchaudit")
    gate = [exe, "gate", "--python", str(stack["python"]), "--serve", "auto", "--no-cache"]
    (units / f"{template}@.service").write_text(
        f"[Service]\nExecStartPre={' '.join(gate)}\n"
        f'ExecStart=-"{stack["python"].parent}/vllm" serve "{models}/%i" --port 8000 \\\n  --max-model-len 8192\n'
    )

    def gate_in(instance: str) -> subprocess.CompletedProcess[str]:
        group = root / f"{template}@{instance}.service"
        group.mkdir()
        code = f"import os; open({str(group / 'cgroup.procs')!r}, 'w').write('0'); os.execv({exe!r}, {gate!r})"
        try:
            return subprocess.run(
                [sys.executable, "-c", code],
                env={**os.environ, "SYSTEMD_UNIT_PATH": str(units)},
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        finally:
            for _ in range(100):  # the cgroup empties once the gate has exited
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)

    kimi = gate_in("Kimi-K2.5")
    assert kimi.returncode == 1, kimi.stderr  # drift fails whatever its reach
    assert re.search(rf"modified.*{re.escape(DS)}.*reach runs", kimi.stdout), kimi.stdout
    assert re.search(rf"modified.*{re.escape(GLM)}.*reach other-model", kimi.stdout), kimi.stdout
    glm = gate_in("GLM-4.5")
    assert re.search(rf"modified.*{re.escape(GLM)}.*reach runs", glm.stdout), glm.stdout
    assert re.search(rf"modified.*{re.escape(DS)}.*reach other-model", glm.stdout), glm.stdout
    outside = subprocess.run(gate, capture_output=True, text=True, timeout=TIMEOUT)  # in no service
    assert outside.returncode == 2 and "--serve auto: this process runs in no systemd service" in outside.stdout


def test_ps_says_what_runs_for_each_servers_model(stack: dict[str, Path], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    shutil.copytree(stack["python"].parent.parent, venv, symlinks=True)
    python, site = venv / "bin" / "python", site_packages(venv / "bin" / "python")
    server = venv / "bin" / "vllm"  # what `vllm serve` runs: a console script
    server.write_text(f"#!{python}\nimport sys, time\nprint('up', flush=True)\ntime.sleep(600)\n")
    server.chmod(0o755)
    models = tmp_path / "models"
    model_dir(models / "Kimi-K2.5", KIMI_CONFIG)
    proc = subprocess.Popen(
        [str(python), str(server), "serve", "Kimi-K2.5", "--port", "8000"],
        cwd=models,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        time.sleep(0.05)
        for rel in (DS, GLM):  # patched under the running server
            with open(site / rel, "a") as fh:
                fh.write("# again\n")
        out = run("ps", "--pid", str(proc.pid), "--serve", "auto", "--format", "json")
        assert out.returncode == 1, out.stderr
        (process,) = json.loads(out.stdout)["processes"]
        assert process["serve"]["model"] == str(models / "Kimi-K2.5")
        reach = process["serve"]["reach"]
        assert reach[str(site / DS)]["class"] == "runs"
        assert reach[str(site / GLM)]["class"] == "other-model"
        human = run("ps", "--pid", str(proc.pid), "--serve", "auto")
        assert f"pid {proc.pid} serves {models / 'Kimi-K2.5'}:" in human.stdout
        assert f"  runs  {site / DS}" in human.stdout
    finally:
        proc.kill()
        proc.wait()


def test_bad_reach_severity_is_refused(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[severity.reach]\nelsewhere = "low"\n')
    proc = run("gate", "--policy", policy)
    assert proc.returncode == 2
    assert "severity.reach.elsewhere" in proc.stdout + proc.stderr


def test_diff_puts_what_runs_first(stack: dict[str, Path]) -> None:
    proc = run("diff", "vllm", "--python", stack["python"], "--serve", stack["kimi"], "--no-color")
    assert proc.returncode == 1, proc.stderr
    files = re.findall(r"^\+\+\+ (\S+)", proc.stdout, re.M)
    assert files[0] == DS
    assert f"patchaudit: {GLM}: other-model" in proc.stderr
    assert f"patchaudit: {DS}: runs via" in proc.stderr


def test_older_layout_and_unknown_layout(tmp_path: Path) -> None:
    """vLLM <= 0.5 kept `_MODELS` in the package's __init__.py; a layout not known is said unknown."""
    old = dict(FILES)
    del old["vllm/model_executor/models/registry.py"]
    old["vllm/model_executor/models/__init__.py"] = (
        "import importlib\n\n_MODELS = {\n"
        '    "Glm4MoeForCausalLM": ("glm4_moe", "Glm4MoeForCausalLM"),\n'
        '    "DeepseekV2ForCausalLM": ("deepseek_v2", "DeepseekV2ForCausalLM"),\n}\n\n\n'
        "def load(arch):\n    module_name, cls = _MODELS[arch]\n"
        '    return importlib.import_module(f"vllm.model_executor.models.{module_name}")\n'
    )
    old["vllm/model_executor/models/utils.py"] = "def maybe_prefix(p, n):\n    return n\n"
    unknown = dict(old)
    unknown["vllm/model_executor/models/__init__.py"] = "MODEL_CLASSES = load_plugins()\n"
    glm = model_dir(tmp_path / "glm", GLM_CONFIG)
    for name, files, expect in (("old", old, "runs"), ("unknown", unknown, "unknown")):
        python = make_venv(tmp_path / name)
        pip_install(python, build_wheel(tmp_path / f"w-{name}", "vllm", "0.4.0", files))
        with open(site_packages(python) / GLM, "a") as fh:
            fh.write(PATCH)
        proc = run("scan", "--python", python, "--serve", glm, "--format", "json", "--no-hazards")
        reach = reaches(json.loads(proc.stdout))[GLM]
        assert reach["class"] == expect, reach
        if expect == "unknown":
            assert "vllm 0.4.0 keeps no registry table" in reach["why"]


def test_transformers_modeling_files(stack: dict[str, Path], tmp_path: Path) -> None:
    """A modeling file runs when vLLM builds the model with transformers, or imports it; else it is another
    model's; transformers' other code is shared."""
    venv = tmp_path / "venv"
    shutil.copytree(stack["python"].parent.parent, venv, symlinks=True)
    python, site = venv / "bin" / "python", site_packages(venv / "bin" / "python")
    glm_dense = "transformers/models/glm/modeling_glm.py"
    ds_hf = "transformers/models/deepseek_v3/modeling_deepseek_v3.py"
    vit_hf = "transformers/models/moonvit/modeling_moonvit.py"
    config_hf = "transformers/models/glm/configuration_glm.py"
    for rel in (glm_dense, ds_hf, vit_hf, config_hf):
        with open(site / rel, "a") as fh:
            fh.write(PATCH)

    def reach_of(config: dict[str, object]) -> dict[str, dict[str, Any]]:
        model = model_dir(tmp_path / str(config["architectures"]), config)
        proc = run("scan", "--python", python, "--serve", model, "--format", "json", "--no-hazards")
        report = json.loads(proc.stdout)
        return {d["path"]: d["reach"] for dist in report["distributions"] for d in dist["drift"]}

    kimi = reach_of(KIMI_CONFIG)
    assert kimi[vit_hf]["class"] == "runs"  # imported by the vision tower
    assert kimi[vit_hf]["via"][-1].startswith("vllm/model_executor/models/kimi_k25_vit.py:1 import transformers.")
    check_via(site, kimi[vit_hf]["via"])
    assert kimi[ds_hf]["class"] == "other-model"  # vLLM runs its own DeepSeek code
    assert kimi[glm_dense]["class"] == "other-model"
    assert kimi[config_hf]["class"] == "shared"
    glm = reach_of({"architectures": ["GlmForCausalLM"], "model_type": "glm"})
    assert glm[glm_dense]["class"] == "runs"
    assert [step.split(" ", 1)[0].rsplit(":", 1)[0] for step in glm[glm_dense]["via"]] == [
        "vllm/model_executor/models/registry.py",
        "transformers/models/auto/modeling_auto.py",
        glm_dense,
    ]
    check_via(site, glm[glm_dense]["via"])
    assert glm[ds_hf]["class"] == "other-model"


def test_sglang_entry_classes(tmp_path: Path) -> None:
    """Where SGLang serves (no vLLM installed), its models are found by their `EntryClass`."""
    model = "import torch\nfrom sglang.srt.layers.linear import Linear\n\n\nclass {0}(torch.nn.Module):\n    pass\n"
    files = {
        "sglang/__init__.py": "",
        "sglang/srt/__init__.py": "",
        "sglang/srt/layers/__init__.py": "",
        "sglang/srt/layers/linear.py": "class Linear:\n    pass\n",
        "sglang/srt/models/__init__.py": "",
        "sglang/srt/models/deepseek_v2.py": model.format("DeepseekV2ForCausalLM")
        + "\n\nclass DeepseekV3ForCausalLM(DeepseekV2ForCausalLM):\n    pass\n\n\n"
        "EntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM]\n",
        "sglang/srt/models/glm4_moe.py": model.format("Glm4MoeForCausalLM") + "\n\nEntryClass = Glm4MoeForCausalLM\n",
    }
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "w", "sglang", "0.5.0", files))
    site = site_packages(python)
    for rel in ("sglang/srt/models/deepseek_v2.py", "sglang/srt/models/glm4_moe.py", "sglang/srt/layers/linear.py"):
        with open(site / rel, "a") as fh:
            fh.write(PATCH)
    glm = model_dir(tmp_path / "glm", GLM_CONFIG)
    proc = run("scan", "--python", python, "--serve", glm, "--format", "json", "--no-hazards")
    report = json.loads(proc.stdout)
    (dist,) = report["distributions"]
    reach = {d["path"]: d["reach"] for d in dist["drift"]}
    entry = line_of(site, "sglang/srt/models/glm4_moe.py", "EntryClass = ")
    assert reach["sglang/srt/models/glm4_moe.py"]["via"] == [
        f"sglang/srt/models/glm4_moe.py:{entry} Glm4MoeForCausalLM -> sglang.srt.models.glm4_moe"
    ]
    assert reach["sglang/srt/models/deepseek_v2.py"]["class"] == "other-model"
    assert reach["sglang/srt/layers/linear.py"]["class"] == "shared"
    assert report["serve"]["framework"] == "sglang"


def plant_in_method(site: Path, path: str, cls: str, method: str) -> int:
    """A torch.save as the first line of `cls.method`'s body; the line it lands on."""
    text = (site / path).read_text()
    (node,) = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == method]
    lines = text.splitlines(keepends=True)
    at = func.body[0].lineno - 1
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at, f"{indent}torch.save({{}}, '/tmp/dump.pt')\n")
    (site / path).write_text("".join(lines))
    return at + 1


def test_real_vllm_wheel(tmp_path: Path) -> None:
    """By hand: PATCHAUDIT_VLLM_WHEEL=/path/to/vllm-0.33.0-*.whl (CI fetches nothing from outside)."""
    wheel = os.environ.get("PATCHAUDIT_VLLM_WHEEL")
    if not wheel:
        pytest.skip("PATCHAUDIT_VLLM_WHEEL is not set")
    target, wheels = tmp_path / "site", tmp_path / "wheels"
    wheels.mkdir()
    local = wheels / Path(wheel).name  # the only pristine source, taken away below
    try:
        os.link(wheel, local)
    except OSError:
        shutil.copyfile(wheel, local)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", target, local],
        check=True,
        timeout=600,
    )
    mtp = "vllm/model_executor/models/deepseek_mtp.py"  # loaded for GLM through shared code, like deepseek_v2
    ds_line = plant_in_method(target, DS, "DeepseekV2MLAAttention", "forward")
    plant_in_method(target, GLM, "Glm4MoeAttention", "forward")
    for rel in (LINEAR, mtp):
        with open(target / rel, "a") as fh:
            fh.write(PATCH)  # module level: runs wherever the module is loaded
    kimi = model_dir(tmp_path / "kimi", KIMI_CONFIG)
    glm = model_dir(tmp_path / "glm", GLM_CONFIG)
    odd = model_dir(tmp_path / "odd", {"architectures": ["NoSuchModelForCausalLM"]})

    def report_of(model: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        args = ("scan", "vllm", "--path", target, "--serve", model, "--format", "json", "--no-cache", *extra)
        proc = run(*args, env=env)
        assert proc.returncode == 1, proc.stderr
        return json.loads(proc.stdout)

    kimi_report = report_of(kimi, "--wheelhouse", str(wheels))
    kimi_reach = reaches(kimi_report)
    assert kimi_reach[DS]["class"] == "runs" and "why" not in kimi_reach[DS]
    assert any("kimi_k25.py" in s and "init_vllm_registered_model" in s for s in kimi_reach[DS]["via"])
    check_via(target, kimi_reach[DS]["via"])
    assert kimi_reach[GLM]["class"] == "other-model"
    assert kimi_reach[LINEAR]["class"] == "shared"
    glm_report = report_of(glm, "--wheelhouse", str(wheels))
    glm_reach = reaches(glm_report)
    assert glm_reach[GLM]["class"] == "runs" and "why" not in glm_reach[GLM]
    assert glm_reach[LINEAR]["class"] == "shared"
    # 0.33.0: layers.quantization's get_quantization_config() imports vllm.models.deepseek_v4, whose MTP
    # imports deepseek_v2 for a helper: the module is loaded for GLM, its attention never runs.
    assert glm_reach[DS]["class"] == "other-model"
    why = glm_reach[DS]["why"]
    assert why.startswith("loaded through shared code (vllm/model_executor/layers/quantization/"), why
    assert why.endswith("DeepseekV2MLAAttention never runs for this model"), why
    check_via(target, glm_reach[DS]["via"])
    assert glm_reach[DS]["via"][-1].endswith(" import vllm.model_executor.models.deepseek_v2")
    assert glm_reach[mtp]["class"] == "runs" and "a changed line runs" in glm_reach[mtp]["why"]
    assert "imported for names that never run here" in glm_reach[mtp]["why"]  # DeepSeek-V4's MTP, unreached
    for report, expect in ((kimi_report, "runs"), (glm_report, "other-model")):
        (finding,) = [f for d in report["distributions"] for f in d["findings"] if f["path"] == DS]
        assert finding["line"] == ds_line and finding["reach"]["class"] == expect
    # without pristine bytes the changed lines are not known: it runs, and says why
    local.rename(tmp_path / "gone")
    no_caches = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "PIP_CACHE_DIR": str(tmp_path / "pip")}
    unsure = reaches(report_of(glm, "--no-hazards", env=no_caches))[DS]
    assert unsure["class"] == "runs" and "without pristine bytes" in unsure["why"]
    odd_reach = reaches(report_of(odd, "--no-hazards"))
    assert odd_reach[DS]["class"] == "unknown" and "NoSuchModelForCausalLM" in odd_reach[DS]["why"]
    shutil.rmtree(target)
