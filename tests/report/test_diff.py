"""The renderings of a DiffReport: gpu_example 1.0 (sm_80, sm_90, compute_90) against a 1.1
whose libkernels.so lost sm_90 and compute_90, and against itself; each format says the same
losses, the same verdict, and what --allow-loss and -v change."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

import pytest

from archaudit.core import example_wheel
from archaudit.judge.diff import DiffReport, compare
from archaudit.model import TargetInventory
from archaudit.read.artifacts import inventory
from archaudit.report import diff
from archaudit.report.view import RenderOptions
from helpers import lossy_release


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> tuple[TargetInventory, TargetInventory]:
    new = lossy_release(tmp_path_factory.mktemp("diff") / "gpu_example-1.1-py3-none-linux_x86_64.whl")
    return inventory(example_wheel()), inventory(str(new))


def _lossy(releases: tuple[TargetInventory, TargetInventory], allow_loss: bool = False) -> DiffReport:
    return compare(*releases, allow_loss=allow_loss)


def test_text_names_the_lost_targets_the_gpus_and_the_verdict(releases):
    text = diff.render_text(_lossy(releases))
    assert "lost sm_90 compute_90" in text.splitlines()[1]
    assert "~ gpu_example/libkernels.so: lost sm_90 (no longer runs; e.g. H100" in text
    assert "= 1 library unchanged (-v lists them)" in text
    assert text.rstrip().splitlines()[-1].startswith("✗ 1 library run worse") and "--allow-loss" in text
    allowed = diff.render_text(_lossy(releases, allow_loss=True))
    assert allowed.rstrip().splitlines()[-1] == "! 1 library run worse on GPUs the old release ran on (allowed)"
    same = compare(releases[0], releases[0])
    assert same.exit_code == 0 and diff.render_text(same).rstrip().endswith("✓ no GPU architecture lost")


def test_json_is_the_dict_with_each_lost_target_and_how_its_gpus_run_now(releases):
    r = _lossy(releases)
    doc = json.loads(diff.render_json(r))
    assert doc == diff.to_dict(r)
    assert (doc["exit_code"], doc["passed"], doc["lost"]) == (1, False, ["sm_90", "compute_90"])
    libs = {d["path"]: d for d in doc["libraries"]}
    assert [x["target"] for x in libs["gpu_example/libkernels.so"]["lost"]] == ["sm_90", "compute_90"]
    assert libs["gpu_example/libshim.so"]["change"] == "unchanged" and libs["gpu_example/libshim.so"]["lost"] == []
    assert {w["gpu"] for w in libs["gpu_example/libkernels.so"]["worse"]} >= {"9.0"}


def test_markdown_lists_changed_libraries_and_verbose_lists_every_one(releases):
    r = _lossy(releases)
    md = diff.render_markdown(r)
    assert md.startswith("## ❌ archaudit diff: gpu\\_example-1.0 (wheel) → gpu\\_example-1.1 (wheel)")
    assert "| `gpu_example/libkernels.so` | changed | sm\\_90 (no longer runs" in md
    assert "`gpu_example/libshim.so`" not in md and "1 library with device code unchanged." in md
    verbose = diff.render(r, "markdown", RenderOptions(verbose=True))
    assert "| `gpu_example/libshim.so` | unchanged |" in verbose and "unchanged." not in verbose


def test_github_errors_a_loss_and_warns_when_it_is_allowed(releases):
    lines = diff.render_github(_lossy(releases)).splitlines()
    assert lines[0].startswith("::error title=archaudit diff%3A GPU architectures lost::gpu_example/libkernels.so")
    assert lines[-1].startswith("archaudit diff: 1 library run worse")  # the log line starts with no name
    assert diff.render_github(_lossy(releases, allow_loss=True)).startswith("::warning ")


def test_junit_is_one_case_per_library_and_the_release_a_loss_its_failure(releases):
    root = ET.fromstring(diff.render_junit(_lossy(releases)))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases) == ["(release)", "gpu_example/libkernels.so", "gpu_example/libshim.so"]
    failure = cases["gpu_example/libkernels.so"].find("failure")
    assert failure is not None and failure.get("type") == "lost" and "sm_90" in str(failure.get("message"))
    assert root.get("failures") == "1"
    allowed = ET.fromstring(diff.render(_lossy(releases, allow_loss=True), "junit"))
    assert allowed.get("failures") == "0"


def test_render_picks_the_formats_renderer(releases):
    r = _lossy(releases)
    assert diff.render(r, "json") == diff.render_json(r)
    assert diff.render(r, "text") == diff.render_text(r)
    assert json.loads(diff.render(r, "sarif"))["runs"][0]["results"]  # the loss is a SARIF result
