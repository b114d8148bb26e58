"""Which members are read, and how much work a wheel may cause.

Members are chosen by content (the magic in their first bytes) as well as by name, so a
library named like data, or inside a zip inside the wheel, is still audited; and the work
per wheel is bounded by what a real wheel can need (bytes inflated, number of libraries),
checked by counting bytes rather than by timing.
"""

from __future__ import annotations

import random
import struct
import zipfile
from pathlib import Path

import pytest

from archaudit.model import TargetInventory
from archaudit.read import artifacts, plan, zipread
from helpers import (
    WHEEL_NAME,
    assert_finding,
    central_record,
    check,
    findings,
    inner_zip,
    local_header,
    raw_zip,
    wheel,
    zero_bomb,
)

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "tests" / "fixtures" / "cuda" / "bin"
GOOD = (CUDA / "lib_sm80.so").read_bytes()
BAD = (CUDA / "lib_ptx90.so").read_bytes()  # PTX for compute_90 only: fails --arch 80
FATBIN = (CUDA / "kern.fatbin").read_bytes()


def libraries(report: dict) -> dict[str, dict]:
    return {lib["path"]: lib for t in report["targets"] for lib in t["libraries"]}


# ---- chosen by content ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["demo/libk.so.bak", "demo/libk", "demo/libk.so.1rc1", "demo/kernels.bin", "demo/kernels.dat"]
)
def test_library_named_like_data_is_read(tmp_path, name):
    """An ELF library under a name no search by name picks: read, judged (it misses 80), and
    the note says what its name would have hidden."""
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", GOOD), (name, BAD)])
    code, rep, _ = check(tmp_path, p)
    assert code == 1, findings(rep)
    assert any(c == "G001" and name in m for c, m in findings(rep)), findings(rep)
    jobs, _ = plan._wheel_jobs(str(p))
    note = {j.display: j.note for j in jobs}[name]
    assert "no search by file name picks" in note and "its content is an ELF file" in note


def test_fatbin_named_like_data_is_read(tmp_path):
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", GOOD), ("demo/kernels.bin", FATBIN)])
    code, rep, _ = check(tmp_path, p)
    libs = libraries(rep)
    assert "demo/kernels.bin" in libs and libs["demo/kernels.bin"]["format"] == "fatbin", libs


def test_library_named_so_but_not_elf_is_still_a_finding(tmp_path):
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", GOOD), ("demo/libtext.so", b"INPUT(-lfoo)\n")])
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E010", "not an ELF file")


def test_data_members_are_not_read(tmp_path):
    """Text and data members stay out of the audit, and only their first bytes are inflated:
    an 8 MiB data member costs 512 bytes of inflation, not 8 MiB."""
    weights = random.Random(1).randbytes(8 << 20)
    p = wheel(
        tmp_path / WHEEL_NAME,
        [("demo/libgood.so", GOOD), ("demo/__init__.py", b"x = 1\n"), ("demo/weights.bin", weights)],
    )
    jobs, problems = plan._wheel_jobs(str(p))
    assert [j.display for j in jobs] == ["demo/libgood.so"] and not problems
    members, _ = zipread.read_directory(str(p))
    m = next(m for m in members if m.name == "demo/weights.bin")
    with open(p, "rb") as f:
        head, whole = zipread.member_head(lambda at, n: (f.seek(at), f.read(n))[1], m)
    assert head == weights[: zipread.HEAD] and whole is None


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_library_inside_a_nested_zip_is_read(tmp_path, method):
    nested = inner_zip([("lib/libhide.so", BAD)], method)
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", GOOD), ("demo/data/bundle.zip", nested)])
    code, rep, _ = check(tmp_path, p)
    assert code == 1, findings(rep)
    assert "demo/data/bundle.zip!lib/libhide.so" in libraries(rep)
    assert any(c == "G001" and "bundle.zip!lib/libhide.so" in m for c, m in findings(rep)), findings(rep)


def test_stored_zip_is_read_in_place(tmp_path):
    """A zip stored (not deflated) in the wheel is read where it lies, not held in memory; its
    own CRC is verified first."""
    nested = inner_zip([("lib/libhide.so", BAD), ("lib/libgood2.so", GOOD)])
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr("demo/libgood.so", GOOD, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("demo/bundle.zip", nested, compress_type=zipfile.ZIP_STORED)
    code, rep, _ = check(tmp_path, p)
    assert code == 1, findings(rep)
    assert {"demo/bundle.zip!lib/libhide.so", "demo/bundle.zip!lib/libgood2.so"} <= set(libraries(rep))
    assert any(c == "G001" and "bundle.zip!lib/libhide.so" in m for c, m in findings(rep)), findings(rep)
    raw = bytearray(p.read_bytes())
    at = raw.find(b"lib/libhide.so")  # inside the stored zip: its CRC no longer matches
    raw[at] ^= 0x20
    p.write_bytes(raw)
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E002", "demo/bundle.zip: CRC mismatch")


def test_zips_nested_too_deep_fail_closed(tmp_path):
    deep = inner_zip([("c.zip", inner_zip([("libhide.so", BAD)]))])
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", GOOD), ("demo/a.zip", inner_zip([("b.zip", deep)]))])
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E003", "a zip nested 3 deep")


def test_unreadable_nested_zip_fails_closed(tmp_path):
    broken = inner_zip([("libhide.so", BAD)])[:-10]
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", GOOD), ("demo/a.zip", broken)])
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E002", "demo/a.zip: a zip whose members cannot be read")


def test_directory_target_chooses_by_content(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    (d / "libgood.so").write_bytes(GOOD)
    (d / "kernels.dat").write_bytes(BAD)
    (d / "notes.txt").write_text("hello\n")
    code, rep, _ = check(tmp_path, d)
    assert code == 1
    assert set(libraries(rep)) == {"libgood.so", "kernels.dat"}


def test_zip_in_a_directory_target_is_read(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    (d / "libgood.so").write_bytes(GOOD)
    (d / "bundle.dat").write_bytes(inner_zip([("lib/libhide.so", BAD)]))
    code, rep, _ = check(tmp_path, d)
    assert code == 1
    assert set(libraries(rep)) == {"libgood.so", "bundle.dat!lib/libhide.so"}
    assert any(c == "G001" and "bundle.dat!lib/libhide.so" in m for c, m in findings(rep)), findings(rep)


# ---- bounded work --------------------------------------------------------------------------------


def counted_inventory(path: Path) -> tuple[TargetInventory, artifacts.Progress]:
    progress = artifacts.Progress()
    return artifacts.inventory(str(path), progress=progress, jobs=1), progress


def test_highly_compressible_members_are_bounded_by_the_wheels_size(tmp_path):
    """Ten members of an ELF header and zeros, 1 GiB each at 990:1 (10.8 MB of wheel): reading
    them would inflate 10 GiB. The audit may inflate max(64 MiB, 32x the wheel), so none is
    read: E003, and not one byte is inflated."""
    stream, crc, size = zero_bomb(1024)
    assert 980 < size / len(stream) < zipread.MAX_RATIO
    p = tmp_path / WHEEL_NAME
    p.write_bytes(raw_zip([(f"demo/lib{i}.so", stream, crc, size) for i in range(10)]))
    inv, progress = counted_inventory(p)
    budget = max(artifacts.BUDGET_FLOOR, artifacts.BUDGET_RATIO * p.stat().st_size)
    assert any(pr.code == "E003" and "would inflate the audit past" in pr.message for pr in inv.problems), inv.problems
    assert progress.done_bytes <= budget and progress.done_bytes == 0
    code, rep, _ = check(tmp_path, p)
    assert code == 1


def test_members_within_the_bound_are_read(tmp_path):
    """The same member at 64 MiB (the floor) in a 68 KB wheel is read in full: the bound does not
    refuse what a small real wheel may hold."""
    stream, crc, size = zero_bomb(64)
    p = tmp_path / WHEEL_NAME
    p.write_bytes(raw_zip([("demo/lib0.so", stream, crc, size)]))
    inv, progress = counted_inventory(p)
    assert [lib.path for lib in inv.libraries] == ["demo/lib0.so"]
    assert not any(pr.code == "E003" for pr in inv.problems)
    assert progress.done_bytes == size


def test_members_sharing_one_deflate_stream(tmp_path):
    """Twenty central-directory entries whose local headers all lead to one deflate stream
    (each header's extra field spans the headers after it): overlapping member data is E003,
    and none of it is inflated."""
    stream, crc, size = zero_bomb(16)
    names = [f"demo/lib{i:02d}.so".encode() for i in range(20)]
    headers_len = sum(30 + len(n) for n in names)
    out = bytearray()
    central = bytearray()
    for name in names:
        at = len(out)
        xlen = headers_len - at - 30 - len(name)  # this header's extra field reaches the stream
        central += central_record(name, crc, len(stream), size, at)
        out += local_header(name, crc, len(stream), size, xlen)
    out += stream
    data = bytes(out + central + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 20, 20, len(central), len(out), 0))
    p = tmp_path / WHEEL_NAME
    p.write_bytes(data)
    inv, progress = counted_inventory(p)
    overlapping = [pr for pr in inv.problems if pr.code == "E003" and "overlaps" in pr.message]
    assert len({pr.message.split(":")[0] for pr in overlapping}) == 20, inv.problems
    assert not inv.libraries and progress.done_bytes == 0
    looked_at: list[str] = []
    zipread.read_directory(str(p), lambda name, head: looked_at.append(name))
    assert looked_at == ["demo/lib00.so"]  # a header inside the data before it: its head is not read


def test_more_libraries_than_the_wheels_bytes_allow(tmp_path):
    """One more library member than the bound its bytes allow: E003, and none is read (the cost of
    a wheel of 200,000 tiny libraries is then its directory, not 200,000 audits)."""
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(artifacts.MAX_LIBRARIES + 1):
            z.writestr(f"demo/lib{i}.so", GOOD[:64])
    inv, progress = counted_inventory(p)
    assert any(pr.code == "E003" and "one per 4096 bytes of its own size" in pr.message for pr in inv.problems)
    assert not inv.libraries and progress.done_bytes == 0


def test_member_in_a_method_archaudit_cannot_read_fails_closed(tmp_path):
    """pip installs bzip2 members (zipfile reads them); archaudit cannot tell what one holds, so
    whatever its name it is E002, never skipped."""
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr("demo/libgood.so", GOOD, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("demo/data.bin", BAD, compress_type=zipfile.ZIP_BZIP2)
    assert zipfile.ZipFile(p).read("demo/data.bin") == BAD
    code, rep, _ = check(tmp_path, p)
    assert code in (1, 2)
    assert_finding(rep, "E002", "demo/data.bin: unsupported compression method 12")
