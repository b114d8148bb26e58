"""Where the index finds wheels: a directory, a list of URLs, a simple index (PEP 691 JSON or
PEP 503 HTML) filtered by requirement and platform; a hostile project page is that project's
error and the run goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from archaudit.index import sources
from hostile_server import hostile
from range_server import serving


@pytest.mark.parametrize("accept_json", [True, False])
def test_simple_index_with_version_range(
    corpus: Path, tmp_path: Path, accept_json: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not accept_json:  # a PEP 503 (HTML) index: the client's JSON preference is not honoured
        monkeypatch.setattr(sources, "JSON_TYPE", "application/x-not-asked")
    with serving(str(corpus)) as srv:
        srv.upload_times["demo-2.0-py3-none-manylinux_2_28_x86_64.whl"] = "2025-01-02T03:04:05Z"
        refs = sources.resolve([f"{srv.url}/simple/"], ["demo>=2,<3"], sources.Filters(platforms=("manylinux*",)))
        assert [r.file for r in refs] == ["demo-2.0-py3-none-manylinux_2_28_x86_64.whl"]
        assert refs[0].sha256 == srv.digest(refs[0].file)
        assert refs[0].upload_time == ("2025-01-02T03:04:05Z" if accept_json else None)
        assert sources.resolve([f"{srv.url}/simple/"], ["demo"], sources.Filters(platforms=("win*",))) == []


def test_hostile_project_pages_are_each_their_projects_error_and_the_run_goes_on(corpus: Path):
    good = "demo-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with serving(str(corpus)) as files, hostile() as srv:
        srv.good_url = f"{files.url}/{good}"
        errors: list[str] = []
        projects = ["bad", "deep", "html-bad", "missing", "good"]
        refs = sources.resolve([f"{srv.url}/simple/"], projects, sources.Filters(), errors)
    assert [r.file for r in refs] == [good]
    said = dict(e.split(": ", 1) for e in errors)
    assert sorted(said) == ["bad", "deep", "html-bad", "missing"]
    assert "not an HTML index page: Invalid IPv6 URL" in said["html-bad"]
    assert "without a list of files" in said["bad"]
    assert "not a JSON index page" in said["deep"]
    assert "HTTP 404" in said["missing"]
