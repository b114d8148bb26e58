"""The finding-code vocabulary: the `Code` StrEnum, severities and `CodeInfo`, a code's meaning.

The table of what each code means is in this package, one module per family (unverified.py:
E, could not verify; coverage.py: C, G and K, what a wheel claims and carries; drivers_config.py:
D and X, driver floors and the config file); findings.py assembles it into `CODES`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from typing import Final, Literal

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, Enum):
        """enum.StrEnum before 3.11: the member is its value, in str() and in f-strings."""

        __str__ = str.__str__
        __format__ = str.__format__  # type: ignore[assignment]


Severity = Literal["error", "warning", "info"]
ERROR: Final = "error"  # fails the check
WARNING: Final = "warning"  # reported; fails only under the switch that asks for it
INFO: Final = "info"  # reported, never fails


class Code(StrEnum):
    """Every finding code, one member each: `Code.G001` is the string "G001" (JSON, text, CLI
    arguments), and a misspelt code is a type error. Its cause and fix are in CODES."""

    E001 = "E001"
    E002 = "E002"
    E003 = "E003"
    E004 = "E004"
    E010 = "E010"
    E011 = "E011"
    E012 = "E012"
    E013 = "E013"
    E014 = "E014"
    E015 = "E015"
    E020 = "E020"
    E021 = "E021"
    E030 = "E030"
    E031 = "E031"
    E032 = "E032"
    E033 = "E033"
    E099 = "E099"
    C001 = "C001"
    C002 = "C002"
    C003 = "C003"
    G001 = "G001"
    G002 = "G002"
    G003 = "G003"
    G004 = "G004"
    G005 = "G005"
    G006 = "G006"
    G007 = "G007"
    G008 = "G008"
    G009 = "G009"
    G010 = "G010"
    G011 = "G011"
    G012 = "G012"
    G013 = "G013"
    G014 = "G014"
    G015 = "G015"
    G016 = "G016"
    G017 = "G017"
    G018 = "G018"
    G019 = "G019"
    G020 = "G020"
    K001 = "K001"
    K002 = "K002"
    K003 = "K003"
    K004 = "K004"
    K005 = "K005"
    K006 = "K006"
    D001 = "D001"
    D002 = "D002"
    X001 = "X001"
    X002 = "X002"


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """What a code means: its severity, title, cause and fix (README "Finding codes", `explain`)."""

    code: Code
    severity: Severity
    title: str
    cause: str
    fix: str
    example: str = ""


__all__ = ["Code", "CodeInfo", "ERROR", "INFO", "Severity", "WARNING"]
