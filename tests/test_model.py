"""archaudit.model: what the inventory records say of themselves (the entries of a library, the
containers a loader reads, whether a container loads, the GPU runtime and device linker a
library names), on the nvcc-, clang- and MSVC-built fixtures as the readers record them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from archaudit.findings import Code
from archaudit.model import DEVICE_LINK, EXECUTABLE, RELOCATABLE, STANDALONE, Library, Problem
from archaudit.read.library import scan_file
from helpers import TESTS


def fixture(path: str) -> Library:
    return scan_file(str(TESTS / "fixtures" / path), path.rsplit("/", 1)[-1])


def test_a_librarys_entries_are_its_containers_entries_in_file_order():
    lib = fixture("cuda/bin/lib_multiobj_rdc.so")
    assert [c.role for c in lib.containers] == [DEVICE_LINK, EXECUTABLE, RELOCATABLE]
    assert lib.entries == tuple(e for c in lib.containers for e in c.entries)
    assert [e.target for e in lib.entries] == ["sm_80", "sm_80", "sm_90", "sm_90", "sm_80"]


def test_relocatable_code_is_the_one_container_the_runtime_never_loads():
    lib = fixture("cuda/bin/lib_rdc.so")
    assert [(c.role, c.loadable) for c in lib.containers] == [
        (DEVICE_LINK, True),
        (RELOCATABLE, False),
        (RELOCATABLE, False),
    ]
    (ext,) = fixture("smoke/bin/rdc_ext.fatbin").containers
    assert ext.role == STANDALONE and ext.loadable  # a bare fatbin is loaded whole by cuModuleLoad


def test_a_bare_fatbin_file_is_read_by_its_loader_up_to_its_first_container():
    """two_sm80_then_sm90.fatbin: cuModuleLoad reads the first container only (a kernel only in
    the second: 500 on an H100); every container of a library is registered."""
    two = fixture("cuda/bin/two_sm80_then_sm90.fatbin")
    first, second = two.containers
    assert two.format == "fatbin" and two.reachable == (first,) and two.unreachable == (second,)
    multi = fixture("cuda/bin/lib_multiobj.so")
    assert multi.reachable == multi.containers and multi.unreachable == ()
    (one,) = fixture("cuda/bin/kern.fatbin").containers
    assert fixture("cuda/bin/kern.fatbin").reachable == (one,)


@pytest.mark.parametrize(
    "path, runtime, device_code",
    [
        ("cuda/bin/lib_sm80.so", True, True),  # libcudart.so.13
        ("pe/bin/multi.dll", True, True),  # cudart64_13.dll
        ("cuda/bin/lib_host.so", False, False),
        ("amd/bin/hip_multi.so", False, True),  # clang-built without libamdhip64
    ],
)
def test_a_library_links_a_gpu_runtime_by_the_names_it_needs(path, runtime, device_code):
    lib = fixture(path)
    assert lib.links_gpu_runtime is runtime and lib.has_device_code is device_code


def test_the_runtime_is_named_the_same_whatever_the_case_of_a_windows_import():
    lib = fixture("cuda/bin/lib_host.so")
    assert replace(lib, needed=("CUDART64_12.DLL",)).links_gpu_runtime
    assert replace(lib, needed=("nvcuda.dll",)).links_gpu_runtime
    assert not replace(lib, needed=("libcudnn.so.9", "cublas64_12.dll")).links_gpu_runtime


def test_a_device_linker_is_one_the_library_links_or_names():
    """librdc_linked.so looks nvJitLinkCreate up by name (as cuSPARSE 12.9 does); with
    libnvJitLink in its DT_NEEDED it links one; librdc_unlinked.so shows none."""
    linked, unlinked = fixture("smoke/bin/librdc_linked.so"), fixture("smoke/bin/librdc_unlinked.so")
    assert linked.device_linker == "names nvJitLinkCreate" and unlinked.device_linker is None
    needs = replace(unlinked, needed=("libc.so.6", "libnvJitLink.so.13"))
    assert needs.device_linker == "links libnvJitLink.so.13"
    assert replace(linked, needed=("libnvJitLink.so.13",)).device_linker == "links libnvJitLink.so.13"


def test_a_folded_problem_stands_for_its_count_with_its_examples():
    lib = fixture("smoke/bin/ptx90_as100a.fatbin")
    (p,) = lib.problems
    assert p.code == Code.E014 and (p.count, p.examples) == (1, ())
    folded = p.folded(3, (p.message, "second"))
    assert (folded.code, folded.message, folded.offset) == (p.code, p.message, p.offset)
    assert (folded.count, folded.examples) == (3, (p.message, "second")) and isinstance(folded, Problem)
