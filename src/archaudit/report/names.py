"""Mangled kernel names made short for people: text only (JSON keeps every name as the binary has it).

A cuBLAS kernel's Itanium name can be 2.5 KB of template arguments. The default text shows it as
its qualified name with the template arguments elided (`cutlass::Kernel2<…>`), demangled by
`c++filt` where the machine has one and by a pure reading of the name's prefix where it has not
(or where `c++filt` fails): a missing demangler never fails a check.

Bounded per name and per report (docs/threat-model.md): a name longer than MAX_MANGLED is not
demangled; one c++filt run per report gets at most MAX_CXXFILT_NAMES names and MAX_CXXFILT_INPUT
bytes of them, has CXXFILT_SECONDS, and its output is read to at most MAX_CXXFILT_OUTPUT bytes
(more: the pure reading for every name); a short form longer than MAX_SHOWN is shown cut, with
the start of its mangled form, so a name that demangles to something huge is never shown whole.
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
MAX_MANGLED = 8192  # a longer mangled name is not demangled (cuBLAS's longest are about 2.5 KB)
MAX_CXXFILT_NAMES = 20_000  # names per report given to c++filt; beyond, the pure reading
MAX_CXXFILT_INPUT = 8 << 20  # bytes of names per report given to c++filt
MAX_CXXFILT_OUTPUT = 32 << 20  # bytes of c++filt's answer read; beyond, the pure reading for all
MAX_SHOWN = 200  # characters of a short form shown; a longer one is cut and its mangled form named
MANGLED_SHOWN = 40  # characters of the mangled form shown beside a cut short form
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
        return name if len(name) <= FALLBACK_CHARS else name[: FALLBACK_CHARS - 1] + "…"
    encoded = "".join(f"{len(part)}{part}" for part in base.split("::"))
    at = name.find(encoded)
    return base + "<…>" if at >= 0 and name[at + len(encoded) : at + len(encoded) + 1] == "I" else base


def _cxxfilt(names: list[str]) -> list[str] | None:
    """Every name demangled by one c++filt run, or None where there is none, it fails, or its
    answer is longer than MAX_CXXFILT_OUTPUT bytes or slower than CXXFILT_SECONDS."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return None
    import tempfile

    try:
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen([tool], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.DEVNULL)
            try:
                proc.communicate(("\n".join(names) + "\n").encode(), timeout=CXXFILT_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return None
            if proc.returncode != 0 or out.tell() > MAX_CXXFILT_OUTPUT:
                return None
            out.seek(0)
            text = out.read(MAX_CXXFILT_OUTPUT + 1).decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    lines = text.splitlines()
    return lines if len(lines) == len(names) else None


def _shown(short: str, name: str) -> str:
    """A short form as shown: cut at MAX_SHOWN characters, with the start of its mangled form."""
    if len(short) <= MAX_SHOWN:
        return short
    mangled = name if len(name) <= MANGLED_SHOWN else name[: MANGLED_SHOWN - 1] + "…"
    return f"{short[: MAX_SHOWN - 1]}… [mangled {mangled}, {len(name)} chars]"


def _for_cxxfilt(unique: list[str]) -> list[str]:
    """The names one c++filt run gets: short enough each, and within the report's bounds."""
    out: list[str] = []
    total = 0
    for name in unique:
        if len(name) > MAX_MANGLED or "\n" in name:
            continue
        total += len(name) + 1
        if len(out) >= MAX_CXXFILT_NAMES or total > MAX_CXXFILT_INPUT:
            break
        out.append(name)
    return out


def short_names(names: Iterable[str], *, use_cxxfilt: bool = True) -> dict[str, str]:
    """Each mangled name -> its short readable form; `use_cxxfilt=False` gives the pure reading."""
    unique = sorted(set(names))
    asked = _for_cxxfilt(unique) if use_cxxfilt else []
    answers = _cxxfilt(asked) if asked else None
    demangled = dict(zip(asked, answers)) if answers is not None else {}
    out = {}
    for name in unique:
        whole = demangled.get(name, name)
        if len(name) > MAX_MANGLED:
            short = name[: FALLBACK_CHARS - 1] + "…"
        else:
            short = _elide(whole) if whole != name else _pure(name)
        out[name] = _shown(short, name)
    return out


def readable(lines: list[str], *, use_cxxfilt: bool = True) -> list[str]:
    """The lines with every mangled name in them replaced by its short form."""
    found = {m for line in lines for m in MANGLED.findall(line)}
    if not found:
        return lines
    short = short_names(found, use_cxxfilt=use_cxxfilt)
    return [MANGLED.sub(lambda m: short[m.group(0)], line) for line in lines]


__all__ = ["MANGLED", "readable", "short_names"]
