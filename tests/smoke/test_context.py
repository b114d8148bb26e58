"""What every probe gets (smoke/context.py): the distribution's files chosen by content as check
chooses them (on the nvcc-built fixtures), whether a target needs a framework, and the rows made
from a child's outcome, where an observation never becomes a verdict by itself."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from archaudit.smoke import child
from archaudit.smoke.context import ProbeContext
from archaudit.smoke.report import FAIL, PASS, SKIP
from helpers import CUDA_BIN
from smoke_helpers import probe_context


def ctx(tmp_path: Path, **kw: Any) -> ProbeContext:
    return probe_context(tmp_path, **{"distribution": "demo", "version": "1.0", "location": str(CUDA_BIN), **kw})


def test_files_are_chosen_by_their_bytes_and_shared_libraries_by_their_elf_type(tmp_path):
    renamed = tmp_path / "plugin.bin"  # a shared library whatever its name says
    shutil.copy(CUDA_BIN / "lib_sm80.so", renamed)
    names = ("lib_sm80.so", "kern_sm80.cubin", "kern.fatbin", "kern.o", "NVCC_VERSION", "lib_sm80.so")
    files = tuple(str(CUDA_BIN / n) for n in names) + (str(renamed), str(tmp_path / "gone.so"))
    c = ctx(tmp_path, files=files)
    assert [c.display(f) for f in c.device_code_files()] == sorted(
        ["lib_sm80.so", "kern_sm80.cubin", "kern.fatbin", "kern.o", str(renamed)]
    )  # each once, the version text and the missing file left out, named relative to site-packages
    # the cubin (an executable ELF) and the object file (relocatable) are device code, not libraries
    assert [c.display(f) for f in c.shared_libraries()] == sorted(["lib_sm80.so", str(renamed)])


def test_a_target_depends_on_a_framework_it_is_or_declares_under_any_marker(tmp_path):
    c = ctx(
        tmp_path,
        distribution="Demo_Kernels",
        requires=("Torch>=2.4; extra == 'gpu'", "jax[cuda12] ; python_version > '3.9'", "nvidia.cublas-cu12 (>=12)"),
    )
    assert c.depends_on("torch") and c.depends_on("jax") and c.depends_on("nvidia-cublas-cu12")
    assert c.depends_on("demo-kernels")  # itself, its name normalised
    assert not c.depends_on("tor") and not c.depends_on("executorch")
    assert c.wanted("model-torch", "torch") and not c.wanted("model-executorch", "executorch")
    assert ctx(tmp_path, selected=("model-executorch",)).wanted("model-executorch", "executorch")
    row = c.not_wanted("model-executorch", "executorch")
    assert (row.status, row.subject) == (SKIP, "Demo_Kernels")
    assert row.reason == "Demo_Kernels neither is nor depends on executorch (--probe model-executorch runs it anyway)"


def test_a_file_is_scanned_once_however_many_probes_ask(tmp_path):
    c = ctx(tmp_path)
    path = str(CUDA_BIN / "lib_sm80.so")
    first = c.scan(path)
    assert c.scan(path) is first
    assert [e.target for box in first.containers for e in box.entries] and first.path.endswith("lib_sm80.so")


def test_an_observation_or_a_missing_report_is_never_a_pass(tmp_path):
    c = ctx(tmp_path)
    missing = c.row("load", "lib.so", None)
    assert (missing.status, missing.reason) == (FAIL, "the child never reported this item")
    observed = c.row("load", "lib.so", child.Outcome(child.OBS, "", 0.5, details={"loaded": True}))
    assert observed.status == FAIL and "without a judgement" in observed.reason
    trusted = child.Outcome(PASS, "loaded", 0.5, details={"a": 1, "traceback": "Traceback ..."})
    row = c.row("load", "lib.so", trusted, b=2)
    assert (row.status, row.details, row.stderr_tail) == (PASS, (("a", 1), ("b", 2)), "Traceback ...")


def test_a_skip_for_want_of_a_gpu_fails_under_require_gpu(tmp_path):
    relaxed, strict = ctx(tmp_path), ctx(tmp_path, require_gpu=True)
    assert relaxed.gpu_skip("device-load", "lib.so", "no GPU").status == SKIP
    row = strict.gpu_skip("device-load", "lib.so", "no GPU")
    assert (row.status, row.reason) == (FAIL, "--require-gpu: this must run on a GPU, but no GPU")
    # a skip that is not about a GPU stays a skip under --require-gpu
    assert strict.row("model-torch", "x", child.Outcome(SKIP, "torch is not importable", 0.1)).status == SKIP
    seen = child.Outcome(child.OBS, "", 2.0, signal="SIGSEGV", stderr_tail="Segmentation fault", died=True)
    assert strict.verdict("model-torch", "x", seen, SKIP, "no GPU", gpu=True).status == FAIL
    passed = strict.verdict("model-torch", "x", seen, PASS, "matched", device=None, shape=[2])
    assert (passed.stderr_tail, passed.details, passed.duration) == ("", (("shape", [2]),), 2.0)
    failed = strict.verdict("model-torch", "x", seen, FAIL, "killed")
    assert (failed.signal, failed.stderr_tail) == ("SIGSEGV", "Segmentation fault")


def test_each_death_outside_an_item_is_a_failed_row(tmp_path):
    deaths = [child.Death("the child interpreter was killed by SIGABRT", "SIGABRT", "abort", 1.5)]
    run = child.TaskRun([], [], deaths, 1.5)
    (row,) = ctx(tmp_path).death_rows("load", run, "demo")
    assert (row.status, row.reason, row.signal, row.stderr_tail) == (FAIL, deaths[0].reason, "SIGABRT", "abort")
