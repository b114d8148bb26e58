"""'did you mean' for a word that names nothing known (a GPU, a config key, a subcommand), as
pip, ruff and git suggest: the closest known spellings by difflib's ratio, case and spacing
ignored."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def _key(word: str) -> str:
    return "".join(word.lower().replace("-", " ").replace("_", " ").split())


def close_matches(word: str, known: Iterable[str], n: int = 3, cutoff: float = 0.75) -> list[str]:
    """Up to `n` known spellings close to `word`, the closest first; [] when none is close."""
    by_key: dict[str, str] = {}
    for k in known:
        by_key.setdefault(_key(k), k)
    return [by_key[k] for k in difflib.get_close_matches(_key(word), list(by_key), n=n, cutoff=cutoff)]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """ "; did you mean 'x'?" (or "'x' or 'y'"), or "" when nothing known is close."""
    found = close_matches(word, known)
    if not found:
        return ""
    return "; did you mean " + " or ".join(f"'{f}'" for f in found) + "?"


__all__ = ["did_you_mean"]
