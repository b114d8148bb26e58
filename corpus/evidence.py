"""Record what NVIDIA's and LLVM's own tools say a corpus wheel carries, library by library.

This is the evidence side of the corpus: it never calls archaudit. For every ELF library of a
wheel it runs ``cuobjdump`` (the default dump, which keeps the ``a``/``f`` suffixes and prints
each PTX's ISA version) and, for AMD libraries, ``clang-offload-bundler --list`` on each
bundle of ``.hip_fatbin``. The summary is written to ``corpus/evidence/<wheel>.txt``, which the
manifest cites. cuobjdump reads only ``.nv_fatbin``/``__nv_relfatbin`` and refuses targets it no
longer supports (``sm_35``); such refusals are recorded as they are, followed by a walk of the
container and entry headers of ``.nv_fatbin`` (the layout of the toolkit's fatbinary_section.h),
which needs no decoding and is not archaudit's reader. The Linux cuobjdump does not read Windows
DLLs ("does not contain device code"), so a DLL's ``.nv_fatb`` section gets the same header walk.
Where cuobjdump lists nothing in a 64-bit ELF, the same header walk reads its other sections: the
containers a library loads itself (CUPTI's and the Compute Sanitizer's, in ``.rodata``).

    python -m corpus.evidence [NAME ...]     # wheels of the manifest, or those named
"""

from __future__ import annotations

import argparse
import collections
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import amd_reference  # noqa: E402
import oracle  # noqa: E402
from corpus import manifest as manifest_mod  # noqa: E402


def _is_library(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].lower()
    return base.endswith((".so", ".dll", ".pyd")) or ".so." in base


CONTAINER_MAGIC = b"\x50\xed\x55\xba"
ARCH_SPECIFIC, FAMILY = 0x100000, 0x200000  # entry flags: the a and f suffixes


def pe_sections(data: bytes) -> dict[str, tuple[int, int]]:
    """name -> (file offset, raw size) of a PE image's sections."""
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    if data[pe : pe + 4] != b"PE\0\0":
        return {}
    nsec, opt = struct.unpack_from("<H", data, pe + 6)[0], struct.unpack_from("<H", data, pe + 20)[0]
    out = {}
    for i in range(nsec):
        at = pe + 24 + opt + 40 * i
        name = data[at : at + 8].rstrip(b"\0").decode("latin-1")
        size, offset = struct.unpack_from("<II", data, at + 16)
        out[name] = (offset, size)
    return out


def walk_containers(data: bytes, start: int, size: int) -> list[list[tuple[str, str]]]:
    """The entries of every fatbin container in data[start:start+size], by their headers only:
    one list per container of (kind, target), kind "elf", "ptx" or "nvvm", target sm_XY[a|f]."""
    end, at, out = start + size, start, []
    while at + 16 <= end:
        if data[at : at + 4] != CONTAINER_MAGIC:  # padding, or data between containers
            hit = data.find(CONTAINER_MAGIC, at, end)
            if hit < 0:
                break
            at = hit if (hit - start) % 8 == 0 else hit + 8 - (hit - start) % 8
            continue
        version, header, fat = struct.unpack_from("<HHQ", data, at + 4)
        entry, stop, entries = at + header, min(at + header + fat, end), []
        while entry + 64 <= stop:
            kind, _, ehead, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 0x1C)[0]
            flags = struct.unpack_from("<Q", data, entry + 0x28)[0]
            suffix = "a" if flags & ARCH_SPECIFIC else "f" if flags & FAMILY else ""
            entries.append(({1: "ptx", 2: "elf", 8: "nvvm"}.get(kind, f"kind{kind}"), f"sm_{arch}{suffix}"))
            if ehead < 64 or payload > stop - entry:
                break
            entry += ehead + payload
        out.append(entries)
        at = max(at + 16, (at + header + fat + 7) // 8 * 8)
    return out


def fatbin_sections(data: bytes, resources: bool = False) -> dict[str, tuple[int, int]]:
    """The sections of an ELF or PE library that may hold fatbin containers: ELF's .nv_fatbin (what
    the runtime registers), or with ``resources`` every other ELF section with file bytes (the
    containers a library loads itself, e.g. CUPTI's in .rodata); every section of a DLL (nvcc's
    .nv_fatb, and data some libraries load)."""
    if data[:4] == b"\x7fELF":
        sections = amd_reference.elf_sections(data)
        if resources:
            return {
                name: (off, size)
                for name, (off, size, kind) in sections.items()
                if name and name != ".nv_fatbin" and kind != 8 and size >= 64
            }  # 8: SHT_NOBITS
        sec = sections.get(".nv_fatbin")
        return {".nv_fatbin": (sec[0], sec[1])} if sec else {}
    if data[:2] == b"MZ":
        return {k: v for k, v in pe_sections(data).items() if k not in ("__nv_rel", ".nvFatBi")}
    return {}


def _summarise_walk(data: bytes, resources: bool = False) -> str:
    parts = []
    for name, (off, size) in fatbin_sections(data, resources).items():
        counts: collections.Counter[str] = collections.Counter()
        containers = walk_containers(data, off, size)
        for entries in containers:
            for kind, target in entries:
                counts[target if kind == "elf" else f"compute_{target[3:]}" if kind == "ptx" else f"nvvm:{target}"] += 1
        if counts:
            parts.append(
                f"{name} ({len(containers)} containers) "
                + " ".join(f"{k}x{n}" for k, n in sorted(counts.items(), key=lambda kv: _order(kv[0])))
            )
    return "; ".join(parts)


def _summarise_cuda(entries: list[dict[str, object]]) -> str:
    counts: collections.Counter[str] = collections.Counter()
    for e in entries:
        if e["kind"] == "elf":
            counts[e["arch"]] += 1
        elif e["kind"] == "ptx":
            v = e["code_version"]
            counts[f"compute_{e['arch'][3:]}(ISA {v[0]}.{v[1]})"] += 1
        else:
            counts[f"nvvm:{e['arch']}"] += 1
    return " ".join(f"{k}x{n}" for k, n in sorted(counts.items(), key=lambda kv: _order(kv[0])))


def _order(label: str) -> tuple[int, int, str]:
    kind = 1 if label.startswith("compute_") else 2 if label.startswith("nvvm") else 0
    digits = "".join(ch for ch in label.split("(")[0].split("_", 1)[-1] if ch.isdigit())
    return kind, int(digits or 0), label


def _amd_targets(path: str) -> str | None:
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        return None
    try:
        sections = amd_reference.elf_sections(data)
    except Exception:  # noqa: BLE001 - a 32-bit or odd ELF: not an AMD library
        return None
    if ".hip_fatbin" not in sections or amd_reference.BUNDLER is None:
        return None
    off, size, _ = sections[".hip_fatbin"]
    counts: collections.Counter[str] = collections.Counter()
    for _, piece in amd_reference.split_section(data, off, size):
        try:
            ids = amd_reference.reference_bundle(piece, with_entries=False)
        except subprocess.CalledProcessError as err:
            counts[f"bundler-error({err.returncode})"] += 1
            continue
        for ident in ids:
            counts[str(ident).split("--", 1)[-1]] += 1
    return " ".join(f"{k}x{n}" for k, n in sorted(counts.items()))


def data_is_elf64(path: str) -> bool:
    """A 64-bit little-endian ELF (the header walk's reader takes no other)."""
    with open(path, "rb") as f:
        head = f.read(6)
    return head[:4] == b"\x7fELF" and head[4:6] == b"\x02\x01"


def record(wheel: Path, out: Path) -> None:
    """Write the per-library summary of one wheel."""
    lines = [
        f"# {wheel.name}",
        f"# cuobjdump {oracle.cuobjdump_version()} default dump (executable image);"
        " clang-offload-bundler --list for .hip_fatbin",
        "",
    ]
    with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as tmp:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            if info.is_dir() or not _is_library(info.filename):
                continue
            path = os.path.join(tmp, "lib")
            with z.open(info) as src, open(path, "wb") as dst:
                head = src.read(4)
                if head != b"\x7fELF" and head[:2] != b"MZ":
                    continue
                dst.write(head)
                while block := src.read(1 << 20):
                    dst.write(block)
            if head[:2] == b"MZ":
                walked = _summarise_walk(Path(path).read_bytes())
                if walked:
                    lines.append(f"{info.filename}: header walk (a DLL: cuobjdump on Linux reads no PE): {walked}")
                os.unlink(path)
                continue
            try:
                entries = oracle.dump_entries(path)
                cuda = _summarise_cuda(entries) if entries else ""
            except oracle.CuobjdumpError as err:
                cuda = "cuobjdump error: " + " ".join(err.stderr.replace(path, "<library>").split())[:160]
                walked = _summarise_walk(Path(path).read_bytes())
                if walked:
                    cuda += f"; header walk: {walked}"
            if not cuda and data_is_elf64(path):
                walked = _summarise_walk(Path(path).read_bytes(), resources=True)
                if walked:
                    cuda = (
                        "nothing in .nv_fatbin; header walk of its other sections (containers it loads"
                        f" itself): {walked}"
                    )
            amd = _amd_targets(path)
            if cuda:
                lines.append(f"{info.filename}: {cuda}")
            if amd:
                lines.append(f"{info.filename}: hip {amd}")
            os.unlink(path)
    out.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="manifest ids (default: all)")
    args = ap.parse_args(argv)
    for w in manifest_mod.load():
        if args.names and w.id not in args.names:
            continue
        wheel = manifest_mod.cache_dir() / w.filename
        out = HERE / "evidence" / (w.filename[:-4] + ".txt")
        if not wheel.exists() or out.exists():
            continue
        record(wheel, out)
        print(f"{w.id}: {out.name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
