"""Mangled kernel names made short for people: text only (JSON keeps every name as the binary has it).

A cuBLAS kernel's Itanium name can be 2.5 KB of template arguments. The default text shows it as
its qualified name with the template arguments elided (`cutlass::Kernel2<…>`), demangled by
`c++filt` where the machine has one and by a pure reading of the name's prefix where it has not
(or where `c++filt` fails): a missing demangler never fails a check.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable

from ..judge.rules import demangle

MANGLED = re.compile(r"(?<![A-Za-z0-9_$.])_Z[A-Za-z0-9_$.]+")
CXXFILT_SECONDS = 10.0  # one c++filt run for every name of a report; measured well under 0.1 s
FALLBACK_CHARS = 40  # a name neither reading understands is cut to this many characters
ANONYMOUS = "(anonymous namespace)"


def _elide(demangled: str) -> str:
    """`void ns::k<int, 4>(float*, int)` -> `ns::k<…>`: template arguments elided, parameters and
    return type dropped."""
    text = demangled.replace(ANONYMOUS, "{anonymous}")
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    short = "".join(out).strip().rsplit(" ", 1)[-1]  # the return type of a template function
    return short.replace("{anonymous}", ANONYMOUS) or demangled


def _pure(name: str) -> str:
    """The prefix reading of judge.rules.demangle, `<…>` added where template arguments follow."""
    base = demangle(name)
    if base == name:
        return name if len(name) <= FALLBACK_CHARS else name[:FALLBACK_CHARS - 1] + "…"
    encoded = "".join(f"{len(part)}{part}" for part in base.split("::"))
    at = name.find(encoded)
    return base + "<…>" if at >= 0 and name[at + len(encoded):at + len(encoded) + 1] == "I" else base


def _cxxfilt(names: list[str]) -> list[str] | None:
    """Every name demangled by one c++filt run, or None where there is none or it fails."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return None
    try:
        r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True,
                           timeout=CXXFILT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError, UnicodeError):
        return None
    lines = r.stdout.splitlines()
    return lines if r.returncode == 0 and len(lines) == len(names) else None


def short_names(names: Iterable[str], *, use_cxxfilt: bool = True) -> dict[str, str]:
    """Each mangled name -> its short readable form; `use_cxxfilt=False` gives the pure reading."""
    unique = sorted(set(names))
    demangled = _cxxfilt(unique) if use_cxxfilt else None
    out = {}
    for i, name in enumerate(unique):
        whole = demangled[i] if demangled is not None else name
        out[name] = _elide(whole) if whole != name else _pure(name)
    return out


def readable(lines: list[str], *, use_cxxfilt: bool = True) -> list[str]:
    """The lines with every mangled name in them replaced by its short form."""
    found = {m for line in lines for m in MANGLED.findall(line)}
    if not found:
        return lines
    short = short_names(found, use_cxxfilt=use_cxxfilt)
    return [MANGLED.sub(lambda m: short[m.group(0)], line) for line in lines]


__all__ = ["MANGLED", "readable", "short_names"]
