"""Attribution of the containers a scan found to the sections of the library that holds them:
their role (executable, device-link, relocatable, ...), and the problems of containers and
wrapper records that lie where the runtime would not register them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

from ..findings import Code
from ..model import CUBIN, DEVICE_LINK, EMBEDDED, EXECUTABLE, RELOCATABLE, Container, Problem, Role
from . import elf
from .records import PAD_WINDOW, FatbinWrapper, FoundContainer, HipWrapper, ScanResult

ALIGN_SLACK = 8
HIP_ALIGN = 4096


# ---- attribution ----

FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")


def _unregistered(
    wrappers: Sequence[FatbinWrapper | HipWrapper],
    where: list[elf.Section],
    segments: tuple[elf.Segment, ...],
    found_at: set[int],
    code: Code,
    what: str,
    missing: str,
) -> list[Problem]:
    """A problem for each wrapper (in one of the `where` sections) that registers an address
    where nothing was found. Position-independent libraries leave the address 0 for a relocation
    to fill at load: those are not judged."""
    out = []
    for w in wrappers:
        if w.address and any(s.offset <= w.offset < s.file_end for s in where):
            off = elf.vaddr_to_offset(segments, w.address)
            if off is not None and off not in found_at:
                out.append(Problem(code, f"{what} at 0x{w.offset:x} registers 0x{off:x}, where {missing}", off))
    return out


class Attribution(NamedTuple):
    """The containers of a library, each named by its section and given its role, and the
    problems of where they (and the wrappers that register them) lie."""

    containers: list[Container]
    problems: list[Problem]


def attribute(
    found: ScanResult,
    sections: list[elf.Section],
    segments: tuple[elf.Segment, ...],
    alignment: int = ALIGN_SLACK,
    slack: Callable[[int], int] | None = None,
) -> Attribution:
    """Name each container's section and role; check fatbin sections are fully accounted for.
    A gap before the first container must be shorter than `alignment`; a gap after a container
    (before the next or the section's end) may reach the section's own alignment (aarch64
    libraries align containers to 256 bytes), and must be zeros."""
    seg_sections = [s for s in sections if s.name == ".nvFatBinSegment"]
    problems = _soft_problems(found, sections)
    containers, misplaced = _fatbin_containers(found, sections, segments, seg_sections)
    problems += misplaced
    # The runtimes register what the wrappers in .nvFatBinSegment / .hipFatBinSegment point at:
    # each must be a container (a bundle) that was found and verified; one whose magic is damaged
    # is not found at all.
    hip_segs = [s for s in sections if s.name == ".hipFatBinSegment"]
    problems += _unregistered(
        found.wrappers,
        seg_sections,
        segments,
        {c.offset for c in found.containers},
        Code.E011,
        "fatbin wrapper",
        "no fatbin container was found",
    )
    problems += _unregistered(
        found.hip_wrappers,
        hip_segs,
        segments,
        {b.offset for b in found.bundles},
        Code.E030,
        "HIP wrapper",
        "no valid offload bundle was found",
    )
    bundles, misplaced = _bundles(found, sections)
    problems += misplaced
    cubins, misplaced = _cubins(found, sections)
    problems += misplaced
    problems += _unaccounted(found, sections, alignment, slack)
    return Attribution(sorted(containers + bundles + cubins, key=lambda c: c.offset), problems)


def _soft_problems(found: ScanResult, sections: list[elf.Section]) -> list[Problem]:
    """The scan's soft problems that count: those inside a device-code section (or anywhere,
    in a library without a section table)."""
    device_sections = [s for s in sections if s.name in (*FATBIN_SECTIONS, ".hip_fatbin")]
    return found.soft.counted(
        lambda code, offset: not sections or any(s.offset <= offset < s.file_end for s in device_sections)
    )


def _fatbin_containers(
    found: ScanResult, sections: list[elf.Section], segments: tuple[elf.Segment, ...], seg_sections: list[elf.Section]
) -> tuple[list[Container], list[Problem]]:
    """Each fatbin container with its section and role (device-link when a v2 wrapper in
    .nvFatBinSegment registers it), and the problems of where it lies."""
    dlink = set()
    for w in found.wrappers:
        if w.version == 2 and any(s.offset <= w.offset < s.file_end for s in seg_sections):
            off = elf.vaddr_to_offset(segments, w.address)
            if off is not None:
                dlink.add(off)
    out: list[Container] = []
    problems: list[Problem] = []
    for c in found.containers:
        sec = next(
            (s for s in sections if s.type not in (0, elf.SHT_NOBITS) and s.offset <= c.offset < s.file_end), None
        )
        name = sec.name if sec else ""
        problems += _misplaced(Code.E011, "fatbin container", c.offset, c.size, sec, bool(sections))
        role: Role
        if name == ".nv_fatbin":
            role = DEVICE_LINK if c.offset in dlink else EXECUTABLE
        elif name == "__nv_relfatbin":
            role = RELOCATABLE
        else:
            role = EMBEDDED
            if sec is not None and not c.entries:
                problems.append(_empty_outside_fatbin_section(c.offset, name))
        out.append(Container("nvidia", role, name, c.offset, c.size, c.entries))
    return out, problems


def _bundles(found: ScanResult, sections: list[elf.Section]) -> tuple[list[Container], list[Problem]]:
    """Each HIP offload bundle with its section, and the problems of where it lies."""
    out: list[Container] = []
    problems: list[Problem] = []
    for b in found.bundles:
        sec = next(
            (s for s in sections if s.offset <= b.offset < s.file_end and s.type not in (0, elf.SHT_NOBITS)), None
        )
        problems += _misplaced(Code.E033, "HIP bundle", b.offset, b.size, sec, bool(sections))
        out.append(replace(b, section=sec.name if sec else ""))
    return out, problems


def _cubins(found: ScanResult, sections: list[elf.Section]) -> tuple[list[Container], list[Problem]]:
    """Each whole cubin outside any fatbin container, as a module of its own (the library loads
    it with cuModuleLoadData; nothing registers it), with its section, and the problems of
    where it lies (in no section, or past its section's end, as for a container). One in a fatbin
    section is the entry of a container whose header was damaged, not a module: the section's
    accounting fails it (E011)."""
    out: list[Container] = []
    problems: list[Problem] = []
    for c in found.cubins:
        sec = next(
            (s for s in sections if s.offset <= c.offset < s.file_end and s.type not in (0, elf.SHT_NOBITS)), None
        )
        if sec is not None and sec.name in FATBIN_SECTIONS:
            continue  # an entry of a container whose header is damaged: the section's accounting says E011
        problems += _misplaced(Code.E014, "cubin", c.offset, c.size, sec, bool(sections))
        out.append(Container("nvidia", CUBIN, sec.name if sec else "", c.offset, c.size, (c.entry,)))
    return out, problems


def _unaccounted(
    found: ScanResult, sections: list[elf.Section], alignment: int, slack: Callable[[int], int] | None = None
) -> list[Problem]:
    """Device-code sections whose bytes are not all containers (or bundles): an empty fatbin
    section, bytes that are no valid container, containers that declare more than the section."""
    problems: list[Problem] = []
    for s in sections:
        if s.name == ".hip_fatbin" and s.size and s.type != elf.SHT_NOBITS:
            inside_b = [b for b in found.bundles if s.offset <= b.offset < s.file_end]
            covered = sum(b.size for b in inside_b)
            # bundles are page-aligned in the section: a gap of less than a page may follow each
            if s.size - covered >= HIP_ALIGN * (len(inside_b) + 1):
                problems.append(
                    Problem(
                        Code.E030,
                        f".hip_fatbin: {s.size - covered} of its {s.size} bytes are not a valid offload bundle",
                        s.offset,
                    )
                )
        if s.name in FATBIN_SECTIONS and not s.size:
            problems.append(
                Problem(Code.E011, f"{s.name} is empty (nvcc never writes an empty fatbin section)", s.offset)
            )
        if s.name in FATBIN_SECTIONS and s.size and not _accounted(s, found.containers, alignment, slack):
            covered = sum(c.size for c in found.containers if s.offset <= c.offset < s.file_end)
            why = (
                f"{s.size - covered} of its {s.size} bytes are not a valid fatbin container"
                if covered <= s.size
                else f"its containers declare {covered} bytes, {covered - s.size} more than the section holds"
            )
            problems.append(Problem(Code.E011, f"{s.name}: {why}", s.offset))
    return problems


def _empty_outside_fatbin_section(offset: int, section: str) -> Problem:
    """An empty fatbin container (no entries) in a section that no accounting covers (.rodata,
    .text; a DLL's .rdata): nvcc writes empty containers only in its fatbin section (nvlink's,
    accounted there), and a container whose size was cut to 0 elsewhere would hide the entries
    after it unseen, however damaged their headers are."""
    return Problem(
        Code.E011,
        f"fatbin container at 0x{offset:x} in {section} is empty (nvcc writes empty ones only "
        f"in its fatbin section): nothing accounts for the bytes after it",
        offset,
    )


def _misplaced(
    code: Code, what: str, offset: int, size: int, sec: elf.Section | None, sectioned: bool
) -> list[Problem]:
    """A container (an offload bundle) must lie within the section it starts in: every byte a
    linker places is in a section, so one in none, or running past its section's end, was put
    there after the link, where no tool that reads sections sees it."""
    if sec is not None and offset + size > sec.file_end:
        return [Problem(code, f"{what} at 0x{offset:x} overruns section {sec.name}", offset)]
    if sec is None and sectioned:
        return [Problem(code, f"{what} at 0x{offset:x} lies in no section", offset)]
    return []


def _accounted(
    s: elf.Section, containers: list[FoundContainer], alignment: int, slack: Callable[[int], int] | None = None
) -> bool:
    """Whether a fatbin section holds containers and nothing else but alignment padding: a
    section holding no container at all (a header damaged, its size cut below one container)
    hides its code, and so would non-zero bytes between containers. With ``slack`` (a DLL: nvcc
    sizes each container's host array to pe.msvc_slack), a gap of exactly that many zero bytes
    is the rest of the container's own array."""
    inside = sorted((c for c in containers if s.offset <= c.offset < s.file_end), key=lambda c: c.offset)
    if not inside or inside[0].offset - s.offset >= alignment:
        return False
    pad = max(alignment, min(s.addralign, PAD_WINDOW))
    for c, nxt in zip(inside, inside[1:] + [None]):
        stop = nxt.offset if nxt is not None else s.file_end
        gap = stop - (c.offset + c.size)
        if gap < 0:
            return False
        if slack is not None and gap and gap == slack(c.size):
            if c.zeros_after < gap:
                return False
            continue
        if gap >= alignment and (gap >= pad or (stop - s.offset) % pad and nxt is not None):
            return False
        if gap and c.zeros_after < gap:
            return False
    return True


__all__ = ["ALIGN_SLACK", "attribute"]
