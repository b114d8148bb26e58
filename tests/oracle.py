"""Reference oracle: NVIDIA's ``cuobjdump``, wrapped for tests.

Tests compare archaudit's own fatbin reader against what ``cuobjdump`` says
about the same file. Nothing here is used by archaudit itself.

Finding the tool (:func:`find_cuobjdump`): env ``CUOBJDUMP`` (a path or a
command name), then ``cuobjdump`` on ``PATH``, then the PyPI package
``nvidia-cuda-cuobjdump`` (``nvidia/cu13/bin/cuobjdump``, or the CUDA 12
layout ``nvidia/cuda_cuobjdump/bin/cuobjdump``) located through importlib.
``None`` when none is found; tests then ``pytest.skip``.

Exit codes: 0 = output parsed; 255 = "does not contain device code" (host-only
libraries, plain text, a ``.ptx`` file) -> empty result; anything else (1 =
cannot open the file, invalid fatbin header) -> :class:`CuobjdumpError`.

API
- ``list_entries(path, all_sections=False) -> list[tuple[str, str]]``:
  ``("ELF"|"PTX", target)`` in walk order, from ``cuobjdump -lelf -lptx``.
  ``target`` is as listed: ``sm_90a`` keeps ``a``, but ELF entries DROP ``f``
  (an sm_100f cubin lists as ``sm_100``); PTX keeps both (``sm_100f``).
  PTX targets are named ``sm_XX`` like cuobjdump does, not ``compute_XX``.
  kind 8 (LTO IR) entries are never listed.
- ``dump_entries(path, all_sections=False) -> list[dict]`` from the default
  dump ``cuobjdump [-all] FILE``; one dict per entry with keys ``kind``
  (``"elf"|"ptx"|"nvvm"``), ``arch`` (``"sm_100f"``, keeps ``a``/``f``),
  ``code_version`` (``(1, 8)``; PTX: ISA version ``(9, 0)``), ``compressed``,
  ``identifier`` (``str`` exactly as printed after ``identifier = ``, trailing
  space of dlink entries kept, or ``None``), ``debug`` (``has debug info``).
  A bare ``.cubin`` gives ``[]``: cuobjdump prints no entry header for it.
- ``kernel_names(path, all_sections=False) -> dict[str, set[str]]``: kernel
  (entry-function) names per target, from ONE run of ``cuobjdump -symbols
  -ptx``. ELF entries: the ``symbols:`` table lines of type ``FUNC`` whose
  section column is ``ENTRY`` (plain ``__device__`` functions show ``-``
  and are excluded); keyed by the dump's arch (``sm_90a``, ``sm_100f``).
  PTX entries: ``.entry NAME(`` lines of the PTX text; keyed ``compute_XX``
  (suffix kept) so SASS and PTX never share a key. Entries with the same key
  are unioned, so the kernel-less dlink cubins add nothing, but a target that
  only appears in a dlink container maps to an empty set (e.g. the ``sm_75``
  of ``lib_multiobj.so``). ``-symbols`` was chosen over ``-elf``: it prints
  one table per cubin with the ENTRY marker, while ``-elf`` only shows
  ``.text.<name>`` section names that must be told apart from other sections.
- ``cuobjdump_version() -> str`` (e.g. ``"13.5.37"``), ``fixture(name) -> Path``
  (a file in ``tests/fixtures/cuda/bin``), :class:`CuobjdumpError`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

__all__ = [
    "FIXTURES",
    "CuobjdumpError",
    "cuobjdump_version",
    "dump_entries",
    "find_cuobjdump",
    "fixture",
    "kernel_names",
    "list_entries",
]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cuda" / "bin"

NO_DEVICE_CODE = 255

_PYPI_CANDIDATES = (("cu13", "bin", "cuobjdump"), ("cuda_cuobjdump", "bin", "cuobjdump"))

_LIST_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(\S.*)$")
_HEADER_RE = re.compile(r"^Fatbin (elf|ptx|nvvm) code:$")
_VERSION_RE = re.compile(r"^\[(\d+),(\d+)\]$")
_PTX_ENTRY_RE = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+([^\s(]+)")


class CuobjdumpError(RuntimeError):
    """cuobjdump failed (not "no device code"): bad file, unreadable, crash."""

    def __init__(self, cmd: list[str], returncode: int, stderr: str) -> None:
        self.cmd = cmd
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"{' '.join(cmd)} exited {returncode}: {stderr.strip()}")


def fixture(name: str) -> Path:
    """Path of a built fixture in ``tests/fixtures/cuda/bin``."""
    return FIXTURES / name


@functools.cache
def find_cuobjdump() -> str | None:
    """Return the cuobjdump executable to use, or ``None`` if there is none."""
    env = os.environ.get("CUOBJDUMP")
    if env:
        found = shutil.which(env)
        if found:
            return found
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        for parts in _PYPI_CANDIDATES:
            candidate = Path(root).joinpath(*parts)
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def _tool() -> str:
    tool = find_cuobjdump()
    if tool is None:
        raise FileNotFoundError("cuobjdump not found (set CUOBJDUMP or install nvidia-cuda-cuobjdump)")
    return tool


@functools.lru_cache(maxsize=256)
def _run_cached(tool: str, args: tuple[str, ...], path: str, _mtime_ns: int) -> str | None:
    cmd = [tool, *args, path]
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
    if proc.returncode == 0:
        return proc.stdout
    if proc.returncode == NO_DEVICE_CODE:
        return None
    raise CuobjdumpError(cmd, proc.returncode, proc.stderr)


def _run(args: list[str], path: str | os.PathLike[str]) -> str | None:
    """stdout of ``cuobjdump ARGS PATH``; ``None`` for "no device code" (rc 255)."""
    p = os.fspath(path)
    try:
        mtime = os.stat(p).st_mtime_ns
    except OSError:
        mtime = -1  # let cuobjdump report the missing file (rc 1)
    return _run_cached(_tool(), tuple(args), p, mtime)


def cuobjdump_version() -> str:
    """Version of the cuobjdump in use, e.g. ``"13.5.37"``."""
    out = subprocess.run([_tool(), "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"V(\d+(?:\.\d+)+)", out)
    return m.group(1) if m else out.strip()


# cuobjdump holds every entry it lists decoded in memory: about 3x the library (torch 2.14.1's
# libtorch_cuda.so: 5.6 GB). Above this size, its .nv_fatbin is listed in pieces.
WHOLE_FILE_LIMIT = 256 << 20
PIECE_BYTES = 16 << 20
_FATBIN_MAGIC = 0xBA55ED50


def _nv_fatbin_range(path: str) -> tuple[int, int] | None:
    """(offset, size) of an ELF64 little-endian file's ``.nv_fatbin``, read independently of archaudit."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:6] != b"\x7fELF\x02\x01":
            return None
        (shoff,) = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
        f.seek(headers[shstrndx][4])
        names = f.read(headers[shstrndx][5])
    for name, _type, _flags, _addr, offset, size in headers:
        if names[name : names.index(b"\0", name)] == b".nv_fatbin":
            return offset, size
    return None


def _fatbin_pieces(path: str, offset: int, size: int, directory: str) -> list[str]:
    """Cut a ``.nv_fatbin`` at container boundaries into files of about PIECE_BYTES each.

    A container is its 16-byte header (magic, version, header size, payload size) and what
    follows; zero padding up to the section's alignment may sit between containers.
    """
    with open(path, "rb") as f:
        fd = f.fileno()
        cuts, start, pos = [], 0, 0
        while pos + 16 <= size:  # only the 16-byte headers are read, not the section
            magic, _version, header_size, fat_size = struct.unpack("<IHHQ", os.pread(fd, 16, offset + pos))
            if magic != _FATBIN_MAGIC:
                pos += 8
                continue
            end = pos + header_size + fat_size
            if end - start > PIECE_BYTES and pos > start:
                cuts.append((start, pos))
                start = pos
            pos = end
        cuts.append((start, size))
        files = []
        for i, (a, b) in enumerate(cuts):
            piece = os.path.join(directory, f"piece{i}.fatbin")
            with open(piece, "wb") as out:
                for at in range(a, b, 1 << 20):
                    out.write(os.pread(fd, min(1 << 20, b - at), offset + at))
            files.append(piece)
    return files


def _listings(path: str | os.PathLike[str], args: list[str]) -> list[str]:
    """cuobjdump's stdout for PATH: one run, or one per piece of a large library's ``.nv_fatbin``."""
    p = os.fspath(path)
    large = os.path.isfile(p) and os.path.getsize(p) > WHOLE_FILE_LIMIT  # else cuobjdump reports it
    found = _nv_fatbin_range(p) if large else None
    if found is None:
        out = _run(args, p)
        return [] if out is None else [out]
    with tempfile.TemporaryDirectory() as directory:
        return [out for piece in _fatbin_pieces(p, *found, directory) if (out := _run(args, piece)) is not None]


def list_entries(path: str | os.PathLike[str], all_sections: bool = False) -> list[tuple[str, str]]:
    """``[("ELF"|"PTX", target), ...]`` in walk order from ``cuobjdump -lelf -lptx``.

    Without ``all_sections``, a library over WHOLE_FILE_LIMIT is listed piece by piece (its
    ``.nv_fatbin`` cut at container boundaries), which bounds cuobjdump's memory; the listing is
    the same, because cuobjdump's default walk reads only ``.nv_fatbin``.
    """
    if all_sections:
        out = _run(["-all", "-lelf", "-lptx"], path)
        text = [] if out is None else [out]
    else:
        text = _listings(path, ["-lelf", "-lptx"])
    entries = []
    for line in "\n".join(text).splitlines():
        m = _LIST_RE.match(line.strip())
        if not m:
            continue
        kind, name = m.groups()
        # NAME = <stem>[.<n>].<target>.cubin|ptx; the stem may contain dots.
        target = name.rsplit(".", 2)[-2]
        entries.append((kind, target))
    return entries


def _blocks(text: str) -> list[tuple[str | None, dict[str, object], list[str]]]:
    """Split a cuobjdump dump into ``(kind, header fields, body lines)``.

    Lines before the first ``Fatbin ... code:`` header (a bare cubin's
    ``-symbols`` table) form a block of kind ``None``.
    """
    blocks: list[tuple[str | None, dict[str, object], list[str]]] = []
    kind: str | None = None
    fields: dict[str, object] = {}
    body: list[str] = []
    in_header = False

    def flush() -> None:
        if kind is not None or any(line.strip() for line in body):
            blocks.append((kind, fields, body))

    for raw in text.splitlines():
        line = raw.rstrip("\n")
        m = _HEADER_RE.match(line.strip())
        if m:
            flush()
            kind, fields, body, in_header = m.group(1), {}, [], True
            continue
        if in_header:
            stripped = line.strip()
            if stripped and set(stripped) == {"="}:
                continue
            if stripped in ("has debug info", "compressed"):
                fields[stripped] = True
                continue
            key, sep, value = line.partition(" = ")
            if sep and key in (
                "arch",
                "code version",
                "host",
                "compile_size",
                "identifier",
                "ptxasOptions",
                "nvvmOptions",
                "producer",
            ):
                fields[key] = value
                continue
            if line.endswith(" =") and line[:-2] in ("ptxasOptions", "nvvmOptions", "identifier"):
                fields[line[:-2]] = ""
                continue
            in_header = False
        body.append(line)
    flush()
    return blocks


def _code_version(text: object) -> tuple[int, ...]:
    m = _VERSION_RE.match(str(text).strip())
    if not m:
        raise ValueError(f"unexpected code version {text!r}")
    return tuple(int(x) for x in m.groups())


def dump_entries(path: str | os.PathLike[str], all_sections: bool = False) -> list[dict]:
    """One dict per entry of the default ``cuobjdump [-all] FILE`` dump."""
    args = ["-all"] if all_sections else []
    out = _run(args, path)
    if out is None:
        return []
    entries = []
    for kind, fields, _body in _blocks(out):
        if kind is None:
            continue
        identifier = fields.get("identifier")
        entries.append(
            {
                "kind": kind,
                "arch": str(fields.get("arch", "")),
                "code_version": _code_version(fields.get("code version", "")),
                "compressed": bool(fields.get("compressed", False)),
                "identifier": None if identifier is None else str(identifier),
                "debug": bool(fields.get("has debug info", False)),
            }
        )
    return entries


def _ptx_key(arch: str) -> str:
    return "compute_" + arch[3:] if arch.startswith("sm_") else arch


def kernel_names(path: str | os.PathLike[str], all_sections: bool = False) -> dict[str, set[str]]:
    """Kernel names per target: ``{"sm_80": {...}, "compute_90": {...}}``."""
    args = ["-all"] if all_sections else []
    out = _run([*args, "-symbols", "-ptx"], path)
    if out is None:
        return {}
    result: dict[str, set[str]] = {}
    for kind, fields, body in _blocks(out):
        if kind == "nvvm":
            continue
        if kind is None:  # bare cubin: no header, take the target from the listing
            elfs = [t for k, t in list_entries(path) if k == "ELF"]
            key = elfs[0] if len(elfs) == 1 else "unknown"
            kind = "elf"
        else:
            arch = str(fields.get("arch", ""))
            key = arch if kind == "elf" else _ptx_key(arch)
        names = result.setdefault(key, set())
        if kind == "elf":
            for line in body:
                tokens = line.split()
                if len(tokens) >= 5 and tokens[0] == "FUNC" and tokens[3] == "ENTRY":
                    names.add(tokens[-1])
        else:
            for line in body:
                m = _PTX_ENTRY_RE.match(line)
                if m:
                    names.add(m.group(1))
    return result
