"""archaudit.judge.rules.kernels: kernel by kernel, which GPUs a kernel cannot run on and why
(K001, K002, K003, K004), on libraries built by hand (builders in helpers.py), no reader
involved. The end-to-end cases on nvcc-built fixtures are in tests/judge/test_check_rules.py.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from archaudit.cli import main
from archaudit.findings import ERROR, INFO
from archaudit.model import PTX, SASS, Container, Entry, Library
from helpers import CUDA_BIN, KERN, box, codes, found, lib, ptx, report, sass, unread_sass, whole


def test_k001_a_kernel_whose_object_lacks_a_claimed_architecture():
    """lib_multiobj: mul.o built for sm_80 only, beside kern.o for sm_80 and sm_90."""
    rep = report(lib(KERN, box(sass("sm_80", "_Z3mulv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z3mulv"] and k.get("fails") == ["90"] and rep.exit_code == 1
    assert found(report(lib(KERN, box(sass("sm_80", "_Z3mulv"), sass("sm_90", "_Z3mulv")))), "K001") == []


def test_k001_unread_kernels_judge_the_container_whole():
    unread = Entry("nvidia", SASS, "sm_80", (1, 8), kernels=None, toolkit=(13, 0))
    (k,) = found(report(lib(KERN, box(unread))), "K001")
    assert k.get("containers") == 1 and k.get("fails") == ["90"] and k.get("kernels") == []


def test_k004_one_kernel_in_single_architecture_containers_fails_closed():
    """lib_dispatch: one kernel in an sm_80-only and an sm_90-only container. The binary cannot
    say whether the host picks the container by architecture: an error naming both containers and
    the entry that records the dispatch."""
    rep = report(lib(box(sass("sm_80", "_Z4workv")), box(sass("sm_90", "_Z4workv"))))
    k4 = found(rep, "K004")
    assert sorted(f.get("fails") for f in k4) == [["80"], ["90"]]  # type: ignore[type-var]
    assert found(rep, "K001") == [] and rep.exit_code == 1
    assert all('code = "K004"' in f.message and f.get("elsewhere") for f in k4)
    rep = report(lib(box(sass("sm_80", "_Z4workv")), box(sass("sm_90", "_Z4workv"))), strict_kernels=True)
    assert sorted(f.get("fails") for f in found(rep, "K001")) == [["80"], ["90"]]  # type: ignore[type-var]


def test_k004_a_kernel_is_its_container_and_its_name():
    """axpy<float> in a TU for sm_80 and one for 80;90: the sm_80 TU's launch fails on 9.0 (209 on
    the H200) whatever the other TU carries, in either order."""
    narrow, wide = box(sass("sm_80", "_Z4axpyv")), box(sass("sm_80", "_Z4axpyv"), sass("sm_90", "_Z4axpyv"))
    for order in ((narrow, wide), (wide, narrow)):
        rep = report(lib(*order))
        (k,) = found(rep, "K004")
        assert k.get("fails") == ["90"] and k.get("kernels") == ["_Z4axpyv"] and rep.exit_code == 1


def test_k001_the_driver_picks_one_entry_per_container():
    """The sm_90 cubin is the one loaded on 9.0; a kernel only in the compute_80 PTX is not there."""
    c = box(sass("sm_90", "_Z1av"), ptx("compute_80", "_Z1av", "_Z1bv"), sass("sm_80", "_Z1av", "_Z1bv"))
    rep = report(lib(c))
    (k,) = found(rep, "K003")  # the same unit was built for 9.0 without it: compiled out
    assert k.get("kernels") == ["_Z1bv"] and k.get("reason") == "compiled-out" and rep.exit_code == 0


def test_k002_specialised_kernels():
    """A kernel whose code is all sm_90a, named for 9.0 (and newer): not meant for 8.0 (K002)."""
    rep = report(lib(KERN, box(sass("sm_90a", "_Z11sm90_kernelv"))))
    (k,) = found(rep, "K002")
    assert k.get("kernels") == ["_Z11sm90_kernelv"] and rep.exit_code == 0
    assert found(report(lib(KERN)), "K002") == []


def test_k001_a_generic_kernel_of_arch_specific_code_beside_generic_code():
    """The same code with a name that names nothing: generic code of the library runs on 8.0, so
    the kernel may be meant for 8.0 too; its container's target excuses nothing (zero_fill for
    sm_100a beside code for 9.0 fails with 209 on an H100)."""
    rep = report(lib(KERN, box(sass("sm_90a", "_Z6hopperv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z6hopperv"] and k.get("fails") == ["80"] and rep.exit_code == 1
    assert "K002" not in codes(rep)


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("sm80_xmma_gemm_f16", "sm_80"),
        ("ampere_sgemm_128x64_nn", "sm_80"),
        ("cutlass_80_tensorop_s1688gemm", "sm_80"),
        ("_ZN7cutlass6KernelINS_4arch4Sm80EEEvv", "sm_80"),
        ("_ZN4cute30SM80_16x8x16_F32F16F16F32_TN3fmaEv", "sm_80"),
    ],
)
def test_k003_kernels_named_for_an_architecture(name, target):
    """The kernel's own name names the architecture its code is for, and its author's convention
    means "this or newer": it excludes an older GPU (7.5), never a newer one (9.0: K001)."""
    older = lib(
        box(sass("sm_75", "_Z4axpyv"), sass("sm_80", "_Z4axpyv"), sass("sm_90", "_Z4axpyv")), box(sass(target, name))
    )
    rep = report(older, arch="75;80")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "named" and k.get("kernels") == [name] and k.get("fails") == ["75"]
    assert "K001" not in codes(rep) and rep.exit_code == 0
    rep = report(older, arch="80;90")
    (k,) = found(rep, "K001")
    assert k.get("kernels") == [name] and k.get("fails") == ["90"] and rep.exit_code == 1 and "K003" not in codes(rep)


def test_k003_kernel_compiled_out_of_its_own_container():
    """NCCL's fp8 kernels exist only in the sm_90 cubin of their container (a __CUDA_ARCH__ guard)."""
    c = box(sass("sm_80", "_Z3allv"), sass("sm_90", "_Z3allv", "_Z8fp8_onlyv"))
    rep = report(lib(c), arch="80;90")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "compiled-out" and k.get("fails") == ["80"] and rep.exit_code == 0


NCCL_FP8 = "FP8 reduction support begins with sm90 capable devices."


def _nccl(
    *containers: Container, said: tuple[str, ...] = (NCCL_FP8,), path: str = "nvidia/nccl/lib/libnccl.so.2"
) -> Library:
    return replace(lib(*containers, path=path), statements=said)


def test_k003_a_string_in_the_library_excuses_the_kernels_it_speaks_for_below_its_architecture():
    """NCCL's refusal below sm_90 excuses an fp8 kernel on 8.0, not on 9.0 (not below 9.0)."""
    c = box(sass("sm_80", "_Z3allv"), sass("sm_90", "_Z3allv"), sass("sm_100", "_Z3allv"))
    rep = report(_nccl(c, box(sass("sm_100", "_Z10red_f8e5m2v"))), arch="80;90;100")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "stated" and k.get("fails") == ["80"] and k.get("kernels") == ["_Z10red_f8e5m2v"]
    (f,) = found(rep, "K001")
    assert f.get("fails") == ["90"] and rep.exit_code == 1


@pytest.mark.parametrize(
    "said, path",
    [((), "libnccl.so.2"), ((NCCL_FP8,), "libother.so"), (("FP8 reduction support begins with sm90",), "libnccl.so.2")],
)
def test_k001_a_string_speaks_only_whole_and_only_in_its_own_library(said, path):
    """No string, the string in a library the row is not for, or only part of it: K001 stands."""
    rep = report(_nccl(KERN, box(sass("sm_90", "_Z10red_f8e4m3v")), said=said, path=path))
    (f,) = found(rep, "K001")
    assert f.get("kernels") == ["_Z10red_f8e4m3v"] and rep.exit_code == 1 and "K003" not in codes(rep)


def test_k001_a_neighbour_named_for_an_architecture_excuses_nothing():
    """A kernel named for an architecture excuses its own gap, never another kernel's: a library
    with sm90_xmma_gemm still fails for an unnamed kernel built for fewer architectures."""
    rep = report(lib(KERN, box(sass("sm_90", "sm90_xmma_gemm")), box(sass("sm_90", "_Z5splitv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z5splitv"] and k.get("fails") == ["80"] and rep.exit_code == 1
    (k,) = found(rep, "K003")
    assert k.get("kernels") == ["sm90_xmma_gemm"] and k.get("reason") == "named"


@pytest.mark.parametrize(
    "name", ["_ZN3cub20CUB_300001_SM_800_900E11EmptyKernelIvEEvv", "_ZN3cub21CUB_200800_SM_500_52011EmptyKernelIvEEvv"]
)
def test_k001_cccl_namespaces_name_no_architecture(name):
    """CCCL's namespace lists every architecture of the TU, not one the kernel is for."""
    rep = report(lib(KERN, box(sass("sm_80", name))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == [name] and "K003" not in codes(rep)


def test_k003_a_kernel_named_for_a_newer_architecture_is_not_for_an_older_gpu():
    """cuSPARSELt's sm86_xmma_* kernels carry sm_86, sm_87 and sm_90a code: named for 8.6 on, they
    are never for 8.0. A gap on a GPU newer than the name is not excused that way."""
    rep = report(
        lib(KERN, box(sass("sm_86", "sm86_xmma_k"), sass("sm_87", "sm86_xmma_k"), sass("sm_90a", "sm86_xmma_k"))),
        arch="80;90",
    )
    (k,) = found(rep, "K003")
    assert k.get("fails") == ["80"] and k.get("reason") == "named" and rep.exit_code == 0


def test_k001_a_name_excuses_only_code_for_what_it_names():
    """sm80_xmma_gemm with code for sm_80 and sm_86 is not 'built for what its name says'."""
    rep = report(
        lib(
            box(sass("sm_80", "_Z1av"), sass("sm_86", "_Z1av"), sass("sm_90", "_Z1av")),
            box(sass("sm_80", "sm80_xmma_gemm"), sass("sm_86", "sm80_xmma_gemm")),
        ),
        arch="80;86;90",
    )
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["sm80_xmma_gemm"] and k.get("fails") == ["90"]


def test_k001_arch_specific_units_alone_are_no_dispatch_evidence():
    """sm_90a-only code shows the library checks the GPU before using that code, not any other."""
    rep = report(lib(KERN, box(sass("sm_90a", "_Z11sm90_kernelv")), box(sass("sm_90", "_Z5splitv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z5splitv"] and k.get("fails") == ["80"] and rep.exit_code == 1


def test_k_rules_silent_on_a_library_level_gap():
    rep = report(lib(box(sass("sm_80", "_Z1av")), box(sass("sm_80", "_Z1bv"))))
    assert "G001" in codes(rep) and not {"K001", "K002", "K003"} & set(codes(rep))


def test_k001_ptx_the_driver_picks_and_cannot_compile_is_never_by_design():
    """TensorFlow 2.20's XLA kernels: compute_90 PTX whose text says sm_90a, in a library that
    otherwise shows architecture dispatch (cuDNN-style names). On 10.0 the driver picks that PTX
    and fails with CUDA_ERROR_INVALID_PTX, as users of RTX 50xx GPUs report."""
    tf = lib(
        box(sass("sm_80", "sm80_xmma_gemm"), ptx("compute_90", "sm80_xmma_gemm")),
        box(sass("sm_80", "Abs_GPU_kernel"), ptx("compute_90", "Abs_GPU_kernel", text="sm_90a")),
    )
    rep = report(tf, arch="80;90;100")
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["Abs_GPU_kernel"] and k.get("fails") == ["100"] and rep.exit_code == 1


def test_k002_an_unread_unit_of_ptx_whose_text_is_arch_specific():
    """An unread unit of PTX whose text targets sm_90a: specialised where no generic code runs on
    the GPU; beside generic code that runs there (KERN on 8.0) nothing shows it is not meant for
    it, so it fails closed (K001)."""
    unread = Entry("nvidia", PTX, "compute_90", (9, 0), kernels=None, ptx_target="sm_90a")
    rep = report(lib(KERN, box(unread)))
    assert found(rep, "K001") and "K002" not in codes(rep)
    rep = report(lib(box(sass("sm_100a", "_Z1kv")), box(unread)), arch="90a;100a")
    assert found(rep, "K002") and "K001" not in codes(rep)


def test_k001_groups_kernels_and_unread_containers_largest_first():
    """Three kernels in two sm_80-only containers and two unread sm_80-only containers, beside KERN
    (sm_80, sm_90, compute_90): two K001 findings, the three kernels first."""
    rep = report(
        lib(
            KERN,
            box(unread_sass("sm_80")),
            box(unread_sass("sm_80")),
            box(sass("sm_80", "_Z1av", "_Z1bv")),
            box(sass("sm_80", "_Z1cv")),
        )
    )
    assert [whole(f) for f in found(rep, "K001")] == [
        (
            "K001",
            ERROR,
            "libx.so",
            "libx.so: 3 kernels fail on 9.0. Fix: build for sm_90 or record: "
            '[[tool.archaudit.library]] path = "libx.so" arch = "80" reason = '
            '"<file:line>". Their own container lacks the claimed 9.0, carrying only sm_80: 3 '
            "kernels (a, b, c)",
            {"kernels": ["_Z1av", "_Z1bv", "_Z1cv"], "containers": 2, "carried": ["sm_80"], "fails": ["90"]},
        ),
        (
            "K001",
            ERROR,
            "libx.so",
            "libx.so: 2 containers without identifiable kernels fail on 9.0. Fix: build for "
            'sm_90 or record: [[tool.archaudit.library]] path = "libx.so" arch = "80" '
            'reason = "<file:line>". Their own container lacks the claimed 9.0, carrying only '
            "sm_80: 2 containers without identifiable kernels",
            {"kernels": [], "containers": 2, "carried": ["sm_80"], "fails": ["90"]},
        ),
    ]


def test_k003_compiled_out_names_the_code_the_gpus_do_get():
    """A kernel absent from the sm_90 cubin of its own container, which 9.0 runs: the text says
    which GPU, which code it runs and why that is by design."""
    c = box(sass("sm_80", "_Z1av", "_Z1bv"), sass("sm_90", "_Z1av"))
    rep = report(lib(c), arch="80;90")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "compiled-out" and k.get("fails") == ["90"]
    assert "not meant for 9.0 (claimed), as designed: 9.0 runs sm_90 of their own container" in k.message


def test_k001_a_kernel_missing_from_the_ptx_a_gpu_jit_compiles():
    """onnxruntime's shape: a kernel absent from the compute_75 PTX its container gives 9.0
    through the JIT, present in the sm_80 SASS: the source left it out of 7.5's code, not 9.0's
    (a >= 8.0 guard passes on 9.0), so 9.0 fails it (lib_guard_75ptx_80.so: 500 on an H100)."""
    c = box(sass("sm_75", "_Z1av"), ptx("compute_75", "_Z1av"), sass("sm_80", "_Z1av", "_Z1bv"))
    rep = report(lib(c), arch="75;80;86;90")
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z1bv"] and k.get("fails") == ["90"]
    (k,) = found(rep, "K003")
    assert k.get("reason") == "compiled-out" and k.get("fails") == ["75"]


def test_k002_k003_name_what_the_kernels_carry():
    rep = report(
        lib(
            box(sass("sm_75", "_Z4axpyv"), sass("sm_80", "_Z4axpyv"), sass("sm_90", "_Z4axpyv")),
            box(sass("sm_90a", "_Z11sm90_kernelv")),
            box(sass("sm_80", "sm80_gemm")),
        ),
        arch="75;80;90",
    )
    assert [whole(f) for f in rep.findings if f.code in ("K002", "K003")] == [
        (
            "K002",
            INFO,
            "libx.so",
            "libx.so: 1 kernel not meant for 7.5, 8.0 (claimed), as designed: all their code is "
            "arch-specific or family code (sm_90a), and their names say so or no generic code "
            "of the library runs there: 1 kernel (sm90_kernel)",
            {"kernels": ["_Z11sm90_kernelv"], "carried": ["sm_90a"], "fails": ["75", "80"]},
        ),
        (
            "K003",
            INFO,
            "libx.so",
            "libx.so: 1 kernel not meant for 7.5 (claimed), as designed: their names mean 8.0 "
            "or newer (architecture prefix (CuTe SM80_* atoms, cuBLAS/cuDNN sm80_xmma_*, "
            "sm_90a_*), data/names.json), and their code is for no older GPU (only sm_80): "
            "1 kernel (sm80_gemm)",
            {"kernels": ["sm80_gemm"], "carried": ["sm_80"], "fails": ["75"], "reason": "named"},
        ),
    ]


@pytest.mark.parametrize(
    ("glob", "strict"), [("mul", ()), ("m?l", ()), ("_Z3mul*", ()), ("mul", ("--strict-kernels",))]
)
def test_k006_a_kernel_the_project_gates_away_from_a_gpu_is_information(tmp_path, capsys, glob, strict):
    """The host launches `mul` only on 8.x (recorded with kernels): its gap on 9.0 is K006, not
    K001, and --gpu H100 answers G008; axpy keeps the claim "80;90". By its short or mangled name,
    and with every container judged whole (--strict-kernels) too."""
    entry = f'path = "lib_multiobj.so"\nkernels = ["{glob}"]\narch = "80"\nreason = "ops.py:7 calls mul only on 8.x"'
    toml = tmp_path / "pyproject.toml"
    toml.write_text(f"[tool.archaudit]\n[[tool.archaudit.library]]\n{entry}\n", encoding="utf-8")
    rep, rc = _run(capsys, toml, "--arch", "80;90", "--gpu", "H100", *strict)
    (k,) = [f for f in rep if f["code"] == "K006"]
    assert rc == 0 and not [f for f in rep if f["code"] in ("K001", "G009")]
    assert k["severity"] == INFO and k["data"]["fails"] == ["90"] and k["data"]["gate"] == "80"
    assert [n[:6] for n in k["data"]["kernels"]] == ["_Z3mul"]
    assert k["message"].startswith(
        "lib_multiobj.so: 1 kernel not launched on 9.0 (claimed): the project's host code gates them to 80 "
        "(ops.py:7 calls mul only on 8.x;"
    )


def test_k006_counter_examples_a_gate_that_admits_the_gpu_or_names_another_kernel_still_fails(tmp_path, capsys):
    """Counter-examples: the gate admits 9.0 (the host launches mul there, where it has no code:
    the H100's 209) or names another kernel: K001 stays, and --gpu H100 is G009."""
    for kernels, arch in (('["mul"]', "80;90"), ('["axpy"]', "80")):
        toml = tmp_path / "pyproject.toml"
        toml.write_text(
            f'[tool.archaudit]\n[[tool.archaudit.library]]\npath = "lib_multiobj.so"\nkernels = {kernels}\n'
            f'arch = "{arch}"\nreason = "ops.py:7"\n',
            encoding="utf-8",
        )
        rep, rc = _run(capsys, toml, "--arch", "80;90", "--gpu", "H100")
        assert rc == 1 and {"K001", "G009"} <= {f["code"] for f in rep} and "K006" not in {f["code"] for f in rep}


@pytest.mark.parametrize(
    ("library", "kernel", "claim", "excuse"),
    [
        ("lib_archtag_sm80.so", "*GemmKernel*", "75;80", "K003"),  # cutlass::arch::Sm80: named for 8.0+
        ("lib_sm100_zero_fill_100a.so", "sm100_zero_fill", "90;100", "K002"),  # sm_100a code, named sm100
    ],
)
def test_a_name_never_excuses_a_gpu_the_project_records_the_kernel_is_launched_on(
    tmp_path, capsys, library, kernel, claim, excuse
):
    """A kernel's name excuses the GPUs its author's convention excludes (K003 named, K002), until
    the project records that its host launches the kernel there too: then the gap is K001, as the
    H100 answers (209 for sm100_zero_fill's sm_100a-only code, records/h100)."""
    toml = tmp_path / "none.toml"
    toml.write_text("[tool.archaudit]\n", encoding="utf-8")
    got, rc = _run(capsys, toml, "--arch", claim, library=library)
    assert rc == 0 and excuse in {f["code"] for f in got} and "K001" not in {f["code"] for f in got}
    toml.write_text(
        f'[tool.archaudit]\n[[tool.archaudit.library]]\npath = "{library}"\nkernels = ["{kernel}"]\n'
        f'arch = "{claim}"\nreason = "ops.cu:40 launches it on each"\n',
        encoding="utf-8",
    )
    got, rc = _run(capsys, toml, "--arch", claim, library=library)
    assert rc == 1 and "K001" in {f["code"] for f in got} and excuse not in {f["code"] for f in got}


def _run(capsys, toml, *args: str, library: str = "lib_multiobj.so") -> tuple[list[dict], int]:
    rc = main(["check", "-q", "--format", "json", "--config", str(toml), str(CUDA_BIN / library), *args])
    rep = json.loads(capsys.readouterr().out)
    return [f for t in rep["targets"] for f in t["findings"]], rc
