"""`check` takes what users type (issue 39, "Inputs"): a wheel URL, and a requirement spec resolved
on a simple index to the wheel for the platform asked, each read by HTTP range requests as `index`
reads, with the report naming the file judged (file, URL, sha256). A local server on 127.0.0.1
serves the real nvcc-built example wheel and a PEP 503/691 simple index of it; nothing here
reaches the internet."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import archaudit
from archaudit.cli import main
from archaudit.core import example_wheel
from range_server import RangeServer, serving

EXAMPLE = Path(example_wheel())
SHA = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RangeServer]:
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(EXAMPLE, served / EXAMPLE.name)
    with serving(str(served)) as srv:
        yield srv


def check_json(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "out.json"
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", str(out), *args])
    return rc, json.loads(out.read_text(encoding="utf-8"))


def verdicts(doc: dict) -> list[tuple[str, str, list[str]]]:
    return [(lib["path"], lib["status"], lib["carries"]) for t in doc["targets"] for lib in t["libraries"]]


def test_a_wheel_url_is_read_by_ranges_with_the_verdict_of_the_file_on_disk(
    tmp_path: Path, server: RangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{server.url}/{EXAMPLE.name}"
    rc, doc = check_json(tmp_path, "--arch", "80;90", url)
    local_rc, local = check_json(tmp_path, "--arch", "80;90", str(EXAMPLE))
    assert (rc, verdicts(doc)) == (local_rc, verdicts(local)) == (1, verdicts(local))
    assert [f["code"] for f in doc["targets"][0]["findings"] if f["severity"] == "error"] == ["G001"]
    (t,) = doc["targets"]
    assert t["target"] == url and t["kind"] == "wheel" and t["distribution"] == "gpu_example-1.0"
    origin = t["origin"]
    assert (origin["file"], origin["url"], origin["size"]) == (EXAMPLE.name, url, EXAMPLE.stat().st_size)
    assert origin["sha256"] is None and origin["requirement"] is None  # a bare URL states no hash
    assert 0 < origin["fetched"] <= origin["size"] and server.sent >= origin["fetched"]
    assert "origin" not in local["targets"][0]  # a local file's report is as before
    rc = main(["check", "--no-config", "-q", "--no-timings", "--arch", "80;90", url + f"#sha256={SHA}"])
    text = capsys.readouterr().out
    assert rc == 1
    assert f"  judged {EXAMPLE.name}, sha256 {SHA} (as the index lists it)\n  from {url} (" in text


@pytest.mark.parametrize("spec", ["gpu-example==1.0", "gpu_example>=0.5", "GPU.Example~=1.0"])
@pytest.mark.parametrize("platform", [None, "linux_x86_64", "manylinux_2_28_x86_64"])
def test_a_requirement_is_resolved_on_the_index_for_the_platform_asked(
    tmp_path: Path, server: RangeServer, spec: str, platform: str | None
) -> None:
    """The example wheel is tagged linux_x86_64: this machine and --platform linux_x86_64 take it;
    manylinux_2_28_x86_64 does not (pip would not install a linux_x86_64 wheel there either)."""
    args = ["--arch", "80;90", "--index-url", f"{server.url}/simple/", spec]
    rc, doc = check_json(tmp_path, *args, *(["--platform", platform] if platform else []))
    (t,) = doc["targets"]
    if platform == "manylinux_2_28_x86_64":
        assert rc == 2 and t["unusable"]
        (f,) = t["findings"]
        assert f["code"] == "E001" and "lists 1 wheel(s) of" in f["message"]
        assert "none for this platform" in f["message"]
        return
    assert rc == 1 and verdicts(doc) == verdicts(check_json(tmp_path, "--arch", "80;90", str(EXAMPLE))[1])
    o = t["origin"]
    assert (o["file"], o["url"], o["sha256"]) == (EXAMPLE.name, f"{server.url}/{EXAMPLE.name}", SHA)
    assert (o["requirement"], o["platform"]) == (spec, platform)


def test_no_wheel_the_specifier_admits_is_exit_2_naming_the_index(tmp_path: Path, server: RangeServer) -> None:
    rc, doc = check_json(tmp_path, "--arch", "80", "--index-url", f"{server.url}/simple/", "gpu-example==9.9")
    assert rc == 2
    (f,) = doc["targets"][0]["findings"]
    assert f["code"] == "E001" and "no wheel of gpu-example that ==9.9 admits" in f["message"]
    assert f"{server.url}/simple/" in f["message"]
    rc, doc = check_json(tmp_path, "--arch", "80", "--index-url", f"{server.url}/simple/", "nothing-here==1.0")
    assert rc == 2 and doc["targets"][0]["findings"][0]["code"] == "E001"
    rc, doc = check_json(tmp_path, "--arch", "80", f"{server.url}/not-a-wheel.tar.gz")
    assert rc == 2 and "not a wheel URL" in doc["targets"][0]["findings"][0]["message"]


def test_a_bare_name_is_still_an_installed_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check torch` reads the installed torch (README); only a version specifier asks the index."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")  # nothing listens: asked, it would fail
    rc, doc = check_json(tmp_path, "no-such-thing-archaudit")
    assert rc == 2 and "installed distribution" in doc["targets"][0]["findings"][0]["message"]


def test_the_api_takes_a_requirement_and_the_schema_its_origin(tmp_path: Path, server: RangeServer) -> None:
    from importlib import resources

    import jsonschema

    report = archaudit.check("gpu-example==1.0", arch="80;90", index_url=f"{server.url}/simple/")
    assert report.exit_code == 1
    (t,) = report.targets
    assert t.inventory.origin is not None and t.inventory.origin.sha256 == SHA
    _, doc = check_json(tmp_path, "--arch", "80;90", "--index-url", f"{server.url}/simple/", "gpu-example==1.0")
    schema = json.loads(resources.files("archaudit").joinpath("data", "report.schema.json").read_text("utf-8"))
    jsonschema.validate(doc, schema)


@pytest.mark.parametrize(
    "python, chosen",
    [
        (None, "gpu_example-1.0-py3-none-linux_x86_64.whl"),
        ("3.10", "gpu_example-2.0-cp310-cp310-linux_x86_64.whl"),
        ("310", "gpu_example-2.0-cp310-cp310-linux_x86_64.whl"),
        ("3.9", "gpu_example-1.0-py3-none-linux_x86_64.whl"),
    ],
)
def test_python_version_chooses_the_wheel_that_python_installs(tmp_path: Path, python: str | None, chosen: str) -> None:
    """As pip's --python-version: a cp310 wheel (2.0) is chosen for 3.10 only; every other Python,
    this one included, takes the newest wheel it installs, the pure-Python-tagged 1.0."""
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(EXAMPLE, served / EXAMPLE.name)
    shutil.copy(EXAMPLE, served / "gpu_example-2.0-cp310-cp310-linux_x86_64.whl")
    args = ["--arch", "80;90", "--platform", "linux_x86_64", *(["--python-version", python] if python else [])]
    with serving(str(served)) as srv:
        _, doc = check_json(tmp_path, *args, "--index-url", f"{srv.url}/simple/", "gpu-example>=1.0")
    assert doc["targets"][0]["origin"]["file"] == chosen


@pytest.mark.parametrize("bad", ["banana", "3", "3.12.1", ""])
def test_a_python_version_pip_would_refuse_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["check", "--no-config", "--arch", "80", "--python-version", bad, "gpu-example==1.0"])
    assert e.value.code == 2
    assert "--python-version" in capsys.readouterr().err
