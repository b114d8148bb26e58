"""Driver floors: the minimum NVIDIA driver a piece of device code needs, and why.

A PTX entry's floor is its ISA's CUDA release; a cubin's the CUDA major that built it (its
toolkit note, else its container's PTX, else the CUDA runtime the library links or carries, else
its package's name); a GPU's own floor is the first driver of its generation; a vendor library's
is its vendor's documented minimum driver. An unknown floor asks most (fail closed). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from ..gpus import cuda as arch, vendor as vendors
from ..gpus.cuda import CC, label
from ..gpus.selection import NvCode
from ..model import PTX, Library

UNKNOWN_KEY = (1 << 30,)


@dataclass(frozen=True, slots=True)
class Floor:
    """The minimum driver some code needs, the CUDA release that sets it, and why.

    ``driver`` None: the floor is unknown (no evidence, or a release newer than the tables)."""

    cuda: CC | None
    driver: str | None
    evidence: str
    # what sets it: the code ("code"), the CUDA runtime the library links or carries ("runtime"),
    # or the GPU itself, which no older driver drives ("gpu")
    kind: Literal["code", "runtime", "gpu"] = "code"

    @property
    def key(self) -> tuple[int, ...]:
        if self.driver is None:
            return UNKNOWN_KEY
        return tuple(int(p) for p in self.driver.split("."))

    @property
    def cuda_text(self) -> str:
        return f"{self.cuda[0]}.{self.cuda[1]}" if self.cuda else "unknown"


def highest(floors: list[Floor]) -> Floor | None:
    """The floor that asks most; an unknown floor asks most of all (fail closed). The first of
    equals wins; one floor object repeats (``_floor`` is cached), so each is weighed once."""
    distinct = list({id(f): f for f in floors}.values())
    return max(distinct, key=lambda f: f.key) if distinct else None


def unit_release(codes: tuple[NvCode, ...]) -> CC | None:
    """The CUDA release whose nvcc built these codes, as their PTX shows: one container is one
    nvcc compilation, so its cubins come from the toolkit of its PTX's ISA (or a later one of
    the same major); a library's containers come from one toolkit, so its PTX dates the
    cubins of containers that carry none."""
    releases = []
    for c in codes:
        if c.kind == PTX and c.entry.code_version != (0, 0):
            try:
                releases.append(arch.cuda_release_for_ptx_isa(c.entry.code_version))
            except LookupError:
                continue
    return max(releases) if releases else None


def entry_floor(code: NvCode, runtime: Floor | None, os_name: str, built: CC | None = None) -> Floor:
    """The driver floor of one entry: PTX by its ISA; a cubin by the CUDA major that built it
    (its toolkit note, else its container's PTX, else the CUDA libraries linked)."""
    e = code.entry
    return _floor(e.kind, e.code_version, e.toolkit, code.label, runtime, os_name, built)


@lru_cache(maxsize=4096)
def _floor(
    kind: str, isa: CC, toolkit: CC | None, name: str, runtime: Floor | None, os_name: str, built: CC | None
) -> Floor:
    """entry_floor on an entry's versions alone (cached: a library repeats a few thousand times)."""
    try:
        if kind == PTX:
            if isa == (0, 0):
                return Floor(None, None, f"{name}: PTX ISA version not read")
            release = arch.cuda_release_for_ptx_isa(isa)
            return Floor(release, arch.min_driver(release, os_name), f"{name} (PTX ISA {isa[0]}.{isa[1]})")
        if toolkit:
            return Floor(
                toolkit,
                arch.min_driver(toolkit, os_name, kind="minor"),
                f"{name} (built by CUDA {toolkit[0]}.{toolkit[1]})",
            )
        if built is not None:
            return Floor(
                built,
                arch.min_driver(built, os_name, kind="minor"),
                f"{name} (built beside PTX of CUDA {built[0]}.{built[1]})",
            )
    except LookupError as err:
        return Floor(None, None, f"{name}: {err}")
    if runtime is not None:
        return runtime
    return Floor(
        None,
        None,
        f"{name}: its cubin records no toolkit, and neither the library (its CUDA "
        f"runtime, its other cubins) nor its package names the CUDA release that built it",
    )


def runtime_floor(lib: Library, os_name: str) -> Floor | None:
    """The floor a linked CUDA library proves (libcudart.so.12: CUDA 12.x, minor version
    compatibility), the highest over every NEEDED name that says one and every CUDA runtime the
    library carries linked in statically (its own version record: a CUDA 13.0 runtime refuses
    a 550 driver with 35, cudaErrorInsufficientDriver, whatever its kernels need)."""
    floors = []
    for soname in lib.needed:
        major = arch.runtime_major(soname)
        if major is None:
            continue
        try:
            floors.append(
                Floor(
                    (major, 0),
                    arch.min_driver((major, 0), os_name, kind="minor"),
                    f"links {soname} (CUDA {major}.x)",
                    "runtime",
                )
            )
        except LookupError:
            floors.append(
                Floor((major, 0), None, f"links {soname}: no driver floor is known for CUDA {major}", "runtime")
            )
    for text in lib.runtimes:
        major, minor = (int(p) for p in text.split("."))
        floors.append(
            _family_floor((major, minor), f"the CUDA {text} runtime it links in statically", os_name, "runtime")
        )
    return highest(floors)


def _family_floor(release: CC, evidence: str, os_name: str, kind: Literal["code", "runtime"] = "code") -> Floor:
    """The floor of code or a runtime of CUDA ``release``'s major family (minor version
    compatibility); unknown where the tables name none (fail closed)."""
    try:
        return Floor(release, arch.min_driver(release, os_name, kind="minor"), evidence, kind)
    except LookupError:
        return Floor(release, None, f"{evidence}: no driver floor is known for CUDA {release[0]}", kind)


def undated_floor(lib: Library, runtime: Floor | None, package: int | None, os_name: str) -> Floor | None:
    """The floor of a cubin that records no toolkit and has no PTX beside it: what the library
    says of the CUDA release that built it. The CUDA runtime it links or carries; else the
    newest toolkit another of its cubins records (CUPTI's tool cubins: the sm_100 ones record
    12.9, the sm_90 ones nothing); else the CUDA major its package is named for (-cu12).
    None where nothing says (its floor stays unknown: fail closed)."""
    if runtime is not None:
        return runtime
    recorded = max((e.toolkit for e in lib.entries if e.vendor == "nvidia" and e.toolkit), default=None)
    if recorded is not None:
        return _family_floor(
            recorded,
            f"cubins that record no toolkit, dated by another cubin of the library (CUDA {recorded[0]}.{recorded[1]})",
            os_name,
        )
    if package is not None:
        return _family_floor(
            (package, 0), f"cubins that record no toolkit, dated by the package's name (CUDA {package}.x)", os_name
        )
    return None


@lru_cache(maxsize=256)
def gpu_floor(gpu: CC, os_name: str) -> Floor | None:
    """The GPU's own floor: the driver of the CUDA release that first supports its generation
    (data/cuda.json first_driver); None where no row says (Tegra, older generations)."""
    row = arch.first_driver(gpu)
    if row is None:
        return None
    try:
        driver = row.driver(os_name)
    except LookupError:
        return Floor(
            row.cuda,
            None,
            f"{row.generation} ({label(gpu)}): no {os_name} driver is known for "
            f"CUDA {row.cuda[0]}.{row.cuda[1]}, its first release",
            "gpu",
        )
    return Floor(
        row.cuda,
        driver,
        f"the GPU itself: {row.generation} ({gpu[0]}.{gpu[1]}) is first supported by "
        f"CUDA {row.cuda[0]}.{row.cuda[1]}, no older driver drives it",
        "gpu",
    )


def is_dead(code: NvCode, runtime: Floor | None, last: CC) -> bool:
    """Whether no driver that still runs a GPU whose support ended with CUDA ``last`` can run it."""
    e = code.entry
    if runtime is not None and runtime.cuda is not None and runtime.cuda[0] > last[0]:
        return True
    if e.kind == PTX:
        if e.code_version == (0, 0):
            return False
        try:
            return arch.cuda_release_for_ptx_isa(e.code_version) > last
        except LookupError:
            return True  # newer than every release the table knows
    if e.toolkit:
        return e.toolkit[0] > last[0]
    return False


def own_floor(gpu: CC, os_name: str) -> list[Floor]:
    own = gpu_floor(gpu, os_name)
    return [own] if own is not None else []


def noted_release(codes: tuple[NvCode, ...]) -> CC | None:
    """The newest toolkit release a library's cubins record (their notes), or None: the one
    answer about what built it that is read, not inferred."""
    return max((c.entry.toolkit for c in codes if c.entry.toolkit), default=None)


def built_by(codes: tuple[NvCode, ...], runtime: Floor | None, package: int | None = None) -> CC | None:
    """The CUDA release that built a library's code: the newest toolkit its cubins record,
    else the release its PTX shows, else the CUDA major of the runtime it links, else the CUDA
    major its package is named for (CUPTI's and Compute Sanitizer's tool cubins record no
    toolkit, and they link no runtime)."""
    found = noted_release(codes) or unit_release(codes) or (runtime.cuda if runtime is not None else None)
    return found or ((package, 0) if package is not None else None)


def vendor_floor(identified: vendors.Identified, os_name: str) -> Floor | None:
    """A vendor library's driver floor: the minimum driver its vendor documents for its release
    on ``os_name`` (None where the row names none for that OS)."""
    driver = identified.row.driver(os_name)
    if driver is None:
        return None
    cuda = (identified.row.cuda, 0) if identified.row.cuda is not None else identified.built
    return Floor(cuda, driver, f"{identified.library}: its vendor's documented minimum driver ({identified.source})")


__all__ = [
    "UNKNOWN_KEY",
    "Floor",
    "built_by",
    "entry_floor",
    "gpu_floor",
    "highest",
    "noted_release",
    "is_dead",
    "own_floor",
    "runtime_floor",
    "undated_floor",
    "unit_release",
    "vendor_floor",
]
