"""archaudit.judge.rules.common: what the rules share to say a finding: kernel names made
readable, counted and listed, the code a library carries in one notation, kernels grouped by how
they fail, and the configuration entry a finding asks for; on the kernels of the nvcc-built
fixtures (tests/fixtures/cuda/build.sh)."""

from __future__ import annotations

import re
import shutil
import subprocess

from archaudit.gpus.selection import nv_codes
from archaudit.judge.rules.common import (
    Group,
    count_phrase,
    demangle,
    dotted,
    fail_verb,
    groups,
    kernels_phrase,
    library_entry,
    possessive,
    present_codes,
)
from archaudit.model import Library
from archaudit.read.library import scan_file
from helpers import CUDA_BIN
from reference_tools import needs_tool


def fixture(name: str) -> Library:
    return scan_file(str(CUDA_BIN / name), name.rsplit("/", 1)[-1])


def kernels(lib: Library) -> list[str]:
    return sorted({k for e in lib.entries for k in e.kernels or ()})


@needs_tool("c++filt", shutil.which("c++filt"))
def test_a_kernel_is_shown_by_the_qualified_name_cxxfilt_gives_it():
    """Every kernel of every fixture library: the name c++filt demangles, without its return
    type, template arguments and parameters (`void GemmKernel<cutlass::arch::Sm80>(float*, int)`
    is GemmKernel; extern "C" names stay as they are)."""
    names = sorted({k for f in [*CUDA_BIN.glob("*.so"), *CUDA_BIN.glob("*/*.so*")] for k in kernels(fixture(f.name))})
    assert len(names) > 20 and any(n.startswith("_ZN") for n in names) and any(not n.startswith("_Z") for n in names)
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    for name, plain in zip(names, out.splitlines()):
        assert demangle(name) == re.split(r"[<(]", plain.removeprefix("void "))[0], name


def test_a_name_that_does_not_read_as_mangled_is_shown_as_it_is():
    assert demangle("rdc_needs_helper") == "rdc_needs_helper"
    assert demangle("_Z99999999999x") == "_Z99999999999x"  # no identifier is that long


def test_kernels_are_counted_and_the_first_few_names_listed():
    """lib_many.so: fill, add_c and scale<float>, scale<double> (two kernels of one name)."""
    many = kernels(fixture("lib_many.so"))
    assert kernels_phrase(many, 0) == "4 kernels (add_c, fill, scale)" and count_phrase(many, 0) == "4 kernels"
    assert kernels_phrase(many[:1], 0) == "1 kernel (fill)" and (fail_verb(many[:1]), possessive(many[:1])) == (
        "fails",
        "its",
    )
    assert (fail_verb(many), possessive(many)) == ("fail", "their")
    thrust = kernels(fixture("lib_thrust_layernorm.so"))
    assert kernels_phrase(thrust, 0).endswith(", ...)") and kernels_phrase(thrust, 0).startswith(
        f"{len(thrust)} kernels ("
    )
    assert kernels_phrase(None, 2) == count_phrase(None, 2) == "2 containers without identifiable kernels"
    assert (fail_verb(None), possessive(None)) == ("fail", "their")


def test_the_code_a_library_carries_is_listed_in_numeric_order_sass_first():
    codes = nv_codes(fixture("lib_multi.so").entries)
    assert present_codes(codes) == [
        "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "compute_90", "compute_120"
    ]  # fmt: skip
    assert present_codes(nv_codes(fixture("lib_ptx90a.so").entries)) == ["compute_90a"]


def test_claim_labels_read_as_compute_capabilities():
    assert dotted(["75", "90", "100", "120a", "gfx942"]) == "7.5, 9.0, 10.0, 120a, gfx942"


def test_the_library_entry_names_the_library_by_its_file_name():
    entry = library_entry("torch/lib/gpu_example-1.0-py3-none-linux_x86_64.whl!gpu_example/libkernels.so", ["80", "90"])
    assert entry == '[[tool.archaudit.library]] path = "libkernels.so" arch = "80;90" reason = "<file:line>"'


def test_kernels_failing_the_same_way_are_one_group_largest_first():
    many = kernels(fixture("lib_many.so"))
    Item = tuple[tuple[str, ...], tuple[str, ...], str | None, frozenset[int]]
    items: list[Item] = [(("sm_80",), ("90",), k, frozenset({1})) for k in many[:3]]
    items += [(("sm_80", "sm_90"), ("100",), many[3], frozenset({2}))]
    items += [(("sm_80",), ("90",), None, frozenset({3})), (("sm_80",), ("90",), None, frozenset({4}))]
    assert groups(items) == [
        Group(("sm_80",), ("90",), tuple(many[:3]), 1),
        Group(("sm_80",), ("90",), None, 2),
        Group(("sm_80", "sm_90"), ("100",), (many[3],), 1),
    ]


def test_capitalised_upper_cases_the_first_letter_and_keeps_the_rest():
    """Unlike str.capitalize, a kernel's name in the phrase keeps its case."""
    from archaudit.judge.rules.common import capitalised

    assert capitalised("3 kernels (_GLOBAL__N_::Fwd)") == "3 kernels (_GLOBAL__N_::Fwd)"
    assert capitalised("kernels (mulKernel)") == "Kernels (mulKernel)"
    assert capitalised("") == ""
