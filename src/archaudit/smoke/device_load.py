"""device-load: the driver as referee of the static prediction, container by container.

Every NVIDIA fatbin container of every library (registered, embedded elsewhere, relocatable,
empty) is handed to cuModuleLoadData on each visible GPU, in child processes, once with the
PTX JIT on and once with CUDA_DISABLE_PTX_JIT=1. archaudit.gpus.predict says beforehand what the
driver will answer; a library passes when every answer agrees and check's own rule (the
--gpu question of `archaudit check`) says its code runs on the GPU. Each disagreement is
named: library, container, prediction, the driver's answer.

Speed: the loads run in parallel children (one per CPU, up to 16), the costliest first, so
a library of 24,000 containers is bounded by its PTX JIT work divided over the CPUs. The JIT
runs at optimisation level 0 (same answers, about half the time), and a large PTX-only
container is compiled in parts that share out its kernels (ptx_split, load_jit): the driver
JITs one module in one thread. docs/smoke.md says why both keep the answers the driver's own.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from ..findings import Code
from ..gpus import predict as P
from ..model import CUBIN, Container, Library
from . import child
from .report import FAIL, PASS, SKIP, Row

MAX_CHILDREN = 16
SHOWN = 3  # disagreements spelled out in the row's reason; all of them go to details
JIT_COST_PER_BYTE = 1e-6  # a PTX byte costs about this many seconds of JIT (H200: 71 MB in 77 s)
# CU_JIT_OPTIMIZATION_LEVEL for every load. The driver checks the PTX ISA version and its
# .target, and compiles every function, at any level; only the optimisation of the code it
# then throws away differs. On the H200, level 0 answered as the default level on all 8,133
# PTX-only containers of cuFFT, cuFile and cuSPARSELt, in 0.55 of the JIT time
# (records/smoke-h200/jit-modes.txt).
JIT_LEVEL = 0
SPLIT_BYTES = 4 << 20  # a PTX-only container with this much PTX is JIT-compiled in parts (ptx_split)

ERROR_NAMES = {
    0: "CUDA_SUCCESS",
    200: "CUDA_ERROR_INVALID_IMAGE",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    218: "CUDA_ERROR_INVALID_PTX",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    223: "CUDA_ERROR_JIT_COMPILATION_DISABLED",
    500: "CUDA_ERROR_NOT_FOUND",
}


@dataclass(frozen=True)
class Item:
    """One container of one library, as the worker loads it."""

    path: str
    index: int  # the container's index in its library
    container: Container
    text: bool  # a bare .ptx file: NUL-terminated before loading
    image: str = ""  # a cubin the library keeps as a bare zstd frame, decoded to this file (`decoded`)

    def spec(self) -> dict[str, object]:
        if self.image:
            return {"file": self.image, "offset": 0, "size": self.container.entries[0].size, "text": False}
        return {"file": self.path, "offset": self.container.offset, "size": self.container.size, "text": self.text}

    def cost(self, jit: bool) -> float:
        if not jit:
            return 1e-4
        return 1e-4 + sum(e.size for e in self.container.entries if e.kind == "ptx") * JIT_COST_PER_BYTE


def code_name(code: int | None) -> str:
    if code is None:
        return "the loading process died"
    return f"{ERROR_NAMES.get(code, 'CUresult')} ({code})"


def _label(c: Container, index: int) -> str:
    parts = [f"{e.target} {'SASS' if e.kind == 'sass' else e.kind.upper()}" for e in c.entries]
    where = c.section or c.role
    return f"container {index} ({where} @0x{c.offset:x}, {', '.join(parts) or 'no entries'})"


def plan(libraries: Iterable[tuple[str, Library]]) -> list[Item]:
    items = []
    for path, lib in libraries:
        for k, c in enumerate(lib.containers):
            if c.vendor == "nvidia":
                items.append(Item(path, k, c, lib.format == "ptx" or path.endswith(".ptx")))
    return items


def decoded(items: list[Item], workdir: str) -> list[Item]:
    """A cubin a library keeps as a bare zstd frame (role cubin, its entry zstd) is loaded as the
    library loads it: decoded here, in archaudit's process (within the verification bound), into
    the scratch directory. One that cannot be decoded is loaded as stored, so the driver refuses
    it and the row fails: never skipped."""
    from ..read import fatbin

    out = []
    for i, it in enumerate(items):
        e = it.container.entries[0] if it.container.entries else None
        if it.container.role == CUBIN and e is not None and e.compression == "zstd":
            try:
                with open(it.path, "rb") as f:
                    f.seek(e.offset)
                    image = bytes(
                        fatbin.decode_frame(f.read(e.stored_size), e.size, e.offset, fatbin.DEFAULT_MAX_PAYLOAD)
                    )
                path = os.path.join(workdir, f"frame-{i}.cubin")
                with open(path, "wb") as f:
                    f.write(image)
                it = replace(it, image=path)
            except (OSError, fatbin.FatbinError):
                pass
        out.append(it)
    return out


def shards(costs: list[float], n: int) -> list[list[int]]:
    """Indices in n lists of about equal cost, the costliest first in each (LPT)."""
    order = sorted(range(len(costs)), key=lambda i: -costs[i])
    lists: list[list[int]] = [[] for _ in range(max(1, min(n, len(costs))))]
    load = [0.0] * len(lists)
    for i in order:
        k = min(range(len(lists)), key=load.__getitem__)
        lists[k].append(i)
        load[k] += costs[i]
    return [s for s in lists if s]


def children() -> int:
    return max(1, min(MAX_CHILDREN, os.cpu_count() or 1))


@dataclass(frozen=True)
class Answer:
    """The driver's answer for one container on one GPU, in one mode."""

    code: int | None  # None: the child died (or hung) loading it
    seconds: float
    died: str = ""


RunTask = Callable[..., child.TaskRun]


def load_specs(
    run_task: RunTask, specs: list[dict[str, object]], costs: list[float], jit: bool, n: int
) -> tuple[dict[int, list[Answer]], list[child.Death], dict[str, Any]]:
    """cuModuleLoadData on every spec in n parallel children; answers per spec, one per GPU."""
    env = {"CUDA_CACHE_DISABLE": "1", "CUDA_MODULE_LOADING": "EAGER", "CUDA_DISABLE_PTX_JIT": "0" if jit else "1"}
    lists = shards(costs, n)

    def one(indices: list[int]) -> tuple[list[int], child.TaskRun]:
        return indices, run_task("device-load", [specs[i] for i in indices], {"jit_level": JIT_LEVEL}, extra_env=env)

    answers: dict[int, list[Answer]] = {}
    deaths: list[child.Death] = []
    info: dict[str, Any] = {}
    if not lists:
        return answers, deaths, info
    with ThreadPoolExecutor(max_workers=len(lists)) as pool:
        for indices, run in pool.map(one, lists):
            deaths += run.deaths
            for event in run.infos:
                info.update(event)
            for k, out in zip(indices, run.outcomes):
                if out is None:
                    continue
                if out.died:
                    answers[k] = [Answer(None, out.duration, out.reason)]
                    continue
                answers[k] = [Answer(int(d["code"]), float(d["seconds"])) for d in out.details.get("per_device", [])]
    return answers, deaths, info


def load_all(
    run_task: RunTask, items: list[Item], jit: bool, n: int
) -> tuple[dict[int, list[Answer]], list[child.Death], dict[str, Any]]:
    """Every item's container, whole, in n parallel children; answers per item, one per GPU."""
    return load_specs(run_task, [it.spec() for it in items], [it.cost(jit) for it in items], jit, n)


def splittable(item: Item, off: list[Answer] | None) -> bool:
    """A container whose JIT is spread over children: with the JIT off the driver refused it
    for want of the JIT (223) on every GPU, and it carries SPLIT_BYTES of PTX or more."""
    ptx = sum(e.size for e in item.container.entries if e.kind == "ptx")
    return (
        not item.text
        and ptx >= SPLIT_BYTES
        and bool(off)
        and all(a.code == P.JIT_COMPILATION_DISABLED for a in off or ())
    )


def _part_images(item: Item, n: int) -> list[bytes]:
    """A splittable container's PTX as up to n part containers ([] where it cannot be split: load it whole)."""
    from . import ptx_split

    try:
        with open(item.path, "rb") as f:
            f.seek(item.container.offset)
            return ptx_split.part_containers(f.read(item.container.size), n)
    except (OSError, ValueError):  # NotSplittable, FatbinError: load it whole
        return []


def _parts_answer(per: list[list[Answer] | None]) -> list[Answer] | None:
    """A container's answer per GPU from its parts' answers: 0 when every part loaded on every
    GPU (the JIT's seconds summed), else None (the container is loaded whole again)."""
    if all(p and len(p) == len(per[0] or ()) and all(a.code == 0 for a in p) for p in per):
        return [Answer(0, sum(p[g].seconds for p in per if p)) for g in range(len(per[0] or ()))]
    return None


def load_jit(
    run_task: RunTask, items: list[Item], off: dict[int, list[Answer]], n: int, workdir: str
) -> tuple[dict[int, list[Answer]], list[child.Death], dict[str, Any], dict[int, int]]:
    """The JIT-on pass. A large PTX-only container (splittable) is loaded as parts that share its
    kernels out (ptx_split); it answers 0 when every part does, and is loaded whole, as any other
    container, when a part answers anything else, so a part can only ever confirm a success.
    The last value maps each container answered from parts to their number (0: reloaded whole)."""
    specs: list[dict[str, object]] = []
    costs: list[float] = []
    whole: dict[int, int] = {}  # item -> its spec
    parts: dict[int, list[int]] = {}  # item -> its part specs
    for i, it in enumerate(items):
        images = _part_images(it, n) if splittable(it, off.get(i)) else []
        if len(images) > 1:
            parts[i] = []
            for k, image in enumerate(images):
                path = os.path.join(workdir, f"ptx-part-{i}-{k}.fatbin")
                with open(path, "wb") as f:
                    f.write(image)
                parts[i].append(len(specs))
                specs.append({"file": path, "offset": 0, "size": len(image), "text": False})
                costs.append(1e-4 + len(image) * JIT_COST_PER_BYTE)
            continue
        whole[i] = len(specs)
        specs.append(it.spec())
        costs.append(it.cost(True))
    got, deaths, info = load_specs(run_task, specs, costs, True, n)
    answers = {i: got[j] for i, j in whole.items() if j in got}
    again = []
    for i, ks in parts.items():
        joined = _parts_answer([got.get(k) for k in ks])
        if joined is not None:
            answers[i] = joined
        else:
            again.append(i)
    if again:  # a part was refused: the whole container's own answer is the one that counts
        more, more_deaths, _ = load_all(run_task, [items[i] for i in again], True, n)
        deaths += more_deaths
        for j, i in enumerate(again):
            if j in more:
                answers[i] = more[j]
    split = {i: 0 if i in again else len(ks) for i, ks in parts.items()}
    return answers, deaths, info, split


def _cuda(driver: str | None) -> tuple[int, int] | None:
    try:
        major, minor = str(driver).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def _coverage(
    lib: Library, gpu: dict[str, Any], cuda: tuple[int, int] | None = None, display: str | None = None
) -> tuple[bool, str, tuple[str, ...]]:
    """check's own verdict on this library for this GPU and this driver: (runs, message, failing
    finding codes).

    The GPU is both the claim and the --gpu question, so every rule of `archaudit check` that
    can fail a library for this GPU is applied; G009 (the GPU runs none of it) is named first.
    The driver is the first one of the CUDA release it reports (the PTX ISA it JITs is that
    release's), so PTX it cannot compile is D001, as `check --driver` says."""
    from dataclasses import replace

    from ..claims import parse_claim
    from ..findings import ERROR
    from ..gpus.cuda import min_driver
    from ..judge.audit import judge
    from ..judge.policy import NvidiaGpu, Policy
    from ..model import TargetInventory

    major, minor = (int(p) for p in gpu["cc"].split("."))
    name = f"GPU{gpu['ordinal']} {gpu['name']}"
    claim = parse_claim(f"{major}{minor}", f"the GPU under test ({name})", style="list")
    if display:
        lib = replace(lib, path=display)
    driver = None
    if cuda is not None:
        try:
            driver = min_driver(cuda, "linux")
        except LookupError:  # a release newer than the driver table: newer than any PTX it knows
            driver = None
    report = judge(
        TargetInventory(lib.path, "file", (lib,)), claim, Policy(gpus=(NvidiaGpu(name, (major, minor)),), driver=driver)
    )
    bad = [f for f in report.findings if f.severity == ERROR]
    bad = [f for f in bad if f.code == Code.G009] or bad  # "not at all" says it; the claim rules repeat it
    if bad:
        return False, "; ".join(f"{f.code} {f.message}" for f in bad[:3]), tuple(sorted({f.code for f in bad}))
    return True, f"check's rule for sm_{major}{minor}: it runs there", ()


class DeviceLoadProbe:
    """The driver answers for every container; archaudit.gpus.predict said what it would answer."""

    name = "device-load"
    description = (
        "cuModuleLoadData on every fatbin container of every library, on each visible GPU, "
        "with the PTX JIT on and off; each answer must be the one archaudit predicted"
    )

    def _libraries(self, ctx: Any, rows: list[Row]) -> list[tuple[str, Library]]:
        """The libraries with CUDA containers, each read completely; a FAIL row in rows for each
        file whose device code could not be read (fail closed)."""
        libraries: list[tuple[str, Library]] = []
        for path in ctx.device_code_files():
            try:
                lib = ctx.scan(path)
            except Exception as exc:  # the inventory could not read it: fail closed
                rows.append(
                    Row(
                        self.name,
                        ctx.display(path),
                        FAIL,
                        f"could not read its device code: {type(exc).__name__}: {exc}",
                    )
                )
                continue
            if lib.problems:
                shown = "; ".join(f"{p.code} {p.message}" for p in lib.problems[:3])
                rows.append(
                    Row(
                        self.name,
                        ctx.display(path),
                        FAIL,
                        f"its device code could not be read completely, so it is not verified: {shown}",
                    )
                )
                continue
            if any(c.vendor == "nvidia" for c in lib.containers):
                libraries.append((path, lib))
        return libraries

    def run(self, ctx: Any) -> list[Row]:
        rows: list[Row] = []
        libraries = self._libraries(ctx, rows)
        if not libraries:
            if not rows:
                rows.append(
                    Row(self.name, ctx.distribution, SKIP, "no file of the distribution carries CUDA device code")
                )
            return rows
        items = plan(libraries)
        if not ctx.gpus:
            reason = ctx.gpu_error or "no CUDA device is visible"
            for path, lib in libraries:
                n = sum(1 for c in lib.containers if c.vendor == "nvidia")
                rows.append(ctx.gpu_skip(self.name, ctx.display(path), f"{n} fatbin container(s) not loaded: {reason}"))
            return rows
        n = children()
        items = decoded(items, ctx.workdir)
        off, off_deaths, info = load_all(ctx.run_task, items, False, n)
        on: dict[int, list[Answer]] = {}
        on_deaths: list[child.Death] = []
        split: dict[int, int] = {}
        if not info.get("error"):
            on, on_deaths, on_info, split = load_jit(ctx.run_task, items, off, n, ctx.workdir)
            info.update(on_info)
        if info.get("error"):  # the driver answered gpu-info but not here: report, do not guess
            for path, _ in libraries:
                rows.append(ctx.gpu_skip(self.name, ctx.display(path), str(info["error"])))
            return rows
        for d in on_deaths + off_deaths:
            rows.append(Row(self.name, "device-load child", FAIL, d.reason, d.duration, d.signal, d.stderr_tail))
        cuda = _cuda(info.get("driver") or getattr(ctx, "driver", None))
        rows += self._library_rows(ctx, libraries, items, on, off, cuda, split)
        return rows

    def _library_rows(
        self,
        ctx: Any,
        libraries: list[tuple[str, Library]],
        items: list[Item],
        on: dict[int, list[Answer]],
        off: dict[int, list[Answer]],
        cuda: tuple[int, int] | None,
        split: dict[int, int],
    ) -> list[Row]:
        """A row per library, from the answers to its own containers."""
        by_lib: dict[str, list[int]] = {}
        for i, it in enumerate(items):
            by_lib.setdefault(it.path, []).append(i)
        return [
            self._library_row(
                ctx,
                path,
                lib,
                [items[i] for i in by_lib[path]],
                [on.get(i) for i in by_lib[path]],
                [off.get(i) for i in by_lib[path]],
                cuda,
                [split[i] for i in by_lib[path] if i in split],
            )
            for path, lib in libraries
        ]

    def _library_row(
        self,
        ctx: Any,
        path: str,
        lib: Library,
        items: list[Item],
        on: list[list[Answer] | None],
        off: list[list[Answer] | None],
        cuda: tuple[int, int] | None,
        split: list[int] | None = None,
    ) -> Row:
        subject = ctx.display(path)
        if cuda is None:
            return Row(self.name, subject, FAIL, "the driver's CUDA version is unknown, so nothing can be predicted")
        cmp = _Comparison()
        for it, a_on, a_off in zip(items, on, off):
            for g, gpu in enumerate(ctx.gpus):
                cmp.add(it, g, gpu, cuda, _pick(a_on, g), _pick(a_off, g))
        verdicts = [(gpu, _coverage(lib, gpu, cuda, subject)) for gpu in ctx.gpus]
        details = tuple(sorted(_details(len(items), cmp, verdicts, split).items()))
        gpus = ", ".join(f"GPU{g['ordinal']} {g['name']} ({g['sm']})" for g in ctx.gpus)
        if cmp.disagreements:
            more = f" (and {len(cmp.disagreements) - SHOWN} more)" if len(cmp.disagreements) > SHOWN else ""
            return Row(
                self.name,
                subject,
                FAIL,
                f"{len(cmp.disagreements)} driver answer(s) on {gpus} disagree with archaudit's prediction: "
                + "; ".join(cmp.disagreements[:SHOWN])
                + more,
                details=details,
            )
        status, message = _coverage_verdict(ctx.gpus, lib, verdicts, cmp, _agreed(len(items), gpus, cmp, split))
        return Row(self.name, subject, status, message, details=details)


@dataclass
class _Comparison:
    """The driver's answers against archaudit's predictions, gathered over every container and GPU."""

    disagreements: list[str] = field(default_factory=list)
    tally: Counter[str] = field(default_factory=Counter)  # predicted outcome (JIT on) -> count
    answers: Counter[str] = field(default_factory=Counter)
    unresolved: list[str] = field(default_factory=list)
    jit_seconds: float = 0.0
    jit_max: float = 0.0
    crashes: int = 0
    served: dict[int, set[str]] = field(default_factory=dict)  # GPU -> kernels some container runs there
    # GPU -> kernels only containers without its code carry
    stranded: dict[int, list[str]] = field(default_factory=dict)

    def add(
        self,
        it: Item,
        g: int,
        gpu: dict[str, Any],
        cuda: tuple[int, int],
        got_on: Answer | None,
        got_off: Answer | None,
    ) -> None:
        """Add one container on one GPU: its predictions with the JIT on and off, and the answers."""
        cc = tuple(int(p) for p in gpu["cc"].split("."))
        target = P.Gpu(cc, cuda, True)  # type: ignore[arg-type]
        p_on, p_off = P.predict(it.container, target), P.predict(it.container, target.with_jit(False))
        self.tally[p_on.outcome.value] += 1
        names = [k for e in it.container.entries for k in (e.kernels or ())]
        if p_on.outcome in (P.Outcome.NATIVE, P.Outcome.JIT):
            self.served.setdefault(g, set()).update(names)
        else:
            self.stranded.setdefault(g, []).extend(names)
        where = f"{_label(it.container, it.index)} on GPU{gpu['ordinal']}"
        for pred, got, mode in ((p_on, got_on, "with the JIT on"), (p_off, got_off, "with CUDA_DISABLE_PTX_JIT=1")):
            if got is not None and got.code is None:
                self.crashes += 1
            problem = _disagreement(where, gpu, pred, got, mode)
            if problem is not None:
                self.disagreements.append(problem)
        self.answers[f"{p_on.outcome.value}: {_short(got_on)} / {_short(got_off)}"] += 1
        if p_on.outcome is P.Outcome.JIT and got_on and got_on.code == 0:
            self.jit_seconds += got_on.seconds
            self.jit_max = max(self.jit_max, got_on.seconds)
        if p_on.outcome is P.Outcome.NOT_LOADABLE and p_on.entry is not None:
            self.unresolved += [s for s in p_on.entry.unresolved if s not in self.unresolved]


def _disagreement(where: str, gpu: dict[str, Any], pred: P.Prediction, got: Answer | None, mode: str) -> str | None:
    """How the driver's answer differs from the prediction; None when it agrees."""
    if got is None:
        return f"{where}: no answer {mode} (the child never reported it)"
    if pred.agrees(got.code):
        return None
    want = " or ".join(code_name(c) for c in sorted(pred.codes))
    return (
        f"{where} ({gpu['sm']}) {mode}: predicted {pred.outcome.value} ({want}: {pred.reason}), the driver "
        f"answered {code_name(got.code)}" + (f" [{got.died}]" if got.died else "")
    )


_Verdicts = list[tuple[dict[str, Any], tuple[bool, str, tuple[str, ...]]]]  # GPU -> check's _coverage of it


def _details(containers: int, cmp: _Comparison, verdicts: _Verdicts, split: list[int] | None) -> dict[str, object]:
    """The row's machine-readable details."""
    details: dict[str, object] = {
        "containers": containers,
        "predicted": dict(cmp.tally),
        "answers": dict(cmp.answers),
        "jit_seconds": round(cmp.jit_seconds, 3),
        "disagreements": cmp.disagreements[:200],
        "coverage": {f"GPU{g['ordinal']}": v[1] for g, v in verdicts},
    }
    if split:
        details["jit_split"] = {"containers": len(split), "parts": sum(split), "reloaded_whole": split.count(0)}
    return details


def _agreed(containers: int, gpus: str, cmp: _Comparison, split: list[int] | None) -> str:
    """The sentence for a library whose every answer was as predicted."""
    summary = ", ".join(f"{cmp.tally[o.value]} {_OUTCOME_WORDS[o]}" for o in P.Outcome if cmp.tally[o.value])
    agreed = f"all {containers} container(s) answered on {gpus} as predicted, with the JIT on and off: {summary}"
    if cmp.tally[P.Outcome.JIT.value]:
        agreed += f" (the JIT took {cmp.jit_seconds:.2f} s in all, longest {cmp.jit_max:.2f} s"
        if split and any(split):
            agreed += (
                f"; {sum(1 for k in split if k)} container(s) compiled in {sum(split)} parts "
                f"that share out their kernels"
            )
        agreed += ")"
    unresolved = cmp.unresolved
    if unresolved:
        shown = ", ".join(unresolved[:4]) + (f" and {len(unresolved) - 4} more" if len(unresolved) > 4 else "")
        agreed += f"; not loadable alone: relocatable code that calls {shown}"
    if cmp.crashes:
        agreed += f"; the driver crashed on {cmp.crashes} of those (run in a child, as predicted not loadable)"
    return agreed


def _coverage_verdict(
    all_gpus: list[dict[str, Any]], lib: Library, verdicts: _Verdicts, cmp: _Comparison, agreed: str
) -> tuple[str, str]:
    """(status, message) once the driver agreed: check's own rule decides whether the code runs on every GPU."""
    failing = [(g, v) for g, v in verdicts if not v[0]]
    gpus = ", ".join(f"GPU{g['ordinal']} {g['name']} ({g['sm']})" for g in all_gpus)
    if not failing:
        return PASS, f"{agreed}; check's rule: its code runs on {gpus}"
    code = [e for c in lib.containers for e in c.entries if e.kind in ("sass", "ptx")]
    if code and all(e.decoded and e.kernels == () for e in code):
        # nvcc's device-link stubs and the like: nothing here can be launched, so nothing
        # can fail with "no kernel image is available" (check's G009 says otherwise)
        why = "; ".join(f"GPU{g['ordinal']}: {v[1]}" for g, v in failing)
        return PASS, (
            f"{agreed}; its device code holds no kernel, so nothing it "
            f"launches can miss a GPU (check's rule says: {why})"
        )
    parts = []
    for g, v in failing:
        gi = all_gpus.index(g)
        lost = sorted({k for k in cmp.stranded.get(gi, ()) if k not in cmp.served.get(gi, set())})
        shown = ", ".join(lost[:8]) + (f" and {len(lost) - 8} more" if len(lost) > 8 else "")
        parts.append(
            f"GPU{g['ordinal']}: {v[1]}"
            + (f"; kernels that would fail with 'no kernel image is available': {shown}" if lost else "")
        )
    return FAIL, f"{agreed}; but its code does not run on every GPU here: {'; '.join(parts)}"


_OUTCOME_WORDS = {
    P.Outcome.NATIVE: "native SASS",
    P.Outcome.JIT: "PTX JIT only",
    P.Outcome.NONE: "with no code for this GPU",
    P.Outcome.NOT_LOADABLE: "not loadable alone",
}


def _pick(answers: list[Answer] | None, gpu: int) -> Answer | None:
    """This GPU's answer; None when the child never gave one."""
    if not answers:
        return None
    if len(answers) == 1 and answers[0].code is None:
        return answers[0]
    return answers[gpu] if gpu < len(answers) else None


def _short(a: Answer | None) -> str:
    if a is None:
        return "none"
    return "died" if a.code is None else str(a.code)


__all__ = ["Answer", "children", "decoded", "DeviceLoadProbe", "Item", "load_jit", "plan", "SPLIT_BYTES"]
