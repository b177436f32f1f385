"""Property tests of every parser of a file the target or the user controls: each returns its value or the
project's own error, never another exception; RECORD round-trips with the reference writer (installer's);
the pieces workers parse read what the whole parse reads."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchaudit.check import errata
from patchaudit.check.pieces import pieces
from patchaudit.errors import PatchAuditError
from patchaudit.fs.safefs import parse_json, parse_toml
from patchaudit.gate import baseline, policy
from patchaudit.models.manifest import Manifest
from patchaudit.revert.state import read_journal, read_manifest
from patchaudit.target.record import parse_record

# Each property's budget: the whole file adds a few seconds to CI.
CASES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# JSON-shaped values, as a hostile file may hold them: deep, wide, odd keys and numbers
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
)

# RECORD paths as installers write them: any text but newlines and NUL (csv quotes the rest)
record_paths = st.text(st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), min_size=1)
digests = st.binary(min_size=32, max_size=32)
sizes = st.none() | st.integers(min_value=0, max_value=1 << 50)


@CASES
@given(st.lists(st.tuples(record_paths, st.none() | digests, sizes), max_size=30, unique_by=lambda row: row[0]))
def test_a_record_written_by_installer_parses_back_to_itself(rows: list[tuple[str, bytes | None, int | None]]) -> None:
    import base64

    from installer.records import Hash, RecordEntry

    out = io.StringIO()
    writer = csv.writer(out, delimiter=",", quotechar='"', lineterminator="\n")
    expected = []
    for path, digest, size in rows:
        value = base64.urlsafe_b64encode(digest).decode().rstrip("=") if digest is not None else None
        entry = RecordEntry(path, Hash("sha256", value) if value is not None else None, size)
        writer.writerow(entry.to_row())
        expected.append((path, f"sha256={value}" if value is not None else None, size))
    record = parse_record(out.getvalue().encode())
    assert record.problems == ()
    assert [(e.path, str(e.hash) if e.hash else None, e.size) for e in record.entries] == expected


record_lines = st.lists(
    st.one_of(
        st.tuples(record_paths, st.none() | digests, sizes),
        st.binary(max_size=40),  # junk: bare CR, quotes, NUL, invalid UTF-8
    ),
    max_size=60,
)


def _bytes_of(items: list[Any]) -> bytes:
    import base64

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    chunks = []
    for item in items:
        if isinstance(item, bytes):
            chunks.append(item + b"\n")
            continue
        path, digest, size = item
        value = f"sha256={base64.urlsafe_b64encode(digest).decode().rstrip('=')}" if digest is not None else ""
        out.seek(0)
        out.truncate()
        writer.writerow([path, value, "" if size is None else size])
        chunks.append(out.getvalue().encode())
    return b"".join(chunks)


@CASES
@given(record_lines)
def test_the_pieces_read_what_the_whole_parse_reads(items: list[Any]) -> None:
    data = _bytes_of(items)
    whole = parse_record(data)
    cut = sorted(pieces([("/site", data)]), key=lambda p: p.start)
    entries = []
    for piece in cut:
        entries.extend(parse_record(data[piece.start : piece.stop]).entries)
    assert sorted(entries, key=repr) == sorted(whole.entries, key=repr)


@CASES
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_json_of_any_bytes_is_a_value_or_a_value_error(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        parse_json(data)


@CASES
@given(st.text(max_size=200))
def test_toml_of_any_text_is_a_table_or_a_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        assert isinstance(parse_toml(text), dict)


@FEW
@given(st.dictionaries(st.sampled_from(sorted(policy.POLICY_KEYS)) | st.text(max_size=8), values, max_size=8))
def test_a_policy_of_any_shape_is_a_policy_or_invalid_policy(data: dict[str, Any]) -> None:
    with contextlib.suppress(PatchAuditError):
        assert isinstance(policy.Policy.from_dict(data), policy.Policy)


@CASES
@given(values | st.dictionaries(st.sampled_from(["schema", "distributions", "hooks", "approved", "service"]), values))
def test_a_baseline_of_any_shape_is_a_baseline_or_baseline_error(data: Any) -> None:
    with contextlib.suppress(PatchAuditError):
        assert isinstance(baseline.Baseline.from_dict(data), baseline.Baseline)


@CASES
@given(values)
def test_a_model_manifest_of_any_shape_is_a_manifest_or_the_projects_error(data: Any) -> None:
    with contextlib.suppress(PatchAuditError):
        assert isinstance(Manifest.from_dict(data, "manifest"), Manifest)


@FEW
@given(st.binary(max_size=300) | values.map(lambda v: json.dumps(v).encode()))
def test_journals_and_manifests_of_any_bytes_are_read_or_said_unreadable(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "journal.json").write_bytes(data)
    (tmp_path / "manifest.json").write_bytes(data)
    for found, why in (read_journal(tmp_path / "journal.json"), read_manifest(tmp_path)):
        assert (found is None) != (why is None)


@FEW
@given(st.text(max_size=300))
def test_errata_of_any_text_are_errata_or_invalid_policy(tmp_path: Path, text: str) -> None:
    path = tmp_path / "errata.toml"
    path.write_text(text)
    with contextlib.suppress(PatchAuditError):
        errata.load([path])


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deep_json_and_toml_are_value_errors(depth: int) -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json("[" * depth + "]" * depth)
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_toml("a = " + "[" * depth + "]" * depth)
