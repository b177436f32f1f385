"""Hashing and the stat cache on a real filesystem."""

from __future__ import annotations

import os
import time
from pathlib import Path

from wheels import record_hash

from patchaudit.parallel.hashing import hash_file, hash_many
from patchaudit.parallel.statcache import StatCache, StatKey


def test_hash_matches_record_encoding_for_small_and_large_files(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * 10)
    big = tmp_path / "big"
    big.write_bytes(os.urandom(9 << 20))
    states = hash_many([(str(small), "sha256"), (str(big), "sha256")], workers=2)
    assert states[str(small), "sha256"].digest == record_hash(small.read_bytes())
    assert states[str(big), "sha256"].digest == record_hash(big.read_bytes())


def test_fifo_and_symlink_are_not_followed(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert hash_file(str(fifo)).not_regular
    link = tmp_path / "link"
    link.symlink_to("/etc/passwd")
    state = hash_file(str(link))
    assert state.symlink == "/etc/passwd" and state.digest is None


def test_stat_cache_is_invalidated_by_an_edit_that_restores_size_and_mtime(tmp_path: Path) -> None:
    target = tmp_path / "mod.py"
    target.write_bytes(b"value = 1\n")
    cache_file = tmp_path / "cache.json"
    cache = StatCache(cache_file)
    first = hash_file(str(target), cache=cache)
    cache.save()
    st = os.stat(target)
    target.write_bytes(b"value = 2\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # what `touch -r` does
    assert os.stat(target).st_size == st.st_size and os.stat(target).st_mtime_ns == st.st_mtime_ns
    again = hash_file(str(target), cache=StatCache(cache_file))
    assert again.digest == record_hash(b"value = 2\n") != first.digest


def test_stat_cache_hit_when_nothing_changed(tmp_path: Path) -> None:
    target = tmp_path / "mod.py"
    target.write_bytes(b"value = 1\n")
    time.sleep(0.1)  # older than a timestamp tick, or the entry is racy and not kept
    cache_file = tmp_path / "cache.json"
    cache = StatCache(cache_file)
    hash_file(str(target), cache=cache)
    cache.save()
    warm = StatCache(cache_file)
    key = StatKey.of(os.stat(target))
    assert warm.get(str(target), key, "sha256") == record_hash(b"value = 1\n")


def test_corrupt_cache_file_is_ignored(tmp_path: Path) -> None:
    cache_file = tmp_path / "cache.json"
    cache_file.write_bytes(b"\x00not json")
    target = tmp_path / "f"
    target.write_bytes(b"a")
    assert hash_file(str(target), cache=StatCache(cache_file)).digest == record_hash(b"a")


def test_a_file_written_just_now_is_not_cached(tmp_path: Path) -> None:
    """Written in the same timestamp tick as it is read: a later edit might not move its ctime."""
    target = tmp_path / "mod.py"
    target.write_bytes(b"value = 1\n")
    cache = StatCache(tmp_path / "cache.json")
    hash_file(str(target), cache=cache)
    key = StatKey.of(os.stat(target))
    assert cache.get(str(target), key, "sha256") is None


# -- worker processes against one process, over a real installed tree --------------------------


def _installed_tree(root: Path) -> tuple[Path, Path]:
    """A venv with a real pip install of a wheel of ~700 files (one big), then patched several ways."""
    from wheels import build_wheel, make_venv, pip_install, site_packages

    files: dict[str, bytes | str] = {f"many/pkg{n // 50}/mod{n}.py": f"VALUE = {n}\n" * (n % 7 + 1) for n in range(700)}
    files["many/data/big.bin"] = os.urandom(5 << 20)  # above the read buffer, and started first
    files["many/data/mid.bin"] = os.urandom((1 << 20) - 1)  # one byte short of the buffer
    python = make_venv(root / "venv")
    pip_install(python, build_wheel(root / "wheels", "many", "1.0", files))
    site = site_packages(python)
    (site / "many/pkg0/mod1.py").write_text("VALUE = 'patched'\n")  # other content, other size
    same = site / "many/pkg1/mod50.py"
    same.write_bytes(same.read_bytes().replace(b"5", b"6"))  # same size
    (site / "many/pkg2/mod100.py").unlink()  # missing
    (site / "many/pkg3/mod150.py").unlink()
    (site / "many/pkg3/mod150.py").symlink_to("mod151.py")  # a symlink where a file was
    os.unlink(site / "many/pkg4/mod200.py")
    os.mkfifo(site / "many/pkg4/mod200.py")  # not a regular file
    big = site / "many/data/big.bin"
    with open(big, "r+b") as fh:
        fh.seek(3 << 20)
        byte = fh.read(1)[0]
        fh.seek(3 << 20)
        fh.write(bytes([byte ^ 0xFF]))  # one byte deep inside the big file, flipped
    os.link(site / "many/pkg6/mod300.py", root / "outside-link")  # a hard link shared with another path
    (site / "many/pkg6/mod300.py").write_text("VALUE = 'linked and patched'\n")
    return python, site


def test_worker_processes_and_one_process_agree_on_every_file(tmp_path: Path) -> None:
    from patchaudit.target.record import parse_record

    _, site = _installed_tree(tmp_path)
    (record,) = site.glob("many-1.0.dist-info/RECORD")
    entries = [e for e in parse_record(record.read_bytes()).entries if e.hash is not None]
    jobs = [(str(site / e.path), e.hash.algorithm) for e in entries]  # type: ignore[union-attr]
    sizes = {str(site / e.path): e.size or 0 for e in entries}

    by_processes = hash_many(jobs, workers=3, sizes=sizes)
    one = hash_many(jobs, workers=1)

    assert by_processes == one
    assert len(one) == len(jobs) > 700
    by_name = {path.rpartition("/many/")[2]: state for (path, _), state in one.items()}
    assert by_name["pkg2/mod100.py"].missing
    assert by_name["pkg3/mod150.py"].symlink == "mod151.py"
    assert by_name["pkg4/mod200.py"].not_regular
    assert by_name["pkg6/mod300.py"].nlink == 2
    big = (site / "many/data/big.bin").read_bytes()
    assert by_name["data/big.bin"].digest == record_hash(big)
    expected = {str(site / e.path): str(e.hash) for e in entries}
    drifted = sorted(p.rpartition("/many/")[2] for (p, _), s in one.items() if s.digest != expected[p])
    assert drifted == [
        "data/big.bin",
        "pkg0/mod1.py",
        "pkg1/mod50.py",
        "pkg2/mod100.py",
        "pkg3/mod150.py",
        "pkg4/mod200.py",
        "pkg6/mod300.py",
    ]


def test_scan_reports_the_same_with_one_worker_and_with_many(tmp_path: Path) -> None:
    import json

    from wheels import patchaudit

    python, _ = _installed_tree(tmp_path)
    reports = []
    for workers in ("1", "4"):
        proc = patchaudit(
            "scan", "--python", python, "--format", "json", "--no-hazards", "--no-cache", "--workers", workers
        )
        assert proc.returncode == 1, proc.stderr
        report = json.loads(proc.stdout)
        report.pop("run")  # when each ran: the only part that may differ
        reports.append(report)
    assert reports[0] == reports[1]
    (many,) = [d for d in reports[0]["distributions"] if d["name"] == "many"]
    assert {d["state"] for d in many["drift"]} == {"modified", "missing"}
    assert len(many["drift"]) == 7


def test_warm_stat_cache_gives_what_a_cold_run_gave(tmp_path: Path) -> None:
    from patchaudit.target.record import parse_record

    _, site = _installed_tree(tmp_path)
    time.sleep(0.1)  # past the racy window of the files just patched
    (record,) = site.glob("many-1.0.dist-info/RECORD")
    jobs = [(str(site / e.path), "sha256") for e in parse_record(record.read_bytes()).entries if e.hash]
    cache_file = tmp_path / "stat.json"
    cold_cache = StatCache(cache_file)
    cold = hash_many(jobs, cache=cold_cache, workers=3)
    cold_cache.save()
    warm_cache = StatCache(cache_file)
    assert all(warm_cache.has(path) for path, _ in jobs if cold[path, "sha256"].digest)
    assert hash_many(jobs, cache=warm_cache, workers=3) == cold


def test_batches_start_with_the_biggest_files_and_keep_every_job() -> None:
    from patchaudit.parallel.hashing import BIG_FILE, batches

    jobs = [(f"/x/{n}", "sha256") for n in range(1000)]
    sizes = {"/x/10": BIG_FILE * 3, "/x/500": BIG_FILE * 5, "/x/7": 100}
    cut = batches(jobs, sizes)
    assert cut[0][0] == ("/x/500", "sha256") and cut[0][1] == ("/x/10", "sha256")
    assert sorted(job for batch in cut for job in batch) == sorted(jobs)
