"""The corpus manifests (corpus/manifest.toml and the census, corpus/census.toml), read into frozen records.

Each wheel names its exact file (so its platform tag), the claim as its project documents it
with the source, and the expected verdict per library with the evidence behind it. Nothing
here comes from archaudit's output.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomllib

MANIFEST = Path(__file__).resolve().parent / "manifest.toml"
CENSUS = Path(__file__).resolve().parent / "census.toml"  # the census of the index (records/census.md)
MANIFESTS = (MANIFEST, CENSUS)
Verdict = Literal["runs", "fails"]
VERDICTS: tuple[Verdict, ...] = ("runs", "fails")


@dataclass(frozen=True)
class LibraryExpectation:
    """The expected verdict for the libraries matching ``path`` (a glob), and why."""

    path: str
    verdict: Verdict
    evidence: str
    codes: tuple[str, ...] = ()  # error codes that must be among the library's findings
    issue: str = ""  # the issue-11 point this library referees, if any

    def matches(self, library: str) -> bool:
        return fnmatch.fnmatchcase(library, self.path)


@dataclass(frozen=True)
class ExtraCheck:
    """A second check of the same wheel with more options (a driver, a GPU), and its expected exit."""

    name: str
    args: tuple[str, ...]
    exit: int
    evidence: str
    codes: tuple[str, ...] = ()  # codes that must appear in the report
    absent: tuple[str, ...] = ()  # codes that must not appear
    issue: str = ""


@dataclass(frozen=True)
class Ignore:
    """A recorded decision, passed to archaudit as [[tool.archaudit.ignore-library]]: a gap the
    binary cannot excuse (a per-kernel gap the vendor's host code dispatches around), with the
    source that says so."""

    code: str
    library: str
    reason: str


@dataclass(frozen=True)
class Gate:
    """The project's own record of where its host code gates a library, passed to archaudit as
    [[tool.archaudit.library]] (``arch``) or, with ``paths``, [[tool.archaudit.library-group]]:
    ``reason`` cites the line of the project's public source that does it."""

    reason: str
    path: str = ""  # a library glob judged by its own architectures
    arch: str = ""
    paths: tuple[str, ...] = ()  # alternative libraries of which the host loads one
    kernels: tuple[str, ...] = ()  # kernel-name globs: only these kernels of ``path`` are gated


@dataclass(frozen=True)
class Wheel:
    id: str
    spec: str
    filename: str
    size_mb: float
    stack: str  # "CUDA 12.9", "ROCm 5.0", "CPU"
    kind: str  # framework, vendor, rapids, project
    claim: str
    amd_claim: str
    claim_source: str
    exit: int
    libraries: tuple[LibraryExpectation, ...]
    extra: tuple[ExtraCheck, ...]
    notes: str = ""
    driver_floor_known: bool = False  # every stated driver floor must name a driver
    manifest: str = "manifest"  # the file it comes from: "manifest" or "census"
    family: str = ""  # the census's family (nvidia, rapids, pytorch, ...); empty in manifest.toml
    ci: bool = True  # census wheels run in CI only when marked ci = true (manifest.toml: by size)
    ignores: tuple[Ignore, ...] = ()  # ignore-library entries the check runs with
    gates: tuple[Gate, ...] = ()  # the project's recorded host gating, each citing its source line

    def config(self) -> str:
        """The [tool.archaudit] table of ``ignores`` and ``gates`` (empty: none)."""
        if not self.ignores and not self.gates:
            return ""
        rows = ["[tool.archaudit]"]
        for i in self.ignores:
            rows += [
                "[[tool.archaudit.ignore-library]]",
                f"code = {_toml(i.code)}",
                f"library = {_toml(i.library)}",
                f"reason = {_toml(i.reason)}",
            ]
        for g in self.gates:
            if g.paths:
                rows += [
                    "[[tool.archaudit.library-group]]",
                    f"paths = [{', '.join(_toml(p) for p in g.paths)}]",
                    f"reason = {_toml(g.reason)}",
                ]
            else:
                rows += ["[[tool.archaudit.library]]", f"path = {_toml(g.path)}"]
                if g.kernels:
                    rows.append(f"kernels = [{', '.join(_toml(k) for k in g.kernels)}]")
                rows += [f"arch = {_toml(g.arch)}", f"reason = {_toml(g.reason)}"]
        return "\n".join(rows) + "\n"

    @property
    def name(self) -> str:
        return self.spec.split("==")[0]

    @property
    def version(self) -> str:
        return self.spec.split("==")[1]

    @property
    def platform(self) -> str:
        return self.filename[:-4].split("-")[-1]

    @property
    def slow(self) -> bool:
        return self.size_mb > SMALL_MB or not self.ci

    def claim_args(self) -> list[str]:
        args = ["--arch", self.claim] if self.claim else []
        return args + (["--amd-arch", self.amd_claim] if self.amd_claim else [])

    def expectation(self, library: str) -> LibraryExpectation | None:
        """The first entry whose glob matches: list specific paths before ``*``."""
        return next((e for e in self.libraries if e.matches(library)), None)


SMALL_MB = 100.0  # wheels up to this size run in CI's test; larger ones are marked slow


def cache_dir() -> Path:
    """$ARCHAUDIT_WHEEL_CACHE, else $XDG_CACHE_HOME/archaudit/wheels, else ~/.cache/archaudit/wheels."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    d = Path(os.environ.get("ARCHAUDIT_WHEEL_CACHE") or root / "archaudit" / "wheels")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _library(raw: dict[str, Any]) -> LibraryExpectation:
    verdict = raw["verdict"]
    if verdict not in VERDICTS:
        raise ValueError(f"library {raw['path']}: verdict {verdict!r} is not one of {VERDICTS}")
    return LibraryExpectation(raw["path"], verdict, raw["evidence"], tuple(raw.get("codes", ())), raw.get("issue", ""))


def _extra(raw: dict[str, Any]) -> ExtraCheck:
    return ExtraCheck(
        raw["name"],
        tuple(raw["args"]),
        int(raw["exit"]),
        raw["evidence"],
        tuple(raw.get("codes", ())),
        tuple(raw.get("absent", ())),
        raw.get("issue", ""),
    )


def _toml(text: str) -> str:
    """A TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def load(path: Path | None = None) -> list[Wheel]:
    """Every wheel of one manifest file, or of both (manifest.toml, then census.toml), in file order."""
    paths = (path,) if path is not None else MANIFESTS
    wheels = [w for p in paths for w in _load_one(p)]
    ids = [w.id for w in wheels]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate wheel ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    return wheels


def _load_one(path: Path) -> list[Wheel]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    census = path.name == CENSUS.name
    wheels = []
    for raw in data["wheel"]:
        libs = tuple(_library(x) for x in raw.get("library", ()))
        wheels.append(
            Wheel(
                id=raw["id"],
                spec=raw["spec"],
                filename=raw["file"],
                size_mb=float(raw["size_mb"]),
                stack=raw["stack"],
                kind=raw["kind"],
                claim=raw.get("claim", ""),
                amd_claim=raw.get("amd_claim", ""),
                claim_source=raw["claim_source"],
                exit=int(raw["exit"]),
                libraries=libs,
                extra=tuple(_extra(x) for x in raw.get("extra", ())),
                notes=raw.get("notes", ""),
                driver_floor_known=bool(raw.get("driver_floor_known", False)),
                manifest="census" if census else "manifest",
                family=raw.get("family", ""),
                ci=bool(raw.get("ci", not census)),
                ignores=tuple(Ignore(x["code"], x["library"], x["reason"]) for x in raw.get("ignore", ())),
                gates=tuple(
                    Gate(
                        x["reason"],
                        x.get("path", ""),
                        x.get("arch", ""),
                        tuple(x.get("paths", ())),
                        tuple(x.get("kernels", ())),
                    )
                    for x in raw.get("gate", ())
                ),
            )
        )
    return wheels
