"""What a test tier downloads, without downloading it: list the wheels its tests ask tests/wheels.py
for, then sum their sizes as the simple index lists them (one request per project).

    ARCHAUDIT_WHEELS_LIST=wanted.jsonl python -m pytest -q                 # the fast tier, listing only
    ARCHAUDIT_WHEELS_LIST=wheels.jsonl python -m pytest -q -m "slow and not gpu"  # the real-wheel tier
    python tools/test_wheel_sizes.py wanted.jsonl [--index https://pypi.org/simple/] [--json]

Under ARCHAUDIT_WHEELS_LIST every test that asks for a wheel writes one line and is skipped, so
the listing run downloads nothing (the other tests run as usual). A wheel the index does not list
(a local build such as torch's `+cpu`, from another index) is sized from the wheel cache when it is
there, else counted as unknown and named.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from archaudit.index import sources  # noqa: E402
from archaudit.index.targets import PYPI, choose, platform_tags  # noqa: E402


def wanted(path: Path) -> dict[tuple[str, str, str, str | None], list[str]]:
    """Each wheel asked for (name, version, platform, file name) and the tests that asked."""
    out: dict[tuple[str, str, str, str | None], list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            w = json.loads(line)
            out.setdefault((w["name"], w["version"], w["platform"], w["filename"]), []).append(w["test"])
    return out


def size_of(
    index: str, key: tuple[str, str, str, str | None], pages: dict[str, list[sources.WheelRef]]
) -> tuple[str, int | None]:
    """The file pip would fetch for this wish and its size on the index (None: not listed)."""
    import wheels

    name, version, platform, filename = key
    if name not in pages:
        try:
            pages[name] = sources.project_files(index, name)
        except Exception as e:  # noqa: BLE001 - a project the index lacks is reported, not fatal
            print(f"  {name}: {e}", file=sys.stderr)
            pages[name] = []
    refs = pages[name]
    if filename is None:
        tags = platform_tags(None if platform == wheels.HERE else platform)
        chosen = choose(refs, Requirement(f"{name}=={version}"), tags)
        ref = None if isinstance(chosen, str) else chosen
    else:
        ref = next((r for r in refs if r.file == filename), None)
    if ref is not None and ref.size is not None:
        return ref.file, ref.size
    cached = sorted(wheels.cache_dir().glob(f"{(filename or name.replace('-', '_') + '-' + version)}*"))
    if cached:
        return cached[-1].name, cached[-1].stat().st_size
    return filename or f"{name}=={version} ({platform})", None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("listing", type=Path, help="the ARCHAUDIT_WHEELS_LIST file of a listing run")
    ap.add_argument("--index", default=PYPI, help="the simple index to size wheels on (default PyPI)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    pages: dict[str, list[sources.WheelRef]] = {}
    by_file: dict[str, dict[str, Any]] = {}  # one row per file, however many wishes name it
    for key, tests in sorted(wanted(args.listing).items(), key=lambda kv: tuple(x or "" for x in kv[0])):
        file, size = size_of(args.index, key, pages)
        row = by_file.setdefault(file, {"file": file, "size": size, "tests": 0, "first_test": tests[0]})
        row["tests"] += len(tests)
    rows = list(by_file.values())
    known = sum(r["size"] or 0 for r in rows)
    unknown = [r["file"] for r in rows if r["size"] is None]
    if args.json:
        print(json.dumps({"wheels": rows, "total_bytes": known, "unknown": unknown}, indent=2))
        return 0
    for r in sorted(rows, key=lambda r: -(r["size"] or 0)):
        size = f"{r['size'] / 1e6:9.1f} MB" if r["size"] is not None else "  unknown"
        print(f"{size}  {r['file']}  ({r['tests']} test(s), e.g. {r['first_test']})")
    print(f"{len(rows)} wheels, {known / 1e6:.1f} MB" + (f", {len(unknown)} of unknown size" if unknown else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
