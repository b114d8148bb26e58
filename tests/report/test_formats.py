"""Output formats of `archaudit check`: golden files, the JSON schema, JUnit structure, GitHub
workflow-command syntax, and the per-target device-code bytes (--costs).

The expected outputs live in tests/golden/. After an intended change of output, regenerate
them and review the diff:

    ARCHAUDIT_REGEN_GOLDEN=1 python -m pytest tests/report/test_formats.py tests/judge/test_diff.py

Goldens are made with --no-timings (no seconds) and relative target paths; the tool
version is replaced by <version>.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from archaudit import __version__
from archaudit.cli import main
from archaudit.core import example_wheel
from archaudit.findings import CODES, ERROR
from reference_tools import sarif_validator

jsonschema = pytest.importorskip("jsonschema")

HERE = Path(__file__).resolve().parents[1]
GOLDEN = HERE / "golden"
BIN = HERE / "fixtures" / "cuda" / "bin"
SCHEMA = Path(__file__).resolve().parents[2] / "src" / "archaudit" / "data" / "report.schema.json"
EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"
REGEN = os.environ.get("ARCHAUDIT_REGEN_GOLDEN") == "1"
EXT = {"text": "txt", "json": "json", "markdown": "md", "github": "github.txt", "junit": "xml", "sarif": "sarif.json"}

# name -> check arguments (run in a scratch directory holding the example wheel and libs/)
SCENARIOS = {
    "example_fail": ["--arch", "80,90", EXAMPLE],
    "example_pass_costs": ["--arch", "80", "--costs", EXAMPLE],
    "libs_gpu": ["--arch", "80;90", "--gpu", "H100", "--gpu", "sm_80", "libs"],
}
LIBS = ["lib_multiobj.so", "lib_sm90a.so", "lib_ptx90.so", "lib_host.so", "lib_example_kernels.so"]


def normalise(text: str) -> str:
    return (
        text.replace(f'"tool_version": "{__version__}"', '"tool_version": "<version>"')
        .replace(f"archaudit {__version__}", "archaudit <version>")
        .replace(f'"version": "{__version__}"', '"version": "<version>"')
        .replace(f'"semanticVersion": "{__version__}"', '"semanticVersion": "<version>"')
    )


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    actual = normalise(actual)
    if REGEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path.name} missing: run ARCHAUDIT_REGEN_GOLDEN=1 pytest {Path(__file__).name}"
    assert actual == path.read_text(encoding="utf-8"), (
        f"{path.name} differs; if intended, regenerate with ARCHAUDIT_REGEN_GOLDEN=1"
    )


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A working directory with the example wheel and a directory of fixture libraries, given
    by relative paths so outputs name no machine path."""
    shutil.copy(example_wheel(), tmp_path / EXAMPLE)
    (tmp_path / "libs").mkdir()
    for name in LIBS:
        shutil.copy(BIN / name, tmp_path / "libs" / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_check(args: list[str], fmt: str, out: Path, *extra: str) -> tuple[int, str]:
    rc = main(["check", "--no-config", "-q", "--no-timings", "--format", fmt, "-o", str(out), *extra, *args])
    return rc, out.read_text(encoding="utf-8")


def schema_validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("fmt", list(EXT))
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_golden(scratch, scenario, fmt):
    rc, text = run_check(SCENARIOS[scenario], fmt, scratch / "out")
    assert rc == (0 if scenario == "example_pass_costs" else 1)
    check_golden(f"check_{scenario}.{EXT[fmt]}", text)


def test_outputs_are_deterministic(scratch):
    for fmt in EXT:
        first = run_check(SCENARIOS["libs_gpu"], fmt, scratch / "a", "-j", "1")[1]
        second = run_check(SCENARIOS["libs_gpu"], fmt, scratch / "b", "-j", "4")[1]
        assert first == second, fmt


def test_timings_only_when_asked(scratch):
    main(["check", "--no-config", "-q", "--arch", "80", "-o", "t.txt", EXAMPLE])
    assert re.search(r"KB in \d+\.\d\d s$", Path("t.txt").read_text().splitlines()[0])
    main(["check", "--no-config", "-q", "--arch", "80", "--format", "json", "-o", "t.json", EXAMPLE])
    assert "seconds" in json.loads(Path("t.json").read_text())["targets"][0]
    _, text = run_check(["--arch", "80", EXAMPLE], "json", scratch / "n.json")
    assert "seconds" not in json.loads(text)["targets"][0]
    _, text = run_check(["--arch", "80", EXAMPLE], "text", scratch / "n.txt")
    assert not re.search(r"\d s\b", text)


# ---- JSON ----


def test_schema_ships_with_the_package():
    from importlib import resources

    shipped = resources.files("archaudit").joinpath("data", "report.schema.json").read_text("utf-8")
    schema = json.loads(shipped)
    from archaudit.judge.audit import SCHEMA_VERSION

    assert schema["$defs"]["report"]["properties"]["schema_version"]["const"] == SCHEMA_VERSION == 2


@pytest.mark.parametrize("detail", ["libraries", "containers", "kernels"])
def test_json_validates_against_schema(scratch, detail):
    validator = schema_validator()
    for name, args in SCENARIOS.items():
        for timings in (True, False):
            extra = ["--detail", detail] + ([] if timings else ["--no-timings"])
            main(["check", "--no-config", "-q", "--format", "json", "-o", "r.json", *extra, *args])
            doc = json.loads(Path("r.json").read_text())
            errors = sorted(validator.iter_errors(doc), key=str)
            assert not errors, f"{name}: {errors[0]}"
            assert doc["schema"] == "archaudit-report" and doc["schema_version"] == 2


def test_json_schema_rejects_drift(scratch):
    """The schema is exact: an unknown or missing field is an error, so a renderer change
    without a schema change fails here."""
    validator = schema_validator()
    _, text = run_check(SCENARIOS["example_fail"], "json", scratch / "r.json")
    doc = json.loads(text)
    assert validator.is_valid(doc)
    doc["targets"][0]["surprise"] = 1
    assert not validator.is_valid(doc)
    del doc["targets"][0]["surprise"]
    del doc["targets"][0]["libraries"][0]["carries"]
    assert not validator.is_valid(doc)


def test_json_unusable_and_amd_targets_validate(scratch):
    validator = schema_validator()
    amd = HERE / "fixtures" / "amd" / "bin"
    main(["check", "--no-config", "-q", "--format", "json", "-o", "r.json", "missing.whl", str(amd)])
    doc = json.loads(Path("r.json").read_text())
    assert validator.is_valid(doc), next(iter(validator.iter_errors(doc)))
    assert doc["exit_code"] == 2 and doc["targets"][0]["unusable"]


# ---- costs ----


def test_costs_attribute_every_device_byte(scratch):
    _, text = run_check(["--arch", "80", "--costs", "libs"], "json", scratch / "c.json")
    t = json.loads(text)["targets"][0]
    per_target: dict[str, list[int]] = {}
    for lib in t["libraries"]:
        for row in lib["bytes_by_target"]:
            acc = per_target.setdefault(row["target"], [0, 0, 0])
            acc[0] += row["stored"]
            acc[1] += row["decoded"]
            acc[2] += 1
    assert {r["target"]: [r["stored"], r["decoded"], r["libraries"]] for r in t["device_code_bytes"]} == per_target
    # every library's device code fits in the library, and the PTX decodes to more than it stores
    for lib in t["libraries"]:
        assert sum(r["stored"] for r in lib["bytes_by_target"]) <= lib["size"]
    ptx = next(r for r in t["device_code_bytes"] if r["target"] == "compute_90")
    assert ptx["decoded"] >= ptx["stored"] > 0
    order = [r["target"] for r in t["device_code_bytes"]]
    assert order.index("sm_80") < order.index("sm_90") < order.index("compute_90")


def test_costs_in_text_and_markdown(scratch):
    _, text = run_check(["--arch", "80", "--costs", EXAMPLE], "text", scratch / "c.txt")
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if "DEVICE CODE BY TARGET" in line)
    rows = {line.split()[0]: line for line in lines[head + 1 : head + 5]}
    assert set(rows) == {"sm_80", "sm_90", "compute_90", "total"}
    assert rows["sm_80"].split()[-1] == "2"  # both libraries carry sm_80
    assert any(line.strip().startswith("gpu_example/libshim.so: sm_80") for line in lines)
    _, md = run_check(["--arch", "80", "--costs", EXAMPLE], "markdown", scratch / "c.md")
    assert "| sm_90 |" in md and "<details>" in md
    _, plain = run_check(["--arch", "80", EXAMPLE], "text", scratch / "p.txt")
    assert "DEVICE CODE BY TARGET" not in plain


# ---- JUnit ----


def validate_junit(xml: str) -> ET.Element:
    """The JUnit XML structure CI test reporters read: testsuites > testsuite > testcase, a
    <failure message type> per failed case, and counts that agree with the elements."""
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    total = failures = 0
    for suite in root:
        assert suite.tag == "testsuite"
        assert suite.get("name")
        cases = suite.findall("testcase")
        assert [c.tag for c in suite if c.tag != "properties"] == ["testcase"] * len(cases)
        failed = 0
        for case in cases:
            assert case.get("name") and case.get("classname") == suite.get("name")
            assert set(case.attrib) <= {"name", "classname", "time", "file"}
            for child in case:
                assert child.tag in ("failure", "system-out")
            fails = case.findall("failure")
            assert len(fails) <= 1
            if fails:
                failed += 1
                assert fails[0].get("message") and fails[0].get("type")
        assert int(suite.attrib["tests"]) == len(cases)
        assert int(suite.attrib["failures"]) == failed
        assert int(suite.attrib["errors"]) == 0
        total += len(cases)
        failures += failed
    assert int(root.attrib["tests"]) == total and int(root.attrib["failures"]) == failures
    return root


def test_junit_one_case_per_library_failure_per_error(scratch):
    _, xml = run_check(SCENARIOS["libs_gpu"] + [EXAMPLE], "junit", scratch / "r.xml")
    root = validate_junit(xml)
    _, js = run_check(SCENARIOS["libs_gpu"] + [EXAMPLE], "json", scratch / "r.json")
    doc = json.loads(js)
    suites = root.findall("testsuite")
    assert len(suites) == len(doc["targets"]) == 2
    for suite, target in zip(suites, doc["targets"]):
        names = [c.get("name") for c in suite.findall("testcase")]
        assert names == [f"({target['kind']})"] + [lib["path"] for lib in target["libraries"]]
        for case in suite.findall("testcase"):
            errors = {
                f["code"]
                for f in target["findings"]
                if f["severity"] == ERROR
                and (
                    f["subject"] == case.get("name")
                    or (case.attrib["name"].startswith("(") and f["subject"] == target["target"])
                )
            }
            failure = case.find("failure")
            assert (failure is not None) == bool(errors), case.get("name")
            if failure is not None:
                assert set(failure.attrib["type"].split(",")) == errors


def test_junit_escapes_hostile_text(tmp_path, monkeypatch):
    """A library name with XML metacharacters and a control character still gives
    well-formed XML."""
    import zipfile

    monkeypatch.chdir(tmp_path)
    with zipfile.ZipFile("odd-1.0-py3-none-any.whl", "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr('odd/<&"\x01>.so', (BIN / "lib_sm80.so").read_bytes())
    rc, xml = run_check(["--arch", "90", "odd-1.0-py3-none-any.whl"], "junit", tmp_path / "r.xml")
    assert rc == 1
    root = validate_junit(xml)
    names = [c.get("name") for c in root.iter("testcase")]
    assert 'odd/<&"\\x01>.so' in names  # the control character escaped where the name is read


# ---- GitHub annotations ----

ANNOTATION = re.compile(r"^::(error|warning|notice)(?: ([a-z]+=[^,:]*(?:,[a-z]+=[^,:]*)*))?::(.*)$")


def unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def test_github_annotations_syntax(scratch):
    _, out = run_check(SCENARIOS["libs_gpu"] + [EXAMPLE], "github", scratch / "g.txt")
    _, js = run_check(SCENARIOS["libs_gpu"] + [EXAMPLE], "json", scratch / "g.json")
    doc = json.loads(js)
    lines = out.splitlines()
    commands = [m for m in (ANNOTATION.match(line) for line in lines if line.startswith("::")) if m is not None]
    assert len(commands) == sum(line.startswith("::") for line in lines), [
        line for line in lines if line.startswith("::") and not ANNOTATION.match(line)
    ]
    errors = [m for m in commands if m.group(1) == "error"]
    expected = [f for t in doc["targets"] for f in t["findings"] if f["severity"] == ERROR]
    assert len(errors) == len(expected) > 0
    for m, f in zip(errors, expected):
        props = {k: v for k, v in (p.split("=", 1) for p in m.group(2).split(","))}
        assert unescape(props["title"]).startswith(f"archaudit {f['code']}: {CODES[f['code']].title}")
        assert unescape(props["file"]) in ("libs", EXAMPLE)
        assert unescape(m.group(3)) == f["message"]
    assert lines[-1].startswith("archaudit: 0 of 2 targets pass")


def test_github_escaping():
    from archaudit.report.formats import annotation, escape_data, escape_property

    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = annotation("error", "50%: one\ntwo", file="dist/x,y.whl", title="archaudit G001: t")
    assert line == "::error file=dist/x%2Cy.whl,title=archaudit G001%3A t::50%25: one%0Atwo"
    assert "\n" not in line
    assert annotation("notice", "m") == "::notice::m"


# ---- Markdown ----


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def test_markdown_tables_are_well_formed(tmp_path, monkeypatch):
    import zipfile

    monkeypatch.chdir(tmp_path)
    with zipfile.ZipFile("pipe-1.0-py3-none-any.whl", "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.writestr("pipe/a|b.so", (BIN / "lib_sm80.so").read_bytes())
    shutil.copy(example_wheel(), EXAMPLE)
    rc, md = run_check(
        ["--arch", "80,90", "--costs", "pipe-1.0-py3-none-any.whl", EXAMPLE], "markdown", tmp_path / "r.md"
    )
    assert rc == 1
    assert md.startswith("## ❌ archaudit: 2 of 2 targets fail")
    table: list[str] = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            widths = {_cells(r) for r in table}
            assert len(widths) == 1, table
            assert re.fullmatch(r"\|(?:-+:?\|)+|\|(?:---:?\|)+", table[1].replace("---:", "---")), table[1]
            table = []
    assert "`pipe/a\\|b.so`" in md


# ---- SARIF ----


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_sarif_is_valid_and_maps_findings_to_rules_and_members(scratch, scenario):
    import zipfile

    validator = sarif_validator()
    _, text = run_check(SCENARIOS[scenario], "sarif", scratch / "r.sarif", "--docs-url", "https://docs.example/a/docs")
    log = json.loads(text)
    validator.validate(log)
    _, findings = run_check(SCENARIOS[scenario], "json", scratch / "r.json")
    expected = [f for t in json.loads(findings)["targets"] for f in t["findings"]]
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["ruleId"] for r in run["results"]] == [f["code"] for f in expected]  # one result per finding, in order
    assert [r["message"]["text"] for r in run["results"]] == [f["message"] for f in expected]
    for result in run["results"]:
        rule = rules[result["ruleIndex"]]
        assert rule["id"] == result["ruleId"] in CODES
        assert rule["helpUri"] == f"https://docs.example/a/docs/codes.md#{result['ruleId'].lower()}"
        assert result["level"] == {"error": "error", "warning": "warning", "info": "note"}[CODES[rule["id"]].severity]
    # every location is a wheel member (with the wheel its parent) or a file given on the command line
    for result in run["results"]:
        where = result["locations"][0]["physicalLocation"]["artifactLocation"]
        artifact = run["artifacts"][where["index"]]
        assert artifact["location"]["uri"] == where["uri"]
        if "parentIndex" in artifact:
            wheel = run["artifacts"][artifact["parentIndex"]]["location"]["uri"]
            assert where["uri"] in zipfile.ZipFile(scratch / wheel).namelist()
        else:
            assert (scratch / where["uri"]).is_file()
    exit_code = 0 if scenario == "example_pass_costs" else 1
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": exit_code}]


def test_sarif_of_unreadable_input_fails_its_invocation(scratch):
    (scratch / "bad.whl").write_bytes(b"PK not a zip")
    rc, text = run_check(["bad.whl", EXAMPLE], "sarif", scratch / "r.sarif")
    log = json.loads(text)
    sarif_validator().validate(log)
    (run,) = log["runs"]
    assert rc == 2 and run["invocations"][0] == {"executionSuccessful": False, "exitCode": 2}
    assert run["results"][0]["ruleId"] == "E002" and run["results"][0]["level"] == "error"
    assert "helpUri" not in run["tool"]["driver"]["rules"][0]  # no --docs-url: no URL is made up


def test_also_write_renders_one_read_into_every_format(scratch, capsys):
    """--also-write FORMAT=FILE: each rendering equals what a run of that format alone writes."""
    args = ["check", "--no-config", "-q", "--no-timings", *SCENARIOS["libs_gpu"], "--format", "json", "-o", "r.json"]
    rc = main([*args, *(f"--also-write={fmt}={scratch / ('also.' + EXT[fmt])}" for fmt in EXT if fmt != "json")])
    assert rc == 1
    for fmt in EXT:
        alone = run_check(SCENARIOS["libs_gpu"], fmt, scratch / "alone")[1]
        written = (scratch / ("r.json" if fmt == "json" else "also." + EXT[fmt])).read_text(encoding="utf-8")
        assert written == alone, fmt
    for bad in (
        ["--also-write", "xml=x"],
        ["--also-write", "text"],
        ["--also-write", "text=r.json"],
        ["--also-write", "text=-", "--also-write", "github=-"],
    ):
        assert main([*args, *bad]) == 2
        assert "--also-write" in capsys.readouterr().err


# Real small wheels whose default text is pinned: a vendor library that passes
# its claim, and one whose K004 flood and 19 targets must still fit a screen.
REAL_TEXT = {
    "curand_10.4.0.35": (
        "nvidia-curand",
        "10.4.0.35",
        "nvidia_curand-10.4.0.35-py3-none-manylinux_2_27_x86_64.whl",
        "75;80;86;89;90;100;103;120;121",
    ),
    "curand_10.4.5.25": (
        "nvidia-curand",
        "10.4.5.25",
        "nvidia_curand-10.4.5.25-py3-none-manylinux_2_27_x86_64.whl",
        "75;80;86;87;89;90;100;103;110;120;121",
    ),
}


@pytest.mark.parametrize("name", sorted(REAL_TEXT))
def test_default_text_of_real_wheels(name, tmp_path, monkeypatch):
    from wheels import fetch

    project, version, filename, claim = REAL_TEXT[name]
    wheel = fetch(project, version, filename=filename)
    monkeypatch.chdir(wheel.parent)  # a relative path: the text names no machine path
    out = tmp_path / "out.txt"
    main(
        ["check", "--no-config", "-q", "--no-timings", "--format", "text", "-o", str(out), "--arch", claim, wheel.name]
    )
    check_golden(f"check_{name}.txt", out.read_text(encoding="utf-8"))
