"""Installed metadata through importlib_metadata: the header block only, bounded, never via a symlink."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, pip_install, site_packages

from patchaudit.target import environment
from patchaudit.target.metadata import HEAD_LIMIT, installed_metadata


@pytest.fixture
def site(tmp_path: Path) -> Path:
    python = make_venv(tmp_path / "venv")
    pip_install(python, build_wheel(tmp_path / "wheels", "Demo.Pkg", "1.0", {"demo_pkg/__init__.py": b""}))
    return site_packages(python)


def listed(site: Path) -> list[tuple[str, str]]:
    return [(d.name, d.version) for d in environment.distributions(environment.from_path(site))]


def test_name_and_version_come_from_the_headers_not_the_description(site: Path) -> None:
    metadata = site / "demo_pkg-1.0.dist-info" / "METADATA"
    description = "Name: evil\r\nVersion: 6.6.6\r\n" + "x" * (4 * HEAD_LIMIT)
    metadata.write_bytes(
        (
            "Metadata-Version: 2.1\r\nname: Demo.Pkg\r\nVersion: 1.0\r\nRequires-Dist: packaging\r\n"
            "Description-Content-Type: text/markdown\r\n\r\n" + description
        ).encode()
    )
    assert listed(site) == [("Demo.Pkg", "1.0")]
    assert installed_metadata(metadata.parent).get_all("Requires-Dist") == ["packaging"]


def test_unreadable_or_symlinked_metadata_falls_back_to_the_directory_name(site: Path, tmp_path: Path) -> None:
    metadata = site / "demo_pkg-1.0.dist-info" / "METADATA"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("Metadata-Version: 2.1\nName: other\nVersion: 9\n\n")
    metadata.unlink()
    metadata.symlink_to(elsewhere)
    assert listed(site) == [("demo_pkg", "1.0")]
    metadata.unlink()
    metadata.write_bytes(b"Metadata-Version: 2.1\nName: Demo.Pkg\xff\nVersion: 1.0\n\n")
    assert listed(site) == [("Demo.Pkg\ufffd", "1.0")]


HEADER_BLOCKS = {
    "plain": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\nName: not this\n",
    "crlf": "Metadata-Version: 2.1\r\nName: demo\r\nVersion: 1.0\r\n",
    "trailing spaces kept": "Name: demo \nVersion: 1.0  \n",
    "another field folded": "Name: demo\nSummary: one\n  two\nVersion: 2\n",
    "name folded": "Name: de\n mo\nVersion: 2\n",
    "version folded": "Name: demo\nVersion:\n 2\n",
    "a From line": "From someone\nName: demo\nVersion: 1\n",
    "a line that is no header": "Name: demo\nnot a header\nVersion: 1\n",
    "a lone carriage return": "Name: demo\rVersion: 1\n",
    "field names in any case": "name: demo\nVERSION: 3\n",
    "the first of two": "Name: demo\nName: other\nVersion: 1\n",
    "a tab after the colon": "Name:\tdemo\nVersion:1\n",
    "a space before the colon": "Name : demo\nVersion: 1\n",
    "no version": "Name: demo\n",
    "empty": "",
    "not UTF-8": "Name: d\xe9mo\nVersion: 1\n",
}


@pytest.mark.parametrize("name", sorted(HEADER_BLOCKS))
def test_name_and_version_read_directly_equal_the_email_parser(name: str, tmp_path: Path) -> None:
    """The direct read of Name and Version is a shortcut: it must agree with importlib_metadata's
    email parser on every header block, or hand the block to it."""
    from patchaudit.target.metadata import name_version

    meta_dir = tmp_path / "demo-1.0.dist-info"
    meta_dir.mkdir()
    text = HEADER_BLOCKS[name]
    (meta_dir / "METADATA").write_bytes(text.encode("latin-1" if name == "not UTF-8" else "utf-8"))
    parsed = installed_metadata(meta_dir)
    assert parsed is not None
    assert name_version(meta_dir) == (parsed.get("Name"), parsed.get("Version"))


def test_name_and_version_of_every_real_distribution_equal_the_email_parser() -> None:
    import sysconfig

    from patchaudit.target.metadata import name_version

    dirs = sorted(Path(sysconfig.get_paths()["purelib"]).glob("*.dist-info"))
    assert len(dirs) > 20
    for meta_dir in dirs:
        parsed = installed_metadata(meta_dir)
        assert parsed is not None
        assert name_version(meta_dir) == (parsed.get("Name"), parsed.get("Version")), meta_dir
