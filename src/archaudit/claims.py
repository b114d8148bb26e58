"""What a wheel claims to support, from every common way of writing a GPU architecture list.

Every spelling (CMake, TORCH_CUDA_ARCH_LIST, nvcc flags, plain lists, and the flags PyTorch
bakes into its own libraries) becomes one model, :class:`Claim`, so the audit rule never sees
a spelling. Expansions that depend on a CUDA release (``all``, named generations) come from
``data/cuda.json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .gpus import cuda as arch
from .gpus.cuda import CudaTarget, cuda_data

STYLES = ("auto", "cmake", "torch", "nvcc", "list")


@dataclass(frozen=True)
class ClaimedArch:
    """One claimed target and what the build says it embeds for it: SASS, PTX or both."""

    target: CudaTarget
    sass: bool
    ptx: bool


@dataclass(frozen=True)
class Claim:
    """A normalised architecture list, with where it came from (shown in every report)."""

    archs: tuple[ClaimedArch, ...]
    source: str
    raw: str

    @property
    def gpus(self) -> tuple[tuple[int, int], ...]:
        """The compute capabilities claimed, sorted and unique. A family claim (``100f``)
        promises every GPU of the family (10.0 and 10.3), not only its first; ``a`` claims
        only their own."""
        out = {a.target.cc for a in self.archs}
        for a in self.archs:
            if a.target.suffix == "f":
                out.update(cc for cc in arch.KNOWN_CCS if arch.sass_runs_on(a.target, cc))
        return tuple(sorted(out))

    @property
    def sass_targets(self) -> tuple[CudaTarget, ...]:
        return tuple(a.target for a in self.archs if a.sass)

    @property
    def ptx_targets(self) -> tuple[CudaTarget, ...]:
        return tuple(a.target for a in self.archs if a.ptx)


class _Builder:
    def __init__(self) -> None:
        self.flags: dict[CudaTarget, list[bool]] = {}

    def add(self, target: CudaTarget, sass: bool = False, ptx: bool = False) -> None:
        flags = self.flags.setdefault(target, [False, False])
        flags[0] |= sass
        flags[1] |= ptx

    def archs(self) -> tuple[ClaimedArch, ...]:
        return tuple(ClaimedArch(t, s, p) for t, (s, p) in sorted(self.flags.items()))


def _target(token: str, text: str) -> CudaTarget:
    try:
        return CudaTarget.parse(token)
    except ValueError:
        raise ValueError(f"bad architecture {token!r} in claim {text!r}") from None


def _native_error(token: str) -> ValueError:
    return ValueError(
        f"{token!r} names the GPU of the build machine, which is not recorded anywhere: "
        "it cannot be audited. Claim the architectures explicitly (e.g. '80;90')."
    )


def _all_expansion(which: str, cuda_version: tuple[int, int], b: _Builder) -> None:
    releases = cuda_data()["cmake_all"]["releases"]
    key = f"{cuda_version[0]}.{cuda_version[1]}"
    if key not in releases:
        raise ValueError(
            f"{which!r} depends on the CUDA release; archaudit knows it for "
            f"{', '.join(sorted(releases))}, not {key}: give the architectures explicitly"
        )
    row = releases[key]
    for number in row[which]:
        b.add(CudaTarget.from_number(number), sass=True)
    b.add(CudaTarget.from_number(row["ptx"]), ptx=True)


def _split(text: str) -> list[str]:
    return [t for t in re.split(r"[\s;,]+", text.strip()) if t]


# ---- CMake ------------------------------------------------------------------------------

_CMAKE_RE = re.compile(r"(?P<arch>[1-9]\d{1,2}[afAF]?)(?:-(?P<kind>real|virtual))?")


def _parse_cmake(text: str, cuda_version: tuple[int, int], b: _Builder) -> None:
    for token in _split(text):
        low = token.lower()
        if low in ("all", "all-major"):
            _all_expansion(low, cuda_version, b)
            continue
        if low == "native":
            raise _native_error(token)
        if low in ("off", "false", "no", "0"):
            raise ValueError(f"CUDA_ARCHITECTURES {token!r} disables architecture flags: there is no claim to audit")
        m = _CMAKE_RE.fullmatch(token)
        if not m:
            raise ValueError(f"bad CMake CUDA architecture {token!r} in claim {text!r}")
        target = _target(m["arch"], text)
        kind = (m["kind"] or "").lower()
        b.add(target, sass=kind != "virtual", ptx=kind != "real")


# ---- TORCH_CUDA_ARCH_LIST ----------------------------------------------------------------

_TORCH_RE = re.compile(r"(?P<arch>[1-9]\d?\.\d[afAF]?)(?P<ptx>\+PTX)?", re.IGNORECASE)


def _torch_names() -> dict[str, str]:
    return {k.lower(): v["arches"] for k, v in cuda_data()["torch_named_arches"]["names"].items()}


def _parse_torch(text: str, b: _Builder) -> None:
    names = _torch_names()
    for token in re.split(r"[\s;]+", text.strip()):
        if not token:
            continue
        if token.lower() == "native":
            raise _native_error(token)
        expanded = names.get(token.lower())
        for part in expanded.split(";") if expanded else [token]:
            m = _TORCH_RE.fullmatch(part)
            if not m:
                raise ValueError(f"bad TORCH_CUDA_ARCH_LIST entry {token!r} in claim {text!r}")
            target = _target(m["arch"], text)
            # torch.utils.cpp_extension: "X.Y" -> code=sm_XY; "+PTX" adds code=compute_XY.
            b.add(target, sass=True, ptx=bool(m["ptx"]))


# ---- nvcc flags ---------------------------------------------------------------------------

_OPT_RE = re.compile(r"(?P<opt>-gencode|--generate-code|-arch|--gpu-architecture|-code|--gpu-code)(?:=(?P<value>.*))?")
_OPT_CANON = {
    "-gencode": "gencode",
    "--generate-code": "gencode",
    "-arch": "arch",
    "--gpu-architecture": "arch",
    "-code": "code",
    "--gpu-code": "code",
}


def _code_target(token: str, text: str) -> tuple[CudaTarget, bool, bool]:
    """An nvcc code name: sm_XY is SASS, compute_XY is PTX; lto_XY never loads, so it claims nothing."""
    low = token.lower()
    if low.startswith("lto_"):
        raise ValueError(
            f"{token!r} in claim {text!r} is link-time IR, which no GPU loads: "
            "claim the sm_/compute_ targets of the final link"
        )
    if low.startswith("sm_"):
        return _target(token, text), True, False
    if low.startswith("compute_"):
        return _target(token, text), False, True
    raise ValueError(f"bad nvcc code {token!r} in claim {text!r}: expected sm_XY or compute_XY")


def _virtual_arch(arch: str, text: str) -> CudaTarget:
    """The value of arch= / -arch= when codes are given: nvcc requires a virtual architecture."""
    if not arch.lower().startswith("compute_"):
        raise ValueError(
            f"arch {arch!r} in claim {text!r} must be a virtual architecture (compute_XY) "
            f"when codes are given, as nvcc requires"
        )
    return _target(arch, text)


def _compatible(arch: CudaTarget, code: CudaTarget, sass: bool) -> bool:
    """Whether nvcc 13.0 accepts code= for arch= (else "Incompatible code generation requested").

    PTX must be the virtual architecture itself. SASS must be at least the architecture; an
    'a' architecture yields only its own 'a' SASS; an 'f' one only SASS of its family (same major).
    """
    if not sass:
        return code == arch
    if arch.suffix == "a":
        return code.cc == arch.cc and code.suffix == "a"
    if arch.suffix == "f":
        return code.major == arch.major and code.cc >= arch.cc
    return code.cc >= arch.cc


def _codes(arch: CudaTarget, value: str, text: str, b: _Builder) -> None:
    """A code list ("sm_80", "[sm_80,compute_80]", "sm_80,sm_90"), each checked as nvcc does."""
    items = _unquote(value)
    if items.startswith("["):
        if not items.endswith("]"):
            raise ValueError(f"unbalanced '[' in code list {value!r} of claim {text!r}")
        items = items[1:-1]
    for item in items.split(","):
        if not item.strip():
            raise ValueError(f"empty code in code list {value!r} of claim {text!r}")
        target, sass, ptx = _code_target(item.strip(), text)
        if not _compatible(arch, target, sass):
            raise ValueError(
                f"code {item.strip()!r} cannot be generated from arch {arch.compute!r} in claim "
                f"{text!r} (nvcc: incompatible code generation)"
            )
        b.add(target, sass=sass, ptx=ptx)


_GENCODE_PAIR = r"(\w+)=(\[[^\]]*\]|\"[^\"]*\"|[^,]*)"  # key=value, key=[a,b] or key="a,b"


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _gencode(spec: str, text: str, b: _Builder) -> None:
    spec = _unquote(spec)
    values: dict[str, str] = {}
    for key, value in re.findall(_GENCODE_PAIR, spec):
        if key not in ("arch", "code"):
            raise ValueError(f"bad -gencode key {key!r} in claim {text!r}")
        if key in values:  # nvcc: "redefinition of keyword 'code'"
            raise ValueError(
                f"-gencode {spec!r} in claim {text!r} gives {key}= twice (nvcc rejects it; "
                f"several codes are written code=[a,b])"
            )
        values[key] = value
    leftover = re.sub(_GENCODE_PAIR, "", spec).strip(", ")
    if leftover:
        raise ValueError(f"bad -gencode value {leftover!r} in claim {text!r} (several codes need code=[a,b])")
    if "arch" not in values or "code" not in values:
        raise ValueError(f"-gencode {spec!r} in claim {text!r} needs both arch= and code=")
    _codes(_virtual_arch(values["arch"], text), values["code"], text, b)


def _arch_code(arch: str, codes: list[str], text: str, cuda_version: tuple[int, int], b: _Builder) -> None:
    low = arch.lower()
    if low in ("all", "all-major"):
        if codes:
            raise ValueError(f"-arch={arch} cannot be combined with -code in claim {text!r}")
        _all_expansion(low, cuda_version, b)
        return
    if low == "native":
        raise _native_error(arch)
    target = _target(arch, text)
    if codes:
        virtual = _virtual_arch(arch, text)
        for value in codes:  # nvcc: every -code of one -arch counts
            _codes(virtual, value, text, b)
        return
    if low.startswith("compute_"):
        b.add(target, ptx=True)  # nvcc: -arch=compute_XY alone embeds only that PTX
        return
    # nvcc -arch=sm_XY is -arch=compute_XY -code=sm_XY,compute_XY; for sm_XYa/f nvcc 13.0
    # also embeds plain compute_XY PTX (measured with --dryrun).
    b.add(target, sass=True, ptx=True)
    if target.suffix:
        b.add(CudaTarget(target.major, target.minor), ptx=True)


def _parse_nvcc(text: str, cuda_version: tuple[int, int], b: _Builder) -> None:
    tokens = [t for t in re.split(r"[\s;]+", text.strip()) if t]
    pending_arch: str | None = None
    pending_code: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        m = _OPT_RE.fullmatch(token)
        if not m:
            raise ValueError(f"unexpected {token!r} in nvcc claim {text!r}")
        value = m["value"]
        if value is None:
            i += 1
            if i >= len(tokens):
                raise ValueError(f"{token} needs a value in claim {text!r}")
            value = tokens[i]
        opt = _OPT_CANON[m["opt"]]
        if opt == "gencode":
            _gencode(value, text, b)
        elif opt == "arch":
            if pending_arch is not None:
                _arch_code(pending_arch, pending_code, text, cuda_version, b)
                pending_code = []
            pending_arch = value
        else:
            pending_code.append(value)
        i += 1
    if pending_code and pending_arch is None:
        raise ValueError(f"-code without -arch in claim {text!r}")
    if pending_arch is not None:
        _arch_code(pending_arch, pending_code, text, cuda_version, b)


# ---- plain lists ----------------------------------------------------------------------------


def _parse_list(text: str, b: _Builder) -> None:
    for token in _split(text):
        low = token.lower()
        if low.startswith("sm_"):
            b.add(_target(token, text), sass=True)
        elif low.startswith("compute_"):
            b.add(_target(token, text), ptx=True)
        elif low.startswith("lto_"):
            _code_target(token, text)  # raises with the reason
        elif re.fullmatch(r"[1-9]\d?\.\d[af]?|[1-9]\d{1,2}[af]?", low):
            b.add(_target(token, text), sass=True)
        else:
            raise ValueError(f"bad architecture {token!r} in claim {text!r}")


# ---- dispatch -------------------------------------------------------------------------------


def guess_style(text: str) -> str:
    """Which spelling a claim uses. Bare numbers split by ';' are CMake (SASS and PTX each),
    split by ',' or spaces a plain list (SASS each)."""
    if re.search(r"gencode|generate-code|(^|[\s;])--?(arch|gpu-architecture|code|gpu-code)\b", text):
        return "nvcc"
    tokens = _split(text)
    lowered = [t.lower() for t in tokens]
    names = _torch_names()
    if any(t.endswith("+ptx") or t in names for t in lowered):
        return "torch"
    if any(t.endswith(("-real", "-virtual")) or t in ("all", "all-major") for t in lowered):
        return "cmake"
    if any(re.fullmatch(r"\d+\.\d[af]?", t) for t in lowered):
        return "torch"
    if any(t.startswith(("sm_", "compute_", "lto_")) for t in lowered):
        return "list"
    if ";" in text:
        return "cmake"
    return "list"


def parse_claim(text: str, source: str, style: str = "auto", cuda_version: tuple[int, int] = (13, 0)) -> Claim:
    """Normalise one architecture list.

    ``style`` is "auto" (see :func:`guess_style`), "cmake" (CUDA_ARCHITECTURES), "torch"
    (TORCH_CUDA_ARCH_LIST), "nvcc" (-gencode/-arch/-code flags) or "list" (``80,90``,
    ``sm_90a``, ``8.0``, ``compute_90`` = PTX only). ``cuda_version`` expands ``all`` and
    ``all-major``. Raises ValueError naming the bad token, for ``native`` (the build
    machine's GPU, unknowable afterwards) and for an empty claim.
    """
    if style not in STYLES:
        raise ValueError(f"unknown claim style {style!r}: expected one of {', '.join(STYLES)}")
    if not text or not text.strip():
        raise ValueError(f"empty GPU architecture claim from {source}")
    odd = next((ch for ch in text if not ch.isascii()), None)
    if odd is not None:  # "8\u0660" would read as 80 through Unicode digits; no tool writes that
        raise ValueError(
            f"claim {text!r} from {source} holds the non-ASCII character {odd!r} "
            f"(U+{ord(odd):04X}); architectures are written in ASCII"
        )
    for token in re.split(r"[\s;,=]+", text.strip()):
        if token.lower() == "native":
            raise _native_error(token)
    if style == "auto":
        style = guess_style(text)
    b = _Builder()
    if style == "cmake":
        _parse_cmake(text, cuda_version, b)
    elif style == "torch":
        _parse_torch(text, b)
    elif style == "nvcc":
        _parse_nvcc(text, cuda_version, b)
    else:
        _parse_list(text, b)
    archs = b.archs()
    if not archs:
        raise ValueError(f"claim {text!r} from {source} names no architecture")
    return Claim(archs=archs, source=source, raw=text.strip())


def merge_claims(claims: list[Claim], source: str) -> Claim:
    """Several claims as one (a repeated --arch): every target any of them names, with SASS
    and PTX as any of them asks for it."""
    b = _Builder()
    for c in claims:
        for a in c.archs:
            b.add(a.target, a.sass, a.ptx)
    return Claim(archs=b.archs(), source=source, raw=" ".join(c.raw for c in claims))


# ---- claims baked into binaries -----------------------------------------------------------------

# libtorch_cuda.so keeps NVCC_FLAGS_EXTRA, the CMake list of -gencode flags it was compiled with
# (printed by torch.__config__.show() as "NVCC architecture flags"), e.g.
# "-gencode;arch=compute_75,code=sm_75;...;-gencode;arch=compute_120,code=sm_120".
_TORCH_NVCC_MARKER = b"\x00-gencode;arch=compute_"
_GENCODE_ITEM = rb"-gencode;arch=compute_\d{2,3}[af]?,code=(?:sm|compute)_\d{2,3}[af]?"
_TORCH_NVCC_RE = re.compile(rb"%s(?:;%s)*" % (_GENCODE_ITEM, _GENCODE_ITEM))

# libtorch_python.so keeps CUDA_ARCH_FLAGS, returned by torch._C._cuda_getArchFlags();
# torch.cuda.get_arch_list() (torch 2.14.1) is just its .split(), e.g. "sm_75 sm_80 ... sm_120".
# Two or more space-separated targets are required: NVIDIA libraries hold lone "sm_90" strings.
_TORCH_ARCH_MARKER = b"\x00sm_"
_ARCH_ITEM = rb"(?:sm|compute)_\d{2,3}[af]?"
_TORCH_ARCH_RE = re.compile(rb"sm_\d{2,3}[af]?(?: %s)+" % _ARCH_ITEM)


def embedded_claim_markers() -> tuple[bytes, ...]:
    """Byte strings that start an architecture list PyTorch bakes into its libraries.

    libtorch_cuda.so holds NVCC_FLAGS_EXTRA ("-gencode;arch=compute_75,code=sm_75;...", what
    ``torch.__config__.show()`` prints as "NVCC architecture flags"). libtorch_python.so holds
    CUDA_ARCH_FLAGS ("sm_75 sm_80 ... sm_120"), which ``torch._C._cuda_getArchFlags()`` returns;
    in torch 2.14.1 ``torch.cuda.get_arch_list()`` is ``arch_flags.split()`` of it, i.e.
    ``['sm_75', ..., 'sm_120']`` with ``compute_XY`` for PTX. Each marker includes the NUL that
    ends the preceding C string, so a match is a string's start, not its middle; a hit is only a
    candidate until :func:`parse_embedded` validates it.
    """
    return (_TORCH_NVCC_MARKER, _TORCH_ARCH_MARKER)


def parse_embedded(blob: bytes) -> list[str]:
    """Claim strings at the start of ``blob`` (a window beginning at a marker), as raw text.

    Only a whole NUL-terminated string that is entirely an arch list counts; a string cut
    off by the window's end, or any other text, gives []. The result parses with
    :func:`parse_claim` (style "auto").
    """
    start = len(blob) - len(blob.lstrip(b"\x00"))
    end = blob.find(b"\x00", start)
    if end < 0:
        return []
    string = blob[start:end]
    for pattern in (_TORCH_NVCC_RE, _TORCH_ARCH_RE):
        if pattern.fullmatch(string):
            return [string.decode("ascii")]
    return []


__all__ = [
    "Claim",
    "ClaimedArch",
    "embedded_claim_markers",
    "guess_style",
    "merge_claims",
    "parse_claim",
    "parse_embedded",
    "STYLES",
]
