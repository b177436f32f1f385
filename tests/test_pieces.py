"""RECORDs cut into pieces for the workers: whole lines, the same entries, big files alone."""

from __future__ import annotations

import importlib.metadata
import py_compile
import sys
from pathlib import Path

from patchaudit.check.pieces import Shared, check, pieces
from patchaudit.target.record import parse_record


def _records() -> list[tuple[str, bytes]]:
    out = []
    for dist in importlib.metadata.distributions():
        text = dist.read_text("RECORD")
        if text:
            out.append((str(dist.locate_file("")), text.encode()))
    return out


def test_the_pieces_of_real_records_are_whole_lines_and_list_the_same_entries() -> None:
    records = _records()
    assert len(records) > 20
    cut = pieces(records)
    for number, (_, data) in enumerate(records):
        mine = sorted((p for p in cut if p.record == number), key=lambda p: p.start)
        assert b"".join(data[p.start : p.stop] for p in mine) == data
        assert all(p.start == 0 or data[p.start - 1 : p.start] == b"\n" for p in mine)
        entries = [e for p in mine for e in parse_record(data[p.start : p.stop]).entries]
        assert entries == list(parse_record(data).entries)
    assert max(sum(1 for p in cut if p.record == n) for n in range(len(records))) > 1  # some are cut


def test_a_big_file_is_a_piece_of_its_own_started_first() -> None:
    digest = "sha256=" + "A" * 43
    small = "".join(f"pkg/m{n}.py,{digest},{100 + n}\n" for n in range(2000))
    big = f"pkg/huge.so,{digest},{50 << 20}\n"
    bigger = f"pkg/huger.so,{digest},{80 << 20}\n"
    plain = (small[:40_000].rpartition("\n")[0] + "\n" + big + small[40_000:].partition("\n")[2] + bigger).encode()
    cut = pieces([("/site", plain)])
    first, second = cut[0], cut[1]
    assert plain[first.start : first.stop] == bigger.encode() and first.largest == 80 << 20
    assert plain[second.start : second.stop] == big.encode()
    assert len(cut) > 4
    assert [e for p in sorted(cut) for e in parse_record(plain[p.start : p.stop]).entries] == list(
        parse_record(plain).entries
    )


def test_quoted_paths_are_cut_between_rows_and_a_quoted_newline_keeps_the_record_whole() -> None:
    """vLLM quotes the paths of its fused-MoE configs (they hold commas): such a RECORD is still cut;
    one whose quoted path holds a newline, or whose quoted line is odd, is read whole."""
    digest = "sha256=" + "A" * 43
    lines = [
        f'"vllm/configs/E={n},N=14336,device_name=A100.json",{digest},{n}\n'
        if n % 3 == 0
        else f"vllm/m{n}.py,{digest},{n}\n"
        for n in range(3000)
    ]
    quoted = "".join(lines).encode()
    multiline = quoted + f'"vllm/odd\nname.py",{digest},5\n'.encode() + quoted
    odd_quote = quoted + f'"vllm/a"b.py,{digest},5\n'.encode() + quoted
    cut = pieces([("/site", quoted), ("/site", multiline), ("/site", odd_quote)])
    mine = sorted(p for p in cut if p.record == 0)
    assert len(mine) > 4
    assert all(quoted[p.stop - 1 : p.stop] == b"\n" for p in mine)
    assert [e for p in mine for e in parse_record(quoted[p.start : p.stop]).entries] == list(
        parse_record(quoted).entries
    )
    assert [(p.start, p.stop) for p in cut if p.record == 1] == [(0, len(multiline))]
    assert [(p.start, p.stop) for p in cut if p.record == 2] == [(0, len(odd_quote))]


def test_a_source_on_a_bad_record_line_still_has_its_unchecked_bytecode_checked(tmp_path: Path) -> None:
    """Python runs an unchecked-hash .pyc whatever its source says: a malformed RECORD line for the
    source does not take the .pyc out of the check."""
    source = tmp_path / "pkg" / "m.py"
    source.parent.mkdir()
    source.write_text("X = 1\n")
    pyc = source.parent / "__pycache__" / f"m.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(source), cfile=str(pyc), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    source.write_text("X = 2  # edited after compiling\n")
    for line in (b"pkg/m.py,,\n", b"pkg/m.py,sha256=bad,6\n"):
        records = [(str(tmp_path), line)]
        (piece,) = pieces(records)
        found = check(Shared(records=records, cache=None), piece)
        assert [d.path for d in found.stale] == [f"pkg/__pycache__/{pyc.name}"], line


def test_a_walk_on_a_worker_drops_only_what_a_record_it_holds_lists(tmp_path: Path) -> None:
    """What the workers' walk sends back: every file below the directory but those the RECORDs of that
    site directory list (a quoted path too); a directory no RECORD names comes back whole, as does
    one walked against the RECORDs of another site directory."""
    from patchaudit.check.pieces import walk_unlisted

    site = tmp_path / "site"
    for rel in ("pkg/__init__.py", "pkg/a,b.json", "pkg/sub/core.py", "pkg/sub/extra.py", "pkg/added.py", "stray/x.py"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("X = 1\n")
    record = b'pkg/__init__.py,sha256=AAAA,6\n"pkg/a,b.json",sha256=AAAA,6\npkg/sub/core.py,sha256=AAAA,6\n'
    shared = Shared(records=[(str(site), record)], cache=None)
    assert sorted(walk_unlisted(shared, site, "pkg")) == [("pkg/added.py", False), ("pkg/sub/extra.py", False)]
    assert walk_unlisted(shared, site, "stray") == [("stray/x.py", False)]
    elsewhere = Shared(records=[(str(tmp_path / "other"), record)], cache=None)
    assert len(walk_unlisted(elsewhere, site, "pkg")) == 5


def test_of_the_pieces_under_the_big_files_the_heaviest_start_first() -> None:
    """A piece listing 3 MB files starts before the pieces of small files ahead of it in its RECORD."""
    digest = "sha256=" + "A" * 43
    small = "".join(f"pkg/m{n}.py,{digest},{100 + n}\n" for n in range(1500))
    heavy = "".join(f"pkg/w{n}.so,{digest},{3 << 20}\n" for n in range(5))
    cut = pieces([("/site", (small + heavy).encode())])
    assert len(cut) > 2
    assert cut[0].weight == 5 * (3 << 20) and cut[0].stop == len(small + heavy)
    assert [p.start for p in cut[1:]] == sorted(p.start for p in cut[1:])


def test_the_first_parts_a_walk_looks_up_cover_every_path_a_record_lists_as_normalized() -> None:
    """A worker's walk asks a RECORD for its paths only where first_parts() holds the directory: on
    real RECORDs and on lines that normalizing or quoting changes, it holds every first part (a quoted
    path that runs past its line makes it give up: None)."""
    from patchaudit.check.ownership import listed_paths
    from patchaudit.check.pieces import first_parts

    odd = b'./a/b.py,,\n"q,x/y",,\nc\\d.py,,\ne//f,,\ng/./h,,\nx/../k/l,,\n"a""b/c",,\n"./z\\w/v",,\nplain/p.py,,\n'
    for data in [*(record for _, record in _records()), odd]:
        heads = first_parts(data)
        assert heads is not None
        firsts = {key.partition("/")[0].encode() for key in listed_paths(data)[0] if "/" in key}
        assert firsts - {b"..", b""} <= heads
    assert {b"a", b"q,x", b"c", b"e", b"g", b"k", b'a"b', b"z", b"plain"} <= (first_parts(odd) or set())
    assert first_parts(b'"m\nn/o",,\n') is None
