"""Claim strings: every CUDA spelling (CMake, TORCH_CUDA_ARCH_LIST, nvcc flags, plain lists)
and every AMD spelling, generated from their grammar and then corrupted. A claim either parses
into architectures archaudit knows or raises ValueError (exit 2 with C002 through the CLI):
never another exception, never a silently empty claim."""

from hypothesis import given, strategies as st

import fuzzlib as fz
from archaudit import claims
from archaudit.gpus import amd as gfx

ARCH = st.sampled_from(
    [
        "75",
        "80",
        "86",
        "87",
        "89",
        "90",
        "90a",
        "100",
        "100a",
        "100f",
        "103f",
        "120",
        "121f",
        "8.0",
        "9.0a",
        "12.0",
        "0",
        "1",
        "99999999999",
        "8.",
        ".0",
        "-1",
        "80x",
    ]
)
CUDA_TOKEN = st.one_of(
    ARCH,
    st.builds(lambda a, k: f"{a}-{k}", ARCH, st.sampled_from(["real", "virtual", "REAL", "foo", ""])),
    st.builds(lambda a: f"{a}+PTX", ARCH),
    st.builds(lambda p, a: f"{p}{a}", st.sampled_from(["sm_", "compute_", "lto_", "SM_", "gfx"]), ARCH),
    st.sampled_from(
        [
            "all",
            "all-major",
            "native",
            "Ampere",
            "Hopper",
            "OFF",
            "-gencode",
            "-arch",
            "-code",
            "arch=compute_80,code=sm_80",
            "arch=compute_90,code=[sm_90,compute_90]",
            "code=[",
            "arch=compute_80,code=sm_80,",
            "--generate-code=arch=compute_80,code=sm_80",
            "-arch=sm_80",
            "-arch=all",
            "-code=sm_80",
            "=",
            "[",
            "]",
            "+",
            "\x00",
            "\u00a0",
        ]
    ),
)
SEP = st.sampled_from([";", ",", " ", "\t", "\n", ";;", ", ", "=", ""])


@st.composite
def cuda_claim(draw):
    tokens = draw(st.lists(CUDA_TOKEN, min_size=0, max_size=8))
    text = ""
    for t in tokens:
        text += t + draw(SEP)
    if draw(st.booleans()):
        text = draw(st.text(max_size=40)) if draw(st.booleans()) else text + draw(st.text(max_size=6))
    return text


def _claim_outcome(text, style, cuda):
    try:
        c = claims.parse_claim(text, "fuzz", style=style, cuda_version=cuda)
    except ValueError:
        return None
    assert c.archs, text
    assert all(a.sass or a.ptx for a in c.archs), text
    return c


@given(
    text=cuda_claim(),
    style=st.sampled_from(claims.STYLES),
    cuda=st.sampled_from([(13, 0), (12, 8), (11, 8), (0, 0), (99, 99)]),
)
def test_parse_claim(text, style, cuda):
    fz.tally("claims-cuda")
    _claim_outcome(text, style, cuda)


GFX = st.sampled_from(
    [
        "gfx90a",
        "gfx942",
        "gfx1100",
        "gfx1201",
        "gfx906",
        "gfx9-generic",
        "gfx90a:xnack+",
        "gfx942:sramecc+:xnack-",
        "gfx90a:xnack+:xnack-",
        "gfx1100:xnack+",
        "gfx",
        "gfx9999",
        "native",
        "all",
        "sm_80",
        ":",
        "gfx90a:",
        "gfx90a:foo+",
    ]
)
AMD_TOKEN = st.one_of(
    GFX,
    st.builds(
        lambda f, g: f"{f}{g}",
        st.sampled_from(
            [
                "--offload-arch=",
                "--amdgpu-target=",
                "-DGPU_TARGETS=",
                "PYTORCH_ROCM_ARCH=",
                "--offload-arch ",
                "-x",
                "FOO=",
            ]
        ),
        GFX,
    ),
    st.sampled_from(["--offload-arch", "--offload-arch=", "'", '"', "-D", "="]),
)


@st.composite
def amd_claim(draw):
    text = draw(st.sampled_from(["", " "]))
    for t in draw(st.lists(AMD_TOKEN, max_size=6)):
        text += t + draw(SEP)
    if draw(st.booleans()):
        text += draw(st.text(max_size=10))
    return text


@given(text=amd_claim())
def test_parse_amd_claim(text):
    fz.tally("claims-amd")
    try:
        out = gfx.parse_amd_claim(text)
    except ValueError:
        return
    assert out and len(out) == len(set(out)), text
    for t in out:
        assert gfx.normalise(t) == t


@given(text=cuda_claim(), amd=amd_claim() | st.none(), style=st.sampled_from(claims.STYLES))
def test_claims_through_cli(text, amd, style):
    """Through the CLI: a bad claim is exit 2 with the reason on stderr, never a traceback."""
    fz.tally("claims-cli")
    if text.startswith("-") or (amd or "").startswith("-"):
        text = " " + text  # argparse would read a leading '-' as an option
    argv = [
        "check",
        "--no-config",
        "-q",
        "--format",
        "json",
        str(fz.CUDA / "lib_sm80.so"),
        "--arch",
        text,
        "--arch-style",
        style,
    ]
    if amd is not None:
        argv += ["--amd-arch", " " + amd]
    run = fz.run_cli(argv)
    fz.check_run(run, 0, repr(argv))
    ok = _claim_outcome(text, style, (13, 0)) is not None
    if not ok:
        assert run.code == 2 and "C002" in run.stderr, (text, run.stderr)
