#!/usr/bin/env python3
"""Write the documents generated from archaudit's finding-code table (findings.py CODES):
docs/codes.md and the README's "Finding codes" table (archaudit.report.codes_doc).

    python tools/gen_docs.py           # rewrite them
    python tools/gen_docs.py --check   # exit 1, naming each, when one is stale

Run it after changing a code's CodeInfo; tests/report/test_codes_doc.py runs the check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archaudit.report.codes_doc import GENERATED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a document is stale")
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the repository root (default: this script's)",
    )
    args = parser.parse_args(argv)
    stale = []
    for rel, render in GENERATED.items():
        path = args.root / rel
        old = path.read_text(encoding="utf-8")
        try:
            new = render(old)
        except ValueError as e:
            print(f"{rel}: {e}", file=sys.stderr)
            return 2
        if new == old:
            continue
        stale.append(rel)
        if not args.check:
            path.write_text(new, encoding="utf-8")
    verb = "stale (run python tools/gen_docs.py)" if args.check else "rewritten"
    for rel in stale:
        print(f"{rel}: {verb}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
