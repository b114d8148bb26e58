"""Builders shared by the tests of several packages: wheels, zips, hand-built model records,
reference-tool wrappers. Test files import from here (tests/ is on pytest's pythonpath), never
from one another."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import warnings
import zipfile
import zlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import zstandard

import amd_reference as ref
from archaudit import model
from archaudit.claims import parse_claim
from archaudit.cli import main
from archaudit.findings import Finding
from archaudit.gpus.cuda import canonical_cc
from archaudit.judge.audit import Report, judge
from archaudit.judge.policy import Policy
from archaudit.model import CODE_OBJECT, EXECUTABLE, PTX, SASS, Container, Entry, Library, Problem, TargetInventory
from archaudit.read import elf, fatbin, hip, library
from archaudit.read.plan import BYTES_PER_LIBRARY, MAX_LIBRARIES
from archaudit.read.stream import Chunks

TESTS = Path(__file__).resolve().parent
CUDA_BIN = TESTS / "fixtures" / "cuda" / "bin"  # nvcc-built (tests/fixtures/cuda/build.sh)
AMD_BIN = TESTS / "fixtures" / "amd" / "bin"  # clang-built (tests/fixtures/amd/build.sh)
_ELF_HEAD = (CUDA_BIN / "lib_sm80.so").read_bytes()[:64]
_KERN_FATBIN = (CUDA_BIN / "kern.fatbin").read_bytes()  # an sm_80 cubin and a zstd compute_90 PTX
_SASS_AT = 16  # kern.fatbin's sm_80 entry header


# ---- archaudit check in a child process that must write nothing (read/test_hazards.py and its neighbours) ----


def snapshot(*dirs: Path) -> dict:
    out: dict[str, object] = {}
    for d in dirs:
        for p in sorted(d.rglob("*")) if d.exists() else ():
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[str(p)] = (st.st_mode, st.st_size, st.st_mtime_ns)
        out[str(d)] = os.lstat(d).st_mtime_ns if d.exists() else None
    return out


def check(tmp_path: Path, target: Path, *extra: str, timeout: float = 60) -> tuple[int, dict, str]:
    """Run `archaudit check` on target; return (exit code, JSON report, stderr) and assert that
    nothing was written."""
    home, cwd, tmp = tmp_path / "home", tmp_path / "cwd", tmp_path / "tmp"
    for d in (home, cwd, tmp):
        d.mkdir(exist_ok=True)
    watched = (home, cwd, tmp, target.parent)
    before = snapshot(*watched)
    env = dict(os.environ, HOME=str(home), TMPDIR=str(tmp))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "archaudit",
            "check",
            "--no-config",
            "-q",
            "--format",
            "json",
            "--arch",
            "80",
            str(target),
            *extra,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert snapshot(*watched) == before, "check wrote to the filesystem"
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, report, proc.stderr


def findings(report: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for t in report.get("targets", []) for f in t["findings"]]


def assert_finding(report: dict, code: str, words: str) -> None:
    got = findings(report)
    assert any(c == code and words in m for c, m in got), got


def wheel(path: Path, members: list[tuple[str, bytes]], *, symlink: str | None = None, dist_info: bool = True) -> Path:
    """A wheel of these members, and a .dist-info member before them (pip installs no wheel
    without one, and check reads none)."""
    if dist_info and not any(name.split("/", 1)[0].endswith(".dist-info") for name, _ in members):
        members = [("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n"), *members]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = (0o120777 if name == symlink else 0o100644) << 16
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Duplicate name" is the point of one test
                z.writestr(info, data)
    return path


WHEEL_NAME = "demo-1.0-py3-none-linux_x86_64.whl"


# ---- zips built by hand: nested zips, deflate bombs, raw members ----


def inner_zip(members: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members:
            z.writestr(name, data)
    return buf.getvalue()


def zero_bomb(mib: int, head: bytes = _ELF_HEAD) -> tuple[bytes, int, int]:
    """(raw deflate stream, CRC, size) of `head` (an ELF header) followed by zeros and a few
    random bytes per MiB, at about 990:1: under the per-member ratio bound, with a valid CRC.
    Built from one self-contained block repeated, so building it costs one MiB of compression."""
    rand = random.Random(0).randbytes(12)
    block_data = rand + bytes((1 << 20) - len(rand))
    first_data = head + block_data[len(head) :]
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(first_data) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(block_data) + c.flush(zlib.Z_FULL_FLUSH)
    stream = first + block * (mib - 1) + c.flush()
    crc = zlib.crc32(first_data)
    for _ in range(mib - 1):
        crc = zlib.crc32(block_data, crc)
    return stream, crc, mib << 20


DIST_INFO = ("demo-1.0.dist-info/WHEEL", b"\x03\x00", 0, 0)  # an empty member: what makes a zip a wheel


def local_header(name: bytes, crc: int, packed: int, size: int, extra: int = 0) -> bytes:
    """A zip local file header of a deflated member, its name after it (an extra field of
    ``extra`` bytes follows the name, unwritten)."""
    return struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, packed, size, len(name), extra) + name


def central_record(name: bytes, crc: int, packed: int, size: int, offset: int) -> bytes:
    """The central-directory record of a deflated member whose local header is at ``offset``."""
    head = struct.pack(
        "<4s6H3L5H2L",
        b"PK\x01\x02",
        0x031E,
        20,
        0,
        8,
        0,
        0x21,
        crc,
        packed,
        size,
        len(name),
        0,
        0,
        0,
        0,
        0o100644 << 16,
        offset,
    )
    return head + name


def raw_zip(members: list[tuple[str, bytes, int, int]], *, dist_info: bool = True) -> bytes:
    """A zip of already-deflated members: (name, deflate stream, CRC, size), and a .dist-info
    member after them (pip installs no wheel without one, and check reads none)."""
    members = members + [DIST_INFO] if dist_info else members
    out = bytearray()
    central = bytearray()
    for name, stream, crc, size in members:
        raw = name.encode()
        central += central_record(raw, crc, len(stream), size, len(out))
        out += local_header(raw, crc, len(stream), size) + stream
    n = len(members)
    return bytes(out + central + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(central), len(out), 0))


# ---- targets read in process (read/test_plan.py, read/test_artifacts.py) ----


def target_problems(inv: TargetInventory) -> list[tuple[str, str]]:
    return [(p.code, p.message) for p in inv.problems]


def target_paths(inv: TargetInventory) -> list[str]:
    return [lib.path for lib in inv.libraries]


def read_whole(inv: TargetInventory) -> list[str]:
    """The paths of the target's libraries, each asserted read to its end: its device code
    found (the fixtures carry some) and no problem of its own."""
    for lib in inv.libraries:
        assert lib.containers and not lib.problems, (lib.path, lib.problems)
        assert all(e.decoded for c in lib.containers for e in c.entries), lib.path
    return sorted(target_paths(inv))


def too_many_libraries(path: Path) -> tuple[str, str]:
    """The problem of a wheel at `path` with more libraries than its bytes bring (read/plan.py's
    bound, written out here as the user reads it)."""
    size = os.path.getsize(path)
    return (
        "E003",
        f"more than {MAX_LIBRARIES} members are libraries or device code: a wheel may hold "
        f"{MAX_LIBRARIES}, and beyond that one per {BYTES_PER_LIBRARY} bytes of its own size ({size}): "
        f"none is read",
    )


def tree(root: Path) -> list[tuple[str, bool, int]]:
    """Every name under root with whether it is a link and its size (links not followed)."""
    return sorted((str(p.relative_to(root)), p.is_symlink(), p.lstat().st_size) for p in root.rglob("*"))


# ---- bare zstd frames, found and decoded by zstandard (the tests' own reference) ----

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_frames(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, decoded bytes) of every zstd frame that decodes whole, found by bytes.find and
    decoded by zstandard: the tests' own reference, independent of archaudit's reader."""
    out = []
    at = data.find(ZSTD_MAGIC)
    while at >= 0:
        decoded = decode_zstd_frame(data, at)
        if decoded is not None:
            out.append((at, decoded))
        at = data.find(ZSTD_MAGIC, at + 1)
    return out


def decode_zstd_frame(data: bytes, at: int) -> bytes | None:
    """The one frame starting at `at`, decoded to its end by zstandard; None where it does not decode."""
    d = zstandard.ZstdDecompressor().decompressobj()
    try:
        out = d.decompress(memoryview(data)[at : at + (64 << 20)])
    except zstandard.ZstdError:
        return None
    return out if d.eof else None


def is_cuda_elf(decoded: bytes) -> bool:
    return decoded[:4] == b"\x7fELF" and struct.unpack_from("<H", decoded, 18)[0] == elf.EM_CUDA


# ---- model records built by hand, and a Report over them (the rule tests) ----


def sass(target: str, *kernels: str, toolkit: tuple[int, int] | None = (13, 0)) -> Entry:
    return Entry("nvidia", SASS, target, (1, 8), kernels=kernels or ("_Z1kv",), toolkit=toolkit, decoded=True)


def ptx(target: str, *kernels: str, isa: tuple[int, int] = (9, 0), text: str | None = None) -> Entry:
    return Entry(
        "nvidia",
        PTX,
        target,
        isa,
        kernels=kernels or ("_Z1kv",),
        decoded=True,
        ptx_target=text if text is not None else target.replace("compute_", "sm_"),
    )


def amd(target: str) -> Entry:
    return Entry("amd", CODE_OBJECT, target, kernels=("k",), decoded=True)


def box(*entries: Entry, role: str = EXECUTABLE) -> Container:
    vendor = "amd" if entries and entries[0].vendor == "amd" else "nvidia"
    return Container(vendor, role, ".nv_fatbin" if vendor == "nvidia" else ".hip_fatbin", 0, 0, entries)  # type: ignore[arg-type]


def lib(
    *containers: Container,
    needed: tuple[str, ...] = ("libcudart.so.13",),
    path: str = "libx.so",
    problems: tuple[Problem, ...] = (),
    claims: tuple[str, ...] = (),
    statements: tuple[str, ...] = (),
) -> Library:
    return Library(
        path, 1000, "elf", containers, needed, embedded_claims=claims, problems=problems, statements=statements
    )


def report(*libs: Library, arch: str | None = "80;90", **policy: object) -> Report:
    claim = parse_claim(arch, "--arch") if arch is not None else None
    inv = TargetInventory("t.whl", "wheel", libs)
    pol = Policy(**policy)  # type: ignore[arg-type]
    return Report((judge(inv, claim, pol),), pol)


def found(rep: Report, code: str) -> list[Finding]:
    return [f for f in rep.findings if f.code == code]


def codes(rep: Report) -> list[str]:
    return [f.code for f in rep.findings]


CLEAN = lib(box(sass("sm_80"), sass("sm_90"), ptx("compute_90")))


KERN = box(sass("sm_80", "_Z4axpyv"), sass("sm_90", "_Z4axpyv"), ptx("compute_90", "_Z4axpyv"))

# A relocatable sm_90 cubin calling a function it does not carry: cuModuleLoadData refuses it
# alone (predict: not-loadable-alone), so it covers its GPU only where its library links device code.
UNLINKED = Entry(
    "nvidia", SASS, "sm_90", (1, 8), kernels=("_Z2opv",), toolkit=(13, 0), decoded=True, unresolved=("user_op",)
)

KEPLER_RUNTIME = ("libcudart.so.11.0",)  # Kepler (3.5): its last driver, R470, supports CUDA 11.4


def unread_sass(target: str) -> Entry:
    """A cubin whose kernels could not be read (its symbol table is damaged or stripped)."""
    return Entry("nvidia", SASS, target, (1, 8), kernels=None, toolkit=(13, 0))


def whole(f: Finding) -> tuple[str, str, str, str, dict[str, object]]:
    """A finding as a tuple of everything it says, to compare findings whole."""
    return f.code, f.severity, f.subject, f.message, dict(f.data)


# ---- kernel names: data/names.json read directly (judge/test_names.py, judge/test_facts_sets.py) ----

NAME_TABLE = json.loads(resources.files("archaudit").joinpath("data", "names.json").read_text("utf-8"))


def reference_named(kernel: str) -> tuple[tuple[int, int], ...]:
    """named_architectures without its substring shortcut: every row of data/names.json, in order,
    case-insensitive, on every name."""
    kernel = re.sub(NAME_TABLE["cccl_namespace"], "_", kernel, flags=re.I)  # the TU's list
    out: list[tuple[int, int]] = []
    for row in NAME_TABLE["conventions"].values():
        for m in re.finditer(row["pattern"], kernel, re.I):
            if "ccs" in row:
                out.extend(tuple(int(p) for p in c.split(".")) for c in row["ccs"])  # type: ignore[misc]
                continue
            n = int(m.group(1))
            if n >= 20:
                out.append(canonical_cc((n // 10, n % 10)))
    return tuple(dict.fromkeys(out))


# ---- fatbin entries: kern.fatbin's sm_80 header carrying another cubin ----

CUBIN = (CUDA_BIN / "kern_sm80.cubin").read_bytes()


def sass_entry(cubin: bytes, arch: int, suffix_flag: int = 0, zstd: bool = False) -> tuple[fatbin.EntryHeader, bytes]:
    """kern.fatbin's sm_80 entry header carrying another cubin (zstd-compressed if asked)."""
    payload = zstandard.ZstdCompressor().compress(cubin) if zstd else cubin
    data = bytearray(_KERN_FATBIN[: _SASS_AT + 64])
    struct.pack_into("<I", data, _SASS_AT + 8, len(payload))
    struct.pack_into("<I", data, _SASS_AT + 16, len(payload) if zstd else 0)
    struct.pack_into("<I", data, _SASS_AT + 28, arch)
    flags = struct.unpack_from("<Q", data, _SASS_AT + 40)[0] | suffix_flag | (fatbin.FLAG_ZSTD if zstd else 0)
    struct.pack_into("<Q", data, _SASS_AT + 40, flags)
    struct.pack_into("<Q", data, _SASS_AT + 56, len(cubin) if zstd else 0)
    return fatbin.parse_entry_header(bytes(data), _SASS_AT, 64 + len(payload), _SASS_AT), payload


# ---- binutils' readelf as the reference for the dynamic section ----

READELF = shutil.which("readelf")


def readelf_dynamic(path: Path) -> dict[str, list[str]]:
    assert READELF is not None, "binutils readelf (apt-get install binutils)"
    out = subprocess.run([READELF, "-d", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    found: dict[str, list[str]] = {"NEEDED": [], "RUNPATH": [], "RPATH": [], "SONAME": []}
    for tag, value in re.findall(r"\((NEEDED|RUNPATH|RPATH|SONAME)\)\s+[^[]*\[(.*)\]", out):
        found[tag] += value.split(":") if tag in ("RUNPATH", "RPATH") else [value]
    return found


# ---- HIP offload bundles out of the clang-built fixtures, and CCOB wrappers around them ----


def parse_section(path: Path) -> tuple[bytes, list[model.Container]]:
    data = path.read_bytes()
    off, size, _ = ref.elf_sections(data)[".hip_fatbin"]
    out = []
    pos = off
    end = off + size
    mv = memoryview(data)
    while pos < end:
        m = re.compile(b"|".join(re.escape(x) for x in hip.MAGICS)).search(data, pos, end)
        if not m:
            break
        n = hip.extent(mv[m.start() : m.start() + hip.MAX_HEADER])
        assert n is not None and m.start() + n <= end
        out.append(hip.parse(bytes(mv[m.start() : m.start() + n]), m.start(), ".hip_fatbin"))
        pos = m.start() + n
    return data, out


def first_bundle(path: Path) -> bytes:
    data, cs = parse_section(path)
    c = cs[0]
    return data[c.offset : c.offset + c.size]


def ccob(
    bundle: bytes,
    version: int,
    method: str,
    *,
    usize: int | None = None,
    payload: bytes | None = None,
    digest: int | None = None,
) -> bytes:
    if payload is None:
        payload = zlib.compress(bundle, 9) if method == "zlib" else zstandard.ZstdCompressor().compress(bundle)
    m = {"zlib": 0, "zstd": 1}[method]
    usize = len(bundle) if usize is None else usize
    h = int.from_bytes(hashlib.md5(bundle).digest()[:8], "little") if digest is None else digest
    if version == 1:
        hdr = struct.pack("<4sHHIQ", b"CCOB", 1, m, usize, h)
    elif version == 2:
        hdr = struct.pack("<4sHHIIQ", b"CCOB", 2, m, 24 + len(payload), usize, h)
    else:
        hdr = struct.pack("<4sHHQQQ", b"CCOB", 3, m, 32 + len(payload), usize, h)
    return hdr + payload


PLAIN = first_bundle(AMD_BIN / "hip_multi.so") if (AMD_BIN / "hip_multi.so").exists() else b""


# ---- wheels for the index tests ----


def make_wheel(dest: Path, project: str, version: str, libs: dict[str, Path], padding: int = 0) -> Path:
    """A wheel holding real nvcc-built libraries, and `padding` bytes of Python source (members
    a range reader need not fetch)."""
    path = dest / f"{project}-{version}-py3-none-manylinux_2_28_x86_64.whl"
    rnd = random.Random(version)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{project}/__init__.py", "")
        for member, src in libs.items():
            z.write(src, member)
        for i in range(padding // 330_000):  # hex digits: about 330 KB each once deflated
            z.writestr(f"{project}/data/m{i:04}.py", f"TEXT = {rnd.randbytes(300_000).hex()!r}\n")
        z.writestr(
            f"{project}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
        )
        z.writestr(f"{project}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    return path


DEMO_LIB = "demo/lib/libkern.so"  # where make_wheel puts a library in the index tests


def demo_corpus(d: Path) -> Path:
    """The index tests' wheels in d: demo 1.0 (sm_75..sm_120 + PTX), 2.0 (sm_80 only: Turing lost),
    3.0 (truncated: unreadable), and the example wheel."""
    from archaudit.core import example_wheel

    make_wheel(d, "demo", "1.0", {DEMO_LIB: CUDA_BIN / "lib_multi.so"}, padding=2_000_000)
    make_wheel(d, "demo", "2.0", {DEMO_LIB: CUDA_BIN / "lib_sm80.so"}, padding=2_000_000)
    good = make_wheel(d, "demo", "3.0", {DEMO_LIB: CUDA_BIN / "lib_sm80.so"})
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])
    ex = Path(example_wheel())
    (d / ex.name).write_bytes(ex.read_bytes())
    return d


def index_db(db: Path, *args: str) -> int:
    """`archaudit index ARGS --db db`, quiet, its summary discarded: the exit code."""
    return main(["index", *args, "--db", str(db), "-q", "-o", os.devnull])


def db_rows(db: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple]:
    """The rows a query of an index database answers."""
    import sqlite3

    with sqlite3.connect(db) as c:
        return list(c.execute(sql, params))


def lossy_release(path: Path) -> Path:
    """The example wheel whose libkernels.so is rebuilt from libshim.so's bytes (sm_80 only): the
    next release of gpu_example that lost sm_90 and compute_90 (the diff tests' pair)."""
    from archaudit.core import example_wheel

    with zipfile.ZipFile(example_wheel()) as src, zipfile.ZipFile(path, "w") as out:
        shim = src.read("gpu_example/libshim.so")
        for info in src.infolist():
            out.writestr(info.filename, shim if info.filename == "gpu_example/libkernels.so" else src.read(info))
    return path


# ---- smoke without a GPU ----

# Why there is no GPU, in the driver's words: no driver at all, or a driver that sees no device.
NO_GPU_REASONS = (
    "no CUDA driver: libcuda.so.1: cannot open shared object file",
    "cuInit failed: CUDA_ERROR_NO_DEVICE (100)",
)


def no_gpu_reason(text: str) -> bool:
    return any(r in text for r in NO_GPU_REASONS)


SMOKE_WHEELS = TESTS / "fixtures" / "smoke" / "wheels"  # gcc-built (tests/fixtures/smoke/build.sh)
SRC = str(TESTS.parent / "src")


def smoke_wheel(name: str) -> str:
    path = SMOKE_WHEELS / f"{name}-1.0-py3-none-linux_x86_64.whl"
    assert path.exists(), f"missing fixture {path}; run tests/fixtures/smoke/build.sh"
    return str(path)


def smoke_cli(*args: str, tmpdir: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m archaudit.smoke ARGS` with its scratch directories under tmpdir."""
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=SRC)
    return subprocess.run(
        [sys.executable, "-m", "archaudit.smoke", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


# ---- device code with one fact changed, for the reader tests (tests/read/) -----------------------

PLAIN_TWO = first_bundle(AMD_BIN / "hip_two_plain.so")  # gfx1102 and gfx1200, uncompressed


def run_check(path, tmp_path, *claim: str) -> tuple[int, list[tuple[str, str]]]:
    out = tmp_path / "report.json"
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", str(out), str(path), *claim])
    doc = json.loads(out.read_text(encoding="utf-8"))
    return rc, [(f["code"], f["message"]) for t in doc["targets"] for f in t["findings"]]


def read(name: str, data: bytes, **kw: int) -> Library:
    return library.library_from_bytes(name, data, **kw)  # type: ignore[arg-type]


def problems(lib: Library) -> list[tuple[str, str, int | None]]:
    return [(p.code, p.message, p.offset) for p in lib.problems]


def patched(data: bytes, at: int, fmt: str, change: Callable[[int], int]) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, change(struct.unpack_from(fmt, out, at)[0]))
    return bytes(out)


KERN_FATBIN = (CUDA_BIN / "kern.fatbin").read_bytes()  # sm_80 cubin, zstd compute_90 PTX


def stream_library(name: str, size: int, *chunks: bytes, decode: bool = True) -> Library:
    return library.scan_stream(name, size, lambda: iter(chunks), decode=decode)


def elf_sections(data: bytes) -> tuple[int, dict[str, tuple[int, int, int, int]]]:
    """(section table offset, name -> (index, sh_offset, sh_size, sh_addralign)), read with struct
    from the ELF header as the gABI lays it out (not with archaudit.read.elf)."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    rows = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]
    names = rows[shstrndx][4]
    out = {}
    for i, r in enumerate(rows):
        end = data.index(b"\0", names + r[0])
        out[data[names + r[0] : end].decode()] = (i, r[4], r[5], r[8])
    return shoff, out


def with_section(
    data: bytes,
    name: str,
    *,
    offset: int | None = None,
    size: int | None = None,
    addralign: int | None = None,
    zero_after: int = 0,
) -> bytes:
    """The library with one section header field changed (and, with zero_after, that many bytes
    after the section's old end set to zero: the next section's, which no reader here judges)."""
    shoff, secs = elf_sections(data)
    i, off, sz, _ = secs[name]
    out = bytearray(data)
    out[off + sz : off + sz + zero_after] = bytes(zero_after)
    for field_at, value in ((24, offset), (32, size), (48, addralign)):
        if value is not None:
            struct.pack_into("<Q", out, shoff + 64 * i + field_at, value)
    return bytes(out)


LIB_SM80 = (CUDA_BIN / "lib_sm80.so").read_bytes()  # .nv_fatbin: a device-link and an executable container
FATBIN_AT, FATBIN_SIZE = elf_sections(LIB_SM80)[1][".nv_fatbin"][1:3]


def containers(lib: Library) -> list[tuple[str, str, int, int]]:
    return [(c.section, c.role, c.offset, c.size) for c in lib.containers]


TWO_PLAIN = (AMD_BIN / "hip_two_plain.so").read_bytes()  # .hip_fatbin at 0x3000: bundles at +0 and +0x5000

READERS = CUDA_BIN.parent.parent / "readers" / "bin"


def cut_at(data: bytes, *cuts: int) -> Chunks:
    """A chunk factory splitting `data` at these offsets (as a zip member's inflater might)."""
    edges = [0, *sorted(set(cuts)), len(data)]
    return lambda: iter([data[a:b] for a, b in zip(edges, edges[1:]) if b > a])


CLAIM = b"-gencode;arch=compute_80,code=sm_80"


def with_strings(data: bytes, *placed: tuple[int, bytes]) -> bytes:
    out = bytearray(data)
    for at, blob in placed:
        out[at : at + len(blob)] = blob
    return bytes(out)


# lib_sm80.so's segments: 0 R (0-0xa00), 1 R+X (0x1000-), 2 R (0x2000-0x3670: .nv_fatbin, then .rodata and
# .eh_frame, whose bytes no reader here judges), 3 R+W (0x3dc0-)
RODATA, TEXT, DATA = 13300, 4096 + 200, 16241
