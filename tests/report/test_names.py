"""Mangled kernel names in the default text: short and readable with or without c++filt, and JSON
keeps them as the binary has them (issue 27 item 8)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

import archaudit
from archaudit.report.names import MANGLED, readable, short_names
from archaudit.report.render import render_json, render_text

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"


def _kernels(lib: str) -> list[str]:
    """The kernel names archaudit reads from an nvcc-built fixture."""
    doc = json.loads(render_json(archaudit.check(BIN / lib), detail="kernels"))
    return sorted(
        {
            k
            for t in doc["targets"]
            for v in t["libraries"]
            for c in v.get("container_list", [])
            for e in c["entries"]
            for k in (e.get("kernels") or [])
        }
    )


def test_real_kernel_names_read_the_same_with_and_without_cxxfilt():
    names = _kernels("lib_axpy_narrow_first.so") + _kernels("lib_all.so")
    assert {"_Z4axpyIfEvT_PKS0_PS0_i", "_Z4axpyfPKfPfi"} <= set(names)
    pure = short_names(names, use_cxxfilt=False)
    assert pure["_Z4axpyIfEvT_PKS0_PS0_i"] == "axpy<…>" and pure["_Z4axpyfPKfPfi"] == "axpy"
    if shutil.which("c++filt"):
        assert short_names(names) == pure


def test_without_a_demangler_on_path_nothing_fails(monkeypatch):
    monkeypatch.setenv("PATH", "")
    long = "_ZN7cutlass7Kernel2INS_4gemm6kernel4GemmI" + "Li128ELi256E" * 210 + "EEEEvNT_6ParamsE"
    unread = "_ZNSt6vectorI" + "Li1E" * 20 + "E9push_backEv"  # a substitution the pure reading stops at
    assert short_names([long, unread]) == {long: "cutlass::Kernel2<…>", unread: unread[:39] + "…"}


@pytest.mark.parametrize("use_cxxfilt", [True, False])
def test_a_finding_naming_a_2_5_kb_kernel_is_one_short_line_and_json_keeps_the_name(use_cxxfilt, monkeypatch):
    """A K003-like line naming a cuBLAS-sized template kernel: the default text shows
    `cutlass::Kernel2<…>`, -v and JSON the mangled name whole."""
    if not use_cxxfilt:
        monkeypatch.setenv("PATH", "")
    name = "_ZN7cutlass7Kernel2INS_4gemm6kernel4GemmI" + "Li128ELi256E" * 210 + "EEEEvNT_6ParamsE"
    assert len(name) > 2500
    report = archaudit.check(BIN / "lib_sm80.so", arch="80;90")
    t = report.targets[0]
    f = t.findings[0]
    named = dataclasses.replace(f, message=f"lib_sm80.so: kernel {name} carries no sm_90 code")
    report = dataclasses.replace(report, targets=(dataclasses.replace(t, findings=(named, *t.findings[1:])),))
    text = render_text(report)
    assert "kernel cutlass::Kernel2<…> carries no sm_90 code" in text and "_Z" not in text
    assert name in render_text(report, verbose=True)
    assert name in render_json(report)


def test_names_inside_words_are_left_alone():
    assert readable(["lib_Zeta.so and foo_Z4axpyv"]) == ["lib_Zeta.so and foo_Z4axpyv"]
    assert MANGLED.findall("(_Z4axpyv, _Z4axpyfPKfPfi)") == ["_Z4axpyv", "_Z4axpyfPKfPfi"]
