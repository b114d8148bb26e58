"""The rule layer: one function per finding code, each registered beside its definition, and
the one order in which they run and report (LIBRARY_ORDER, TARGET_ORDER below).

A library rule reads one library's facts (archaudit.judge.facts.LibraryFacts, computed once) and
returns its findings; a target rule reads the facts of a whole target (its libraries'
facts, the claim, the embedded claims). No rule reads a file, a flag of the CLI or how
much will be printed: the same input gives the same findings under every ``--detail``.

The rules live by family: ``problems`` (E codes), ``coverage`` (NVIDIA coverage, G001 and the
G codes around it), ``vendor`` (vendor libraries' contracts), ``kernels`` (K codes), ``drivers``
(D codes), ``named`` (the --gpu answers), ``amd`` (AMD bundle entries) and ``target`` (C codes
and the whole target's G codes); ``common`` holds what they share.

Adding a code: its row in archaudit.findings, its rule in its family's module (with a docstring
saying why it exists) decorated ``@library_rule(Code.X)`` or ``@target_rule(Code.X)``, its code
in LIBRARY_ORDER or TARGET_ORDER (its place there is its place in the report), and its tests in
its family's module of tests/judge/rules/.
"""

from __future__ import annotations

from ...findings import CODES, Code, Finding
from ..facts import LibraryFacts
from .amd import amd_kernel_gaps, amd_missing, rule_g014, rule_g015, rule_g018
from .common import (
    LIBRARY_REGISTERED,
    READERS,
    TARGET_REGISTERED,
    LibraryRule,
    Readers,
    TargetFacts,
    TargetRule,
    demangle,
    finding,
    library_rule,
    target_rule,
)
from .coverage import (
    rule_g001,
    rule_g002,
    rule_g003,
    rule_g004,
    rule_g005,
    rule_g007,
    rule_g010,
    rule_g012,
    rule_g013,
    rule_g017,
)
from .drivers import rule_d001, rule_d002
from .kernels import rule_k001, rule_k002, rule_k003, rule_k004
from .named import on_gpu, rule_g008, rule_g009
from .problems import rule_reader_problems, rule_target_problems
from .target import rule_c001, rule_c002, rule_c003, rule_g006, rule_g011, rule_g019
from .vendor import rule_g016, rule_g020, rule_k005

LIBRARY_ORDER: tuple[Code | Readers, ...] = (
    READERS,
    Code.G010,
    Code.G007,
    Code.G017,
    Code.G001,
    Code.G012,
    Code.G013,
    Code.G016,
    Code.G020,
    Code.G005,
    Code.G002,
    Code.G003,
    Code.G004,
    Code.K001,
    Code.K002,
    Code.K003,
    Code.K004,
    Code.K005,
    Code.K006,
    Code.D002,
    Code.D001,
    Code.G008,
    Code.G009,
    Code.G014,
    Code.G015,
    Code.G018,
)
"""The order in which the library rules run and their findings are reported: the reader's
problems first, then coverage, kernels, drivers, the --gpu answers and AMD's bundle entries."""

TARGET_ORDER: tuple[Code | Readers, ...] = (READERS, Code.C002, Code.C003, Code.C001, Code.G006, Code.G011, Code.G019)
"""The order in which the target rules run and their findings are reported."""

READER_CODES = tuple(c for c in CODES if c.startswith("E"))
"""Codes the readers produce (archaudit.model.Problem); the rule layer passes them through."""

OTHER_CODES = (Code.X001, Code.X002)
"""Codes produced by the configuration around judgement: the filters' stale entries
(archaudit.judge.audit.apply_filters) and the data members left out (archaudit.judge.audit.judge)."""

LIBRARY_RULES: tuple[tuple[Code | Readers, LibraryRule], ...] = tuple(
    (code, LIBRARY_REGISTERED[code]) for code in LIBRARY_ORDER
)
"""Library rules, in the order their findings are reported (LIBRARY_ORDER)."""

TARGET_RULES: tuple[tuple[Code | Readers, TargetRule], ...] = tuple(
    (code, TARGET_REGISTERED[code]) for code in TARGET_ORDER
)
"""Target rules, in the order their findings are reported (TARGET_ORDER)."""

REGISTRY: dict[Code, LibraryRule | TargetRule] = {
    **{code: rule for code, rule in LIBRARY_RULES if code != READERS},
    **{code: rule for code, rule in TARGET_RULES if code != READERS},
}
"""Every finding code the rule layer decides, with its one rule."""


def judge_library_rules(f: LibraryFacts) -> list[Finding]:
    """Every library rule's findings for one library, in registry order."""
    return [x for _, rule in LIBRARY_RULES for x in rule(f)]


def judge_target_rules(t: TargetFacts) -> list[Finding]:
    """Every target rule's findings, in registry order."""
    return [x for _, rule in TARGET_RULES for x in rule(t)]


__all__ = [
    "LIBRARY_ORDER",
    "LIBRARY_RULES",
    "OTHER_CODES",
    "READERS",
    "READER_CODES",
    "REGISTRY",
    "TARGET_ORDER",
    "TARGET_RULES",
    "LibraryRule",
    "Readers",
    "TargetFacts",
    "TargetRule",
    "amd_kernel_gaps",
    "amd_missing",
    "demangle",
    "finding",
    "judge_library_rules",
    "judge_target_rules",
    "library_rule",
    "on_gpu",
    "rule_c001",
    "rule_c002",
    "rule_c003",
    "rule_d001",
    "rule_d002",
    "rule_g001",
    "rule_g002",
    "rule_g003",
    "rule_g004",
    "rule_g005",
    "rule_g006",
    "rule_g007",
    "rule_g008",
    "rule_g009",
    "rule_g010",
    "rule_g011",
    "rule_g012",
    "rule_g013",
    "rule_g014",
    "rule_g015",
    "rule_g016",
    "rule_g017",
    "rule_g018",
    "rule_g019",
    "rule_g020",
    "rule_k001",
    "rule_k002",
    "rule_k003",
    "rule_k004",
    "rule_k005",
    "rule_reader_problems",
    "rule_target_problems",
    "target_rule",
]
