"""The trace probe's judging: each launch against check's prediction for the container it came
from, failed launches against code selection, and per library which containers served this GPU
(trace.py describes the probe).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..gpus import predict as P
from ..model import SASS, Container, Entry, Library
from .report import FAIL, PASS, SKIP, Row
from .trace_inventory import Inventory, Source
from .trace_records import AsyncError, Launch, Trace

NAME = "trace"


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
        facts = (("code", launch.code), ("kernel", launch.kernel), ("launches", launch.count), ("layer", launch.layer))
        subject, status, reason = self._failed_verdict(launch)
        self.rows.append(Row(NAME, subject, status, reason, details=facts))

    def _failed_verdict(self, launch: Launch) -> tuple[str, str, str]:
        """The subject, status and reason of a failed launch's row."""
        found, _ = self.sources(launch)
        what = SELECTION_ERRORS.get(launch.code, f"error {launch.code}")
        failed = f"{launch.count} launch(es) of {launch.kernel} on {self.where} failed with {what}"
        if launch.code not in SELECTION_ERRORS:
            return (
                launch.kernel,
                FAIL,
                f"{failed}: not a code-selection error, so check does not speak to it, but a failed launch is "
                f"never passed",
            )
        if not found:
            return (
                launch.kernel,
                FAIL,
                f"{failed}, and no container of the mapped files defines that kernel: check could not have "
                f"predicted it",
            )
        preds = [
            (s, _predict(self.inv.libraries[s.library][1].containers[s.container], self.target, launch.kernel))
            for s in found
        ]
        where = "; ".join(
            f"{self.inv.libraries[s.library][0]} {_label(self.inv.libraries[s.library][1], s.container)}"
            f" predicted {p.outcome.value} ({p.reason})"
            for s, p in preds[:SHOWN]
        )
        subject = f"{self.inv.libraries[preds[0][0].library][0]}: {launch.kernel}"
        if any(_runs(p) for _, p in preds):
            return subject, FAIL, f"a false pass of check: {failed}, but check predicted it runs there: {where}"
        return subject, PASS, f"{failed}, as check predicted: {where}"

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


__all__ = ["judge_trace", "NAME", "SELECTION_ERRORS", "SHOWN"]
