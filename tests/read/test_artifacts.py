"""artifacts.py, driven in-process: the read of the planned libraries (test_plan.py holds what a
target gives to read). --fast and what it did not decode, several targets read by one pool of
readers, files removed between the plan and the read, the reader pool's bounds, and a wheel read
through range reads (archive_inventory). Wheels are written by zipfile around the nvcc-built
fixtures; each case asserts what the target reports.
"""

from __future__ import annotations

import os
import threading
import time
import zipfile
from pathlib import Path

import pytest

from archaudit.read import artifacts
from archaudit.read.artifacts import MAX_LIBRARIES, inventory
from helpers import (
    WHEEL_NAME,
    inner_zip as zip_bytes,
    read_whole,
    target_paths as paths,
    target_problems as problems,
    too_many_libraries as too_many,
    tree,
    wheel,
)

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "tests" / "fixtures" / "cuda" / "bin"
GOOD = (CUDA / "lib_sm80.so").read_bytes()


# ---- --fast: what was not decoded ---------------------------------------------------------------


def test_fast_mode_fails_each_library_it_did_not_decode(tmp_path):
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", GOOD), ("demo/libhost.so", (CUDA / "lib_host.so").read_bytes())])
    fast = inventory(str(p), decode=False)
    full = inventory(str(p))
    libk = {lib.path: lib for lib in fast.libraries}["demo/libk.so"]
    (e015,) = [q for q in libk.problems if q.code == "E015"]
    entries = len(libk.entries)
    assert e015.message == (
        f"{entries} of {entries} device-code entries not decoded (--fast): kernels, cubin "
        f"flags, PTX .target and payload integrity unverified"
    )
    assert not any(q.code == "E015" for lib in full.libraries for q in lib.problems)
    assert not any(q.code == "E015" for lib in fast.libraries if not lib.entries for q in lib.problems)


def test_fast_mode_leaves_lto_entries_out_of_what_it_did_not_verify():
    """LTO IR is never decoded (the driver cannot load it alone): --fast has nothing more to say
    of an object that carries only LTO IR, and counts only the other entries where both are."""
    lto = inventory(str(CUDA / "lto_b.o"), decode=False)
    (lib,) = lto.libraries
    assert [e.kind for e in lib.entries] == ["lto"] and not any(q.code == "E015" for q in lib.problems)
    rdc = inventory(str(CUDA / "rdc_b.o"), decode=False)
    (lib,) = rdc.libraries
    (e015,) = [q for q in lib.problems if q.code == "E015"]
    assert e015.message.startswith("2 of 2 device-code entries not decoded (--fast)")


# ---- several targets, one call -----------------------------------------------------------------


def test_each_target_keeps_its_own_libraries_and_problems(tmp_path):
    """Three targets read by one pool: each inventory holds exactly its own libraries (a mix-up
    would judge one wheel by another's code), in the order given, with its own problems."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = wheel(tmp_path / "a" / WHEEL_NAME, [("demo/libz.so", GOOD), ("demo/libz2.so", GOOD)])
    second = wheel(tmp_path / "b" / WHEEL_NAME, [("demo/liba.so", (CUDA / "lib_sm90a.so").read_bytes())])
    (tmp_path / "empty").mkdir()
    progress = artifacts.Progress()
    missing = str(tmp_path / "gone.so")
    gone, a, b, e = artifacts.inventories(
        [missing, str(first), str(second), str(tmp_path / "empty")], progress=progress
    )
    assert (gone.target, a.target, b.target, e.target) == (missing, str(first), str(second), str(tmp_path / "empty"))
    assert (gone.kind, a.kind, b.kind, e.kind) == ("file", "wheel", "wheel", "directory") and gone.unusable
    assert read_whole(a) == ["demo/libz.so", "demo/libz2.so"] and read_whole(b) == ["demo/liba.so"]
    assert paths(e) == []
    assert {x.target for lib in b.libraries for c in lib.containers for x in c.entries} == {"sm_90a"}
    assert problems(a) == problems(b) == [] and e.unusable and not a.unusable and not b.unusable
    assert a.distribution == b.distribution == "demo-1.0" and e.distribution == ""
    assert a.bytes_read == 2 * len(GOOD) and b.bytes_read == len((CUDA / "lib_sm90a.so").read_bytes())
    assert all(any(x.kernels for x in lib.entries) for lib in a.libraries + b.libraries)  # payloads decoded
    assert progress.total_libraries == progress.done_libraries == 3
    assert progress.total_bytes == progress.done_bytes == a.bytes_read + b.bytes_read


# ---- files removed between the plan and the read -------------------------------------------------


class RemovingProgress(artifacts.Progress):
    """Removes a file when the first block of the first library is read: with one reader, the
    largest library is read first, so the removal lands between the plan and the smaller
    library's read, every time."""

    def __init__(self, victim: Path):
        super().__init__()
        self.victim = victim

    def add(self, nbytes: int = 0, libraries: int = 0) -> None:
        if nbytes and self.victim.exists():
            self.victim.unlink()
        super().add(nbytes, libraries)


def test_a_file_removed_between_plan_and_read_is_e001(tmp_path, empty_tmp):
    root = tmp_path / "d"
    root.mkdir()
    (root / "libbig.so").write_bytes(GOOD)
    small = (CUDA / "lib_host.so").read_bytes()
    assert len(small) < len(GOOD)
    (root / "libsmall.so").write_bytes(small)
    inv = artifacts.inventories([str(root)], jobs=1, progress=RemovingProgress(root / "libsmall.so"))[0]
    big, gone = inv.libraries
    assert big.path == "libbig.so" and big.containers and not big.problems
    assert gone.path == "libsmall.so" and [p.code for p in gone.problems] == ["E001"]
    assert gone.problems[0].message.startswith("cannot read: [Errno 2] No such file or directory")
    assert tree(root) == [("libbig.so", False, len(GOOD))] and list(empty_tmp.iterdir()) == []


def test_a_wheel_removed_between_plan_and_read_fails_each_library_left(tmp_path, empty_tmp):
    """Each member is inflated from its own open of the wheel: once the wheel is gone, every
    library not yet read is E001 (a stored zip's members, read through a window, too)."""
    nested = zip_bytes([("lib/libin.so", GOOD), ("lib/libin2.so", GOOD)])
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr("demo/libbig.so", GOOD + bytes(4096), compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("demo/bundle.zip", nested, compress_type=zipfile.ZIP_STORED)
    inv = artifacts.inventories([str(p)], jobs=1, progress=RemovingProgress(p))[0]
    by_path = {lib.path: lib for lib in inv.libraries}
    assert sorted(by_path) == ["demo/bundle.zip!lib/libin.so", "demo/bundle.zip!lib/libin2.so", "demo/libbig.so"]
    assert by_path["demo/libbig.so"].containers and not by_path["demo/libbig.so"].problems
    for name in ("demo/bundle.zip!lib/libin.so", "demo/bundle.zip!lib/libin2.so"):
        assert [q.code for q in by_path[name].problems] == ["E001"], by_path[name].problems
    assert list(tmp_path.iterdir()) == [empty_tmp] and list(empty_tmp.iterdir()) == []


# ---- the reader pool ----------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_payload_bound_given_is_the_one_every_reader_applies(tmp_path, jobs):
    """--max-payload reaches each reader: lib_sm80.so's two entries (1,456 and 3,368 bytes) are
    E012 under a 1,000-byte bound, in a wheel and as a file, and read whole under the default."""
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", GOOD), ("demo/libk2.so", GOOD)])
    for target in (str(p), str(CUDA / "lib_sm80.so")):
        bounded = artifacts.inventories([target], jobs=jobs, max_payload=1000)[0]
        assert bounded.libraries
        for lib in bounded.libraries:
            assert [(q.code, q.message.split(": ", 1)[1]) for q in lib.problems] == [
                ("E012", "sm_80 entry of 1456 bytes exceeds the 1000-byte bound"),
                ("E012", "sm_80 entry of 3368 bytes exceeds the 1000-byte bound"),
            ]
        assert read_whole(artifacts.inventories([target], jobs=jobs)[0])


class Readers(artifacts.Progress):
    """Watches the readers through the progress counters: which thread reads each library, in
    which order, and how many libraries are being read at once. The first `together` libraries
    wait for each other (a reader pool of fewer readers never gets them all started: the wait
    times out and those libraries fail), then hold on a moment so that a reader too many would
    be seen starting the next library beside them."""

    def __init__(self, together: int):
        super().__init__()
        self.barrier = threading.Barrier(together, timeout=10)
        self.guard = threading.Lock()
        self.reading: set[int] = set()
        self.started = 0
        self.most = 0
        self.threads: set[int] = set()
        self.first_blocks: list[int] = []

    def add(self, nbytes: int = 0, libraries: int = 0) -> None:
        me = threading.get_ident()
        wait = False
        with self.guard:
            if nbytes and me not in self.reading:
                self.reading.add(me)
                self.threads.add(me)
                self.first_blocks.append(nbytes)
                self.most = max(self.most, len(self.reading))
                self.started += 1
                wait = self.started <= self.barrier.parties
            if libraries:
                self.reading.discard(me)
        if wait:
            self.barrier.wait()
            time.sleep(0.2)
        super().add(nbytes, libraries)


POOL_LIBRARIES = ("lib_all.so", "lib_multi.so", "lib_many.so", "lib_sm80.so")  # 92, 59, 40 and 22 KB


@pytest.mark.parametrize("jobs, together", [(1, 1), (2, 2), (3, 3), (None, min(os.cpu_count() or 1, 4))])
def test_jobs_readers_read_at_once_never_more(tmp_path, jobs, together):
    """-j N: N libraries are read at once (one reader: in the calling thread, largest first),
    never more; each library is read whole whatever the pool."""
    root = tmp_path / "d"
    root.mkdir()
    for name in POOL_LIBRARIES:
        (root / name).write_bytes((CUDA / name).read_bytes())
    watch = Readers(together)
    (inv,) = artifacts.inventories([str(root)], jobs=jobs, progress=watch)
    assert read_whole(inv) == sorted(POOL_LIBRARIES)
    assert watch.most == together and watch.done_libraries == len(POOL_LIBRARIES)
    if jobs == 1:
        assert watch.threads == {threading.get_ident()}
        assert watch.first_blocks == sorted(watch.first_blocks, reverse=True)


def archive(path: Path, **kw):
    """archive_inventory of a wheel on disk, read through a read_at and an opener as the index's
    range reads do."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        return artifacts.archive_inventory(
            path.name,
            size,
            lambda at, n: os.pread(f.fileno(), n, at),
            lambda: open(path, "rb"),
            jobs=1,
            decode=True,
            **kw,
        )


def test_an_archive_read_through_ranges_reports_as_a_wheel_on_disk_does(tmp_path):
    """The index's inventory of one wheel: the malformed archive (E002, unusable), the wheel with
    more libraries than the bound (E003, none read, still a wheel of its distribution) and the
    sound one (what `keep` accepts, read whole; `on_members` told where the members lie), each
    with every field a report reads."""
    (tmp_path / "bad").mkdir()
    bad = tmp_path / "bad" / WHEEL_NAME
    bad.write_bytes(b"not a zip at all" * 10)
    inv = archive(bad)
    assert (inv.target, inv.kind, inv.libraries, inv.unusable) == (WHEEL_NAME, "wheel", (), True)
    assert [c for c, _ in problems(inv)] == ["E002"] and problems(inv)[0][1].startswith("malformed archive: ")

    (tmp_path / "many").mkdir()
    many = wheel(tmp_path / "many" / WHEEL_NAME, [(f"demo/lib{i}.so", b"x") for i in range(MAX_LIBRARIES + 1)])
    began = time.perf_counter()
    inv = archive(many)
    took = time.perf_counter() - began
    assert (inv.target, inv.kind, inv.libraries, inv.unusable, inv.bytes_read, inv.distribution) == (
        WHEEL_NAME,
        "wheel",
        (),
        False,
        0,
        "demo-1.0",
    )
    assert problems(inv) == [too_many(many)]
    assert isinstance(inv.seconds, float) and 0 <= inv.seconds <= took  # its own read, measured; no time bound

    (tmp_path / "good").mkdir()
    good = wheel(tmp_path / "good" / WHEEL_NAME, [("demo/libk.so", GOOD), ("demo/libskip.so", GOOD)])
    told: list[list[str]] = []
    began = time.perf_counter()
    inv = archive(
        good, keep=lambda name: name != "demo/libskip.so", on_members=lambda ms: told.append(sorted(m.name for m in ms))
    )
    took = time.perf_counter() - began
    assert (inv.target, inv.kind, inv.unusable, inv.bytes_read, inv.distribution) == (
        WHEEL_NAME,
        "wheel",
        False,
        len(GOOD),
        "demo-1.0",
    )
    assert read_whole(inv) == ["demo/libk.so"] and problems(inv) == []
    assert isinstance(inv.seconds, float) and 0 <= inv.seconds <= took
    assert told == [["demo-1.0.dist-info/WHEEL", "demo/libk.so", "demo/libskip.so"]]
