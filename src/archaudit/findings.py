"""Finding codes: one stable code per cause, each with a documented cause and fix.

Codes never change meaning. E = could not verify (always fails closed), C = claims,
G = coverage per library, K = coverage per container and kernel, D = driver, X = config.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Final, Generic, Literal, Protocol, TypeVar

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, Enum):
        """enum.StrEnum before 3.11: the member is its value, in str() and in f-strings."""

        __str__ = str.__str__
        __format__ = str.__format__  # type: ignore[assignment]


Severity = Literal["error", "warning", "info"]
ERROR: Final = "error"  # fails the check
WARNING: Final = "warning"  # reported; fails only under the switch that asks for it
INFO: Final = "info"  # reported, never fails


class Code(StrEnum):
    """Every finding code, one member each: `Code.G001` is the string "G001" (JSON, text, CLI
    arguments), and a misspelt code is a type error. Its cause and fix are in CODES."""

    E001 = "E001"
    E002 = "E002"
    E003 = "E003"
    E004 = "E004"
    E010 = "E010"
    E011 = "E011"
    E012 = "E012"
    E013 = "E013"
    E014 = "E014"
    E015 = "E015"
    E020 = "E020"
    E021 = "E021"
    E030 = "E030"
    E031 = "E031"
    E032 = "E032"
    E033 = "E033"
    E099 = "E099"
    C001 = "C001"
    C002 = "C002"
    C003 = "C003"
    G001 = "G001"
    G002 = "G002"
    G003 = "G003"
    G004 = "G004"
    G005 = "G005"
    G006 = "G006"
    G007 = "G007"
    G008 = "G008"
    G009 = "G009"
    G010 = "G010"
    G011 = "G011"
    G012 = "G012"
    G013 = "G013"
    G014 = "G014"
    G015 = "G015"
    G016 = "G016"
    G017 = "G017"
    G018 = "G018"
    G019 = "G019"
    G020 = "G020"
    K001 = "K001"
    K002 = "K002"
    K003 = "K003"
    K004 = "K004"
    K005 = "K005"
    D001 = "D001"
    D002 = "D002"
    X001 = "X001"
    X002 = "X002"


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """What a code means: its severity, title, cause and fix (README "Finding codes", `explain`)."""

    code: Code
    severity: Severity
    title: str
    cause: str
    fix: str
    example: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    """One verdict about one subject (a target, a library, a container)."""

    code: Code
    severity: Severity
    subject: str  # the library path, or the target for wheel-wide findings
    message: str
    data: tuple[tuple[str, object], ...] = ()  # machine-readable details for JSON
    # A folded finding (Fold) stands for `count` findings of its code on its subject; `examples`
    # are the first FOLD_EXAMPLES of their messages (empty when it stands for itself alone).
    count: int = 1
    examples: tuple[str, ...] = ()

    def get(self, key: str, default: object = None) -> object:
        return dict(self.data).get(key, default)

    def folded(self, count: int, examples: tuple[str, ...]) -> Finding:
        return replace(self, count=count, examples=examples)


# ---- folding: findings of one code on one subject, reported once ----

FOLD_EXAMPLES: Final = 5  # a sixth finding of one code on one subject folds them all into one


class Foldable(Protocol):
    """What a Fold folds: a Finding, or a reader's Problem (model.Problem)."""

    @property
    def message(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def examples(self) -> tuple[str, ...]: ...
    def folded(self: _F, count: int, examples: tuple[str, ...]) -> _F: ...


_F = TypeVar("_F", bound=Foldable)


@dataclass(slots=True)
class _Group(Generic[_F]):
    seq: int  # where its first item came
    kept: list[tuple[int, _F]]  # the first FOLD_EXAMPLES items, with where each came
    count: int = 0


class Fold(Generic[_F]):
    """Problems or findings folded as they are collected, so what is kept does not grow with the
    number of repeats (a hostile member makes one problem per 32 bytes, docs/threat-model.md):
    up to FOLD_EXAMPLES of one key are kept as they are, in the order they came; more become one,
    the first, with the group's count and its first FOLD_EXAMPLES messages, where the first came.
    Items already folded count as many as they stand for."""

    def __init__(self, key: Callable[[_F], Hashable]):
        self._key = key
        self._groups: dict[Hashable, _Group[_F]] = {}
        self._seq = 0

    def add(self, item: _F) -> None:
        self.note(self._key(item), lambda: item, item.count)

    def note(self, key: Hashable, make: Callable[[], _F], count: int = 1) -> None:
        """One more item of `key`, made only while its group keeps items whole."""
        self._seq += 1
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = _Group(self._seq, [])
        g.count += count
        if len(g.kept) < FOLD_EXAMPLES:
            g.kept.append((self._seq, make()))

    def extend(self, items: Iterable[_F]) -> Fold[_F]:
        for item in items:
            self.add(item)
        return self

    def result(self) -> list[_F]:
        out: list[tuple[int, _F]] = []
        for g in self._groups.values():
            if g.count <= FOLD_EXAMPLES:
                out += g.kept
                continue
            examples = tuple(m for _, x in g.kept for m in (x.examples or (x.message,)))[:FOLD_EXAMPLES]
            out.append((g.seq, g.kept[0][1].folded(g.count, examples)))
        return [item for _, item in sorted(out, key=lambda pair: pair[0])]


def finding_key(f: Finding) -> Hashable:
    """Findings fold by code and subject; the answers about different GPUs (G008, G009, G012,
    one per --gpu or claimed GPU) are different findings."""
    return f.code, f.subject, str(f.get("gpu", ""))


def fold_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings with every run of more than FOLD_EXAMPLES of one code on one subject folded."""
    return Fold(finding_key).extend(findings).result()


_CODES = [
    CodeInfo(
        Code.E001,
        ERROR,
        "target unreadable",
        "The file, directory or distribution could not be opened or read.",
        "Check the path and permissions; for a distribution name, that it is installed.",
        "dist/x.whl: cannot read: [Errno 2] No such file or directory",
    ),
    CodeInfo(
        Code.E002,
        ERROR,
        "malformed archive",
        "The wheel is not a valid zip archive: truncated, bad central directory, a member "
        "whose data does not match its header or CRC; or the places a zip records its members "
        "(end record, zip64 records, central directory, local headers) disagree, so the members "
        "read might not be the ones pip installs.",
        "Rebuild or re-download the wheel; a truncated upload is the usual cause.",
        "x.whl: malformed archive: central directory not found (truncated?)",
    ),
    CodeInfo(
        Code.E003,
        ERROR,
        "archive hazard",
        "A member is a zip bomb (absurd declared or actual size or ratio, data shared with another "
        "member, more inflated bytes than the wheel's size can justify, more libraries than any real "
        "wheel), is listed twice, has an absolute or '..' path, or is a symlink/special file where a "
        "library was expected.",
        "Rebuild the wheel with a standard tool (pip wheel, build); never ship such members.",
        "x.whl: torch/lib/libx.so: member listed twice",
    ),
    CodeInfo(
        Code.E004,
        ERROR,
        "not a wheel",
        "The target is not what its name or its place says: a .whl zip with no (or more than one) "
        "top-level .dist-info directory, which pip refuses to install; or a file given by name that "
        "is neither a wheel nor a library nor device code (a plain zip, an sdist .tar.gz, text).",
        "Audit the built wheel (python -m build --wheel, pip wheel) or the library itself.",
        "x-1.0-py3-none-any.whl: not a wheel: .dist-info directory not found (pip refuses it)",
    ),
    CodeInfo(
        Code.E010,
        ERROR,
        "malformed ELF",
        "A library is not a well-formed ELF file (bad header, section table outside the file, non-ELF file named .so).",
        "The project's own library: check the build; a text or linker-script file named .so is not loadable. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a release that reads.",
        "lib/libfoo.so: malformed ELF: not an ELF file",
    ),
    CodeInfo(
        Code.E011,
        ERROR,
        "malformed fatbin",
        "A CUDA fatbin container or entry is inconsistent: sizes overrun the container or file, "
        "a bad header, an entry chain that does not end where the container does.",
        "The project's own library: rebuild it. A vendor library: nothing to rebuild; report it to its vendor "
        "with the file and the container named.",
        "libfoo.so: fatbin container at 0x4a0: entry overruns its container (.nv_fatbin[1]). Fix: rebuild "
        "it if it is the project's own, else report it to its vendor",
    ),
    CodeInfo(
        Code.E012,
        ERROR,
        "undecodable payload",
        "A compressed device-code payload does not decode to its declared size, or is too large "
        "to verify within archaudit's memory bound.",
        "The project's own library: rebuild it; a payload that does not decode will not load on the GPU either. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a release that reads.",
        "libfoo.so: sm_90 entry at 0x1c40: zstd payload decodes to 812 bytes, header says 1024",
    ),
    CodeInfo(
        Code.E013,
        ERROR,
        "unknown entry kind",
        "A fatbin entry has a kind archaudit does not know, so its target cannot be verified.",
        "Report it to archaudit with the library; until then it cannot be verified. The project's own library: "
        "rebuild it with a released toolkit. A vendor library: nothing to rebuild; report it to archaudit.",
        "libfoo.so: entry kind 16 at 0x2000 is unknown",
    ),
    CodeInfo(
        Code.E014,
        ERROR,
        "malformed device code",
        "A cubin, PTX or code object inside a container (or as a file) is not what its header "
        "says: not an ELF for the GPU, architecture disagreeing with the header, no .target.",
        "The project's own library or file: rebuild it. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "kern.cubin: not a CUDA ELF (e_machine 62)",
    ),
    CodeInfo(
        Code.E015,
        ERROR,
        "payloads not verified (--fast)",
        "--fast read entry headers only: the library's compressed payloads were not decoded, so "
        "its kernel names, the cubins' own target flags, each PTX text's .target and the "
        "payloads' integrity are unchecked. A verdict that rests on them cannot pass.",
        "Run without --fast: every payload is decoded in the same single pass.",
        "lib/libk.so: 12 of 14 device-code entries not decoded (--fast): kernels, cubin flags and "
        "PTX .target unverified",
    ),
    CodeInfo(
        Code.E020,
        ERROR,
        "unsupported library format",
        "The library is a format archaudit does not read: a big-endian ELF, or a 32-bit ELF that carries "
        "device code (its headers are not read, so what it loads cannot be placed). Its device code cannot "
        "be verified.",
        "Only 64-bit little-endian ELF, PE32 and PE32+ (Windows) and Mach-O (macOS) libraries are audited.",
        "lib32/libfoo.so: unsupported library format: a 32-bit ELF carrying device code (1 container(s))",
    ),
    CodeInfo(
        Code.E021,
        ERROR,
        "malformed PE",
        "A Windows library (.dll/.pyd) is not a well-formed PE image: no PE signature (an MS-DOS "
        "program), headers or section table outside the file, a section's data past the end, an "
        "import directory or long section name that points nowhere. Its device code cannot be "
        "located, so it is unverified.",
        "The project's own library: rebuild it; a truncated download or a file that is not a DLL renamed .pyd "
        "is the usual cause. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "pkg/_ext.pyd: malformed PE: section 3 (.nv_fatb) lies outside the file",
    ),
    CodeInfo(
        Code.E030,
        ERROR,
        "malformed HIP bundle",
        "A clang offload bundle (HIP device code) has an impossible header or entry table.",
        "The project's own library: rebuild it with a supported ROCm toolchain. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "libhip.so: malformed HIP bundle at 0x1000: entry overruns the bundle",
    ),
    CodeInfo(
        Code.E031,
        ERROR,
        "undecodable HIP payload",
        "A compressed offload bundle (CCOB) does not decode to its declared size.",
        "The project's own library: rebuild it; the HIP runtime will not load it either. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "libhip.so: CCOB at 0x1000 decodes to 10 bytes, header says 400",
    ),
    CodeInfo(
        Code.E032,
        ERROR,
        "HIP payload too large to verify",
        "A compressed offload bundle declares more bytes than archaudit verifies in memory.",
        "Raise --max-payload if the size is genuine.",
        "libhip.so: CCOB at 0x1000 declares 4 GiB",
    ),
    CodeInfo(
        Code.E033,
        ERROR,
        "HIP bundle outside its section",
        "A valid clang offload bundle (HIP device code, plain or compressed) lies in none of the "
        "sections of a library that has a section table, or runs past the end of the section it "
        "starts in. Every byte a linker places is in a section, so the bundle was written there after "
        "the link (appended, in header slack or padding), where the HIP runtime's registration and "
        "every tool that reads sections miss it.",
        "The project's own library: rebuild it so its device code is linked in (.hip_fatbin); do not append "
        "device code to a built library. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "libhip.so: HIP bundle at 0x9000 lies in no section",
    ),
    CodeInfo(
        Code.E099,
        ERROR,
        "internal error",
        "archaudit met input it did not expect and could not verify the library. The check "
        "fails closed rather than passing it.",
        "Report it to archaudit with the file; the library stays unverified until then.",
        "libfoo.so: could not be verified: internal error ValueError: ...",
    ),
    CodeInfo(
        Code.C001,
        ERROR,
        "no claim",
        "The wheel carries GPU device code (or links a GPU runtime) but no claimed architecture "
        "list reached the check, so coverage cannot be verified.",
        "Give the architectures it was built for (--arch '80;90', or cuda-archs in [tool.archaudit]); "
        "auditing someone else's wheel, ask about your GPUs instead (--gpu T4 --gpu H100).",
        "x.whl: GPU wheel, no claimed architectures. Fix: give them (--arch '80;90', cuda-archs in "
        "[tool.archaudit]) or ask about GPUs (--gpu T4 --gpu H100)",
    ),
    CodeInfo(
        Code.C002,
        ERROR,
        "unparseable claim",
        "A claimed architecture list could not be parsed.",
        "Use one of the spellings in the README (CMake, TORCH_CUDA_ARCH_LIST, -gencode, plain).",
        "--arch: 'sm_8x' is not a CUDA architecture",
    ),
    CodeInfo(
        Code.C003,
        WARNING,
        "embedded claim disagrees",
        "A binary embeds an architecture list different from the claim the check was given.",
        "Make the build's arch list and the release's claim the same list.",
        "libtorch_cuda.so embeds 8.0, 9.0 but --arch says 8.0, 9.0, 10.0. Fix: make the build's arch list and "
        "the release's claim the same list",
    ),
    CodeInfo(
        Code.G001,
        ERROR,
        "claimed architecture not covered",
        "A library carries device code, but none of it runs on a claimed GPU architecture: a "
        "model using it fails there with 'no kernel image is available for execution'.",
        "The project's own library: build it for the architecture (-gencode / CMAKE_CUDA_ARCHITECTURES "
        "/ TORCH_CUDA_ARCH_LIST), or, where the project's host code never loads it there, record that "
        "gate with the entry the message ends with ([[tool.archaudit.library]] path, arch, reason = the "
        "source line). A vendor library (cuBLAS, cuDNN): nothing to rebuild; it is judged by its "
        "vendor's documented range.",
        "libshim.so has no code for 9.0 (claimed). Fix: build for sm_90, or record its gate: "
        '[[tool.archaudit.library]] path = "libshim.so" arch = "80" reason = "<file:line>". It carries '
        "code only for sm_80 (claimed: 80, 90, from --arch); 1 kernel (mul) would fail there",
    ),
    CodeInfo(
        Code.G002,
        INFO,
        "covered only through PTX JIT",
        "A claimed architecture has no native code (SASS) in the library; the driver JIT-compiles "
        "PTX on first use, which costs seconds to minutes at start-up.",
        "The project's own library: add real (SASS) code for the architecture, e.g. '90-real' or code=sm_90. "
        "A vendor library: nothing to rebuild; the JIT cost is its vendor's choice.",
        "libfoo.so runs on 120 only through PTX JIT (compute_90)",
    ),
    CodeInfo(
        Code.G003,
        ERROR,
        "architecture carried but not claimed (--exact)",
        "With --exact, a library carrying code for an unclaimed architecture means the release's "
        "list never reached the build.",
        "Make the build use the release's list, or claim the architecture.",
        "libfoo.so carries 7.5, which the claim does not list (--exact). Fix: build with the release's list, "
        "or claim it",
    ),
    CodeInfo(
        Code.G004,
        ERROR,
        "no PTX for the newest architecture (--require-ptx newest)",
        "No PTX for the newest claimed architecture, so future GPUs cannot JIT this library.",
        "Add PTX for it (e.g. '120' or '120-virtual', or '12.0+PTX').",
        "libfoo.so carries no PTX for compute_120, the newest claimed (--require-ptx newest). Fix: add it "
        "('120' or '12.0+PTX')",
    ),
    CodeInfo(
        Code.G005,
        INFO,
        "specialised library",
        "All of the library's device code is arch-specific ('a') or family ('f') code: it serves "
        "only those GPUs. This is said, not excused: a claimed GPU it does not serve is G001 like "
        "any other (a library built only for sm_100f fails a claim of 80;90;100).",
        "Nothing, if the claim names only the GPUs it serves. Otherwise, the project's own library: build the "
        "claim's plain architectures too, or record a deliberate gap with ignore-library and its reason; a "
        "vendor library: nothing to rebuild, it is judged by its vendor's documented range.",
        "libhopper.so is specialised: serves only 9.0 (sm_90a)",
    ),
    CodeInfo(
        Code.G006,
        ERROR,
        "GPU wheel without device code",
        "The wheel links a GPU runtime or was given a claim, yet no library carries device code.",
        "Check the build actually compiled device code (a CUDA language not enabled, a wrong "
        "option) or that the expected library is shipped.",
        "x.whl: GPU wheel but no library carries device code",
    ),
    CodeInfo(
        Code.G007,
        INFO,
        "relocatable device code only",
        "Device code found only in __nv_relfatbin (from -rdc objects); it is not loaded on its "
        "own and does not count as coverage.",
        "Nothing, if the executable fatbin covers the claim.",
        "libfoo.so: 2 relocatable entries are not loadable coverage",
    ),
    CodeInfo(
        Code.G008,
        INFO,
        "GPU coverage for a GPU",
        "The answer to --gpu: how the library runs on the named GPU.",
        "Nothing: it is the answer. A 'not at all' is G009 (the project's own library: build for the GPU's "
        "architecture; a vendor library: nothing to rebuild).",
        "libfoo.so on H100 (9.0): native",
    ),
    CodeInfo(
        Code.G009,
        ERROR,
        "does not run on the requested GPU",
        "With --gpu, a library carries device code but none runs on that GPU, some of its kernels "
        "cannot run there with nothing in the binary saying it is by design, or the wheel's platform "
        "cannot be installed there (a Jetson runs Linux on aarch64: an x86-64 or Windows wheel never "
        "reaches it).",
        "The project's own library: build for that GPU's architecture (or PTX of an older one), or "
        "record the host's gate with the [[tool.archaudit.library]] entry the message ends with. A "
        "vendor library: nothing to rebuild; a GPU outside its vendor's documented range is not "
        "supported.",
        "libfoo.so on H100 (9.0): 1 kernel cannot run there (native for the rest). Fix: build for "
        'sm_90, or record its gate: [[tool.archaudit.library]] path = "libfoo.so" arch = "100" '
        'reason = "<file:line>". They carry only sm_100: 1 kernel (zero_fill)',
    ),
    CodeInfo(
        Code.G010,
        INFO,
        "device code without kernels",
        "Every container of the library was read whole and defines no kernel: nvlink's kernel-less "
        "device-link stubs, or cubins with no kernel (NPP 13.2's libnppc.so.13 carries one sm_75 "
        "cubin with no .text and no symbols, in an ordinary .nv_fatbin). Nothing in it can be "
        "launched, so there is no coverage to judge; a kernel-less container beside others is not "
        "judged either. Any other container is judged by its targets, kernels identified or not.",
        "Nothing; the project's own build that needs no device code there can drop it (a vendor library: "
        "nothing to rebuild).",
        "libcufftw.so.12 carries device code without kernels (its containers define no kernel: sm_75)",
    ),
    CodeInfo(
        Code.G011,
        ERROR,
        "claimed vendor without device code",
        "Architectures were claimed for a GPU vendor (CUDA through --arch, AMD through --amd-arch), or "
        "--gpu asks about a GPU of that vendor, but no library of the target carries loadable device "
        "code of that vendor: nothing runs on the GPUs claimed or asked about (--gpu MI300X on a "
        "CUDA-only wheel is a no, never a pass).",
        "Ship the vendor's build, or stop claiming its architectures.",
        "x.whl: claims AMD targets gfx942 (--amd-arch) but no library carries AMD device code. Fix: ship the "
        "ROCm build, or stop claiming AMD targets",
    ),
    CodeInfo(
        Code.G012,
        ERROR,
        "code no driver can run on a claimed GPU",
        "A claimed GPU is covered only by code that needs a newer CUDA release than the last driver "
        "of the GPU's generation supports (Kepler's R470 stops at CUDA 11.4, PTX ISA 7.4; Maxwell to "
        "Volta end with R580, CUDA 13.0): no driver that still runs the GPU can run the code.",
        "The project's own library: build that GPU's code with a toolkit its last driver supports (or lower "
        "the PTX ISA), or stop claiming the GPU. A vendor library: nothing to rebuild; ship the vendor's "
        "release that supports the GPU, or stop claiming it.",
        "libcatboost.so on 3.5 (claimed) has only code no driver can run there: the last driver for 3.5 GPUs "
        "supports CUDA 11.4. Fix: build 3.5's code with CUDA 11.4 or older, or stop claiming it. It has only "
        "compute_35 (PTX ISA 7.8)",
    ),
    CodeInfo(
        Code.G013,
        ERROR,
        "code not loadable alone, and nothing links it",
        "On a claimed GPU the driver picks a relocatable cubin (-rdc) that calls device code it does "
        "not carry; cuModuleLoadData refuses it alone (CUDA_ERROR_NOT_FOUND), and nothing in the "
        "library shows it links device code at run time (nvJitLink linked, dlopened or looked up, as "
        "cuSPARSE does for user operators). A bare .fatbin or .cubin file has no linker at all.",
        "The project's own library: link the device code at build time (nvcc -dlink, or without -rdc), or "
        "link it at run time with nvJitLink before loading it. A vendor library: nothing to rebuild; report "
        "it to its vendor.",
        "rdc_ext.fatbin: on 9.0 (claimed) the driver picks, in 1 container, relocatable cubins (-rdc) "
        "that call _Z10rdc_helperf without carrying it, and nothing in the library links device code at "
        "run time (no nvJitLink): they do not load alone (CUDA_ERROR_NOT_FOUND)",
    ),
    CodeInfo(
        Code.G014,
        WARNING,
        "AMD code object more specific than its bundle id",
        "A code object's own xnack/sramecc setting (ELF e_flags) is one its bundle id leaves open. ROCm "
        "selects the entry by its id on either setting and its loader refuses the code object on the "
        "other, so archaudit judges the code object as built.",
        "The project's own library: bundle the code object under the id it was built for "
        "(--offload-arch=gfx90a:xnack+), or build it without the setting. A vendor library: nothing to "
        "rebuild; report it to its vendor.",
        "libfoo.so: 1 bundle entry says less than its code object, judged as built. Fix: bundle it under the "
        "id it was built for (--offload-arch=gfx90a:xnack+). Its id: hipv4-amdgcn-amd-amdhsa--gfx90a holds a "
        "code object built for gfx90a:xnack+",
    ),
    CodeInfo(
        Code.G015,
        WARNING,
        "AMD bundle entries HIP never selects",
        "A bundle entry whose offload kind is not hip, hipv4 or hcc (an OpenMP entry), or whose id is not "
        "spelt as comgr compares it (the triple amdgcn-amd-amdhsa-- in lower case: clang 11 and older "
        "wrote hip-amdgcn-amd-amdhsa-gfx906, which the HIP runtime of ROCm 3.5 to 5.4 selects and today's does "
        "not), is never selected by HIP's code object lookup; it counts for no GPU. A library that links the HIP "
        "of ROCm 3 or 4 (NEEDED libamdhip64.so.3, .so.4) is judged by that release's lookup instead.",
        "The project's own library: bundle HIP code as hipv4-amdgcn-amd-amdhsa--<target> (what clang's HIP "
        "driver writes; rebuild with a current clang). A vendor library: nothing to rebuild; use a release "
        "built by a current ROCm.",
        "libfoo.so: HIP never selects 1 bundle entry, which count for no GPU. Fix: bundle HIP code as "
        "hipv4-amdgcn-amd-amdhsa--<target> (a current clang). openmp-amdgcn-amd-amdhsa--gfx90a: ...",
    ),
    CodeInfo(
        Code.G016,
        INFO,
        "claimed GPUs outside the vendor's documented range",
        "The library is a vendor library (data/vendor.json: its file name and a string of its own bytes "
        "identify it; its release line is the CUDA major that built it and, where its bytes carry one, "
        "its vendor's version) and its vendor documents that release for a range of GPUs, each row with "
        "its source: cuBLAS for CUDA 13 from 7.5, cuSPARSELt from 8.0, cuDNN 9.17 for CUDA 12 from 7.5 to "
        "12.1. Claimed GPUs outside that range, and GPUs named with --gpu outside it, are not supported "
        "by it: it is not judged there, and its callers use it only inside it (torch calls cuSPARSELt "
        "only on 8.0+). Where no other library of the target runs on such a GPU, G019 fails it.",
        "Nothing, where another library serves those GPUs; otherwise stop claiming them.",
        "torch/lib/libcusparseLt-294d6944.so.0: the claimed 7.5 is not supported by its vendor, so not held "
        "against it: it is cuSPARSELt for CUDA 12, which its vendor documents for 8.0 to 12.1 (its bytes hold "
        '"cusparseLtGetVersion"; ...)',
    ),
    CodeInfo(
        Code.G017,
        ERROR,
        "kernels its loader never reaches",
        "A bare device-code file (.fatbin, an offload-bundle file) holds several containers, and "
        "kernels only the later ones define: cuModuleLoad and hipModuleLoad read the first container "
        "and no further, so those kernels are reachable from no module (cuModuleGetFunction fails "
        "with CUDA_ERROR_NOT_FOUND, 500, on an H100). The later containers count for no GPU.",
        "The project's own file: build one container per file (nvcc -fatbin of all the sources at once, or "
        "one file each), or link the objects before packing them. A vendor library: nothing to rebuild; "
        "report it to its vendor.",
        "kernels.fatbin: 1 kernel is defined only in 1 later container, which cuModuleLoad never reads: "
        "reachable from no module. Fix: write one container per file (nvcc -fatbin of all the sources at "
        "once). Unreached: 1 kernel (layernorm_kernel)",
    ),
    CodeInfo(
        Code.G018,
        WARNING,
        "AMD code objects the loader refuses",
        "An AMD code object without a PT_LOAD segment: a relocatable object (ET_REL) never linked, or "
        "a bare ELF header. ROCr loads code objects by their loadable segments and refuses one without "
        "any on every GPU (HSA_STATUS_ERROR_INVALID_CODE_OBJECT), so it counts for no GPU; where HIP "
        "selects it for a claimed GPU, that GPU runs nothing from its bundle (G001 says so).",
        "The project's own library: link the device code into a code object (clang's HIP driver does: "
        "lld -shared) before bundling it, then rebuild. A vendor library: nothing to rebuild; report it to "
        "its vendor.",
        "libfoo.so: 1 AMD code object without a loadable segment, which ROCr's loader refuses on every GPU: "
        "it counts for no GPU. Fix: link the device code (lld -shared, as clang's HIP driver does) before "
        "bundling. hipv4-amdgcn-amd-amdhsa--gfx90a, as a relocatable object never linked is",
    ),
    CodeInfo(
        Code.G019,
        ERROR,
        "GPU outside every vendor library's documented range",
        "Every library of the target that carries NVIDIA device code is a vendor library (data/vendor.json) "
        "whose vendor does not support the claimed or --gpu GPU for its release (G016): nothing of the "
        "target runs there (cuSPARSELt on a T4, a CUDA 13 cuBLAS on a V100).",
        "Ship the vendor's release that supports the GPU, or stop claiming it.",
        "nvidia_cusparselt_cu12-0.8.1 does not run on Tesla T4 (7.5), outside its vendor libraries' range. "
        "Fix: ship their release that supports it, or stop promising it. They are its only device code: "
        "cuSPARSELt for CUDA 12: 8.0 to 12.1",
    ),
    CodeInfo(
        Code.G020,
        WARNING,
        "vendor release newer than the vendor table",
        "A vendor library's own bytes say it is a release newer than data/vendor.json has rows for (a "
        "newer CUDA major, or a version past the table's known_through): it is judged by its line's "
        "newest row, which may not be its vendor's contract.",
        "Add the release's row to data/vendor.json from its vendor's documentation, with its source.",
        "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9 is cuDNN 9.28.0, newer than data/vendor.json "
        "knows. Fix: add its row to data/vendor.json from its vendor's documentation. It is judged by its "
        "line's newest row, cuDNN 9.17 for CUDA 12 (7.5 to 12.1)",
    ),
    CodeInfo(
        Code.K001,
        ERROR,
        "kernels miss a claimed architecture",
        "One container (one translation unit, which the runtime registers on its own) lacks code "
        "for a claimed architecture that the library as a whole has: its kernels fail there "
        "with 'no kernel image' (209). A library-wide union hides this.",
        "The project's own code: build every object of the library with the claim's architectures, or, "
        "where the host code never launches these kernels there, record that gate with the "
        "[[tool.archaudit.library]] entry the message ends with. A vendor library: nothing to rebuild.",
        "libfoo.so: 1 kernel fails on 9.0. Fix: build for sm_90 or record: [[tool.archaudit.library]] path = "
        '"libfoo.so" arch = "80" reason = "<file:line>". Its own container lacks the claimed 9.0, '
        "carrying only sm_80: 1 kernel (mul)",
    ),
    CodeInfo(
        Code.K002,
        INFO,
        "specialised kernels",
        "A kernel's code is all arch-specific ('a') or family ('f') code, and it cannot be meant for "
        "the GPU it misses: its name excludes that GPU (data/names.json), or no generic code of the "
        "library runs there. A generic kernel beside generic code that runs on the GPU is K001. Under "
        "--strict-kernels containers are judged whole.",
        "Nothing: the host must launch these kernels only on the GPUs their code serves.",
        "libfoo.so: 1 kernel not meant for 8.0 (claimed), as designed: all their code is arch-specific "
        "or family code (sm_90a), and their names say so or no generic code of the library runs there",
    ),
    CodeInfo(
        Code.K003,
        INFO,
        "kernels dispatched by architecture",
        "A claimed GPU cannot launch a kernel from its own container, and the binary shows the kernel "
        "is not meant for that GPU: a sourced string in the library's own bytes says its host code "
        "launches it only from a newer architecture (data/vendor.json statements); its name, read by "
        "its author's convention (data/names.json: CUTLASS ArchTags, SM80_* atoms, sm80_xmma_*, "
        "generation words all mean 'this or newer'), names only newer architectures than the GPU; or "
        "the code the GPU runs from that container was compiled for that GPU itself (or is newer than "
        "all code that carries the kernel) and the source left the kernel out (a __CUDA_ARCH__ "
        "guard). A name never excuses a GPU at or above what it names, and a kernel missing from PTX "
        "a newer GPU JIT-compiles is a gap there.",
        "Nothing: the host must not launch these kernels there; archaudit cannot see host code.",
        "libfoo.so: 1 kernel not meant for 7.5 (claimed), as designed: their names mean 8.0 or newer "
        "(CUTLASS ArchTag, data/names.json), and their code is for no older GPU (only sm_80)",
    ),
    CodeInfo(
        Code.K004,
        ERROR,
        "kernels carried for a GPU only by another container",
        "A container's kernels lack code for a claimed GPU, and only another container of the library "
        "carries kernels of the same names for it. The runtime launches each container's kernels from "
        "that container's own module, so launching these there fails ('no kernel image', error 209) "
        "unless the host picks the other container by architecture. The binary cannot say which: "
        "onnxruntime's 4-bit GEMM kernels in their own sm_80 translation unit, or curand's "
        "single-architecture containers, are dispatched; a template instantiated in two objects built "
        "for different lists is not.",
        "The project's own code: build every object with the claim's architectures, or, where the "
        "host picks the container by architecture, record that dispatch with the ignore-library entry "
        "the message ends with. A vendor library: nothing to rebuild.",
        "libx.so: 1 kernel fails on 9.0 unless the host picks another container there. Fix: build for "
        'sm_90 or record: [[tool.archaudit.ignore-library]] code = "K004" library = "libx.so" reason = '
        '"<file:line>". .nv_fatbin[1] (claimed 90) carries only sm_80; only .nv_fatbin[2] carries the '
        "same names",
    ),
    CodeInfo(
        Code.K005,
        INFO,
        "kernels dispatched by their vendor",
        "Kernels of a vendor library (data/vendor.json: its file name and a string of its own bytes "
        "identify it, the CUDA major that built it and its version choose the row) have no code for a "
        "claimed GPU in their own container, and the GPU is inside the range its vendor documents for "
        "that release. The vendor's host code picks a container per GPU (cuBLAS's and cuDNN's kernels "
        "named for one architecture, curand's single-architecture containers), and the vendor builds "
        "and tests the library for that range: a per-kernel gap there is its dispatch, not a crash. "
        "A GPU in the range for which the library carries no loadable code at all is still G001; a "
        "library its bytes do not identify is judged kernel by kernel (K001, K004). The same holds for "
        "a vendor's code linked statically into a project's library: a container every kernel of which "
        "the vendor's kernel-name convention names (data/vendor.json static_kernels), in a library whose "
        "bytes hold the vendor's string.",
        "Nothing; the row names the vendor's documentation.",
        "nvidia/cu13/lib/libcublasLt.so.13: 1380 kernels in 760 containers have no code for 7.5 (claimed) in "
        "their own container, as its vendor dispatches them: it is cuBLAS for CUDA 13, which its vendor "
        "documents for 7.5 and newer, and its host code picks the container for each GPU. 1380 kernels (...)",
    ),
    CodeInfo(
        Code.D001,
        ERROR,
        "needs a newer driver",
        "With --driver, some claimed (or --gpu) GPU would run PTX or cubins from a CUDA release "
        "whose minimum driver is newer than the one given ('the provided PTX was compiled with an "
        "unsupported toolchain'), than the CUDA runtime it links or carries linked in statically needs "
        "(35, cudaErrorInsufficientDriver), or than the first driver of the GPU's own generation (a B200 "
        "needs CUDA 12.8's, 570.26: an older driver does not drive it); or archaudit cannot name that "
        "floor (nothing in the library or its package names the CUDA release of its code, an ISA newer "
        "than its tables): fail closed. Where those GPUs run the rest of the "
        "library natively, the floor is that of the kernels they reach only through that PTX, with no "
        "native code there in any container and no evidence that they are not launched there (a kernel "
        "named for another architecture, or one a sourced statement speaks for, sets no floor): the "
        "finding names them and counts them per GPU.",
        "Require the driver named (publish it with the release). The project's own library can instead be "
        "built with an older toolkit (or a lower PTX ISA); a vendor library: nothing to rebuild, its release "
        "needs that driver.",
        "libfoo.so needs driver >= 580.65.06 (CUDA 13.0) on 9.0; 550.54 given. Fix: require driver >= "
        "580.65.06, or build with an older toolkit. 'the provided PTX was compiled with an unsupported "
        "toolchain' from compute_90 (PTX ISA 9.0)",
    ),
    CodeInfo(
        Code.D002,
        INFO,
        "driver floor",
        "The minimum NVIDIA driver for the code the claimed (or --gpu) GPUs would run: per GPU, the "
        "driver of the PTX ISA it JIT-compiles, or its cubin's CUDA major under minor version "
        "compatibility (from the cubin's toolkit note, else the CUDA runtime it links, such as "
        "libcudart.so.12, or carries linked in statically, else another cubin's toolkit note, else the "
        "CUDA major its package is named for, such as -cu12), with the runtime's own floor and the "
        "first driver of the GPU's generation. Without any of these the floor is unknown. With a claim "
        "it is the floor of the claimed GPUs, and where all the code needs more (PTX only a GPU outside "
        "the claim would JIT-compile) it says that floor too; without a claim it is the floor of all the code.",
        "Nothing; publish the floor of the claimed GPUs with the release (the all-code floor only beside "
        "a promise for the GPUs outside the claim that need it).",
        "wheel needs driver >= 580.65.06 on Linux (CUDA 13.0)",
    ),
    CodeInfo(
        Code.X001,
        WARNING,
        "stale ignore entry",
        "An ignore entry in [tool.archaudit] no longer matches any finding.",
        "Delete the entry.",
        "ignore entry G001 for libold.so matches nothing",
    ),
    CodeInfo(
        Code.X002,
        INFO,
        "data member, not judged",
        "A [[tool.archaudit.data]] entry says this wheel member is data that nothing loads as a library "
        "(a wheel shipped for a tool to read, a test fixture), with the publisher's reason; its libraries "
        "are left out of the verdict.",
        "Nothing, while the reason holds; delete the entry when the member becomes code that is loaded.",
        "archaudit/examples/gpu_example-1.0-py3-none-linux_x86_64.whl: data, not judged (the example "
        "wheel `check --example` reads)",
    ),
]

CODES: dict[Code, CodeInfo] = {c.code: c for c in _CODES}


def severity(code: Code) -> Severity:
    return CODES[code].severity


def means_unverified(f: Finding) -> bool:
    """The one test of "this finding means unverified": a reader's error (E0xx), so what it
    concerns was not verified and can never count as passing or running."""
    return f.code.startswith("E") and f.severity == ERROR


def make_finding(code: Code, subject: str, message: str, **data: object) -> Finding:
    """A finding of a registered code, its severity from the code table."""
    return Finding(code, severity(code), subject, message, tuple(data.items()))


__all__ = [
    "Code",
    "CodeInfo",
    "CODES",
    "ERROR",
    "Finding",
    "FOLD_EXAMPLES",
    "Fold",
    "Foldable",
    "INFO",
    "finding_key",
    "fold_findings",
    "make_finding",
    "means_unverified",
    "Severity",
    "severity",
    "WARNING",
]
