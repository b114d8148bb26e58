"""`archaudit diff OLD NEW`: architectures gained and lost per library between releases.

Fixture wheels are built here from tests/fixtures/cuda/bin libraries; the slow test compares
real torch wheels (the CPU build of 2.13.0 against 2.14.1 with CUDA). Goldens live in
tests/golden/ (regenerate: ARCHAUDIT_REGEN_GOLDEN=1 python -m pytest tests/judge/test_diff.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from archaudit import __version__
from archaudit.cli import main
from archaudit.judge.diff import library_key, match_libraries
from wheels import fetch

HERE = Path(__file__).resolve().parents[1]
BIN = HERE / "fixtures" / "cuda" / "bin"
GOLDEN = HERE / "golden"
SCHEMA = HERE.parent / "src" / "archaudit" / "data" / "report.schema.json"
REGEN = os.environ.get("ARCHAUDIT_REGEN_GOLDEN") == "1"


def make_wheel(directory: Path, name: str, version: str, members: dict[str, str | bytes]) -> Path:
    """A valid wheel (METADATA, WHEEL, RECORD with hashes) whose members are fixture library
    names (copied from tests/fixtures/cuda/bin) or literal bytes."""
    dist_info = f"{name}-{version}.dist-info"
    files: dict[str, bytes] = {}
    for arc, src in members.items():
        files[arc] = src if isinstance(src, bytes) else (BIN / src).read_bytes()
    files[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: archaudit-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n\n"
    )
    record = []
    for arc, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = directory / f"{name}-{version}-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            info = zipfile.ZipInfo(arc, (2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return path


def run_diff(*args: str, out: Path) -> tuple[int, str]:
    rc = main(["diff", "--no-config", "-o", str(out), *args])
    return rc, out.read_text(encoding="utf-8")


def diff_json(*args: str, out: Path) -> tuple[int, dict]:
    rc, text = run_diff("--format", "json", *args, out=out)
    return rc, json.loads(text)


def check_golden(name: str, actual: str) -> None:
    actual = (
        actual.replace(f'"tool_version": "{__version__}"', '"tool_version": "<version>"')
        .replace(f'"version": "{__version__}"', '"version": "<version>"')
        .replace(f'"semanticVersion": "{__version__}"', '"semanticVersion": "<version>"')
    )
    path = GOLDEN / name
    if REGEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{name} missing: run ARCHAUDIT_REGEN_GOLDEN=1 pytest {Path(__file__).name}"
    assert actual == path.read_text(encoding="utf-8"), f"{name} differs; regenerate if intended"


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """Two releases that differ by one target: pkg/libkern.so drops sm_86."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    shared: dict[str, str | bytes] = {
        "pkg/__init__.py": b"",
        "pkg/libhost.so": "lib_host.so",
        "pkg/libmulti.so": "lib_multi.so",
    }
    old = make_wheel(tmp_path / "old", "pkg", "1.0", {**shared, "pkg/libkern.so": "lib_sm80_86.so"})
    new = make_wheel(tmp_path / "new", "pkg", "1.1", {**shared, "pkg/libkern.so": "lib_sm80.so"})
    return old.relative_to(tmp_path), new.relative_to(tmp_path)


def test_one_lost_target(wheels, tmp_path):
    old, new = wheels
    rc, doc = diff_json(str(old), str(new), out=tmp_path / "d.json")
    # sm_86 lost, yet every GPU the old release ran on still runs natively (sm_80 SASS on 8.6):
    # a loss that costs no GPU passes, and is reported
    assert rc == 0 and doc["passed"]
    # wheel-wide nothing is lost (libmulti.so still carries sm_86): only per library it shows
    assert doc["lost"] == [] and doc["gained"] == []
    kern = next(d for d in doc["libraries"] if d["path"] == "pkg/libkern.so")
    assert kern["change"] == "changed" and kern["matched_by"] == "path"
    assert kern["old"] == ["sm_80", "sm_86"] and kern["new"] == ["sm_80"]
    assert [x["target"] for x in kern["lost"]] == ["sm_86"]
    # sm_80 SASS still runs on 8.6 GPUs (same major, lower minor): named, yet still a loss
    assert kern["lost"][0]["now"] == "native"
    assert "A10" in kern["lost"][0]["gpus"]
    assert kern["worse"] == [] and kern["fails"] is False
    assert kern["new_bytes"] < kern["old_bytes"]
    multi = next(d for d in doc["libraries"] if d["path"] == "pkg/libmulti.so")
    assert multi["change"] == "unchanged" and not multi["lost"] and not multi["gained"]
    assert all(d["path"] != "pkg/libhost.so" for d in doc["libraries"])  # no device code either side


@pytest.fixture
def costly(tmp_path, monkeypatch):
    """Two releases where pkg/libkern.so drops sm_90 and compute_90: 9.0 and newer GPUs that
    ran it (natively, or through the JIT) no longer run it."""
    monkeypatch.chdir(tmp_path)
    for d in ("old", "new"):
        (tmp_path / d).mkdir(exist_ok=True)
    old = make_wheel(tmp_path / "old", "pkg", "1.0", {"pkg/libkern.so": "lib_example_kernels.so"})
    new = make_wheel(tmp_path / "new", "pkg", "1.1", {"pkg/libkern.so": "lib_sm80.so"})
    return old.relative_to(tmp_path), new.relative_to(tmp_path)


def test_a_loss_that_costs_a_gpu_fails_and_names_the_gpus(costly, tmp_path):
    old, new = costly
    rc, doc = diff_json(str(old), str(new), out=tmp_path / "d.json")
    assert rc == 1 and not doc["passed"]
    (kern,) = doc["libraries"]
    assert kern["fails"] is True
    worse = {w["gpu"]: (w["was"], w["now"]) for w in kern["worse"]}
    assert worse["9.0"] == ("native", "none") and worse["12.0"] == ("jit", "none")
    assert "8.0" not in worse and "8.6" not in worse
    rc, text = run_diff(str(old), str(new), out=tmp_path / "d.txt")
    assert "✗ runs worse on 9.0 (" in text and "native -> none" in text


def test_loss_allowed_by_flag_and_config(costly, tmp_path):
    old, new = costly
    rc, text = run_diff("--allow-loss", str(old), str(new), out=tmp_path / "d.txt")
    assert rc == 0 and "lost sm_90" in text and "(allowed)" in text
    (tmp_path / "pyproject.toml").write_text("[tool.archaudit]\nallow-loss = true\n")
    assert main(["diff", "-o", "d2.txt", str(old), str(new)]) == 0
    assert main(["diff", "--no-config", "-o", "d3.txt", str(old), str(new)]) == 1


def test_gain_passes(wheels, tmp_path):
    old, new = wheels
    rc, doc = diff_json(str(new), str(old), out=tmp_path / "d.json")
    assert rc == 0 and doc["gained"] == doc["lost"] == []
    kern = next(d for d in doc["libraries"] if d["path"] == "pkg/libkern.so")
    assert kern["gained"] == ["sm_86"] and kern["lost"] == []


def test_golden_outputs(wheels, tmp_path):
    old, new = wheels
    for fmt, ext in (("text", "txt"), ("json", "json"), ("markdown", "md"), ("sarif", "sarif.json")):
        rc, text = run_diff("--format", fmt, str(old), str(new), out=tmp_path / f"d.{ext}")
        assert rc == 0
        check_golden(f"diff_one_target.{ext}", text)


def test_sarif_names_each_lost_library_as_a_member_of_the_new_wheel(wheels, tmp_path):
    from reference_tools import sarif_validator

    old, new = wheels  # pkg/libkern.so drops sm_86, whose GPUs still run its sm_80 code natively: a note
    rc, text = run_diff("--format", "sarif", str(old), str(new), out=tmp_path / "d.sarif")
    log = json.loads(text)
    sarif_validator().validate(log)
    (run,) = log["runs"]
    (result,) = run["results"]
    assert rc == 0 and (result["ruleId"], result["level"]) == ("diff-dropped", "note")
    assert result["message"]["text"].startswith("pkg/libkern.so: lost sm_86 (still runs natively on A10")
    where = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert where["uri"] == "pkg/libkern.so"
    parent = run["artifacts"][run["artifacts"][where["index"]]["parentIndex"]]
    assert parent["location"]["uri"] == str(new).replace(os.sep, "/")
    # a loss that costs GPUs (Turing and Volta lose their code): an error, a warning under --allow-loss
    (tmp_path / "costly").mkdir()
    worse = make_wheel(tmp_path / "costly", "pkg", "1.2", {"pkg/libkern.so": "lib_sm80.so"})
    older = make_wheel(tmp_path / "costly", "pkg", "0.9", {"pkg/libkern.so": "lib_multi.so"})
    for allow, level, code in ((False, "error", 1), (True, "warning", 0)):
        rc, text = run_diff(
            "--format", "sarif", *(["--allow-loss"] if allow else []), str(older), str(worse), out=tmp_path / "c.sarif"
        )
        log = json.loads(text)
        sarif_validator().validate(log)
        (result,) = log["runs"][0]["results"]
        assert rc == code and (result["ruleId"], result["level"]) == ("diff-lost", level)
    rc, text = run_diff("--format", "sarif", str(old), "missing.whl", out=tmp_path / "d.sarif")
    (run,) = json.loads(text)["runs"]
    assert rc == 2 and run["invocations"][0]["executionSuccessful"] is False
    assert {r["ruleId"] for r in run["results"]} == {"diff-unverified"}


def test_jit_fallback_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old = make_wheel(tmp_path, "jit", "1.0", {"jit/libk.so": "lib_example_kernels.so"})
    (tmp_path / "n").mkdir()
    new = make_wheel(tmp_path / "n", "jit", "2.0", {"jit/libk.so": "lib_ptx90.so"})
    rc, doc = diff_json(str(old), str(new), out=tmp_path / "d.json")
    assert rc == 1
    lost = {x["target"]: x["now"] for x in doc["libraries"][0]["lost"]}
    assert lost == {"sm_80": "none", "sm_90": "jit"}
    rc, text = run_diff(str(old), str(new), out=tmp_path / "d.txt")
    assert "sm_90 (now only through PTX JIT" in text and "sm_80 (no longer runs" in text


def test_libraries_added_removed_renamed_and_emptied(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old = make_wheel(
        tmp_path / "a",
        "mix",
        "1.0",
        {
            "mix/libver.so.1": "lib_sm80_86.so",  # renamed by version suffix
            "mix/libhash-0a1b2c3d.so": "lib_sm75.so",  # renamed by auditwheel hash
            "mix/libgone.so": "lib_sm90a.so",  # removed
            "mix/libemptied.so": "lib_sm80.so",  # still shipped, device code gone
        },
    )
    new = make_wheel(
        tmp_path / "b",
        "mix",
        "2.0",
        {
            "mix/libver.so.2": "lib_sm80_86.so",
            "mix/libhash-9f8e7d6c.so": "lib_sm75.so",
            "mix/libemptied.so": "lib_host.so",
            "mix/libnew.so": "lib_ptx90.so",  # added
            "mix/libhostonly.so": "lib_host.so",  # added, no device code: not listed
        },
    )
    rc, doc = diff_json(str(old.relative_to(tmp_path)), str(new.relative_to(tmp_path)), out=tmp_path / "d.json")
    assert rc == 1
    by = {d["path"]: d for d in doc["libraries"]}
    assert set(by) == {
        "mix/libver.so.2",
        "mix/libhash-9f8e7d6c.so",
        "mix/libgone.so",
        "mix/libemptied.so",
        "mix/libnew.so",
    }
    assert by["mix/libver.so.2"]["matched_by"] == "name" and by["mix/libver.so.2"]["old_path"] == "mix/libver.so.1"
    assert by["mix/libver.so.2"]["change"] == "unchanged"
    assert by["mix/libhash-9f8e7d6c.so"]["matched_by"] == "name"
    assert by["mix/libgone.so"]["change"] == "removed" and by["mix/libgone.so"]["new_path"] is None
    assert [x["target"] for x in by["mix/libgone.so"]["lost"]] == ["sm_90a"]
    assert by["mix/libemptied.so"]["change"] == "removed" and by["mix/libemptied.so"]["new_path"] == "mix/libemptied.so"
    assert by["mix/libnew.so"]["change"] == "added" and by["mix/libnew.so"]["gained"] == ["compute_90"]
    _, text = run_diff(str(old.relative_to(tmp_path)), str(new.relative_to(tmp_path)), out=tmp_path / "d.txt")
    assert "- mix/libgone.so: library removed; lost sm_90a" in text
    assert "- mix/libemptied.so: no device code any more; lost sm_80" in text
    assert "+ mix/libnew.so: new library; gained compute_90" in text
    assert "2 libraries unchanged" in text
    rc, text = run_diff("-v", str(old.relative_to(tmp_path)), str(new.relative_to(tmp_path)), out=tmp_path / "v.txt")
    assert "= mix/libver.so.1 -> mix/libver.so.2: unchanged: sm_80 sm_86" in text


def test_library_key_and_matching():
    assert library_key("a/b/libcublas.so.12.1.3") == "libcublas.so"
    assert library_key("libgomp-a34b3233.so.1") == "libgomp.so"
    assert library_key("pkg\\lib\\foo.dll") == "foo.dll"
    assert library_key("libfoo.so") == "libfoo.so"
    pairs = match_libraries(
        ["x/libfoo.so.1", "x/libbar.so", "x/a/libdup.so.1", "x/b/libdup.so.1"],
        ["x/libfoo.so.2", "x/libbar.so", "x/c/libdup.so.2", "y/libnew.so"],
    )
    assert ("x/libbar.so", "x/libbar.so", "path") in pairs
    assert ("x/libfoo.so.1", "x/libfoo.so.2", "name") in pairs
    # an ambiguous name is not guessed: two old libdup and one new libdup stay unmatched
    assert ("x/a/libdup.so.1", None, "") in pairs and ("x/b/libdup.so.1", None, "") in pairs
    assert (None, "x/c/libdup.so.2", "") in pairs and (None, "y/libnew.so", "") in pairs


def test_directory_against_wheel(wheels, tmp_path):
    """An unpacked tree (paths relative to it) matches wheel members by file name."""
    old, new = wheels
    tree = tmp_path / "tree" / "lib"
    tree.mkdir(parents=True)
    (tree / "libkern.so").write_bytes((BIN / "lib_sm80_86.so").read_bytes())
    (tree / "libmulti.so").write_bytes((BIN / "lib_multi.so").read_bytes())
    rc, doc = diff_json("tree", str(new), out=tmp_path / "d.json")
    assert rc == 0 and doc["old"]["kind"] == "directory"
    kern = next(d for d in doc["libraries"] if d["path"] == "pkg/libkern.so")
    assert kern["old_path"] == "lib/libkern.so" and kern["matched_by"] == "name"
    assert [x["target"] for x in kern["lost"]] == ["sm_86"]


def test_installed_distribution_against_new_wheel(wheels, tmp_path):
    """OLD as an installed distribution (found through importlib.metadata / RECORD)."""
    old, new = wheels
    site = tmp_path / "site"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(old),
        ],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        pytest.skip(f"pip cannot install a local wheel here: {pip.stderr[-300:]}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "archaudit", "diff", "--no-config", "--format", "json", "pkg", str(new)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["old"]["kind"] == "distribution" and doc["old"]["distribution"] == "pkg-1.0"
    kern = next(d for d in doc["libraries"] if d["path"] == "pkg/libkern.so")
    assert kern["matched_by"] == "path" and [x["target"] for x in kern["lost"]] == ["sm_86"]


def test_unusable_input_exits_2(wheels, tmp_path):
    old, _ = wheels
    rc, text = run_diff(str(old), "no-such.whl", out=tmp_path / "d.txt")
    assert rc == 2 and "cannot read" in text and "unusable input" in text
    assert "lost" not in text.split("\n", 2)[2]
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    bad.write_bytes(b"PK\x03\x04 truncated")
    rc, doc = diff_json(str(old), str(bad), out=tmp_path / "d.json")
    assert rc == 2 and doc["new"]["unusable"]


def test_unverifiable_library_fails_closed(wheels, tmp_path):
    old, _ = wheels
    blob = bytearray((BIN / "lib_sm80.so").read_bytes())
    del blob[len(blob) // 2 :]  # a truncated ELF
    (tmp_path / "c").mkdir()
    new = make_wheel(tmp_path / "c", "pkg", "1.2", {"pkg/libkern.so": bytes(blob), "pkg/libmulti.so": "lib_multi.so"})
    rc, doc = diff_json("--allow-loss", str(old), str(new), out=tmp_path / "d.json")
    assert rc == 1
    kern = next(d for d in doc["libraries"] if d["path"] == "pkg/libkern.so")
    assert kern["problems"], kern


def test_json_validates_against_schema(wheels, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    old, new = wheels
    for args in ((str(old), str(new)), (str(new), str(old)), (str(old), "missing.whl")):
        _, doc = diff_json(*args, out=tmp_path / "d.json")
        assert doc["schema"] == "archaudit-diff"
        errors = list(validator.iter_errors(doc))
        assert not errors, errors[0]


# ---- real wheels ----


@pytest.mark.census  # torch CPU and CUDA: 192 MB and 555 MB
def test_torch_cpu_to_cuda(tmp_path):
    cpu = fetch("torch", "2.13.0+cpu")
    cuda = fetch("torch", "2.14.1")
    rc, doc = diff_json(str(cpu), str(cuda), out=tmp_path / "up.json")
    assert rc == 0 and doc["lost"] == []
    assert {"sm_80", "sm_90", "sm_100", "sm_120"} <= set(doc["gained"])
    added = {d["path"] for d in doc["libraries"] if d["change"] == "added"}
    assert "torch/lib/libtorch_cuda.so" in added
    assert all(d["change"] == "added" for d in doc["libraries"])
    rc, doc = diff_json(str(cuda), str(cpu), out=tmp_path / "down.json")
    assert rc == 1 and set(doc["lost"]) >= {"sm_80", "sm_90"}
    removed = next(d for d in doc["libraries"] if d["path"] == "torch/lib/libtorch_cuda.so")
    assert removed["change"] == "removed" and removed["old_bytes"] > 100_000_000 and removed["new_bytes"] == 0


def test_curand_10_4_0_to_10_4_5_loses_targets_that_cost_no_gpu_and_reports_the_driver_floor(tmp_path):
    """cuRAND 10.4.5.25 drops sm_103, sm_121 and compute_121, each still run natively (sm_100 on
    10.3, sm_120 on 12.1): no GPU the old release ran on runs worse, so the diff passes. Both are
    cuRAND for CUDA 13 (their bytes hold CURAND_DETAIL_OVERRIDE_MPCOUNT): the driver floor of each
    is its vendor's documented minimum for CUDA 13, 580.65.06, not the 615.71.09 of 10.4.5's
    compute_75 PTX (ISA 9.4), which a GPU with its SASS never JIT-compiles."""
    old = fetch("nvidia-curand", "10.4.0.35")
    new = fetch("nvidia-curand", "10.4.5.25")
    rc, doc = diff_json(str(old), str(new), out=tmp_path / "d.json")
    assert rc == 0 and doc["passed"]
    (lib,) = [d for d in doc["libraries"] if d["lost"]]
    assert {x["target"] for x in lib["lost"]} == {"sm_103", "sm_121", "compute_121"}
    assert all(x["now"] == "native" for x in lib["lost"]) and lib["worse"] == [] and lib["fails"] is False
    assert (doc["old"]["driver_floor"], doc["new"]["driver_floor"]) == ("580.65.06", "580.65.06")
    rc, text = run_diff(str(old), str(new), out=tmp_path / "d.txt")
    assert rc == 0 and "615.71.09" not in text
    assert "✓ no GPU runs worse" in text
