"""What a decoded relocatable cubin says it calls without carrying, pinned where mutation testing
found decode.decode_entry loose (docs/mutation.md: dropping `unresolved` survived).

The cubins are nvcc's (`-rdc=true`, without a device link): tests/fixtures/smoke/bin/rdc_ext.fatbin
(a kernel calling an `extern __device__` function defined nowhere in it) and rdc_self.fatbin (one
that calls only what it carries), tests/fixtures/cuda/bin/rdc_b.o (`nvcc -rdc=true -c`, calling
`scale` from rdc_a.cu) and lib_rdc.so (its `__nv_relfatbin`). Each answer is checked against the
undefined symbols cuobjdump -elf lists, and rdc_ext.fatbin against the H200's driver: it refuses
the cubin alone with CUDA_ERROR_NOT_FOUND (500) and loads rdc_self.fatbin
(records/smoke-h200/jit-modes.txt, tests/smoke/test_smoke_gpu.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import zstandard

import oracle
from archaudit.cli import main
from archaudit.gpus import predict as P
from archaudit.model import Library
from archaudit.read import decode, fatbin
from archaudit.read.fatbin import FatbinError
from archaudit.read.library import scan_file, scan_stream
from helpers import CUBIN, sass_entry
from reference_tools import needs_tool

HERE = Path(__file__).resolve().parents[1]
SMOKE_BIN = HERE / "fixtures" / "smoke" / "bin"
CUDA_BIN = HERE / "fixtures" / "cuda" / "bin"
H200 = P.Gpu((9, 0), (13, 0))
# Undefined in every relocatable cubin and supplied by the driver when it loads one alone: the
# H200 loads rdc_self.fatbin, whose only undefined symbols these are.
DRIVER_SUPPLIED = ("__UFT", "__UDT", ".nv.reservedSmem.")

needs_cuobjdump = needs_tool("cuobjdump", oracle.find_cuobjdump())


def cuobjdump_undefined(path: Path) -> list[tuple[str, list[str]]]:
    """(arch, undefined global or weak symbols) per ELF cubin in any section, as cuobjdump -all
    -elf lists them."""
    text = oracle._run(["-all", "-elf"], path) or ""
    out: list[tuple[str, list[str]]] = []
    kind, in_symtab = "", False
    for line in text.splitlines():
        if line.startswith("Fatbin "):
            kind = line.split()[1]  # "elf" or "ptx"
        elif line.startswith("arch = ") and kind == "elf":
            out.append((line.split("=", 1)[1].strip(), []))
        elif line.startswith(".section"):
            in_symtab = kind == "elf" and line.split()[1] == ".symtab"
        elif in_symtab and out:
            cols = line.split()
            # Num Value Size Type Bind Vis Other Ndx Name
            if len(cols) == 9 and cols[4] in ("GLOBAL", "WEAK") and cols[7] == "0":
                out[-1][1].append(cols[8])
    return out


def decoded_sass(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    lib = scan_file(str(path))
    assert not lib.problems, lib.problems
    return [(e.target, e.unresolved) for c in lib.containers for e in c.entries if e.kind == "sass"]


@needs_cuobjdump
@pytest.mark.parametrize(
    "path, calls",
    [
        (SMOKE_BIN / "rdc_ext.fatbin", [("sm_90", ("_Z10rdc_helperf",))]),
        (SMOKE_BIN / "rdc_self.fatbin", [("sm_90", ())]),
        (CUDA_BIN / "rdc_b.o", [("sm_80", ("_Z5scalef",))]),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_a_decoded_relocatable_cubin_names_what_it_calls_without_carrying(path, calls):
    """The default decode reads each cubin's undefined symbols, less those the driver supplies:
    cuobjdump lists the same symbols undefined in the same cubin."""
    assert decoded_sass(path) == calls
    listed = [
        (arch, tuple(s for s in syms if not s.startswith(DRIVER_SUPPLIED))) for arch, syms in cuobjdump_undefined(path)
    ]
    assert listed == calls


@needs_cuobjdump
def test_a_device_linked_library_keeps_its_relocatable_objects_unresolved_calls():
    """lib_rdc.so: nvlink resolved `scale` in the device-link cubin (.nv_fatbin), while the
    relocatable rdc_b object it keeps in __nv_relfatbin still names it."""
    lib = scan_file(str(CUDA_BIN / "lib_rdc.so"))
    assert not lib.problems, lib.problems
    by_role = sorted((c.role, e.unresolved) for c in lib.containers for e in c.entries if e.kind == "sass")
    assert by_role == [("device-link", ()), ("relocatable", ()), ("relocatable", ("_Z5scalef",))]
    listed = sorted(
        tuple(s for s in syms if not s.startswith(DRIVER_SUPPLIED))
        for _, syms in cuobjdump_undefined(CUDA_BIN / "lib_rdc.so")
    )
    assert listed == sorted(u for _, u in by_role)


def test_the_unresolved_call_is_what_makes_the_cubin_not_loadable_alone():
    """What smoke's device-load predicts from it, and the H200 answered (CUDA_ERROR_NOT_FOUND):
    rdc_ext.fatbin is not loadable alone and the reason names the missing function;
    rdc_self.fatbin loads natively."""
    (ext,) = scan_file(str(SMOKE_BIN / "rdc_ext.fatbin")).containers
    p = P.predict(ext, H200)
    assert p.outcome is P.Outcome.NOT_LOADABLE and p.codes == {P.INVALID_IMAGE, P.NOT_FOUND}
    assert "calls _Z10rdc_helperf without carrying it" in p.reason
    (own,) = scan_file(str(SMOKE_BIN / "rdc_self.fatbin")).containers
    assert P.predict(own, H200).outcome is P.Outcome.NATIVE


@pytest.mark.parametrize(
    "args, rc, codes",
    [
        # a bare fatbin has no linker: the cubin the H200 refuses alone (500) covers nothing (G013);
        # the relocatable cubin that carries what it calls loads (0) and covers its GPU
        (["--arch", "sm_90", str(SMOKE_BIN / "rdc_ext.fatbin")], 1, ["G013"]),
        (["--arch", "sm_90", str(SMOKE_BIN / "rdc_self.fatbin")], 0, ["D002"]),
        ([str(SMOKE_BIN / "rdc_ext.fatbin")], 1, ["C001", "D002"]),
        # in __nv_relfatbin, relocatable objects are never coverage
        (["--arch", "sm_80", str(CUDA_BIN / "rdc_b.o")], 1, ["G001", "G006", "G007"]),
    ],
    ids=["ext-claimed", "self-claimed", "ext-no-claim", "rdc_b.o"],
)
def test_what_check_reports_for_relocatable_code(capsys, args, rc, codes):
    got = main(["check", "-q", "--format", "json", "--no-config", *args])
    report = json.loads(capsys.readouterr().out)
    found = sorted({f["code"] for t in report["targets"] for f in t["findings"]})
    assert (got, found) == (rc, codes), report["findings"]


# ---- decoding into a worker's buffer: the same answers as the general path -----------------------------


def libraries_compared(name: str) -> tuple[Library, Library]:
    """The library scanned with a decode pool (payloads decoded into each worker's DecodeBuffer)
    and without one (each payload decoded on its own)."""
    path = CUDA_BIN / name
    data = path.read_bytes()

    def chunks() -> Iterator[bytes]:
        yield data

    with decode.DecodePool(1) as pool:
        pooled = scan_stream(name, len(data), chunks, pool=pool)
    return pooled, scan_stream(name, len(data), chunks)


@pytest.mark.parametrize(
    "name", ["lib_cmp_speed_all.so", "lib_cmp_size_all.so", "lib_cmp_balance.so", "lib_cmp_speed.so"]
)
def test_nvccs_compressed_entries_decode_the_same_into_a_buffer(name):
    """nvcc's -compress-mode (speed: LZ4, size and balance: zstd) and -compress-all: every entry
    decodes to the same kernels, toolkit and target with the pool's buffers as without."""
    pooled, alone = libraries_compared(name)
    assert not alone.problems and pooled == alone
    assert {e.compression for e in alone.entries} - {"none"}, [e.compression for e in alone.entries]
    assert all(e.decoded and e.kernels is not None for e in alone.entries)


def test_a_buffered_decode_is_bounded_and_placed_like_the_general_one():
    """kern_sm80.cubin in a zstd frame that states its size (the buffered path) and in one that does
    not (the general path): the same bytes; past the caller's bound, or cut short, the same E012
    at the entry's offset."""
    h, sized = sass_entry(CUBIN, 80, zstd=True)
    assert zstandard.get_frame_parameters(sized).content_size == len(CUBIN)
    buffer = fatbin.DecodeBuffer()
    assert bytes(fatbin.decode_payload_into(h, sized, 777, len(CUBIN), buffer)) == CUBIN
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(CUBIN)
    hu, _ = sass_entry(CUBIN, 80, zstd=True)
    hu = replace(hu, compressed_size=len(unsized), payload_size=len(unsized))
    assert bytes(fatbin.decode_payload_into(hu, unsized, 777, len(CUBIN), buffer)) == CUBIN
    for header, payload, bound in (
        (h, sized, len(CUBIN) - 1),
        (h, sized[:-8], len(CUBIN)),
        (hu, unsized, len(CUBIN) - 1),
    ):
        with pytest.raises(FatbinError) as general:
            fatbin.decode_payload(header, payload, 777, bound)
        with pytest.raises(FatbinError) as buffered:
            fatbin.decode_payload_into(header, payload, 777, bound, buffer)
        assert (
            (buffered.value.code, buffered.value.offset) == (general.value.code, general.value.offset) == ("E012", 777)
        ), (general.value.message, buffered.value.message)
