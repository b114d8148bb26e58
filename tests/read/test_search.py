"""read/search.py: the multi-pattern search, zone by zone.

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

import struct

from helpers import FATBIN_AT, LIB_SM80, containers, patched, read

# ---- a record longer than the zones after it ------------------------------------------------------


def test_a_container_longer_than_the_next_segment_does_not_end_the_search():
    """Program header 1 (R+X) stretched to end 8 bytes into the first container, program header 2
    (R) cut to 0x100 bytes: the container found in the code segment runs past all of segment 2,
    and the search goes on after it (the second container, the wrappers in the writable segment)."""
    (phoff,) = struct.unpack_from("<Q", LIB_SM80, 0x20)  # p_filesz at +32 of each 56-byte header
    data = patched(LIB_SM80, phoff + 56 + 32, "<Q", lambda _: FATBIN_AT + 8 - 0x1000)
    data = patched(data, phoff + 2 * 56 + 32, "<Q", lambda _: 0x100)
    lib = read("lib.so", data)
    assert (
        containers(lib)
        == containers(read("lib.so", LIB_SM80))
        == [(".nv_fatbin", "device-link", FATBIN_AT, 1536), (".nv_fatbin", "executable", FATBIN_AT + 1536, 3448)]
    )
    assert not lib.problems
