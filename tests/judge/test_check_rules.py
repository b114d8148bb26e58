"""The audit rule, end to end through the CLI, on nvcc-built fixtures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import oracle
from archaudit.cli import main
from archaudit.core import example_wheel

BIN = oracle.FIXTURES


def run(capsys, *args: str) -> tuple[int, dict]:
    rc = main(["check", "-q", "--format", "json", "--no-config", *args])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def codes(report: dict) -> list[str]:
    return [f["code"] for t in report["targets"] for f in t["findings"]]


def findings(report: dict, code: str) -> list[dict]:
    return [f for t in report["targets"] for f in t["findings"] if f["code"] == code]


def lib(name: str) -> str:
    return str(BIN / name)


def test_example_wheel_shows_the_pass_line_and_the_failure_line(capsys):
    rc = main(["check", "-q", "--no-config", "--example", "--arch", "80;90"])
    text = capsys.readouterr().out
    assert rc == 1
    assert "gpu_example/libkernels.so" in text and "✓ 80 90" in text
    assert (
        "✗ G001 gpu_example/libshim.so has no code for 9.0 (claimed). Fix: build for sm_90, or record its "
        'gate: [[tool.archaudit.library]] path = "libshim.so" arch = "80" reason = "<file:line>"'
    ) in text


def test_example_wheel_passes_when_the_claim_is_what_it_carries(capsys):
    rc, rep = run(capsys, example_wheel(), "--arch", "80")
    assert rc == 0 and rep["passed"]
    assert [lib["status"] for lib in rep["targets"][0]["libraries"]] == ["pass", "pass"]


def test_library_union_passes_but_a_kernel_fails(capsys):
    """kern.o has sm_80/sm_90/compute_90, mul.o only sm_80: union covers 90, `mul` does not."""
    rc, rep = run(capsys, lib("lib_multiobj.so"), "--arch", "80,90", "--detail", "kernels")
    assert rc == 1
    assert "G001" not in codes(rep)  # the library as a whole carries sm_90
    (k,) = findings(rep, "K001")
    assert [n[:6] for n in k["data"]["kernels"]] == ["_Z3mul"] and k["data"]["fails"] == ["90"]
    assert (
        k["message"].startswith("lib_multiobj.so: 1 kernel fails on 9.0. Fix: build for sm_90")
        and "own container lacks the claimed 9.0" in k["message"]
        and k["message"].endswith("1 kernel (mul)")
    )


def test_rdc_library_fails_per_kernel_too(capsys):
    rc, rep = run(capsys, lib("lib_multiobj_rdc.so"), "--arch", "80,90", "--detail", "kernels")
    assert rc == 1
    ks = findings(rep, "K001")
    assert any(n.startswith("_Z3mul") for k in ks for n in k["data"]["kernels"])


def test_one_kernel_in_single_architecture_containers_fails_closed(capsys, tmp_path):
    """One kernel compiled into an sm_80-only and an sm_90-only container: the binary cannot say
    whether the host picks the container by architecture (K004, naming both containers), until a
    config entry records the dispatch."""
    rc, rep = run(capsys, lib("lib_dispatch.so"), "--arch", "80,90")
    k4 = findings(rep, "K004")
    assert rc == 1 and sorted(f["data"]["fails"] for f in k4) == [["80"], ["90"]] and "K001" not in codes(rep)
    assert all(set(f["data"]["containers"]).isdisjoint(f["data"]["elsewhere"]) for f in k4)
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[tool.archaudit]\n[[tool.archaudit.ignore-library]]\ncode = "K004"\nlibrary = "*"\n'
        'reason = "the host picks work<1> by __CUDA_ARCH__ (dispatch.cu)"\n'
    )
    assert (
        main(["check", "-q", "--format", "json", "--config", str(config), lib("lib_dispatch.so"), "--arch", "80,90"])
        == 0
    )
    capsys.readouterr()
    rc, rep = run(capsys, lib("lib_dispatch.so"), "--arch", "80,90", "--strict-kernels")
    assert rc == 1 and sorted(f["data"]["fails"] for f in findings(rep, "K001")) == [["80"], ["90"]]


def test_kernels_are_named_in_the_one_pass(capsys):
    """The default mode decodes every payload while reading: kernels are named without a second
    read, and the same facts give the same verdict under every --detail."""
    rc = main(["check", "-q", "--no-config", "-v", lib("lib_multiobj.so"), "--arch", "80,90"])
    out = capsys.readouterr().out
    assert rc == 1 and "carrying only sm_80: 1 kernel (mul)" in out
    assert "second pass" not in out
    for detail in ("libraries", "containers", "kernels"):
        assert main(["check", "-q", "--no-config", "--detail", detail, lib("lib_multiobj.so"), "--arch", "80,90"]) == 1
        capsys.readouterr()


def test_fast_mode_never_passes_what_it_did_not_decode(capsys):
    """--fast reads entry headers only: a library it would otherwise pass fails with E015."""
    assert main(["check", "-q", "--no-config", lib("lib_sm80.so"), "--arch", "80"]) == 0
    capsys.readouterr()
    rc, rep = run(capsys, lib("lib_sm80.so"), "--arch", "80", "--fast")
    assert rc == 1 and codes(rep).count("E015") == 1
    rc, rep = run(capsys, lib("lib_sm80.so"), "--arch", "80,90", "--fast")  # a failure stays one
    assert rc == 1 and {"E015", "G001"} <= set(codes(rep))


def test_per_container_rule_without_decoding_still_finds_the_gap(capsys):
    rc, rep = run(capsys, lib("lib_multiobj.so"), "--arch", "80,90")
    assert rc == 1 and codes(rep).count("K001") == 1


def test_hopper_only_library_fails_a_claim_it_does_not_serve(capsys):
    """Only sm_90a code: it serves 9.0 (G005) and fails the claimed 8.0 (G001), --strict or not."""
    for strict in ((), ("--strict",)):
        rc, rep = run(capsys, lib("lib_hopper_only.so"), "--arch", "80,90", *strict)
        (g,) = findings(rep, "G005")
        assert g["data"]["serves"] == ["9.0"]
        assert rc == 1 and findings(rep, "G001")[0]["data"]["missing"] == ["80"]
    assert run(capsys, lib("lib_hopper_only.so"), "--arch", "90")[0] == 0


def test_hopper_only_container_is_specialised_unless_strict_kernels(capsys):
    rc, rep = run(capsys, lib("lib_mixed_specialised.so"), "--arch", "80,90", "--detail", "kernels")
    assert rc == 0
    (k,) = findings(rep, "K002")
    assert k["data"]["kernels"] == ["_Z11hopper_onlyPfi"]
    rc, rep = run(capsys, lib("lib_mixed_specialised.so"), "--arch", "80,90", "--strict-kernels")
    assert rc == 1 and findings(rep, "K001")[0]["data"]["fails"] == ["80"]


@pytest.mark.parametrize(
    "claim,rc,code",
    [
        ("90", 0, "G002"),  # compute_90 PTX JITs on 9.0
        ("90;100;120", 0, "G002"),  # ... and on every newer GPU
        ("80,90", 1, "G001"),  # never downward
    ],
)
def test_ptx_runs_on_equal_or_newer_only(capsys, claim, rc, code):
    got, rep = run(capsys, lib("lib_ptx90.so"), "--arch", claim)
    assert got == rc and code in codes(rep)


def test_arch_specific_ptx_runs_only_on_its_architecture(capsys):
    rc, rep = run(capsys, lib("lib_ptx90a.so"), "--arch", "90,100", "--strict")
    assert rc == 1 and findings(rep, "G001")[0]["data"]["missing"] == ["100"]


def test_sass_runs_on_newer_minor_but_not_on_tegra_or_a_new_major(capsys):
    assert run(capsys, lib("lib_sm80.so"), "--arch", "8.6 8.9")[0] == 0
    rc, rep = run(capsys, lib("lib_sm80.so"), "--arch", "8.0 8.7 9.0")
    assert rc == 1 and findings(rep, "G001")[0]["data"]["missing"] == ["87", "90"]


def test_family_code_runs_within_its_family(capsys):
    assert run(capsys, lib("lib_sm100f.so"), "--arch", "100;103", "--strict")[0] == 0
    rc, rep = run(capsys, lib("lib_sm100f.so"), "--arch", "100;110;120", "--strict")
    assert findings(rep, "G001")[0]["data"]["missing"] == ["110", "120"]


def test_relocatable_code_never_counts_as_coverage(capsys):
    rc, rep = run(capsys, lib("lib_rdc.so"), "--arch", "80,90")
    assert rc == 1 and findings(rep, "G001")[0]["data"]["missing"] == ["90"]
    assert "G007" in codes(rep)


def test_exact_fails_on_architectures_carried_but_not_claimed(capsys):
    rc, rep = run(capsys, lib("lib_multi.so"), "--arch", "75;80;86;89;90;100", "--exact")
    assert rc == 1 and findings(rep, "G003")[0]["data"]["extra"] == ["120"]
    # the kernel-less sm_75 device-link cubin of lib_multiobj is not "carried" code
    rc, rep = run(capsys, lib("lib_multiobj.so"), "--arch", "80,90", "--exact", "--detail", "kernels")
    assert "G003" not in codes(rep)


def test_require_ptx_newest(capsys):
    assert run(capsys, lib("lib_multi.so"), "--arch", "75;80;90;120", "--require-ptx", "newest")[0] == 0
    rc, rep = run(capsys, lib("lib_sm80.so"), "--arch", "80", "--require-ptx", "newest")
    assert rc == 1 and findings(rep, "G004")[0]["data"]["newest"] == "80"


def test_driver_floor_and_driver_check(capsys):
    rc, rep = run(capsys, lib("lib_ptx90.so"), "--arch", "90")
    (floor,) = findings(rep, "D002")
    assert floor["data"]["cuda"] == "13.0"  # PTX ISA 9.0 came with CUDA 13.0
    rc, rep = run(capsys, lib("lib_ptx90.so"), "--arch", "90", "--driver", "550.54.15")
    assert rc == 1
    (d,) = findings(rep, "D001")
    assert "unsupported toolchain" in d["message"] and "compute_90 (PTX ISA 9.0)" in d["message"]
    assert run(capsys, lib("lib_ptx90.so"), "--arch", "90", "--driver", floor["data"]["driver"])[0] == 0


def test_gpu_answers_per_library(capsys):
    rc, rep = run(capsys, example_wheel(), "--arch", "80", "--gpu", "H100")
    runs = {f["subject"]: f["data"]["runs"] for f in findings(rep, "G008") + findings(rep, "G009")}
    assert runs == {"gpu_example/libkernels.so": "native", "gpu_example/libshim.so": "none"}
    assert rc == 1
    rc, rep = run(capsys, lib("lib_ptx90.so"), "--arch", "90", "--gpu", "sm_100")
    assert {f["data"]["runs"] for f in findings(rep, "G008")} == {"jit"}


def test_cpu_library_passes_without_a_claim(capsys):
    rc = main(["check", "-q", "--no-config", lib("lib_host.so")])
    assert rc == 0 and "CPU wheel: no device code to verify" in capsys.readouterr().out


def test_gpu_library_without_a_claim_fails_closed(capsys):
    rc, rep = run(capsys, lib("lib_sm80.so"))
    assert rc == 1 and "C001" in codes(rep)
    assert [f["code"] for f in findings(rep, "C001")] == ["C001"] and findings(rep, "C001")[0]["severity"] == "error"


def test_claim_given_but_no_device_code_fails_closed(capsys):
    rc, rep = run(capsys, lib("lib_host.so"), "--arch", "80")
    assert rc == 1 and "G006" in codes(rep)


def test_claim_from_environment(capsys, monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0 9.0+PTX")
    rc, rep = run(capsys, lib("lib_sm80.so"), "--arch-from-env", "TORCH_CUDA_ARCH_LIST")
    assert rc == 1 and rep["targets"][0]["claim"]["source"] == "environment TORCH_CUDA_ARCH_LIST"
    rc = main(["check", "-q", "--no-config", lib("lib_sm80.so"), "--arch-from-env", "UNSET_VARIABLE_X"])
    assert rc == 2


def test_claim_from_pyproject(capsys, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.archaudit]\ncuda-archs = "80;90"\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)  # found upward, like other pypa tools
    rc = main(["check", "-q", "--format", "json", lib("lib_sm80.so")])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1 and "[tool.archaudit] cuda-archs" in rep["targets"][0]["claim"]["source"]
    assert findings(rep, "G001")[0]["data"]["missing"] == ["90"]
    rc = main(["check", "-q", "--format", "json", lib("lib_sm80.so"), "--arch", "80"])  # flag overrides
    assert rc == 0


def test_unparseable_claim_is_a_usage_error(capsys):
    rc = main(["check", "-q", "--no-config", lib("lib_sm80.so"), "--arch", "sm_8x"])
    assert rc == 2 and "C002" in capsys.readouterr().err


def test_directory_target_and_symlinked_libraries(capsys, tmp_path):
    shutil.copy(BIN / "lib_sm80.so", tmp_path / "libfoo.so.1")
    os.symlink("libfoo.so.1", tmp_path / "libfoo.so")
    rc, rep = run(capsys, str(tmp_path), "--arch", "80")
    assert rc == 0 and [x["path"] for x in rep["targets"][0]["libraries"]] == ["libfoo.so.1"]


def test_installed_distribution_target(capsys):
    """archaudit itself is installed: a CPU distribution with one GPU example wheel as data."""
    rc = main(["check", "-q", "--no-config", "archaudit"])
    assert rc == 0 and "CPU wheel" in capsys.readouterr().out


@pytest.mark.parametrize(
    "make,code,want_rc",
    [
        ("truncated_wheel", "E002", 2),
        ("not_elf_so", "E010", 1),
        ("corrupted_fatbin_size", "E011", 1),
        ("empty_dir", "E001", 2),
        ("windows_pyd", "E021", 1),
        ("missing", "E001", 2),
    ],
)
def test_bad_input_is_a_clear_finding_not_a_traceback(capsys, tmp_path, make, code, want_rc):
    if make == "truncated_wheel":
        data = open(example_wheel(), "rb").read()
        target = tmp_path / "x-1.0-py3-none-any.whl"
        target.write_bytes(data[: len(data) // 2])
    elif make == "not_elf_so":
        target = tmp_path / "libfake.so"
        target.write_text("INPUT(-lfoo)\n")  # a linker script named .so
    elif make == "corrupted_fatbin_size":
        edited = bytearray((BIN / "lib_sm80.so").read_bytes())
        at = edited.find(b"\x50\xed\x55\xba")
        edited[at + 8 : at + 16] = (2**40).to_bytes(8, "little")
        target = tmp_path / "libbad.so"
        target.write_bytes(bytes(edited))
    elif make == "windows_pyd":
        target = tmp_path / "kernels.pyd"
        target.write_bytes(b"MZ\x90\x00" + bytes(60))
    elif make == "empty_dir":
        target = tmp_path / "empty"
        target.mkdir()
    else:
        target = tmp_path / "nope.whl"
    rc = main(["check", "-q", "--no-config", "--format", "json", str(target), "--arch", "80"])
    captured = capsys.readouterr()
    assert rc == want_rc and "Traceback" not in captured.err
    assert code in [f["code"] for t in json.loads(captured.out)["targets"] for f in t["findings"]]


def test_a_fatbin_section_cut_below_one_container_fails_closed(capsys):
    """Found by the fuzzer: size 1 and a zeroed magic hid all of an object's device code."""
    path = BIN.parent.parent.parent / "fuzz" / "regressions" / "lto-relfatbin-size1-magic0.o"
    rc, rep = run(capsys, str(path), "--arch", "80")
    assert rc == 1 and "E011" in codes(rep)


def test_wheel_members_are_read_in_place(tmp_path):
    """check writes nothing: no extraction, not even to a temporary directory. It runs in a child
    whose TMPDIR, HOME and working directory are fresh (tempfile caches its directory on first use,
    so setting TMPDIR in this process would prove nothing)."""
    dirs = [tmp_path / d for d in ("tmp", "home", "cwd")]
    for d in dirs:
        d.mkdir()
    env = dict(os.environ, TMPDIR=str(dirs[0]), HOME=str(dirs[1]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "archaudit",
            "check",
            "-q",
            "--no-config",
            example_wheel(),
            "--arch",
            "80,90",
            "--detail",
            "kernels",
        ],
        cwd=dirs[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "G001" in proc.stdout, proc.stderr
    assert [sorted(os.listdir(d)) for d in dirs] == [[], [], []]


def test_cuda_fixtures_in_a_wheel_match_the_same_files_on_disk(capsys, tmp_path):
    """The streaming wheel path and the plain file path give the same libraries."""
    names = ["lib_multi.so", "lib_rdc.so", "lib_multiobj.so", "lib_cmp_speed_all.so", "lib_host.so"]
    whl = tmp_path / "fx-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        for n in names:
            z.write(BIN / n, f"fx/{n}")
    d = tmp_path / "tree" / "fx"
    d.mkdir(parents=True)
    for n in names:
        shutil.copy(BIN / n, d / n)
    a = run(capsys, str(whl), "--arch", "80", "--detail", "kernels")[1]["targets"][0]["libraries"]
    b = run(capsys, str(tmp_path / "tree"), "--arch", "80", "--detail", "kernels")[1]["targets"][0]["libraries"]
    assert a == b


@pytest.mark.parametrize(
    "target,claim",
    [
        ("lib_multiobj.so", "80,90"),
        ("lib_multiobj_rdc.so", "80,90"),
        ("lib_dispatch.so", "80,90"),
        ("lib_mixed_specialised.so", "80,90"),
        ("lib_multi.so", "75;80;86;89;90;100;120"),
        ("lib_ptx90a.so", "90;100"),
        (None, "80;90"),
    ],
)
def test_the_verdict_does_not_depend_on_detail(capsys, target, claim):
    """--detail only changes what is printed: the exit code and every finding stay the same."""
    path = lib(target) if target else example_wheel()
    seen = set()
    for detail in ("libraries", "containers", "kernels"):
        rc, rep = run(capsys, path, "--arch", claim, "--detail", detail)
        seen.add(
            (rc, tuple(sorted((f["code"], f["subject"], f["message"]) for t in rep["targets"] for f in t["findings"])))
        )
    assert len(seen) == 1, seen


def test_unknown_entry_kind_fails_closed(capsys, tmp_path):
    """E013: a fatbin entry of a kind archaudit does not know cannot be verified."""
    data = bytearray((BIN / "lib_sm80.so").read_bytes())
    at = data.find(b"\x50\xed\x55\xba")
    header = int.from_bytes(data[at + 4 : at + 6], "little") >> 0  # version, then header size at +6
    entry = at + int.from_bytes(data[at + 6 : at + 8], "little")
    assert header >= 1 and int.from_bytes(data[entry : entry + 2], "little") in (1, 2)
    data[entry : entry + 2] = (16).to_bytes(2, "little")
    target = tmp_path / "libkind.so"
    target.write_bytes(bytes(data))
    rc, rep = run(capsys, str(target), "--arch", "80")
    assert rc == 1 and "E013" in codes(rep)
    assert [v["status"] for v in rep["targets"][0]["libraries"]] == ["fail"]


def test_a_claim_for_a_vendor_without_code_fails(capsys):
    """Issue 11 pt 7: the example wheel carries only NVIDIA code; an AMD claim covers nothing."""
    rc, rep = run(capsys, example_wheel(), "--arch", "80", "--amd-arch", "gfx942")
    (g,) = findings(rep, "G011")
    assert rc == 1 and g["data"]["vendor"] == "amd" and g["data"]["missing"] == ["gfx942"]
    rc, rep = run(capsys, example_wheel(), "--arch", "80")
    assert rc == 0 and not findings(rep, "G011")


# ---- counter-examples (build_gaps.sh): a gap is excused only by evidence about that kernel in that container


def test_a_thrust_call_excuses_no_other_kernel(capsys):
    """A Thrust call in a TU built for 80;90 (its kernels in cub::CUB_300001_SM_800_900) beside
    layernorm_kernel in a TU built for sm_80 only: layernorm_kernel fails on the H200 with 209."""
    rc, rep = run(capsys, lib("lib_thrust_layernorm.so"), "--arch", "80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["_Z16layernorm_kernelPKfPfi"] and k["data"]["fails"] == ["90"]
    assert not findings(rep, "K003")  # CCCL's namespace names the TU's architectures, not a kernel's


@pytest.mark.parametrize(
    "name",
    [
        "lib_axpy_narrow_first.so",
        "lib_axpy_wide_first.so",
        "lib_axpy_weak_narrow_first.so",  # weak template stubs: the linker keeps one for both TUs
        "lib_axpy_weak_wide_first.so",
    ],
)
def test_a_kernel_in_another_container_covers_nothing(capsys, name):
    """axpy<float> in a TU for sm_80 and in one for 80;90: the sm_80 TU's launch gives 209 on the
    H200, in either link order (static template stubs, nvcc 13's default). With weak stubs
    (-static-global-template-stub=false, CUDA 12's default) the binary cannot say which module
    a launch reaches either (records/h100/excuses_on_gpu.txt). The error names both containers
    and the entry that records a deliberate dispatch."""
    rc, rep = run(capsys, lib(name), "--arch", "80;90")
    (k,) = findings(rep, "K004")
    assert rc == 1 and k["data"]["fails"] == ["90"] and k["data"]["carried"] == ["sm_80"]
    assert k["data"]["kernels"] == ["_Z4axpyIfEvT_PKS0_PS0_i"] and len(k["data"]["elsewhere"]) == 1
    assert k["data"]["containers"][0] in k["message"] and k["data"]["elsewhere"][0] in k["message"]
    assert 'code = "K004"' in k["message"]
    rc, rep = run(capsys, lib(name), "--arch", "80")
    assert rc == 0


def test_a_family_only_library_fails_a_plain_claim(capsys):
    """One wrong CMAKE_CUDA_ARCHITECTURES=100f: only sm_100f code serves no 8.0 or 9.0 GPU. G005
    says it is specialised; it excuses nothing."""
    rc, rep = run(capsys, lib("lib_sm100f.so"), "--arch", "80;90;100")
    (g,) = findings(rep, "G001")
    assert rc == 1 and g["data"]["missing"] == ["80", "90"] and findings(rep, "G005")
    rc, rep = run(capsys, lib("lib_sm100f.so"), "--arch", "100;103")
    assert rc == 0


def test_a_family_claim_promises_every_gpu_of_the_family(capsys):
    """--arch "80;100f" promises 10.3 too: sm_100a code runs on 10.0 only."""
    rc, rep = run(capsys, lib("lib_sm80_100a.so"), "--arch", "80;100f")
    (g,) = findings(rep, "G001")
    assert rc == 1 and "103" in g["data"]["missing"] and "100" not in g["data"]["missing"]
    assert run(capsys, lib("lib_sm80_100a.so"), "--arch", "80;100")[0] == 0


def test_only_the_first_fatbin_of_a_data_file_counts(capsys):
    """cuModuleLoad reads the first of two concatenated fatbins: 209 on an H200 when it lacks
    sm_90; the swapped file loads."""
    rc, rep = run(capsys, lib("two_sm80_then_sm90.fatbin"), "--arch", "90")
    (g,) = findings(rep, "G001")
    assert rc == 1 and g["data"]["carried"] == ["sm_80"]
    assert run(capsys, lib("two_sm90_then_sm80.fatbin"), "--arch", "90")[0] == 0


def test_a_kernel_only_in_a_later_container_of_a_data_file_is_reachable_from_no_module(capsys):
    """axpy (80;90) then layernorm_kernel (80;90), concatenated: cuModuleLoad reads the first, so
    cuModuleGetFunction of layernorm_kernel fails (500 on an H100): G017, not "covers 80, 90"."""
    rc, rep = run(capsys, lib("two_axpy_then_layernorm.fatbin"), "--arch", "80;90")
    (g,) = findings(rep, "G017")
    assert rc == 1 and g["data"]["kernels"] == ["_Z16layernorm_kernelPKfPfi"] and g["data"]["loader"] == "cuModuleLoad"
    assert codes(rep) == ["G017", "D002"]
    # the same kernels in both (the swapped sm_80/sm_90 file): nothing is out of reach
    rc, rep = run(capsys, lib("two_sm90_then_sm80.fatbin"), "--arch", "90")
    assert rc == 0 and not findings(rep, "G017")
    # headers only: the later container's kernels are not known, so it fails closed
    rc, rep = run(capsys, "--fast", lib("two_axpy_then_layernorm.fatbin"), "--arch", "80;90")
    assert findings(rep, "G017")[0]["data"]["kernels"] == []


def test_a_kernel_only_in_a_later_bundle_of_a_bundle_file_is_reachable_from_no_module(capsys):
    """Two offload bundles in one bare file (clang-offload-bundler -list reads the first only, as
    hipModuleLoad does): kernel k is only in the second."""
    path = str(BIN.parents[1] / "amd" / "bin" / "loading" / "two_bundles_k_second.hipfb")
    rc, rep = run(capsys, path, "--amd-arch", "gfx90a:xnack+")
    (g,) = findings(rep, "G017")
    assert rc == 1 and g["data"]["kernels"] == ["k"] and g["data"]["loader"] == "hipModuleLoad"


def test_code_that_defines_no_kernel_leaves_no_kernel_to_fail(capsys):
    """A TU with host code only: nvcc's sm_75 cubin for it has no .text and no symbols (NPP 13.2's
    libnppc.so.13 ships one). Alone it is G010; beside a TU for 80;90 it is not judged at all."""
    rc, rep = run(capsys, lib("lib_empty_sm75.so"), "--arch", "80;90", "--gpu", "A100")
    assert rc == 0 and findings(rep, "G010") and not findings(rep, "G001") and not findings(rep, "G009")
    rc, rep = run(capsys, lib("lib_empty_beside_8090.so"), "--arch", "80;90")
    assert rc == 0 and not findings(rep, "K001") and not findings(rep, "G001")
    from archaudit.read.library import scan_file  # the reader's fact: no .text, no symbol but section ones

    entries = [e for c in scan_file(lib("lib_empty_beside_8090.so")).containers for e in c.entries]
    assert [e.defines_nothing for e in entries if e.target == "sm_75"] == [True]
    assert not any(e.defines_nothing for e in entries if e.kernels)


# ---- a string in the binary (data/vendor.json statements): NCCL's fp8 refusal below sm_90 ----

FP8_KERNEL = "_Z17reduce_sum_f8e4m3PKhPhi"


def test_a_string_the_host_code_carries_excuses_the_kernels_it_speaks_for(capsys):
    """reduce_sum_f8e4m3 in a TU for sm_90 only, beside reduce_sum_f32 for 80;90, in a libnccl.so.2
    whose host code returns "FP8 reduction support begins with sm90 capable devices." below 9.0."""
    rc, rep = run(capsys, lib("fp8_stated/libnccl.so.2"), "--arch", "80;90")
    (k,) = findings(rep, "K003")
    assert rc == 0 and k["data"]["reason"] == "stated" and k["data"]["kernels"] == [FP8_KERNEL]
    assert k["data"]["fails"] == ["80"] and k["data"]["statement"].startswith("FP8 reduction support")


def test_the_same_kernels_without_the_string_still_fail(capsys):
    rc, rep = run(capsys, lib("fp8_unstated/libnccl.so.2"), "--arch", "80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == [FP8_KERNEL] and not findings(rep, "K003")


def test_the_string_excuses_no_kernel_it_does_not_speak_for(capsys):
    """The string beside reduce_sum_bf16, also for sm_90 only: the bf16 kernel's gap stays K001."""
    rc, rep = run(capsys, lib("fp8_bf16_stated/libnccl.so.2"), "--arch", "80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["_Z15reduce_sum_bf16PKtPti"]
    assert [f["data"]["kernels"] for f in findings(rep, "K003")] == [[FP8_KERNEL]]


def test_the_string_speaks_only_for_the_library_it_is_sourced_for(capsys, tmp_path):
    """The same bytes under another file name are not NCCL: the row's file pattern does not match."""
    other = tmp_path / "libfoo.so"
    shutil.copy(lib("fp8_stated/libnccl.so.2"), other)
    rc, rep = run(capsys, str(other), "--arch", "80;90")
    assert rc == 1 and [f["data"]["kernels"] for f in findings(rep, "K001")] == [[FP8_KERNEL]]


# ---- the floor of the code each GPU runs ----


def test_a_ptx_floor_is_the_floor_of_the_kernels_that_reach_a_gpu_only_through_it(capsys):
    """late_fill has sm_80 SASS and compute_80 PTX of ISA 9.4 (cuSOLVER 12.4.1.2's shape), beside
    axpy for 80;90. On 8.0 everything is native: 580.65.06 is enough. On 9.0 late_fill's only code
    is that PTX, which a 580 driver cannot JIT: D001 names late_fill, not the library."""
    fixture = lib("lib_ptx94_late.so")
    rc, rep = run(capsys, fixture, "--arch", "80;90", "--driver", "580.65.06")
    (d,) = findings(rep, "D001")
    assert rc == 1 and d["data"]["gpus"] == ["90"] and d["data"]["kernels"] == ["_Z9late_fillPfi"]
    assert d["data"]["per_gpu"] == {"90": 1} and "(not K003)" in d["message"] and "PTX ISA 9.4" in d["message"]
    assert run(capsys, fixture, "--arch", "80", "--driver", "580.65.06")[0] == 0  # SASS there: no PTX floor
    assert run(capsys, fixture, "--arch", "80;90", "--driver", "615.71.09")[0] == 0
    rc, rep = run(capsys, fixture, "--gpu", "H100")  # "native" says what it reaches only through the JIT
    (g,) = findings(rep, "G008")
    assert (
        "1 kernel (late_fill) in 1 container reach it only through PTX JIT (compute_80, PTX ISA 9.4: "
        "driver >= 615.71.09)" in g["message"]
    )


def test_a_kernel_named_for_an_older_architecture_still_sets_its_ptx_floor(capsys):
    """The same build with the kernel named sm80_tail_kernel: NVIDIA's sm80_* means "8.0 or newer"
    (data/names.json), so 9.0 may launch it, through its ISA 9.4 PTX: D001 names it, as it names
    late_fill; 615.71.09 passes."""
    fixture = lib("lib_ptx94_named.so")
    rc, rep = run(capsys, fixture, "--arch", "80;90", "--driver", "580.65.06")
    (d,) = findings(rep, "D001")
    assert rc == 1 and d["data"]["gpus"] == ["90"] and d["data"]["kernels"] == ["_Z16sm80_tail_kernelPfi"]
    assert run(capsys, fixture, "--arch", "80;90", "--driver", "615.71.09")[0] == 0


# ---- excuses that hold only where they hold on the GPU ----
# Each counter-example was measured on an H100 (driver 580.159.04, nvcc 13.0 build): see
# tests/fixtures/cuda/README.md.


def test_a_cutlass_arch_tag_means_this_architecture_or_newer(capsys):
    """GemmKernel<cutlass::arch::Sm80> built for sm_80 only, beside axpy for 75;80;90. CUTLASS's
    ArchTag is kMinComputeCapability 80: on 9.0 the kernel is meant and missing (209 on an H100),
    so K001 and exit 1; on 7.5 the name excludes the GPU (K003 named, exit 0)."""
    fixture = lib("lib_archtag_sm80.so")
    rc, rep = run(capsys, fixture, "--arch", "80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["_Z10GemmKernelIN7cutlass4arch4Sm80EEvPfi"]
    assert k["data"]["fails"] == ["90"] and not findings(rep, "K003")
    rc, rep = run(capsys, fixture, "--gpu", "H100")
    assert rc == 1 and findings(rep, "G009")
    rc, rep = run(capsys, fixture, "--arch", "75;80")
    (k,) = findings(rep, "K003")
    assert rc == 0 and k["data"]["reason"] == "named" and k["data"]["fails"] == ["75"]


def test_a_kernel_compiled_out_of_the_ptx_a_newer_gpu_jit_compiles_fails_there(capsys):
    """bf16_scale under __CUDA_ARCH__ >= 800, built 7.5+PTX;8.0. 9.0 JIT-compiles the compute_75
    PTX, which lacks it (500 on an H100): a gap on 9.0 although sm_80 code carries it. 7.5 runs its
    own sm_75 code, from which the source left it out by design (K003 compiled-out); 8.6 runs the
    sm_80 SASS that carries it."""
    fixture = lib("lib_guard_75ptx_80.so")
    rc, rep = run(capsys, fixture, "--arch", "7.5+PTX;8.0", "--gpu", "H100")
    (g,) = findings(rep, "G009")
    assert rc == 1 and "bf16_scale" in g["message"]
    rc, rep = run(capsys, fixture, "--arch", "75;80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["_Z10bf16_scaleP13__nv_bfloat16i"] and k["data"]["fails"] == ["90"]
    rc, rep = run(capsys, fixture, "--arch", "75;80;86")
    (k,) = findings(rep, "K003")
    assert rc == 0 and k["data"]["reason"] == "compiled-out" and k["data"]["fails"] == ["75"]


def test_a_generic_kernel_left_in_arch_specific_code_fails_where_generic_code_runs(capsys):
    """zero_fill in a TU built only for sm_100a, beside axpy for 90;100: generic code runs on 9.0,
    and the kernel's name names no architecture, so its container's target excuses nothing there
    (209 on an H100): K001, G009 with --gpu H100. Named sm100_zero_fill, it is for 10.0 and newer:
    K002, exit 0."""
    rc, rep = run(capsys, lib("lib_zero_fill_100a.so"), "--arch", "90;100")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["_Z9zero_fillPfi"] and k["data"]["fails"] == ["90"]
    assert not findings(rep, "K002")
    rc, rep = run(capsys, lib("lib_zero_fill_100a.so"), "--gpu", "H100")
    assert rc == 1 and findings(rep, "G009")
    rc, rep = run(capsys, lib("lib_sm100_zero_fill_100a.so"), "--arch", "90;100")
    (k,) = findings(rep, "K002")
    assert rc == 0 and k["data"]["kernels"] == ["_Z15sm100_zero_fillPfi"]


# ---- the project's own dispatch, recorded where it lives ----

ENTRY = re.compile(r'(\[\[tool\.archaudit\.(?:library|ignore-library)\]\]) (.*?reason = "<file:line>")')


def _entry_toml(message: str) -> str:
    """The entry a finding's message ends its fix with, as pyproject.toml lines."""
    m = ENTRY.search(message[:240])
    assert m, f"no entry in the first 240 characters: {message}"
    header, body = m.groups()
    keys = re.findall(r'(\w+) = ("[^"]*")', body)
    return header + "\n" + "".join(f"{k} = {v}\n" for k, v in keys)


@pytest.mark.parametrize(
    ("fixture", "args", "code"),
    [
        ("lib_sm80.so", ("--arch", "80;90"), "G001"),
        ("lib_multiobj.so", ("--arch", "80;90"), "K001"),
        ("lib_axpy_narrow_first.so", ("--arch", "80;90"), "K004"),
        ("lib_zero_fill_100a.so", ("--gpu", "H100"), "G009"),
        ("lib_guard_75ptx_80.so", ("--arch", "75;80;90"), "K001"),
    ],
)
def test_a_failure_a_record_resolves_ends_with_the_entry_to_write(capsys, tmp_path, fixture, args, code):
    """G001, K001, K004 and G009 end, within their first 240 characters, with the exact entry that
    records the host's gate (or dispatch); written into pyproject.toml it resolves the finding."""
    rc, rep = run(capsys, lib(fixture), *args)
    (f,) = findings(rep, code)
    assert rc == 1 and f["message"].index("Fix: ") < 240
    (tmp_path / "pyproject.toml").write_text(
        "[tool.archaudit]\n" + _entry_toml(f["message"]).replace("<file:line>", "the host's gate"), encoding="utf-8"
    )
    rc = main(["check", "-q", "--format", "json", "--config", str(tmp_path / "pyproject.toml"), lib(fixture), *args])
    rep = json.loads(capsys.readouterr().out)
    assert not findings(rep, code) and rc == 0, codes(rep)


def test_a_library_claim_judges_that_library_by_its_own_architectures(capsys, tmp_path):
    """[[tool.archaudit.library]]: lib_sm80.so is judged by "80", and the report names the entry as
    its claim's source; another library keeps the wheel's claim."""
    toml = tmp_path / "pyproject.toml"
    toml.write_text(
        '[tool.archaudit]\n[[tool.archaudit.library]]\npath = "lib_sm80.so"\narch = "80"\n'
        'reason = "ops.py:12 loads it only on 8.x"\n',
        encoding="utf-8",
    )
    rc = main(
        [
            "check",
            "-q",
            "--format",
            "json",
            "--config",
            str(toml),
            lib("lib_sm80.so"),
            lib("lib_sm75.so"),
            "--arch",
            "80;90",
        ]
    )
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1 and [f["subject"] for f in findings(rep, "G001")] == ["lib_sm75.so"]


def test_a_library_group_is_met_where_some_member_runs_the_gpu(capsys, tmp_path):
    """Alternative libraries of which the host loads one (bitsandbytes' per-CUDA-release libraries):
    sm_75-only and sm_80-only members together meet "75;80"; nothing runs 9.0, so "75;80;90" fails."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    shutil.copy(lib("lib_sm75.so"), pkg / "libk_cuda11.so")
    shutil.copy(lib("lib_sm80.so"), pkg / "libk_cuda12.so")
    toml = tmp_path / "pyproject.toml"
    toml.write_text(
        '[tool.archaudit]\n[[tool.archaudit.library-group]]\npaths = ["libk_cuda*.so"]\n'
        'reason = "loader.py picks the library of the CUDA release it finds"\n',
        encoding="utf-8",
    )
    rc = main(["check", "-q", "--format", "json", "--config", str(toml), str(pkg), "--arch", "75;80"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0 and not findings(rep, "G001")
    assert len(rep["suppressed"]) == 2
    assert all("library-group libk_cuda*.so" in s["suppressed_by"] for s in rep["suppressed"])
    rc = main(["check", "-q", "--format", "json", "--config", str(toml), str(pkg), "--arch", "75;80;90"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1 and len(findings(rep, "G001")) == 2


# ---- findings one can act on: verdict and fix in the first 240 characters ----

LINE = 240
FIX_ENDS = {  # where each code's fix ends: the entry it writes, or its advice
    "G001": 'reason = "<file:line>"',
    "K001": 'reason = "<file:line>"',
    "K004": 'reason = "<file:line>"',
    "G009": 'reason = "<file:line>"',
    "C001": "H100)",
}
VERDICT = {"K002": "as designed", "K003": "as designed"}


@pytest.mark.parametrize(
    "args",
    [
        ("lib_sm80.so", "--arch", "80;90"),
        ("lib_multiobj.so", "--arch", "80;90"),
        ("lib_axpy_narrow_first.so", "--arch", "80;90"),
        ("lib_zero_fill_100a.so", "--gpu", "H100"),
        ("lib_sm100_zero_fill_100a.so", "--arch", "90;100"),
        ("lib_archtag_sm80.so", "--arch", "75;80"),
        ("lib_guard_75ptx_80.so", "--arch", "75;80;90"),
        ("lib_sm100_zero_fill_100a.so",),
        ("lib_dispatch.so", "--arch", "80;90"),
        ("lib_thrust_layernorm.so", "--arch", "80;90"),
    ],
)
def test_verdict_and_fix_fit_in_the_first_240_characters(capsys, args):
    """Every G001, K001, K004, G009 and C001 says which claimed GPU fails and its fix (K002/K003:
    which GPU and that it is by design) before the 240th character; examples come after."""
    rc, rep = run(capsys, lib(args[0]), *args[1:])
    seen = [f for t in rep["targets"] for f in t["findings"] if f["code"] in FIX_ENDS or f["code"] in VERDICT]
    assert seen
    for f in seen:
        end = FIX_ENDS.get(f["code"]) or VERDICT[f["code"]]
        assert end in f["message"] and f["message"].index(end) + len(end) <= LINE, f["message"]
