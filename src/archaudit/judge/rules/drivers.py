"""Driver floors: the minimum NVIDIA driver of the code the claimed or named GPUs run (D002), and
a given driver below it (D001), with the kernels a PTX floor belongs to."""

from __future__ import annotations

from dataclasses import dataclass

from ...findings import Code, Finding
from ...gpus import cuda as arch
from ...gpus.cuda import CC, label
from ...gpus.drivers import driver_at_least
from ...gpus.selection import NvCode
from ..facts import Floor, LibraryFacts
from .common import dotted, finding, kernels_phrase, library_rule


@library_rule(Code.D002)
def rule_d002(f: LibraryFacts) -> list[Finding]:
    """D002: the minimum NVIDIA driver for the code the claimed or named GPUs would run."""
    floor = f.floor
    if not f.codes or floor is None:
        return []
    per_gpu = {label(cc): (p.floor.driver or "unknown") for cc in f.floor_gpus if (p := f.paths[cc]).floor is not None}
    if floor.driver is None:
        return [
            finding(
                Code.D002,
                f.path,
                f"{f.path} needs a driver archaudit cannot name ({floor.evidence})",
                cuda=floor.cuda_text,
                driver="unknown",
                gpus=per_gpu,
            )
        ]
    whose, also, more = _floor_scope(f, floor)
    return [
        finding(
            Code.D002,
            f.path,
            f"{f.path} needs driver >= {floor.driver} ({f.policy.driver_os}, CUDA {floor.cuda_text}){whose}{also}",
            cuda=floor.cuda_text,
            driver=floor.driver,
            gpus=per_gpu,
            os=f.policy.driver_os,
            **more,
        )
    ]


def _floor_scope(f: LibraryFacts, floor: Floor) -> tuple[str, str, dict[str, object]]:
    """Whose floor a D002 states, and the other one: with a claim (or --gpu), the floor of the code
    those GPUs run, which a release publishes; beside it, where it is higher, the floor of all the
    code, which only a GPU outside the claim needs (one that JIT-compiles newer PTX)."""
    every = f.code_floor
    if not f.floor_gpus:
        return (
            " for all its code, with no claim (a release publishes the floor of its claimed GPUs, which "
            "may be lower: give the claim)",
            "",
            {"scope": "all-code"},
        )
    whose = " on its claimed GPUs" if f.claimed else " on the GPUs asked about"
    whose += ", the floor a release publishes" if f.claimed else ""
    if every is None or every.driver is None or every.key <= floor.key:
        return whose, "", {"scope": "claimed" if f.claimed else "asked"}
    return (
        whose,
        f"; all its code needs >= {every.driver} (CUDA {every.cuda_text}, {every.evidence}), which "
        f"no claimed GPU needs",
        {
            "scope": "claimed" if f.claimed else "asked",
            "all_code_driver": every.driver,
            "all_code_cuda": every.cuda_text,
        },
    )


@library_rule(Code.D001)
def rule_d001(f: LibraryFacts) -> list[Finding]:
    """D001 (--driver): the driver given is older than the floor of the code some claimed or
    named GPU would run, or that floor is unknown (fail closed)."""
    driver = f.policy.driver
    if driver is None or not f.codes:
        return []
    floors = _judged_floors(f)
    unknown = [(g, fl) for g, fl in floors if fl.driver is None]
    if unknown:
        return [_d001_unknown(f, unknown, driver)]
    low = [(g, fl) for g, fl in floors if fl.driver is not None and not driver_at_least(driver, fl.driver)]
    return [_d001_low(f, low, driver)] if low else []


def _d001_low(f: LibraryFacts, low: list[tuple[str, Floor]], driver: str) -> Finding:
    """D001 where the driver given is below some floor: the highest, what the driver answers
    there, the evidence, and whose floor a PTX floor is (``_PtxScope``)."""
    top = max((fl for _, fl in low), key=lambda fl: fl.key)
    evidence = sorted({fl.evidence for _, fl in low})
    ptx = any("PTX ISA" in e for e in evidence)
    gpus = [g for g, _ in low if g]
    scope = None
    if ptx and gpus and all("PTX ISA" in fl.evidence for _, fl in low):
        scope = _ptx_scope(f, [cc for cc in f.floor_gpus if label(cc) in gpus], driver)
    return finding(
        Code.D001,
        f.path,
        f"{f.path} needs driver >= {top.driver} (CUDA {top.cuda_text})"
        f"{' on ' + dotted(gpus) if gpus else ''}; {driver} given. Fix: require driver "
        f">= {top.driver}, or build with an older toolkit. '{_driver_error(ptx, top)}' "
        f"from {', '.join(evidence[:4])}{' ...' if len(evidence) > 4 else ''}"
        f"{scope.text(driver) if scope else ''}",
        driver=top.driver,
        cuda=top.cuda_text,
        gpus=gpus,
        **(scope.data() if scope else {}),
    )


def _judged_floors(f: LibraryFacts) -> list[tuple[str, Floor]]:
    """The floors D001 weighs: each claimed or named GPU's (by its label), else the library's."""
    if f.floor_gpus:
        return [(label(cc), p.floor) for cc in f.floor_gpus if (p := f.paths[cc]).floor is not None]
    return [("", f.floor)] if f.floor is not None else []


def _d001_unknown(f: LibraryFacts, unknown: list[tuple[str, Floor]], driver: str) -> Finding:
    """D001 where a floor is unknown: the driver given cannot be verified (fail closed)."""
    gpus = [g for g, _ in unknown if g]
    why = sorted({fl.evidence for _, fl in unknown})
    return finding(
        Code.D001,
        f.path,
        f"{f.path} needs a driver archaudit cannot name"
        f"{' on ' + dotted(gpus) if gpus else ''}: {driver} cannot be verified. Fix: "
        f"find the CUDA release that built it and require its driver. "
        f"{'; '.join(why[:3])}",
        driver="unknown",
        gpus=gpus,
    )


def _driver_error(ptx: bool, top: Floor) -> str:
    """The error a driver below the floor gives: the PTX JIT's, the GPU's, or the runtime's."""
    if ptx:
        return "the provided PTX was compiled with an unsupported toolchain"
    if top.kind == "gpu":
        return "no CUDA-capable device is detected"
    return "CUDA driver version is insufficient for CUDA runtime version"


@dataclass(frozen=True, slots=True)
class _PtxScope:
    """Whose floor a PTX floor above the given driver is, where the GPUs run the rest natively:
    the kernels that reach them only through that PTX, with no native code there in any container
    and no evidence that they are not launched there (they set the floor: they fail on that
    driver), and those of the same containers that set no floor (native elsewhere, or K003's
    evidence: named for another architecture, or a sourced statement)."""

    kernels: tuple[str, ...]  # set the floor
    per_gpu: tuple[tuple[str, int], ...]  # how many of them on each GPU
    native_elsewhere: int
    excused: int

    def text(self, driver: str) -> str:
        each = ", ".join(f"{n} on {g[:-1]}.{g[-1]}" for g, n in self.per_gpu)
        out = (
            f"; it is the floor of {kernels_phrase(list(self.kernels), 0)} ({each}) that have no native code "
            f"there in any container, only that PTX, and no evidence that they are not launched there (not "
            f"K003): they fail there on {driver}. It is not the floor of the whole library: its other kernels run "
            f"natively there"
        )
        if self.native_elsewhere or self.excused:
            parts = (
                [
                    f"{self.native_elsewhere} more of those containers' kernels have native code there in another "
                    f"container (K004 unless a dispatch is recorded)"
                ]
                if self.native_elsewhere
                else []
            )
            parts += [f"{self.excused} are excused there by evidence (K003) and set no floor"] if self.excused else []
            out += f" ({'; '.join(parts)})"
        return out

    def data(self) -> dict[str, object]:
        return {
            "kernels": list(self.kernels[:100]),
            "kernel_count": len(self.kernels),
            "per_gpu": dict(self.per_gpu),
            "native_elsewhere": self.native_elsewhere,
            "excused": self.excused,
        }


def _ptx_scope(f: LibraryFacts, gpus: list[CC], driver: str) -> _PtxScope | None:
    """The kernels a PTX floor above ``driver`` belongs to on ``gpus`` (``_PtxScope``), or None
    where these GPUs run nothing of the library natively (then the floor is the whole library's)."""
    sets: set[str] = set()
    per_gpu: list[tuple[str, int]] = []
    elsewhere: set[str] = set()
    excused: set[str] = set()
    some_native = False
    for cc in gpus:
        p = f.paths[cc]
        native = f.native_on(cc)
        some_native = some_native or bool(native)
        here: set[str] = set()
        for i, rest, said in f.jit_only(cc):
            floor = ptx_floor(p.choices[i].code, f)
            if floor is None or driver_at_least(driver, floor):
                continue
            here |= rest
            excused |= said
        for choice, got in zip(p.choices, p.given):  # same-named kernels these containers give natively elsewhere
            if choice.runs == "jit" and choice.code is not None and _above(choice.code, f, driver):
                elsewhere |= got & native
        sets |= here
        per_gpu.append((label(cc), len(here)))
    if not some_native or not sets:
        return None
    return _PtxScope(tuple(sorted(sets)), tuple(per_gpu), len(elsewhere - sets), len(excused - sets))


def _above(code: NvCode, f: LibraryFacts, driver: str) -> bool:
    floor = ptx_floor(code, f)
    return floor is not None and not driver_at_least(driver, floor)


def ptx_floor(code: NvCode | None, f: LibraryFacts) -> str | None:
    """The driver a PTX entry's ISA needs, or None when it is not known."""
    if code is None:
        return None
    try:
        release = arch.cuda_release_for_ptx_isa(code.entry.code_version)
        return arch.min_driver(release, f.policy.driver_os)
    except LookupError:
        return None


__all__ = ["ptx_floor", "rule_d001", "rule_d002"]
