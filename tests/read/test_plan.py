"""Targets into library jobs (plan.py), driven in-process through `artifacts.inventory`: which
members and files a wheel, a directory, a file or an installed distribution gives to read, the
bounds on that work (bytes inflated, libraries per target, nesting, zips held in memory), and why
a target or a member cannot be read. Wheels are written by zipfile around the nvcc-built fixtures;
each case asserts what the target reports: which members are read, and the problem code and words
of what is not.
"""

from __future__ import annotations

import json
import os
import random
import zipfile
import zlib
from pathlib import Path

import pytest

from archaudit.read import artifacts, zipread
from archaudit.read.artifacts import inventory
from archaudit.read.plan import BUDGET_FLOOR, BUDGET_RATIO, BYTES_PER_LIBRARY, MAX_LIBRARIES, max_libraries
from helpers import (
    WHEEL_NAME,
    inner_zip as zip_bytes,
    raw_zip,
    read_whole,
    target_paths as paths,
    target_problems as problems,
    too_many_libraries as too_many,
    tree,
    wheel,
    zero_bomb,
)

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "tests" / "fixtures" / "cuda" / "bin"
GOOD = (CUDA / "lib_sm80.so").read_bytes()
ZIP_HEAD = b"PK\x03\x04" + bytes(60)  # what a zip's first bytes say (it holds no sound member)


def zlib_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


# ---- bounds: bytes, libraries, nesting ---------------------------------------------------------


def bombs(tmp_path: Path, mib: int, count: int, extra: tuple[tuple[str, bytes, int, int], ...] = ()) -> str:
    """A small wheel of `count` members of `mib` MiB each at about 990:1 (under the ratio bound)."""
    stream, crc, size = zero_bomb(mib)
    p = tmp_path / WHEEL_NAME
    p.write_bytes(raw_zip([(f"demo/lib{i}.so", stream, crc, size) for i in range(count)] + list(extra)))
    return str(p)


def test_members_past_the_inflation_budget_are_not_read_and_said(tmp_path):
    """Eight members of 9 MiB each in a wheel of a few hundred KB: the budget (64 MiB for a small
    wheel) reads seven and refuses the eighth, naming it; a refusal is E003."""
    inv = inventory(bombs(tmp_path, 9, 8))
    assert BUDGET_FLOOR == 64 << 20 and len(inv.libraries) == 7
    ((code, message),) = problems(inv)
    assert code == "E003" and message.startswith("1 member(s) not read (demo/lib7.so): they would inflate")
    assert f"past {BUDGET_FLOOR} bytes, {BUDGET_RATIO}x the wheel's size" in message


def test_the_refusal_names_three_members_and_counts_the_rest(tmp_path):
    inv = inventory(bombs(tmp_path, 20, 8))
    ((code, message),) = problems(inv)
    assert len(inv.libraries) == 3 and code == "E003"
    assert message.startswith("5 member(s) not read (demo/lib3.so, demo/lib4.so, demo/lib5.so, ...)")


@pytest.mark.parametrize(
    "count, shown",
    [
        (6, "3 member(s) not read (demo/lib3.so, demo/lib4.so, demo/lib5.so): "),
        (7, "4 member(s) not read (demo/lib3.so, demo/lib4.so, demo/lib5.so, ...): "),
    ],
)
def test_the_refusal_elides_only_past_three_names(tmp_path, count, shown):
    inv = inventory(bombs(tmp_path, 20, count))
    ((code, message),) = problems(inv)
    assert code == "E003" and message.startswith(shown)


def test_members_within_the_budget_are_all_read(tmp_path):
    inv = inventory(bombs(tmp_path, 7, 9))
    assert len(inv.libraries) == 9 and problems(inv) == []


def test_more_libraries_than_the_bytes_bring_reads_none(tmp_path):
    members = [(f"demo/lib{i}.so", b"x") for i in range(MAX_LIBRARIES + 1)]
    path = wheel(tmp_path / WHEEL_NAME, members)
    inv = inventory(str(path))
    assert inv.libraries == () and problems(inv) == [too_many(path)]


def test_a_large_wheel_may_hold_one_library_per_bytes_bound(tmp_path):
    """flashinfer-cubin 0.6.13 holds 15,970 cubins in 458 MB: the bound grows with the bytes."""
    pad = ("demo/pad.bin", random.Random(0).randbytes((MAX_LIBRARIES + 200) * BYTES_PER_LIBRARY))  # incompressible
    members = [(f"demo/lib{i}.so", b"x") for i in range(MAX_LIBRARIES + 100)] + [pad]
    path = wheel(tmp_path / WHEEL_NAME, members)
    assert max_libraries(os.path.getsize(path)) > MAX_LIBRARIES + 100
    inv = inventory(str(path))
    assert len(inv.libraries) == MAX_LIBRARIES + 100 and not any(c == "E003" for c, _ in problems(inv))


def test_as_many_libraries_as_the_bound_are_read(tmp_path):
    members = [(f"demo/lib{i}.so", b"x") for i in range(MAX_LIBRARIES)]
    inv = inventory(str(wheel(tmp_path / WHEEL_NAME, members)))
    assert len(inv.libraries) == MAX_LIBRARIES and not any(c == "E003" for c, _ in problems(inv))


def test_libraries_in_zips_count_towards_the_bound(tmp_path):
    """The wheel's own members stay under the bound; with those of a zip inside it they pass it:
    E003, and none is read."""
    inner = zip_bytes([(f"libin{i}.so", b"x") for i in range(5)])
    members = [(f"demo/lib{i}.so", b"x") for i in range(MAX_LIBRARIES - 2)] + [("demo/a.zip", inner)]
    path = wheel(tmp_path / WHEEL_NAME, members)
    inv = inventory(str(path))
    assert inv.libraries == () and problems(inv)[-1] == too_many(path)


def test_a_member_that_is_not_read_does_not_stop_the_ones_after_it(tmp_path):
    inv = inventory(
        str(
            wheel(
                tmp_path / WHEEL_NAME,
                [("demo/readme.txt", b"hello"), ("demo/__init__.py", b""), ("demo/libk.so", GOOD)],
            )
        )
    )
    assert read_whole(inv) == ["demo/libk.so"]


def test_zips_do_not_count_as_libraries(tmp_path):
    inner = zip_bytes([("libin.so", GOOD)])
    members = [(f"demo/lib{i}.so", b"x") for i in range(MAX_LIBRARIES - 1)] + [("demo/a.zip", inner)]
    inv = inventory(str(wheel(tmp_path / WHEEL_NAME, members)))
    assert len(inv.libraries) == MAX_LIBRARIES and "demo/a.zip!libin.so" in paths(inv)
    # as many libraries as the bound, and a zip that holds none: all read
    members = [(f"demo/lib{i}.so", b"x") for i in range(MAX_LIBRARIES)] + [
        ("demo/docs.zip", zip_bytes([("readme.txt", b"hello")]))
    ]
    inv = inventory(str(wheel(tmp_path / WHEEL_NAME, members)))
    assert len(inv.libraries) == MAX_LIBRARIES and problems(inv) == []


def test_members_that_are_not_libraries_do_not_count(tmp_path):
    """torch's wheel holds 12,261 members, most of them Python files: only libraries count."""
    members = [(f"demo/m{i}.py", b"") for i in range(MAX_LIBRARIES + 5)] + [("demo/libk.so", GOOD)]
    inv = inventory(str(wheel(tmp_path / WHEEL_NAME, members)))
    assert read_whole(inv) == ["demo/libk.so"] and problems(inv) == []


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_a_library_in_a_zip_in_a_zip_is_read_and_one_deeper_is_not(tmp_path, method):
    level2 = zip_bytes([("lib2.so", GOOD)], method)
    level3 = zip_bytes([("lib3.so", GOOD)], method)
    level1 = zip_bytes(
        [("lib1.so", GOOD), ("deep.zip", level2), ("deeper.zip", zip_bytes([("x.zip", level3)]))], method
    )
    inv = inventory(str(wheel(tmp_path / WHEEL_NAME, [("demo/outer.zip", level1)])))
    assert read_whole(inv) == ["demo/outer.zip!deep.zip!lib2.so", "demo/outer.zip!lib1.so"]
    assert problems(inv) == [("E003", "demo/outer.zip!deeper.zip!x.zip: a zip nested 3 deep; its members are not read")]


def test_a_nested_zip_that_cannot_be_read_is_e002(tmp_path):
    inv = inventory(str(wheel(tmp_path / WHEEL_NAME, [("demo/bad.zip", b"PK\x03\x04" + bytes(200))])))
    assert inv.libraries == ()
    ((code, message),) = problems(inv)
    assert code == "E002" and message.startswith("demo/bad.zip: ")


def test_a_nested_zip_counts_against_the_wheels_budget(tmp_path):
    """Eight members of 7 MiB (56 MiB of the 64 MiB budget) and a zip holding an 8 MiB library:
    the zip is read, the library inside it is refused, named by its nested path."""
    inner = raw_zip([("libz.so", *zero_bomb(8))])
    inv = inventory(bombs(tmp_path, 7, 8, (("demo/z.zip", zlib_deflate(inner), zlib.crc32(inner), len(inner)),)))
    refused = [m for c, m in problems(inv) if c == "E003"]
    assert refused and "demo/z.zip!libz.so" in refused[0] and "demo/z.zip!libz.so" not in paths(inv)


def test_a_zip_inside_past_the_budget_is_refused_by_name(tmp_path):
    """Seven members of 9 MiB (63 of the 64 MiB budget), then a zip of 2 MiB: the zip itself is
    refused, by its name."""
    pad = (random.Random(1).randbytes(12) + bytes((1 << 20) - 12)) * 2  # about 990:1 once deflated
    inner = zip_bytes([("libz.so", GOOD), ("pad.bin", pad)], zipfile.ZIP_STORED)
    inv = inventory(bombs(tmp_path, 9, 7, (("demo/z.zip", zlib_deflate(inner), zlib.crc32(inner), len(inner)),)))
    ((code, message),) = problems(inv)
    assert code == "E003" and message.startswith("1 member(s) not read (demo/z.zip): ") and len(inv.libraries) == 7


def test_a_stored_zip_past_the_budget_is_refused_by_name(tmp_path):
    """Seven members of 9 MiB (63 of the 64 MiB budget), then a stored zip of 1.5 MiB: refused,
    by its name (a stored zip is read in place, but its bytes are still inflated for the audit)."""
    inner = zip_bytes([("libz.so", GOOD), ("pad.bin", os.urandom(3 << 19))], zipfile.ZIP_STORED)
    stream, crc, size = zero_bomb(9)
    p = tmp_path / WHEEL_NAME
    data = raw_zip([(f"demo/lib{i}.so", stream, crc, size) for i in range(7)])
    p.write_bytes(data)
    with zipfile.ZipFile(p, "a") as z:
        z.writestr("demo/s.zip", inner, compress_type=zipfile.ZIP_STORED)
    inv = inventory(str(p))
    ((code, message),) = problems(inv)
    assert code == "E003" and message.startswith("1 member(s) not read (demo/s.zip): ") and len(inv.libraries) == 7


def test_a_deflated_zip_of_several_chunks_is_read_whole(tmp_path):
    """A zip inside of 3 MiB (several inflate steps of 1 MiB): held whole, its library read."""
    inner = zip_bytes([("pad.bin", os.urandom(3 << 20)), ("lib/libk.so", GOOD)], zipfile.ZIP_STORED)
    inv = inventory(str(wheel(tmp_path / WHEEL_NAME, [("demo/big.zip", inner)])))
    assert read_whole(inv) == ["demo/big.zip!lib/libk.so"] and problems(inv) == []


def test_a_zip_inside_whose_crc_fails_is_e002_by_name(tmp_path):
    inner = zip_bytes([("lib/libk.so", GOOD), ("pad.bin", os.urandom(8192))], zipfile.ZIP_STORED)
    p = tmp_path / WHEEL_NAME
    crc = zlib.crc32(inner) ^ 1  # the recorded CRC no longer matches the bytes
    p.write_bytes(raw_zip([("demo/z.zip", zlib_deflate(inner), crc, len(inner))]))
    inv = inventory(str(p))
    assert inv.libraries == ()
    ((code, message),) = problems(inv)
    assert code == "E002" and message.startswith("demo/z.zip: ") and "CRC" in message


def test_zips_held_in_memory_are_bounded_together_however_many(tmp_path):
    """Three zips of 100 MiB each (each under the 256 MiB bound, two together too): the third
    would make 300 MiB held at once: E003."""
    stream, crc, size = zero_bomb(100, ZIP_HEAD)
    filler = os.urandom(10 << 20)
    p = tmp_path / WHEEL_NAME
    p.write_bytes(
        raw_zip(
            [
                ("demo/a.zip", stream, crc, size),
                ("demo/b.zip", stream, crc, size),
                ("demo/c.zip", stream, crc, size),
                ("demo/data.bin", zlib_deflate(filler), zlib.crc32(filler), len(filler)),
            ]
        )
    )
    got = problems(inventory(str(p)))
    assert [c for c, _ in got] == ["E002", "E002", "E003"], got
    assert got[2][1].startswith("demo/c.zip: a zip of ")


# ---- zips inside a wheel: read in place or held, within bounds ----------------------------------


def test_a_stored_zip_is_read_in_place_and_its_crc_checked_first(tmp_path):
    nested = zip_bytes([("lib/libin.so", GOOD), ("lib/libin2.so", GOOD)])
    assert len(nested) > zipread.WHOLE  # read in place, not held
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr("demo/bundle.zip", nested, compress_type=zipfile.ZIP_STORED)
    inv = inventory(str(p))
    assert read_whole(inv) == ["demo/bundle.zip!lib/libin.so", "demo/bundle.zip!lib/libin2.so"]
    assert problems(inv) == []
    raw = bytearray(p.read_bytes())
    raw[raw.find(b"lib/libin.so")] ^= 0x20  # a byte of the stored zip: its CRC no longer matches
    p.write_bytes(raw)
    inv = inventory(str(p))
    assert inv.libraries == () and [c for c, _ in problems(inv)] == ["E002"]
    assert problems(inv)[0][1].startswith("demo/bundle.zip: CRC mismatch")


def test_a_zip_inside_declaring_more_than_the_in_memory_bound_is_not_read(tmp_path):
    stream, crc, size = zero_bomb(257, ZIP_HEAD)
    p = tmp_path / WHEEL_NAME
    p.write_bytes(raw_zip([("demo/big.zip", stream, crc, size)]))
    inv = inventory(str(p))
    assert inv.libraries == () and problems(inv) == [
        (
            "E003",
            f"demo/big.zip: a zip of {size} bytes inside the archive, over the {256 << 20}-byte bound for zips "
            f"read in memory; its members are not read",
        )
    ]


def test_zips_held_in_memory_are_bounded_together(tmp_path):
    """Two zips of 130 MiB each inside a wheel whose size allows inflating both (8.5 MB of data
    beside them): the first is held and read (it is no sound zip: E002), the second would hold
    more than 256 MiB at once: E003, not read."""
    stream, crc, size = zero_bomb(130, ZIP_HEAD)
    filler = os.urandom(17 << 19)
    p = tmp_path / WHEEL_NAME
    p.write_bytes(
        raw_zip(
            [
                ("demo/a.zip", stream, crc, size),
                ("demo/b.zip", stream, crc, size),
                ("demo/data.bin", zlib_deflate(filler), zlib.crc32(filler), len(filler)),
            ]
        )
    )
    inv = inventory(str(p))
    got = problems(inv)
    assert [c for c, _ in got] == ["E002", "E003"], got
    assert got[0][1].startswith("demo/a.zip: a zip whose members cannot be read: ")
    assert got[1][1] == (
        f"demo/b.zip: a zip of {size} bytes inside the archive, over the {256 << 20}-byte bound "
        f"for zips read in memory; its members are not read"
    )


def test_the_archives_hazards_keep_their_code_and_member_and_a_member_chosen_by_content_says_so(tmp_path):
    """zipread's hazards become the target's problems with their own code, named by member (a
    zip inside: `outer!inner`); a member whose name is no library's, chosen by its content, is
    read with the note saying why."""
    inner = zip_bytes([("../escape.so", GOOD), ("lib/libin.so", GOOD)])
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr("/abs/libx.so", GOOD)
        z.writestr("demo/kernels.dat", GOOD)
        z.writestr("demo/bundle.zip", inner)
    inv = inventory(str(p))
    assert read_whole(inv) == ["demo/bundle.zip!lib/libin.so", "demo/kernels.dat"]
    assert sorted(problems(inv)) == [
        ("E003", "/abs/libx.so: absolute member path"),
        ("E003", "demo/bundle.zip!../escape.so: member path escapes the archive ('..')"),
    ]
    notes = {lib.path: lib.notes for lib in inv.libraries}
    assert notes == {
        "demo/bundle.zip!lib/libin.so": (),
        "demo/kernels.dat": (
            "named 'kernels.dat', which no search by file name picks: read because its content is an ELF file",
        ),
    }


# ---- targets that are not wheels ---------------------------------------------------------------


def test_a_missing_file_is_e001(tmp_path):
    inv = inventory(str(tmp_path / "nothere" / "libk.so"))
    assert (inv.target, inv.kind, inv.libraries) == (str(tmp_path / "nothere" / "libk.so"), "file", ())
    assert inv.unusable and problems(inv) == [("E001", "cannot read: no such file")]


def test_a_name_that_is_nothing_is_e001():
    inv = inventory("no-such-distribution-archaudit-test")
    assert inv.unusable and inv.kind == "distribution" and inv.target == "no-such-distribution-archaudit-test"
    assert inv.libraries == ()
    assert problems(inv) == [
        ("E001", "cannot read: no such file, directory or installed distribution 'no-such-distribution-archaudit-test'")
    ]


def test_a_wheel_that_is_not_a_zip_is_e002(tmp_path):
    p = tmp_path / WHEEL_NAME
    p.write_bytes(b"not a zip at all" * 10)
    inv = inventory(str(p))
    assert (inv.target, inv.kind, inv.libraries) == (str(p), "wheel", ())
    assert inv.unusable and [c for c, _ in problems(inv)] == ["E002"]
    assert problems(inv)[0][1].startswith("malformed archive: ")


def test_an_empty_directory_is_e001(tmp_path):
    (tmp_path / "empty").mkdir()
    inv = inventory(str(tmp_path / "empty"))
    assert inv.unusable and problems(inv) == [("E001", "directory holds no files to audit")]


def test_a_directory_of_data_only_is_as_unusable_as_an_empty_one(tmp_path):
    """Files that no rule picks (by name or content) leave nothing to audit: E001, not a pass."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "readme.txt").write_text("hello")
    inv = inventory(str(tmp_path / "d"))
    assert inv.unusable and inv.libraries == () and problems(inv) == [("E001", "directory holds no files to audit")]


def test_directory_links_that_leave_the_target_are_e003(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "libout.so").write_bytes(GOOD)
    (root / "libin.so").write_bytes(GOOD)
    os.symlink(outside / "libout.so", root / "liblink.so")
    os.symlink(outside, root / "linkdir")
    (root / "sub").mkdir()
    (root / "sub" / "libsub.so").write_bytes(GOOD)
    os.symlink(root / "sub", root / "insidedir")  # a link to a directory inside: not walked, no problem
    os.symlink(root / "libin.so", root / "libalias.so")  # inside: the same file, read once
    os.symlink(root / "missing.so", root / "libbroken.so")
    os.mkfifo(root / "libfifo.so")
    os.symlink(root / "nope.so", root / "libzbroken.so")  # after the link that leaves: still judged
    inv = inventory(str(root))
    assert read_whole(inv) == ["libin.so", "sub/libsub.so"]
    assert sorted(problems(inv)) == sorted(
        [
            ("E003", "liblink.so: symbolic link points outside the target"),
            ("E003", "linkdir: symbolic link to a directory outside the target (its files are not audited)"),
            ("E003", "libbroken.so: unreadable or a broken/looping link (No such file or directory)"),
            ("E003", "libfifo.so: not a regular file"),
            ("E003", "libzbroken.so: unreadable or a broken/looping link (No such file or directory)"),
        ]
    )


def test_a_zip_in_a_directory_is_read_like_a_nested_zip(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    (root / "bundle.zip").write_bytes(
        zip_bytes([("libk.so", GOOD), ("deep.zip", zip_bytes([("x.zip", zip_bytes([("liby.so", GOOD)]))]))])
    )
    (root / "broken.zip").write_bytes(b"PK\x03\x04" + bytes(100))
    inv = inventory(str(root))
    assert read_whole(inv) == ["bundle.zip!libk.so"]
    got = problems(inv)
    assert ("E003", "bundle.zip!deep.zip!x.zip: a zip nested 3 deep; its members are not read") in got
    assert any(c == "E002" and m.startswith("broken.zip: a zip whose members cannot be read: ") for c, m in got)


def test_a_zip_in_a_directory_is_bounded_by_its_own_budget(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    stream, crc, size = zero_bomb(9)
    (root / "bundle.zip").write_bytes(raw_zip([(f"lib{i}.so", stream, crc, size) for i in range(8)]))
    inv = inventory(str(root))
    assert len(inv.libraries) == 7
    ((code, message),) = problems(inv)
    assert code == "E003" and message.startswith("1 member(s) not read (bundle.zip!lib7.so): they would inflate")


def test_a_stored_zip_whose_directory_cannot_be_read_is_e002(tmp_path):
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr("demo/bad.zip", b"PK\x03\x04" + bytes(8000), compress_type=zipfile.ZIP_STORED)
        z.writestr("demo/libk.so", GOOD, compress_type=zipfile.ZIP_DEFLATED)
    inv = inventory(str(p))
    assert read_whole(inv) == ["demo/libk.so"]
    ((code, message),) = problems(inv)
    assert code == "E002" and message.startswith("demo/bad.zip: a zip whose members cannot be read: ")


@pytest.mark.parametrize("name", ["libnothere.so", "demo/libnothere"])
def test_a_library_path_that_does_not_exist_is_a_missing_file(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    inv = inventory(name)
    assert (inv.target, inv.kind, inv.libraries, inv.unusable) == (name, "file", (), True)
    assert problems(inv) == [("E001", "cannot read: no such file")]


def test_a_file_target_by_a_relative_name_is_read_as_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libk.so").write_bytes(GOOD)
    inv = inventory("libk.so")
    assert (inv.target, inv.kind, inv.distribution, inv.unusable) == ("libk.so", "file", "", False)
    assert read_whole(inv) == ["libk.so"] and problems(inv) == []


def test_a_file_named_like_data_in_a_directory_is_read_by_content(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    (root / "kernels.dat").write_bytes(GOOD)
    (root / "notes.dat").write_bytes(b"plain")
    inv = inventory(str(root))
    assert read_whole(inv) == ["kernels.dat"]
    assert inv.libraries[0].notes == (
        "named 'kernels.dat', which no search by file name picks: read because its content is an ELF file",
    )


# ---- an installed distribution ------------------------------------------------------------------


def test_an_installed_distribution_is_read_from_its_record(tmp_path, monkeypatch):
    """The files its RECORD lists: libraries by name and by content, each once (a link to one is
    that one), and a listed file that is missing is E001; the label is its name and version."""
    site = tmp_path / "site"
    pkg = site / "demo_pkg"
    pkg.mkdir(parents=True)
    (pkg / "libk.so").write_bytes(GOOD)
    (pkg / "kernels.dat").write_bytes(GOOD)
    (pkg / "readme.txt").write_text("hello")
    os.symlink(pkg / "libk.so", pkg / "libk.so.1")
    info = site / "demo_dist-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-dist\nVersion: 2.0\n")
    (pkg / "broken.zip").write_bytes(b"PK\x03\x04" + bytes(100))
    (pkg / "bundle.zip").write_bytes(zip_bytes([("libz.so", GOOD)]))  # read like a wheel's zip, within its budget
    listed = [
        "demo_pkg/libgone.so",
        "demo_pkg/libk.so",
        "demo_pkg/libk.so.1",
        "demo_pkg/readme.txt",
        "demo_pkg/broken.zip",
        "demo_pkg/bundle.zip",
        "demo_pkg/kernels.dat",
        "demo_dist-2.0.dist-info/METADATA",
    ]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in listed))
    monkeypatch.syspath_prepend(str(site))
    inv = inventory("demo-dist")
    assert inv.kind == "distribution" and inv.distribution == "demo-dist-2.0" and not inv.unusable
    assert read_whole(inv) == ["demo_pkg/bundle.zip!libz.so", "demo_pkg/kernels.dat", "demo_pkg/libk.so"]
    got = problems(inv)
    assert got[0] == ("E001", "demo_pkg/libgone.so: listed in RECORD but missing") and len(got) == 2
    assert got[1][0] == "E002" and got[1][1].startswith("demo_pkg/broken.zip: a zip whose members cannot be read: ")


# ---- files the system refuses to read, even to root ----------------------------------------------
# The tests run as root, where no permission refuses a read; these are the refusals that remain:
# paths the kernel cannot resolve, files that are not regular, and files of /proc and /sys that
# stat as regular but cannot be read. Each is judged through `check` itself (exit code and
# finding), and leaves nothing behind: nothing is written to the target or to the temp directory.


def check_json(capsys, *args: str) -> tuple[int, list[tuple[str, str]]]:
    from archaudit.cli import main

    rc = main(["check", "-q", "--format", "json", "--no-config", "--arch", "80", *args])
    report = json.loads(capsys.readouterr().out)
    found = [(f["code"], f["message"]) for t in report["targets"] for f in t["findings"]]
    # every reader error ends in what to do; the tests here compare what went wrong, before it
    assert all(". Fix: " in m for c, m in found if c.startswith("E")), found
    return rc, [(c, m.split(". Fix: ")[0]) for c, m in found]


def test_links_the_kernel_cannot_resolve_are_e003_each_by_its_reason(tmp_path, capsys, empty_tmp):
    """A directory's link through a regular file (ENOTDIR), a link loop (ELOOP), a link whose
    target has a name over NAME_MAX (ENAMETOOLONG), a link with a library's name to a directory
    and a FIFO: each is E003 with the system's reason, and the sound library beside them is read."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "libin.so").write_bytes(GOOD)
    (root / "sub").mkdir()
    os.symlink("libin.so/x", root / "libnotdir.so")
    os.symlink("libloop.so", root / "libloop.so")
    os.symlink("x" * 300, root / "liblong.so")
    os.symlink("sub", root / "libdir.so")
    os.mkfifo(root / "libfifo.so")
    before = tree(root)
    inv = inventory(str(root))
    assert read_whole(inv) == ["libin.so"]
    expected = [
        ("E003", "libdir.so: not a regular file"),
        ("E003", "libfifo.so: not a regular file"),
        ("E003", "liblong.so: unreadable or a broken/looping link (File name too long)"),
        ("E003", "libloop.so: unreadable or a broken/looping link (Too many levels of symbolic links)"),
        ("E003", "libnotdir.so: unreadable or a broken/looping link (Not a directory)"),
    ]
    assert sorted(problems(inv)) == expected
    rc, found = check_json(capsys, str(root))
    assert rc == 1 and sorted(f for f in found if f[0] != "D002") == [(c, f"{root}: {m}") for c, m in expected]
    assert tree(root) == before and list(empty_tmp.iterdir()) == []


@pytest.mark.parametrize("make", ["fifo", "directory-link", "device-link"])
@pytest.mark.parametrize("name", ["x.whl", "libx.so"])
def test_a_target_that_is_not_a_regular_file_is_e001_and_never_opened(tmp_path, capsys, empty_tmp, make, name):
    """A FIFO named like a wheel blocked the open of its directory read forever (no writer ever
    comes); a link to /dev/null or to a directory named `.so` is no file either. E001, exit 2."""
    target = tmp_path / name
    if make == "fifo":
        os.mkfifo(target)
    elif make == "device-link":
        os.symlink(os.devnull, target)
    else:
        if name.endswith(".whl"):
            pytest.skip("a directory named x.whl is a directory target")
        (tmp_path / "d").mkdir()
        os.symlink(tmp_path / "d", target)
        inv = inventory(str(target))
        assert inv.kind == "directory"
        return
    inv = inventory(str(target))
    kind = "wheel" if name.endswith(".whl") else "file"
    assert (inv.kind, inv.libraries, inv.unusable) == (kind, (), True)
    assert problems(inv) == [("E001", "cannot read: not a regular file")]
    rc, found = check_json(capsys, str(target))
    assert rc == 2 and found == [("E001", f"{target}: cannot read: not a regular file")]
    assert list(empty_tmp.iterdir()) == []


@pytest.mark.parametrize("make", ["through-a-file", "name-over-name-max", "link-loop"])
@pytest.mark.parametrize("suffix", [".whl", ".so"])
def test_a_target_the_kernel_cannot_resolve_is_e001_exit_2(tmp_path, capsys, empty_tmp, make, suffix):
    """A target path through a regular file (ENOTDIR), with a name over NAME_MAX
    (ENAMETOOLONG), or a link loop (ELOOP): nothing can be read, E001, exit 2."""
    (tmp_path / "libk.so").write_bytes(GOOD)
    if make == "through-a-file":
        target = str(tmp_path / "libk.so" / f"x{suffix}")
    elif make == "name-over-name-max":
        target = str(tmp_path / ("x" * 300 + suffix))
    else:
        target = str(tmp_path / f"loop{suffix}")
        os.symlink(target, target)
    before = tree(tmp_path)
    inv = inventory(target)
    assert (inv.kind, inv.libraries, inv.unusable) == ("file", (), True)
    assert problems(inv) == [("E001", "cannot read: no such file")]
    rc, found = check_json(capsys, target)
    assert rc == 2 and found == [("E001", f"{target}: cannot read: no such file")]
    assert tree(tmp_path) == before and list(empty_tmp.iterdir()) == []


# Files of /proc and /sys that stat as regular files of size 0 or 4096 and refuse every read, even
# to root: EIO (/proc/self/mem at offset 0, an unmapped page), EINVAL (clear_refs has no read),
# EACCES (a write-only sysfs attribute: kernfs refuses to open it for reading).
UNREADABLE = [p for p in ("/proc/self/mem", "/proc/self/clear_refs", "/sys/bus/pci/rescan") if os.path.isfile(p)]


UNREADABLE_TOO = [
    p
    for p in ("/proc/thread-self/mem", "/proc/thread-self/clear_refs", "/sys/bus/pci/drivers_probe")
    if os.path.isfile(p)
]  # other files of the same kinds (a file is read once, by its real path)


def refused(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.read(artifacts.HEAD)
    except OSError as e:
        return str(e.strerror)
    pytest.skip(f"{path} is readable here")


@pytest.mark.skipif(not UNREADABLE, reason="no /proc or /sys here")
def test_a_library_that_stats_regular_but_cannot_be_read_is_e001(tmp_path, monkeypatch, capsys, empty_tmp):
    """An installed distribution whose RECORD lists libraries that are links to such files (links
    may leave a distribution: its files are where the installer put them), and the files
    themselves by absolute path (as RECORD lists files installed outside site-packages): each is
    E001 with the system's reason, and the sound library beside them is read whole. A file whose
    first bytes cannot be read was passed over unseen when its name was no library's (it could
    not be chosen by content): now it is chosen, and its read fails."""
    site = tmp_path / "site"
    pkg = site / "demo_pkg"
    pkg.mkdir(parents=True)
    (pkg / "libk.so").write_bytes(GOOD)
    names = {}
    for i, target in enumerate(UNREADABLE):
        os.symlink(target, pkg / f"libbad{i}.so")
        names[f"demo_pkg/libbad{i}.so"] = refused(target)
    for target in UNREADABLE_TOO:
        names[target] = refused(target)
    info = site / "demo_dist-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-dist\nVersion: 2.0\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in ["demo_pkg/libk.so", *names]))
    monkeypatch.syspath_prepend(str(site))
    before = tree(site)
    inv = inventory("demo-dist")
    assert read_whole(inv) == ["demo_pkg/libk.so"] and not inv.unusable
    assert sorted(problems(inv)) == sorted(("E001", f"{n}: cannot read: {why}") for n, why in names.items())
    from archaudit.cli import main
    from archaudit.findings import FOLD_EXAMPLES

    rc = main(["check", "-q", "--format", "json", "--no-config", "--arch", "80", "demo-dist"])
    report = json.loads(capsys.readouterr().out)
    found = [f for t in report["targets"] for f in t["findings"] if f["code"] != "D002"]
    expected = {f"demo-dist: {n}: cannot read: {why}" for n, why in names.items()}
    # one code on one subject: reported once past FOLD_EXAMPLES, with the count and the first ones
    assert rc == 1 and sum(f["count"] for f in found) == len(expected) and {f["code"] for f in found} == {"E001"}
    messages = [m.split(". Fix: ")[0] for f in found for m in (f["examples"] or [f["message"]])]
    assert set(messages) <= expected and len(messages) == min(len(expected), FOLD_EXAMPLES)
    assert tree(site) == before and list(empty_tmp.iterdir()) == []


@pytest.mark.skipif(not os.path.isfile("/sys/bus/pci/rescan"), reason="no PCI sysfs here")
def test_a_directory_file_whose_first_bytes_cannot_be_read_is_e001_not_passed_over():
    """/sys/bus/pci as a directory target: `rescan` is a regular file whose name is no
    library's, which only its content could choose, and which refuses to be read. It was
    passed over unseen; now it is E001 (its links to devices are E003, as every link leaving a
    target is)."""
    inv = inventory("/sys/bus/pci")
    assert inv.libraries == () and not inv.unusable
    assert ("E001", "rescan: cannot read: Permission denied") in problems(inv)
    assert {c for c, _ in problems(inv)} == {"E001", "E003"}
