"""Summarise a finished ``mutmut run``: the score per module and every surviving mutant, sorted
into those that only change a message (a string literal, which no verdict reads) and those that
change behaviour, which must be killed by a test or explained as equivalent in docs/mutation.md.

Usage: ``mutmut run`` then ``python tools/mutation_report.py [--markdown FILE]``.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

STATUS = {
    0: "survived",
    1: "killed",
    3: "killed",
    -24: "timeout",
    24: "timeout",
    36: "timeout",
    -11: "killed",
    33: "no tests",
    34: "skipped",
    35: "suspicious",
    37: "caught by type check",
    None: "not checked",
    5: "no tests",
    152: "timeout",
    255: "timeout",
}


def _status(code: int | None) -> str:
    return STATUS.get(code, "killed" if code else "survived")


def load(root: Path) -> dict[str, str]:
    """mutant name -> status, from mutmut's per-file ``.meta`` records."""
    out: dict[str, str] = {}
    for meta in sorted((root / "mutants").rglob("*.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        for name, code in data.get("exit_code_by_key", {}).items():
            out[name] = _status(code)
    return out


def _tokens(line: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


_LITERAL = (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1))
_FINDING_CODE = re.compile(r"""[rbuRBU]?["']{1,3}[A-Z]\d{3}["']{1,3}""")


def _code_without_strings(line: str) -> str:
    """The line with every string literal blanked, to tell message-only edits from logic edits."""
    toks = _tokens(line)
    if toks is None:
        return line.strip()
    parts = []
    for t in toks:
        if t.type in _LITERAL:
            parts.append("''")
        elif t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
            parts.append(t.string)
    return " ".join(parts)


def _literals(line: str) -> list[str]:
    return [t.string for t in _tokens(line) or [] if t.type in _LITERAL]


def _codes_in(line: str) -> list[str]:
    """The finding codes a line names (``code="E002"``), which a raise must keep to be message-only."""
    return [x for x in _literals(line) if _FINDING_CODE.fullmatch(x)] + re.findall(r"\bcode=\w+", line)


def _only_prose_changed(a: str, b: str) -> bool:
    """Every string literal the mutant changed is prose (holds a space, or is an f-string's text)
    and none is a finding code: a changed "E002", ".so" or "host" is compared or reported, not read."""
    changed = [x for x, y in zip(_literals(a), _literals(b)) if x != y]
    if len(_literals(a)) != len(_literals(b)):
        return False
    return all(not _FINDING_CODE.fullmatch(x) and (" " in x or x[:1] not in "\"'") for x in changed)


def diff_of(name: str) -> str:
    return subprocess.run([sys.executable, "-m", "mutmut", "show", name], capture_output=True, text=True).stdout


_RAISE = re.compile(r"^\s*raise (\w+)\(")


def _same_raise(a: str, b: str) -> bool:
    """Both lines raise the same exception class: only what it says differs."""
    ma, mb = _RAISE.match(a), _RAISE.match(b)
    return bool(ma and mb and ma.group(1) == mb.group(1))


def classify(diff: str) -> str:
    minus = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    if (
        minus
        and len(minus) == len(plus)
        and all(
            (_code_without_strings(a) == _code_without_strings(b) and _only_prose_changed(a, b))
            or (_same_raise(a, b) and _codes_in(a) == _codes_in(b))
            for a, b in zip(minus, plus)
        )
    ):
        return "message"
    return "behaviour"


def module_of(name: str) -> str:
    return re.sub(r"\.x[_ǁ].*$", "", name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path.cwd())
    ap.add_argument("--markdown", type=Path, help="write the report as Markdown here")
    ap.add_argument("--module", action="append", help="only this module (e.g. zipread); may be repeated")
    args = ap.parse_args()
    statuses = load(args.root)
    if not statuses:
        print("no mutmut results here: run `mutmut run` first", file=sys.stderr)
        return 2
    per_module: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name, st in statuses.items():
        per_module[module_of(name)][st] += 1
    if args.module:
        statuses = {n: st for n, st in statuses.items() if module_of(n).split(".")[-1] in args.module}
    # A mutant no test runs is a survivor too: nothing would notice the change.
    survivors = sorted(n for n, st in statuses.items() if st in ("survived", "no tests"))
    kinds = {n: classify(diff_of(n)) for n in survivors}
    lines = [
        "| module | mutants | killed | caught by type check | timeout | survived (message only) "
        "| survived (behaviour) | no test runs it | score |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mod in sorted(per_module):
        c = per_module[mod]
        total = sum(c.values())
        msg = sum(1 for n in survivors if module_of(n) == mod and kinds[n] == "message")
        beh = sum(1 for n in survivors if module_of(n) == mod and kinds[n] == "behaviour")
        caught = c["killed"] + c["timeout"] + c["caught by type check"]
        judged = caught + c["survived"] + c["no tests"]
        score = caught / judged if judged else 0.0
        lines.append(
            f"| `{mod}` | {total} | {c['killed']} | {c['caught by type check']} | {c['timeout']} "
            f"| {msg} | {beh} | {c['no tests']} | {score:.1%} |"
        )
    lines += ["", "Surviving mutants that change behaviour:", ""]
    for n in survivors:
        if kinds[n] == "behaviour":
            body = [ln for ln in diff_of(n).splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")]
            untested = " (no test runs it)" if statuses[n] == "no tests" else ""
            lines.append(f"- `{n}`{untested}: `{' / '.join(s.strip() for s in body)[:200]}`")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
