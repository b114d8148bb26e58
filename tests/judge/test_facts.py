"""facts.py's driver floors, pinned where mutation testing found them unjudged.

A floor comes from the code (a PTX text's ISA, a cubin's toolkit note) or, for code that
records neither, from the CUDA runtime the library links. Each case is a library built as the
rule tests build them (tests/judge/rules/) and the exact D001/D002 it gets.
"""

from __future__ import annotations

from helpers import box, found, lib, ptx, report, sass


def test_a_runtime_whose_driver_floor_is_unknown_fails_closed_under_driver():
    """libcudart.so.99: no table names the driver CUDA 99 needs, so --driver cannot be checked:
    D001, exit 1, with the runtime named."""
    rep = report(lib(box(sass("sm_80", toolkit=None)), needed=("libcudart.so.99",)), arch="80", driver="999.0")
    (d001,) = found(rep, "D001")
    assert d001.message == (
        "libx.so needs a driver archaudit cannot name on 8.0: 999.0 cannot be verified. Fix: find "
        "the CUDA release that built it and require its driver. links libcudart.so.99: no driver "
        "floor is known for CUDA 99"
    )
    (d002,) = found(rep, "D002")
    assert d002.get("cuda") == "99.0" and d002.get("driver") == "unknown" and rep.exit_code == 1


def test_the_runtime_is_found_after_names_that_say_nothing():
    """NEEDED lists libc before libcudart.so.12: the runtime still sets the floor of code that
    records no toolkit (CUDA 12's minor-version floor, 525.60.13 on Linux)."""
    library = lib(box(sass("sm_80", toolkit=None)), needed=("libc.so.6", "libcudart.so.12"))
    rep = report(library, arch="80", driver="520.0")
    (d001,) = found(rep, "D001")
    assert d001.get("driver") == "525.60.13" and d001.message.endswith("from links libcudart.so.12 (CUDA 12.x)")
    assert rep.exit_code == 1
    assert report(library, arch="80", driver="525.60.13").exit_code == 0


def test_a_windows_library_takes_the_windows_runtime_floor():
    rep = report(
        lib(box(sass("sm_80", toolkit=None)), needed=("cudart64_12.dll",), path="x.dll"), arch="80", driver_os="windows"
    )
    (d002,) = found(rep, "D002")
    assert (d002.get("driver"), d002.get("os"), d002.get("cuda")) == ("527.41", "windows", "12.0")


def test_a_ptx_isa_no_table_knows_does_not_hide_the_one_after_it():
    """A container's PTX dates its cubins: an ISA newer than every known release (99.9) is
    passed over, and the next PTX (ISA 9.0: CUDA 13.0) still dates the cubin: floor 580."""
    rep = report(
        lib(box(ptx("compute_80", isa=(99, 9)), ptx("compute_80", isa=(9, 0)), sass("sm_80", toolkit=None)), needed=()),
        arch="80",
    )
    (d002,) = found(rep, "D002")
    assert (d002.get("driver"), d002.get("cuda")) == ("580.65.06", "13.0") and rep.exit_code == 0
