"""The renderings of a check Report, one per output format: render() hands each renderer what
the command line asked (detail, costs, ASCII marks, timings, the SARIF docs URL), on a real
report of the example wheel (nvcc-built, its libshim.so missing the claimed sm_90)."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

import pytest

import archaudit
from archaudit.config import FORMATS
from archaudit.core import example_wheel
from archaudit.report import check, formats, render, sarif
from archaudit.report.view import RenderOptions


@pytest.fixture(scope="module")
def report() -> archaudit.Report:
    return archaudit.check(example_wheel(), arch="80;90")


def test_each_format_is_its_renderers_output(report):
    assert check.render(report, "json") == render.render_json(report)
    assert check.render(report, "markdown") == formats.render_markdown(report)
    assert check.render(report, "github") == formats.render_github(report)
    assert check.render(report, "junit") == formats.render_junit(report)
    assert check.render(report, "sarif") == sarif.render_check(report)
    assert check.render(report, "text") == render.render_text(report)
    assert set(check.RENDERERS) == set(FORMATS)


def test_the_options_reach_the_text(report):
    plain = check.render(report, "text")
    asked = check.render(report, "text", RenderOptions(detail="kernels", costs=True, unicode=False))
    assert "✗ misses 90" in plain and "X misses 90" in asked and "✓" not in asked and "✗" not in asked
    assert "[1 kernel: mul]" in asked and "[1 kernel: mul]" not in plain
    assert "DEVICE CODE BY TARGET" in asked and "DEVICE CODE BY TARGET" not in plain


def test_the_options_reach_json_junit_and_sarif(report):
    kernels = json.loads(check.render(report, "json", RenderOptions(detail="kernels")))
    libraries = json.loads(check.render(report, "json"))
    assert kernels["exit_code"] == libraries["exit_code"] == 1
    assert json.dumps(kernels).count("_Z3mulPKfS0_Pfi") > json.dumps(libraries).count("_Z3mulPKfS0_Pfi")
    assert check.render(report, "json", RenderOptions(timings=False)) == render.render_json(report, timings=False)
    doc = json.loads(check.render(report, "sarif", RenderOptions(docs_url="https://docs.example/archaudit")))
    uris = {r["helpUri"] for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    assert uris and all(u.startswith("https://docs.example/archaudit/codes.md#") for u in uris)
    root = ET.fromstring(check.render(report, "junit"))
    assert root.get("failures") == "1"
