"""The benchmark scripts still reach what they time: each is imported (not run: they need wheels,
a GPU or minutes), and the archaudit names each one calls by attribute exist, so a moved function
fails here rather than on the GPU machine (bench_trace.py once called a sweep step that had moved)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("bench_*.py"))


def _attribute_calls(tree: ast.AST, module: str) -> set[str]:
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == module
    }


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:  # a name inside a module, not a submodule
        return False


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_a_benchmark_reaches_the_archaudit_names_it_uses(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("archaudit"):
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for local, dotted in imported.items():
        parent, _, name = dotted.rpartition(".")
        owner = importlib.import_module(parent)
        assert hasattr(owner, name) or _is_module(dotted), f"{path.name}: {dotted} is gone"
        if not _is_module(dotted):
            continue
        module = importlib.import_module(dotted)
        missing = sorted(a for a in _attribute_calls(tree, local) if not hasattr(module, a))
        assert not missing, f"{path.name}: {dotted} has no {missing}"
