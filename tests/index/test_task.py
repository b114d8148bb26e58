"""One wheel's task in the index: read (from disk, or over HTTP by ranges) and judged as check
judges it, with its digest, size and bytes read; a wheel that cannot be read, or whose worker
died, is a result with its finding, never an exception."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from archaudit.core import check
from archaudit.index import sources
from archaudit.index.task import TaskOptions, audit_wheel, failed, file_sha256, stand_in_key
from archaudit.judge.policy import Policy
from range_server import serving


def _ref(corpus: Path, version: str) -> sources.WheelRef:
    [ref] = [r for r in sources.from_directory(str(corpus)) if r.file.startswith(f"demo-{version}-")]
    return ref


def test_a_local_wheel_is_judged_as_check_judges_it_and_its_digest_checked(corpus: Path):
    for f in sorted(corpus.iterdir()):
        [ref] = [r for r in sources.from_directory(str(corpus)) if r.file == f.name]
        r = audit_wheel(ref, TaskOptions())
        direct = check([str(f)], None, Policy(), jobs=1, decode=True)
        assert r.exit_code == direct.exit_code
        assert r.verdict == {0: "pass", 1: "fail", 2: "unusable"}[r.exit_code]
        assert (r.sha256, r.sha256_checked) == (hashlib.sha256(f.read_bytes()).hexdigest(), True)
        assert r.size == f.stat().st_size and r.requests == 0 and r.claim_source == "none"


def test_a_given_claim_and_a_library_scope_are_what_is_judged(corpus: Path):
    ref = _ref(corpus, "2.0")  # sm_80 only
    assert audit_wheel(ref, TaskOptions(claim="80")).verdict == "pass"
    judged = audit_wheel(ref, TaskOptions(claim="75 80"))
    assert (judged.verdict, judged.claim_source) == ("fail", "given")
    nothing = audit_wheel(ref, TaskOptions(claim="75 80", scope="*/no-such-lib.so"))
    assert nothing.inventory.libraries == ()


def test_over_http_only_the_ranges_it_needs_are_fetched(corpus: Path):
    ref = _ref(corpus, "1.0")  # 2 MB of Python padding no reader needs
    local = audit_wheel(ref, TaskOptions())
    with serving(str(corpus)) as srv:
        url = sources.WheelRef(f"{srv.url}/{ref.file}", ref.file, sha256=srv.digest(ref.file))
        remote = audit_wheel(url, TaskOptions())
    assert remote.inventory.libraries == local.inventory.libraries and remote.verdict == local.verdict
    assert 0 < remote.requests and remote.fetched < remote.size / 2
    assert (remote.sha256, remote.sha256_checked) == (url.sha256, False)  # as the index said, not read whole


def test_an_unreadable_wheel_is_an_e001_row(tmp_path: Path):
    ref = sources.WheelRef(str(tmp_path / "gone-1.0-py3-none-any.whl"), "gone-1.0-py3-none-any.whl")
    r = audit_wheel(ref, TaskOptions())
    assert (r.verdict, r.exit_code) == ("unusable", 2)
    assert [p.code for p in r.inventory.problems] == ["E001"]
    assert r.sha256 == stand_in_key(ref) == f"path:{os.path.abspath(ref.location)}"


def test_a_dead_worker_is_an_e099_row_keyed_by_what_is_known(corpus: Path):
    ref = _ref(corpus, "1.0")
    r = failed(ref, TaskOptions(claim="80"), None, "killed")
    assert (r.verdict, r.claim_source, r.sha256_checked) == ("unusable", "given", False)
    assert [p.code for p in r.inventory.problems] == ["E099"] and "killed" in r.inventory.problems[0].message
    assert r.sha256 == stand_in_key(ref)
    assert failed(ref, TaskOptions(), "abc", "killed").sha256 == "abc"
    url = sources.WheelRef("https://files.example/x-1.0-py3-none-any.whl", "x-1.0-py3-none-any.whl")
    assert stand_in_key(url) == "url:https://files.example/x-1.0-py3-none-any.whl"


def test_file_sha256_reads_the_whole_file(corpus: Path):
    for f in corpus.iterdir():
        assert file_sha256(str(f)) == hashlib.sha256(f.read_bytes()).hexdigest()
