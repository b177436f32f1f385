"""`patchaudit model`: caches and local dirs the real Hub client wrote, the field report's edit, revert, gate."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hub_server import Repo, git_sha1
from model_helpers import REPO_ID, download, repo_files, run
from wheels import build_wheel, make_venv, pip_install

FIELD_EDIT = 'quantization.kv_cache_quant_algo: removed (was "FP8")'


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two commits in one hub cache (sharing every blob but README's), and a --local-dir tree of the first."""
    root = tmp_path_factory.mktemp("hub")
    first = Repo(REPO_ID, repo_files("v1"))
    second = Repo(REPO_ID, repo_files("v2"))
    download(first, root / "hf")
    download(second, root / "hf")
    local = download(first, root / "dl", root / "local")
    assert Path(local) == root / "local"
    requests = first.requests
    assert f"GET /api/models/{REPO_ID}/revision/main" in requests
    assert f"HEAD /{REPO_ID}/resolve/{first.commit}/config.json" in requests
    return {"root": root, "first": first.commit, "second": second.commit}


@pytest.fixture
def hub(pristine: dict[str, object], tmp_path: Path) -> dict[str, object]:
    """A private copy (links kept) of the pristine cache and local dir, and the env to run patchaudit with."""
    root = Path(str(pristine["root"]))
    shutil.copytree(root / "hf", tmp_path / "hf", symlinks=True)
    shutil.copytree(root / "local", tmp_path / "local", symlinks=True)
    env = {"HF_HOME": str(tmp_path / "hf"), "PATCHAUDIT_CACHE_DIR": str(tmp_path / "pacache")}
    repo = tmp_path / "hf" / "hub" / ("models--" + REPO_ID.replace("/", "--"))
    return {**pristine, "env": env, "repo": repo, "local": tmp_path / "local", "tmp": tmp_path}


def snap(hub: dict[str, object], which: str, name: str) -> Path:
    return Path(str(hub["repo"])) / "snapshots" / str(hub[which]) / name


def scan_json(hub: dict[str, object], *args: str | os.PathLike[str]) -> tuple[int, dict]:
    proc = run("model", "scan", *args, "--format", "json", env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_clean_cache_and_local_dir_pass(hub: dict[str, object]) -> None:
    code, report = scan_json(hub, REPO_ID, hub["local"])
    assert code == 0, report
    assert report["schema"] == "patchaudit/report/v1"
    cache, local = report["models"]
    assert (cache["kind"], cache["status"], local["kind"], local["status"]) == (
        "hub-cache", "clean", "local-dir", "clean"
    )  # fmt: skip
    assert sorted(cache["revisions"]) == sorted([hub["first"], hub["second"]])
    assert cache["files_checked"] == 14 and local["files_checked"] == 7
    assert report["summary"]["models"] == 2 and report["summary"]["modified"] == 0


def test_blob_names_are_what_the_client_wrote(hub: dict[str, object]) -> None:
    """The two hash families the scan relies on: git blob sha1 for small files, sha256 for LFS files."""
    config = snap(hub, "first", "config.json")
    shard = snap(hub, "first", "model-00001-of-00002.safetensors")
    assert os.readlink(config).endswith(git_sha1(config.read_bytes()))
    assert os.readlink(shard).endswith(hashlib.sha256(shard.read_bytes()).hexdigest())


def test_sed_i_edit_is_found_diffed_by_key_and_reverted(hub: dict[str, object]) -> None:
    target = snap(hub, "first", "hf_quant_config.json")
    subprocess.run(["sed", "-i", "/kv_cache_quant_algo/d", str(target)], check=True)
    assert not target.is_symlink()  # sed -i replaced the link with a file

    code, report = scan_json(hub, REPO_ID)
    assert code == 1
    (drift,) = report["models"][0]["drift"]
    assert drift["path"] == f"snapshots/{hub['first']}/hf_quant_config.json"
    assert drift["state"] == "modified" and "link replaced by a regular file" in drift["note"]
    (finding,) = report["models"][0]["findings"]
    assert (finding["rule"], finding["severity"], finding["message"]) == ("config-quantization", "high", FIELD_EDIT)
    assert finding["line"] == 4  # where the key was, in the pristine file

    diff = run("model", "diff", REPO_ID, "hf_quant_config.json", env=hub["env"])  # type: ignore[arg-type]
    assert diff.returncode == 1 and FIELD_EDIT in diff.stdout

    proc = run("model", "revert", "--yes", REPO_ID, env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"relink  snapshots/{hub['first']}/hf_quant_config.json" in proc.stdout
    assert target.is_symlink() and b"kv_cache_quant_algo" in target.read_bytes()
    assert scan_json(hub, REPO_ID)[0] == 0

    # the edited file is in the quarantine, and undo puts it back
    run_id = proc.stdout.split("quarantine restore ")[1].split()[0]
    undo = run("quarantine", "restore", run_id, "--path", hub["repo"], "--yes", env=hub["env"])  # type: ignore[arg-type]
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert not target.is_symlink() and b"kv_cache_quant_algo" not in target.read_bytes()


def test_editor_write_through_the_link_names_every_snapshot_sharing_the_blob(hub: dict[str, object]) -> None:
    target = snap(hub, "first", "hf_quant_config.json")
    blob = target.resolve()
    text = target.read_text().replace('    "kv_cache_quant_algo": "FP8",\n', "")
    with open(target, "w") as fh:  # what an editor that writes in place does: the blob itself changes
        fh.write(text)
    assert target.is_symlink()

    code, report = scan_json(hub, REPO_ID)
    assert code == 1
    drift = {d["path"]: d for d in report["models"][0]["drift"]}
    first = f"snapshots/{hub['first']}/hf_quant_config.json"
    second = f"snapshots/{hub['second']}/hf_quant_config.json"
    assert set(drift) == {first, second}
    assert f"no longer matches its name; shared by {second}" in drift[first]["note"]
    assert drift[first]["expected"] == f"git-sha1:{blob.name}"

    # offline and with no other copy, revert says exactly what to run
    proc = run("model", "revert", "--yes", REPO_ID, "--revision", "main", env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 1
    command = f"hf download {REPO_ID} hf_quant_config.json --revision {hub['second']} --force-download"
    assert command in proc.stdout

    # the local dir holds identical bytes: the key diff and the revert take them from there
    code, report = scan_json(hub, REPO_ID, "--source", hub["local"])
    assert FIELD_EDIT in [c["key"] + ': removed (was "FP8")' for c in report["models"][0]["changes"]]
    proc = run("model", "revert", "--yes", REPO_ID, "--source", hub["local"], env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stdout
    assert f"restore blobs/{blob.name}" in proc.stdout
    assert git_sha1(blob.read_bytes()) == blob.name
    assert scan_json(hub, REPO_ID)[0] == 0


def test_local_dir_edit_added_missing_and_a_truncated_shard(hub: dict[str, object]) -> None:
    local = Path(str(hub["local"]))
    config = local / "hf_quant_config.json"
    subprocess.run(["sed", "-i", "/kv_cache_quant_algo/d", str(config)], check=True)
    (local / "notes.txt").write_text("tried fp16 kv cache\n")
    (local / "tokenizer.json").unlink()
    shard = local / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-7])

    code, report = scan_json(hub, local, "--source", hub["repo"])
    model = report["models"][0]
    states = {d["path"]: d["state"] for d in model["drift"]}
    assert states == {
        "hf_quant_config.json": "modified",
        "notes.txt": "added",
        "tokenizer.json": "missing",
        "model-00002-of-00002.safetensors": "modified",
    }
    rules = {(f["rule"], f["path"]) for f in model["findings"]}
    assert ("config-quantization", "hf_quant_config.json") in rules
    assert ("safetensors-header", "model-00002-of-00002.safetensors") in rules

    proc = run("model", "revert", "--yes", local, "--source", hub["repo"], env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stdout
    assert "remove  notes.txt" in proc.stdout
    assert scan_json(hub, local)[0] == 0


def test_dangling_link_and_a_ref_without_snapshot(hub: dict[str, object]) -> None:
    repo = Path(str(hub["repo"]))
    shard = snap(hub, "first", "model-00001-of-00002.safetensors")
    shutil.copy(shard.resolve(), hub["tmp"] / "kept")  # type: ignore[operator]
    shard.resolve().unlink()
    (repo / "refs" / "pr").mkdir()
    (repo / "refs" / "pr" / "1").write_text("0" * 40)
    code, report = scan_json(hub, REPO_ID)
    states = {d["path"]: (d["state"], d["note"]) for d in report["models"][0]["drift"]}
    assert states[f"snapshots/{hub['first']}/model-00001-of-00002.safetensors"][0] == "missing"
    assert "dangling link" in states[f"snapshots/{hub['first']}/model-00001-of-00002.safetensors"][1]
    assert states["refs/pr/1"] == ("missing", f"ref pr/1 -> {'0' * 40}: no such snapshot")


def test_plain_directory_manifest(hub: dict[str, object], tmp_path: Path) -> None:
    plain = tmp_path / "ckpt"
    shutil.copytree(hub["local"], plain, ignore=shutil.ignore_patterns(".cache"))  # type: ignore[arg-type]
    missing = run("model", "scan", plain, env=hub["env"])  # type: ignore[arg-type]
    assert missing.returncode == 2 and "baseline create --model" in missing.stderr
    made = run("baseline", "create", "--model", plain, env=hub["env"])  # type: ignore[arg-type]
    assert made.returncode == 0, made.stderr
    assert scan_json(hub, plain)[0] == 0
    config = plain / "config.json"
    data = json.loads(config.read_text())
    data["torch_dtype"] = "float16"
    data["rope_theta"] = 10000.0
    config.write_text(json.dumps(data))
    code, report = scan_json(hub, plain)
    found = {(f["rule"], f["severity"], f["message"]) for f in report["models"][0]["findings"]}
    assert found == {
        ("config-dtype", "medium", 'torch_dtype: changed "bfloat16" -> "float16"'),
        ("config-rope", "high", "rope_theta: changed 1000000.0 -> 10000.0"),
    }
    assert run("model", "revert", "--yes", plain, env=hub["env"]).returncode == 0  # type: ignore[arg-type]
    assert scan_json(hub, plain)[0] == 0


def test_stat_cache_and_deep_agree(hub: dict[str, object]) -> None:
    """The shortcut (stat cache) against the slow path (--deep) on the same, edited cache."""
    assert scan_json(hub, REPO_ID)[0] == 0  # fills the cache
    blob = snap(hub, "first", "model-00002-of-00002.safetensors").resolve()
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1  # same size, header intact: only a hash sees it
    st = blob.stat()
    blob.write_bytes(bytes(data))
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))
    warm = scan_json(hub, REPO_ID)[1]["models"][0]
    deep = scan_json(hub, REPO_ID, "--deep")[1]["models"][0]
    assert warm["drift"] == deep["drift"] and len(warm["drift"]) == 2


def test_gate_with_models_policy_fails_on_the_edit_and_passes_after_revert(hub: dict[str, object]) -> None:
    tmp = Path(str(hub["tmp"]))
    wheel = build_wheel(tmp / "wheels", "served", "1.0", {"served/__init__.py": ""})
    python = make_venv(tmp / "venv")
    pip_install(python, wheel)
    policy = tmp / "policy.toml"
    policy.write_text(f'models = [{{repo = "{REPO_ID}", revision = "main"}}, "{hub["local"]}"]\n')
    env = hub["env"]

    def gate() -> subprocess.CompletedProcess[str]:
        return run("gate", "--python", python, "--policy", policy, env=env)  # type: ignore[arg-type]

    for _ in range(20):  # until the verdict is kept: the edit below must be seen by a warm gate
        passed = gate()
        assert passed.returncode == 0, passed.stdout
        if "cached" in passed.stdout:
            break
        time.sleep(0.2)
    assert "cached" in passed.stdout
    served = snap(hub, "second", "hf_quant_config.json")
    subprocess.run(["sed", "-i", "/kv_cache_quant_algo/d", str(served)], check=True)
    failed = gate()
    assert failed.returncode == 1
    assert f"model:{REPO_ID}: modified snapshots/{hub['second']}/hf_quant_config.json" in failed.stdout
    assert FIELD_EDIT in failed.stdout
    assert run("model", "revert", "--yes", REPO_ID, env=env).returncode == 0  # type: ignore[arg-type]
    assert gate().returncode == 0


def test_bad_model_input_is_one_line_exit_2(hub: dict[str, object], tmp_path: Path) -> None:
    for args in (["acme/absent"], [tmp_path / "nothing"], [REPO_ID, "--revision", "nope"]):
        proc = run("model", "scan", *args, env=hub["env"])  # type: ignore[arg-type]
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("patchaudit: error: ") and proc.stderr.count("\n") == 1


def test_config_rule_examples_hold() -> None:
    from patchaudit.models.configrules import example_problems

    assert example_problems() == []


def test_sarif_carries_config_findings(hub: dict[str, object]) -> None:
    import jsonschema

    subprocess.run(["sed", "-i", "/kv_cache_quant_algo/d", str(snap(hub, "first", "hf_quant_config.json"))], check=True)
    proc = run("model", "scan", REPO_ID, "--format", "sarif", env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 1
    sarif = json.loads(proc.stdout)
    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(sarif, schema)
    result, drift = sarif["runs"][0]["results"]
    assert (result["ruleId"], result["level"], result["message"]["text"]) == (
        "config-quantization",
        "error",
        FIELD_EDIT,
    )
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location["uri"] == f"snapshots/{hub['first']}/hf_quant_config.json"
    assert location["uriBaseId"] == "MODELDIR"  # a model directory, named as such
    base = sarif["runs"][0]["originalUriBaseIds"][location["uriBaseId"]]["uri"]
    assert base.endswith("models--acme--tiny-fp8/")
    # The edited file is a result of its own too, under the drift rule of its state.
    assert drift["ruleId"] == "modified-file"
    assert drift["locations"][0]["physicalLocation"]["artifactLocation"] == location


def test_a_file_the_commit_does_not_list_is_added_and_removed_by_revert(hub: dict[str, object]) -> None:
    extra = snap(hub, "first", "debug_dump.json")
    extra.write_text("{}")
    code, report = scan_json(hub, REPO_ID, "--revision", str(hub["first"])[:10])
    assert code == 1
    (drift,) = report["models"][0]["drift"]
    assert (drift["path"], drift["state"]) == (f"snapshots/{hub['first']}/debug_dump.json", "added")
    proc = run("model", "revert", "--yes", REPO_ID, env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 0 and not extra.exists()


def test_local_dir_without_a_pristine_copy_prints_the_download_command(hub: dict[str, object]) -> None:
    local = Path(str(hub["local"]))
    (local / "config.json").write_text("{}")
    # the hub cache holds the same blob and would be used: point the lookup at an empty one
    env = {**hub["env"], "HF_HOME": str(Path(str(hub["tmp"])) / "empty")}  # type: ignore[dict-item]
    proc = run("model", "revert", "--yes", local, env=env)
    assert proc.returncode == 1
    command = f"hf download REPO_ID config.json --revision {hub['first']} --local-dir {local} --force-download"
    assert command in proc.stdout
    assert (local / "config.json").read_text() == "{}"  # nothing was changed
    restored = run("model", "revert", "--yes", local, env=hub["env"])  # type: ignore[arg-type]
    assert restored.returncode == 0 and "restore config.json" in restored.stdout


def test_revert_takes_a_plain_source_directory_and_asks_first(hub: dict[str, object], tmp_path: Path) -> None:
    import pty

    plain = tmp_path / "ckpt"
    shutil.copytree(hub["local"], plain, ignore=shutil.ignore_patterns(".cache"))  # type: ignore[arg-type]
    env = {**hub["env"], "HF_HOME": str(tmp_path / "no-hub")}  # type: ignore[dict-item]
    assert run("baseline", "create", "--model", plain, env=env).returncode == 0
    shard = plain / "model-00002-of-00002.safetensors"
    good = shard.read_bytes()
    spare = tmp_path / "spare" / "weights"  # a plain copy of the shard, under another folder
    spare.mkdir(parents=True)
    (spare / shard.name).write_bytes(good)
    shard.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))

    gone = run("model", "revert", "--yes", plain, "--source", tmp_path / "nonexistent", env=env)
    assert gone.returncode == 2, gone.stderr
    assert "nonexistent" in gone.stderr and "does not exist" in gone.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = run("model", "revert", "--yes", plain, "--source", elsewhere, env=env)
    assert refused.returncode == 1
    assert f"no file named {shard.name} in {elsewhere} has sha256" in refused.stdout

    unasked = run("model", "revert", plain, "--source", tmp_path / "spare", env=env)
    assert unasked.returncode == 2 and "-y/--yes" in unasked.stderr
    assert shard.read_bytes() != good  # nothing written without a yes

    # On a terminal it asks; "n" writes nothing.
    exe = Path(sys.executable).parent / "patchaudit"
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"n\n")
        asked = subprocess.run(
            [str(exe), "model", "revert", str(plain), "--source", str(tmp_path / "spare")],
            stdin=follower,
            capture_output=True,
            text=True,
            env={**os.environ, **env, "HF_HUB_OFFLINE": "1"},
            timeout=120,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert "Revert 1 file of" in asked.stdout and asked.returncode != 0
    assert shard.read_bytes() != good

    done = run("model", "revert", "-y", plain, "--source", tmp_path / "spare", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"restore {shard.name}" in done.stdout
    assert shard.read_bytes() == good


def test_hub_cache_drift_names_its_commit_once(hub: dict[str, object]) -> None:
    for name in ("hf_quant_config.json", "config.json"):
        target = snap(hub, "first", name)
        data = target.read_bytes()
        target.unlink()
        target.write_bytes(data + b"\n")
    proc = run("model", "scan", REPO_ID, "--revision", str(hub["first"]), env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.count(str(hub["first"])) == 1, proc.stdout
    assert "    modified config.json" in proc.stdout and "    modified hf_quant_config.json" in proc.stdout
    assert all(len(line) <= 100 for line in proc.stdout.splitlines()[1:])


def test_manifest_keeps_crlf_configs_and_undo_puts_top_level_files_back(hub: dict[str, object], tmp_path: Path) -> None:
    plain = tmp_path / "crlf"
    shutil.copytree(hub["local"], plain, ignore=shutil.ignore_patterns(".cache"))  # type: ignore[arg-type]
    config = plain / "config.json"
    crlf = config.read_bytes().replace(b"\n", b"\r\n")
    config.write_bytes(crlf)
    assert run("baseline", "create", "--model", plain, env=hub["env"]).returncode == 0  # type: ignore[arg-type]
    edited = crlf.replace(b"bfloat16", b"float16")
    config.write_bytes(edited)

    proc = run("model", "revert", "--yes", plain, env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert config.read_bytes() == crlf  # the manifest's copy, carriage returns and all
    assert scan_json(hub, plain)[0] == 0

    run_id = proc.stdout.split("quarantine restore ")[1].split()[0]
    undo = run("quarantine", "restore", run_id, "--path", plain, "--yes", env=hub["env"])  # type: ignore[arg-type]
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert config.read_bytes() == edited


def test_nan_in_a_config_is_not_a_change_and_the_report_stays_strict_json(
    hub: dict[str, object], tmp_path: Path
) -> None:
    plain = tmp_path / "nan"
    shutil.copytree(hub["local"], plain, ignore=shutil.ignore_patterns(".cache"))  # type: ignore[arg-type]
    config = plain / "config.json"
    config.write_text('{"torch_dtype": "bfloat16", "rope_theta": NaN, "max_norm": 1.0}\n')
    assert run("baseline", "create", "--model", plain, env=hub["env"]).returncode == 0  # type: ignore[arg-type]
    config.write_text('{"torch_dtype": "float16", "rope_theta": NaN, "max_norm": Infinity}\n')

    proc = run("model", "scan", plain, "--format", "json", env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 1, proc.stderr

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in the JSON report")

    report = json.loads(proc.stdout, parse_constant=refuse)
    changes = {c["key"]: (c["old"], c["new"]) for c in report["models"][0]["changes"]}
    assert changes == {"torch_dtype": ("bfloat16", "float16"), "max_norm": (1.0, "Infinity")}


@pytest.mark.parametrize(
    "tensor",
    [
        {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]},
        {"dtype": "U8", "shape": [1], "data_offsets": [False, True]},
        {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
    ],
)
def test_safetensors_header_check_agrees_with_the_library(tensor: dict[str, object], tmp_path: Path) -> None:
    from safetensors import SafetensorError, safe_open

    from patchaudit.models.safetensors import check_header

    header = json.dumps({"t": tensor}).encode()
    shard = tmp_path / "x.safetensors"
    shard.write_bytes(len(header).to_bytes(8, "little") + header + b"\x07")
    try:
        with safe_open(str(shard), framework="numpy") as f:
            f.get_tensor("t")
        library_accepts = True
    except SafetensorError:
        library_accepts = False
    assert (check_header(shard) is None) == library_accepts, check_header(shard)


def test_a_key_written_twice_is_reported_where_json_takes_its_value(hub: dict[str, object], tmp_path: Path) -> None:
    plain = tmp_path / "dup"
    shutil.copytree(hub["local"], plain, ignore=shutil.ignore_patterns(".cache"))  # type: ignore[arg-type]
    config = plain / "config.json"
    text = (
        '{\n  "torch_dtype": "bfloat16",\n  "text_config": {\n    "torch_dtype": "bfloat16"\n  },\n'
        '  "torch_dtype": "%s"\n}\n'
    )
    config.write_text(text % "bfloat16")
    assert run("baseline", "create", "--model", plain, env=hub["env"]).returncode == 0  # type: ignore[arg-type]
    config.write_text(text % "float16")  # the second spelling is the one every JSON reader keeps
    code, report = scan_json(hub, plain)
    (finding,) = [f for f in report["models"][0]["findings"] if f["rule"] == "config-dtype"]
    assert (finding["message"], finding["line"]) == ('torch_dtype: changed "bfloat16" -> "float16"', 6)


@pytest.mark.parametrize("file_lists", [True, False], ids=["with-trees", "without-trees"])
def test_several_sed_i_edits_are_each_matched_to_their_blob(hub: dict[str, object], file_lists: bool) -> None:
    repo = Path(str(hub["repo"]))
    if not file_lists:
        shutil.rmtree(repo / "trees", ignore_errors=True)  # what clients before huggingface_hub 2 leave
    # README differs between the two revisions: its first blob is linked by the edited snapshot only
    edits = {
        "hf_quant_config.json": ["sed", "-i", "/kv_cache_quant_algo/d"],
        "config.json": ["sed", "-i", "s/1000000.0/10000.0/"],
        "README.md": ["sed", "-i", "s/v1/v1 patched/"],
    }
    for name, cmd in edits.items():
        subprocess.run([*cmd, str(snap(hub, "first", name))], check=True)
    code, report = scan_json(hub, REPO_ID)
    assert code == 1
    model = report["models"][0]
    drift = {d["path"].rsplit("/", 1)[1]: d for d in model["drift"]}
    assert set(drift) == set(edits)
    assert all(d["expected"] is not None for d in drift.values()), drift
    found = {(f["rule"], f["severity"], f["message"]) for f in model["findings"]}
    assert ("config-quantization", "high", FIELD_EDIT) in found
    assert ("config-rope", "high", "rope_theta: changed 1000000.0 -> 10000.0") in found

    proc = run("model", "revert", "--yes", REPO_ID, env=hub["env"])  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in edits:
        assert snap(hub, "first", name).is_symlink()
    assert snap(hub, "first", "README.md").read_bytes() == b"v1"
    assert scan_json(hub, REPO_ID)[0] == 0
