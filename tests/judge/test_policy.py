"""archaudit.judge.policy: the policy one target is judged by (its wheel's platform tags and
driver table) and the configuration entries that match libraries by their paths.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from archaudit import config
from archaudit.claims import parse_claim
from archaudit.judge.policy import (
    DataMember,
    LibraryClaim,
    LibraryGroup,
    Policy,
    arm_linux,
    for_target,
    kernel_claim,
    library_claim,
    package_name,
    wheel_driver_os,
    wheel_platforms,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "src" / "archaudit" / "examples" / "gpu_example-1.0-py3-none-linux_x86_64.whl"
CUBLAS = "nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"


@pytest.mark.parametrize(
    "name,os_name",
    [
        ("k-1.0-cp312-cp312-win_amd64.whl", "windows"),
        ("k-1.0-cp312-cp312-win_arm64.whl", "windows"),
        ("dist/k-1.0-1-py3-none-win32.whl", "windows"),
        ("C:\\wheels\\k-1.0-cp312-cp312-WIN_AMD64.whl", "windows"),
        ("k-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "linux"),
        ("k-1.0-cp312-cp312-musllinux_1_2_aarch64.whl", "linux"),
        ("k-1.0-cp312-cp312-linux_x86_64.whl", "linux"),
        ("k-1.0-cp312-cp312-macosx_11_0_arm64.whl", None),
        ("k-1.0-py3-none-any.whl", None),
        ("k-1.0-cp312-cp312-win_amd64.manylinux_2_28_x86_64.whl", None),  # a mix: no guess
        ("win_amd64.whl", None),  # not a wheel name
        ("k-1.0-cp312-cp312-win_amd64.zip", None),
    ],
)
def test_wheel_driver_os_from_the_platform_tag(name, os_name):
    assert wheel_driver_os(name) == os_name


def test_an_explicit_driver_os_wins_over_the_tag():
    win = "k-1.0-cp312-cp312-win_amd64.whl"
    assert for_target(Policy(), win, "wheel").driver_os == "windows"
    assert for_target(Policy(driver_os="linux", driver_os_given=True), win, "wheel").driver_os == "linux"
    assert (
        for_target(
            Policy(driver_os="windows", driver_os_given=True), "k-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "wheel"
        ).driver_os
        == "windows"
    )
    assert for_target(Policy(), "kernels-win_amd64", "directory").driver_os == "linux"  # only wheels have tags


def test_a_wheel_is_judged_with_its_own_platform_tags_and_nothing_else_is():
    policy = for_target(Policy(), f"dist/{CUBLAS}", "wheel")
    assert policy.platforms == ("manylinux2014_x86_64", "manylinux_2_17_x86_64") == wheel_platforms(CUBLAS)
    assert policy.driver_os == "linux"
    assert for_target(Policy(), "site-packages/nvidia/cublas", "directory") == Policy()
    assert wheel_platforms("libcublas.so.12") == ()


def test_the_package_name_is_the_distributions_or_the_wheels():
    assert package_name(CUBLAS) == "nvidia-cublas-cu12"
    assert package_name("site-packages/torch", "torch-2.5.1") == "torch"
    assert package_name("libcublas.so.12") == ""


@pytest.mark.parametrize(
    "platforms, installs",
    [
        (("manylinux2014_aarch64", "manylinux_2_17_aarch64"), True),
        (("linux_aarch64",), True),
        (("any",), True),
        (("manylinux2014_x86_64", "manylinux_2_17_x86_64"), False),
        (("macosx_11_0_arm64",), False),
        (("win_arm64",), False),
        ((), False),
    ],
)
def test_only_aarch64_linux_and_pure_wheels_install_on_a_jetson(platforms, installs):
    assert arm_linux(platforms) is installs


def test_the_projects_data_entry_sets_aside_the_example_wheel_and_what_it_holds():
    """archaudit's own [[tool.archaudit.data]] entry names the example wheel; the libraries inside
    that nested wheel are listed as `wheel!member` and are set aside with it."""
    (row,) = config.load(str(ROOT / "pyproject.toml")).values["data"]
    data = DataMember(row["member"], row["reason"])
    wheel = f"archaudit/examples/{EXAMPLE.name}"
    inside = [f"{wheel}!{m}" for m in zipfile.ZipFile(EXAMPLE).namelist() if m.endswith(".so")]
    assert inside and data.matches(wheel) and all(data.matches(m) for m in inside)
    assert not data.matches("archaudit/_speedups.cpython-311-x86_64-linux-gnu.so")
    assert not data.matches("libkernels.so")  # a data glob is a path, never a bare file name


def test_a_library_entry_matches_by_path_member_or_file_name_and_the_first_wins():
    nested = f"torch/lib/{EXAMPLE.name}!gpu_example/libkernels.so"
    by_name = LibraryClaim("libkernels.so", parse_claim("80", "library"), "kernels.py:12")
    by_member = LibraryClaim("torch/lib/*.whl", parse_claim("90", "library"), "loader.py:3")
    assert by_name.matches(nested) and by_name.matches("gpu_example/libkernels.so")
    assert by_member.matches(nested) and not by_member.matches("gpu_example/libkernels.so")
    policy = Policy(library_claims=(by_member, by_name))
    assert library_claim(policy, nested) is by_member
    assert library_claim(policy, "gpu_example/libkernels.so") is by_name
    assert library_claim(policy, "gpu_example/libshim.so") is None
    assert by_name.describe() == "library libkernels.so arch 80 (kernels.py:12)"


def test_a_library_group_holds_every_library_one_of_its_globs_matches():
    """bitsandbytes ships one library per CUDA release, of which the host loads one."""
    group = LibraryGroup(("libbitsandbytes_cuda1*.so", "bitsandbytes/libbitsandbytes_cpu.so"), "cuda_setup/main.py")
    assert group.matches("bitsandbytes/libbitsandbytes_cuda118.so")
    assert group.matches("bitsandbytes/libbitsandbytes_cpu.so")
    assert not group.matches("bitsandbytes/libbitsandbytes_rocm62.so")
    assert group.describe() == (
        "library-group libbitsandbytes_cuda1*.so, bitsandbytes/libbitsandbytes_cpu.so (cuda_setup/main.py)"
    )


def test_a_kernel_entry_names_kernels_by_short_or_mangled_name_and_never_claims_the_library():
    """[[tool.archaudit.library]] with kernels: its globs match a kernel's qualified name without
    parameters or its mangled name; it is never the library's own claim (library_claim), only
    that of the kernels it names (kernel_claim)."""
    gate = LibraryClaim("lib_multiobj.so", parse_claim("80", "library"), "ops.py:7", ("mul",))
    mangled = LibraryClaim("lib_multiobj.so", parse_claim("80", "library"), "ops.py:7", ("_Z3mul*",))
    policy = Policy(library_claims=(gate,))
    assert gate.names_kernel("_Z3mulPfPKfS1_i") and not gate.names_kernel("_Z4axpyfPKfPfi")
    assert mangled.names_kernel("_Z3mulPfPKfS1_i") and not mangled.names_kernel("_Z4axpyfPKfPfi")
    assert library_claim(policy, "lib_multiobj.so") is None
    assert kernel_claim(policy, "lib_multiobj.so", "_Z3mulPfPKfS1_i") is gate
    assert kernel_claim(policy, "lib_multiobj.so", "_Z4axpyfPKfPfi") is None
    assert kernel_claim(policy, "libother.so", "_Z3mulPfPKfS1_i") is None
    assert gate.describe() == "library lib_multiobj.so kernels mul arch 80 (ops.py:7)"
