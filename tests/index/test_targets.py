"""What `check` reads over HTTP: which targets are remote, the tags a platform installs, and the
wheel pip would pick for a requirement among real wheel names, resolved on a simple index
served over loopback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag, sys_tags

from archaudit.index import sources, targets
from helpers import CUDA_BIN, DEMO_LIB, make_wheel
from range_server import serving


def test_a_url_or_a_versioned_requirement_is_remote_and_a_name_or_path_is_not(tmp_path: Path):
    assert targets.is_remote("https://example.org/x-1.0-py3-none-any.whl")
    assert targets.is_remote("torch==2.5.1") and targets.is_remote("nvidia-curand>=10.4")
    assert not targets.is_remote("torch")  # an installed distribution
    assert not targets.is_remote("dist/x==1.whl")  # a path
    assert not targets.is_remote("torch==")  # not a requirement
    spec_named = tmp_path / "a==1"
    spec_named.write_bytes(b"")
    assert not targets.is_remote(str(spec_named))


@pytest.mark.parametrize("spelling, version", [("3.12", (3, 12)), ("312", (3, 12)), (" 3.9 ", (3, 9))])
def test_python_versions_are_read_as_pip_reads_them(spelling, version):
    assert targets.python_version(spelling) == version


@pytest.mark.parametrize("bad", ["3", "three", "3.12.1", ""])
def test_other_spellings_are_refused(bad):
    with pytest.raises(ValueError, match="not a Python version"):
        targets.python_version(bad)


def test_a_manylinux_platform_takes_every_older_glibcs_wheels():
    tags = targets.platform_tags("manylinux_2_28_x86_64", (3, 11))
    platforms = {t.platform for t in tags}
    assert {"manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= platforms
    assert "manylinux_2_34_x86_64" not in platforms
    assert tags[0] == Tag("cp311", "cp311", "manylinux_2_28_x86_64")
    assert Tag("py3", "none", "any") in tags
    assert targets.platform_tags(None) == list(sys_tags())
    assert targets.platform_tags(None, (3, 10))[0].interpreter == "cp310"


def _refs(*files: str) -> list[sources.WheelRef]:
    return [sources.WheelRef(f"https://files.example/{f}", f) for f in files]


def test_choose_takes_the_newest_admitted_version_with_a_wheel_for_the_platform():
    refs = _refs(
        "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl",
        "torch-2.5.1-cp311-cp311-win_amd64.whl",
        "torch-2.6.0-cp311-cp311-win_amd64.whl",  # newer, not for Linux
        "torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl",
        "other-9.0-py3-none-any.whl",
        "not a wheel name.whl",
    )
    linux = targets.platform_tags("manylinux_2_28_x86_64", (3, 11))
    chosen = targets.choose(refs, Requirement("torch>=2.4"), linux)
    assert isinstance(chosen, sources.WheelRef) and chosen.file == "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl"
    windows = targets.platform_tags("win_amd64", (3, 11))
    chosen = targets.choose(refs, Requirement("torch>=2.4"), windows)
    assert isinstance(chosen, sources.WheelRef) and chosen.file == "torch-2.6.0-cp311-cp311-win_amd64.whl"
    why = targets.choose(refs, Requirement("torch>=2.4"), targets.platform_tags("macosx_14_0_arm64", (3, 11)))
    assert why == (
        "the index lists 4 wheel(s) of torch>=2.4 but none for this platform "
        "(best tag cp311-cp311-macosx_14_0_arm64; --platform asks for another)"
    )
    assert targets.choose(refs, Requirement("torch>3"), linux) == "the index lists no wheel of torch that >3 admits"


def test_a_more_specific_tag_wins_among_wheels_of_one_version():
    refs = _refs("demo-1.0-py3-none-any.whl", "demo-1.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    chosen = targets.choose(refs, Requirement("demo==1.0"), targets.platform_tags("manylinux_2_28_x86_64", (3, 11)))
    assert isinstance(chosen, sources.WheelRef) and chosen.file.endswith("manylinux_2_28_x86_64.whl")


def test_resolve_a_requirement_on_a_served_index_and_a_url_as_it_is(tmp_path: Path):
    make_wheel(tmp_path, "demo", "1.0", {DEMO_LIB: CUDA_BIN / "lib_sm80.so"})
    make_wheel(tmp_path, "demo", "2.0", {DEMO_LIB: CUDA_BIN / "lib_sm80.so"})
    python = sys.version_info[:2]
    with serving(str(tmp_path)) as srv:
        got = targets.resolve("demo<2", "manylinux_2_28_x86_64", f"{srv.url}/simple/", python)
        assert got.ref is not None and got.ref.file == "demo-1.0-py3-none-manylinux_2_28_x86_64.whl"
        assert got.requirement == "demo<2" and got.ref.sha256 == srv.digest(got.ref.file)
        none = targets.resolve("demo>5", "manylinux_2_28_x86_64", f"{srv.url}/simple/", python)
        assert none.ref is None and none.why.endswith(f"on {srv.url}/simple/")
    url = targets.resolve("https://files.example/demo-1.0-py3-none-any.whl", None, None)
    assert url.ref is not None and url.ref.remote and url.requirement == ""
    assert targets.resolve("https://files.example/demo.tar.gz", None, None).why.startswith("not a wheel URL")


def test_the_default_index_is_pip_index_url_when_it_is_http(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple/")
    assert targets.default_index() == "https://mirror.example/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", "/local/dir")
    assert targets.default_index() == targets.PYPI
