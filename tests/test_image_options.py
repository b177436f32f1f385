"""`scan --image` honours what a host scan honours: --all-files, --wheelhouse, --errata (and diff/gate)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_image import IN_CI, PATCH, run
from test_rootfs import FILES, install_into, patchaudit
from wheels import build_wheel, record_hash

pytestmark = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v umoci"], capture_output=True).returncode != 0 and not IN_CI,
    reason="umoci is not installed",
)
DUMP = 'def dump(x):\n    import torch\n    torch.save(x, "/tmp/x.pt")\n'
CODEC = bytes(range(256)) * 32  # an "extension module" its wheel's RECORD is wrong about


def image_of(work: Path, tag: str, rootfs: Path, created_by: str) -> str:
    img = work / "img"
    if not (img / "index.json").exists():
        run("umoci", "init", "--layout", img)
    run("umoci", "new", "--image", f"{img}:{tag}")
    run("umoci", "insert", "--image", f"{img}:{tag}", "--history.created_by", created_by, rootfs, "/")
    return f"oci:{img}:{tag}"


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Three one-layer images of real pip installs, and the wheels they were installed from:
    `patched` holds a file edited in the very layer that installed it (no lower layer keeps its
    RECORD bytes), `upstream` a hazard the wheel itself ships, `wrong` a wheel whose RECORD is wrong."""
    work = tmp_path_factory.mktemp("options")
    house = work / "wheels"
    tiny = build_wheel(house, "tinymodel", "1.0", FILES)
    site = install_into(work / "patched", tiny, "/usr/local")
    (site / "tinymodel/models/deepseek_v2.py").write_text(PATCH)  # `RUN pip install ... && sed -i ...`
    haz = build_wheel(house, "dumper", "1.0", {"dumper/__init__.py": "", "dumper/io.py": DUMP})
    install_into(work / "upstream", haz, "/usr/local")
    files = {"vcodec/__init__.py": "", "vcodec/_codec.so": CODEC}
    wrong_house = work / "wrong-wheels"
    wrong = build_wheel(
        wrong_house,
        "vcodec",
        "2.0.4",
        files,
        record_hashes={"vcodec/_codec.so": record_hash(CODEC[:1024])},
        record_sizes={"vcodec/_codec.so": 1024},
    )
    install_into(work / "wrong", wrong, "/usr/local")  # pip keeps the wheel's RECORD line as it is
    errata = work / "errata.toml"
    written = patchaudit("errata", wrong)
    assert written.returncode == 0, written.stderr
    errata.write_text(written.stdout)
    return {
        "patched": image_of(work, "patched", work / "patched", "RUN pip install tinymodel && sed -i ..."),
        "upstream": image_of(work, "upstream", work / "upstream", "RUN pip install dumper"),
        "wrong": image_of(work, "wrong", work / "wrong", "RUN pip install vcodec"),
        "house": house,
        "wrong_house": wrong_house,
        "errata": errata,
    }


def scan_json(*args: str | Path) -> tuple[int, dict]:
    found = patchaudit("scan", "--format", "json", *map(str, args))
    assert found.returncode in (0, 1), found.stderr
    return found.returncode, json.loads(found.stdout)


def findings(report: dict) -> list[tuple[str, str, bool]]:
    return [(f["path"], f["rule"], f["in_change"]) for d in report["distributions"] for f in d["findings"]]


def test_all_files_runs_the_rules_over_files_that_did_not_change(images: dict[str, object]) -> None:
    code, plain = scan_json("--image", images["upstream"])
    assert code == 0 and findings(plain) == []
    code, every = scan_json("--image", images["upstream"], "--all-files")
    assert code == 0, "a hazard the wheel ships is not a change"
    assert ("dumper/io.py", "torch-save", False) in findings(every)


def test_wheelhouse_gives_pristine_bytes_no_lower_layer_holds(images: dict[str, object]) -> None:
    ref = str(images["patched"])
    alone = patchaudit("diff", "tinymodel", "--image", ref)
    assert alone.returncode == 1
    assert "# tinymodel/models/deepseek_v2.py: modified, no lower layer holds its RECORD bytes" in alone.stdout
    housed = patchaudit("diff", "tinymodel", "--image", ref, "--wheelhouse", images["house"])
    assert housed.returncode == 1, housed.stderr
    assert "--- tinymodel/models/deepseek_v2.py\n+++ tinymodel/models/deepseek_v2.py\n" in housed.stdout
    assert " def forward(x):\n+    if x.shape[0] == 5:\n" in housed.stdout and " def forward" in housed.stdout
    # the scan judges the patch against the wheel: only the lines it changed are "in the change"
    _, report = scan_json("--image", ref, "--wheelhouse", images["house"])
    (dist,) = report["distributions"]
    (drift,) = dist["drift"]
    assert drift["path"] == "tinymodel/models/deepseek_v2.py"  # still drift, named with its layer
    assert drift["layer"]["created_by"] == "RUN pip install tinymodel && sed -i ..."
    assert ("tinymodel/models/deepseek_v2.py", "torch-save", True) in findings(report)


def test_a_wrong_record_is_told_from_a_patch_by_errata_or_wheelhouse(images: dict[str, object]) -> None:
    ref = str(images["wrong"])
    code, alone = scan_json("--image", ref)
    assert code == 1
    (drift,) = alone["distributions"][0]["drift"]
    assert (drift["path"], drift["state"]) == ("vcodec/_codec.so", "modified")
    for option in (("--errata", images["errata"]), ("--wheelhouse", images["wrong_house"])):
        code, known = scan_json("--image", ref, *option)
        assert code == 0, (option, known["distributions"][0])
        (dist,) = known["distributions"]
        assert [(d["path"], d["state"]) for d in dist["drift"]] == [("vcodec/_codec.so", "record-mismatch")], option
    policy = Path(str(images["errata"])).with_name("policy.toml")
    policy.write_text(f'errata = ["{images["errata"]}"]\n')
    gate = patchaudit("gate", "--image", ref, "--policy", policy, "--", sys.executable, "-c", "print('started')")
    assert gate.returncode == 0 and "started" in gate.stdout, gate.stdout + gate.stderr
