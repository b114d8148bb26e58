"""The real-world corpus (corpus/manifest.toml): archaudit's verdicts must agree with the evidence.

Each wheel is checked as ``python -m corpus.run`` checks it: the default check with the claim its
project documents, its extra checks (a driver, a GPU), and the same exit status under every
``--detail``. A disagreement fails the test with the library, archaudit's verdict and the
evidence. Wheels up to FAST_MB (20 MB) run in the fast tier; those up to 100 MB (the manifest's ``ci``
wheels) are marked ``slow`` and run in the real-wheel tier; larger ones are marked ``census`` and run in
the census tier (``python -m pytest -q -m census``; the whole corpus is several GB), as
``python -m corpus.run`` runs them all. Wheels come through tests/wheels.py's cache (safe for several
test processes at once).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from archaudit.findings import CODES

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from corpus import manifest  # noqa: E402
from corpus.run import check, describe  # noqa: E402

from wheels import fetch  # noqa: E402

WHEELS = manifest.load()

# Wheels that still disagree on main, with the issue-11 point whose fix makes them agree. Strict:
# once a fix lands, the wheel agrees, its test "unexpectedly passes" and fails until the entry goes.
KNOWN: dict[str, str] = {}  # id -> the issue point it still disagrees on


# The fast tier (README "Tests") reads the corpus wheels up to FAST_MB; the real-wheel tier (`-m slow`)
# the rest up to manifest.SMALL_MB; larger ones are the census tier's (-m census), as python -m corpus.run.
FAST_MB = 20.0


def _tier_marks(w: manifest.Wheel) -> list[pytest.MarkDecorator]:
    if w.slow:
        return [pytest.mark.census]
    return [pytest.mark.slow] if w.size_mb > FAST_MB else []


def _fetched(wheel: manifest.Wheel) -> Path:
    """The corpus wheel in the shared cache (manifest.cache_dir() is wheels.cache_dir())."""
    return fetch(wheel.name, wheel.version, wheel.platform, filename=wheel.filename)


def _param(w: manifest.Wheel):
    marks = _tier_marks(w)
    if w.id in KNOWN:
        marks.append(pytest.mark.xfail(strict=True, reason=f"disagrees on main: issue {KNOWN[w.id]}"))
    return pytest.param(w, id=w.id, marks=marks)


@pytest.mark.parametrize("wheel", [_param(w) for w in WHEELS])
def test_archaudit_agrees_with_the_evidence(wheel: manifest.Wheel) -> None:
    result = check(wheel, _fetched(wheel).parent, detail_check=True)
    assert result.agrees, f"{wheel.spec} ({wheel.filename}):\n  " + "\n  ".join(describe(result))


def test_known_disagreements_name_corpus_wheels() -> None:
    assert set(KNOWN) <= {w.id for w in WHEELS}


def test_the_manifest_spans_what_it_must() -> None:
    """At least 40 wheels over CUDA 11/12/13, x86_64 and aarch64, NVIDIA and AMD (ROCm 5 and 6),
    frameworks, RAPIDS, vendor libraries and small projects, including every wheel issue 11 names."""
    assert len(WHEELS) >= 40
    stacks = " ".join(w.stack for w in WHEELS)
    for needed in ("CUDA 11", "CUDA 12", "CUDA 13", "ROCm 5", "ROCm 6"):
        assert needed in stacks, needed
    assert any("x86_64" in w.platform for w in WHEELS) and any("aarch64" in w.platform for w in WHEELS)
    assert {w.kind for w in WHEELS} == {"framework", "vendor", "rapids", "project"}
    names = {w.name for w in WHEELS}
    assert {"torch", "tensorflow", "jax-cuda12-plugin"} <= names
    specs = {w.spec for w in WHEELS}
    named = {
        "nvidia-cudnn-cu12==9.28.0.42",
        "transformer-engine-cu12==2.20.2",
        "libcudf-cu12==26.10.2",
        "ctranslate2==4.8.5",
        "tensorflow==2.20.0",
        "torchaudio==2.11.1",
        "cupy-cuda13x==14.2.0",
        "nvidia-curand==10.4.0.35",
        "cupy-rocm-5-0==13.3.0",
        "catboost==1.2.10",
        "faiss-gpu-cu12==1.14.1.post1",
        "warp-lang==1.19.0",
        "nvidia-curand==10.4.5.25",
    }
    assert named <= specs, named - specs
    assert any(w.name == "mxnet-cu112" for w in WHEELS)
    assert any(w.spec == "nvidia-curand==10.4.0.35" and w.platform == "manylinux_2_27_aarch64" for w in WHEELS)


@pytest.mark.parametrize("wheel", WHEELS, ids=[w.id for w in WHEELS])
def test_every_expectation_names_its_evidence(wheel: manifest.Wheel) -> None:
    """No verdict without a source: the claim's, each library's and each extra check's evidence,
    and the cuobjdump/bundler listing the evidence cites."""
    assert wheel.claim_source.strip()
    assert wheel.filename.startswith(wheel.name.replace("-", "_") + "-" + wheel.version.split("+")[0])
    for exp in wheel.libraries:
        assert len(exp.evidence) > 20, exp.path
        if exp.verdict == "fails":
            assert wheel.exit == 1, f"{exp.path} fails, so the wheel must exit 1"
    for extra in wheel.extra:
        assert len(extra.evidence) > 20, extra.name
    for ignore in wheel.ignores:  # a recorded decision names its source, and the config holds it
        assert len(ignore.reason) > 40 and ignore.code in CODES, ignore
        assert f'library = "{ignore.library}"' in wheel.config()
    if wheel.libraries:
        listing = ROOT / "corpus" / "evidence" / (wheel.filename[:-4] + ".txt")
        assert listing.is_file(), listing.name


SCREEN_LINES, SCREEN_WIDTH = 60, 240  # the default text of a wheel fits a screen (issue 27 item 8)


def _screen_param(w: manifest.Wheel):
    return pytest.param(w, id=w.id, marks=_tier_marks(w))


@pytest.mark.parametrize("wheel", [_screen_param(w) for w in WHEELS])
def test_the_default_text_fits_a_screen(wheel: manifest.Wheel, tmp_path: Path) -> None:
    """The default text of every corpus wheel (with its claim and its ignores) is at most 60 lines
    of at most 240 characters: the verdict is on screen, -v and JSON hold the rest."""
    from archaudit.cli import main

    path = _fetched(wheel)
    options = ["--no-config"]
    if wheel.config():
        (tmp_path / "pyproject.toml").write_text(wheel.config())
        options = ["--config", str(tmp_path / "pyproject.toml")]
    out = tmp_path / "out.txt"
    main(["check", *options, "-q", "--format", "text", "-o", str(out), *wheel.claim_args(), str(path)])
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= SCREEN_LINES, f"{len(lines)} lines"
    long = [line for line in lines if len(line) > SCREEN_WIDTH]
    assert not long, f"{len(long)} lines over {SCREEN_WIDTH} characters, the first: {long[0][:300]}"
