"""The per-wheel task: read one wheel (a file, or a URL by range requests), judge it, hand back
plain frozen data. The same function runs in a local process pool and on a Ray cluster; it
never touches the database (one writer does, archaudit.index.store).
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal

from ..claims import parse_claim
from ..findings import Code
from ..judge.audit import Report, TargetReport, audit
from ..judge.policy import Policy
from ..model import Problem, TargetInventory
from ..read.artifacts import archive_inventory
from ..read.fatbin import DEFAULT_MAX_PAYLOAD
from ..read.zipread import CHUNK, Member
from .remote import RangeReader, RemoteError
from .sources import WheelRef

ClaimSource = Literal["given", "embedded", "none"]
Verdict = Literal["pass", "fail", "unusable"]


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """What every wheel of one run is judged with (shipped to each worker once per wheel)."""

    claim: str | None = None  # --arch, in any spelling claims.parse_claim reads
    decode: bool = True  # decode payloads: kernel names and verified sizes
    max_payload: int = DEFAULT_MAX_PAYLOAD
    scope: str = ""  # a glob over library member paths; '' = every library


@dataclass(frozen=True, slots=True)
class WheelResult:
    """What the writer stores for one wheel."""

    ref: WheelRef
    sha256: str
    sha256_checked: bool
    size: int
    fetched: int  # bytes read from the file or received over HTTP
    requests: int  # HTTP requests made (0 for a local file)
    seconds: float
    claim_source: ClaimSource
    verdict: Verdict
    exit_code: int
    report: TargetReport  # its .inventory is what was read

    @property
    def inventory(self) -> TargetInventory:
        return self.report.inventory


class _CountingFile(io.RawIOBase):
    """A local file whose reads are counted into a shared tally."""

    def __init__(self, path: str, tally: list[int]):
        super().__init__()
        self._f = open(path, "rb")  # noqa: SIM115 - closed with this object
        self._tally = tally

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self._tally[0] += len(data)
        return data

    def close(self) -> None:
        self._f.close()
        super().close()


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK * 4):
            h.update(block)
    return h.hexdigest()


def _keep(scope: str) -> Callable[[str], bool] | None:
    """The --libraries filter over member paths, or None for every library."""
    if not scope:
        return None
    return lambda path: fnmatch.fnmatch(path, scope)


def _local(ref: WheelRef, opts: TaskOptions, known_sha: str | None) -> tuple[TargetInventory, str, bool, int, int]:
    sha = known_sha or file_sha256(ref.location)
    size = os.path.getsize(ref.location)
    tally = [0]
    with open(ref.location, "rb") as f:
        fd = f.fileno()

        def read_at(at: int, n: int) -> bytes:
            data = os.pread(fd, n, at)
            tally[0] += len(data)
            return data

        def opener() -> IO[bytes]:
            return _CountingFile(ref.location, tally)  # type: ignore[return-value]

        inv = archive_inventory(
            ref.file,
            size,
            read_at,
            opener,
            jobs=1,
            decode=opts.decode,
            max_payload=opts.max_payload,
            keep=_keep(opts.scope),
        )
    return inv, sha, True, size, tally[0]


def _remote(ref: WheelRef, opts: TaskOptions) -> tuple[TargetInventory, int, int, int]:
    reader = RangeReader(ref.location)
    try:

        def on_members(members: list[Member]) -> None:
            reader.know_members({m.data_offset: m.compressed_size for m in members if m.data_offset >= 0})

        inv = archive_inventory(
            ref.file,
            reader.size,
            reader.read_at,
            reader.open,  # type: ignore[arg-type]
            jobs=1,
            decode=opts.decode,
            max_payload=opts.max_payload,
            keep=_keep(opts.scope),
            on_members=on_members,
        )
    finally:
        reader.close()
    return inv, reader.size, reader.fetched, reader.requests


def stand_in_key(ref: WheelRef) -> str:
    """The key of a wheel whose sha256 is not known: its URL, or its absolute path."""
    return f"url:{ref.location}" if ref.remote else f"path:{os.path.abspath(ref.location)}"


def failed(ref: WheelRef, opts: TaskOptions, known_sha: str | None, why: str) -> WheelResult:
    """The result for a wheel whose worker died (killed for memory, a lost node): an unusable row
    with E099, which a rerun judges again."""
    inv = TargetInventory(
        ref.file, "wheel", (), (Problem(Code.E099, f"the worker judging it failed: {why}"),), unusable=True
    )
    report = audit([inv], parse_claim(opts.claim, "--arch") if opts.claim else None, Policy())
    sha = known_sha or ref.sha256 or stand_in_key(ref)
    return WheelResult(
        ref,
        sha,
        False,
        ref.size or 0,
        0,
        0,
        0.0,
        "given" if opts.claim else "none",
        "unusable",
        report.exit_code,
        report.targets[0],
    )


def audit_wheel(ref: WheelRef, opts: TaskOptions, known_sha: str | None = None) -> WheelResult:
    """Read and judge one wheel. Never raises for a bad wheel: what cannot be read is a result
    whose inventory carries the problem (E001 unreadable, E099 internal), so it becomes a row."""
    start = time.perf_counter()
    sha, checked, size, fetched, requests = ref.sha256 or "", False, ref.size or 0, 0, 0
    try:
        if ref.remote:
            inv, size, fetched, requests = _remote(ref, opts)
            sha = ref.sha256 or stand_in_key(ref)
        else:
            inv, sha, checked, size, fetched = _local(ref, opts, known_sha)
    except (RemoteError, OSError) as e:
        inv = TargetInventory(ref.file, "wheel", (), (Problem(Code.E001, f"cannot read: {e}"),), unusable=True)
        sha = sha or stand_in_key(ref)
    except MemoryError:
        inv = TargetInventory(
            ref.file, "wheel", (), (Problem(Code.E012, "ran out of memory while verifying"),), unusable=True
        )
        sha = sha or stand_in_key(ref)
    except Exception as e:  # noqa: BLE001 - fail closed: one bad wheel is a row, never a lost run
        inv = TargetInventory(
            ref.file, "wheel", (), (Problem(Code.E099, f"internal error: {type(e).__name__}: {e}"),), unusable=True
        )
        sha = sha or stand_in_key(ref)
    claim = parse_claim(opts.claim, "--arch") if opts.claim else None
    report: Report = audit([inv], claim, Policy())
    t = report.targets[0]
    source: ClaimSource = "given" if claim is not None else "embedded" if t.claim is not None else "none"
    code = report.exit_code
    verdict: Verdict = "unusable" if code == 2 else "fail" if code == 1 else "pass"
    return WheelResult(
        ref, sha, checked, size, fetched, requests, time.perf_counter() - start, source, verdict, code, t
    )


__all__ = [
    "ClaimSource",
    "TaskOptions",
    "Verdict",
    "WheelResult",
    "audit_wheel",
    "failed",
    "file_sha256",
    "stand_in_key",
]
