"""The inventory of device code: what a library carries, as plain frozen data.

Readers (ELF, fatbin, cubin, PTX, HIP bundles) produce these; the audit rule and the
renderers only consume them. Nothing here reads files or knows a claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, Literal, get_args

from .findings import Code

# The vocabularies are Literal types: the values are the strings JSON has always carried, and
# mypy rejects a misspelt one (`kind == "ltoo"`) wherever it is written.

Vendor = Literal["nvidia", "amd"]
NVIDIA: Final = "nvidia"
AMD: Final = "amd"

# Entry kinds.
Kind = Literal["sass", "ptx", "lto", "code-object"]
SASS: Final = "sass"  # NVIDIA machine code (an ELF cubin), runs natively
PTX: Final = "ptx"  # NVIDIA virtual ISA text, JIT-compiled by the driver
LTO: Final = "lto"  # NVVM IR for link-time optimisation; never loadable on its own
CODE_OBJECT: Final = "code-object"  # AMD HSA code object (an amdgcn ELF)

# Container roles: how the runtime treats the container.
Role = Literal["executable", "device-link", "relocatable", "embedded", "standalone", "hip", "cubin"]
EXECUTABLE: Final = "executable"  # registered and loaded by the runtime (.nv_fatbin)
DEVICE_LINK: Final = "device-link"  # the nvlink container every nvcc link adds (wrapper version 2)
RELOCATABLE: Final = "relocatable"  # -rdc objects in __nv_relfatbin: listed, never loadable coverage
EMBEDDED: Final = "embedded"  # found in another section; the library loads it itself
STANDALONE: Final = "standalone"  # a bare .fatbin/.cubin/.ptx/.hsaco file
HIP: Final = "hip"  # an AMD clang offload bundle
CUBIN: Final = "cubin"  # a whole cubin outside any container: the library loads it itself (cuModuleLoadData)
LOADABLE_ROLES: Final = tuple(r for r in get_args(Role) if r != RELOCATABLE)  # what the runtime loads

# How code runs on a GPU, and a library's verdict.
Coverage = Literal["native", "jit", "none"]
Status = Literal["pass", "fail", "specialised", "host", "unverified"]


@dataclass(frozen=True, slots=True)
class Problem:
    """Something a reader could not verify. Every problem fails the audit closed."""

    code: Code  # a finding code
    message: str
    offset: int | None = None
    # Folded (findings.Fold): it stands for `count` problems of its code, the first
    # FOLD_EXAMPLES messages in `examples` (empty when it stands for itself alone).
    count: int = 1
    examples: tuple[str, ...] = ()

    def folded(self, count: int, examples: tuple[str, ...]) -> Problem:
        return replace(self, count=count, examples=examples)


@dataclass(frozen=True, slots=True)
class Entry:
    """One piece of device code inside a container."""

    vendor: Vendor
    kind: Kind
    target: str  # "sm_90a", "sm_100f", "gfx90a:xnack-"
    code_version: tuple[int, int] = (0, 0)  # cubin ELF ABI, PTX ISA version, ...
    compression: str = "none"  # "none" | "zstd" | "lz4" | "zlib" | "opaque"
    stored_size: int = 0  # bytes as stored (compressed size when compressed)
    size: int = 0  # bytes once decoded
    offset: int = 0  # entry offset in the library file
    identifier: str = ""
    debug: bool = False
    kernels: tuple[str, ...] | None = None  # mangled names; None = not read
    toolkit: tuple[int, int] | None = None  # CUDA toolkit that built a cubin, if recorded
    decoded: bool = False  # payload decoded to its declared size and parsed
    # A decoded PTX entry's first `.target` name as written ("sm_90a"), which the driver's JIT
    # obeys whatever the entry header says; None when not PTX or not decoded.
    ptx_target: str | None = None
    # A relocatable cubin's (-rdc) undefined symbols beyond the linker's own tables: code it
    # calls but does not carry, so the driver loads it only once linked with that code.
    unresolved: tuple[str, ...] = ()
    # An AMD code object's own target ID, from its ELF e_flags (xnack/sramecc settings included),
    # which the loader checks against the GPU; it may be more specific than the bundle id
    # (`target`), which is what a bundle entry is selected by. None when not AMD.
    own_target: str | None = None
    # A decoded cubin with no .text section and no symbol but section symbols: it defines nothing.
    defines_nothing: bool = False
    # An AMD code object with no PT_LOAD segment (a relocatable object never linked, a bare ELF
    # header): ROCr's loader refuses it whatever the GPU (HSA_STATUS_ERROR_INVALID_CODE_OBJECT).
    unloadable: bool = False


@dataclass(frozen=True, slots=True)
class Container:
    """One unit the runtime registers (or the library loads) on its own: a fatbin container, a
    HIP bundle, or a whole cubin outside any container (role ``cubin``, its one entry)."""

    vendor: Vendor
    role: Role
    section: str  # ELF section holding it ("" for standalone files)
    offset: int  # byte offset of the container in the library file
    size: int  # bytes of the container, header included
    entries: tuple[Entry, ...] = ()

    @property
    def loadable(self) -> bool:
        return self.role in LOADABLE_ROLES


@dataclass(frozen=True, slots=True)
class Library:
    """One file that may carry device code: a shared library, or a bare device-code file."""

    path: str  # display path: the wheel member, or the file relative to its target
    size: int
    format: str  # "elf" | "pe" | "macho" | "cubin" | "ptx" | "fatbin" | "hsaco" | "other"
    containers: tuple[Container, ...] = ()
    needed: tuple[str, ...] = ()  # DT_NEEDED; for a PE image its imported and delay-loaded DLLs
    runpath: tuple[str, ...] = ()  # DT_RUNPATH or DT_RPATH entries
    embedded_claims: tuple[str, ...] = ()  # arch lists the binary carries about itself
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = field(default=())  # verbose-only remarks (e.g. a second pass)
    # Names holding nvJitLinkCreate in its strings (looked up by name in a libnvJitLink it dlopens,
    # or imported): the library links device code at run time before loading it.
    linkers: tuple[str, ...] = ()
    # Sourced strings (data/vendor.json) its own bytes hold: statements and vendor identity
    # strings exactly as written there (NCCL's "FP8 reduction support begins with sm90 capable
    # devices.", cuBLAS's "cublasGetCudartVersion"), and vendor version strings as read after
    # their marker ("NCCL version 2.21.5+cuda11.0").
    statements: tuple[str, ...] = ()
    # CUDA runtime versions linked in statically ("13.0"), as the runtime's cudaRuntimeGetVersion
    # returns them in the library's own machine code (x86-64 and aarch64 ELF, x86-64 PE;
    # read/records.py RUNTIME_BY_MACHINE)
    runtimes: tuple[str, ...] = ()

    @property
    def entries(self) -> tuple[Entry, ...]:
        return tuple(e for c in self.containers for e in c.entries)

    @property
    def reachable(self) -> tuple[Container, ...]:
        """The containers a loader reads: every one of a library (each is registered, or loaded
        by the library itself); of a bare container file (.fatbin, an offload-bundle file) the
        first only, for cuModuleLoad and hipModuleLoad read no further (a kernel only in a later
        container: cuModuleGetFunction fails with 500 on an H100)."""
        if self.format != "fatbin" or len(self.containers) < 2:
            return self.containers
        return (min(self.containers, key=lambda c: c.offset),)

    @property
    def unreachable(self) -> tuple[Container, ...]:
        """The containers of a bare container file that its loader never reads (``reachable``)."""
        reached = self.reachable
        return tuple(c for c in self.containers if c not in reached) if reached != self.containers else ()

    @property
    def has_device_code(self) -> bool:
        return any(c.entries for c in self.containers)

    @property
    def links_gpu_runtime(self) -> bool:
        gpu = (
            "libcudart",
            "libcuda.",
            "libamdhip64",
            "libhiprtc",
            "libnvrtc",
            "cudart64_",
            "nvcuda.dll",
            "amdhip64",
            "hiprtc",
            "nvrtc64_",
        )  # Windows DLL names
        return any(n.lower().startswith(gpu) for n in self.needed)

    @property
    def device_linker(self) -> str | None:
        """What shows the library links device code at run time (nvJitLink linked, dlopened or
        looked up by name), or None: code the driver cannot load alone needs that linker."""
        linked = next((n for n in self.needed if n.lower().startswith(("libnvjitlink", "nvjitlink"))), None)
        if linked is not None:
            return f"links {linked}"
        return f"names {self.linkers[0]}" if self.linkers else None


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a remote target's wheel came from: the file judged, its URL, the sha256 its index
    lists ("" when none does), its size, the bytes fetched by range requests, and the
    requirement and platform it was resolved for ("" for a URL given as it is)."""

    file: str
    url: str
    sha256: str
    size: int
    fetched: int
    requirement: str = ""
    platform: str = ""  # "" : this machine's


@dataclass(frozen=True, slots=True)
class TargetInventory:
    """What one target carries: its libraries and the problems of the target as a whole."""

    target: str
    kind: str  # "wheel" | "directory" | "file" | "distribution"
    libraries: tuple[Library, ...]
    problems: tuple[Problem, ...] = ()
    unusable: bool = False  # the target itself could not be read (exit 2)
    bytes_read: int = 0
    seconds: float = 0.0
    distribution: str = ""  # name-version, when known
    origin: Origin | None = None  # a wheel read over HTTP: which file, from where


__all__ = [
    "AMD",
    "CODE_OBJECT",
    "Container",
    "Coverage",
    "CUBIN",
    "DEVICE_LINK",
    "EMBEDDED",
    "Entry",
    "EXECUTABLE",
    "HIP",
    "Kind",
    "Library",
    "LTO",
    "NVIDIA",
    "Origin",
    "Problem",
    "PTX",
    "RELOCATABLE",
    "Role",
    "SASS",
    "STANDALONE",
    "Status",
    "TargetInventory",
    "Vendor",
]
