"""Finding codes: one stable code per cause, each with a documented cause and fix.

Codes never change meaning. E = could not verify (always fails closed), C = claims,
G = coverage per library, K = coverage per container and kernel, D = driver, X = config.
The vocabulary (`Code`, `CodeInfo`, the severities) and each family's table are in codes/; this
module assembles them into `CODES` and holds the `Finding` record and its folding.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Final, Generic, Protocol, TypeVar

from .codes import ERROR, INFO, WARNING, Code, CodeInfo, Severity
from .codes.coverage import COVERAGE
from .codes.drivers_config import DRIVERS_CONFIG
from .codes.unverified import UNVERIFIED


@dataclass(frozen=True, slots=True)
class Finding:
    """One verdict about one subject (a target, a library, a container)."""

    code: Code
    severity: Severity
    subject: str  # the library path, or the target for wheel-wide findings
    message: str
    data: tuple[tuple[str, object], ...] = ()  # machine-readable details for JSON
    # A folded finding (Fold) stands for `count` findings of its code on its subject; `examples`
    # are the first FOLD_EXAMPLES of their messages (empty when it stands for itself alone).
    count: int = 1
    examples: tuple[str, ...] = ()

    def get(self, key: str, default: object = None) -> object:
        return dict(self.data).get(key, default)

    def folded(self, count: int, examples: tuple[str, ...]) -> Finding:
        return replace(self, count=count, examples=examples)


# ---- folding: findings of one code on one subject, reported once ----

FOLD_EXAMPLES: Final = 5  # a sixth finding of one code on one subject folds them all into one


class Foldable(Protocol):
    """What a Fold folds: a Finding, or a reader's Problem (model.Problem)."""

    @property
    def message(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def examples(self) -> tuple[str, ...]: ...
    def folded(self: _F, count: int, examples: tuple[str, ...]) -> _F: ...


_F = TypeVar("_F", bound=Foldable)


@dataclass(slots=True)
class _Group(Generic[_F]):
    seq: int  # where its first item came
    kept: list[tuple[int, _F]]  # the first FOLD_EXAMPLES items, with where each came
    count: int = 0


class Fold(Generic[_F]):
    """Problems or findings folded as they are collected, so what is kept does not grow with the
    number of repeats (a hostile member makes one problem per 32 bytes, docs/threat-model.md):
    up to FOLD_EXAMPLES of one key are kept as they are, in the order they came; more become one,
    the first, with the group's count and its first FOLD_EXAMPLES messages, where the first came.
    Items already folded count as many as they stand for."""

    def __init__(self, key: Callable[[_F], Hashable]):
        self._key = key
        self._groups: dict[Hashable, _Group[_F]] = {}
        self._seq = 0

    def add(self, item: _F) -> None:
        self.note(self._key(item), lambda: item, item.count)

    def note(self, key: Hashable, make: Callable[[], _F], count: int = 1) -> None:
        """One more item of `key`, made only while its group keeps items whole."""
        self._seq += 1
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = _Group(self._seq, [])
        g.count += count
        if len(g.kept) < FOLD_EXAMPLES:
            g.kept.append((self._seq, make()))

    def extend(self, items: Iterable[_F]) -> Fold[_F]:
        for item in items:
            self.add(item)
        return self

    def result(self) -> list[_F]:
        out: list[tuple[int, _F]] = []
        for g in self._groups.values():
            if g.count <= FOLD_EXAMPLES:
                out += g.kept
                continue
            examples = tuple(m for _, x in g.kept for m in (x.examples or (x.message,)))[:FOLD_EXAMPLES]
            out.append((g.seq, g.kept[0][1].folded(g.count, examples)))
        return [item for _, item in sorted(out, key=lambda pair: pair[0])]


def finding_key(f: Finding) -> Hashable:
    """Findings fold by code and subject; the answers about different GPUs (G008, G009, G012,
    one per --gpu or claimed GPU) are different findings."""
    return f.code, f.subject, str(f.get("gpu", ""))


def fold_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings with every run of more than FOLD_EXAMPLES of one code on one subject folded."""
    return Fold(finding_key).extend(findings).result()


_CODES = [*UNVERIFIED, *COVERAGE, *DRIVERS_CONFIG]
CODES: dict[Code, CodeInfo] = {c.code: c for c in _CODES}


def severity(code: Code) -> Severity:
    return CODES[code].severity


def means_unverified(f: Finding) -> bool:
    """The one test of "this finding means unverified": a reader's error (E0xx), so what it
    concerns was not verified and can never count as passing or running."""
    return f.code.startswith("E") and f.severity == ERROR


def make_finding(code: Code, subject: str, message: str, **data: object) -> Finding:
    """A finding of a registered code, its severity from the code table."""
    return Finding(code, severity(code), subject, message, tuple(data.items()))


__all__ = [
    "Code",
    "CodeInfo",
    "CODES",
    "ERROR",
    "Finding",
    "FOLD_EXAMPLES",
    "Fold",
    "Foldable",
    "INFO",
    "finding_key",
    "fold_findings",
    "make_finding",
    "means_unverified",
    "Severity",
    "severity",
    "WARNING",
]
