"""NVIDIA GPU architectures and CUDA's rules for which code runs where.

The rules and tables live in ``data/cuda.json`` and ``data/gpus.json`` so a new GPU or
CUDA release is a data change, not a code change. Everything here is pure: no file of
the wheel under audit is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from packaging.utils import canonicalize_name

CC = tuple[int, int]
"""A compute capability, (major, minor): (9, 0) is 9.0. The one definition."""


def label(cc: CC) -> str:
    """A compute capability as claims spell it: (9, 0) -> "90"."""
    return f"{cc[0]}{cc[1]}"


def target_order(label: str) -> tuple[int, int, str]:
    """The order code targets are listed in: sm_XX, then compute_XX, then any other vendor's
    (gfx...), each by its number."""
    kind = 0 if label.startswith("sm_") else 1 if label.startswith("compute_") else 2
    digits = "".join(ch for ch in label.split("_", 1)[-1] if ch.isdigit())
    return kind, int(digits or 0), label


_SUFFIXES = ("", "a", "f")


@cache
def _data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("archaudit").joinpath("data").joinpath(name).read_text("utf-8"))
    return data


@dataclass(frozen=True, slots=True)
class Statement:
    """A string a library's host code carries that states the GPU range of some of its kernels
    (data/vendor.json ``statements``): NCCL refuses fp8 reductions below sm_90 with "FP8
    reduction support begins with sm90 capable devices.", so its fp8 kernels never run there."""

    name: str
    file: re.Pattern[str]  # the library's file name (SONAME, with auditwheel's hash)
    text: bytes  # the exact bytes the library must carry
    kernels: re.Pattern[str]  # the kernels it speaks for, by name
    speaks_for: str  # those kernels in words
    first: CC  # the first GPU it allows them on
    source: str

    def applies(self, file_name: str, carried: tuple[str, ...]) -> bool:
        """Whether a library of this file name, whose bytes held ``carried``, makes the statement."""
        return self.text.decode("utf-8") in carried and self.file.match(file_name) is not None

    def excuses(self, kernel: str, gpu: CC) -> bool:
        """Whether it speaks for ``kernel`` on ``gpu``: a kernel it names, on a GPU below its range."""
        return gpu < self.first and self.kernels.search(kernel) is not None


@cache
def statements() -> tuple[Statement, ...]:
    """Every sourced statement (data/vendor.json ``statements``)."""
    table = _data("vendor.json")
    return tuple(
        Statement(
            name,
            re.compile(row["file"]),
            row["string"].encode("utf-8"),
            re.compile(row["kernels"]),
            row["speaks_for"],
            _cc(row["from"]),
            table["sources"][row["source"]],
        )
        for name, row in table.get("statements", {}).items()
    )


def library_statements(file_name: str, carried: tuple[str, ...]) -> tuple[Statement, ...]:
    """The statements a library makes: its file name is the row's, and its bytes hold the string."""
    return tuple(s for s in statements() if s.applies(file_name, carried))


def cuda_data() -> dict[str, Any]:
    """The parsed ``data/cuda.json`` (shared, do not mutate)."""
    return _data("cuda.json")


def _cc(text: str) -> CC:
    major, _, minor = text.partition(".")
    return int(major), int(minor)


@dataclass(frozen=True, order=True)
class CudaTarget:
    """One NVIDIA target: compute capability plus the ``a`` (arch-specific) or ``f`` (family) suffix."""

    major: int
    minor: int
    suffix: str = ""

    def __post_init__(self) -> None:
        if self.suffix not in _SUFFIXES:
            raise ValueError(f"CUDA target suffix must be '', 'a' or 'f', not {self.suffix!r}")
        if not (0 < self.major and 0 <= self.minor <= 9):
            raise ValueError(f"not a compute capability: {self.major}.{self.minor}")

    @property
    def cc(self) -> CC:
        return (self.major, self.minor)

    @property
    def number(self) -> int:
        return self.major * 10 + self.minor

    @property
    def label(self) -> str:
        return f"{self.number}{self.suffix}"

    @property
    def sm(self) -> str:
        return f"sm_{self.label}"

    @property
    def compute(self) -> str:
        return f"compute_{self.label}"

    def __str__(self) -> str:
        return self.sm

    @classmethod
    def from_number(cls, arch: int, suffix: str = "") -> CudaTarget:
        """From the number fatbin headers and nvcc use (90, 100, 121): the last digit is the minor."""
        if arch < 10:
            raise ValueError(f"not an architecture number: {arch}")
        return cls(arch // 10, arch % 10, suffix)

    @classmethod
    def parse(cls, text: str) -> CudaTarget:
        """Parse ``sm_90a``, ``compute_90``, ``lto_80``, ``90a``, ``9.0a``, ``100f`` or ``12.1``.

        The prefix only names the kind of code; callers that care read it themselves.
        """
        m = _TARGET_RE.fullmatch(text.strip())
        if not m:
            raise ValueError(f"not a CUDA architecture: {text!r}")
        major, minor, number, suffix = m.group("major", "minor", "number", "suffix")
        suffix = (suffix or "").lower()
        if number is not None:
            return cls.from_number(int(number), suffix)
        return cls(int(major), int(minor), suffix)


# "90", "sm_90a", "compute_100f", "lto_80" (number: last digit is the minor) or "9.0a", "12.1" (dotted).
_TARGET_RE = re.compile(
    r"(?:(?:sm|compute|lto)_)?(?:(?P<number>[1-9]\d{1,2})|(?P<major>[1-9]\d?)\.(?P<minor>\d))(?P<suffix>[afAF])?",
    re.IGNORECASE | re.ASCII,
)


def _load_ccs() -> tuple[tuple[CC, ...], frozenset[CC], dict[CC, CC]]:
    table = _data("cuda.json")["compute_capabilities"]
    known = tuple(sorted(_cc(c) for c in table["known"]))
    tegra = frozenset(_cc(c) for c in table["tegra"])
    aliases = {_cc(k): _cc(v["canonical"]) for k, v in table["aliases"].items()}
    return known, tegra, aliases


KNOWN_CCS, TEGRA_CCS, CC_ALIASES = _load_ccs()


def canonical_cc(cc: CC) -> CC:
    """The name CUDA 13 uses for a GPU that older toolkits called otherwise (Thor: 10.1 -> 11.0)."""
    key = (cc[0], cc[1])
    return CC_ALIASES.get(key, key)


def renamed(code: CC, gpu: CC) -> bool:
    """Whether code and GPU name one GPU by two names (sm_101 and 11.0, Thor before and after
    CUDA 13). Machine code for one name is not known to load under the other: CUDA 13 dropped
    sm_101 ("SM101 is no longer valid", CUTLASS 4.2) and no source says its driver loads an
    sm_101 cubin on 11.0, so such SASS is judged not to run (fail closed)."""
    a, b = (code[0], code[1]), (gpu[0], gpu[1])
    return a != b and canonical_cc(a) == canonical_cc(b)


def is_tegra(cc: CC) -> bool:
    """Tegra (Jetson/DRIVE) parts, where SASS is only binary compatible with its exact CC."""
    return canonical_cc(cc) in TEGRA_CCS


def sass_runs_on(code: CudaTarget, gpu: CC) -> bool:
    """Whether a cubin for ``code`` loads natively on a GPU of compute capability ``gpu``.

    Plain SASS runs on the same major with an equal or higher minor (desktop only); Tegra
    SASS and any SASS on a Tegra GPU need an exact match; ``a`` needs an exact match;
    ``f`` runs within its family (same major, minor at least its own).
    """
    if renamed(code.cc, gpu):
        return False
    want = canonical_cc(code.cc)
    have = canonical_cc(gpu)
    if want == have:
        return True
    if code.suffix == "a" or is_tegra(want) or is_tegra(have):
        return False
    return have[0] == want[0] and have[1] >= want[1]


def ptx_runs_on(code: CudaTarget, gpu: CC) -> bool:
    """Whether PTX for ``code`` can be JIT-compiled by the driver for a GPU of ``gpu``.

    Plain PTX runs on any equal or newer CC, across majors and on Tegra; ``a`` PTX only on
    its exact CC; ``f`` PTX within its family.
    """
    want = canonical_cc(code.cc)
    have = canonical_cc(gpu)
    if code.suffix == "a":
        return have == want and not renamed(code.cc, gpu)
    if code.suffix == "f":
        return have[0] == want[0] and have[1] >= want[1]
    return have >= want


def runs_on(kind: str, code: CudaTarget, gpu: CC) -> Literal["native", "jit"] | None:
    """``"native"`` (SASS loads as is), ``"jit"`` (PTX compiled at first load) or None.

    LTO IR and relocatable code are never loaded by the runtime, so they never run.
    """
    if kind == "sass":
        return "native" if sass_runs_on(code, gpu) else None
    if kind == "ptx":
        return "jit" if ptx_runs_on(code, gpu) else None
    if kind in ("lto", "relocatable"):
        return None
    raise ValueError(f"unknown device code kind {kind!r}: expected 'sass', 'ptx', 'lto' or 'relocatable'")


# ---- driver floor ---------------------------------------------------------------------


def _release(release: CC | str) -> CC:
    if isinstance(release, str):
        return _cc(release)
    return int(release[0]), int(release[1])


@cache
def cuda_release_for_ptx_isa(isa: CC | str) -> CC:
    """The CUDA release that introduced a PTX ISA version; its driver is the first to JIT that PTX.

    Raises LookupError for an ISA newer than the table (fail closed: the floor is unknown).
    """
    major, minor = _release(isa)
    table = _data("cuda.json")["ptx_isa"]["introduced_in"]
    try:
        return _cc(table[f"{major}.{minor}"]["cuda"])
    except KeyError:
        raise LookupError(
            f"PTX ISA {major}.{minor} is not in archaudit's table; its minimum driver is unknown"
        ) from None


def newest_ptx_isa(cuda_release: CC | str) -> CC:
    """The newest PTX ISA a CUDA release knows: what its driver's JIT compiles at most.

    Raises LookupError for a release older than the table.
    """
    release = _release(cuda_release)
    table = _data("cuda.json")["ptx_isa"]["introduced_in"]
    known = [_cc(isa) for isa, row in table.items() if _cc(row["cuda"]) <= release]
    if not known:
        raise LookupError(f"no PTX ISA of CUDA {release[0]}.{release[1]} is in archaudit's table")
    return max(known)


@dataclass(frozen=True)
class LastDriver:
    """The newest driver branch that supports a GPU generation, and what its JIT can compile.

    GPUs of ``ccs`` never get a driver newer than ``branch`` ("R470"; for Tegra GPUs the last
    JetPack, "JetPack 4.6 (L4T R32.7)"): PTX of an ISA newer than ``ptx_isa`` (the ISA of CUDA
    ``cuda``, the newest release the branch supports) cannot run there on any driver.
    """

    generation: str
    ccs: tuple[CC, ...]
    branch: str
    cuda: CC
    ptx_isa: CC
    sources: tuple[str, ...]  # keys of the file's 'sources'


@cache
def last_drivers() -> tuple[LastDriver, ...]:
    """Every row of ``last_driver`` in ``data/cuda.json``: generations whose support has ended."""
    rows = _data("cuda.json")["last_driver"]["generations"]
    return tuple(
        LastDriver(
            name,
            tuple(_cc(c) for c in row["ccs"]),
            row["branch"],
            _cc(row["cuda"]),
            _cc(row["ptx_isa"]),
            tuple(row["source"]) if isinstance(row["source"], list) else (row["source"],),
        )
        for name, row in rows.items()
    )


def last_driver(cc: CC) -> LastDriver | None:
    """The last driver branch (or, for Tegra, JetPack) of a GPU's generation; None while
    current drivers support it."""
    cc = canonical_cc(cc)
    return next((row for row in last_drivers() if cc in row.ccs), None)


@cache
def min_driver(cuda_release: CC | str, os: str = "linux", kind: str = "toolkit") -> str:
    """The minimum NVIDIA driver for code built by a CUDA release.

    ``kind="toolkit"``: the driver of that release (Table 3), which PTX of the release's ISA
    needs. ``kind="minor"``: the floor of the release's major family under minor version
    compatibility (Table 2), enough for SASS but not for PTX. A release missing from Table 3
    (12.7 was never shipped) takes the next listed release of its major, which only asks
    for more. Where Table 2 names a family's floor by its branch alone (CUDA 13.x: >= 580),
    the floor is that branch's first driver, the one of the family's first release in Table 3
    (13.0: 580.65.06), so one floor reads as one version whether SASS or PTX needs it. Raises
    LookupError where NVIDIA lists no driver (Windows from CUDA 13).
    """
    major, minor = _release(cuda_release)
    if os not in ("linux", "windows"):
        raise ValueError(f"os must be 'linux' or 'windows', not {os!r}")
    drivers = _data("cuda.json")["drivers"]
    if kind == "minor":
        row = drivers["minor"]["families"].get(str(major))
        label = f"CUDA {major}.x"
    elif kind == "toolkit":
        releases = drivers["toolkit"]["releases"]
        later = sorted((_cc(r), r) for r in releases if _cc(r)[0] == major and _cc(r) >= (major, minor))
        row = releases[later[0][1]] if later else None
        label = f"CUDA {major}.{minor}"
    else:
        raise ValueError(f"kind must be 'toolkit' or 'minor', not {kind!r}")
    value = row.get(os) if row else None
    if not value:
        raise LookupError(f"no minimum {os} driver is known for {label}")
    if kind == "minor" and "." not in str(value):
        return _first_of_branch(str(value), major, os, drivers["toolkit"]["releases"])
    return str(value)


def _first_of_branch(branch: str, major: int, os: str, releases: dict[str, dict[str, str | None]]) -> str:
    """The driver of CUDA `major`'s first release in Table 3 where it is of `branch` (else the
    branch itself: no table says more)."""
    first = min((r for r in releases if _cc(r)[0] == major), key=_cc, default=None)
    driver = releases[first].get(os) if first is not None else None
    return driver if driver and driver.split(".")[0] == branch else branch


# ---- GPU catalog ----------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """A real GPU: what users name, and what the driver reports."""

    name: str
    aliases: tuple[str, ...]
    cc: CC
    integrated: bool

    @property
    def target(self) -> CudaTarget:
        return CudaTarget(*self.cc)

    @property
    def tegra(self) -> bool:
        return is_tegra(self.cc)


_VENDOR_WORDS = ("nvidia", "geforce", "tesla")


def _tokens(name: str) -> tuple[str, ...]:
    words = [w for w in re.split(r"[\s_\-]+", name.lower()) if w]
    while len(words) > 1 and words[0] in _VENDOR_WORDS:
        words.pop(0)
    return tuple(words)


def _norm(name: str) -> str:
    return "".join(_tokens(name))


@cache
def gpu_catalog() -> tuple[Gpu, ...]:
    """Every GPU in ``data/gpus.json``, in file order (roughly by generation)."""
    return tuple(
        Gpu(g["name"], tuple(g["aliases"]), _cc(g["cc"]), bool(g["integrated"])) for g in _data("gpus.json")["gpus"]
    )


@cache
def generations() -> dict[CC, str]:
    """The GPU architecture of each compute capability in the catalog ("Turing" for 7.5), from
    ``generations`` in ``data/gpus.json``."""
    return {_cc(k): v["name"] for k, v in _data("gpus.json")["generations"].items()}


def lookup_gpu(name_or_target: str) -> list[Gpu]:
    """GPUs matching a catalog name or alias (case, spaces and dashes ignored; an NVML name such as
    "NVIDIA A100-SXM4-80GB" matches by its longest catalog prefix) or a target (``sm_90``,
    ``9.0``, ``90``: every catalog GPU of that CC). Empty when nothing matches.
    """
    text = name_or_target.strip()
    try:
        target = CudaTarget.parse(text)
    except ValueError:
        target = None
    if target is not None:
        cc = canonical_cc(target.cc)
        return [g for g in gpu_catalog() if g.cc == cc]
    key = _norm(text)
    if not key:
        return []
    names = {g: {_norm(n) for n in (g.name, *g.aliases)} for g in gpu_catalog()}
    exact = [g for g, keys in names.items() if key in keys]
    if exact:
        return exact
    words = _tokens(text)
    best: tuple[int, Gpu] | None = None
    for g in gpu_catalog():
        for n in (g.name, *g.aliases):
            t = _tokens(n)
            if len(t) < len(words) and words[: len(t)] == t and (best is None or len(t) > best[0]):
                best = (len(t), g)
    return [best[1]] if best else []


# ---- what a GPU generation's last driver can run ---------------------------------------


@cache
def _last_cuda() -> dict[CC, CC]:
    rows = _data("cuda.json")["last_driver"]["generations"].values()
    return {_cc(cc): _cc(row["cuda"]) for row in rows for cc in row["ccs"]}


def last_cuda(gpu: CC) -> CC | None:
    """The newest CUDA release any driver for this GPU supports (its generation's last driver
    branch), or None while its generation is still supported."""
    return _last_cuda().get(canonical_cc(gpu))


@dataclass(frozen=True, slots=True)
class FirstDriver:
    """A GPU generation's own floor (``first_driver`` in ``data/cuda.json``): the CUDA release
    that first supports it; that release's driver is the oldest that drives the GPU at all."""

    generation: str
    ccs: tuple[CC, ...]
    cuda: CC
    sources: tuple[str, ...]

    def driver(self, os: str = "linux") -> str:
        """The GPU's first driver on ``os`` (LookupError where NVIDIA lists none)."""
        return min_driver(self.cuda, os)


@cache
def first_drivers() -> tuple[FirstDriver, ...]:
    """Every row of ``first_driver`` in ``data/cuda.json``."""
    rows = _data("cuda.json")["first_driver"]["generations"]
    return tuple(
        FirstDriver(name, tuple(_cc(c) for c in row["ccs"]), _cc(row["cuda"]), tuple(row["source"]))
        for name, row in rows.items()
    )


def first_driver(gpu: CC) -> FirstDriver | None:
    """The release a GPU's generation is first supported by, or None where no row says (Tegra,
    generations older than every driver row)."""
    cc = canonical_cc(gpu)
    return next((row for row in first_drivers() if cc in row.ccs), None)


def package_cuda(name: str) -> int | None:
    """The CUDA major a package is named for (``nvidia-cuda-cupti-cu12`` -> 12, ``cupy-cuda12x``
    -> 12; ``package_names`` in data/cuda.json), or None for a name that says none. ``name`` is
    a distribution name, any spelling (normalised as PEP 503 does)."""
    m = package_match(name, _data("cuda.json")["package_names"]["patterns"].values())
    return int(m.group("major")) if m else None


def package_match(name: str, rows: Iterable[dict[str, Any]]) -> re.Match[str] | None:
    """The match of the first row whose ``pattern`` matches a distribution name, normalised as
    PEP 503 does (``cupy_cuda12x`` and ``CuPy-CUDA12x`` are ``cupy-cuda12x``), or None."""
    key = canonicalize_name(name)
    return next((m for row in rows if (m := re.match(row["pattern"], key))), None)


def runtime_major(soname: str) -> int | None:
    """The CUDA major a NEEDED library name proves the library was built by
    (``libcudart.so.12`` -> 12; ``cudart64_110.dll`` -> 11, ``cudart64_12.dll`` -> 12), or None
    for a name that says nothing about it. Windows names up to CUDA 11 carry major and minor
    (``digits`` in data/cuda.json)."""
    for row in _data("cuda.json")["runtime_sonames"]["patterns"].values():
        m = re.match(row["pattern"], soname)
        if m:
            number = int(m.group("major"))
            if row.get("digits") == "major-and-minor-through-11" and number >= 20:
                return number // 10  # cudart64_110.dll: 11.x; cudart64_102.dll: 10.2; cudart64_92.dll: 9.2
            return number
    return None


# ---- what nvcc accepts (data/cuda.json nvcc_targets over cmake_all) ----------------------------


def _release_key(release: CC) -> str:
    return f"{release[0]}.{release[1]}"


def _nvcc_rows() -> dict[str, Any]:
    table = _data("cuda.json")
    return {**table["nvcc_targets"]["releases"], **table["cmake_all"]["releases"]}


def nvcc_releases() -> tuple[CC, ...]:
    """The CUDA releases whose accepted architectures are recorded, oldest first."""
    return tuple(sorted(_cc(r) for r in _nvcc_rows()))


def newest_known(release: CC) -> CC | None:
    """The newest architecture nvcc of ``release`` builds for (its 'all'), where that release's
    row is recorded; None otherwise (a release between recorded ones, or one never published,
    as the 12.7 that CUPTI 12.9's Perfworks cubins record, may know more than its neighbours).
    A library a toolkit built supports no GPU newer than that toolkit knows (CUDA 12.6: 9.0;
    Blackwell from 12.8)."""
    row = _nvcc_rows().get(_release_key(release))
    if row is None:
        return None
    newest = max(row["all"])
    return newest // 10, newest % 10


def nvcc_accepts(target: CudaTarget, release: CC | None) -> bool:
    """Whether nvcc of `release` accepts `target` as -arch/-code (sm_XX and compute_XX alike):
    a real architecture of that release's 'all', with an 'a' or 'f' suffix only where the
    release and the architecture allow it. False for a release without a row; `release` None:
    whether any recorded release accepts it."""
    if release is None:
        return any(nvcc_accepts(target, r) for r in nvcc_releases())
    table = _data("cuda.json")
    row = _nvcc_rows().get(_release_key(release))
    if row is None or target.number not in row["all"]:
        return False
    if not target.suffix:
        return True
    rule = table["nvcc_targets"]["suffixes"].get(target.suffix)
    return rule is not None and release >= _cc(rule["since"]) and target.cc >= _cc(rule["min_cc"])


def nvcc_refusal(target: CudaTarget, release: CC | None, spelled: str) -> str | None:
    """Why nvcc of `release` (None: of every recorded release) refuses `target` (spelled as
    given), naming what it accepts and the releases that accept it; None when it is accepted."""
    if nvcc_accepts(target, release):
        return None
    if release is None:
        first, last = nvcc_releases()[0], nvcc_releases()[-1]
        return (
            f"{spelled!r} is not an architecture any nvcc from {_release_key(first)} to {_release_key(last)} "
            f"accepts (`nvcc --list-gpu-code`; 'a' from sm_90a, 'f' from sm_100f)"
        )
    key = _release_key(release)
    rows = _nvcc_rows()
    if key not in rows:
        known = ", ".join(_release_key(r) for r in nvcc_releases())
        return f"no record of what nvcc {key} accepts (--cuda-version: {known})"
    accepted = " ".join(f"sm_{n}" for n in rows[key]["all"])
    others = [r for r in nvcc_releases() if nvcc_accepts(target, r)]
    elsewhere = (
        (
            f"; nvcc {_release_key(others[0])}"
            + (f" to {_release_key(others[-1])}" if len(others) > 1 else "")
            + " accepts it (--cuda-version)"
        )
        if others
        else ""
    )
    return (
        f"{spelled!r} is not an architecture nvcc {key} accepts (it accepts {accepted}, 'a' and 'f' "
        f"where the architecture has them){elsewhere}"
    )


__all__ = [
    "canonical_cc",
    "CC",
    "cuda_data",
    "cuda_release_for_ptx_isa",
    "CudaTarget",
    "first_driver",
    "first_drivers",
    "FirstDriver",
    "generations",
    "Gpu",
    "gpu_catalog",
    "is_tegra",
    "label",
    "last_cuda",
    "last_driver",
    "lookup_gpu",
    "min_driver",
    "newest_ptx_isa",
    "newest_known",
    "nvcc_accepts",
    "nvcc_refusal",
    "package_cuda",
    "package_match",
    "ptx_runs_on",
    "renamed",
    "runs_on",
    "runtime_major",
    "sass_runs_on",
    "Statement",
    "statements",
    "library_statements",
    "target_order",
]
