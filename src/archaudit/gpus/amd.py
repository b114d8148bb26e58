"""AMD GPU targets: parsing, compatibility, and a catalog of real GPUs.

A target ID (LLVM AMDGPUUsage, "Target ID") is a processor followed by optional
target features, each ``name+`` (on) or ``name-`` (off)::

    gfx90a   gfx90a:xnack-   gfx942:sramecc+:xnack-   gfx11-generic

Only ``xnack`` and ``sramecc`` are target-ID features, and only on processors that
support them. The canonical spelling lists features in alphabetical order.

The data (processors, their EF_AMDGPU_MACH values and features, the generic
families, the GPU catalog) lives in ``data/amd.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from .cuda import package_match

FEATURES = ("sramecc", "xnack")  # alphabetical: the canonical order


@dataclass(frozen=True, slots=True)
class Processor:
    name: str
    mach: int  # EF_AMDGPU_MACH value in a code object's e_flags
    xnack: bool  # supports the xnack target feature
    sramecc: bool  # supports the sramecc target feature
    family: tuple[str, ...] = ()  # for gfx*-generic: the processors it runs on

    @property
    def generic(self) -> bool:
        return self.name.endswith("-generic")

    def supports(self, feature: str) -> bool:
        return bool(getattr(self, feature))


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed target ID. ``features`` maps a feature to True (+) / False (-);
    a feature left out is unspecified ("any")."""

    processor: str
    features: tuple[tuple[str, bool], ...] = ()

    def feature(self, name: str) -> bool | None:
        for n, v in self.features:
            if n == name:
                return v
        return None

    def __str__(self) -> str:
        return self.processor + "".join(f":{n}{'+' if v else '-'}" for n, v in self.features)


@dataclass(frozen=True, slots=True)
class GPU:
    name: str  # marketing name, e.g. "Instinct MI300X"
    target: str  # processor, e.g. "gfx942"
    aliases: tuple[str, ...] = ()  # other names users give it, e.g. "MI300X"
    # The xnack/sramecc settings the GPU runs with as it ships (a sourced row of data/amd.json),
    # () when not recorded; and the setting that changes one ("xnack": "HSA_XNACK=1").
    ships: tuple[tuple[str, bool], ...] = ()
    switch: tuple[tuple[str, str], ...] = ()

    @property
    def shipped(self) -> str | None:
        """The concrete target ID the GPU reports as it ships (gfx90a:sramecc+:xnack-), or None
        when a setting its processor has is not recorded."""
        p = processors()[self.target]
        have = dict(self.ships)
        if any(p.supports(n) and n not in have for n in FEATURES):
            return None
        return self.target + "".join(f":{n}{'+' if have[n] else '-'}" for n in FEATURES if p.supports(n))


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    text = resources.files("archaudit").joinpath("data/amd.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def rocm_rule(name: str) -> Any:
    """The value of one of ROCm's selection and loading rules (data/amd.json "rocm_rules", each
    with its source in ROCm's code; archaudit.gpus.rocm applies them)."""
    return _data()["rocm_rules"][name]["value"]


def hip_lookup(name: str) -> dict[str, Any]:
    """How one HIP runtime picks a bundle entry (data/amd.json "hip_lookups", each row with its
    source: the HIP code of those releases that compares the bundle id)."""
    row: dict[str, Any] = _data()["hip_lookups"][name]
    return row


def hip_runtimes() -> dict[str, dict[str, Any]]:
    """The HIP runtime each libamdhip64 SONAME is (data/amd.json "hip_runtimes"): the ROCm
    releases that shipped it and the lookup it is judged by."""
    rows: dict[str, dict[str, Any]] = _data()["hip_runtimes"]
    return rows


def hip_releases() -> dict[str, dict[str, Any]]:
    """ROCm releases judged by rules of their own rather than their SONAME's newest release
    (data/amd.json "hip_releases"): the HIP runtime they ship, its lookup and its loading rule."""
    rows: dict[str, dict[str, Any]] = _data()["hip_releases"]
    return rows


def hip_loading(name: str) -> dict[str, Any]:
    """How one release's loader accepts a selected code object (data/amd.json "hip_loadings")."""
    row: dict[str, Any] = _data()["hip_loadings"][name]
    return row


def package_rocm(name: str) -> str | None:
    """The ROCm release a package is named for (``cupy-rocm-4-0`` -> "4.0"; ``package_names`` in
    data/amd.json), or None for a name that says none. ``name`` is a distribution name, any
    spelling (normalised as PEP 503 does)."""
    m = package_match(name, _data()["package_names"]["patterns"].values())
    return f"{int(m.group('major'))}.{int(m.group('minor'))}" if m else None


@lru_cache(maxsize=1)
def processors() -> dict[str, Processor]:
    d = _data()
    fam = {g: row["members"] for g, row in d["generic_families"].items()}
    out = {}
    for name, v in d["processors"].items():
        out[name] = Processor(name, int(v["mach"], 16), v["xnack"], v["sramecc"], tuple(fam.get(name, ())))
    for g, members in fam.items():
        if g not in out or any(m not in out for m in members):
            raise RuntimeError(f"amd.json: generic family {g} names an unknown processor")
    return out


@lru_cache(maxsize=1)
def processor_by_mach() -> dict[int, Processor]:
    return {p.mach: p for p in processors().values()}


@lru_cache(maxsize=1)
def gpus() -> tuple[GPU, ...]:
    """Every GPU in ``data/amd.json``, in file order."""
    return tuple(
        GPU(
            g["name"],
            g["target"],
            tuple(g.get("aliases", ())),
            tuple(sorted(g.get("ships", {}).items())),
            tuple(sorted(g.get("switch", {}).items())),
        )
        for g in _data()["gpus"]
    )


_VENDOR_WORDS = ("amd", "ati")


def _tokens(name: str) -> tuple[str, ...]:
    words = [w for w in re.split(r"[\s_\-]+", name.lower()) if w]
    while len(words) > 1 and words[0] in _VENDOR_WORDS:
        words.pop(0)
    return tuple(words)


def lookup_gpu(name: str) -> list[GPU]:
    """Catalog GPUs matching a name, like ``arch.lookup_gpu`` for NVIDIA.

    Case, spaces, dashes and a leading "AMD" are ignored. A name matches a GPU's name or
    alias exactly, else as its trailing words ("MI300X" finds "Instinct MI300X", "RX 7900 XT"
    finds "Radeon RX 7900 XT" and not "... XTX"), else by the longest catalog name the query
    starts with (a ROCm marketing name such as "AMD Radeon PRO W7900 Dual Slot"). A bare
    processor ("gfx942") gives every catalog GPU built on it; a target ID with features, or
    anything unknown, gives [].
    """
    words = _tokens(name)
    if not words:
        return []
    key = "".join(words)
    if key in processors():
        return [g for g in gpus() if g.target == key]
    names = {g: [_tokens(n) for n in (g.name, *g.aliases)] for g in gpus()}
    exact = [g for g, spellings in names.items() if any("".join(t) == key for t in spellings)]
    if exact:
        return exact
    return _by_tail(names, words) or _by_head(names, words)


def _by_tail(names: dict[GPU, list[tuple[str, ...]]], words: tuple[str, ...]) -> list[GPU]:
    """GPUs a spelling of which ends with the query's words ("MI300X": "Instinct MI300X")."""
    return [
        g for g, spellings in names.items() if any(len(t) > len(words) and t[-len(words) :] == words for t in spellings)
    ]


def _by_head(names: dict[GPU, list[tuple[str, ...]]], words: tuple[str, ...]) -> list[GPU]:
    """GPUs of the longest spelling the query starts with (a ROCm marketing name)."""
    heads = [
        (len(t), g) for g, spellings in names.items() for t in spellings if len(t) < len(words) and words[: len(t)] == t
    ]
    longest = max((n for n, _ in heads), default=0)
    return list(dict.fromkeys(g for n, g in heads if n == longest))


_FEATURE_RE = re.compile(r"^([a-z0-9]+)([+-])$")


@lru_cache(maxsize=4096)
def parse_target(text: str) -> Target:
    """Parse a target ID such as ``gfx942:sramecc+:xnack-``. ValueError on an unknown
    processor, an unknown or repeated feature, or a feature the processor lacks."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty AMD target")
    parts = text.strip().split(":")
    name = parts[0].lower()
    proc = processors().get(name)
    if proc is None:
        raise ValueError(f"unknown AMD processor {parts[0]!r} in target {text!r}")
    feats: dict[str, bool] = {}
    for p in parts[1:]:
        m = _FEATURE_RE.match(p.strip().lower())
        if not m or m.group(1) not in FEATURES:
            raise ValueError(f"bad target feature {p!r} in {text!r} (expected xnack+/- or sramecc+/-)")
        f = m.group(1)
        if f in feats:
            raise ValueError(f"feature {f} given twice in {text!r}")
        if not proc.supports(f):
            raise ValueError(f"{name} does not support the {f} feature ({text!r})")
        feats[f] = m.group(2) == "+"
    return Target(name, tuple(sorted(feats.items())))


def normalise(text: str) -> str:
    """The canonical spelling of a target ID."""
    return str(parse_target(text))


def is_generic(target: str) -> bool:
    return parse_target(target).processor.endswith("-generic")


def family(target: str) -> tuple[str, ...]:
    """The processors a target's code runs on by processor alone: itself, or for a
    gfx*-generic target its listed family."""
    p = processors()[parse_target(target).processor]
    return p.family if p.generic else (p.name,)


def runs_on(code_target: str, gpu: str) -> bool:
    """Whether code built for ``code_target`` is meant to run on a GPU described by ``gpu``
    (a processor, optionally with the GPU's feature settings, e.g. ``gfx90a:xnack+``), as LLVM
    defines targets. What ROCm actually selects and loads from a bundle is stricter (a generic
    entry is not selected for a GPU): archaudit.gpus.rocm judges that.

    - the processor must match exactly, or the code is gfx*-generic and the GPU's
      processor is in that generic family;
    - a feature the code leaves unspecified runs with either setting;
    - a feature the code specifies must equal the GPU's setting when the GPU's
      setting is given (an unspecified GPU setting does not exclude it).
    """
    code = parse_target(code_target)
    dev = parse_target(gpu)
    if processors()[dev.processor].generic:
        raise ValueError(f"{gpu!r} is a generic target, not a GPU")
    if dev.processor not in family(code.processor):
        return False
    for name, want in code.features:
        have = dev.feature(name)
        if have is not None and have != want:
            return False
    return True


# --- claims in AMD spellings -------------------------------------------------

_ENV_NAMES = (
    "PYTORCH_ROCM_ARCH",
    "AMDGPU_TARGETS",
    "GPU_TARGETS",
    "HIP_ARCHITECTURES",
    "CMAKE_HIP_ARCHITECTURES",
    "GPU_ARCHS",
)
_FLAG_RE = re.compile(r"^--?(offload-arch|amdgpu-target|cuda-gpu-arch)(?:=(.*))?$")


def parse_amd_claim(text: str) -> list[str]:
    """Parse a claimed AMD target list into canonical target IDs, in order, without
    duplicates. Accepts:

    - ``PYTORCH_ROCM_ARCH`` style: ``gfx90a;gfx942``
    - ``AMDGPU_TARGETS`` / ``GPU_TARGETS``: ``gfx90a;gfx1100`` or ``gfx90a,gfx1100``
      (optionally written as ``NAME=value``, quoted)
    - compiler flags: ``--offload-arch=gfx90a:xnack- --offload-arch=gfx942`` (also
      ``--offload-arch gfx90a``, comma lists, and the older ``--amdgpu-target=``)

    Raises ValueError with a clear message on anything else (an unknown processor, a
    bad feature, ``native``, an empty list).
    """
    if not isinstance(text, str):
        raise ValueError("AMD target claim must be a string")
    s = text.strip()
    if not s:
        raise ValueError("empty AMD target claim")
    out = _canonical_targets(_claim_items(s.split(), text), text)
    if not out:
        raise ValueError(f"no AMD targets in claim {text!r}")
    return out


def _claim_items(tokens: list[str], text: str) -> list[str]:
    """The raw target names of a claim's tokens: flag values and setting values, in order."""
    items: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i].strip("'\"")
        m = _FLAG_RE.match(tok)
        if m:
            val = m.group(2)
            if val is None:
                if i + 1 >= len(tokens):
                    raise ValueError(f"{tok} without a value in {text!r}")
                i += 1
                val = tokens[i]
            if not val.strip("'\""):
                raise ValueError(f"{tok.split('=')[0]} with an empty value in {text!r}")
            items.extend(_split_list(val.strip("'\""), text))
        elif tok.startswith("-") and not tok.startswith("-D"):
            raise ValueError(f"unexpected flag {tok!r} in AMD target claim {text!r}")
        else:
            items.extend(_split_list(_setting_value(tok, text), text))
        i += 1
    return items


def _setting_value(tok: str, text: str) -> str:
    """The value of a ``NAME=value`` / ``-DNAME=value`` token, or the bare token itself."""
    if tok.startswith("-D") and "=" not in tok:
        raise ValueError(f"unexpected flag {tok!r} in AMD target claim {text!r}")
    if "=" not in tok:
        return tok
    name, _, val = tok.partition("=")
    name = name.strip().removeprefix("-D").split(":")[0]
    if name.upper() not in _ENV_NAMES:
        raise ValueError(f"unknown setting {name!r} in AMD target claim {text!r}")
    value = val.strip("'\"")
    if not value:
        raise ValueError(f"{name} is empty in {text!r}")
    return value


def _canonical_targets(items: list[str], text: str) -> list[str]:
    """Canonical target IDs of the raw names, in order, without duplicates."""
    out: list[str] = []
    for it in items:
        low = it.lower()
        if low in ("native", "all", "default"):
            raise ValueError(f"{it!r} in {text!r} names no fixed target list; claim the gfx targets explicitly")
        try:
            t = normalise(it)
        except ValueError as e:
            raise ValueError(f"AMD target claim {text!r}: {e}") from None
        if t not in out:
            out.append(t)
    return out


def _split_list(value: str, text: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"[;,]", value)]
    if len(parts) > 1 and not parts[-1]:
        parts.pop()  # a trailing separator, as CMake lists sometimes have
    if any(not p for p in parts):
        raise ValueError(f"empty entry in AMD target list {value!r} ({text!r})")
    return parts


__all__ = [
    "family",
    "FEATURES",
    "GPU",
    "gpus",
    "hip_loading",
    "hip_lookup",
    "hip_releases",
    "hip_runtimes",
    "is_generic",
    "lookup_gpu",
    "normalise",
    "package_rocm",
    "parse_amd_claim",
    "parse_target",
    "processor_by_mach",
    "processors",
    "rocm_rule",
    "runs_on",
    "Target",
]
