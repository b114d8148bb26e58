"""Files that are device code themselves: a bare fatbin or offload bundle, a PTX file, and the
refusal of a device-code suffix on anything else.
"""

from __future__ import annotations

from dataclasses import replace

from ..findings import Code
from ..model import PTX, STANDALONE, Container, Entry, Library, Problem
from . import codefacts
from .decode import is_cuda_target
from .scan import LibraryScan, OpenFile
from .search import Zone
from .stream import ReadFailed, Source


def read_all(src: Source, size: int, max_payload: int) -> bytes:
    if size > max_payload:
        raise ReadFailed(f"{size} bytes exceed the {max_payload}-byte verification bound", code=Code.E012)
    src.ensure(size + 1)
    if src.end != size:
        raise ReadFailed(f"file has {src.end} bytes, expected {size}", code=Code.E002)
    return bytes(src.buf)


def not_device_code(f: OpenFile) -> Library:
    return Library(f.path, f.size, "other", problems=(Problem(Code.E014, "not a cubin, fatbin, PTX or code object"),))


def container_file(f: OpenFile) -> Library:
    """A bare .fatbin or offload bundle file: all of it is device code."""
    scan = LibraryScan(f.path, f.size, f.settings)
    found = scan.run(f.src, [Zone(0, f.size, scan.patterns(code=True, strings=False, cubins=False))])
    containers = [Container("nvidia", STANDALONE, "", c.offset, c.size, c.entries) for c in found.containers]
    containers += [replace(c, role=STANDALONE) for c in found.bundles]
    containers.sort(key=lambda c: c.offset)
    problems = found.problems + found.soft.counted()
    if not containers and not problems:
        problems.append(Problem(Code.E011, "not a valid fatbin container"))
    elif containers and containers[0].offset:
        # Chosen by its first bytes, so a container must start there: a library whose header
        # was overwritten by a magic would otherwise pass with every container it embeds
        # (relocatable ones too) read as standalone code.
        problems.append(
            Problem(
                Code.E011,
                f"the file starts with a container magic, but its first valid "
                f"container starts at 0x{containers[0].offset:x}",
                0,
            )
        )
    return Library(f.path, f.size, "fatbin", tuple(containers), problems=tuple(problems))


def ptx_file(f: OpenFile) -> Library:
    path, size = f.path, f.size
    data = read_all(f.src, size, f.settings.max_payload)
    target, version, kernels = codefacts.ptx_facts(data)
    if not target or not target.startswith("sm_") and not target.startswith("compute_"):
        return Library(path, size, "ptx", problems=(Problem(Code.E014, "PTX has no .target sm_XX directive"),))
    target = target.replace("compute_", "sm_")
    if not is_cuda_target(target):
        return Library(
            path, size, "ptx", problems=(Problem(Code.E014, f"PTX .target {target!r} is not a CUDA architecture"),)
        )
    entry = Entry(
        "nvidia",
        PTX,
        target,
        version or (0, 0),
        "none",
        size,
        size,
        0,
        kernels=kernels,
        decoded=True,
        ptx_target=target,
    )
    return Library(path, size, "ptx", (Container("nvidia", STANDALONE, "", 0, size, (entry,)),))


__all__ = ["container_file", "not_device_code", "ptx_file", "read_all"]
