"""Fixtures of the index tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from archaudit.core import example_wheel
from helpers import CUDA_BIN as FIXTURES, DEMO_LIB as LIB, make_wheel


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo 1.0 (sm_75..sm_120 + PTX), 2.0 (sm_80 only: Turing lost), 3.0 (truncated: unreadable),
    and the example wheel."""
    d = tmp_path_factory.mktemp("wheels")
    make_wheel(d, "demo", "1.0", {LIB: FIXTURES / "lib_multi.so"}, padding=2_000_000)
    make_wheel(d, "demo", "2.0", {LIB: FIXTURES / "lib_sm80.so"}, padding=2_000_000)
    good = make_wheel(d, "demo", "3.0", {LIB: FIXTURES / "lib_sm80.so"})
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])
    ex = Path(example_wheel())
    (d / ex.name).write_bytes(ex.read_bytes())
    return d
