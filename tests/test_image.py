"""`scan --image`: images built by umoci and skopeo from a real pip install, read layer by layer."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_rootfs import FILES, PY, install_into, patchaudit, read_only, snapshot
from wheels import build_wheel

SITE = f"/usr/local/lib/{PY}/site-packages"
PATCH = 'def forward(x):\n    if x.shape[0] == 5:\n        import torch; torch.save(x, "/tmp/dump.pt")\n    return x\n'
COPY = f"COPY deepseek_v2.py {SITE}/tinymodel/models/deepseek_v2.py"

# In CI (.ci/run installs them) a missing tool fails the tests instead of skipping them.
IN_CI = bool(os.environ.get("CI"))
pytestmark = pytest.mark.skipif(shutil.which("umoci") is None and not IN_CI, reason="umoci is not installed")


def run(*args: str | Path) -> None:
    subprocess.run([str(a) for a in args], check=True, timeout=120, capture_output=True)


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """oci:img:base (a pip install), oci:img:derived (+ a COPY'd patch, + a whiteout)."""
    work = tmp_path_factory.mktemp("image")
    wheel = build_wheel(work, "tinymodel", "1.0", FILES)
    install_into(work / "base-rootfs", wheel, "/usr/local")
    img = work / "img"
    run("umoci", "init", "--layout", img)
    run("umoci", "new", "--image", f"{img}:base")
    run(
        "umoci",
        "insert",
        "--image",
        f"{img}:base",
        "--history.created_by",
        "RUN pip install tinymodel",
        work / "base-rootfs",
        "/",
    )
    run("umoci", "tag", "--image", f"{img}:base", "derived")
    (work / "deepseek_v2.py").write_text(PATCH)
    target = f"{SITE}/tinymodel/models/deepseek_v2.py"
    run("umoci", "insert", "--image", f"{img}:derived", "--history.created_by", COPY, work / "deepseek_v2.py", target)
    gone = f"{SITE}/tinymodel/loader.py"
    run("umoci", "insert", "--image", f"{img}:derived", "--history.created_by", "RUN rm loader.py", "--whiteout", gone)
    return img


def test_base_is_clean_and_derived_names_the_patch_its_layer_and_the_deletion(layout: Path) -> None:
    before = snapshot(layout)
    base = patchaudit("scan", "--image", f"oci:{layout}:base")
    assert base.returncode == 0, base.stdout + base.stderr
    derived = patchaudit("scan", "--image", f"oci:{layout}:derived")
    assert derived.returncode == 1, derived.stderr
    out = derived.stdout
    assert "modified        tinymodel/models/deepseek_v2.py" in out
    assert "missing         tinymodel/loader.py" in out
    assert "[torch-save]" in out and "[token-count-branch]" in out
    assert f": {COPY}" in out and ": RUN rm loader.py" in out
    data = json.loads(patchaudit("scan", "--image", f"oci:{layout}:derived", "--format", "json").stdout)
    (dist,) = data["distributions"]
    layers = {d["path"]: d["layer"] for d in dist["drift"]}
    assert layers["tinymodel/models/deepseek_v2.py"]["created_by"] == COPY
    assert layers["tinymodel/models/deepseek_v2.py"]["index"] == 1
    assert layers["tinymodel/loader.py"]["created_by"] == "RUN rm loader.py"
    patch = patchaudit("diff", "tinymodel", "--image", f"oci:{layout}:derived")
    assert patch.returncode == 1
    assert "+++ tinymodel/models/deepseek_v2.py\n" in patch.stdout and "+    if x.shape[0] == 5:\n" in patch.stdout
    assert "--- tinymodel/loader.py\n+++ /dev/null\n" in patch.stdout and "-def load():\n" in patch.stdout
    none = patchaudit("diff", "tinymodel", "--image", f"oci:{layout}:base")
    assert none.returncode == 0 and none.stdout == ""
    assert snapshot(layout) == before  # the layout is read, never written


def test_gate_and_formats_over_an_image(layout: Path) -> None:
    ok = patchaudit("gate", "--image", f"oci:{layout}:base", "--", sys.executable, "-c", "print('server started')")
    assert ok.returncode == 0 and "server started" in ok.stdout, ok.stderr
    failed = patchaudit(
        "gate", "--image", f"oci:{layout}:derived", "--", sys.executable, "-c", "print('server started')"
    )
    assert failed.returncode == 1 and "server started" not in failed.stdout
    assert "modified tinymodel/models/deepseek_v2.py" in failed.stdout and f"layer 1: {COPY}" in failed.stdout
    for fmt, needle in (("sarif", '"ruleId": "torch-save"'), ("prometheus", f'target="oci:{layout}:derived"')):
        shown = patchaudit("scan", "--image", f"oci:{layout}:derived", "--format", fmt)
        assert shown.returncode == 1 and needle in shown.stdout, (fmt, shown.stdout[:500])


def test_base_keeps_only_what_the_layers_above_it_changed(layout: Path, tmp_path: Path) -> None:
    # a base that is itself patched: its drift is not the derived image's news
    img = tmp_path / "img"
    shutil.copytree(layout, img)
    run(
        "umoci",
        "insert",
        "--image",
        f"{img}:base",
        "--history.created_by",
        "RUN rm base",
        "--whiteout",
        f"{SITE}/tinymodel/__init__.py",
    )
    run("umoci", "tag", "--image", f"{img}:base", "mid")
    (tmp_path / "p.py").write_text(PATCH)
    run(
        "umoci",
        "insert",
        "--image",
        f"{img}:mid",
        "--history.created_by",
        COPY,
        tmp_path / "p.py",
        f"{SITE}/tinymodel/models/deepseek_v2.py",
    )
    (tmp_path / "hook.pth").write_text('import os; os.environ["VLLM_DEBUG_DUMP"] = "1"\n')
    hook = f"COPY hook.pth {SITE}/"
    run(
        "umoci",
        "insert",
        "--image",
        f"{img}:mid",
        "--history.created_by",
        hook,
        tmp_path / "hook.pth",
        f"{SITE}/hook.pth",
    )
    whole = patchaudit("scan", "--image", f"oci:{img}:mid")
    assert "tinymodel/__init__.py" in whole.stdout
    above = patchaudit("scan", "--image", f"oci:{img}:mid", "--base", f"oci:{img}:base")
    assert above.returncode == 1
    assert "tinymodel/__init__.py" not in above.stdout
    assert "modified        tinymodel/models/deepseek_v2.py" in above.stdout
    assert f"added           {SITE}/hook.pth  (startup hook)" in above.stdout and f": {hook}" in above.stdout
    assert "[startup-hook]" in above.stdout
    other = patchaudit("scan", "--image", f"oci:{img}:base", "--base", f"oci:{img}:mid")
    assert other.returncode == 2 and "is not a base of" in other.stderr


@pytest.mark.skipif(shutil.which("skopeo") is None and not IN_CI, reason="skopeo is not installed")
def test_archives_written_by_skopeo_read_the_same(layout: Path, tmp_path: Path) -> None:
    docker = tmp_path / "derived.tar"
    oci_archive = tmp_path / "derived-oci.tar"
    copy = ("skopeo", "--insecure-policy", "copy", "-q")
    run(*copy, f"oci:{layout}:derived", f"docker-archive:{docker}:example/derived:1")
    run(*copy, f"oci:{layout}:derived", f"oci-archive:{oci_archive}:derived")
    for ref in (f"docker-archive:{docker}", f"docker-archive:{docker}:example/derived:1", f"oci-archive:{oci_archive}"):
        found = patchaudit("scan", "--image", ref, "--format", "json")
        assert found.returncode == 1, (ref, found.stderr)
        drift = {d["path"]: d for d in json.loads(found.stdout)["distributions"][0]["drift"]}
        assert set(drift) == {"tinymodel/models/deepseek_v2.py", "tinymodel/loader.py"}, ref
        assert drift["tinymodel/models/deepseek_v2.py"]["layer"]["created_by"] == COPY


def test_unpacked_rootfs_reads_as_the_image_does(layout: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    run("umoci", "unpack", "--rootless", "--image", f"{layout}:derived", bundle)
    before = snapshot(bundle / "rootfs")
    found = patchaudit("scan", "--root", bundle / "rootfs")
    assert found.returncode == 1
    assert "modified        tinymodel/models/deepseek_v2.py" in found.stdout
    assert "missing         tinymodel/loader.py" in found.stdout
    assert "[torch-save]" in found.stdout
    assert snapshot(bundle / "rootfs") == before


# Hostile images, made by hand: nothing a real tool would write.


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def _blob(root: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    path = root / "blobs/sha256" / digest
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def hand_made(root: Path, layers: list[bytes], *, raw_tars: list[bytes] | None = None) -> str:
    """An OCI layout of these (already compressed or plain) layer blobs."""
    known: dict[int, dict[str, object]] = {}  # one blob listed many times is hashed and written once
    descs = [
        known.setdefault(id(blob), dict(_blob(root, blob), mediaType="application/vnd.oci.image.layer.v1.tar+gzip"))
        for blob in layers
    ]
    tars = raw_tars if raw_tars is not None else layers
    ids = {id(t): f"sha256:{hashlib.sha256(t).hexdigest()}" for t in tars}
    config = {"rootfs": {"type": "layers", "diff_ids": [ids[id(t)] for t in tars]}}
    config_desc = dict(_blob(root, json.dumps(config).encode()), mediaType="application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "config": config_desc, "layers": descs}
    manifest_desc = dict(
        _blob(root, json.dumps(manifest).encode()), mediaType="application/vnd.oci.image.manifest.v1+json"
    )
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest_desc]}))
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return f"oci:{root}"


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, link: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info, b""


def _installed_layer(layout: Path) -> bytes:
    """The real pip-install layer of the umoci image, as a plain tar."""
    index = json.loads((layout / "index.json").read_text())
    (manifest_desc,) = [
        m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == "base"
    ]
    manifest = json.loads((layout / "blobs/sha256" / manifest_desc["digest"][7:]).read_text())
    return gzip.decompress((layout / "blobs/sha256" / manifest["layers"][0]["digest"][7:]).read_bytes())


def hostile_cases(layout: Path) -> dict[str, list[bytes]]:
    pip_layer = _installed_layer(layout)
    record = f"{SITE[1:]}/tinymodel-1.0.dist-info/RECORD"
    return {
        "escape": [_tar([_file("usr/../../etc/evil")])],
        "whiteout-root": [pip_layer, _tar([_file(".wh..")])],
        # the package directory replaced by a link to the host's /etc: read inside the image, not the host
        "symlink-etc": [
            pip_layer,
            _tar([_file(f"{SITE[1:]}/.wh.tinymodel"), _special(f"{SITE[1:]}/tinymodel", tarfile.SYMTYPE, "/etc")]),
        ],
        "hardlink-out": [
            pip_layer,
            _tar([_special(f"{SITE[1:]}/tinymodel/loader.py", tarfile.LNKTYPE, "../../etc/shadow")]),
        ],
        # a hard link to a file the image does not hold (the host's /etc/shadow is never read)
        "hardlink-other": [
            pip_layer,
            _tar([_special(f"{SITE[1:]}/tinymodel/loader.py", tarfile.LNKTYPE, "etc/shadow")]),
        ],
        # a hard link to a lower layer's file: that file's bytes, checked against RECORD as any
        "hardlink-lower": [
            pip_layer,
            _tar([_special(f"{SITE[1:]}/tinymodel/loader.py", tarfile.LNKTYPE, f"{SITE[1:]}/tinymodel/__init__.py")]),
        ],
        "record-link": [
            pip_layer,
            _tar([_file(f"{record[:-6]}/.wh.RECORD"), _special(record, tarfile.SYMTYPE, "/etc/passwd")]),
        ],
    }


def _one_line_or_drift(found: subprocess.CompletedProcess[str]) -> None:
    assert found.returncode in (1, 2), found.stderr
    assert "Traceback" not in found.stderr and "internal error" not in found.stderr
    if found.returncode == 2:
        assert found.stderr.count("\n") == 1 and found.stderr.startswith("patchaudit: error:"), found.stderr


def test_hostile_layers_give_one_line_or_drift_and_never_read_the_host(layout: Path, tmp_path: Path) -> None:
    for name, layers in hostile_cases(layout).items():
        ref = hand_made(tmp_path / name, [gzip.compress(t) for t in layers], raw_tars=layers)
        found = patchaudit("scan", "--image", ref, "--format", "json")
        _one_line_or_drift(found)
        assert "root:" not in found.stdout  # nothing of the host's /etc/passwd or /etc/shadow
        if name in ("escape", "hardlink-out"):
            assert "climbs out of the image" in found.stderr
        if name == "whiteout-root":
            assert "root" in found.stderr
        if name == "symlink-etc":
            drift = {d["path"]: d for d in json.loads(found.stdout)["distributions"][0]["drift"]}
            assert drift["tinymodel/loader.py"]["state"] == "missing"  # /etc/loader.py of the image: absent
        if name == "hardlink-other":
            dist = json.loads(found.stdout)["distributions"][0]
            assert any(u["path"] == "tinymodel/loader.py" and "hard link" in u["reason"] for u in dist["unverified"])
        if name == "hardlink-lower":  # loader.py now holds __init__.py's bytes: modified, in layer 1
            drift = {d["path"]: d for d in json.loads(found.stdout)["distributions"][0]["drift"]}
            assert (
                drift["tinymodel/loader.py"]["state"] == "modified"
                and drift["tinymodel/loader.py"]["layer"]["index"] == 1
            )
        if name == "record-link":  # the distribution is not hidden: it cannot be verified, and says so
            assert found.returncode == 1
            dist = json.loads(found.stdout)["distributions"][0]
            assert dist["status"] == "unverifiable" and "RECORD" in dist["unverified"][0]["reason"]


def test_digest_mismatch_bomb_and_too_many_layers_are_refused(layout: Path, tmp_path: Path) -> None:
    pip_layer = _installed_layer(layout)
    ref = hand_made(tmp_path / "mismatch", [gzip.compress(pip_layer)], raw_tars=[pip_layer])
    blob = next((tmp_path / "mismatch/blobs/sha256").iterdir(), None)
    index = json.loads((tmp_path / "mismatch/index.json").read_text())
    manifest = json.loads((tmp_path / "mismatch/blobs/sha256" / index["manifests"][0]["digest"][7:]).read_text())
    layer_blob = tmp_path / "mismatch/blobs/sha256" / manifest["layers"][0]["digest"][7:]
    assert blob is not None
    data = bytearray(layer_blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    layer_blob.write_bytes(bytes(data))
    found = patchaudit("scan", "--image", ref)
    _one_line_or_drift(found)
    assert found.returncode == 2 and "the blob's digest is" in found.stderr

    zeros = _tar([_file("big", b"")])  # a bomb: 400 MiB of zeros in a 400 KB gzip
    bomb = gzip.compress(zeros[:512]) + gzip.compress(bytes(1 << 20)) * 400  # gzip members, one after another
    ref = hand_made(tmp_path / "bomb", [bomb], raw_tars=[zeros])
    found = patchaudit("scan", "--image", ref)
    _one_line_or_drift(found)
    assert found.returncode == 2 and "bomb" in found.stderr

    many = tmp_path / "many"
    layer = gzip.compress(_tar([_file("a")]))
    ref = hand_made(many, [layer] * 10_000, raw_tars=[_tar([_file("a")])] * 10_000)
    found = patchaudit("scan", "--image", ref)
    _one_line_or_drift(found)
    assert found.returncode == 2 and "10000 layers" in found.stderr


def test_a_bad_reference_is_one_line(tmp_path: Path) -> None:
    for ref in ("docker://vllm/vllm-openai", f"oci:{tmp_path}/nothing", f"oci:{tmp_path}"):
        _one_line_or_drift(patchaudit("scan", "--image", ref))


@pytest.mark.skipif(shutil.which("zstd") is None and not IN_CI, reason="zstd is not installed")
def test_a_zstd_layer_is_read_or_named(layout: Path, tmp_path: Path) -> None:
    """zstd layers need the optional `zstandard` package (Python has no zstd of its own before 3.14)."""
    pip_layer = _installed_layer(layout)
    packed = subprocess.run(["zstd", "-q", "-c"], input=pip_layer, capture_output=True, check=True, timeout=60).stdout
    ref = hand_made(tmp_path / "zstd", [packed], raw_tars=[pip_layer])
    found = patchaudit("scan", "--image", ref)
    try:
        import zstandard  # noqa: F401
    except ImportError:
        assert found.returncode == 2 and "zstd-compressed" in found.stderr and "zstandard" in found.stderr
    else:
        assert found.returncode == 0 and "clean        tinymodel 1.0" in found.stdout


def test_a_large_member_is_streamed_not_held(layout: Path, tmp_path: Path) -> None:
    """Peak memory stays far below the member's size: layers and members are read as streams."""
    size = 192 << 20
    root = tmp_path / "big"
    blobs = root / "blobs/sha256"
    blobs.mkdir(parents=True)
    pip_layer = _installed_layer(layout)
    info = tarfile.TarInfo(f"{SITE[1:]}/tinymodel/weights.bin")
    info.size = size
    digest, part = hashlib.sha256(), blobs / "part"
    with part.open("wb") as fh:
        header = info.tobuf(format=tarfile.PAX_FORMAT)
        chunk = bytes(1 << 20)
        for data in (header, *([chunk] * (size >> 20)), bytes(1024)):
            fh.write(data)
            digest.update(data)
    big = f"sha256:{digest.hexdigest()}"
    part.rename(blobs / big[7:])
    small = _blob(root, pip_layer)
    config = {"rootfs": {"type": "layers", "diff_ids": [small["digest"], big]}}
    layers = [
        dict(small, mediaType="application/vnd.oci.image.layer.v1.tar"),
        {
            "digest": big,
            "size": (blobs / big[7:]).stat().st_size,
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
        },
    ]
    manifest = {"schemaVersion": 2, "config": _blob(root, json.dumps(config).encode()), "layers": layers}
    (root / "index.json").write_text(
        json.dumps({"schemaVersion": 2, "manifests": [_blob(root, json.dumps(manifest).encode())]})
    )
    exe = Path(sys.executable).parent / "patchaudit"
    argv = [str(exe), "scan", "--image", f"oci:{root}", "--workers", "1", "--format", "json"]
    # The scan is started by a small wrapper, not by this test process: Linux carries the peak RSS of the
    # process that forks into its child's across exec, and pytest itself may by now hold hundreds of MB.
    wrap = (
        "import os, subprocess, sys\n"
        "with open(sys.argv[1], 'w') as sink:\n"
        "    p = subprocess.Popen(sys.argv[2:], stdout=sink, stderr=subprocess.DEVNULL)\n"
        "    _, status, usage = os.wait4(p.pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n"
    )
    measured = subprocess.run(
        [sys.executable, "-c", wrap, str(tmp_path / "out.json"), *argv], capture_output=True, text=True, check=True
    )
    code, peak = map(int, measured.stdout.split())
    assert code == 1  # weights.bin: a file no RECORD lists, added in layer 1
    assert peak < 150 * 1024, peak  # KiB: well below the 192 MiB member plus the interpreter
    out = (tmp_path / "out.json").read_text()
    drift = json.loads(out)["distributions"][0]["drift"]
    assert [(d["path"], d["state"], d["layer"]["index"]) for d in drift] == [("tinymodel/weights.bin", "added", 1)]


def _tree_bytes(tree: Path) -> dict[str, str]:
    """Each regular file's sha256 (and each link's target), by path inside the tree; bytecode aside (a
    revert drops the .pyc files of what it restores: Python writes them again from the restored source)."""
    shown = [(p, v) for p, v in snapshot(tree).items() if "__pycache__" not in p]
    return {
        path: digest or f"-> {os.readlink(tree / path)}"
        for path, (_m, _t, digest) in shown
        if digest or (tree / path).is_symlink()
    }


def test_revert_root_restores_an_unpacked_rootfs_and_undo_puts_it_back(layout: Path, tmp_path: Path) -> None:
    """An unpacked rootfs its operator owns is reverted in place to the base image's bytes; the quarantine
    and the journal are kept outside the tree; the undo line, run as printed, puts the patch back."""
    run("umoci", "unpack", "--rootless", "--image", f"{layout}:base", tmp_path / "base")
    run("umoci", "unpack", "--rootless", "--image", f"{layout}:derived", tmp_path / "derived")
    rootfs, pristine = tmp_path / "derived" / "rootfs", tmp_path / "base" / "rootfs"
    hook = rootfs / SITE.lstrip("/") / "debug.pth"
    hook.write_text('import os; os.environ["VLLM_DEBUG_DUMP"] = "1"\n')  # an edit made in the container
    patched = _tree_bytes(rootfs)
    assert patched != _tree_bytes(pristine)
    state = tmp_path / "state"
    exe = str(Path(sys.executable).parent / "patchaudit")
    env = dict(os.environ, PATCHAUDIT_STATE_HOME=str(state), PATH=f"{Path(exe).parent}:{os.environ['PATH']}")
    wheelhouse = layout.parent

    def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120, env=env)

    done = cli("revert", "--root", rootfs, "--wheelhouse", wheelhouse, "-y")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  restore          tinymodel/models/deepseek_v2.py\n" in done.stdout
    assert "  restore          tinymodel/loader.py\n" in done.stdout and "debug.pth" in done.stdout
    assert _tree_bytes(rootfs) == _tree_bytes(pristine)  # byte for byte the base image, and nothing more
    assert list(state.glob("trees/*/quarantine/*/manifest.json")), "the quarantine is kept outside the tree"
    assert cli("scan", "--root", rootfs).returncode == 0
    (undo,) = [line.removeprefix("undo: ") for line in done.stdout.splitlines() if line.startswith("undo: ")]
    assert f"--root {rootfs}" in undo
    back = subprocess.run(f"{undo} -y", shell=True, capture_output=True, text=True, timeout=120, env=env)
    assert back.returncode == 0, back.stdout + back.stderr
    assert _tree_bytes(rootfs) == patched


def test_revert_never_writes_into_an_image(layout: Path) -> None:
    before = snapshot(layout)
    refused = patchaudit("revert", "--image", f"oci:{layout}:derived", "-y")
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1 and "never writes into an image" in refused.stderr
    assert snapshot(layout) == before


def test_the_kubernetes_example_gates_the_images_own_environment(layout: Path, tmp_path: Path) -> None:
    """baselines/kubernetes-gate.yaml as shipped: its initContainer's command and the server's, with the
    pod's paths mapped onto this host (the unpacked image, mounted read-only, for `/`)."""
    import yaml

    pod = yaml.safe_load((Path(__file__).parents[1] / "baselines/kubernetes-gate.yaml").read_text())
    (init,) = pod["spec"]["initContainers"]
    (server,) = pod["spec"]["containers"]
    policy = tmp_path / "vllm.toml"
    policy.write_text('distributions = ["tinymodel"]\n')
    here = {"/etc/patchaudit/vllm.toml": str(policy), "/var/cache/patchaudit": str(tmp_path / "cache")}

    def command(container: dict[str, list[str]], rootfs: Path) -> list[str]:
        argv = [here.get(a, a) for a in container["command"]]
        assert argv[0] == "/opt/patchaudit/bin/patchaudit" and argv[argv.index("--root") + 1] == "/"
        argv[argv.index("--root") + 1] = str(rootfs)
        if "--" in argv:  # `vllm serve ...`: a stand-in server that says it started
            argv[argv.index("--") + 1 :] = [sys.executable, "-c", "print('server started')"]
        return argv[1:]

    for tag, code in (("base", 0), ("derived", 1)):
        run("umoci", "unpack", "--rootless", "--image", f"{layout}:{tag}", tmp_path / tag)
        rootfs = tmp_path / tag / "rootfs"
        before = snapshot(rootfs)
        gated = read_only(rootfs, *command(init, rootfs))
        assert gated.returncode == code, (tag, gated.stdout + gated.stderr)
        served = read_only(rootfs, *command(server, rootfs))
        assert served.returncode == code and ("server started" in served.stdout) == (code == 0), served.stderr
        if code:
            assert "tinymodel/models/deepseek_v2.py" in gated.stdout
        assert snapshot(rootfs) == before


def test_human_output_groups_an_images_drift_under_the_layer_that_made_it(layout: Path) -> None:
    shown = [line for line in patchaudit("scan", "--image", f"oci:{layout}:derived").stdout.splitlines() if line]
    heads = [n for n, line in enumerate(shown) if line.startswith("  layer ")]
    assert [shown[n].split(": ", 1)[1] for n in heads] == [COPY, "RUN rm loader.py"]
    first, second = heads
    assert shown[first].startswith("  layer 1 sha256:") and shown[second].startswith("  layer 2 sha256:")
    assert shown[first + 1] == "  modified        tinymodel/models/deepseek_v2.py"
    assert shown[second + 1].startswith("  missing         tinymodel/loader.py")
