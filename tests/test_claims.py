"""Claims: every spelling of an architecture list, and the lists PyTorch bakes into its libraries."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from archaudit.claims import Claim, ClaimedArch, embedded_claim_markers, guess_style, parse_claim, parse_embedded
from archaudit.gpus.cuda import CudaTarget
from wheels import fetch

T = CudaTarget.parse


def flags(claim: Claim) -> dict[str, tuple[bool, bool]]:
    """label -> (sass, ptx), the shape the assertions read best in."""
    return {a.target.label: (a.sass, a.ptx) for a in claim.archs}


SP = (True, True)
S = (True, False)
P = (False, True)


# ---- CMake -------------------------------------------------------------------------------------


def test_cmake_real_virtual_and_bare():
    c = parse_claim("80;90-real;100a-virtual", "--arch")
    assert flags(c) == {"80": SP, "90": S, "100a": P}
    assert c.gpus == ((8, 0), (9, 0), (10, 0))
    assert c.source == "--arch" and c.raw == "80;90-real;100a-virtual"
    assert guess_style("80;90-real;100a-virtual") == "cmake"


def test_cmake_all_cuda_13():
    c = parse_claim("all", "pyproject.toml [tool.archaudit] cuda-archs", cuda_version=(13, 0))
    assert c.sass_targets == tuple(
        T(x) for x in ["75", "80", "86", "87", "88", "89", "90", "100", "103", "110", "120", "121"]
    )
    assert c.ptx_targets == (T("120"),)


def test_cmake_all_major_cuda_13():
    c = parse_claim("all-major", "--arch")
    assert c.sass_targets == tuple(T(x) for x in ["75", "80", "90", "100", "110", "120"])
    assert c.ptx_targets == (T("120"),)


@pytest.mark.parametrize(
    "version, first, last, ptx, count",
    [((12, 6), "50", "90", "90", 14), ((12, 8), "50", "120", "120", 17), ((12, 9), "50", "121", "120", 19)],
)
def test_cmake_all_older_releases(version, first, last, ptx, count):
    c = parse_claim("all", "--arch", cuda_version=version)
    assert c.sass_targets[0] == T(first) and c.sass_targets[-1] == T(last)
    assert len(c.sass_targets) == count
    assert c.ptx_targets == (T(ptx),)
    major = parse_claim("all-major", "--arch", cuda_version=version)
    assert all(t.minor == 0 for t in major.sass_targets)


def test_cmake_all_unknown_release():
    with pytest.raises(ValueError, match="11.2"):
        parse_claim("all", "--arch", cuda_version=(11, 2))


@pytest.mark.parametrize("text", ["native", "80;native", "-arch=native", "TORCH native"])
def test_native_cannot_be_audited(text):
    with pytest.raises(ValueError, match="build machine"):
        parse_claim(text, "--arch")


def test_cmake_off():
    with pytest.raises(ValueError, match="OFF"):
        parse_claim("OFF", "--arch", style="cmake")


def test_cmake_bad_token():
    with pytest.raises(ValueError, match="'90-fast'"):
        parse_claim("80;90-fast", "--arch")


# ---- TORCH_CUDA_ARCH_LIST ------------------------------------------------------------------------


def test_torch_list():
    c = parse_claim("7.5 8.0;8.6+PTX 9.0a", "environment TORCH_CUDA_ARCH_LIST")
    assert flags(c) == {"75": S, "80": S, "86": SP, "90a": S}
    assert guess_style("7.5 8.0;8.6+PTX 9.0a") == "torch"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Kepler", {"35": SP}),
        ("Maxwell", {"50": S, "52": SP}),
        ("Maxwell+Tegra", {"53": S}),
        ("Pascal", {"60": S, "61": SP}),
        ("Volta", {"70": SP}),
        ("Volta+Tegra", {"72": S}),
        ("Turing", {"75": SP}),
        ("Ampere", {"80": S, "86": SP}),
        ("Ampere+Tegra", {"87": S}),
        ("Ada", {"89": SP}),
        ("Hopper", {"90": SP}),
        ("Blackwell", {"100": S, "103": S, "120": S, "121": SP}),
        ("Blackwell+Tegra", {"110": S}),
    ],
)
def test_torch_named_generations(name, expected):
    assert flags(parse_claim(name, "environment TORCH_CUDA_ARCH_LIST")) == expected


def test_torch_mixed_names_and_numbers():
    c = parse_claim("Ampere;9.0+PTX 10.0a", "env", style="torch")
    assert flags(c) == {"80": S, "86": SP, "90": SP, "100a": S}


def test_torch_bad_entry():
    with pytest.raises(ValueError, match="'Lovelace'"):
        parse_claim("8.0 Lovelace", "env", style="torch")
    with pytest.raises(ValueError, match="'80'"):
        parse_claim("8.0 80", "env", style="torch")


# ---- nvcc ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("-gencode arch=compute_80,code=sm_80", {"80": S}),
        ("-gencode=arch=compute_90,code=[sm_90,compute_90]", {"90": SP}),
        ("--generate-code arch=compute_90,code=sm_90", {"90": S}),
        ("--generate-code=arch=compute_100a,code=[sm_100a]", {"100a": S}),
        ('-gencode "arch=compute_80,code=[sm_80,compute_80]"', {"80": SP}),
        ("-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=compute_90", {"80": S, "90": P}),
        ("-arch=sm_90", {"90": SP}),
        ("-arch sm_80", {"80": SP}),
        ("-arch=compute_90", {"90": P}),
        ("-arch=compute_90 -code=sm_90,compute_90", {"90": SP}),
        ("-arch=compute_80 -code=sm_80,sm_86", {"80": S, "86": S}),
        ("--gpu-architecture=compute_80 --gpu-code=sm_80", {"80": S}),
        # nvcc 13.0 also embeds plain compute_XY PTX for -arch=sm_XYa / sm_XYf (measured).
        ("--gpu-architecture=sm_100f", {"100": P, "100f": SP}),
        ("-arch=sm_90a", {"90": P, "90a": SP}),
    ],
)
def test_nvcc_flags(text, expected):
    assert guess_style(text) == "nvcc"
    assert flags(parse_claim(text, "--arch")) == expected


def test_nvcc_arch_all():
    assert parse_claim("-arch=all", "--arch").gpus == parse_claim("all", "--arch").gpus
    assert parse_claim("-arch=all-major", "--arch").archs == parse_claim("all-major", "--arch").archs
    with pytest.raises(ValueError, match="-code"):
        parse_claim("-arch=all -code=sm_90", "--arch")


def test_nvcc_cmake_list_form():
    c = parse_claim("-gencode;arch=compute_75,code=sm_75;-gencode;arch=compute_120,code=compute_120", "x")
    assert flags(c) == {"75": S, "120": P}


@pytest.mark.parametrize(
    "text, named",
    [
        ("-gencode arch=compute_80", "needs both"),
        ("-gencode arch=compute_80,code=sm_80,compute_80", "'compute_80'"),
        ("-gencode arch=compute_80,code=sm_8x", "'sm_8x'"),
        ("-gencode arch=compute_80,code=lto_80", "'lto_80'"),
        ("-gencode arch=compute_80,cod=sm_80", "'cod'"),
        ("-arch=sm_90 -O3", "'-O3'"),
        ("-code=sm_90", "without -arch"),
        ("-arch", "needs a value"),
    ],
)
def test_nvcc_errors_name_the_token(text, named):
    with pytest.raises(ValueError) as err:
        parse_claim(text, "--arch", style="nvcc")
    assert named in str(err.value)


NVCC = shutil.which("nvcc")


def _nvcc_accepts(flags_: str, tmp: Path) -> bool:
    """Whether nvcc (13.0 on the developer machines and CI) accepts these flags (--dryrun: no build),
    split on whitespace only, so quotes reach nvcc as a claim string holds them."""
    src = tmp / "k.cu"
    src.write_text("__global__ void k() {}\n")
    assert NVCC is not None, "nvcc (the CUDA toolkit)"
    done = subprocess.run(
        [NVCC, "--dryrun", *flags_.split(), "-c", str(src), "-o", str(tmp / "k.o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode == 0 and "fatal" not in done.stderr


# Forms nvcc 13.0 rejects, each of which a claim parser could read as a narrower or different claim.
NVCC_REJECTS = [
    ("-gencode arch=compute_80,code=sm_80,code=sm_90", "code= twice"),  # was read as {90}
    ("-gencode arch=compute_80,arch=compute_90,code=sm_90", "arch= twice"),
    ("-gencode arch=compute_90,code=sm_80", "cannot be generated"),
    ("-gencode arch=compute_80,code=compute_90", "cannot be generated"),
    ("-gencode arch=compute_90a,code=sm_90", "cannot be generated"),
    ("-gencode arch=compute_100a,code=sm_100f", "cannot be generated"),
    ("-gencode arch=compute_100f,code=sm_110", "cannot be generated"),
    ("-gencode arch=compute_100f,code=compute_100", "cannot be generated"),
    ("-gencode arch=sm_80,code=sm_80", "virtual architecture"),
    ("-gencode arch=compute_80,code=[sm_80,]", "empty code"),
    ("-gencode arch=compute_80,code=[sm_80", "unbalanced"),
    ("-arch=compute_90 -code=sm_80", "cannot be generated"),
    ("-arch=sm_80 -code=sm_80", "virtual architecture"),
]

# Forms nvcc 13.0 accepts that look close to the rejected ones.
NVCC_ACCEPTS = [
    ('-gencode arch=compute_80,code="sm_80,sm_90"', {"80": S, "90": S}),
    ("-gencode arch=compute_80,code=sm_86", {"86": S}),
    ("-gencode arch=compute_90,code=sm_90a", {"90a": S}),
    ("-gencode arch=compute_100f,code=sm_103", {"103": S}),
    ("-gencode arch=compute_100f,code=sm_100a", {"100a": S}),
    ("-arch=compute_80 -code=sm_80 -code=sm_90", {"80": S, "90": S}),  # every -code counts
]


@pytest.mark.parametrize("text, named", NVCC_REJECTS)
def test_nvcc_rejected_forms_are_rejected(text, named, tmp_path):
    with pytest.raises(ValueError, match=named):
        parse_claim(text, "--arch")
    if NVCC:
        assert not _nvcc_accepts(text, tmp_path), f"nvcc accepts {text!r}: the parser must too"


@pytest.mark.parametrize("text, expected", NVCC_ACCEPTS)
def test_nvcc_accepted_forms_parse_whole(text, expected, tmp_path):
    assert flags(parse_claim(text, "--arch")) == expected
    if NVCC:
        assert _nvcc_accepts(text, tmp_path), f"nvcc rejects {text!r}: the parser must too"


@pytest.mark.parametrize(
    "text", ["8\u0660", "sm_8\u0660", "8.\u0660", "-arch=sm_\u0668\u0660", "\uff18\uff10", "80;9\u0660"]
)
def test_non_ascii_digits_are_rejected(text):
    """Python's int() and \\d read Arabic-Indic and full-width digits; no build tool does."""
    with pytest.raises(ValueError, match="non-ASCII"):
        parse_claim(text, "--arch")
    with pytest.raises(ValueError):
        CudaTarget.parse(text.replace("-arch=", ""))


# ---- plain lists -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("80,90", {"80": S, "90": S}),
        ("80 90", {"80": S, "90": S}),
        ("sm_80 sm_90a", {"80": S, "90a": S}),
        ("sm_80,compute_90", {"80": S, "90": P}),
        ("compute_90", {"90": P}),
        ("8.0", {"80": S}),
        ("100f, 121", {"100f": S, "121": S}),
    ],
)
def test_plain_lists(text, expected):
    assert flags(parse_claim(text, "--arch")) == expected


def test_explicit_list_style_rejects_cmake_suffix():
    with pytest.raises(ValueError, match="'80-real'"):
        parse_claim("80-real", "--arch", style="list")


def test_duplicates_merge():
    c = parse_claim("sm_80 compute_80 sm_80", "--arch")
    assert c.archs == (ClaimedArch(T("80"), True, True),)


@pytest.mark.parametrize("text", ["", "   ", ";", ",,"])
def test_empty_claim(text):
    with pytest.raises(ValueError):
        parse_claim(text, "--arch")


def test_unknown_style():
    with pytest.raises(ValueError, match="yaml"):
        parse_claim("80", "--arch", style="yaml")


def test_bad_list_token_named():
    with pytest.raises(ValueError, match="'hopper9'"):
        parse_claim("80,hopper9", "--arch")


def test_claim_gpus_sorted_unique():
    c = parse_claim("sm_90a,sm_80,compute_90,sm_90", "--arch")
    assert c.gpus == ((8, 0), (9, 0))
    assert len(c.archs) == 3


# ---- round trips --------------------------------------------------------------------------------------

_targets = st.builds(
    CudaTarget, major=st.integers(5, 12), minor=st.integers(0, 9), suffix=st.sampled_from(["", "a", "f"])
)
_archs = st.lists(st.tuples(_targets, st.sampled_from([S, P, SP])), min_size=1, max_size=8, unique_by=lambda t: t[0])


def _cmake(archs):
    kinds = {S: "-real", P: "-virtual", SP: ""}
    return ";".join(f"{t.label}{kinds[k]}" for t, k in archs)


def _nvcc(archs):
    codes = {S: "[sm_{0}]", P: "[compute_{0}]", SP: "[sm_{0},compute_{0}]"}
    return " ".join(f"-gencode=arch=compute_{t.label},code={codes[k].format(t.label)}" for t, k in archs)


def _torch(archs):
    return " ".join(f"{t.major}.{t.minor}{t.suffix}" + ("+PTX" if k == SP else "") for t, k in archs)


@given(_archs)
def test_round_trip_cmake_and_nvcc(archs):
    expected = tuple(ClaimedArch(t, *k) for t, k in sorted(archs))
    assert parse_claim(_cmake(archs), "x", style="cmake").archs == expected
    assert parse_claim(_nvcc(archs), "x").archs == expected


@given(_archs)
def test_round_trip_torch(archs):
    archs = [(t, k) for t, k in archs if k != P]  # torch cannot spell PTX without SASS
    if not archs:
        return
    expected = tuple(ClaimedArch(t, *k) for t, k in sorted(archs))
    assert parse_claim(_torch(archs), "x", style="torch").archs == expected


# ---- embedded claims ------------------------------------------------------------------------------

TORCH_NVCC = b"-gencode;arch=compute_75,code=sm_75;-gencode;arch=compute_90,code=compute_90"


def _window(blob: bytes, marker: bytes) -> bytes:
    i = blob.find(marker)
    assert i >= 0
    return blob[i : i + 4096]


def test_markers_are_specific():
    markers = embedded_claim_markers()
    assert markers and all(isinstance(m, bytes) and len(m) >= 4 for m in markers)
    assert all(m.startswith(b"\x00") for m in markers)


def test_parse_embedded_gencode_string():
    blob = b"report a bug to PyTorch. \x00\x00" + TORCH_NVCC + b"\x00\x00\x00hasPrimaryContext"
    found = parse_embedded(_window(blob, embedded_claim_markers()[0]))
    assert found == [TORCH_NVCC.decode()]
    assert flags(parse_claim(found[0], "embedded in libtorch_cuda.so")) == {"75": S, "90": P}


def test_parse_embedded_arch_list_string():
    blob = b"abi_1\x00\x00\x00sm_75 sm_80 sm_90a compute_120\x00\x00/x.cpp"
    found = parse_embedded(_window(blob, b"\x00sm_"))
    assert found == ["sm_75 sm_80 sm_90a compute_120"]
    assert flags(parse_claim(found[0], "embedded")) == {"75": S, "80": S, "90a": S, "120": P}


@pytest.mark.parametrize(
    "blob",
    [
        b"\x00sm_90\x00sm_89\x00sm_86\x00--gpu-architecture=\x00",  # torch's NVRTC arch table
        b"\x00sm_90 is not supported\x00",
        b"\x00-gencode;arch=compute_75,code=sm_75;junk\x00",
        b"\x00-gencode;arch=compute_75,code=sm_75",  # cut off by the window: not trusted
        b"\x00sm_75 sm_80",
        b"",
    ],
)
def test_parse_embedded_rejects(blob):
    assert parse_embedded(blob) == []


# ---- real wheels (slow) --------------------------------------------------------------------------

WINDOW = 4096


def _wheel(requirement: str, filename: str) -> Path:
    """A pinned wheel, downloaded once into the cache for this exact file's own tags."""
    name, version = requirement.split("==")
    return fetch(name, version, filename=filename)


def _scan_member(whl: Path, member: str, chunk: int = 8 << 20) -> tuple[list[str], int]:
    """Claims found in one zip member, read in bounded chunks (never extracted): (claims, marker hits)."""
    markers = embedded_claim_markers()
    keep = WINDOW + max(map(len, markers))
    found: list[str] = []
    seen: set[int] = set()
    buf, base = b"", 0
    with zipfile.ZipFile(whl) as zf, zf.open(member) as f:
        while True:
            data = f.read(chunk)
            buf += data
            for marker in markers:
                i = buf.find(marker)
                while i >= 0:
                    if base + i not in seen and (not data or i + WINDOW <= len(buf)):
                        seen.add(base + i)
                        found.extend(parse_embedded(buf[i : i + WINDOW]))
                    i = buf.find(marker, i + 1)
            if not data:
                return found, len(seen)
            drop = max(0, len(buf) - keep)
            buf, base = buf[drop:], base + drop


@pytest.mark.census  # torch: 555 MB
def test_torch_2_14_1_embedded_claim():
    whl = _wheel("torch==2.14.1", "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")
    found, hits = _scan_member(whl, "torch/lib/libtorch_cuda.so")
    assert hits >= 1
    assert found == [
        "-gencode;arch=compute_75,code=sm_75;-gencode;arch=compute_80,code=sm_80;"
        "-gencode;arch=compute_86,code=sm_86;-gencode;arch=compute_90,code=sm_90;"
        "-gencode;arch=compute_100,code=sm_100;-gencode;arch=compute_120,code=sm_120"
    ]
    claim = parse_claim(found[0], "embedded in libtorch_cuda.so")
    assert claim.gpus == ((7, 5), (8, 0), (8, 6), (9, 0), (10, 0), (12, 0))
    assert all(a.sass and not a.ptx for a in claim.archs)

    # What torch.cuda.get_arch_list() returns: CUDA_ARCH_FLAGS in libtorch_python.so.
    listed, _ = _scan_member(whl, "torch/lib/libtorch_python.so")
    assert listed == ["sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"]
    assert parse_claim(listed[0], "embedded in libtorch_python.so").archs == claim.archs


@pytest.mark.census  # cuBLAS: 423 MB
def test_no_embedded_claim_in_cublas():
    whl = _wheel("nvidia-cublas==13.1.1.3", "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl")
    with zipfile.ZipFile(whl) as zf:
        libs = [n for n in zf.namelist() if ".so" in n.rsplit("/", 1)[-1]]
    assert libs
    for member in libs:
        found, _ = _scan_member(whl, member)
        assert found == [], member


# ---- claims as projects write them: CMake, TORCH_CUDA_ARCH_LIST, nvcc flags -----------------------
# Claim parsing branches that mutation testing showed no test pinned (docs/mutation.md).
#
# Each claim is written as a project writes it (CMake's CUDA_ARCHITECTURES, TORCH_CUDA_ARCH_LIST,
# nvcc flags); what nvcc itself does with the flags was measured with nvcc 13.0 and cuobjdump.

SP = (True, True)
S = (True, False)
P = (False, True)


@pytest.mark.parametrize(
    "text, style, want",
    [
        # CUDA_ARCHITECTURES: bare numbers split by ';' are SASS and PTX each; -real SASS, -virtual PTX
        ("80;90", "cmake", {"80": SP, "90": SP}),
        ("90-virtual", "cmake", {"90": P}),  # one value, no ';': still CMake's spelling
        ("80-real", "cmake", {"80": S}),
        # TORCH_CUDA_ARCH_LIST
        ("9.0+PTX", "torch", {"90": SP}),
        ("9.0a;10.0a", "torch", {"90a": S, "100a": S}),  # vLLM / FlashAttention 3 builds
        (";8.0;9.0+PTX", "torch", {"80": S, "90": SP}),  # "$TORCH_CUDA_ARCH_LIST;9.0+PTX" with the variable empty
        # a plain list of nvcc code names, split by ';' as CMake lists are
        ("sm_80;sm_90;compute_90", "list", {"80": S, "90": SP}),
        ("sm_80;sm_90", "list", {"80": S, "90": S}),
        ("compute_80;compute_90", "list", {"80": P, "90": P}),
        ("80,90", "list", {"80": S, "90": S}),  # split by ',' or spaces: SASS each
    ],
)
def test_each_spelling_is_recognised_and_read_as_its_tool_reads_it(text, style, want):
    assert guess_style(text) == style
    assert flags(parse_claim(text, "--arch")) == want


def test_a_list_naming_all_major_keeps_the_targets_after_it():
    """Every token of a CMake list counts, wherever `all-major` stands in it."""
    after = parse_claim("all-major;121", "--arch", cuda_version=(13, 0))
    before = parse_claim("121;all-major", "--arch", cuda_version=(13, 0))
    assert flags(after) == flags(before) and (12, 1) in after.gpus and (7, 5) in after.gpus


def test_torch_lists_are_split_as_torch_splits_them():
    """torch.utils.cpp_extension splits TORCH_CUDA_ARCH_LIST on ';' and spaces, not on ','."""
    with pytest.raises(ValueError, match="bad TORCH_CUDA_ARCH_LIST entry '8.0,9.0'"):
        parse_claim("8.0,9.0", "--arch")


@pytest.mark.parametrize(
    "text", ["lto_80,sm_90", "lto_80;sm_90", "lto_80;lto_90", "-gencode arch=compute_80,code=lto_80"]
)
def test_lto_targets_in_any_spelling_are_refused_with_the_reason(text):
    """lto_XY is link-time IR: no GPU loads it, so it claims nothing (a ValueError, never a crash)."""
    with pytest.raises(ValueError, match="link-time IR, which no GPU loads"):
        parse_claim(text, "--arch")


def test_a_gencode_value_with_anything_after_its_pairs_is_refused():
    with pytest.raises(ValueError, match="bad -gencode value"):
        parse_claim("-gencode arch=compute_80,code=sm_80,X", "--arch")


def test_repeated_arch_flags_each_keep_their_own_codes():
    """nvcc 13.0 keeps only the last of several -arch options ("incompatible redefinition for option
    'gpu-architecture', the last value of this option was used": `-arch=sm_80 -arch=sm_90` embeds
    sm_90 and compute_90 alone). The claim reads every -arch the text names, with the -code options
    that follow it: a claim never names fewer GPUs than its text does (the wheel is then judged for
    8.0 too, and G001 says when it lacks code for it)."""
    assert flags(parse_claim("-arch=sm_80 -arch=sm_90", "--arch")) == {"80": SP, "90": SP}
    assert flags(parse_claim("-arch=compute_80 -code=sm_80 -arch=sm_90", "--arch")) == {"80": S, "90": SP}
    assert flags(parse_claim("-arch=sm_80 -arch=compute_90 -code=sm_90", "--arch")) == {"80": SP, "90": S}
    every = parse_claim("-arch=all-major -arch=sm_121", "--arch", cuda_version=(13, 0))
    assert flags(every) == {**flags(parse_claim("all-major", "--arch", cuda_version=(13, 0))), "121": SP}
