"""trace: which kernels a real workload launched on this GPU, from which container, against check.

A child runs a workload (the torch sweep, the torch and JAX model steps, or the user's own
command, `--run`) under CUPTI's launch tracer (cupti.py). What it writes is raw: per kernel and
result, how many launches; per module the driver loaded, the sha256 and size of the image.
Everything below runs in archaudit's process and judges those records against check's
inventory of the files the traced processes mapped:

- a loaded image is the cubin entry whose decoded bytes have its sha256 (read here, from the
  library file): the container the launch came from, identified by its bytes; an image no
  entry has (the JIT's output) is tied to the containers whose code defines the kernel's name;
- each launched kernel must be predicted runnable on this GPU (gpus.predict) from that
  container, and from the entry the driver chose;
- a failed launch whose result is a code-selection error (209, 98, 500, 218, 222, ...) agrees
  with check only where check predicted that container cannot run here; otherwise it is a
  false pass of check, named with kernel and container. Any other failed launch is a FAIL too:
  a failed launch is never passed;
- per library, which containers served this GPU, and that none without code for it did.

What a trace cannot prove: other GPUs, other shapes and dtypes, code paths the workload did not
take (docs/smoke.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..gpus import predict as P
from ..model import CUBIN, SASS, Container, Entry, Library
from . import child
from .report import FAIL, PASS, SKIP, Row

NAME = "trace"
MAX_RECORD_BYTES = 64 << 20  # one process's records file; a larger one is refused, not read
SHOWN = 5
# Launch results that are a code-selection answer (CUresult, and cudaError_t where they differ):
# no image for this GPU, an invalid device function, a symbol not found, PTX the JIT refuses.
SELECTION_ERRORS = {
    98: "cudaErrorInvalidDeviceFunction",
    200: "CUDA_ERROR_INVALID_IMAGE",
    209: "no kernel image for this GPU (209)",
    218: "invalid PTX (218)",
    222: "unsupported PTX version (222)",
    223: "PTX JIT disabled (223)",
    300: "CUDA_ERROR_INVALID_SOURCE",
    500: "not found (500)",
}
SWEEP = (
    "matmul-fp32",
    "matmul-tf32",
    "matmul-fp16",
    "matmul-bf16",
    "matmul-fp8",
    "conv",
    "sdpa",
    "fft",
    "sparse",
    "sparse-24",
)


# ---------------------------------------------------------------------------------------
# the raw records
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Launch:
    """Launches of one kernel with one result, summed over the traced processes."""

    kernel: str
    code: int
    count: int
    layer: str  # "driver" | "runtime"
    modules: tuple[str, ...]  # sha256 of the images loaded in its context that define the kernel


@dataclass(frozen=True)
class Module:
    sha256: str
    size: int


@dataclass(frozen=True)
class AsyncError:
    api: str
    code: int
    after: str  # the kernel launched last in that context


@dataclass(frozen=True)
class Trace:
    """What the tracers of every traced process wrote, read and checked for shape here."""

    launches: tuple[Launch, ...]
    modules: tuple[Module, ...]
    async_errors: tuple[AsyncError, ...]
    mapped: tuple[str, ...]
    processes: int
    problems: tuple[str, ...]  # files that are not records, tracers that did not start
    dropped: int = 0
    cupti: str = ""


def _launches(raw: Any) -> list[Launch]:
    out = []
    for r in raw if isinstance(raw, list) else ():
        if not isinstance(r, dict):
            raise ValueError("a launch record is not an object")
        mods = r.get("modules") or []
        out.append(
            Launch(
                str(r["kernel"]),
                int(r["code"]),
                int(r["count"]),
                str(r.get("layer", "driver")),
                tuple(str(m) for m in mods),
            )
        )
    return out


def parse_records(raw: dict[str, Any]) -> tuple[list[Launch], list[Module], list[AsyncError], list[str]]:
    """One process's records; raises ValueError (KeyError, TypeError) on anything else."""
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    mods = [Module(str(m["sha256"]), int(m["size"])) for m in raw.get("modules") or ()]
    errs = [AsyncError(str(e["api"]), int(e["code"]), str(e.get("after", ""))) for e in raw.get("async_errors") or ()]
    mapped = [str(p) for p in raw.get("mapped") or () if isinstance(p, str)]
    return _launches(raw.get("launches")), mods, errs, mapped


def read_trace(directory: str) -> Trace:
    """Every <pid>.json (records) and <pid>.error (a tracer that did not start) of the directory."""
    launches: Counter[tuple[str, int, str, tuple[str, ...]]] = Counter()
    modules: dict[str, Module] = {}
    errors: list[AsyncError] = []
    mapped: list[str] = []
    problems: list[str] = []
    processes = dropped = 0
    cupti = ""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(".error"):
            with open(path, errors="replace") as f:
                problems.append(f"process {name[:-6]}: the tracer did not start: {f.read(2000)}")
            continue
        if not name.endswith(".json"):
            continue
        try:
            if os.path.getsize(path) > MAX_RECORD_BYTES:
                raise ValueError(f"{os.path.getsize(path)} bytes, more than the {MAX_RECORD_BYTES}-byte bound")
            with open(path) as f:
                raw = json.load(f)
            ls, ms, es, mp = parse_records(raw)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"process {name[:-5]}: its records cannot be read: {type(exc).__name__}: {exc}")
            continue
        processes += 1
        dropped += int(raw.get("dropped") or 0)
        cupti = cupti or str(raw.get("cupti") or "")
        problems += [f"process {name[:-5]}: the tracer's callback raised {e}" for e in raw.get("callback_errors") or ()]
        for launch in ls:
            launches[(launch.kernel, launch.code, launch.layer, launch.modules)] += launch.count
        for m in ms:
            modules[m.sha256] = m
        errors += es
        mapped += [p for p in mp if p not in mapped]
    return Trace(
        tuple(Launch(k, c, n, layer, mods) for (k, c, layer, mods), n in sorted(launches.items())),
        tuple(modules.values()),
        tuple(errors),
        tuple(mapped),
        processes,
        tuple(problems),
        dropped,
        cupti,
    )


# ---------------------------------------------------------------------------------------
# check's inventory of the mapped files
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """One container of one scanned library, with the entry the driver loaded when known."""

    library: int  # index into the inventory's libraries
    container: int
    entry: int | None  # the entry whose bytes the loaded image has; None when tied by name


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAX_LOOSE_FRAMES = 4096  # zstd frames of the loaded images' sizes decoded, over all mapped files


CHUNK = 16 << 20  # bytes of a file read at once while looking for zstd frames


def loose_cubins(path: str, sizes: set[int], budget: int) -> list[tuple[int, str]]:
    """(offset, sha256) of the bare zstd frames of a file (no fatbin container around them: cuBLASLt
    13.1 keeps cubins so in .ldata) that decode to a CUDA ELF of one of `sizes`; read CHUNK bytes at a
    time, at most `budget` frames decoded, each bounded by its declared size."""
    import zstandard

    out: list[tuple[int, str]] = []
    if not sizes:
        return out
    dctx = zstandard.ZstdDecompressor()
    with open(path, "rb") as f:
        base = 0
        while budget > 0:
            f.seek(base)
            chunk = f.read(CHUNK + 17)  # a frame header (at most 18 bytes) across the boundary is seen whole
            at = chunk.find(ZSTD_MAGIC)
            while 0 <= at < CHUNK and budget > 0:
                try:
                    size = zstandard.get_frame_parameters(chunk[at : at + 18]).content_size
                except zstandard.ZstdError:
                    size = -1
                if size in sizes:
                    budget -= 1
                    f.seek(base + at)
                    try:
                        data = dctx.decompressobj().decompress(f.read(size + (size >> 3) + 4096))
                    except zstandard.ZstdError:
                        data = b""
                    if len(data) == size and data[:4] == b"\x7fELF":
                        out.append((base + at, hashlib.sha256(data).hexdigest()))
                at = chunk.find(ZSTD_MAGIC, at + 4)
            if len(chunk) <= CHUNK:
                break
            base += CHUNK
    return out


@dataclass
class Inventory:
    """check's containers of the libraries the traced processes mapped, and two ways to find them."""

    libraries: list[tuple[str, Library]]  # (display name, library)
    by_hash: dict[str, list[Source]] = field(default_factory=dict)  # the same bytes may recur in containers
    by_kernel: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    loose: dict[str, tuple[str, int]] = field(default_factory=dict)  # sha256 -> (file, offset): not check's

    def index_loose(self, paths: Sequence[str], modules: Sequence[Module]) -> list[str]:
        """The loaded images no container holds, looked for among the mapped files' bare zstd
        frames: device code check does not read, which a launch can come from all the same."""
        unmatched = {m.sha256: m.size for m in modules if m.sha256 not in self.by_hash}
        sizes = set(unmatched.values())
        budget = MAX_LOOSE_FRAMES
        problems = []
        for li, path in enumerate(paths):
            try:
                found = loose_cubins(path, sizes, budget)
            except (OSError, ValueError) as exc:
                problems.append(f"{self.libraries[li][0]}: its bytes outside containers could not be read: {exc}")
                continue
            budget -= len(found)
            for offset, digest in found:
                if digest in unmatched:
                    self.loose.setdefault(digest, (self.libraries[li][0], offset))
        return problems

    def index_kernels(self) -> None:
        for li, (_, lib) in enumerate(self.libraries):
            for ci, c in enumerate(lib.containers):
                if c.vendor != "nvidia":
                    continue
                for k in {k for e in c.entries for k in (e.kernels or ())}:
                    self.by_kernel.setdefault(k, []).append((li, ci))

    def index_hashes(self, paths: Sequence[str], sizes: set[int]) -> list[str]:
        """sha256 of every cubin entry whose decoded size is that of a loaded image (paths[i] is the
        file of libraries[i]); returns what could not be read."""
        from ..read import fatbin

        problems = []
        for li, (_, lib) in enumerate(self.libraries):
            wanted = [
                (ci, ei, e, c.offset + c.size - e.offset, c.role == CUBIN)
                for ci, c in enumerate(lib.containers)
                if c.vendor == "nvidia"
                for ei, e in enumerate(c.entries)
                if e.kind == SASS and e.size in sizes
            ]
            if not wanted:
                continue
            try:
                with open(paths[li], "rb") as f:
                    for ci, ei, e, room, whole in wanted:
                        f.seek(e.offset)
                        if whole and e.compression == "zstd":  # a whole cubin as a bare zstd frame: decoded
                            data = bytes(
                                fatbin.decode_frame(f.read(e.stored_size), e.size, e.offset, fatbin.DEFAULT_MAX_PAYLOAD)
                            )
                            self.by_hash.setdefault(hashlib.sha256(data).hexdigest(), []).append(Source(li, ci, ei))
                            continue
                        if whole:  # a whole cubin outside any container: its bytes are the image loaded
                            data = f.read(e.size)
                            self.by_hash.setdefault(hashlib.sha256(data).hexdigest(), []).append(Source(li, ci, ei))
                            continue
                        head = f.read(fatbin.ENTRY_HEADER.size)
                        eh = fatbin.parse_entry_header(head, 0, room, e.offset)
                        f.seek(e.offset + eh.header_size)
                        data = fatbin.decode_payload(eh, f.read(eh.payload_size), e.offset)
                        self.by_hash.setdefault(hashlib.sha256(data).hexdigest(), []).append(Source(li, ci, ei))
            except (OSError, fatbin.FatbinError) as exc:
                problems.append(f"{self.libraries[li][0]}: its cubins could not be hashed: {exc}")
        return problems


# ---------------------------------------------------------------------------------------
# judging
# ---------------------------------------------------------------------------------------
@dataclass
class _Use:
    """What one library's containers did on the GPU."""

    launches: int = 0
    kernels: set[str] = field(default_factory=set)
    containers: dict[int, str] = field(default_factory=dict)  # container -> how it served ("sm_90a SASS")
    per_container: Counter[int] = field(default_factory=Counter)  # container -> launches
    by_name: int = 0  # launches tied to their container by the kernel's name only
    shared: int = 0  # launches of a kernel more than one container could have served (the first credited)


def _label(lib: Library, ci: int) -> str:
    c = lib.containers[ci]
    return f"container {ci} ({c.section or c.role} @0x{c.offset:x})"


def _predict(c: Container, gpu: P.Gpu, kernel: str = "") -> P.Prediction:
    """check's prediction for the container, narrowed to one kernel: where the entry the driver picks
    is known not to define the kernel (a kernel compiled out of that PTX or cubin), a launch of it
    finds no symbol there (500; the runtime may say 98), however well the container loads."""
    pred = P.predict(c, gpu)
    e = pred.entry
    if kernel and _runs(pred) and e is not None and e.kernels is not None and kernel not in e.kernels:
        kind = "SASS" if e.kind == SASS else "PTX"
        return P.Prediction(
            P.Outcome.NONE,
            e,
            f"the driver picks its {e.target} {kind} on GPU "
            f"{gpu.cc[0]}.{gpu.cc[1]}, which does not define {kernel} (defined in "
            f"{', '.join(sorted({x.target for x in c.entries if kernel in (x.kernels or ())}))} "
            f"only): its launch finds no symbol",
            frozenset({P.NOT_FOUND, 98}),
        )
    return pred


def _how(pred: P.Prediction) -> str:
    if pred.entry is None:
        return "no code for this GPU"
    kind = "SASS" if pred.entry.kind == SASS else "PTX (JIT)"
    return f"{pred.entry.target} {kind}"


def _runs(pred: P.Prediction) -> bool:
    return pred.outcome in (P.Outcome.NATIVE, P.Outcome.JIT)


class Judge:
    """The launches of a trace against check's predictions for one GPU."""

    def __init__(self, inv: Inventory, gpu: dict[str, Any], cuda: tuple[int, int], jit: bool = True):
        self.inv = inv
        self.gpu = gpu
        cc = tuple(int(p) for p in str(gpu["cc"]).split("."))
        self.target = P.Gpu(cc, cuda, jit)  # type: ignore[arg-type]
        self.where = f"GPU{gpu['ordinal']} {gpu['name']} ({gpu['sm']})"
        self.rows: list[Row] = []
        self.uses: dict[int, _Use] = {}
        self.outside: Counter[str] = Counter()
        self.unread: dict[str, Counter[tuple[str, int]]] = {}  # file -> (kernel, frame offset) -> launches

    def sources(self, launch: Launch) -> tuple[list[Source], str]:
        """The containers a launch came from, and how they were found ("bytes" or "name")."""
        got = [s for m in launch.modules for s in self.inv.by_hash.get(m, ())]
        if got:
            return got, "bytes"
        return [Source(li, ci, None) for li, ci in self.inv.by_kernel.get(launch.kernel, ())], "name"

    def launched(self, launch: Launch) -> None:
        """A successful launch: its container must be predicted to run here, from the entry the driver loaded."""
        found, how = self.sources(launch)
        if not found:
            loose = [self.inv.loose[m] for m in launch.modules if m in self.inv.loose]
            if loose:
                self.unread.setdefault(loose[0][0], Counter())[(launch.kernel, loose[0][1])] += launch.count
            else:
                self.outside[launch.kernel] += launch.count
            return
        preds = [
            (s, _predict(self.inv.libraries[s.library][1].containers[s.container], self.target, launch.kernel))
            for s in found
        ]
        running = [(s, p) for s, p in preds if _runs(p)]
        if not running:
            s, p = preds[0]
            name, lib = self.inv.libraries[s.library]
            self.rows.append(
                Row(
                    NAME,
                    f"{name} {_label(lib, s.container)}",
                    FAIL,
                    f"{launch.kernel} ran {launch.count} time(s) on {self.where} from code check "
                    f"predicts cannot run there ({p.reason}; found by its {how})",
                    details=(("code", launch.code), ("kernel", launch.kernel), ("launches", launch.count)),
                )
            )
            return
        # Several sources: the kernel's name in several containers, or the loaded bytes in several. One
        # is credited: one whose predicted entry is the one loaded, else the first (a FAIL says so).
        agree = [(s, p) for s, p in running if s.entry is None or self._entry(s) is p.entry]
        s, p = (agree or running)[0]
        name, lib = self.inv.libraries[s.library]
        loaded = self._entry(s)
        if loaded is not None and loaded is not p.entry:
            self.rows.append(
                Row(
                    NAME,
                    f"{name} {_label(lib, s.container)}",
                    FAIL,
                    f"{launch.kernel}: the driver loaded its {loaded.target} cubin on {self.where}, "
                    f"check predicted {_how(p)}",
                    details=(("kernel", launch.kernel), ("launches", launch.count)),
                )
            )
        use = self.uses.setdefault(s.library, _Use())
        use.launches += launch.count
        use.kernels.add(launch.kernel)
        use.containers[s.container] = _how(p) if loaded is None or loaded is p.entry else f"{loaded.target} SASS"
        use.per_container[s.container] += launch.count
        if how == "name":
            use.by_name += launch.count
        if len({(x.library, x.container) for x, _ in running}) > 1:
            use.shared += launch.count

    def _entry(self, s: Source) -> Entry | None:
        """The entry whose bytes the driver loaded; None when the source was found by name."""
        return None if s.entry is None else self.inv.libraries[s.library][1].containers[s.container].entries[s.entry]

    def failed(self, launch: Launch) -> None:
        """A failed launch: agreeing with check only where check predicted that its code cannot run here."""
        found, _ = self.sources(launch)
        what = SELECTION_ERRORS.get(launch.code, f"error {launch.code}")
        facts = (("code", launch.code), ("kernel", launch.kernel), ("launches", launch.count), ("layer", launch.layer))
        if launch.code not in SELECTION_ERRORS:
            self.rows.append(
                Row(
                    NAME,
                    launch.kernel,
                    FAIL,
                    f"{launch.count} launch(es) of {launch.kernel} on "
                    f"{self.where} failed with {what}: not a code-selection error, so check does not "
                    f"speak to it, but a failed launch is never passed",
                    details=facts,
                )
            )
            return
        if not found:
            self.rows.append(
                Row(
                    NAME,
                    launch.kernel,
                    FAIL,
                    f"{launch.count} launch(es) of {launch.kernel} on "
                    f"{self.where} failed with {what}, and no container of the mapped files defines "
                    f"that kernel: check could not have predicted it",
                    details=facts,
                )
            )
            return
        preds = [
            (s, _predict(self.inv.libraries[s.library][1].containers[s.container], self.target, launch.kernel))
            for s in found
        ]
        where = "; ".join(
            f"{self.inv.libraries[s.library][0]} {_label(self.inv.libraries[s.library][1], s.container)}"
            f" predicted {p.outcome.value} ({p.reason})"
            for s, p in preds[:SHOWN]
        )
        wrong = [(s, p) for s, p in preds if _runs(p)]
        subject = f"{self.inv.libraries[preds[0][0].library][0]}: {launch.kernel}"
        if wrong:
            self.rows.append(
                Row(
                    NAME,
                    subject,
                    FAIL,
                    f"a false pass of check: {launch.count} launch(es) of "
                    f"{launch.kernel} on {self.where} failed with {what}, but check predicted it runs "
                    f"there: {where}",
                    details=facts,
                )
            )
        else:
            self.rows.append(
                Row(
                    NAME,
                    subject,
                    PASS,
                    f"{launch.count} launch(es) of {launch.kernel} on {self.where} "
                    f"failed with {what}, as check predicted: {where}",
                    details=facts,
                )
            )

    def async_error(self, e: AsyncError) -> None:
        self.rows.append(
            Row(
                NAME,
                e.after or "a kernel",
                FAIL,
                f"{e.api} returned error {e.code} on {self.where}: a "
                f"kernel that had launched failed while it ran (the last launch in its context was "
                f"{e.after or 'not seen'}); check does not speak to it, but a failed run is never passed",
                details=(("api", e.api), ("code", e.code), ("kernel", e.after)),
            )
        )

    def library_rows(self) -> list[Row]:
        rows = []
        for li, (name, lib) in enumerate(self.inv.libraries):
            use = self.uses.get(li)
            if use is None:
                continue
            preds = [_predict(c, self.target) for c in lib.containers if c.vendor == "nvidia"]
            without = sum(1 for p in preds if not _runs(p))
            served = Counter(use.containers.values())
            kinds = ", ".join(f"{n} {h}" for h, n in sorted(served.items()))
            by_name = f" ({use.by_name} tied to their container by the kernel's name)" if use.by_name else ""
            if use.shared:
                by_name += (
                    f" ({use.shared} of a kernel several containers define or hold the same bytes of; "
                    f"the first that runs here credited)"
                )
            rows.append(
                Row(
                    NAME,
                    name,
                    PASS,
                    f"{use.launches} launch(es) of {len(use.kernels)} kernel(s) on {self.where} from "
                    f"{len(use.containers)} of its {len(preds)} container(s): {kinds}{by_name}; none of its "
                    f"{without} container(s) without code for {self.gpu['sm']} was used",
                    details=(
                        (
                            "containers",
                            [
                                {
                                    "container": ci,
                                    "offset": lib.containers[ci].offset,
                                    "served": h,
                                    "launches": use.per_container[ci],
                                }
                                for ci, h in sorted(use.containers.items())
                            ],
                        ),
                        ("gpu", self.gpu["name"]),
                        ("sm", self.gpu["sm"]),
                        ("containers_total", len(preds)),
                        ("containers_without_code", without),
                        ("kernels", sorted(use.kernels)[:200]),
                        ("launches", use.launches),
                        ("launches_by_name", use.by_name),
                        ("launches_shared", use.shared),
                    ),
                )
            )
        return rows


def _judge_launches(j: Judge, trace: Trace) -> None:
    """Every launch to the judge once: a runtime launch is also a driver launch underneath, so
    where the driver was traced a launch counts at the driver, and a runtime failure only where
    the driver did not fail the same kernel with the same code."""
    driver_seen = any(launch.layer == "driver" for launch in trace.launches)
    driver_failures = {
        (launch.kernel, launch.code) for launch in trace.launches if launch.layer == "driver" and launch.code
    }
    for launch in trace.launches:
        if launch.code == 0:
            # A runtime launch is also a driver launch underneath: counted once, at the driver.
            if launch.layer == "driver" or not driver_seen:
                j.launched(launch)
        elif launch.layer == "driver" or (launch.kernel, launch.code) not in driver_failures:
            j.failed(launch)


def _unread_rows(j: Judge) -> list[Row]:
    """A FAIL row per file whose launched cubins lie outside any fatbin container (check does not read them)."""
    rows = []
    for name, got in sorted(j.unread.items()):
        n = sum(got.values())
        kernels = sorted({k for k, _ in got})
        frames = sorted({o for _, o in got})
        rows.append(
            Row(
                NAME,
                name,
                FAIL,
                f"{n} launch(es) of {len(kernels)} kernel(s) on {j.where} came from {len(frames)} cubin(s) "
                f"this file stores outside any fatbin container (bare zstd frames at "
                f"{', '.join(f'0x{o:x}' for o in frames[:SHOWN])}): check does not read them, so it "
                f"predicted nothing for them; e.g. {', '.join(kernels[:SHOWN])}",
                details=(("frames", frames[:200]), ("kernels", kernels[:200]), ("launches", n)),
            )
        )
    return rows


def _outside_row(j: Judge) -> Row:
    """The SKIP row of the launches from images no container of the mapped files holds."""
    n = sum(j.outside.values())
    shown = ", ".join(k for k, _ in j.outside.most_common(SHOWN))
    return Row(
        NAME,
        "code no file holds",
        SKIP,
        f"{n} launch(es) of {len(j.outside)} kernel(s) came from images no container of the mapped "
        f"files holds, and no container check reads defines their names (code compiled at run time: "
        f"NVRTC, Triton, a JIT cache; or device code a mapped file stores outside a fatbin "
        f"container, which check does not read): check has nothing to predict for them; e.g. {shown}",
        details=(("kernels", dict(j.outside.most_common(200))),),
    )


def judge_trace(
    trace: Trace, inv: Inventory, gpu: dict[str, Any], cuda: tuple[int, int], jit: bool = True
) -> list[Row]:
    """The rows of a trace: failures and disagreements first, then one per library that served."""
    j = Judge(inv, gpu, cuda, jit)
    _judge_launches(j, trace)
    seen: set[tuple[int, str]] = set()
    for e in trace.async_errors:  # the runtime's synchronize and the driver's under it report one error twice
        if (e.code, e.after) not in seen:
            seen.add((e.code, e.after))
            j.async_error(e)
    rows = j.rows + j.library_rows() + _unread_rows(j)
    if j.outside:
        rows.append(_outside_row(j))
    for p in trace.problems:
        rows.append(Row(NAME, "tracer", FAIL, p))
    if trace.dropped:
        rows.append(
            Row(
                NAME,
                "tracer",
                FAIL,
                f"{trace.dropped} launch(es) went uncounted: more distinct kernels than the tracer's bound",
            )
        )
    return rows


# ---------------------------------------------------------------------------------------
# the probe
# ---------------------------------------------------------------------------------------
def _cuda(driver: str | None) -> tuple[int, int] | None:
    try:
        major, minor = str(driver).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def inventory(ctx: Any, trace: Trace) -> tuple[Inventory, list[Row]]:
    """check's inventory of every file the traced processes mapped that holds NVIDIA device code (a
    launch's code comes from a mapped file or from none); its cubins hashed where a loaded image
    has their size."""
    from ..read.artifacts import is_audited_file

    rows: list[Row] = []
    paths: list[str] = []
    libs: list[tuple[str, Library]] = []
    seen: set[str] = set()
    for path in trace.mapped:
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real) or not is_audited_file(real):
            continue
        seen.add(real)
        try:
            lib = ctx.scan(real)
        except Exception as exc:  # fail closed: a mapped file check cannot read
            rows.append(
                Row(NAME, ctx.display(real), FAIL, f"could not read its device code: {type(exc).__name__}: {exc}")
            )
            continue
        if any(c.vendor == "nvidia" for c in lib.containers):
            paths.append(real)
            libs.append((ctx.display(real), lib))
    inv = Inventory(libs)
    inv.index_kernels()
    for p in inv.index_hashes(paths, {m.size for m in trace.modules}):
        rows.append(Row(NAME, "inventory", FAIL, p))
    for p in inv.index_loose(paths, trace.modules):
        rows.append(Row(NAME, "inventory", FAIL, p))
    return inv, rows


def _step_row(ctx: Any, subject: str, out: child.Outcome | None) -> Row:
    """A workload step, from its child's observation: ran, did not apply here, or failed."""
    if out is None or out.status != child.OBS:
        return ctx.row(NAME, subject, out)  # type: ignore[no-any-return]
    d = out.details
    if d.get("importable") is False:
        return ctx.verdict(NAME, subject, out, FAIL, f"not importable here: {d.get('error')}")  # type: ignore[no-any-return]
    if d.get("cuda_available") is False or d.get("backend") == "cpu":
        return ctx.verdict(NAME, subject, out, SKIP, "the framework sees no GPU here", gpu=True)  # type: ignore[no-any-return]
    if "error" in d:
        return ctx.verdict(NAME, subject, out, FAIL, f"the workload raised {d['error']}")  # type: ignore[no-any-return]
    if d.get("not_run"):
        return ctx.verdict(NAME, subject, out, SKIP, str(d["not_run"]))  # type: ignore[no-any-return]
    return ctx.verdict(NAME, subject, out, PASS, "ran under the launch tracer")  # type: ignore[no-any-return]


def visible_first(env: dict[str, str]) -> str:
    """CUDA_VISIBLE_DEVICES for the traced processes: the first GPU of those visible, which the
    judge compares against (GPU0)."""
    current = env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return current or "0"


class TraceProbe:
    """Workloads under CUPTI's launch tracer; each launch judged against check in this process."""

    name = NAME
    description = (
        "CUPTI launch tracing of a workload (a torch sweep of the vendor libraries, the model "
        "steps, or --run COMMAND): each kernel launched must come from a container check "
        "predicts runs on this GPU, each failed launch must be one check predicted"
    )

    def run(self, ctx: Any) -> list[Row]:
        command = getattr(ctx, "run_command", None)
        if not command and NAME not in ctx.selected and not ctx.depends_on("torch") and not ctx.depends_on("jax"):
            return [
                Row(
                    NAME,
                    ctx.distribution,
                    SKIP,
                    f"{ctx.distribution} neither is nor depends on torch or "
                    f"jax, and no --run COMMAND was given: no workload to trace (--probe trace runs the torch "
                    f"sweep anyway)",
                )
            ]
        if not ctx.gpus:
            return [
                ctx.gpu_skip(
                    NAME, ctx.distribution, f"no launch to trace: {ctx.gpu_error or 'no CUDA device is visible'}"
                )
            ]
        cuda = _cuda(ctx.driver)
        if cuda is None:
            return [
                Row(NAME, ctx.distribution, FAIL, "the driver's CUDA version is unknown, so nothing can be predicted")
            ]
        out = tempfile.mkdtemp(prefix="trace-", dir=ctx.workdir)
        rows = self.run_command(ctx, command, out) if command else self.run_workloads(ctx, out)
        trace = read_trace(out)
        if not trace.processes and not trace.problems:
            rows.append(Row(NAME, ctx.distribution, FAIL, "no traced process wrote its records"))
            return rows
        inv, inv_rows = inventory(ctx, trace)
        rows += inv_rows
        if not trace.launches and not trace.problems:
            if rows and all(r.status == SKIP for r in rows):
                rows.append(
                    ctx.verdict(
                        NAME,
                        ctx.distribution,
                        None,
                        SKIP,
                        "no workload ran on the GPU, so the tracer saw no launch",
                        gpu=True,
                    )
                )
            else:
                rows.append(
                    Row(
                        NAME,
                        ctx.distribution,
                        FAIL,
                        f"the tracer ({trace.cupti}) saw no kernel launch in {trace.processes} process(es)",
                    )
                )
        rows += judge_trace(trace, inv, ctx.gpus[0], cuda, os.environ.get("CUDA_DISABLE_PTX_JIT") != "1")
        return rows

    def kit(self) -> tuple[Any, Any, dict[str, Any]]:
        """(the traced context class, the JAX distributions' pattern, the model probe classes by
        framework): the probes module's, which registers this probe (probes.TraceProbe) and which
        this module does not import."""
        raise NotImplementedError("the trace probe's workloads come from probes.TraceProbe")

    def run_workloads(self, ctx: Any, out: str) -> list[Row]:
        """The torch sweep, then the model probes the target wants, each of their framework children
        traced (probes.TracedContext); their rows are this probe's, named after the model probe."""
        import dataclasses

        from .context import _normalise

        traced_context, jax_family, model = self.kit()
        env = {"CUDA_VISIBLE_DEVICES": visible_first(ctx.child_env)}
        jax = bool(
            jax_family.match(_normalise(ctx.distribution))
            or any(jax_family.match(_normalise(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0])) for r in ctx.requires)
        )
        if jax:
            # XLA replays kernels inside CUDA graphs (command buffers), which launch no kernel one by one:
            # off here, so that each kernel's launch reaches the tracer.
            env["XLA_FLAGS"] = " ".join(
                f for f in (ctx.child_env.get("XLA_FLAGS", ""), "--xla_gpu_enable_command_buffer=") if f
            )
        traced = traced_context(
            **{f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx)}, trace_out=out, trace_env=env
        )
        rows: list[Row] = []
        models: list[Any] = []
        if ctx.depends_on("torch") or NAME in ctx.selected:
            run = traced.run_task("trace-sweep", list(SWEEP), {"size": 512})
            rows += [_step_row(ctx, f"torch {s}", o) for s, o in zip(SWEEP, run.outcomes)]
            rows += ctx.death_rows(NAME, run, "trace child")
            models.append(model["torch"]())
            if "model-torch-aoti" in ctx.selected:  # an AOTInductor compile: only when asked for by name
                models.append(model["torch-aoti"]())
        if ctx.depends_on("executorch"):
            models.append(model["executorch"]())
        if jax:
            models.append(model["jax"]())
        for m in models:
            rows += [dataclasses.replace(r, probe=NAME, subject=f"{r.probe}: {r.subject}") for r in m.run(traced)]
        return rows

    def run_command(self, ctx: Any, command: str, out: str) -> list[Row]:
        """The user's command, every Python process of it traced through a sitecustomize bootstrap."""
        from . import cupti

        boot = cupti.write_bootstrap(tempfile.mkdtemp(prefix="trace-boot-", dir=ctx.workdir))
        env = dict(ctx.child_env)
        env.update(
            {
                cupti.ENV_OUT: out,
                cupti.ENV_MODULE: os.path.abspath(cupti.__file__),
                "PYTHONPATH": os.pathsep.join(p for p in (boot, env.get("PYTHONPATH", "")) if p),
                "PATH": os.pathsep.join((os.path.dirname(ctx.python), env.get("PATH", ""))),
                "CUDA_VISIBLE_DEVICES": visible_first(ctx.child_env),
            }
        )
        try:
            rc, tail = child.run_command(
                ["sh", "-c", command], f"the traced command {command!r}", env=env, timeout=ctx.timeout, cwd=os.getcwd()
            )
        except TimeoutError as exc:
            return [Row(NAME, command, FAIL, str(exc))]
        if rc != 0:
            return [Row(NAME, command, FAIL, f"the traced command exited with status {rc}", stderr_tail=tail)]
        return [Row(NAME, command, PASS, "the traced command exited with status 0")]


__all__ = [
    "AsyncError",
    "Inventory",
    "judge_trace",
    "Launch",
    "Module",
    "parse_records",
    "read_trace",
    "SELECTION_ERRORS",
    "SWEEP",
    "Trace",
    "TraceProbe",
]
