"""Vendor libraries and the contract their vendor documents, per release line (data/vendor.json).

A vendor library (cuBLAS, cuDNN, NCCL, ...) is built and tested by its vendor for a documented
range of GPUs, and its host code picks a container per GPU: a per-kernel gap inside that range
is the vendor's dispatch, not a crash. A library is one only where its file name is the row's
AND its own bytes say so (an identity string only that library carries, or the vendor's
version string, found by the reader's one pass: Library.statements). Its release line is the
CUDA major that built its code (its cubins' toolkit notes, else its PTX, else the CUDA runtime
it links; a version string that names it wins) and, where its bytes carry the vendor's version,
that version. Pure: no file is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from . import cuda as arch
from .cuda import CC

Version = tuple[int, ...]


def _version(text: str) -> Version:
    return tuple(int(p) for p in text.split("."))


def _cc(text: str) -> CC:
    major, _, minor = text.partition(".")
    return int(major), int(minor)


@dataclass(frozen=True, slots=True)
class Row:
    """One release line of a vendor library: the GPUs and driver its vendor documents for it."""

    library: str
    cuda: int | None  # the CUDA major of the builds it speaks for (None: any)
    since: Version | None  # the first release of the library it speaks for
    built_from: CC | None  # the oldest CUDA release that built it, where the vendor says so
    built_until: CC | None
    first: CC
    last: CC | None
    drivers: tuple[tuple[str, str], ...]  # (os, minimum driver) the vendor documents
    source: str  # the document, in words with its address
    toolkit: bool = False  # its GPUs are those of the toolkit that built it ('range_of', no 'to')

    @property
    def name(self) -> str:
        """The row as a reader finds it in data/vendor.json: 'cuDNN 9.17 for CUDA 12'."""
        since = f" {'.'.join(map(str, self.since))}" if self.since else ""
        cuda = f" for CUDA {self.cuda}" if self.cuda is not None else ""
        return f"{self.library}{since}{cuda}"

    def covers(self, gpu: CC) -> bool:
        gpu = arch.canonical_cc(gpu)
        return gpu >= self.first and (self.last is None or gpu <= self.last)

    @property
    def text(self) -> str:
        first = f"{self.first[0]}.{self.first[1]}"
        if self.last is None:
            return f"{first} and newer"
        return first if self.last == self.first else f"{first} to {self.last[0]}.{self.last[1]}"

    def driver(self, os_name: str) -> str | None:
        """The minimum driver the vendor documents for this release on ``os_name``, or None."""
        return dict(self.drivers).get(os_name)


@dataclass(frozen=True, slots=True)
class Library:
    """A vendor library's table entry: how it is recognised, and its rows (oldest first)."""

    name: str
    file: re.Pattern[str]
    identity: tuple[str, ...]
    marker: str | None  # the vendor's version string starts with this
    pattern: re.Pattern[str] | None  # and reads so
    by_name: bool  # identified by its file name alone (a project's own build for one GPU)
    known_through: Version | None
    rows: tuple[Row, ...]
    # the vendor's kernel-name convention: a container of another library every kernel of which
    # it names is the vendor's code linked in statically (None: never recognised so)
    static_kernels: re.Pattern[str] | None = None
    # more version strings of the same vendor (another spelling in older releases): (marker, pattern)
    also: tuple[tuple[str, re.Pattern[str]], ...] = ()

    @property
    def versions(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        """Every (marker, pattern) of the vendor's version strings."""
        first = ((self.marker, self.pattern),) if self.marker and self.pattern else ()
        return first + self.also


@dataclass(frozen=True, slots=True)
class Identified:
    """A library identified as a vendor library, and the row its contract comes from."""

    row: Row
    evidence: str  # what in its bytes identified it
    version: Version | None  # the vendor's version its bytes carry
    built: CC | None  # the CUDA release that built its code
    newer: str  # "" or the release the table does not know yet ("cuDNN 9.28"), judged by ``row``
    dispatches: bool = True  # its host picks a container per GPU (False: a project's build, by name)
    static: bool = False  # its code linked statically into another library (identify_static)

    @property
    def library(self) -> str:
        return self.row.name

    @property
    def text(self) -> str:
        return self.row.text

    @property
    def source(self) -> str:
        return self.row.source

    def covers(self, gpu: CC) -> bool:
        return self.row.covers(gpu)


@cache
def _table() -> dict[str, Any]:
    return arch._data("vendor.json")


def _range(table: dict[str, Any], row: dict[str, Any]) -> tuple[CC, CC | None, tuple[tuple[str, str], ...]]:
    """A row's GPUs and drivers: its own, else its CUDA major's (drivers.minor of data/cuda.json)."""
    base = table["cuda"].get(row.get("range_of", ""), {})
    first = _cc(row.get("from", base.get("from", "0.0")))
    if "from" in row and "from" in base:
        first = max(first, _cc(base["from"]))
    last_text = row.get("to", base.get("to"))
    drivers: dict[str, str] = dict(row.get("driver", {}))
    if not drivers and "range_of" in row:
        for os_name in ("linux", "windows"):
            try:
                drivers[os_name] = arch.min_driver((int(row["range_of"]), 0), os_name, kind="minor")
            except LookupError:
                continue
    return first, (_cc(last_text) if last_text else None), tuple(sorted(drivers.items()))


@cache
def libraries() -> tuple[Library, ...]:
    """Every vendor library of data/vendor.json."""
    table = _table()
    out = []
    for name, lib in table["libraries"].items():
        rows = []
        for r in lib["rows"]:
            first, last, drivers = _range(table, r)
            rows.append(
                Row(
                    name,
                    int(r["cuda"]) if "cuda" in r else None,
                    _version(r["since"]) if "since" in r else None,
                    _cc(r["built_from"]) if "built_from" in r else None,
                    _cc(r["built_until"]) if "built_until" in r else None,
                    first,
                    last,
                    drivers,
                    table["sources"][r["source"]],
                    bool(lib.get("toolkit_component")) and "range_of" in r and "to" not in r,
                )
            )
        version, *also = lib["version"] if isinstance(lib.get("version"), list) else [lib.get("version")]
        static = lib.get("static_kernels")
        out.append(
            Library(
                name,
                re.compile(lib["file"]),
                tuple(lib.get("identity", ())),
                version["marker"] if version else None,
                re.compile(version["pattern"]) if version else None,
                bool(lib.get("by_name")),
                _version(lib["known_through"]) if "known_through" in lib else None,
                tuple(rows),
                re.compile(static["pattern"]) if static else None,
                tuple((v["marker"], re.compile(v["pattern"])) for v in also),
            )
        )
    return tuple(out)


@cache
def identity_strings() -> tuple[bytes, ...]:
    """The exact strings the reader looks for in every library (each kept once when found)."""
    return tuple(dict.fromkeys(s.encode("utf-8") for lib in libraries() for s in lib.identity))


@cache
def version_markers() -> tuple[bytes, ...]:
    """The first bytes of each vendor version string: the reader keeps the string that follows."""
    return tuple(dict.fromkeys(marker.encode("utf-8") for lib in libraries() for marker, _ in lib.versions))


def _read_version(lib: Library, carried: tuple[str, ...]) -> tuple[Version | None, int | None]:
    """The vendor version (and the CUDA major it names) a library's own bytes carry."""
    for text in carried:
        m = next((m for _, pattern in lib.versions if (m := pattern.match(text))), None)
        if m:
            parts = m.groupdict()
            version = tuple(int(parts[k]) for k in ("major", "minor", "patch") if parts.get(k) is not None)
            return version, (int(parts["cuda"]) if parts.get("cuda") else None)
    return None, None


def identify(file_name: str, carried: tuple[str, ...], built: CC | None, noted: CC | None = None) -> Identified | None:
    """The vendor library a file is, by its name AND its own bytes (``carried``: the identity
    strings and version strings the reader found in it), with the row its contract comes from;
    None where nothing identifies it (then it is judged as a project's own code)."""
    for lib in libraries():
        if not lib.file.match(file_name):
            continue
        version, cuda = _read_version(lib, carried)
        said = next((s for s in lib.identity if s in carried), None)
        if lib.by_name:
            return Identified(lib.rows[-1], f"its file name {file_name}", None, built, "", dispatches=False)
        if said is None and version is None:
            return None
        shown = ".".join(map(str, version or ()))
        evidence = f'its bytes hold "{said}"' if said else f"its bytes carry its version {shown}"
        return _choose(
            lib, version, cuda if cuda is not None else (built[0] if built else None), built, evidence, noted
        )
    return None


def identify_static(
    carried: tuple[str, ...], built: CC | None, noted: CC | None = None
) -> tuple[tuple[Library, Identified], ...]:
    """The vendor libraries whose code a library that is not one of them may carry linked in
    statically (libtorch_cuda.so of torch 1.10.2 links cuBLAS and cuFFT): its own bytes
    (``carried``) hold the vendor's identity or version string, and the table gives the vendor's
    kernel-name convention (``static_kernels``), each with the row of its release. The release
    line is the CUDA major that built the library's code (``built``), else the one a vendor's
    version string in the same bytes names (NCCL's "+cuda10.2": static libraries are linked from
    one toolkit); nothing dating it, no row. Which containers are the vendor's is the judge's:
    those every kernel of which the convention names."""
    named = next((c for lib in libraries() if (c := _read_version(lib, carried)[1]) is not None), None)
    out = []
    for lib in libraries():
        if lib.static_kernels is None or lib.by_name:
            continue
        version, cuda = _read_version(lib, carried)
        said = next((s for s in lib.identity if s in carried), None)
        if said is None and version is None:
            continue
        shown = ".".join(map(str, version or ()))
        evidence = f'its bytes hold "{said}"' if said else f"its bytes carry its version {shown}"
        major = cuda if cuda is not None else (built[0] if built else named)
        got = _choose(lib, version, major, built, evidence, noted)
        if got is not None:
            out.append((lib, replace(got, static=True)))
    return tuple(out)


def _choose(
    lib: Library, version: Version | None, cuda: int | None, built: CC | None, evidence: str, noted: CC | None = None
) -> Identified | None:
    """The row of a library's release: the last of its CUDA major whose 'since' and build
    bounds allow it. A CUDA major or version newer than the table knows takes the newest row,
    and says which release to add."""
    line = _line(lib, cuda)
    if line is None:
        return None
    cuda, newer = line
    of_line = [r for r in lib.rows if r.cuda is None or r.cuda == cuda]
    fits = [r for r in of_line if built is None or newer or _built_within(r, built)]
    if not fits:
        fits = of_line
    if version is not None:
        if not newer:
            newer = _newer_release(lib, version)
        fits = [r for r in fits if r.since is None or r.since <= version]  # none: older than every row
    if not fits:
        return None
    return Identified(_as_built(fits[-1], noted, newer), evidence, version, built, newer)


def _as_built(row: Row, noted: CC | None, newer: str) -> Row:
    """A toolkit math library's row as the release that built it supports: no GPU newer than that
    release knows (cuBLAS built by CUDA 12.6 stops at 9.0; Blackwell came with 12.8), where its
    cubins record that release (``noted``: their toolkit notes, never a release guessed from PTX
    or a package name), the line's range is closed and the release's architectures are recorded
    (data/cuda.json)."""
    if not row.toolkit or row.last is None or noted is None or newer:
        return row
    newest = arch.newest_known(noted)
    if newest is None or newest >= row.last:
        return row
    return replace(
        row,
        last=newest,
        source=f"{row.source}; this build is CUDA {noted[0]}.{noted[1]}'s, whose nvcc knows GPUs through "
        f"{newest[0]}.{newest[1]} (data/cuda.json cmake_all)",
    )


def _line(lib: Library, cuda: int | None) -> tuple[int | None, str] | None:
    """The CUDA major whose rows judge the library, and the release to add where it is newer
    than the table knows (else ""); None where no row can be chosen: nothing says which CUDA
    built it, or a line older than the table documents."""
    majors = sorted({r.cuda for r in lib.rows if r.cuda is not None})
    if not majors:
        return cuda, ""
    if cuda is None:
        return None
    if cuda in majors:
        return cuda, ""
    if cuda < majors[-1]:
        return None
    return majors[-1], f"{lib.name} built by CUDA {cuda}"


def _built_within(r: Row, built: CC) -> bool:
    """Whether the CUDA release that built the library is within a row's build bounds."""
    return (r.built_from is None or built >= r.built_from) and (r.built_until is None or built <= r.built_until)


def _newer_release(lib: Library, version: Version) -> str:
    """The release to add where the library's version is newer than its rows know, else ""."""
    if lib.known_through is not None and version[: len(lib.known_through)] > lib.known_through:
        return f"{lib.name} {'.'.join(map(str, version))}"
    return ""


__all__ = [
    "Identified",
    "Library",
    "Row",
    "identify",
    "identify_static",
    "identity_strings",
    "libraries",
    "version_markers",
]
