"""Real Windows wheels against the Linux wheels of the same release.

Wherever the two builds ship the same device code, the Windows wheel's inventory equals the
Linux wheel's entry for entry: the same libraries with device code, the same containers
(each a multiset of entries with the same kind, target, code version, toolkit, identifier
and debug flag) and, per target, the same kernels. What differs is asserted below, each
with its cause (measured on these releases):

- Kernel names follow the host ABI: Windows is LLP64, so `size_t`, `int64_t`, `uint64_t`
  are `unsigned long long` / `long long` (Itanium codes `y`, `x`) where Linux (LP64) has
  `unsigned long` / `long` (`m`, `l`); anonymous namespaces carry a hash of the source
  path (`_GLOBAL__N__fadb9fe9_...`); CCCL's versioned namespaces list the architectures a
  translation unit was built for (`cub::CUB_300001_SM_750_800_860_890_1200`). Names are
  compared with all three normalised.
- Byte sizes and compression are packaging, not coverage: the cubins of an LLP64 build
  differ in size, and curand's Windows build compresses its SASS (zstd) where the Linux
  one leaves it raw. They are not compared.
- Roles: curand64_10.dll registers nvlink's container through a version-2 wrapper record
  in `.nvFatBi`, so it is "device-link"; libcurand.so.10 has no wrapper for it (10 records
  for 11 containers), so there it is "executable".
- Entry identifiers name the compiled source with the build's own directory (catboost's
  `D:/a/catboost/...` on Windows, `/src/catboost/...` on Linux): compared by their last four
  path components.
- Genuine build differences, asserted exactly (EXPECTED below).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter

import pytest

from archaudit.cli import main
from archaudit.model import Library
from archaudit.read.artifacts import inventory
from reference_tools import missing_tool
from wheels import extract_member, fetch

WINDOWS = "win_amd64"


def _library_key(path: str) -> str:
    """nvidia/cu13/bin/x86_64/cublasLt64_13.dll ~ nvidia/cu13/lib/libcublasLt.so.13;
    cupy/cuda/cub.cp312-win_amd64.pyd ~ cupy/cuda/cub.cpython-312-x86_64-linux-gnu.so;
    catboost/_catboost.pyd ~ catboost/_catboost.so (a module without its ABI tag)."""
    folder, _, base = path.rpartition("/")
    if base.endswith(".pyd") or ".cpython-" in base or (base.endswith(".so") and not base.startswith("lib")):
        return folder + "/" + base.split(".")[0]
    base = re.sub(r"^lib", "", base).split(".")[0]
    return re.sub(r"64(_\d+)*$", "", base)


def _skip_identifiers(name: str, pattern: str, replacement: str) -> str:
    """Replace each length-prefixed identifier that starts with `pattern` (its length digits
    in group 1) by `replacement`."""
    out, i = [], 0
    for m in re.finditer(r"(\d+)" + pattern, name):
        if m.start() < i:
            continue
        out += [name[i : m.start()], replacement]
        i = m.end(1) + int(m.group(1))
    return "".join(out) + name[i:]


_LP64 = str.maketrans("yx", "ml")


def kernel_key(name: str) -> str:
    """A kernel name as an LP64 build spells it, without the anonymous-namespace hash and
    without CCCL's versioned namespaces (`cub::CUB_300001_SM_750_800_..._1200`,
    `thrust::THRUST_300001_SM_...`), which list the architectures of the translation unit's
    build."""
    name = _skip_identifiers(name, "_GLOBAL__N_", "(anonymous)")
    name = _skip_identifiers(name, r"(?:CUB|THRUST|_V)_\d+_SM_", "(cccl)")
    return name.translate(_LP64)


def _entry_key(e) -> tuple:
    return (e.kind, e.target, e.code_version, e.toolkit, _source_key(e.identifier), e.debug)


def _source_key(identifier: str) -> str:
    """An entry identifier (the source file nvcc compiled) without the build's own directory
    (catboost: D:/a/catboost/catboost/catboost/... on Windows, /src/catboost/... on Linux): its
    last four path components."""
    return "/".join(identifier.replace("\\", "/").split("/")[-4:])


def _containers(lib: Library) -> Counter:
    return Counter(tuple(sorted(_entry_key(e) for e in c.entries)) for c in lib.containers)


def _targets(lib: Library) -> Counter:
    return Counter((e.kind, e.target) for e in lib.entries)


def _kernels_by_target(lib: Library) -> dict[tuple[str, str], Counter]:
    out: dict[tuple[str, str], Counter] = {}
    for e in lib.entries:
        out.setdefault((e.kind, e.target), Counter()).update(kernel_key(k) for k in e.kernels or ())
    return out


# (project, version, tier: "" the fast tier, "slow" the real-wheel tier, "census" a pair over wheels.TIER_BYTES)
PAIRS = [
    ("nvidia-curand", "10.4.0.35", ""),
    ("nvidia-cublas", "13.1.1.3", "census"),
    ("cupy-cuda12x", "14.2.0", "census"),
    ("onnxruntime-gpu", "1.31.1", "census"),
    ("nvidia-cufft", "12.5.0.14", "census"),
    ("nvidia-cusparse", "12.9.4.2", "census"),
    # MSVC's layout (pe.msvc_slack, 32-byte wrapper records): 76 containers, E011 before
    ("catboost", "1.2.10", "slow"),
]
EXPECTED = {
    # One cuBLASLt translation unit (cask_cublas::nopHardwareDetection) is built without
    # sm_103 for Windows.
    ("nvidia-cublas", "cublasLt"): {("sass", "sm_103"): -1},
    # onnxruntime-gpu's Windows CUDA provider is built with another architecture list:
    # fewer sm_90a and sm_120a cubins, PTX for compute_120 in 38 containers instead.
    # Its whole cubins outside any container (loaded by the provider itself, read since whole
    # cubins are searched): 119 in the Windows DLL, 114 in the Linux library, the 5 more all
    # sm_86 (22 against 17), measured.
    ("onnxruntime-gpu", "onnxruntime_providers_cuda"): {
        ("sass", "sm_90a"): -310,
        ("sass", "sm_120a"): -38,
        ("ptx", "sm_120"): 38,
        ("sass", "sm_86"): 5,
    },
}
# (project, library) -> (kernel names only the Windows build has, only the Linux build has),
# over the targets both builds ship alike.
KERNELS = {
    # cuSPARSE's host ABI shows in its templates: LLP64 picks other types and sizes
    # (`cusparse::binary_search_lb_offset_kernel<..., 10328, ..., longlong2>` on Windows where
    # Linux has `long2` and other sizes), and CCCL takes other code paths under MSVC
    # (`cub::DeviceFor::__op_wrapper_t` where Linux has `cub::detail::op_wrapper_t`).
    ("nvidia-cusparse", "cusparse"): (41, 77)
}
ROLES = {
    ("nvidia-curand", "curand"): ({"device-link": 1, "executable": 10}, {"executable": 11}),
    ("onnxruntime-gpu", "onnxruntime_providers_cuda"): (
        {"cubin": 119, "executable": 607},
        {"cubin": 114, "executable": 609},
    ),
}


@pytest.fixture(scope="module")
def pairs():
    cache: dict[str, tuple[dict[str, Library], dict[str, Library]]] = {}

    def get(name: str, version: str):
        if name not in cache:
            win = inventory(str(fetch(name, version, WINDOWS)), decode=True)
            lin = inventory(str(fetch(name, version)), decode=True)
            assert not win.problems and not lin.problems
            cache[name] = tuple(  # type: ignore[assignment]
                {_library_key(lib.path): lib for lib in inv.libraries if lib.containers or lib.problems}
                for inv in (win, lin)
            )
        return cache[name]

    return get


@pytest.mark.parametrize(
    "name,version", [pytest.param(n, v, marks=[getattr(pytest.mark, tier)] if tier else []) for n, v, tier in PAIRS]
)
def test_windows_wheel_inventories_like_the_linux_wheel(pairs, name, version):
    win, lin = pairs(name, version)
    assert win and set(win) == set(lin)
    for key in win:
        w, lx = win[key], lin[key]
        assert w.format == "pe" and lx.format == "elf"
        assert not w.problems and not lx.problems, (key, w.problems[:3], lx.problems[:3])
        expected = EXPECTED.get((name, key), {})
        difference = Counter(_targets(w))
        difference.subtract(_targets(lx))
        assert {t: n for t, n in difference.items() if n} == expected, key
        if not expected:  # the same containers, entry for entry
            assert _containers(w) == _containers(lx), key
        kw, kl = _kernels_by_target(w), _kernels_by_target(lx)
        only_w, only_l = set(), set()
        for target in kw:
            if target not in expected:  # the same device code: the same kernels
                only_w |= set(kw[target] - kl[target])
                only_l |= set(kl[target] - kw[target])
        assert (len(only_w), len(only_l)) == KERNELS.get((name, key), (0, 0)), (key, sorted(only_w)[:3])
        roles_w = dict(Counter(c.role for c in w.containers))
        roles_l = dict(Counter(c.role for c in lx.containers))
        assert (roles_w, roles_l) == ROLES.get((name, key), (roles_l, roles_l)), key


def test_cuda_runtime_wheels_carry_no_device_code_and_name_their_imports(tmp_path):
    """nvidia-cuda-runtime: cudart carries no device code on either platform; the DLL's
    imports are what binutils lists, and not the driver (cudart loads nvcuda.dll itself)."""
    wheel = fetch("nvidia-cuda-runtime", "13.5.37", WINDOWS)
    win, lin = inventory(str(wheel)), inventory(str(fetch("nvidia-cuda-runtime", "13.5.37")))
    assert [lib.format for lib in win.libraries] == ["pe"] and [lib.format for lib in lin.libraries] == ["elf"]
    for lib in win.libraries + lin.libraries:
        assert not lib.containers and not lib.problems
    dll = win.libraries[0]
    assert dll.path.endswith("cudart64_13.dll") and "nvcuda.dll" not in dll.needed
    tool = shutil.which("objdump")
    if tool is None:
        missing_tool("objdump")
    out = subprocess.run(
        [tool, "-p", str(extract_member(wheel, dll.path, tmp_path))], capture_output=True, text=True
    ).stdout
    if "pei-x86-64" not in out:
        missing_tool("objdump", "this objdump does not read PE")
    assert list(dll.needed) == re.findall(r"DLL Name: (\S+)", out)


def test_curand_dll_layout_as_measured():
    """The facts issue 17 starts from: .nv_fatb of raw size 0xf58400 holding 11 containers."""
    lib = next(
        lib
        for lib in inventory(str(fetch("nvidia-curand", "10.4.0.35", WINDOWS))).libraries
        if lib.path.endswith("curand64_10.dll")
    )
    assert {c.section for c in lib.containers} == {".nv_fatb"} and len(lib.containers) == 11
    assert sum(c.size for c in lib.containers) + 8 * 8 == 0xF58288  # virtual size; 8-byte pads


def test_check_judges_the_windows_curand_wheel_as_the_linux_one(capsys):
    """The same verdict and the same findings (code and library, Windows names mapped to
    Linux ones) under the same claim."""

    def judged(wheel) -> tuple[int, list[tuple[str, str]]]:
        rc = main(["check", "-q", "--no-config", "--format", "json", str(wheel), "--arch", "75;80;90;100;120"])
        report = json.loads(capsys.readouterr().out)
        return rc, sorted(
            (f["code"], _library_key(f["subject"]) if f["subject"].endswith((".dll", ".10")) else "wheel")
            for t in report["targets"]
            for f in t["findings"]
        )

    assert judged(fetch("nvidia-curand", "10.4.0.35", WINDOWS)) == judged(fetch("nvidia-curand", "10.4.0.35"))


def test_a_macos_wheel_without_device_code_is_a_cpu_wheel(capsys):
    """zstandard's arm64 macOS wheel: two Mach-O extension modules, no device code."""
    wheel = fetch("zstandard", "0.23.0", "macosx_11_0_arm64")
    libs = inventory(str(wheel)).libraries
    assert len(libs) == 2 and all(lib.format == "macho" and not lib.problems and not lib.containers for lib in libs)
    assert main(["check", "--no-config", str(wheel)]) == 0
    assert "CPU wheel" in capsys.readouterr().out


def test_a_cuda_11_windows_wheel_is_judged_by_cuda_11(capsys):
    """bitsandbytes 0.50.2 win_amd64: libbitsandbytes_cuda118.dll imports cudart64_110.dll, the
    runtime of every CUDA 11.x (nvidia-cuda-runtime-cu11 11.8.89 ships that name). It was read as
    CUDA 110: G012 'no driver can run there', G009 on a GTX 1080, D001 'no driver floor is known'."""
    name = "bitsandbytes/libbitsandbytes_cuda118.dll"
    wheel = str(fetch("bitsandbytes", "0.50.2", WINDOWS))
    lib = next(x for x in inventory(wheel).libraries if x.path == name)
    assert "cudart64_110.dll" in lib.needed
    main(
        [
            "check",
            "-q",
            "--format",
            "json",
            "--no-config",
            wheel,
            "--arch",
            "75;80;86;89;90",
            "--gpu",
            "GTX 1080",
            "--driver",
            "537.13",
        ]
    )
    found = [f for t in json.loads(capsys.readouterr().out)["targets"] for f in t["findings"] if f["subject"] == name]
    assert {f["code"] for f in found if f["severity"] == "error"} == set(), found
    assert [f["data"]["runs"] for f in found if f["code"] == "G008"] == ["native"]


def test_a_32_bit_dll_beside_the_64_bit_one_is_host_code():
    """nvidia-cuda-runtime-cu11 11.8.89 win_amd64 ships cudart32_110.dll (PE32) beside
    cudart64_110.dll: read by its own layout it holds no device code (census triage T2: it was
    E020, exit 1, for a wheel with no device code at all)."""
    inv = inventory(str(fetch("nvidia-cuda-runtime-cu11", "11.8.89", WINDOWS)))
    libs = {lib.path.rsplit("/", 1)[-1]: lib for lib in inv.libraries}
    assert {"cudart32_110.dll", "cudart64_110.dll"} <= set(libs)
    assert not libs["cudart32_110.dll"].problems and not libs["cudart32_110.dll"].containers


@pytest.mark.parametrize(
    "name, version, member, runtimes",
    [
        ("nvidia-cuda-runtime-cu12", "12.4.127", "cudart64_12.dll", ("12.4",)),  # the runtime itself
        ("nvidia-cuda-runtime-cu11", "11.8.89", "cudart64_110.dll", ("11.8",)),
        ("nvidia-cuda-runtime-cu11", "11.8.89", "cudart32_110.dll", ()),  # x86 code: no needle
        # CUDA 13.5's runtime DLL holds no version record: it forwards to the driver's
        # nvcudart_hybrid64.dll
        ("nvidia-cuda-runtime", "13.5.37", "cudart64_13.dll", ()),
        ("xformers", "0.0.35", "_C.pyd", ()),  # imports cudart64_12.dll, links no runtime
    ],
)
def test_the_cuda_runtime_version_is_read_from_msvc_code(name, version, member, runtimes):
    """The version a CUDA runtime returns, read from the MSVC x64 code of a Windows library
    (records.RUNTIME_MARKER_PE): the runtime DLL's own release, and nothing where no runtime's
    code is (a DLL that imports cudart, a forwarding DLL, 32-bit code)."""
    inv = inventory(str(fetch(name, version, WINDOWS)), decode=False)
    (library,) = [lib for lib in inv.libraries if lib.path.endswith("/" + member)]
    assert library.format == "pe" and library.runtimes == runtimes


NVJPEG_AARCH64 = "nvidia_nvjpeg_cu12-12.4.0.76-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl"


def test_a_static_runtime_in_a_dll_reads_as_in_the_linux_library():
    """nvjpeg64_12.dll of nvidia-nvjpeg-cu12 12.4.0.76 (CUDA 12.9's nvJPEG) imports no cudart:
    it carries the CUDA 12.9 runtime, as libnvjpeg.so.12 of the same release does (its aarch64
    wheel, a census wheel of the fast tier)."""
    win = inventory(str(fetch("nvidia-nvjpeg-cu12", "12.4.0.76", WINDOWS)), decode=False).libraries
    lin = inventory(str(fetch("nvidia-nvjpeg-cu12", "12.4.0.76", filename=NVJPEG_AARCH64)), decode=False).libraries
    (dll,) = [lib for lib in win if lib.path.endswith("/nvjpeg64_12.dll")]
    (so,) = [lib for lib in lin if lib.path.endswith("/libnvjpeg.so.12")]
    assert not any("cudart" in name.lower() for name in dll.needed)
    assert dll.runtimes == so.runtimes == ("12.9",)
