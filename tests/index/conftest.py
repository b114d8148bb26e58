"""Fixtures of the index tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import demo_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo 1.0, 2.0 and 3.0 (unreadable) and the example wheel (helpers.demo_corpus)."""
    return demo_corpus(tmp_path_factory.mktemp("wheels"))
