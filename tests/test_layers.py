"""The import contract (ARCHITECTURE.md "Layers"), checked over every import statement in src/.

Every `import` and `from ... import` in every module, at module level, inside a function or
under TYPE_CHECKING, parsed with `ast`, names a module of archaudit or none. Each module sits in
one layer, top first:

    entry (the public API archaudit/__init__.py, every __main__)
    cli -> smoke, index -> report -> core -> judge -> read -> claims -> gpus -> vocabulary

An import may only go down, or sideways within its own package (judge.rules -> judge.facts,
model -> findings); smoke and index share a layer and never import each other. No import
cycle exists between modules at all, function-level imports counted. The one name a lower
module may take from the package root is `__version__`, a constant there (the root imports
nothing of archaudit at module level, so reading it loads nothing above).

At run time, `import archaudit.judge` (every module under it) and `archaudit.gpus` load no
reader and no compression library, and no reader loads the judge, the report or the CLI.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import archaudit.gpus
import archaudit.judge

SRC = Path(__file__).resolve().parents[1] / "src"

# Top first. A module's layer is its package's (archaudit.<package>.x) or, at the top of the
# package, its own name's; __main__ modules and the package root are entry points.
ENTRY = 9
RANK = {"cli": 8, "smoke": 7, "index": 7, "report": 6, "core": 5, "judge": 4, "read": 3, "claims": 2, "gpus": 1}
VOCABULARY = {"model", "findings", "codes", "errors", "config", "printable", "suggest", "_speedups"}  # rank 0
ROOT_CONSTANTS = {"__version__"}  # names a lower module may take from archaudit/__init__.py
# smoke's records (Row, SmokeReport, PASS/FAIL/SKIP) are vocabulary where they stand: plain frozen
# data that imports nothing, rendered by report/ and imported by probe plugins by this path.
RECORDS = {"archaudit.smoke.report"}


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of src/archaudit: dotted name -> (file, is a package)."""
    out = {}
    for path in sorted((SRC / "archaudit").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    out["archaudit._speedups"] = (SRC / "archaudit" / "_speedups.c", False)  # the C extension
    return out


def _target(name: str, known: Mapping[str, object]) -> str | None:
    """The archaudit module an imported dotted name loads (its longest known prefix)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(known: Mapping[str, tuple[Path, bool]]) -> list[tuple[str, str, int]]:
    """(importer, imported module, line) for every import statement of archaudit's modules."""
    edges = []
    for mod, (path, package) in known.items():
        if path.suffix != ".py":
            continue
        here = mod if package else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for a in node.names:
                    if source == "archaudit" and a.name in ROOT_CONSTANTS:
                        names.append("archaudit.findings")  # a constant of the root: vocabulary
                    elif f"{source}.{a.name}" in known:
                        names.append(f"{source}.{a.name}")  # a module: `from . import rules`
                    else:
                        names.append(source)  # a name defined in the module `source`
            for name in names:
                target = _target(name, known) if name.split(".")[0] == "archaudit" else None
                if target is not None and target != mod:
                    edges.append((mod, target, node.lineno))
    return edges


def layer(mod: str) -> tuple[int, str]:
    """(rank, package) of a module; KeyError for a module no layer holds (place it here and in
    ARCHITECTURE.md)."""
    parts = mod.split(".")
    if mod == "archaudit" or parts[-1] == "__main__":
        return ENTRY, mod
    if parts[1] in VOCABULARY or mod in RECORDS:
        return 0, "archaudit"
    return RANK[parts[1]], parts[1]


def upward(edges: Iterable[tuple[str, str, int]]) -> list[str]:
    """Every import that goes up a layer, or sideways into another package."""
    bad = []
    for src, dst, line in edges:
        (rs, ps), (rd, pd) = layer(src), layer(dst)
        if rd > rs or (rd == rs and ps != pd):
            bad.append(f"{src}:{line} imports {dst}")
    return bad


def cycles(edges: Iterable[tuple[str, str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for src, dst, _ in edges:
        graph.setdefault(src, set()).add(dst)
        graph.setdefault(dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


KNOWN = modules()
EDGES = imports(KNOWN)


def test_every_module_has_a_layer():
    unplaced = []
    for mod in KNOWN:
        try:
            layer(mod)
        except KeyError:
            unplaced.append(mod)
    assert unplaced == []
    assert len(EDGES) > 300  # the parse saw the imports it speaks of


def test_every_import_goes_down_or_sideways_within_its_package():
    assert upward(EDGES) == []


def test_the_report_asks_no_runtime_model_for_a_verdict():
    """A Report carries every verdict it shows (the judge computed the AMD ones too): report/
    imports no runtime model of gpus/ (selection, prediction, ROCm's loading), only names."""
    models = {"archaudit.gpus.rocm", "archaudit.gpus.selection", "archaudit.gpus.predict"}
    asked = [f"{src}:{line}" for src, dst, line in EDGES if src.startswith("archaudit.report.") and dst in models]
    assert asked == []
    assert any(src == "archaudit.judge.audit" and dst == "archaudit.gpus.rocm" for src, dst, _ in EDGES)


def test_no_import_cycle_between_modules():
    assert cycles(EDGES) == []


def test_the_root_imports_nothing_of_archaudit_at_module_level():
    """What makes `from .. import __version__` free: the root's own imports are all deferred."""
    tree = ast.parse((SRC / "archaudit" / "__init__.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level]
    assert top == []


def test_the_checks_fail_on_a_planted_violation():
    """The contract can fail: an upward import, a sideways one across packages and a cycle."""
    assert upward([("archaudit.gpus.cuda", "archaudit.report.view", 1)]) == [
        "archaudit.gpus.cuda:1 imports archaudit.report.view"
    ]
    assert upward([("archaudit.smoke.runner", "archaudit.index.store", 7)]) != []
    assert (
        upward([("archaudit.judge.diff", "archaudit.gpus.drivers", 3), ("archaudit.model", "archaudit.findings", 1)])
        == []
    )
    assert cycles(
        [
            ("archaudit.smoke.probes", "archaudit.smoke.worker", 1),
            ("archaudit.smoke.worker", "archaudit.smoke.probes", 2),
        ]
    ) == [["archaudit.smoke.probes", "archaudit.smoke.worker"]]


# ---- at run time: what importing a layer loads -------------------------------------------------

PURE = sorted(
    [f"archaudit.judge.{m.name}" for m in pkgutil.iter_modules(archaudit.judge.__path__)]
    + [f"archaudit.gpus.{m.name}" for m in pkgutil.iter_modules(archaudit.gpus.__path__)]
)
FORBIDDEN = ("archaudit.read", "zstandard", "lz4", "isal", "ctypes")


def loaded_after(*names: str) -> list[str]:
    """The modules a fresh interpreter holds after importing `names`."""
    code = (
        f"import sys\nfor m in {list(names)!r}:\n    __import__(m)\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_importing_the_judge_and_gpus_loads_no_reader_and_no_compression_library():
    assert {"archaudit.judge.rules", "archaudit.judge.audit", "archaudit.gpus.cuda", "archaudit.gpus.rocm"} <= set(PURE)
    loaded = loaded_after("archaudit.judge", "archaudit.gpus", *PURE)
    bad = [m for m in loaded if m.split(".")[0] in FORBIDDEN or m.startswith(FORBIDDEN[0])]
    assert bad == []
    assert "archaudit.judge.rules" in loaded  # the check saw the modules it speaks of


def test_a_reader_imports_no_judge_and_no_report():
    import archaudit.read

    readers = sorted(f"archaudit.read.{m.name}" for m in pkgutil.iter_modules(archaudit.read.__path__))
    loaded = loaded_after(*readers)
    assert "archaudit.read.scan" in loaded
    assert [m for m in loaded if m.startswith(("archaudit.judge", "archaudit.report", "archaudit.cli"))] == []
