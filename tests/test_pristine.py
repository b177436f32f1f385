"""Pristine sources and the same-build check, against real wheels, real pip and a loopback index."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from pristine_helpers import IndexServer, build_wheel, make_venv, pip_install, record_hash, site_packages

from patchaudit.check.verify import verify
from patchaudit.errors import PristineNotFound, UnsafePath, WheelMismatch
from patchaudit.parallel.statcache import StatCache
from patchaudit.pristine import Transfer, find_pristine
from patchaudit.pristine.cache import OwnCache, PipCache, normalize_url
from patchaudit.pristine.index import IndexConfig, PackageIndex, pip_config
from patchaudit.pristine.wheelhouse import Wheelhouse
from patchaudit.report import Drift, DriftState
from patchaudit.target import environment

NO_NET = {"PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INDEX": "1"}


def files(n: int = 40) -> dict[str, bytes]:
    out = {f"demo/mod{i}.py": f"VALUE = {i}\n".encode() * 50 for i in range(n)}
    out["demo/__init__.py"] = b"from demo.mod0 import VALUE\n"
    out["demo/blob.bin"] = b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(40000))
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("pristine")
    wheel = build_wheel(root / "dist", "demo", "1.0", files())
    python = make_venv(root / "venv")
    pip_install(python, wheel)
    return wheel, python, site_packages(python)


def drift_for(python: Path) -> tuple[environment.Environment, environment.InstalledDist, tuple[Drift, ...]]:
    env = environment.from_python(python)
    (dist,) = environment.select(environment.distributions(env), ["demo"])
    (report,) = verify(env, [dist]).distributions
    return env, dist, report.drift


def patch(site: Path, rel: str, text: bytes = b"import pdb; pdb.set_trace()\n") -> bytes:
    target = site / rel
    old = target.read_bytes()
    target.write_bytes(old + text)
    return old


def test_wheelhouse_gives_checked_bytes(installed: tuple[Path, Path, Path]) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod3.py")
    try:
        env, dist, drift = drift_for(python)
        check = find_pristine(env, dist, drift=drift, wheelhouse=[wheel.parent], environ=NO_NET)
        assert check.files["demo/mod3.py"].data == old
        assert check.wheel.origin.startswith("wheelhouse")
    finally:
        (site / "demo/mod3.py").write_bytes(old)


def test_index_moves_only_central_directory_and_members(installed: tuple[Path, Path, Path]) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod5.py")
    try:
        env, dist, drift = drift_for(python)
        with IndexServer([wheel]) as server:
            transfer = Transfer()
            source = PackageIndex(IndexConfig(index_url=server.url), transfer=transfer)
            check = find_pristine(env, dist, drift=drift, sources=[source])
        assert check.files["demo/mod5.py"].data == old
        assert transfer.whole_files == 0
        assert transfer.bytes_received == server.bytes_sent
        assert server.bytes_sent < wheel.stat().st_size / 2, server.requests
    finally:
        (site / "demo/mod5.py").write_bytes(old)


def test_index_without_range_support_falls_back_to_whole_file_and_caches_it(
    installed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod6.py")
    try:
        env, dist, drift = drift_for(python)
        cache = OwnCache(tmp_path / "cache")
        with IndexServer([wheel], ranges=False, json_api=True) as server:
            transfer = Transfer()
            source = PackageIndex(IndexConfig(index_url=server.url), transfer=transfer, cache=cache)
            check = find_pristine(env, dist, drift=drift, sources=[source])
        assert check.files["demo/mod6.py"].data == old
        assert check.wheel.authentic
        assert transfer.whole_files == 1
        assert (tmp_path / "cache/wheels" / wheel.name).read_bytes() == wheel.read_bytes()
        again = find_pristine(env, dist, drift=drift, sources=[cache])
        assert again.files["demo/mod6.py"].data == old
    finally:
        (site / "demo/mod6.py").write_bytes(old)


def test_index_answering_416_to_ranges_falls_back_to_the_whole_file(installed: tuple[Path, Path, Path]) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod9.py")
    try:
        env, dist, drift = drift_for(python)
        with IndexServer([wheel], refuse_ranges=True) as server:
            transfer = Transfer()
            check = find_pristine(
                env, dist, drift=drift, sources=[PackageIndex(IndexConfig(index_url=server.url), transfer=transfer)]
            )
            assert any("bytes=" in r for r in server.requests)
        assert check.files["demo/mod9.py"].data == old
        assert transfer.whole_files == 1
    finally:
        (site / "demo/mod9.py").write_bytes(old)


def test_range_fetched_members_are_cached_for_the_next_run(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod7.py")
    try:
        env, dist, drift = drift_for(python)
        cache = OwnCache(tmp_path / "cache")
        with IndexServer([wheel]) as server:
            find_pristine(
                env, dist, drift=drift, sources=[PackageIndex(IndexConfig(index_url=server.url), cache=cache)]
            )
        check = find_pristine(env, dist, drift=drift, sources=[cache])
        assert check.files["demo/mod7.py"].data == old
        assert "cache" in check.wheel.origin
    finally:
        (site / "demo/mod7.py").write_bytes(old)


def test_pip_http_cache_body_is_found_by_url(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod8.py")
    try:
        env, dist, drift = drift_for(python)
        with IndexServer([wheel]) as server:
            url = server.url.replace("/simple", f"/files/{wheel.name}")
            hashed = hashlib.sha224(normalize_url(url).encode()).hexdigest()
            body = tmp_path / "pip" / "http-v2" / Path(*hashed[:5]) / f"{hashed}.body"
            body.parent.mkdir(parents=True)
            body.write_bytes(wheel.read_bytes())
            transfer = Transfer()
            source = PackageIndex(
                IndexConfig(index_url=server.url), transfer=transfer, pip_cache=PipCache(tmp_path / "pip")
            )
            check = find_pristine(env, dist, drift=drift, sources=[source])
            assert not any("/files/" in r for r in server.requests)
        assert check.files["demo/mod8.py"].data == old
        assert check.wheel.authentic
    finally:
        (site / "demo/mod8.py").write_bytes(old)


def test_pip_config_files_and_environment(tmp_path: Path) -> None:
    env = environment.Environment(python=None, prefix=tmp_path, site_dirs=(tmp_path,))
    (tmp_path / "pip.conf").write_text(
        "[global]\nindex-url = https://mirror.invalid/simple\nextra-index-url =\n  https://a.invalid/simple\n"
        "  https://b.invalid/simple\n[install]\nfind-links = /srv/wheels\n"
    )
    config = pip_config(env, {"HOME": str(tmp_path / "home")})
    assert config.index_url == "https://mirror.invalid/simple"
    assert config.extra_index_urls == ("https://a.invalid/simple", "https://b.invalid/simple")
    assert config.find_links == ("/srv/wheels",)
    overridden = pip_config(
        env, {"HOME": str(tmp_path), "PIP_INDEX_URL": "http://127.0.0.1:1/simple", "PIP_NO_INDEX": "yes"}
    )
    assert overridden.index_url == "http://127.0.0.1:1/simple" and overridden.no_index
    from pip._internal.models.index import PyPI

    default = pip_config(env, {"PIP_CONFIG_FILE": "/dev/null"}).index_url
    assert default == PyPI.simple_url.rstrip("/"), "with nothing configured, pip's own default index"


def test_another_build_is_refused_naming_both_hashes(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    other_files = files()
    other_files["demo/mod1.py"] = b"VALUE = 'rebuilt'\n"
    other = build_wheel(tmp_path / "other", "demo", "1.0", other_files)
    old = patch(site, "demo/mod2.py")
    try:
        env, dist, drift = drift_for(python)
        with pytest.raises(WheelMismatch) as err:
            find_pristine(env, dist, drift=drift, sources=[Wheelhouse(other.parent)])
        message = str(err.value)
        assert "demo/mod1.py" in message
        assert record_hash(files()["demo/mod1.py"]) in message
        assert record_hash(b"VALUE = 'rebuilt'\n") in message
    finally:
        (site / "demo/mod2.py").write_bytes(old)


def test_member_that_does_not_match_its_record_is_refused(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    good = files()
    lying = dict(good)
    lying["demo/mod4.py"] = b"VALUE = 'evil'\n"
    # RECORD claims the pristine hash but the member holds other bytes
    bad = build_wheel(
        tmp_path / "bad", "demo", "1.0", lying, record_hashes={"demo/mod4.py": record_hash(good["demo/mod4.py"])}
    )
    old = patch(site, "demo/mod4.py")
    try:
        env, dist, drift = drift_for(python)
        with pytest.raises(WheelMismatch, match="demo/mod4.py"):
            find_pristine(env, dist, drift=drift, sources=[Wheelhouse(bad.parent)])
    finally:
        (site / "demo/mod4.py").write_bytes(old)


def test_stale_record_is_record_mismatch_not_a_patch(tmp_path: Path) -> None:
    stale = {"demo/mod0.py": record_hash(b"what the build meant to ship\n")}
    wheel = build_wheel(tmp_path / "dist", "demo", "1.0", files(3), record_hashes=stale)
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    env, dist, drift = drift_for(python)
    assert [d.path for d in drift] == ["demo/mod0.py"]
    check = find_pristine(env, dist, drift=drift, sources=[Wheelhouse(wheel.parent)])
    assert check.record_mismatch == ("demo/mod0.py",)
    assert "demo/mod0.py" not in check.files


@pytest.mark.parametrize("name", ["../escape.py", "/etc/evil.py", "demo/../../escape.py"])
def test_wheel_with_escaping_member_is_refused(installed: tuple[Path, Path, Path], tmp_path: Path, name: str) -> None:
    wheel, python, site = installed
    hostile = build_wheel(tmp_path / "hostile", "demo", "1.0", files(), extra_infos=[(zipfile.ZipInfo(name), b"x")])
    old = patch(site, "demo/mod9.py")
    try:
        env, dist, drift = drift_for(python)
        with pytest.raises(UnsafePath, match="escape"):
            find_pristine(env, dist, drift=drift, sources=[Wheelhouse(hostile.parent)])
    finally:
        (site / "demo/mod9.py").write_bytes(old)


def test_symlink_member_is_refused(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    content = files()
    hostile = build_wheel(tmp_path / "link", "demo", "1.0", content)
    # rewrite mod10.py's entry as a symlink pointing at /etc/passwd, keeping the RECORD untouched
    with zipfile.ZipFile(hostile) as zf:
        items = [(i, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(hostile, "w") as zf:
        for info, data in items:
            if info.filename == "demo/mod10.py":
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, data)
    old = patch(site, "demo/mod10.py")
    try:
        env, dist, drift = drift_for(python)
        with pytest.raises(UnsafePath, match="symlink"):
            find_pristine(env, dist, drift=drift, sources=[Wheelhouse(hostile.parent)])
    finally:
        (site / "demo/mod10.py").write_bytes(old)


def test_zip_whose_member_sizes_lie_is_refused(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    liar = tmp_path / "liar" / wheel.name
    liar.parent.mkdir()
    data = bytearray(wheel.read_bytes())
    # shrink the uncompressed size of demo/blob.bin in the central directory
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("demo/blob.bin")
    name = info.filename.encode()
    cd = data.rfind(b"PK\x01\x02" + data[data.find(b"PK\x01\x02") + 4 : data.find(b"PK\x01\x02") + 4], 0)
    pos = data.find(name, data.find(b"PK\x01\x02")) - 46
    assert data[pos : pos + 4] == b"PK\x01\x02", cd
    data[pos + 24 : pos + 28] = (100).to_bytes(4, "little")
    liar.write_bytes(bytes(data))
    target = site / "demo/blob.bin"
    old = target.read_bytes()
    target.write_bytes(b"patched")
    try:
        env, dist, drift = drift_for(python)
        with pytest.raises(WheelMismatch, match="blob.bin"):
            find_pristine(env, dist, drift=drift, sources=[Wheelhouse(liar.parent)])
    finally:
        target.write_bytes(old)


def test_nothing_found_is_pristine_not_found(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    env, dist, _ = drift_for(python)
    with pytest.raises(PristineNotFound, match="no pristine wheel"):
        find_pristine(
            env, dist, drift=[Drift(path="demo/mod1.py", state=DriftState.MISSING)], sources=[Wheelhouse(tmp_path)]
        )


def test_direct_url_archive_with_matching_hash(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist", "demo", "1.0", files(3))
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)
    env, dist, _ = drift_for(python)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (dist.meta_dir / "direct_url.json").write_text(
        json.dumps({"url": wheel.as_uri(), "archive_info": {"hashes": {"sha256": digest}}})
    )
    site = site_packages(python)
    old = patch(site, "demo/mod1.py")
    env, dist, drift = drift_for(python)
    check = find_pristine(env, dist, drift=drift, environ=NO_NET)
    assert check.wheel.authentic and "direct_url" in check.wheel.origin
    assert check.files["demo/mod1.py"].data == old
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    with pytest.raises(PristineNotFound):
        find_pristine(env, dist, drift=drift, environ=NO_NET)


def test_a_verified_direct_url_archive_is_remembered_until_it_changes(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist", "demo", "1.0", files(3))
    python = make_venv(tmp_path / "venv")
    pip_install(python, wheel)  # pip records the archive's sha256 in direct_url.json
    site = site_packages(python)
    old = patch(site, "demo/mod1.py")
    env, dist, drift = drift_for(python)
    assert dist.direct_url is not None and dist.direct_url["url"] == wheel.as_uri()
    cache_file = tmp_path / "stat-cache.json"
    cache = StatCache(cache_file)
    time.sleep(0.1)  # past the racy window of the archive's timestamps
    check = find_pristine(env, dist, drift=drift, environ=NO_NET, cache=cache)
    assert check.wheel.authentic and check.files["demo/mod1.py"].data == old
    cache.save()
    assert str(wheel) in json.loads(cache_file.read_text())["entries"]
    again = find_pristine(env, dist, drift=drift, environ=NO_NET, cache=StatCache(cache_file))
    assert again.wheel.authentic and again.files["demo/mod1.py"].data == old
    # Another build of the same size put in its place with the old mtime (`touch -r`): the inode's
    # ctime moved, so the remembered digest is not used and the archive is no longer evidence.
    other = build_wheel(tmp_path / "other", "demo", "1.0", {**files(3), "demo/mod1.py": b"VALUE = 7\n" * 50})
    st = wheel.stat()
    assert other.stat().st_size == st.st_size
    wheel.write_bytes(other.read_bytes())
    os.utime(wheel, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert wheel.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(PristineNotFound, match="no pristine wheel"):
        find_pristine(env, dist, drift=drift, environ=NO_NET, cache=StatCache(cache_file))


def test_find_links_directory_from_pip_config(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod11.py")
    try:
        env, dist, drift = drift_for(python)
        links = tmp_path / "links"
        links.mkdir()
        (links / wheel.name).write_bytes(wheel.read_bytes())
        environ = {"PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
        source = PackageIndex(pip_config(env, environ))
        check = find_pristine(env, dist, drift=drift, sources=[source])
        assert check.files["demo/mod11.py"].data == old
        assert "find-links" in check.wheel.origin
    finally:
        (site / "demo/mod11.py").write_bytes(old)


def test_index_url_with_credentials_sends_basic_auth(installed: tuple[Path, Path, Path]) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod12.py")
    try:
        env, dist, drift = drift_for(python)
        with IndexServer([wheel]) as server:
            url = server.url.replace("http://", "http://user:s%40cret@")
            check = find_pristine(env, dist, drift=drift, sources=[PackageIndex(IndexConfig(index_url=url))])
        assert check.files["demo/mod12.py"].data == old
        assert any("/files/" in r and "bytes=" in r for r in server.requests)
        assert server.authorizations and all(h == "Basic dXNlcjpzQGNyZXQ=" for h in server.authorizations)
    finally:
        (site / "demo/mod12.py").write_bytes(old)


@pytest.mark.parametrize("ranges", [True, False])
def test_index_credentials_never_follow_a_redirect_to_another_origin(
    installed: tuple[Path, Path, Path], ranges: bool
) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod13.py")
    try:
        env, dist, drift = drift_for(python)
        with IndexServer([wheel], ranges=ranges) as mirror, IndexServer([wheel], files_at=mirror.origin) as index:
            url = index.url.replace("http://", "http://user:s%40cret@")
            transfer = Transfer()
            source = PackageIndex(IndexConfig(index_url=url), transfer=transfer)
            check = find_pristine(env, dist, drift=drift, sources=[source])
        assert check.files["demo/mod13.py"].data == old
        assert transfer.whole_files == (0 if ranges else 1)
        # the index saw the page and the redirected downloads, with its credentials; the mirror saw none
        assert any(r.startswith("/simple/") for r in index.requests)
        assert any(r.startswith("/files/") for r in index.requests)
        assert index.authorizations and all(h == "Basic dXNlcjpzQGNyZXQ=" for h in index.authorizations)
        assert any(r.startswith("/files/") for r in mirror.requests)
        assert mirror.authorizations and not any(mirror.authorizations), mirror.authorizations
    finally:
        (site / "demo/mod13.py").write_bytes(old)


def test_netrc_credentials_go_to_their_host_only(
    installed: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel, python, site = installed
    old = patch(site, "demo/mod14.py")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login user password s@cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    try:
        env, dist, drift = drift_for(python)
        with IndexServer([wheel]) as mirror:
            elsewhere = mirror.origin.replace("127.0.0.1", "localhost")  # another host name, still loopback
            with IndexServer([wheel], files_at=elsewhere) as index:
                source = PackageIndex(IndexConfig(index_url=index.url))
                check = find_pristine(env, dist, drift=drift, sources=[source])
        assert check.files["demo/mod14.py"].data == old
        assert index.authorizations and all(h == "Basic dXNlcjpzQGNyZXQ=" for h in index.authorizations)
        assert mirror.authorizations and not any(mirror.authorizations)
    finally:
        (site / "demo/mod14.py").write_bytes(old)


def test_the_gate_never_imports_the_http_client(installed: tuple[Path, Path, Path]) -> None:
    _, python, _ = installed
    for args in (["--no-cache"], [], []):  # cold, then warm twice (the second reuses the verdict)
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "patchaudit", "gate", "demo", "--python", str(python), *args],
            capture_output=True,
            text=True,
            env={**os.environ, **NO_NET},
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
        assert "patchaudit.gate" in imported
        assert not {m for m in imported if m.split(".")[0] in ("requests", "urllib3")}
