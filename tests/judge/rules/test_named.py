"""archaudit.judge.rules.named: the answers for GPUs named with --gpu (G008, G009) and on_gpu,
smoke's question for one GPU, on libraries built by hand (builders in helpers.py).
"""

from __future__ import annotations

import json

import pytest

from archaudit.cli import main
from archaudit.findings import ERROR, INFO
from archaudit.gpus.catalog import resolve as gpus
from archaudit.judge import rules
from archaudit.judge.policy import AmdGpu, Policy
from archaudit.judge.rules import on_gpu
from archaudit.model import HIP
from helpers import (
    CUDA_BIN,
    KEPLER_RUNTIME,
    KERN,
    UNLINKED,
    amd,
    box,
    found,
    lib,
    ptx,
    report,
    sass,
    unread_sass,
    whole,
)


def test_g008_g009_named_gpus():
    rep = report(lib(box(sass("sm_80"))), gpus=(("A100", (8, 0)), ("H100", (9, 0))))
    assert [(f.code, f.get("runs")) for f in rep.findings if f.code in ("G008", "G009")] == [
        ("G008", "native"),
        ("G009", "none"),
    ]


def test_g008_g009_named_amd_gpus():
    rep = report(
        lib(box(amd("gfx942"), role=HIP)),
        arch=None,
        amd_claim=("gfx942",),
        amd_gpus=(AmdGpu("MI300X", "gfx942"), AmdGpu("MI250X", "gfx90a")),
    )
    assert [(f.code, f.get("gpu")) for f in rep.findings if f.code in ("G008", "G009")] == [
        ("G008", "MI300X"),
        ("G009", "MI250X"),
    ]


def test_g009_a_named_gpu_on_which_some_kernels_cannot_run():
    """TensorFlow 2.20 on an RTX 5090: its plain compute_90 PTX JITs there, the containers whose PTX
    text says .target sm_90a do not (CUDA_ERROR_INVALID_PTX)."""
    tf = lib(
        box(sass("sm_80", "_Z1av"), ptx("compute_90", "_Z1av")),
        box(sass("sm_80", "_Z7fusionv"), ptx("compute_90", "_Z7fusionv", text="sm_90a")),
    )
    rep = report(tf, arch="80;90", gpus=(("RTX 5090", (12, 0)), ("H100", (9, 0))))
    assert {f.get("gpu"): f.code for f in rep.findings if f.code in ("G008", "G009")} == {
        "RTX 5090": "G009",
        "H100": "G008",
    }
    assert "1 kernel cannot run there" in found(rep, "G009")[0].message


def test_g009_names_code_not_loadable_alone():
    rep = report(lib(box(UNLINKED)), arch=None, gpus=(("H200", (9, 0)),))
    (g,) = found(rep, "G009")
    assert "not loadable alone" in g.message and rep.exit_code == 1


def test_on_gpu_is_checks_answer_for_one_gpu():
    """What smoke's device-load asks for the GPU it ran on: the same rule as check --gpu."""
    assert rules.on_gpu(lib(KERN, box(sass("sm_80", "_Z3mulv"))), "H200", (9, 0)).code == "G009"  # type: ignore[union-attr]
    assert rules.on_gpu(lib(KERN), "H200", (9, 0)).code == "G008"  # type: ignore[union-attr]
    assert rules.on_gpu(lib(box(amd("gfx90a"), role=HIP)), "H200", (9, 0)) is None


def test_on_gpu_judges_with_the_policy_it_is_given():
    """smoke asks on_gpu with the run's policy: under --strict-kernels a kernel that carries only
    sm_90a code cannot run on an A100, and the answer must say so (G009), not the default's G008."""
    hopper = lib(box(sass("sm_80", "_Z1kv"), sass("sm_90", "_Z1kv")), box(sass("sm_90a", "_Z11sm90_hopperv")))
    answer = on_gpu(hopper, "A100", (8, 0))
    assert answer is not None and answer.code == "G008"
    strict = on_gpu(hopper, "A100", (8, 0), Policy(strict_kernels=True))
    assert strict is not None and strict.code == "G009" and "sm_90a" in strict.message


def test_g008_g009_for_amd_gpus_say_how_the_code_runs():
    """Code for gfx90a with XNACK on: an MI250X, which ships with XNACK off, does not run it and
    the finding names the setting that would (HSA_XNACK=1); a GPU named gfx90a:xnack+ runs it in
    either SRAMECC setting; an MI300X (gfx942) not at all; a GPU whose setting is not recorded
    (gfx90a) must run it in every setting. The index's runs-on table reads `gpu` and `runs`."""
    _, amd_gpus = gpus(["MI250X", "gfx90a:xnack+", "MI300X", "gfx90a"])
    rep = report(
        lib(box(amd("gfx90a:xnack+"), role=HIP), needed=()), arch=None, amd_claim=("gfx90a:xnack+",), amd_gpus=amd_gpus
    )
    assert [whole(f) for f in rep.findings] == [
        (
            "G008",
            INFO,
            "libx.so",
            "libx.so on gfx90a:xnack+ (gfx90a:xnack+): native",
            {"gpu": "gfx90a:xnack+", "runs": "native", "setting": None},
        ),
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on MI250X (gfx90a:sramecc+:xnack-, as it ships): not at all. Fix: build "
            "for gfx90a (--offload-arch=gfx90a:sramecc+:xnack-). It runs only as "
            "gfx90a:sramecc+:xnack+, gfx90a:sramecc-:xnack+, which is not how MI250X ships: "
            "that takes xnack (HSA_XNACK=1)",
            {"gpu": "MI250X", "runs": "none", "setting": "gfx90a:sramecc+:xnack-"},
        ),
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on MI300X (gfx942:sramecc+:xnack-, as it ships): not at all. Fix: build "
            "for gfx942 (--offload-arch=gfx942:sramecc+:xnack-)",
            {"gpu": "MI300X", "runs": "none", "setting": "gfx942:sramecc+:xnack-"},
        ),
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on gfx90a (gfx90a): only as gfx90a:sramecc+:xnack+, "
            "gfx90a:sramecc-:xnack+, not as gfx90a:sramecc+:xnack-, gfx90a:sramecc-:xnack-. "
            "Fix: build for gfx90a (--offload-arch=gfx90a). How gfx90a is set up is not "
            "recorded, so every setting must run (name one: --gpu gfx90a:sramecc+:xnack+)",
            {"gpu": "gfx90a", "runs": "native", "setting": None},
        ),
    ]
    assert rep.exit_code == 1


def test_g008_g009_for_nvidia_gpus_say_how_the_code_runs():
    rep = report(
        lib(box(sass("sm_80", "_Z1av"), ptx("compute_80", "_Z1av"))),
        arch=None,
        gpus=(("A100", (8, 0)), ("H100", (9, 0))),
    )
    assert [whole(f) for f in rep.findings if f.code in ("G008", "G009")] == [
        ("G008", INFO, "libx.so", "libx.so on A100 (8.0): native", {"gpu": "A100", "runs": "native"}),
        ("G008", INFO, "libx.so", "libx.so on H100 (9.0): only through PTX JIT", {"gpu": "H100", "runs": "jit"}),
    ]
    rep = report(
        lib(box(sass("sm_35", toolkit=(12, 0))), needed=KEPLER_RUNTIME), arch=None, gpus=(("Tesla K80", (3, 7)),)
    )
    assert [whole(f) for f in rep.findings] == [
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on Tesla K80 (3.7): not at all (its code needs a newer driver than any "
            "for this GPU). Fix: build for sm_37",
            {"gpu": "Tesla K80", "runs": "none"},
        )
    ]
    rep = report(lib(box(sass("sm_80", "_Z1av"))), arch=None, gpus=(("H100", (9, 0)),))
    assert found(rep, "G009")[0].message == (
        "libx.so on H100 (9.0): not at all. Fix: build for sm_90, or record its "
        'gate: [[tool.archaudit.library]] path = "libx.so" arch = "80" '
        'reason = "<file:line>". It carries only sm_80'
    )


def test_on_gpu_answers_for_the_nvidia_gpu_alone():
    """smoke's policy may name AMD GPUs too; on_gpu's answer is about the one NVIDIA GPU it ran on."""
    pol = Policy(amd_gpus=(AmdGpu("MI300X", "gfx942"),))
    assert on_gpu(lib(box(amd("gfx942"), role=HIP), needed=()), "H200", (9, 0), pol) is None
    g = on_gpu(lib(box(sass("sm_90"))), "H200", (9, 0), pol)
    assert g is not None and (g.code, g.get("gpu"), g.message) == ("G008", "H200", "libx.so on H200 (9.0): native")


def test_g009_counts_containers_whose_kernels_were_not_read_as_what_they_are():
    """--fast reads no kernel names: an sm_80-only container unread beside KERN is 'a container
    whose kernels were not read' on an H100, never '0 kernels in 1 container'; with names, kernels."""
    rep = report(lib(KERN, box(unread_sass("sm_80"))), arch=None, gpus=(("H100", (9, 0)),))
    (g,) = found(rep, "G009")
    assert (
        "on H100 (9.0): 1 container whose kernels were not read cannot run there (native for the rest)" in g.message
        and "They carry only sm_80" in g.message
    )
    rep = report(lib(KERN, box(unread_sass("sm_80")), box(sass("sm_80", "_Z1av"))), arch=None, gpus=(("H100", (9, 0)),))
    (g,) = found(rep, "G009")
    assert ": 1 kernel in 1 container and 1 container whose kernels were not read cannot run there" in g.message


def _gpu_answer(tmp_path, capsys, library: str, entry: str, *args: str) -> tuple[int, list[dict]]:
    """check --gpu H100 of an nvcc-built fixture under one [tool.archaudit] entry (or none)."""
    toml = tmp_path / "pyproject.toml"
    toml.write_text(f"[tool.archaudit]\n{entry}\n", encoding="utf-8")
    rc = main(
        ["check", "-q", "--format", "json", "--config", str(toml), str(CUDA_BIN / library), "--gpu", "H100", *args]
    )
    rep = json.loads(capsys.readouterr().out)
    return rc, [f for t in rep["targets"] for f in t["findings"]]


@pytest.mark.parametrize(("library", "code"), [("lib_axpy_narrow_first.so", "K004"), ("lib_multiobj.so", "K001")])
def test_g008_the_answer_to_gpu_honours_a_recorded_ignore_library_entry(tmp_path, capsys, library, code):
    """An ignore-library K004 (K001) entry answers the claim's finding; the answer to --gpu
    honours it too (G008, naming it), and it is not stale (no X001) though no claim produced the
    finding. Counter-example: the same entry for another library leaves G009."""
    entry = f'[[tool.archaudit.ignore-library]]\ncode = "{code}"\nlibrary = "{library}"\nreason = "ops.cu:12 picks"'
    rc, got = _gpu_answer(tmp_path, capsys, library, entry)
    (answer,) = [f for f in got if f["code"] in ("G008", "G009")]
    assert rc == 0 and answer["code"] == "G008" and "X001" not in {f["code"] for f in got}
    assert f"1 kernel set aside by ignore-library {code} for {library} (ops.cu:12 picks)" in answer["message"]
    assert answer["data"]["recorded"] == [f"ignore-library {code} for {library} (ops.cu:12 picks)"]
    rc, got = _gpu_answer(tmp_path, capsys, library, entry.replace(library, "libother.so"))
    assert rc == 1 and [f["code"] for f in got if f["code"] in ("G008", "G009")] == ["G009"]
    assert "X001" not in {f["code"] for f in got}  # no claim judged: nothing says it is unused
    rc, got = _gpu_answer(tmp_path, capsys, library, entry.replace(library, "libother.so"), "--arch", "80;90")
    assert rc == 1 and {code, "X001"} <= {f["code"] for f in got}
