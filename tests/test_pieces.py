"""RECORDs cut into pieces for the workers: whole lines, the same entries, big files alone."""

from __future__ import annotations

import importlib.metadata

from patchaudit.pieces import pieces
from patchaudit.record import parse_record


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


def test_a_big_file_is_a_piece_of_its_own_started_first_and_a_quoted_record_stays_whole() -> None:
    digest = "sha256=" + "A" * 43
    small = "".join(f"pkg/m{n}.py,{digest},{100 + n}\n" for n in range(2000))
    big = f"pkg/huge.so,{digest},{50 << 20}\n"
    bigger = f"pkg/huger.so,{digest},{80 << 20}\n"
    plain = (small[:40_000].rpartition("\n")[0] + "\n" + big + small[40_000:].partition("\n")[2] + bigger).encode()
    quoted = f'"pkg/a,b.py",{digest},5\n{big}'.encode()
    cut = pieces([("/site", plain), ("/site", quoted)])
    first, second = cut[0], cut[1]
    assert plain[first.start : first.stop] == bigger.encode() and first.largest == 80 << 20
    assert plain[second.start : second.stop] == big.encode()
    assert [(p.start, p.stop) for p in cut if p.record == 1] == [(0, len(quoted))]
    assert len([p for p in cut if p.record == 0]) > 4
