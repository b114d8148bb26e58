"""The load probe: dlopen every shared library of the distribution with RTLD_NOW, each in a fresh
child. archaudit reads each library's ELF facts here (the child only dlopens) and judges here.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import child
from .base import Probe
from .context import ET_DYN, ProbeContext
from .report import FAIL, PASS, SKIP, Row

MACHINES = {3: "x86", 62: "x86_64", 183: "aarch64", 40: "arm", 21: "ppc64", 22: "s390x", 243: "riscv"}


def load_item(path: str) -> dict[str, Any]:
    """What the load worker needs about one library, read here by archaudit.read.elf (the child only
    dlopens): its ELF type, machine, NEEDED, RUNPATH, RPATH and SONAME."""
    from ..read import elf

    try:
        with open(path, "rb") as f:
            if not elf.is_elf(f.read(4)):
                return {"path": path, "elf": {"elf": False}}
            d = elf.read_dynamic(f, os.fstat(f.fileno()).st_size)
    except OSError as exc:
        return {"path": path, "elf": {"unreadable": f"{type(exc).__name__}: {exc}"}}
    except elf.ElfError:  # another class or byte order, or headers the loader will reject itself
        return {"path": path, "elf": {"elf": True, "inspected": False, "type": None, "machine": None}}
    return {
        "path": path,
        "elf": {
            "elf": True,
            "inspected": True,
            "type": d.type,
            "machine": MACHINES.get(d.machine, str(d.machine)),
            "needed": list(d.needed),
            "runpath": list(d.runpath),
            "rpath": list(d.rpath),
            "soname": d.soname,
        },
    }


def judge_load(ctx: ProbeContext, probe: str, item: dict[str, Any], outcome: child.Outcome | None) -> Row:
    from . import worker

    path, info = item["path"], item["elf"]
    subject = ctx.display(path)
    if outcome is None or outcome.status != child.OBS:
        return ctx.row(probe, subject, outcome)
    obs = outcome.details
    needed = list(info.get("needed", []))
    dangling = worker.dangling_search_paths(path, info) if info.get("inspected") else []
    if obs.get("loaded") is True:
        reason = f"dlopen(RTLD_NOW) loaded it with every symbol bound ({len(needed)} NEEDED)"
        if dangling:
            reason += "; warning: " + "; ".join(dangling)
        return Row(probe, subject, PASS, reason, outcome.duration, details=(("dangling", dangling), ("needed", needed)))
    if obs.get("loaded") is False:
        message = str(obs.get("message", ""))
        missing = [str(m) for m in obs.get("missing") or ()]
        parts = [f"dlopen(RTLD_NOW) failed: {message}"]
        if missing:
            parts.append("missing dependencies: " + ", ".join(missing))
        if "undefined symbol:" in message:
            parts.append(f"undefined symbol: {message.split('undefined symbol:', 1)[1].strip().split()[0]}")
        if dangling:
            parts.append("search paths that resolve to nothing: " + "; ".join(dangling))
        return Row(
            probe,
            subject,
            FAIL,
            "; ".join(parts),
            outcome.duration,
            details=(("dangling", dangling), ("missing", missing), ("needed", needed)),
        )
    return Row(
        probe,
        subject,
        FAIL,
        "the load child's report says neither that dlopen returned nor that it failed",
        outcome.duration,
    )


def load_precheck(item: dict[str, Any]) -> tuple[str, str] | None:
    """(status, reason) for a file no dlopen is needed to judge; None to dlopen it."""
    import platform

    info = item["elf"]
    here = platform.machine()
    here = {"amd64": "x86_64", "arm64": "aarch64"}.get(here.lower(), here)
    if "unreadable" in info:
        return FAIL, f"cannot read: {info['unreadable']}"
    if not info.get("elf"):
        return SKIP, "not an ELF file (a linker script or data named like a library)"
    if info.get("inspected") and info["type"] != ET_DYN:
        return SKIP, f"ELF type {info['type']} is not a shared object; nothing to dlopen"
    if info.get("inspected") and info["machine"] != here:
        return SKIP, f"built for {info['machine']}, this machine is {here}"
    return None


class LoadProbe(Probe):
    """dlopen every shared library of the distribution with RTLD_NOW, each in a fresh child."""

    name = "load"
    description = "dlopen every shared library with RTLD_NOW in a fresh child interpreter"

    def run(self, ctx: ProbeContext) -> list[Row]:
        libs = ctx.shared_libraries()
        if not libs:
            return [Row(self.name, ctx.distribution, SKIP, "the distribution ships no shared library")]
        items = [load_item(p) for p in libs]
        pre = [load_precheck(it) for it in items]
        # A fresh interpreter per library: one library loaded earlier cannot satisfy another's
        # missing dependency by its SONAME, and a crash or hang costs only that library.
        workers = max(1, min(4, os.cpu_count() or 1))
        todo = [k for k, p in enumerate(pre) if p is None]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            runs = dict(zip(todo, pool.map(lambda k: ctx.run_task("load", [items[k]]), todo)))
        rows = []
        for k, path in enumerate(libs):
            if pre[k] is not None:
                status, reason = pre[k]  # type: ignore[misc]  # not None, checked
                rows.append(Row(self.name, ctx.display(path), status, reason))
                continue
            run = runs[k]
            rows.append(judge_load(ctx, self.name, items[k], run.outcomes[0]))
            rows += ctx.death_rows(self.name, run, ctx.display(path))
        return rows


__all__ = ["judge_load", "load_item", "load_precheck", "LoadProbe", "MACHINES"]
