"""Installed metadata through importlib_metadata: the header block only, bounded, never via a symlink."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheels import build_wheel, make_venv, pip_install, site_packages

from patchaudit import environment
from patchaudit.metadata import HEAD_LIMIT, installed_metadata


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
