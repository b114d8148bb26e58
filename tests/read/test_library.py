"""read/library.py: which reader takes a file, and the entry points (scan_file, scan_stream,
library_from_bytes): what is no library, a stream that fails, an internal error.

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from archaudit.findings import Code
from archaudit.model import Library, Problem
from archaudit.read import library, zipread
from helpers import CUDA_BIN, KERN_FATBIN, LIB_SM80, read

FIXTURES_PE = CUDA_BIN.parent.parent / "pe" / "bin"


# ---- what is no library, and a stream that fails ------------------------------------------------


def test_a_file_no_reader_takes_is_e010():
    data = b"not a library\n" * 10
    assert read("lib.so", data) == Library(
        "lib.so", len(data), "other", problems=(Problem(Code.E010, "malformed ELF: not an ELF file"),)
    )


@pytest.mark.parametrize(
    "error, code, message",
    [
        (OSError(5, "Input/output error"), "E001", "cannot read: [Errno 5] Input/output error"),
        (
            zipread.MemberError("libk.so: CRC-32 does not match", code=Code.E003),
            "E003",
            "libk.so: CRC-32 does not match",
        ),
        (ValueError("inflate failed"), "E002", "inflate failed"),
    ],
)
def test_a_stream_that_fails_midway_is_a_read_failure_of_its_code(error, code, message):
    """Chunks come from the zip reader (or a file): its failure mid-stream is the finding,
    never a library read from the bytes that came before it."""

    def chunks() -> Iterator[bytes]:
        yield LIB_SM80[:4096]
        raise error

    assert library.scan_stream("lib.so", len(LIB_SM80), chunks) == Library(
        "lib.so", len(LIB_SM80), "other", problems=(Problem(code, message),)
    )


def test_an_internal_error_is_e099_and_never_a_library_read_without_findings():
    """A chunk source that yields something other than bytes (a caller's bug) fails inside the
    reader: the guard turns that into E099 for the file, whatever the exception says."""
    lib = library.scan_stream("lib.so", len(LIB_SM80), lambda: iter([LIB_SM80[:4096], None]))  # type: ignore[arg-type, return-value]
    assert (lib.path, lib.size, lib.format, lib.containers, [p.code for p in lib.problems]) == (
        "lib.so",
        len(LIB_SM80),
        "other",
        (),
        ["E099"],
    )
    assert lib.problems[0].message.startswith("could not be verified: internal error TypeError: ")


# ---- the entry points -----------------------------------------------------------------------------


def test_scan_file_reads_a_file_on_disk_with_the_callers_settings(tmp_path):
    path = tmp_path / "kern.fatbin"
    path.write_bytes(KERN_FATBIN)
    assert library.scan_file(str(path), "k.fatbin") == read("k.fatbin", KERN_FATBIN)
    fast = library.scan_file(str(path), decode=False)
    assert fast.path == str(path) and [e.decoded for e in fast.containers[0].entries] == [False, False]
    bounded = library.scan_file(str(path), max_payload=3367)
    assert [p.code for p in bounded.problems] == ["E012"]


def test_scan_file_of_a_file_that_cannot_be_read_is_e001(tmp_path):
    missing = tmp_path / "gone.so"
    lib = library.scan_file(str(missing), "lib.so")
    assert (lib.path, lib.size, lib.format, lib.containers) == ("lib.so", 0, "other", ())
    assert [(p.code, p.message.startswith("cannot read: ")) for p in lib.problems] == [("E001", True)]
    assert library.scan_file(str(missing)).path == str(missing)


def test_a_mach_o_library_is_read_by_the_mach_o_reader():
    data = (FIXTURES_PE / "macos_sm80.dylib").read_bytes()
    lib = read("libk.dylib", data)
    assert (lib.path, lib.size, lib.format, lib.problems) == ("libk.dylib", len(data), "macho", ())
    assert [(c.offset, c.size, [e.target for e in c.entries]) for c in lib.containers] == [(8192, 3448, ["sm_80"])]
