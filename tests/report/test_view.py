"""The view every format shares: verdict words, device-code costs, folded findings and what a
filter hid, computed from real reports of the example wheel (nvcc-built sm_80/sm_90 libraries)."""

from __future__ import annotations

import struct
from pathlib import Path

import archaudit
from archaudit.core import example_wheel
from archaudit.report import view
from helpers import make_wheel


def _report(arch: str | None = None, ignore: tuple[str, ...] = ()) -> archaudit.Report:
    return archaudit.check(example_wheel(), arch=arch, ignore=ignore)


def test_verdict_words_name_what_was_missed_and_what_was_never_judged():
    by_path = {v.path: v for v in _report(arch="80;90").targets[0].libraries}
    assert view.verdict_words(by_path["gpu_example/libkernels.so"]) == "✓ 80 90"
    assert view.verdict_words(by_path["gpu_example/libshim.so"]) == "✗ misses 90"
    # no claim: nothing judged the libraries, so no ✓
    assert {view.verdict_words(v) for v in _report().targets[0].libraries} == {"? no claim to judge by"}


def test_a_failure_a_filter_hid_is_marked_suppressed_and_counted_by_rule():
    report = _report(arch="80;90", ignore=("G001",))
    t = report.targets[0]
    hidden = view.suppressed_in(report, t)
    assert [s.finding.code for s in hidden] == ["G001"]
    words = {v.path: view.verdict_text(v, hidden) for v in t.libraries}
    assert words == {"gpu_example/libkernels.so": "✓ 80 90", "gpu_example/libshim.so": "✗ misses 90 (suppressed)"}
    assert view.suppressed_errors(hidden) == "G001 x1 by ignore G001"
    [group] = view.suppression_groups(hidden)
    assert (group.rule, group.code, group.hits, group.subjects) == (
        "ignore G001",
        "G001",
        1,
        ["gpu_example/libshim.so"],
    )
    assert view.suppressed_errors(()) == ""


def test_device_code_bytes_sum_each_target_over_the_libraries_in_target_order():
    t = _report(arch="80;90").targets[0]
    rows = view.device_code_bytes(t)
    assert [r["target"] for r in rows] == ["sm_80", "sm_90", "compute_90"]
    for r in rows:
        per_lib = [(s, d) for v in t.libraries for tgt, s, d in v.bytes_by_target if tgt == r["target"]]
        assert (r["stored"], r["decoded"], r["libraries"]) == (
            sum(s for s, _ in per_lib),
            sum(d for _, d in per_lib),
            len(per_lib),
        )
    costs = view.cost_table(t)
    assert [c.target for c in costs.rows] == [r["target"] for r in rows]
    assert costs.stored == view.size_text(sum(r["stored"] for r in rows))
    assert sum(int(c.share.rstrip("%")) for c in costs.rows) in (99, 100, 101)  # each share rounded
    assert [lc.path for lc in costs.per_library] == [v.path for v in t.libraries]  # two libraries: listed each


def test_sizes_are_kilobytes_below_a_tenth_of_a_megabyte():
    assert view.size_text(391) == "0.4 KB"
    assert view.size_text(99_999) == "100.0 KB"
    assert view.size_text(100_000) == "0.1 MB"


def test_a_folded_finding_says_how_many_it_stands_for_and_counts_as_many(tmp_path: Path):
    """A member of bundle headers declaring no entries: one E030 per header, folded into one."""
    member = tmp_path / "data.hsaco"
    member.write_bytes((b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", 0)) * 64)
    whl = make_wheel(tmp_path, "fl", "1.0", {"fl/data.hsaco": member})
    findings = archaudit.check(str(whl), arch="80").findings
    [folded] = [f for f in findings if f.count > 1]
    text = view.finding_text(folded)
    assert text.startswith(f"x{folded.count}: {folded.message}") and "folded" in text
    assert view.code_counts(findings)[folded.code] >= folded.count
    single = next(f for f in findings if f.count == 1)
    assert view.finding_text(single) == single.message
