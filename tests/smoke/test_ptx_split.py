"""The split JIT's rewriting (archaudit.smoke.ptx_split), on an nvcc-built container.

The parts must together carry every kernel exactly once, each keep the module's header,
module-scope variables and device functions, and keep every other entry of the container as
it is. Where ptxas is on PATH, every part must compile for sm_90 on its own. On a GPU,
tests/smoke/test_smoke_gpu.py checks the driver's answer to each part.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from archaudit.read import fatbin
from archaudit.read.library import library_from_bytes
from archaudit.smoke import ptx_split as S

MULTI = Path(__file__).parents[1] / "fixtures" / "smoke" / "bin" / "multi_ptx90.fatbin"
KERNELS = {"_Z9multi_onePf", "_Z9multi_twoPf", "multi_three", "multi_four"}


def entries(image: bytes) -> list[tuple[str | None, str, bytes]]:
    """(kind, target, decoded payload) of each entry."""
    out: list[tuple[str | None, str, bytes]] = []
    for at, h in S._entries(image):
        payload = fatbin.decode_payload(h, image[at + h.header_size : at + h.total], at)
        out.append((h.kind, h.target, payload.rstrip(b"\0")))
    return out


def test_parts_share_out_the_kernels_and_keep_everything_else():
    image = MULTI.read_bytes()
    parts = S.part_containers(image, 3)
    assert len(parts) == 3
    whole = entries(image)
    seen: list[str] = []
    for part in parts:
        got = entries(part)
        assert [(k, t) for k, t, _ in got] == [(k, t) for k, t, _ in whole] == [("sass", "sm_80"), ("ptx", "sm_90")]
        assert got[0] == whole[0]  # the SASS entry is untouched
        ptx = got[1][2]
        assert ptx.startswith(whole[1][2][: ptx.find(b".global")])  # same header
        assert b".global .align 4 .b8 scale[16]" in ptx
        assert b"_Z11shared_stepf(" in ptx
        names = re.findall(rb"\.entry (\w+)", ptx)
        assert names
        seen += [n.decode() for n in names]
        lib = library_from_bytes("part.fatbin", part)  # archaudit reads the part as nvcc's own
        assert not lib.problems
        assert set(lib.containers[0].entries[1].kernels or ()) == {n.decode() for n in names}
    assert sorted(seen) == sorted(KERNELS)


def test_one_part_is_the_container_unchanged_but_uncompressed():
    image = MULTI.read_bytes()
    (part,) = S.part_containers(image, 1)
    assert entries(part) == entries(image)
    assert len(part) > len(image)  # the PTX is stored uncompressed


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_every_part_compiles_alone_for_sm_90(tmp_path):
    for k, part in enumerate(S.part_containers(MULTI.read_bytes(), 4)):
        ptx = tmp_path / f"part{k}.ptx"
        ptx.write_bytes(entries(part)[1][2])
        run = subprocess.run(
            ["ptxas", "-arch=sm_90", "-o", str(tmp_path / f"part{k}.cubin"), str(ptx)], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr


def test_braces_and_entries_in_comments_and_strings_do_not_count():
    text = (
        b".version 9.0\n.target sm_90\n.address_size 64\n// .entry fake() {\n/* } .entry no { */\n"
        b'.file 1 "a{b.entry"\n.extern .func f();\n'
        b"\t// .globl\tk1\n.visible .entry k1()\n{\n\t{ .reg .b32 a; }\n\tret;\n}\n"
        b".entry k2() .maxntid 32, 1, 1\n{\n\tret;\n}\n.entry k3();\n"
    )
    spans = S.entry_spans(text)
    assert [text[a:b] for a, b in spans] == [
        b"\t// .globl\tk1\n.visible .entry k1()\n{\n\t{ .reg .b32 a; }\n\tret;\n}\n",
        b".entry k2() .maxntid 32, 1, 1\n{\n\tret;\n}\n",
    ]
    one, two = S.split(text, 2)
    for part in (one, two):
        assert part.startswith(b".version 9.0\n.target sm_90\n.address_size 64\n// .entry fake() {\n")
        assert part.endswith(b".entry k3();\n")  # a declaration without a body stays in every part
    assert (b"k1()" in one) != (b"k1()" in two) and (b"k2()" in one) != (b"k2()" in two)


@pytest.mark.parametrize("text", [b".entry k()\n{\n ret;\n", b".entry k()\n{\n}\n}\n", b".entry k()"])
def test_unbalanced_ptx_is_not_split(text):
    with pytest.raises(S.NotSplittable):
        S.entry_spans(text)


def test_with_two_ptx_entries_each_part_carries_the_same_share_of_both():
    image = MULTI.read_bytes()
    (_, sass), (at, ptx) = S._entries(image)
    doubled = image[16:] + image[at : at + ptx.total]
    two = fatbin.CONTAINER_HEADER.pack(0xBA55ED50, 1, 16, len(doubled)) + doubled
    parts = S.part_containers(two, 2)
    assert len(parts) == 2
    for part in parts:
        got = entries(part)
        assert [k for k, _, _ in got] == ["sass", "ptx", "ptx"] and got[1] == got[2]


def test_more_parts_than_kernels_gives_one_part_per_kernel():
    assert len(S.part_containers(MULTI.read_bytes(), 16)) == 4


def test_a_container_without_ptx_is_not_split():
    (sass_only,) = [p for p in (Path(__file__).parents[1] / "fixtures" / "smoke" / "bin").glob("rdc_self.fatbin")]
    with pytest.raises(S.NotSplittable):
        S.part_containers(sass_only.read_bytes(), 2)
