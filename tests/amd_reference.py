"""Independent reference readings of HIP device code, for the AMD tests.

Uses LLVM's own tools where installed: ``clang-offload-bundler`` (lists and unbundles
offload bundles; clang 19 reads uncompressed bundles and CCOB versions 1 and 2),
``llvm-readelf`` (decodes AMDGPU e_flags and symbol tables) and the ``zstd`` command
(decodes CCOB version 3 payloads, which clang 19's bundler cannot). None of this
uses archaudit's parser.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import struct
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, overload


def _tool(name: str, env: str) -> str | None:
    """The tool named by ``env``, else the newest Debian-versioned LLVM's (an older
    unversioned one on PATH may not know recent AMDGPU processors), else PATH's."""
    if os.environ.get(env):
        return os.environ[env]

    def version(p: str) -> int:
        m = re.search(r"llvm-(\d+)", p)
        return int(m.group(1)) if m else 0

    cands = sorted(glob.glob(f"/usr/lib/llvm-*/bin/{name}"), key=version)
    return cands[-1] if cands else shutil.which(name)


BUNDLER = _tool("clang-offload-bundler", "ARCHAUDIT_CLANG_OFFLOAD_BUNDLER")


def _names_processors(readelf: str | None) -> str | None:
    """``readelf`` if it names the AMDGPU processor in e_flags (LLVM 16 prints only ``Flags: 0x4E``
    for these code objects, which is no reference at all), else None."""
    if readelf is None:
        return None
    probe = os.path.join(os.path.dirname(__file__), "fixtures", "amd", "bin", "gfx1201.hsaco")
    try:
        out = subprocess.run([readelf, "-h", probe], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return readelf if re.search(r"Flags:.*\bgfx1201\b", out) else None


READELF = _names_processors(_tool("llvm-readelf", "ARCHAUDIT_LLVM_READELF"))
ZSTD = shutil.which("zstd")


def elf_sections(data: bytes) -> dict[str, tuple[int, int, int]]:
    """name -> (file offset, size, sh_type) of an ELF64 little-endian file."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = data[stroff + h[0] : data.index(b"\0", stroff + h[0])].decode()
        out[name] = (h[4], h[5], h[1])
    return out


def split_section(data: bytes, start: int, size: int) -> list[tuple[int, bytes]]:
    """Cut a .hip_fatbin section at each bundle magic, the way clang-offload-bundler
    walks several bundles: (file offset, bytes up to the next magic or the end)."""
    sec = data[start : start + size]
    hits = sorted(m.start() for m in re.finditer(rb"__CLANG_OFFLOAD_BUNDLE__|CCOB", sec))
    # a magic inside an earlier uncompressed bundle's entries would be a code object
    # byte pattern; real sections have none, and the tests check the counts agree.
    out = []
    for i, h in enumerate(hits):
        piece = sec[h : (hits[i + 1] if i + 1 < len(hits) else len(sec))]
        if piece[:4] == b"CCOB":
            # cut the alignment padding off at the declared total size: clang 19's
            # bundler decodes everything after the header and fails on padding
            version = struct.unpack_from("<H", piece, 4)[0]
            if version == 2:
                piece = piece[: struct.unpack_from("<I", piece, 8)[0]]
            elif version == 3:
                piece = piece[: struct.unpack_from("<Q", piece, 8)[0]]
        out.append((start + h, piece))
    return out


def ccob_v3_decode(piece: bytes, tmpdir: str) -> tuple[bytes, int]:
    """Decode a CCOB version-3 bundle with the zstd command: (bundle bytes, declared
    uncompressed size)."""
    version, method = struct.unpack_from("<HH", piece, 4)
    assert version == 3 and method == 1, (version, method)
    total, usize = struct.unpack_from("<QQ", piece, 8)
    src = os.path.join(tmpdir, "payload.zst")
    with open(src, "wb") as f:
        f.write(piece[32:total])
    dst = os.path.join(tmpdir, "payload")  # to a file: a pipe costs a poll() per 32 KiB
    assert ZSTD is not None, "the zstd command (apt-get install zstd)"
    subprocess.run([ZSTD, "-d", "-q", "-f", src, "-o", dst], check=True, capture_output=True)
    with open(dst, "rb") as f:
        out = f.read()
    os.unlink(dst)
    return out, usize


@dataclass
class RefEntry:
    ident: str
    size: int | None  # None: the bundler listed the entry but could not extract it
    sha: str | None
    target: str | None  # from llvm-readelf, when available
    kernels: frozenset[str] | None


@overload
def reference_bundle(piece: bytes, with_entries: Literal[True] = True) -> list[RefEntry]: ...
@overload
def reference_bundle(piece: bytes, with_entries: Literal[False]) -> list[str]: ...
def reference_bundle(piece: bytes, with_entries: bool = True) -> list[RefEntry] | list[str]:
    """Device entries of one bundle by clang-offload-bundler: ids (list) and, with
    ``with_entries``, each unbundled code object's size, sha256, llvm-readelf target and
    kernel descriptors. CCOB v3 pieces are first decoded with the zstd command."""
    import hashlib

    with tempfile.TemporaryDirectory() as tmp:
        if piece[:4] == b"CCOB" and struct.unpack_from("<H", piece, 4)[0] == 3:
            piece, usize = ccob_v3_decode(piece, tmp)
            assert len(piece) == usize
        inp = os.path.join(tmp, "bundle")
        assert BUNDLER is not None, "clang-offload-bundler (LLVM 19)"
        with open(inp, "wb") as f:
            f.write(piece)
        listed = subprocess.run(
            [BUNDLER, "--list", "--type=o", f"--input={inp}"], check=True, capture_output=True, text=True
        ).stdout.split()
        ids = [i for i in listed if not i.startswith("host-")]
        if not with_entries:
            return ids
        outs = [os.path.join(tmp, f"co{i}") for i in range(len(ids))]
        # --allow-missing-bundles: a bundler older than a processor (clang 19 and
        # gfx950) does not recognise its entry; that entry comes back as None
        subprocess.run(
            [
                BUNDLER,
                "--unbundle",
                "--allow-missing-bundles",
                "--type=o",
                f"--input={inp}",
                "--targets=" + ",".join(ids),
                *(f"--output={o}" for o in outs),
            ],
            check=True,
            capture_output=True,
        )
        os.unlink(inp)

        def entry(ident: str, path: str) -> RefEntry:
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                return RefEntry(ident, None, None, None, None)
            with open(path, "rb") as f:
                co = f.read()
            target = kernels = None
            if READELF:
                target, kernels = readelf_code_object(path)
            os.unlink(path)
            return RefEntry(ident, len(co), hashlib.sha256(co).hexdigest(), target, kernels)

        # llvm-readelf runs are independent: one per core
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            return list(pool.map(entry, ids, outs))


_FEAT = re.compile(r"^(xnack|sramecc)([+-])$")


def readelf_code_object(path: str) -> tuple[str, frozenset[str]]:
    """(target ID, kernel names) of an AMDGPU code object by llvm-readelf: the
    processor and the xnack/sramecc settings it prints for e_flags (a bare feature
    name means "any" and is left out), and the dynamic symbols named ``*.kd`` (the loader
    finds kernels there; archaudit reads .symtab first, so the two tables are compared)."""
    # One run for the header and the symbols, written to a file: read through a pipe, the
    # symbol tables of XLA's code objects cost minutes of poll() calls.
    assert READELF is not None, "llvm-readelf (LLVM 19)"
    with tempfile.TemporaryFile("w+", errors="replace") as listing:
        subprocess.run([READELF, "-h", "-W", "--dyn-syms", path], check=True, stdout=listing, stderr=subprocess.DEVNULL)
        listing.seek(0)
        out = listing.read()
    flags = re.search(r"^\s*Flags:.*$", out, re.M)
    assert flags is not None, "llvm-readelf printed no Flags line"
    words = [w.strip() for w in flags.group(0).split(":", 1)[1].split(",")][1:]
    proc = words[0]
    feats = sorted(w for w in words[1:] if _FEAT.match(w))
    target = ":".join([proc] + feats)
    # symbol rows: Num: Value Size Type Bind Vis Ndx Name
    return target, frozenset(_KD_ROW.findall(out))


_KD_ROW = re.compile(r"^\s*\d+:\s+\S+\s+\S+\s+OBJECT\s+\S+\s+\S+\s+\S+\s+(\S+)\.kd$", re.M)
