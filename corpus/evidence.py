"""Record what NVIDIA's and LLVM's own tools say a corpus wheel carries, library by library.

This is the evidence side of the corpus: it never calls archaudit. For every ELF library of a
wheel it runs ``cuobjdump`` (the default dump, which keeps the ``a``/``f`` suffixes and prints
each PTX's ISA version) and, for AMD libraries, ``clang-offload-bundler --list`` on each
bundle of ``.hip_fatbin``. The summary is written to ``corpus/evidence/<wheel>.txt``, which the
manifest cites. cuobjdump reads only ``.nv_fatbin``/``__nv_relfatbin`` and refuses targets it no
longer supports (``sm_35``); such refusals are recorded as they are.

    python -m corpus.evidence [NAME ...]     # wheels of the manifest, or those named
"""

from __future__ import annotations

import argparse
import collections
import os
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
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


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


def record(wheel: Path, out: Path) -> None:
    """Write the per-library summary of one wheel."""
    lines = [f"# {wheel.name}", f"# cuobjdump {oracle.cuobjdump_version()} default dump (executable image);"
             " clang-offload-bundler --list for .hip_fatbin", ""]
    with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as tmp:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            if info.is_dir() or not _is_library(info.filename):
                continue
            path = os.path.join(tmp, "lib")
            with z.open(info) as src, open(path, "wb") as dst:
                head = src.read(4)
                if head != b"\x7fELF":
                    continue
                dst.write(head)
                while block := src.read(1 << 20):
                    dst.write(block)
            try:
                entries = oracle.dump_entries(path)
                cuda = _summarise_cuda(entries) if entries else ""
            except oracle.CuobjdumpError as err:
                cuda = "cuobjdump error: " + " ".join(err.stderr.replace(path, "<library>").split())[:160]
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
